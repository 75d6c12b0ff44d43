"""The 7-task STS evaluation as this project runs it (distinct texts once, length-sorted) against a naive per-task loop.

    .venv/bin/python bench/speed/eval_dedup.py [--repeats 3] [--max-pairs N] [--threads 2] [--batch-size 64] [--max-length 512]

Tasks: STS12-16, STS-B test and SICK-R test (``aoe.evaluate.sts.TASKS``), each read from the
data mirror by ``aoe.data.sts.read_sts(resolve_downstream_root(mirror), dataset, "test")``;
``--max-pairs N`` keeps a seeded subset of each task (``aoe.evaluate.sts.cap_pairs``, seed 0,
file order kept), for smoke tests. Model: the offline MiniLM-L6 (``_common.backbone_dir()``)
through ``aoe.model.encoder.Encoder(backbone, pooling=--pooling)`` (default ``cls``, the pooling the
pipeline's evaluation of a pretrained BERT backbone and bench/speed/embed_throughput.py use), batch
``--batch-size`` (64), ``--max-length`` (512, the evaluation's default), ``--threads`` torch
threads (2), CPU, float32.

* ``project``: ``aoe.evaluate.sts.evaluate_sts(encode, tables)`` with ``encode`` =
  ``Encoder.encode(texts, batch_size, max_length)``: the distinct texts of all seven tasks
  embedded once, in batches of similar length (longest first), then the SentEval cosine per
  pair and Spearman. The pipeline's on-disk embedding cache is not used (nothing is cached).
* ``naive``: SimCSE's SentEval loop (``senteval/sts.py`` ``STSEval.run``): for each task, for
  each subset, batches of ``--batch-size`` pairs; each batch's sentence1 texts and its
  sentence2 texts are embedded as two batches (no deduplication, within or across tasks),
  then the cosine of each pair (``cosine_rows``, SentEval's per-row formula) and Spearman over
  the task's concatenated subsets (``sts_scores``, the same scoring as the project's).
  ``--naive-order file`` (default) takes the pairs in file order (no length sorting);
  ``--naive-order senteval`` sorts each subset's pairs as SentEval's loaders actually do, by
  (words in sentence1, words in sentence2, gold score), which cuts padding.
  The embedding of a batch is exactly ``Encoder.encode``'s per-batch step (``tokenize_texts``,
  ``tokenizer.pad``, ``aoe.model.encoder.embed``, float32) on the same Encoder.

Both ways use the same embedding function, so they differ only in which texts share a batch:
a text padded to another batch length gets a slightly different float32 embedding (padding
is masked, but the matmul shapes change), which can move a Spearman by float noise. The JSON
records, from repeat 0 of each way, the largest |difference| of the 7 Spearman numbers and of
the per-pair cosines.

Each run is a fresh process; model loading and reading the tables are outside the clock;
runs alternate (project, naive, project, ...). Recorded: wall seconds of the whole
evaluation (embedding + scoring), texts embedded (project: distinct; naive: two per pair),
tokens through the model including padding (computed after the clock stops), load averages
before and after every run. JSON: bench/out/eval_dedup.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402


def _tables(args) -> dict:
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.sts import read_sts
    from aoe.evaluate.sts import TASKS, cap_pairs

    downstream = resolve_downstream_root(args.mirror)
    if downstream is None:
        raise SystemExit(f"no SentEval downstream folder under {args.mirror}: set AOE_DATA_MIRROR or --mirror")
    tables = {task: read_sts(downstream, dataset, "test") for task, dataset in TASKS.items()}
    if args.max_pairs is not None:
        tables = {t: cap_pairs(df, args.max_pairs) for t, df in tables.items()}
    return tables


def _padded_tokens(lengths: list[int], batches: list[list[int]]) -> tuple[int, int]:
    """(positions through the model incl. padding, real tokens) of batches of text indices."""
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return padded, sum(lengths[i] for b in batches for i in b)


def _naive_order(sub, how: str) -> list[int]:
    """Row positions of one subset in the naive loop's order."""
    n = len(sub)
    if how == "file":
        return list(range(n))
    s1, s2, gs = sub["sentence1"].tolist(), sub["sentence2"].tolist(), sub["score"].tolist()
    return sorted(range(n), key=lambda i: (len(s1[i].split()), len(s2[i].split()), gs[i]))


def _worker_setup(args):
    import torch

    from aoe.model.encoder import Encoder

    torch.set_num_threads(args.threads)
    tables = _tables(args)
    t0 = time.perf_counter()
    encoder = Encoder(C.backbone_dir(), pooling=args.pooling, device="cpu")
    return torch, encoder, tables, time.perf_counter() - t0


def worker_project(args) -> dict:
    import numpy as np

    from aoe.evaluate.sts import TASKS, cosine_rows, evaluate_sts, pair_embeddings, unique_texts
    from aoe.model.tokens import tokenize_texts

    torch, encoder, tables, model_load = _worker_setup(args)
    captured = {}

    def encode(texts):
        captured["texts"] = texts
        captured["emb"] = encoder.encode(texts, batch_size=args.batch_size, max_length=args.max_length)
        return captured["emb"]

    start = time.perf_counter()
    result = evaluate_sts(encode, tables)
    seconds = time.perf_counter() - start
    # after the clock: padding of Encoder.encode's batches (longest text first, by characters)
    texts = captured["texts"]
    assert texts == unique_texts([tables[t] for t in TASKS])
    lengths = [len(x) for x in tokenize_texts(encoder.tokenizer, texts, args.max_length, encoder.prompt)]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    padded, real = _padded_tokens(lengths, [order[s : s + args.batch_size] for s in range(0, len(order), args.batch_size)])
    out = {
        "seconds": seconds,
        "encode_seconds": result["embedding"]["encode_seconds"],
        "model_load_s": model_load,
        "texts_embedded": len(texts),
        "texts_in_tasks": result["embedding"]["sentences_in_tasks"],
        "positions_incl_padding": padded,
        "real_tokens": real,
        "spearman": {t: result["tasks"][t]["spearman"] for t in TASKS},
        "avg": result["avg"],
        "pairs": {t: len(df) for t, df in tables.items()},
        "torch_threads": torch.get_num_threads(),
    }
    if args.sims:
        out["sims"] = {t: cosine_rows(*pair_embeddings(captured["emb"], texts, df)).astype(np.float64).tolist()
                       for t, df in tables.items()}
    return out


def worker_naive(args) -> dict:
    import numpy as np

    from aoe.evaluate.sts import TASKS, cosine_rows, sts_scores
    from aoe.model.encoder import embed
    from aoe.model.tokens import tokenize_texts

    torch, encoder, tables, model_load = _worker_setup(args)
    tok = encoder.tokenizer

    @torch.inference_mode()
    def batcher(texts: list[str]) -> np.ndarray:  # Encoder.encode's per-batch step, unchanged
        ids = tokenize_texts(tok, texts, args.max_length, encoder.prompt)
        enc = tok.pad({"input_ids": ids}, return_tensors="pt").to(encoder.device)
        return embed(encoder.model, encoder.pooling, enc["input_ids"], enc["attention_mask"]).float().cpu().numpy()

    start = time.perf_counter()
    spearman, sims_by_task, batches_by_task, embedded = {}, {}, {}, 0
    for task in TASKS:
        table = tables[task]
        s1, s2 = table["sentence1"].tolist(), table["sentence2"].tolist()
        sims = np.empty(len(table), dtype=np.float32)
        batches = []
        for _subset, idx in table.groupby("subset", sort=False).indices.items():
            rows = idx[_naive_order(table.iloc[idx], args.naive_order)]
            for ii in range(0, len(rows), args.batch_size):
                b = rows[ii : ii + args.batch_size]
                enc1 = batcher([s1[i] for i in b])
                enc2 = batcher([s2[i] for i in b])
                sims[b] = cosine_rows(enc1, enc2)
                embedded += 2 * len(b)
                batches.append(b)
        spearman[task] = sts_scores(sims, table, task)["spearman"]
        sims_by_task[task], batches_by_task[task] = sims, batches
    seconds = time.perf_counter() - start
    # after the clock: padding of the naive batches
    padded = real = 0
    for task, batches in batches_by_task.items():
        table = tables[task]
        for col in ("sentence1", "sentence2"):
            lengths = [len(x) for x in tokenize_texts(tok, table[col].tolist(), args.max_length, encoder.prompt)]
            p, r = _padded_tokens(lengths, batches)
            padded, real = padded + p, real + r
    out = {
        "seconds": seconds,
        "model_load_s": model_load,
        "texts_embedded": embedded,
        "texts_in_tasks": embedded,
        "positions_incl_padding": padded,
        "real_tokens": real,
        "spearman": spearman,
        "avg": float(np.mean([spearman[t] for t in TASKS])),
        "pairs": {t: len(df) for t, df in tables.items()},
        "torch_threads": torch.get_num_threads(),
    }
    if args.sims:
        out["sims"] = {t: s.astype(np.float64).tolist() for t, s in sims_by_task.items()}
    return out


def main() -> None:
    workers = {"project": worker_project, "naive": worker_naive}
    ap = C.timed_parser(__doc__, "eval_dedup", list(workers))
    ap.add_argument("--max-pairs", type=int, default=None, help="a seeded subset of at most N pairs per task (smoke tests)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--pooling", default="cls")
    ap.add_argument("--naive-order", choices=["file", "senteval"], default="file")
    ap.add_argument("--sims", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if C.serve_worker(args, workers):
        return

    import numpy as np

    from aoe.evaluate.sts import TASKS

    _tables(args)  # fail early without the mirror
    base = C.worker_command(__file__, args, ["threads", "batch_size", "max_length", "pooling", "naive_order", "mirror", "max_pairs"])
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    # the first round also returns every pair's cosine (compared below, not kept in the runs)
    runs = C.alternate(base, ("project", "naive"), args.repeats, env,
                       echo=lambda side, r: f"{r['seconds']:8.2f} s  {r['texts_embedded']} texts",
                       extra=lambda side, rep: ["--sims"] if rep == 0 else [])
    sims = {r["side"]: r.pop("sims") for r in runs if "sims" in r}
    sides = ("project", "naive")
    stats = {s: C.summarize([r["seconds"] for r in runs if r["side"] == s]) for s in sides}
    speedup = [n["seconds"] / p["seconds"] for p, n in zip(runs[0::2], runs[1::2])]
    first = {s: next(r for r in runs if r["side"] == s) for s in sides}
    sp_diff = {t: abs(first["project"]["spearman"][t] - first["naive"]["spearman"][t]) for t in TASKS}
    cos_diff = {t: float(np.max(np.abs(np.asarray(sims["project"][t]) - np.asarray(sims["naive"][t])))) for t in TASKS}
    # Spearman is deterministic for one process's embeddings: do the repeats reproduce repeat 0?
    stable = {s: max(abs(r["spearman"][t] - first[s]["spearman"][t]) for r in runs if r["side"] == s for t in TASKS) for s in sides}
    record = {
        "command": C.command(__file__),
        "settings": {"model": str(C.backbone_dir()), "model_name": "MiniLM-L6 (all-MiniLM-L6-v2, offline)", "pooling": args.pooling,
                     "batch_size": args.batch_size, "max_length": args.max_length, "threads": args.threads, "device": "cpu",
                     "dtype": "float32", "max_pairs_per_task": args.max_pairs, "cap_seed": 0, "naive_order": args.naive_order,
                     "repeats": args.repeats, "timed": "evaluation only (embedding + cosine + Spearman); model load and table reading excluded"},
        "pairs": first["project"]["pairs"],
        "texts": {"in_tasks": first["naive"]["texts_embedded"], "unique_embedded_by_project": first["project"]["texts_embedded"],
                  "dedup_saved_share": 1 - first["project"]["texts_embedded"] / first["naive"]["texts_embedded"]},
        "positions_incl_padding": {s: first[s]["positions_incl_padding"] for s in sides},
        "real_tokens": {s: first[s]["real_tokens"] for s in sides},
        "runs": runs,
        "seconds": stats,
        "speedup_naive_over_project": C.summarize(speedup),
        "spearman_x100": {s: first[s]["spearman"] for s in sides},
        "avg_x100": {s: first[s]["avg"] for s in sides},
        "spearman_abs_diff": sp_diff,
        "spearman_max_abs_diff": max(sp_diff.values()),
        "cosine_max_abs_diff": cos_diff,
        "spearman_max_abs_change_across_repeats": stable,
    }
    path = C.write_json("eval_dedup", record, args.out)
    cap = f"at most {args.max_pairs} pairs per task" if args.max_pairs is not None else "all pairs"
    C.print_table(
        f"STS evaluation, 7 tasks ({cap}): project (distinct texts once, length-sorted) vs naive per-task loop "
        f"({args.naive_order} order); MiniLM-L6 {args.pooling}, batch {args.batch_size}, max_length {args.max_length}, "
        f"{args.threads} threads, {args.repeats} alternating repeats",
        ["way", "texts embedded", "positions incl. pad", "median s", "min", "max", "spread"],
        [[s, first[s]["texts_embedded"], first[s]["positions_incl_padding"], st["median"], st["min"], st["max"],
          f"{100 * st['spread_rel']:.0f}%"] for s, st in stats.items()],
    )
    sp = record["speedup_naive_over_project"]
    print(f"  speed-up naive / project: median {sp['median']:.2f}x (min {sp['min']:.2f}, max {sp['max']:.2f}); "
          f"texts {record['texts']['in_tasks']} -> {record['texts']['unique_embedded_by_project']} "
          f"({100 * record['texts']['dedup_saved_share']:.1f}% fewer)")
    C.print_table(
        "  Spearman x100 (repeat 0)",
        ["task", "project", "naive", "|diff|", "max |cos diff|"],
        [[t, f"{first['project']['spearman'][t]:.6f}", f"{first['naive']['spearman'][t]:.6f}", f"{sp_diff[t]:.1e}",
          f"{cos_diff[t]:.1e}"] for t in TASKS]
        + [["avg", f"{first['project']['avg']:.6f}", f"{first['naive']['avg']:.6f}",
            f"{abs(first['project']['avg'] - first['naive']['avg']):.1e}", ""]],
    )
    print(f"  largest |Spearman difference| {record['spearman_max_abs_diff']:.2e} (x100 scale); "
          f"largest change across repeats: {', '.join(f'{s} {v:.1e}' for s, v in stable.items())}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Loading the pipeline's token cache against re-tokenizing the texts from scratch, on SNLI-train-size data.

    .venv/bin/python bench/speed/token_cache.py [--pairs 550152] [--max-length 64] [--repeats 3] [--threads 2]

Data: SNLI 1.0 train (550,152 pairs) is not in the data mirror, so a table of ``--pairs`` rows
is built from the mirror's real NLI sentences: SNLI dev + test and MultiNLI dev matched +
mismatched (39,313 labelled pairs, read by ``aoe.data.nli.read_nli_csv``), in the pipeline's
``nli3`` table format (``aoe.data.nli.nli_formats``: sentence1 = premise, sentence2 =
hypothesis, score = class, pair_id). The rows are **repeated** in file order until ``--pairs``
rows; copy r >= 1 has `` r`` (a space and the copy number) appended to both sentences (and
``#r`` to pair_id), so every copy's texts are distinct from every other copy's while the
sharing inside a copy (a premise has about three hypotheses, as in SNLI train) is kept.
Copy 0 is the original text. The table is written as parquet under
``bench/out/work/`` (built once per ``--pairs``).

Tokenizer: the offline MiniLM-L6 (``_common.backbone_dir()``) fast tokenizer, ``--max-length``
(default 64), no prompt. ``--threads`` sets torch's threads and the tokenizers library's
worker threads (``RAYON_NUM_THREADS``, ``TOKENIZERS_PARALLELISM=true``) in every worker.

Measured, each in a fresh process (runs alternate load, retokenize, load, ...; ``--repeats``):

* ``build`` (once, before the repeats): ``aoe.model.tokens.build_token_cache(table, backbone,
  max_length, out)`` as the pipeline's ``tokenize`` rule calls it (read the table, tokenize
  each distinct text once, Arrow dataset, ``save_to_disk``). A fresh folder every invocation.
* ``load``: ``aoe.model.tokens.load_token_cache(cache, table, backbone, max_length)``, exactly what
  ``aoe.training.train.train`` calls (its identity checks hash the table and the tokenizer files; the
  rows are memory-mapped Arrow), plus reading the first batch of 32 rows (``data[range(32)]``,
  what the training loop hands the collator): ``load_s`` is the time to usable rows, including
  ``import datasets`` (timed apart too: ``load_token_cache`` imports it, a process without the
  cache would not need it; the speed-up without it is recorded as well). Also
  recorded: ``materialize_s``, reading every column into Python lists afterwards (an upper
  bound: training reads the rows batch by batch, not all at start).
* ``retokenize``: what a training job without a cache would do at start, the same steps as the
  build minus Arrow: read the parquet table, the distinct texts (``pd.unique``), the pipeline's
  ``aoe.model.tokens.tokenize_texts`` (the fast tokenizer's batch call, truncation at max_length),
  and per-row id lists for each text column. The tokenizer's ``from_pretrained`` is timed
  apart (``tokenizer_load_s``) and not counted: training loads it for the collator either way.
  Repeat 0 checks, after its clock stops, that its ids equal the cache's row for row.

Speed-up = retokenize_s / load_s per repeat (goal >= 20); also against load + materialize.
The OS page cache is warm for both sides (the table and cache were just written or read):
a cold disk would slow the load (and the table read) by the disk's read time.

Sizes: the cache folder (all files) vs the parquet table and the texts' UTF-8 bytes.
JSON: bench/out/token_cache.json (command, settings, machine, load averages per run).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

SNLI_TRAIN_PAIRS = 550152
NLI_FILES = [("snli", "dev"), ("snli", "test"), ("mnli", "dev_matched"), ("mnli", "dev_mismatched")]
FIRST_BATCH = 32


def _table_path(pairs: int) -> Path:
    return C.WORK_DIR / f"nli-repeated-{pairs}.parquet"


def _cache_path(pairs: int, max_length: int) -> Path:
    return C.WORK_DIR / "tokens" / f"token-cache-bench-{pairs}-{max_length}"


def build_table(pairs: int, mirror: str) -> tuple[Path, dict]:
    """The repeated-NLI table of ``pairs`` rows (see the module docstring); built once."""
    import pandas as pd

    from aoe.data.io import write_parquet_atomic
    from aoe.data.nli import NLI_MIRROR_FILES, nli_formats, read_nli_csv

    out = _table_path(pairs)
    parts = []
    for dataset, split in NLI_FILES:
        rel, expected = NLI_MIRROR_FILES[dataset][split]
        path = Path(mirror) / rel
        if not path.is_file():
            raise SystemExit(f"{path} missing: set AOE_DATA_MIRROR or --mirror")
        parts.append(read_nli_csv(path, expected))
    source = nli_formats(pd.concat(parts, ignore_index=True))["nli3"]
    copies = -(-pairs // len(source))
    info = {
        "source": "mirror nli/: SNLI 1.0 dev+test, MultiNLI 1.0 dev matched+mismatched (labelled rows), nli3 format",
        "source_pairs": int(len(source)),
        "method": "repeat in file order; copy r>=1 appends ' r' to sentence1 and sentence2 (and '#r' to pair_id)",
        "copies": int(copies),
        "pairs": int(pairs),
    }
    if not out.is_file():
        frames = []
        for r in range(copies):
            if r == 0:
                frames.append(source)
            else:
                frames.append(source.assign(sentence1=source["sentence1"] + f" {r}", sentence2=source["sentence2"] + f" {r}",
                                            pair_id=source["pair_id"] + f"#{r}"))
        table = pd.concat(frames, ignore_index=True).iloc[:pairs].reset_index(drop=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(table, out)
    return out, info


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _setup_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def worker_build(args) -> dict:
    _setup_threads(args.threads)
    from aoe.model.tokens import build_token_cache

    table, cache = _table_path(args.pairs), _cache_path(args.pairs, args.max_length)
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    identity = build_token_cache(table, C.backbone_dir(), args.max_length, cache)
    seconds = time.perf_counter() - start
    return {"build_s": seconds, "identity": identity}


def worker_load(args) -> dict:
    _setup_threads(args.threads)
    from aoe.model.tokens import load_token_cache

    table, cache = _table_path(args.pairs), _cache_path(args.pairs, args.max_length)
    start = time.perf_counter()
    import datasets  # noqa: F401  (load_token_cache imports it; a no-cache path would not need it)

    t_import = time.perf_counter()
    data = load_token_cache(cache, table, C.backbone_dir(), args.max_length)
    t_open = time.perf_counter()
    rows = data[list(range(FIRST_BATCH))]
    t_first = time.perf_counter()
    # data[c] is a lazy Column in datasets >= 4: slicing the table converts every row to Python
    columns = data[:]
    assert all(isinstance(v, list) and len(v) == len(data) for v in columns.values())
    t_all = time.perf_counter()
    return {
        "datasets_import_s": t_import - start,
        "load_token_cache_s": t_open - t_import,
        "load_without_import_s": t_first - t_import,
        "first_batch_s": t_first - t_open,
        "load_s": t_first - start,
        "materialize_s": t_all - t_first,
        "load_and_materialize_s": t_all - start,
        "rows": len(data),
        "first_batch_rows": len(rows["input_ids_1"]),
        "columns": sorted(columns),
    }


def worker_retokenize(args) -> dict:
    _setup_threads(args.threads)
    import pandas as pd
    from transformers import AutoTokenizer

    from aoe.model.tokens import ensure_pad_token, tokenize_texts
    from aoe.model.tokens import text_columns, text_identities

    table = _table_path(args.pairs)
    t0 = time.perf_counter()
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(C.backbone_dir()))
    tok_load = time.perf_counter() - t0
    start = time.perf_counter()
    df = pd.read_parquet(table)
    t_read = time.perf_counter()
    cols = text_columns(df)
    texts = pd.unique(pd.concat([df[c] for c in cols], ignore_index=True))
    index = {t: i for i, t in enumerate(texts)}
    t_unique = time.perf_counter()
    ids = tokenize_texts(tokenizer, list(texts), args.max_length)
    t_tok = time.perf_counter()
    identity_of = text_identities(ids)
    per_row = {}
    for k, col in enumerate(cols, start=1):
        i = df[col].map(index).to_numpy()
        per_row[f"input_ids_{k}"] = [ids[j] for j in i]
        per_row[f"text_id_{k}"] = [identity_of[j] for j in i]
    seconds = time.perf_counter() - start
    result = {
        "retokenize_s": seconds,
        "read_table_s": t_read - start,
        "unique_texts_s": t_unique - t_read,
        "tokenizer_call_s": t_tok - t_unique,
        "rows_s": seconds - (t_tok - start),
        "tokenizer_load_s": tok_load,
        "texts_in_table": int(sum(len(df[c]) for c in cols)),
        "unique_texts": int(len(texts)),
        "tokens_total_unique": int(sum(len(x) for x in ids)),
        "tokens_mean": sum(len(x) for x in ids) / len(ids),
        "tokenizer_is_fast": bool(tokenizer.is_fast),
        "utf8_bytes_unique_texts": int(sum(len(t.encode("utf-8")) for t in texts)),
        "utf8_bytes_table_texts": int(sum(df[c].map(lambda s: len(s.encode("utf-8"))).sum() for c in cols)),
    }
    if args.verify:
        from aoe.model.tokens import load_token_cache

        data = load_token_cache(_cache_path(args.pairs, args.max_length), table, C.backbone_dir(), args.max_length)
        same = all(data[f"input_ids_{k}"] == per_row[f"input_ids_{k}"] for k in range(1, len(cols) + 1))
        same_ids = all(data[f"text_id_{k}"] == per_row[f"text_id_{k}"] for k in range(1, len(cols) + 1))
        result["equal_to_cache"] = bool(same and same_ids)
    return result


def main() -> None:
    workers = {"build": worker_build, "load": worker_load, "retokenize": worker_retokenize}
    ap = C.timed_parser(__doc__, "token_cache", list(workers), threads_help="torch and tokenizer (rayon) threads")
    ap.add_argument("--pairs", type=int, default=SNLI_TRAIN_PAIRS, help="table rows (default: SNLI train's 550152)")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="keep the benchmark's cache folder afterwards")
    ap.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if C.serve_worker(args, workers):
        return

    table, table_info = build_table(args.pairs, args.mirror)
    base = C.worker_command(__file__, args, ["pairs", "max_length", "threads", "mirror"])
    env = {"OMP_NUM_THREADS": str(args.threads), "RAYON_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "true"}

    build, wall, before, after = C.run_worker(base + ["--worker", "build"], env)
    build_run = {"process_wall_s": wall, "load_before": before, "load_after": after, **build}
    print(f"  build      {build['build_s']:7.2f} s  load {before[0]:.2f} -> {after[0]:.2f}", flush=True)
    cache = _cache_path(args.pairs, args.max_length)
    cache_bytes = _dir_bytes(cache)

    # the first re-tokenizing run also checks its ids against the cache's
    runs = C.alternate(base, ("load", "retokenize"), args.repeats, env,
                       echo=lambda side, r: f"{r['load_s' if side == 'load' else 'retokenize_s']:8.3f} s",
                       extra=lambda side, rep: ["--verify"] if side == "retokenize" and rep == 0 else [])
    loads = [r for r in runs if r["side"] == "load"]
    retoks = [r for r in runs if r["side"] == "retokenize"]
    speedup = [t["retokenize_s"] / lo["load_s"] for lo, t in zip(loads, retoks)]
    speedup_mat = [t["retokenize_s"] / lo["load_and_materialize_s"] for lo, t in zip(loads, retoks)]
    speedup_noimp = [t["retokenize_s"] / lo["load_without_import_s"] for lo, t in zip(loads, retoks)]
    stats = {
        "build_s": build["build_s"],
        "load_s": C.summarize([r["load_s"] for r in loads]),
        "datasets_import_s": C.summarize([r["datasets_import_s"] for r in loads]),
        "load_token_cache_s": C.summarize([r["load_token_cache_s"] for r in loads]),
        "load_without_import_s": C.summarize([r["load_without_import_s"] for r in loads]),
        "load_and_materialize_s": C.summarize([r["load_and_materialize_s"] for r in loads]),
        "retokenize_s": C.summarize([r["retokenize_s"] for r in retoks]),
        "tokenizer_call_s": C.summarize([r["tokenizer_call_s"] for r in retoks]),
        "speedup_retokenize_over_load": C.summarize(speedup),
        "speedup_retokenize_over_load_and_materialize": C.summarize(speedup_mat),
        "speedup_retokenize_over_load_without_datasets_import": C.summarize(speedup_noimp),
    }
    t0 = retoks[0]
    sizes = {
        "cache_dir_bytes": cache_bytes,
        "cache_dir_mb": cache_bytes / 1e6,
        "table_parquet_bytes": table.stat().st_size,
        "table_parquet_mb": table.stat().st_size / 1e6,
        "table_texts_utf8_mb": t0["utf8_bytes_table_texts"] / 1e6,
        "unique_texts_utf8_mb": t0["utf8_bytes_unique_texts"] / 1e6,
        "cache_over_parquet": cache_bytes / table.stat().st_size,
    }
    record = {
        "command": C.command(__file__),
        "settings": {"pairs": args.pairs, "max_length": args.max_length, "threads": args.threads, "repeats": args.repeats,
                     "first_batch_rows": FIRST_BATCH, "backbone": str(C.backbone_dir()), "tokenizer_is_fast": t0["tokenizer_is_fast"],
                     "page_cache": "warm (files just written/read); cold-disk reads not measured"},
        "data": {**table_info, "table": str(table), "texts_in_table": t0["texts_in_table"], "unique_texts": t0["unique_texts"],
                 "tokens_mean_per_unique_text": t0["tokens_mean"], "texts_at_max_length": build["identity"]["n_at_max_length"]},
        "build": build_run,
        "runs": runs,
        "stats": stats,
        "sizes": sizes,
        "retokenized_equal_to_cache": t0.get("equal_to_cache"),
    }
    path = C.write_json("token_cache", record, args.out)
    if not args.keep:
        shutil.rmtree(cache, ignore_errors=True)
    C.print_table(
        f"Token cache vs re-tokenizing: {args.pairs} pairs ({t0['unique_texts']} distinct of {t0['texts_in_table']} texts), "
        f"MiniLM-L6 fast tokenizer, max_length {args.max_length}, {args.threads} threads, {args.repeats} alternating repeats",
        ["step", "median s", "min", "max", "spread"],
        [["build cache (once)", build["build_s"], "", "", ""]]
        + [[label, st["median"], st["min"], st["max"], f"{100 * st['spread_rel']:.0f}%"]
           for label, st in [("load (to first batch)", stats["load_s"]), ("  of it import datasets", stats["datasets_import_s"]),
                             ("  of it load_token_cache", stats["load_token_cache_s"]),
                             ("load + all rows to lists", stats["load_and_materialize_s"]), ("retokenize", stats["retokenize_s"]),
                             ("  of it tokenizer call", stats["tokenizer_call_s"])]],
    )
    sp, spm = stats["speedup_retokenize_over_load"], stats["speedup_retokenize_over_load_and_materialize"]
    print(f"  speed-up retokenize / load: median {sp['median']:.1f}x (min {sp['min']:.1f}, max {sp['max']:.1f}); goal >= 20x: "
          f"{'met' if sp['min'] >= 20 else 'NOT met' if sp['median'] < 20 else 'met at the median only'}")
    print(f"  speed-up retokenize / (load + all rows): median {spm['median']:.1f}x; retokenize / (load without the datasets "
          f"import): median {stats['speedup_retokenize_over_load_without_datasets_import']['median']:.1f}x")
    print(f"  sizes: cache {sizes['cache_dir_mb']:.1f} MB, parquet table {sizes['table_parquet_mb']:.1f} MB "
          f"(texts {sizes['table_texts_utf8_mb']:.1f} MB UTF-8, distinct {sizes['unique_texts_utf8_mb']:.1f} MB); "
          f"cache / parquet {sizes['cache_over_parquet']:.2f}")
    print(f"  retokenized ids equal to the cache's: {record['retokenized_equal_to_cache']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

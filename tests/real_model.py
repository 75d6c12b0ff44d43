"""The one real-model cell of the suite: all-MiniLM-L6-v2 (real weights), in one process.

The end-to-end runs check the pipeline's plumbing on a tiny random backbone (tests/conftest.py::ci_run);
a few properties only hold for real weights (docs/testing.md lists them, tests/test_real_model.py checks
them). This module computes what they read, once, in one process (``python -m tests.real_model``, the
background run after the CI preset's: tests/conftest.py), with the package's own evaluation and training
functions, on the data the CI preset's run prepared (its results tree: the same tables, caps and
settings as ``presets/ci.yaml``, so no data chain runs twice):

- MiniLM as downloaded: STS-B test under CLS and under average pooling; mteb's STS-B;
  TREC (the preset's 1,000 rows a split); the NLI probe on SNLI; the saturation statistics of SNLI dev
  (``SATURATION_PAIRS``);
- MiniLM trained as the preset's cell (``minilm-l6/aoe/stsb/seed1``: AoE on STS-B train, ``TRAIN_STEPS``
  steps instead of the preset's 60), keeping its last weights (the preset's best-on-dev selection is
  plumbing, checked on the tiny run):
  STS-B test, its pairs' cosines (Fig. 3's saturation zone), TREC (``TRANSFER_ROWS`` a split).

Every result but mteb's goes through the embedding cache of one folder, so a text set is embedded once per
model and pooling.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.cputime import process_cpu
from tests.workflow_utils import REPO

CELL = ("minilm-l6", "aoe", "stsb", 1)  # presets/ci.yaml's one trained cell
# Where this cell is smaller than the preset, each at the smallest size its property still shows with a margin
# (issue 73; the preset's own sizes run through every rule on the tiny model, tests/conftest.py::ci_run). Measured
# at the preset's sizes (f24e0b8): the trained model 82.02 on STS-B test against the backbone's 73.50 (the test asks
# for 2 points); TREC 58.2 (its floor 45, chance 27.6); entailed pairs' mean cosine 0.825 against contradictions'
# 0.654. The backbone keeps the preset's 1,000 transfer rows a split: on 500 it scored TREC 47.2, too near the floor.
# Measured at the sizes of 7ff2a78, 20 training steps (stages.json; 2026-11-29, on its CI tree; 136 CPU-s in all, 213
# before that change): after 20 steps 78.53 (+5.0) with 323 of 1,379 pairs in the saturation zone (30 steps: 80.12, 329; the
# training 54 CPU-s to 27); the trained model's TREC 52.0 on 500 rows a split; SNLI's probe 43.22; the two labels'
# means 0.817 and 0.655 on 500 pairs. One property, one reading, each the smallest that shows it:
# - the pooling and the training are compared on STS-B test alone (CLS 19.5 CPU-s, average 16.0; the seven tasks
#   cost 41.5 and 37.7): average pooling's lead is 8.5 points there, the seven tasks' protocol is the tiny run's;
# - the transfer tasks and the NLI probe are TREC and SNLI alone: MRPC's floor (60, below its 67.1% positives) and
#   MultiNLI's (30, below chance) could not fail for their reason; both run on the tiny model in every CI run
#   (table3_transfer, table5_nli), MRPC's classifier against SentEval in tests/test_evaluate_transfer.py.
# - the training is 14 steps: the trained model 77.36 on STS-B test (+3.86 over the backbone's 73.50, the test asks for
#   2), 312 pairs in the saturation zone, TREC 52.6 on 500 rows (2026-11-29, on the CI tree of 3de06cd); after
#   10 steps the gain was +2.98, too near the threshold to fail only for its reason.
TRAIN_STEPS = 14      # the preset's 60: the gain over the backbone and the saturation zone show after 14
TRANSFER_ROWS = {"pretrained": None, "trained": 500}  # None: the preset's 1,000 a split; TREC's 500 test questions whole
SATURATION_PAIRS = 500  # the preset's 2,000 SNLI dev pairs


@dataclass
class RealModel:
    """Where the real-model results are: each a result JSON as the workflow's rules write it."""

    root: Path

    def result(self, name: str) -> dict:
        return json.loads((self.root / name).read_text())


class _Stages:
    """Each stage's CPU-seconds (this process and its threads, and any child it waited for: tests/cputime.py's
    process_cpu), written to ``root/stages.json``: what a cut of the cell would save (issue 73, docs/testing.md)."""

    def __init__(self, root: Path):
        self.path, self.cpu, self.last = root / "stages.json", {}, process_cpu()

    def done(self, name: str) -> None:
        now = process_cpu()
        self.cpu[name], self.last = round(now - self.last, 1), now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.cpu, indent=1))


def compute(ci_results: Path, minilm_dir: Path, root: Path) -> RealModel:
    """Evaluate and train MiniLM-L6 into ``root``, reading the prepared data of the CI run's ``ci_results``."""
    from aoe.config.cell_settings import train_params
    from aoe.evaluate.mteb_eval import run_mteb_evaluation
    from aoe.evaluate.nli_probe import PROBE_SETS, probe_inputs
    from aoe.evaluate.run import run_nli_probe, run_sts_evaluation, run_transfer_evaluation
    from aoe.evaluate.saturation import run_saturation
    from aoe.plan.check import load_config
    from aoe.results.figures.pairs import load_pairs, run_figure_pairs
    from aoe.results.figures.sts_geometry import saturation_mask
    from aoe.training.train import TrainConfig, train

    stages = _Stages(root)
    config = load_config(REPO, [REPO / "presets" / "ci.yaml"])
    ev = config["evaluation"]
    data = ci_results / "data"
    cache = root / "embeddings"
    sts_kw = dict(batch_size=ev["sts"]["batch_size"], max_length=ev["sts"]["max_length"], device="cpu", cache_root=cache)
    caps = dict(max_pairs=ev["sts"]["max_pairs"], uncapped_tasks=ev["sts"]["uncapped_tasks"])
    downstream = ci_results / "downloads" / "files" / "senteval" / "downstream"
    # TREC alone, for both models: the sentence features above chance; MRPC's floor sat below its majority class (it
    # could not fail for its reason), its pair features run on the tiny model (ci_run)
    transfer_kw = dict(tasks=["TREC"], mode=ev["transfer"]["mode"], **sts_kw)
    transfer_rows = {m: rows or ev["transfer"]["max_rows"] for m, rows in TRANSFER_ROWS.items()}

    # MiniLM-L6 as downloaded
    stages.done("imports and config")
    # STS-B test alone, as the rule evaluate_sts reads it (uncapped in the preset): what the pooling, the training and
    # mteb are compared on; the seven tasks' protocol runs on the tiny model (tests/test_pipeline_e2e.py)
    stsb_tables, stsb_manifests = [str(data / "stsb" / "test.parquet")], [str(data / "stsb" / "test.manifest.json")]
    for pooling, name in (("cls", "sts.json"), ("avg", "sts.avg.json")):
        run_sts_evaluation(minilm_dir, stsb_tables, stsb_manifests, root / "pretrained" / name, pooling=pooling, tasks=["STSB"],
                           **caps, **sts_kw)
        stages.done(f"pretrained sts {pooling}")
    run_transfer_evaluation(minilm_dir, downstream, root / "pretrained/transfer.json", pooling="cls", max_rows=transfer_rows["pretrained"],
                            **transfer_kw)
    stages.done("pretrained transfer")
    probe = ev["nli_probe"]
    # SNLI only (PROBE_SETS): the signal real weights carry shows there; MultiNLI's probe runs on the tiny model (ci_run)
    snli = [t for t in probe_inputs(probe["protocol"]) if t == "/".join(PROBE_SETS["SNLI"])]
    run_nli_probe(minilm_dir, [str(data / f"{t}.nli3.parquet") for t in snli], root / "pretrained/nli_probe.json",
                  protocol=probe["protocol"], mode=probe["mode"], max_rows=probe["max_rows"], pooling="cls", names=["SNLI"], **sts_kw)
    stages.done("pretrained nli probe")
    # mteb's STS-B test through its own batching (no cache: sentence1 and sentence2 embedded in separate calls)
    run_mteb_evaluation(minilm_dir, root / "pretrained/mteb.json", local_tasks=["STSBenchmarkLocal"], downstream=downstream,
                        pooling="cls", device="cpu", results_dir=root / "pretrained/mteb_results")
    stages.done("pretrained mteb")
    sat = config["analysis"]["saturation"]
    split = data / sat["dataset"] / sat["split"]
    run_saturation(minilm_dir, f"{split}.parquet", f"{split}.manifest.json", root / "pretrained/saturation.json", pooling="cls",
                   batch_size=ev["sts"]["batch_size"], max_length=ev["sts"]["max_length"], max_pairs=SATURATION_PAIRS)
    stages.done("pretrained saturation")

    # MiniLM-L6 trained as the preset's cell, its last weights
    params = train_params(config, *CELL)
    params.update(select_checkpoint="last", select_split=None, max_steps=TRAIN_STEPS)
    # not the folder its results go to: the cache keys a model by its folder's files, so a result written
    # there would make each later evaluation of the model a cache miss (STS-B test embedded twice)
    model = root / "trained-model"
    tokens = ci_results / "tokens" / f"minilm-l6-{params['max_length']}" / "stsb" / "train"
    train(tokens, data / "stsb" / "train.parquet", minilm_dir, model, TrainConfig(**params))
    stages.done("training")
    run_sts_evaluation(model, stsb_tables, stsb_manifests, root / "trained/sts.json", tasks=["STSB"], **sts_kw)
    stages.done("trained sts")
    run_figure_pairs(model, stsb_tables, stsb_manifests, "stsb", root / "trained/stsb-pairs.npz", tasks=["STSB"],
                     batch_size=ev["sts"]["batch_size"], max_length=ev["sts"]["max_length"], cache_root=cache)
    cos = load_pairs(root / "trained/stsb-pairs.npz")["cos"]
    threshold = config["figures"]["sts_geometry"]["saturation_threshold"]
    (root / "trained/saturation_zone.json").write_text(json.dumps(  # what fig3 draws (aoe.results.figures.sts_geometry)
        {"threshold": threshold, "pairs": int(saturation_mask(cos, threshold).sum()), "pairs_total": int(len(cos))}))
    stages.done("trained pairs")
    run_transfer_evaluation(model, downstream, root / "trained/transfer.json", max_rows=transfer_rows["trained"], **transfer_kw)
    stages.done("trained transfer")
    return RealModel(root)


if __name__ == "__main__":
    import sys

    compute(*map(Path, sys.argv[1:4]))

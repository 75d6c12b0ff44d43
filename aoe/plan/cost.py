"""A training's cost on a cluster, estimated before it runs (issue 71): GPU-hours, and the time limit it asks for.

The speed: this engine's own, measured on a GPU for the backbone's grid cell, where config.yaml records one
(``backbones.<b>.resources.pairs_per_s`` at ``pairs_per_s_max_length``, each citing its run); else the AoE paper's,
the one every backbone has: one STS-B train epoch (5,749 pairs) on one RTX 3090 Ti, AoE-BERT-base 14.94 s and
AoE-LLaMA-7B 1027.18 s (Appendix D; aoe/resources/paper_numbers.yaml ``acl2024_training_time``). The work is the
grid's: the cell's train set, epochs or max_steps, batch and max_length, as the workflow resolves them. Assumptions:

* a training example costs in proportion to its texts (pairs 2, triplets 3) and to the train set's
  ``max_length`` relative to the speed's (batches are padded to their longest text, up to max_length; this
  over-estimates sets of short texts, which rarely reach it);
* LLaMA-2 13B trains at 7B's paper speed x 6.74/13.0 (the parameter ratio; the paper gives no 13B time);
  BERT-sized backbones not in Appendix D (MiniLM-L6, Gemma 3 270M) are costed as BERT-base (an upper bound);
* a multi-GPU job scales perfectly: its wall time is its GPU-hours over its GPUs.

``bench/gpu/cluster_cost.py`` prints a target's whole table (evaluations and disk too, at both speeds).
``runtime: auto`` (``backbones.<b>.resources``) sizes each training's time limit from its estimate, times a margin
(:data:`MEASURED_MARGIN`, :data:`PAPER_MARGIN`); a training a time limit stops saves a checkpoint and resumes from
it on the profile's retry (docs/reliability.md).
"""

from __future__ import annotations

import math

__all__ = ["MEASURED_MARGIN", "NLI_ROWS", "PAPER_MARGIN", "PARAMS_13B_OVER_7B", "STSB_TRAIN_PAIRS", "TRAIN_ROWS", "CostError",
           "per_gpu_pairs_per_s", "training_examples", "training_gpu_hours", "training_runtime_minutes", "train_rows"]

STSB_TRAIN_PAIRS = 5749
# Training rows per train set (upstream sizes; the full NLI, QQP and GIS sets are not mirrored), per format where a
# set has several: NLI's from the corpora's train label counts (SNLI 1.0: entailment 183,416, neutral 182,764,
# contradiction 183,187 of 549,367 labelled; MultiNLI 1.0: 130,899, 130,900, 130,903 of 392,702; AllNLI.tsv.gz's
# train split is both, 942,069 rows, as sentence-transformers/all-nli's pair-class train split, whose entailment-only
# pair split has the 314,315 entailments), built as aoe.data.nli builds each format
NLI_ROWS = {
    "pairs": (628405, "AllNLI train without neutral: entailment 314,315 + contradiction 314,090 (fcb6223 train_angle.py:94-111, "
                      "the 0.1.1 NLI-STS data)"),
    "triplets": (314086, "AllNLI train triplets, an upper bound: per premise the fewer of its entailments and contradictions "
                         "(aoe.data.nli), at most SNLI's 183,187 contradictions + MultiNLI's 130,899 entailments"),
    "nli3": (942069, "AllNLI train, every labelled row (SBERT's 3-way classifier)"),
}
TRAIN_ROWS = {
    "stsb": (5749, "STS-B train"),
    "nli": NLI_ROWS,
    "gis": (18565, "GIS train (AnglE Table 7)"),
    "mrpc": (3668, "GLUE MRPC train = SetFit/mrpc train, the script's (aoe/data/glue.py)"),
    "qqp": (363846, "GLUE QQP train"),
    "qnli": (104743, "GLUE QNLI train"),
    "stsb_llm": (2 * 5749, "one positive and one negative pair per STS-B train sentence1 (an upper bound: 5,749 rows)"),
    "stsb_llm_chatglm": (2 * 5749, "as stsb_llm, ChatGLM-6B's sentences (an upper bound)"),
    "stsb_self": (5749, "STS-B train sentence1 texts paired with themselves (an upper bound)"),
}
PARAMS_13B_OVER_7B = 6.74 / 13.0
# our choice: the measured speeds are an H100's and an H200's; an A100 trains these cells about half as fast, and a
# best-checkpoint run evaluates at each epoch end: three times the estimate
MEASURED_MARGIN = 3.0
# our choice: the paper's RTX 3090 Ti is slower than the GPUs a cluster gives, so its speed is a margin already; half
# again for a slower node, a shared file system, the evaluations
PAPER_MARGIN = 1.5
MIN_RUNTIME = 30  # minutes: the model's loading and the job's start are not in the estimate


class CostError(ValueError):
    """A cell whose cost cannot be estimated (an unknown train set size), named with what to add."""


def train_rows(trainset: str, fmt: str) -> tuple[int, str]:
    """(rows, source) of a train set in the format a cell trains on."""
    if trainset not in TRAIN_ROWS:
        raise CostError(f"no size of trainset {trainset!r} (aoe/plan/cost.py TRAIN_ROWS)")
    entry = TRAIN_ROWS[trainset]
    if isinstance(entry, dict):
        if fmt not in entry:
            raise CostError(f"no size of trainset {trainset!r} in format {fmt!r} (aoe/plan/cost.py TRAIN_ROWS)")
        return entry[fmt]
    return entry


def per_gpu_pairs_per_s(backbone: str, paper: dict) -> tuple[float, str]:
    """Training pairs/s on one RTX 3090 Ti at max_length 64, from Appendix D (``paper``: its rows)."""
    bert = STSB_TRAIN_PAIRS / paper["AoE-BERTbase"]["sec_per_epoch"]
    llama7 = STSB_TRAIN_PAIRS / paper["AoE-LLaMA7B"]["sec_per_epoch"]
    if backbone == "llama-2-7b":
        return llama7, "Appendix D, AoE-LLaMA7B"
    if backbone == "llama-2-13b":
        return llama7 * PARAMS_13B_OVER_7B, "Appendix D 7B x 6.74/13.0 (parameter ratio)"
    return bert, "Appendix D, AoE-BERTbase" + ("" if backbone == "bert-base-uncased" else " (as BERT-base: an upper bound)")


def training_examples(params: dict, trainset: str) -> int:
    """The examples a training sees: max_steps x batch, else epochs x the train set's rows."""
    if params["max_steps"] > 0:
        return params["max_steps"] * params["batch_size"]
    return params["epochs"] * train_rows(trainset, params["format"])[0]


def _paper_rows() -> dict:
    from aoe.results.paper_numbers import load_paper_numbers

    return load_paper_numbers(None)["acl2024_training_time"]["rows"]


def training_gpu_hours(params: dict, backbone: str, trainset: str, resources: dict | None = None,
                       paper: dict | None = None) -> tuple[float, str, bool]:
    """(GPU-hours, where the speed comes from, whether it was measured) of a training with resolved ``params``, at the
    backbone's measured speed (``resources``) where config.yaml records one, else at the paper's."""
    from aoe.config.recipes import N_TEXTS

    resources = resources or {}
    if resources.get("pairs_per_s"):
        speed, length = resources["pairs_per_s"], resources["pairs_per_s_max_length"]
        source = f"{speed:,.1f} pairs/s a GPU measured at max_length {length}, config.yaml backbones.{backbone}.resources"
    else:
        speed, source = per_gpu_pairs_per_s(backbone, paper or _paper_rows())
        length, source = 64, f"RTX 3090 Ti, {source}"
    examples = training_examples(params, trainset)
    seconds = examples * (N_TEXTS[params["format"]] / 2) * (params["max_length"] / length) / speed
    return seconds / 3600, source, bool(resources.get("pairs_per_s"))


def training_runtime_minutes(params: dict, backbone: str, trainset: str, resources: dict) -> int:
    """The time limit of ``runtime: auto``: the estimate's wall time on the job's GPUs, times the margin of its speed,
    in whole minutes and at least :data:`MIN_RUNTIME`."""
    hours, _, measured = training_gpu_hours(params, backbone, trainset, resources)
    margin = MEASURED_MARGIN if measured else PAPER_MARGIN
    return max(MIN_RUNTIME, math.ceil(hours / max(resources.get("gpus") or 1, 1) * 60 * margin))

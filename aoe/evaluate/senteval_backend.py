"""The real SentEval (SimCSE's fork) through our encoder: ``evaluation.backend: senteval``.

The built-in protocols (:mod:`aoe.evaluate.sts`, :mod:`aoe.evaluate.transfer`) equal
SentEval's numbers (tests/test_senteval_parity.py, tests/test_evaluate_transfer.py). This module
runs SentEval itself where it is importable, for whoever wants the original code path:
the conda env ``envs/senteval.yaml`` installs SimCSE's fork at the commit below. SentEval
is not on PyPI and none of its code is in this repository.

The settings are SimCSE's ``evaluation.py`` (``--mode test`` / ``fasttest``), and so is
the batcher: SentEval hands over token lists, joined by spaces into one text each, and
the model embeds each batch as it comes (no cache: SentEval owns the batching).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = [
    "SIMCSE_SENTEVAL",
    "SENTEVAL_NAMES",
    "senteval_available",
    "senteval_params",
    "run_senteval",
    "sts_from_senteval",
    "transfer_from_senteval",
]

# pip requirement of SimCSE's SentEval fork (the commit the parity tests were recorded at)
SIMCSE_SENTEVAL = (
    "senteval @ git+https://github.com/princeton-nlp/SimCSE.git@49fa580a853752ede55b8c76d9debf748e214d3f#subdirectory=SentEval"
)

# our task names -> SentEval's
SENTEVAL_NAMES = {
    "STS12": "STS12",
    "STS13": "STS13",
    "STS14": "STS14",
    "STS15": "STS15",
    "STS16": "STS16",
    "STSB": "STSBenchmark",
    "SICKR": "SICKRelatedness",
    "MR": "MR",
    "CR": "CR",
    "SUBJ": "SUBJ",
    "MPQA": "MPQA",
    "SST2": "SST2",
    "TREC": "TREC",
    "MRPC": "MRPC",
}
_STS_ALL_SETTING = ("STS12", "STS13", "STS14", "STS15", "STS16")


def senteval_available() -> bool:
    return importlib.util.find_spec("senteval") is not None


def senteval_params(task_path: str | os.PathLike, mode: str, batch_size: int | None = None) -> dict:
    """SimCSE evaluation.py's SentEval parameters for ``--mode test`` or ``fasttest``; ``batch_size``: SentEval's
    own (the texts per batcher call; SimCSE leaves SentEval's default, 128), for a batch-dependent pooling."""
    from aoe.evaluate.classifier import MODES

    if mode not in MODES:
        raise ValueError(f"unknown SentEval mode {mode!r}; valid: {', '.join(MODES)}")
    settings = MODES[mode]
    params = {
        "task_path": str(task_path),
        "usepytorch": True,
        "kfold": settings["kfold"],
        "classifier": {k: settings[k] for k in ("nhid", "optim", "batch_size", "tenacity", "epoch_size")},
    }
    if batch_size is not None:
        params["batch_size"] = int(batch_size)
    return params


def _batcher(encode: Callable[[list[str]], np.ndarray]):
    def batcher(params, batch, max_length=None):
        # SimCSE's batcher: a few SentEval files hold bytes tokens
        if batch and batch[0] and isinstance(batch[0][0], bytes):
            batch = [[word.decode("utf-8") for word in s] for s in batch]
        return np.asarray(encode([" ".join(s) for s in batch]))

    return batcher


def run_senteval(encode: Callable[[list[str]], np.ndarray], tasks: list[str], downstream, mode: str = "test",
                 batch_size: int | None = None) -> dict:
    """SentEval's raw result per task (our names), from ``senteval.engine.SE(...).eval``.

    ``downstream`` is SentEval's ``data/downstream`` folder; SentEval's ``task_path`` is its
    parent (SimCSE: ``PATH_TO_DATA = './SentEval/data'``). ``batch_size``: :func:`senteval_params`'.
    """
    if not senteval_available():
        raise ModuleNotFoundError(
            "evaluation.backend is 'senteval' but the senteval package is not importable; "
            f"use the conda env envs/senteval.yaml (pip: {SIMCSE_SENTEVAL}) or backend 'builtin'"
        )
    import senteval

    unknown = sorted(set(tasks) - set(SENTEVAL_NAMES))
    if unknown:
        raise KeyError(f"SentEval backend: unknown task(s) {unknown}; known: {list(SENTEVAL_NAMES)}")
    params = senteval_params(Path(downstream).parent, mode, batch_size)
    batcher = _batcher(encode)
    return {t: senteval.engine.SE(params, batcher, lambda params, samples: None).eval(SENTEVAL_NAMES[t]) for t in tasks}


def sts_from_senteval(raw: dict, tasks: list[str]) -> dict:
    """Our sts.json task entries from SentEval's results, read as SimCSE's evaluation.py reads them."""
    from aoe.evaluate.sts import TASKS

    out: dict[str, dict | None] = {}
    for task in TASKS:
        if task not in tasks:
            out[task] = None
            continue
        r = raw[task]
        if task in _STS_ALL_SETTING:
            spearman, pearson, n = r["all"]["spearman"]["all"], r["all"]["pearson"]["all"], sum(v["nsamples"] for k, v in r.items() if k != "all")
        else:
            # SimCSE's fork scores STS-B and SICK-R like STS (cosine, no training) on each split
            spearman, pearson, n = r["test"]["spearman"].correlation, r["test"]["pearson"][0], r["test"]["nsamples"]
        out[task] = {"spearman": 100 * float(spearman), "pearson": 100 * float(pearson), "n": int(n), "subsets": {}}
    avg = float(np.mean([out[t]["spearman"] for t in TASKS])) if all(out[t] for t in TASKS) else None
    return {"tasks": out, "avg": avg}


def transfer_from_senteval(raw: dict, tasks: list[str]) -> dict:
    """Our transfer.json task entries from SentEval's results (acc, devacc; MRPC also f1)."""
    from aoe.evaluate.transfer import TASKS as TRANSFER_TASKS

    out: dict[str, dict | None] = {}
    for task in TRANSFER_TASKS:
        if task not in tasks:
            out[task] = None
            continue
        r = raw[task]
        entry = {"acc": float(r["acc"]), "devacc": float(r["devacc"]), "ndev": int(r["ndev"]), "ntest": int(r["ntest"])}
        if "f1" in r:
            entry["f1"] = float(r["f1"])
        out[task] = entry
    avg = float(np.mean([out[t]["acc"] for t in TRANSFER_TASKS])) if all(out[t] for t in TRANSFER_TASKS) else None
    return {"tasks": out, "avg": avg}

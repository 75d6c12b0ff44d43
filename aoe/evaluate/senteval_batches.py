"""The batches SentEval hands the batcher on the STS tasks: which texts the official evaluations embedded together.

With masked pooling a text's embedding does not depend on its batch; with the official
angle-emb arithmetic (:data:`aoe.models.OFFICIAL_POOLINGS`) it does, so reproducing an
official number needs the official batches (:meth:`aoe.models.Encoder.encode_batches`).

What SentEval does per STS dataset (``STSEval.run``): take the pairs in its order, cut them
into consecutive chunks of ``batch_size``, and call the batcher on the chunk's sentence-1
texts, then separately on its sentence-2 texts. Batches never cross datasets, and for
STS12-16 a dataset is one SemEval subset (``subset`` column of :func:`aoe.data.sts.read_sts`).
The order depends on the task and on which copy of SentEval ran:

=========  =======================================  ========================================
task       SimCSE's SentEval (princeton-nlp/SimCSE  AnglE's copy (SeanLee97/AnglE fcb6223
           49fa580 SentEval/senteval/sts.py)        SentEval/, identical at 1c5515b
                                                    examples/NLI/SentEval/): the papers' runs
=========  =======================================  ========================================
STS12-16   ``STSEval.loadFile`` sorts by            the same sort, but the word lists are
           ``(len(s1.split()), len(s2.split()),     first padded with ``''`` to the dataset's
           score)``: ``"length_score"``             longest sentence, so both lengths are one
                                                    constant and the pairs are sorted by gold
                                                    score alone: ``"score"``
STS-B      ``STSBenchmarkEval.loadFile`` overrides  the same: file order
SICK-R     the loader and does not sort: file
           order, ``"file"``
=========  =======================================  ========================================

Python's ``sorted`` is stable: ties keep file order, as here. SentEval also re-joins each
text as ``' '.join(s.split())``, which :func:`aoe.data.sts.read_sts` already did to every
text (AnglE's copy leaves trailing spaces from its ``''`` padding, which BERT tokenizers drop).

The official batch sizes (``params['batch_size']`` in ``--mode test``) are in
:data:`OFFICIAL_BATCH_SIZES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "OFFICIAL_BATCH_SIZES",
    "SENTEVAL_SORTS",
    "SORTS",
    "SentEvalBatches",
    "senteval_order",
    "senteval_sts_batches",
    "task_batches",
]

SORTS = ("file", "length_score", "score")

_YEARS = ("sts12", "sts13", "sts14", "sts15", "sts16")
# copy of SentEval -> task (aoe.data.sts names) -> the order its STS loader gives the pairs
SENTEVAL_SORTS: dict[str, dict[str, str]] = {
    "simcse": {**{t: "length_score" for t in _YEARS}, "stsb": "file", "sickr": "file"},
    "angle": {**{t: "score" for t in _YEARS}, "stsb": "file", "sickr": "file"},
}

# angle-emb release -> (the evaluation script, its SentEval batch_size in --mode test)
OFFICIAL_BATCH_SIZES: dict[str, tuple[str, int]] = {
    "0.1.1": ("fcb6223 eval.py", 16),
    "0.4.6": ("1c5515b examples/NLI/eval_nli.py", 2),
}


class SentEvalBatches(NamedTuple):
    """``order``: row indices in SentEval's order; ``batches``: consecutive chunks of it.

    Batch ``k``'s sentence-1 texts are ``[s1[i] for i in batches[k]]``, embedded in one
    batcher call, and its sentence-2 texts ``[s2[i] for i in batches[k]]`` in the next.
    """

    order: list[int]
    batches: list[list[int]]


def senteval_order(s1: Sequence[str], s2: Sequence[str], scores: Sequence[float], sort: str) -> list[int]:
    """Row indices of one SentEval dataset in the order its STS loader puts them (``sort``: one of :data:`SORTS`)."""
    n = len(scores)
    if not len(s1) == len(s2) == n:
        raise ValueError(f"s1, s2 and scores differ in length ({len(s1)}, {len(s2)}, {n})")
    if sort == "file":
        return list(range(n))
    if sort == "length_score":
        return sorted(range(n), key=lambda i: (len(s1[i].split()), len(s2[i].split()), scores[i]))
    if sort == "score":
        return sorted(range(n), key=lambda i: scores[i])
    raise ValueError(f"unknown SentEval sort {sort!r}; known: {list(SORTS)}")


def senteval_sts_batches(
    s1: Sequence[str], s2: Sequence[str], scores: Sequence[float], batch_size: int, sort: str = "file"
) -> SentEvalBatches:
    """SentEval's order of one dataset's pairs and its batches of ``batch_size`` (the last one shorter)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = senteval_order(s1, s2, scores, sort)
    return SentEvalBatches(order, [order[i : i + batch_size] for i in range(0, len(order), batch_size)])


def task_batches(table: pd.DataFrame, task: str, batch_size: int, copy: str = "angle") -> SentEvalBatches:
    """SentEval's batches of a task table (:func:`aoe.data.sts.read_sts`), row positions of ``table``.

    Each ``subset`` is one SentEval dataset, ordered and batched on its own, in the table's
    subset order; ``copy``: ``angle`` (the papers' runs) or ``simcse`` (:data:`SENTEVAL_SORTS`).
    """
    try:
        sort = SENTEVAL_SORTS[copy][task]
    except KeyError:
        raise ValueError(f"unknown SentEval copy/task {copy!r}/{task!r}; known: "
                         f"{ {c: sorted(t) for c, t in SENTEVAL_SORTS.items()} }") from None
    order: list[int] = []
    batches: list[list[int]] = []
    subsets = table["subset"].to_numpy()
    for subset in pd.unique(subsets):
        rows = [int(i) for i in np.flatnonzero(subsets == subset)]
        part = senteval_sts_batches(
            [str(table["sentence1"].iat[i]) for i in rows],
            [str(table["sentence2"].iat[i]) for i in rows],
            [float(table["score"].iat[i]) for i in rows],
            batch_size,
            sort,
        )
        order += [rows[i] for i in part.order]
        batches += [[rows[i] for i in b] for b in part.batches]
    return SentEvalBatches(order, batches)

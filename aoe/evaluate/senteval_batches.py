"""The batches SentEval hands the batcher on the STS and transfer tasks: which texts the official evaluations embedded together.

With masked pooling a text's embedding does not depend on its batch; with the official
angle-emb arithmetic (:data:`aoe.model.pooling.OFFICIAL_POOLINGS`) it does, so reproducing an
official number needs the official batches (:meth:`aoe.model.encoder.Encoder.encode_batches`).

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
:data:`OFFICIAL_BATCH_SIZES`, per SentEval mode in :data:`OFFICIAL_MODE_BATCH_SIZES`.

The transfer tasks (:func:`transfer_order`, :func:`transfer_batches`): the loaders of MR, CR, SUBJ,
MPQA, SST2, TREC and MRPC are the same file in all three copies (SimCSE 49fa580, AnglE fcb6223
``SentEval/senteval/``, 1c5515b ``examples/NLI/SentEval/senteval/``: binary.py, sst.py, trec.py,
mrpc.py byte-identical). Each split is sorted on its own, stably, "to reduce padding", then cut into
consecutive chunks of ``params.batch_size``, one batcher call each:

* MR, CR, SUBJ, MPQA (``binary.py:40-48``): positive then negative samples, sorted by
  ``(len(words), label)``; one split.
* SST2 (``sst.py:61-73``): train, dev, test in turn, each sorted by ``(len(words), label)``.
* TREC (``trec.py:50-73``): train, then test, each sorted by ``(len(words), label)``.
* MRPC (``mrpc.py:57-76``): train, then test, each sorted by ``(len(words1), len(words2), label)``;
  per split all the sentence-1 batches, then the sentence-2 batches over the same rows (a pair's two
  sentences are never in one batch).

``words`` is SentEval's ``line.split()``, so ``len(words)`` is :func:`len` of ``text.split()`` of the
re-joined texts of :mod:`aoe.data.transfer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "OFFICIAL_BATCH_SIZES",
    "OFFICIAL_MODE_BATCH_SIZES",
    "SENTEVAL_SORTS",
    "SORTS",
    "SentEvalBatches",
    "TransferBatch",
    "official_batch_size",
    "senteval_order",
    "senteval_sts_batches",
    "task_batches",
    "transfer_batches",
    "transfer_order",
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

# angle-emb release -> SentEval mode -> (where the script sets it, its SentEval batch_size): the same
# params serve every task of --task_set sts / transfer / full. "dev" shares fasttest's params.
OFFICIAL_MODE_BATCH_SIZES: dict[str, dict[str, tuple[str, int]]] = {
    "0.1.1": {"test": ("fcb6223 eval.py:114", 16), "fasttest": ("fcb6223 eval.py:109", 32)},
    "0.4.6": {"test": ("1c5515b examples/NLI/eval_nli.py:112", 2), "fasttest": ("1c5515b examples/NLI/eval_nli.py:107", 32)},
}


def official_batch_size(release: str, mode: str = "test") -> int:
    """The SentEval ``batch_size`` of angle-emb ``release``'s evaluation script in ``mode`` (:data:`OFFICIAL_MODE_BATCH_SIZES`)."""
    try:
        return OFFICIAL_MODE_BATCH_SIZES[release][mode][1]
    except KeyError:
        raise ValueError(f"no official SentEval batch size for release {release!r} in mode {mode!r}; known: "
                         f"{ {r: sorted(m) for r, m in OFFICIAL_MODE_BATCH_SIZES.items()} }") from None


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


# The order in which SentEval's transfer loaders embed a task's splits (keys of aoe.data.transfer.TransferData.splits)
TRANSFER_SPLIT_ORDER = ("all", "train", "dev", "test")


class TransferBatch(NamedTuple):
    """One batcher call of a transfer task: ``split`` (``all`` for MR/CR/SUBJ/MPQA), ``side``
    (``sentences``, or MRPC's ``sentences2``) and ``rows``, positions in that split's lists."""

    split: str
    side: str
    rows: list[int]


def transfer_order(sentences: Sequence[str], labels: Sequence[int], sentences2: Sequence[str] | None = None) -> list[int]:
    """Row positions of one transfer split in SentEval's order: a stable sort by ``(words, label)``,
    for MRPC ``(words1, words2, label)`` (module docstring)."""
    n = len(labels)
    if len(sentences) != n or (sentences2 is not None and len(sentences2) != n):
        raise ValueError(f"sentences, sentences2 and labels differ in length ({len(sentences)}, "
                         f"{None if sentences2 is None else len(sentences2)}, {n})")
    n1 = [len(s.split()) for s in sentences]
    if sentences2 is None:
        keys = list(zip(n1, labels))
    else:
        keys = list(zip(n1, [len(s.split()) for s in sentences2], labels))
    return sorted(range(n), key=keys.__getitem__)


def transfer_batches(data, batch_size: int) -> list[TransferBatch]:
    """SentEval's batcher calls on a transfer task (:class:`aoe.data.transfer.TransferData`), in its call order.

    Per split (:data:`TRANSFER_SPLIT_ORDER`), :func:`transfer_order`'s rows in consecutive chunks of
    ``batch_size`` (the last one shorter); a pair task's sentence-1 chunks, then its sentence-2 chunks.
    The chunks of one (split, side) concatenated are that split's order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    unknown = sorted(set(data.splits) - set(TRANSFER_SPLIT_ORDER))
    if unknown:
        raise ValueError(f"{data.task}: unknown split(s) {unknown}; known: {list(TRANSFER_SPLIT_ORDER)}")
    out: list[TransferBatch] = []
    for name in (s for s in TRANSFER_SPLIT_ORDER if s in data.splits):
        split = data.splits[name]
        order = transfer_order(split.sentences, split.labels, split.sentences2)
        sides = ("sentences",) if split.sentences2 is None else ("sentences", "sentences2")
        for side in sides:
            out += [TransferBatch(name, side, order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    return out

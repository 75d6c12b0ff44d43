"""SentEval's transfer-task protocol (MR, CR, SUBJ, MPQA, SST2, TREC, MRPC), as SimCSE runs it.

SimCSE, AnglE and AoE report transfer accuracy with SimCSE's fork of SentEval
(``evaluation.py --task_set transfer``). This module re-implements that protocol
so that, on the same embeddings, it gives SentEval's numbers:

* MR, CR, SUBJ, MPQA: nested cross-validation (SentEval's ``InnerKFoldClassifier``):
  an outer stratified k-fold; in each outer training part an inner stratified
  k-fold picks the L2 penalty, a model with that penalty is refit on the whole
  outer training part (early-stopped on a random 5 % of it) and scored on the
  outer test fold. Both k-folds shuffle with the fixed seed 1111.
* TREC, MRPC: k-fold cross-validation on train to pick the penalty, then a refit
  on all of train (early-stopped on 5 % of it) scored on test (``KFoldClassifier``).
  MRPC classifies the pair features ``[|u - v|, u * v]`` (SentEval's MRPC; note
  that it does *not* concatenate u and v) and also reports F1.
* SST2: the penalty is picked on the dev split, test accuracy of that model
  (``SplitClassifier``, exposed as :func:`fit_split_classifier`).

The classifier is SentEval's PyTorch logistic regression (or scikit-learn's), seeded and
rounded as SentEval does: :mod:`aoe.evaluate.classifier`, shared with the NLI probe.

Samples are ordered as SentEval orders them before encoding (a stable sort by
token count, then label), because that order decides the folds and shuffles.
With a masked pooling every unique sentence is embedded once (:func:`evaluate_transfer`);
with a batch-dependent official pooling (:data:`aoe.model.pooling.BATCH_DEPENDENT_POOLINGS`) each
text is embedded in the batcher call SentEval made for it, at the official script's batch
size (:func:`evaluate_transfer_in_senteval_batches`, :mod:`aoe.evaluate.senteval_batches`).
Computation runs on the CPU in float32, as SentEval does on a GPU; matching
SentEval to the last digit therefore needs SentEval run on a CPU too (the
parity tests do so).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace

import numpy as np
from sklearn.metrics import f1_score

from aoe.data.transfer import (
    TRANSFER_TASKS,
    TransferData,
    TransferSplit,
    read_transfer,
    resolve_transfer_root,
)
from aoe.evaluate.classifier import (
    INNER_KFOLD_SHUFFLE_SEED,
    SKLEARN_KFOLD_REGS,
    SKLEARN_REGS,
    TORCH_REGS,
    VALIDATION_SPLIT,
    ClassifierParams,
    classifier_fits,
    fit_split_classifier,
    inner_kfold_classifier,
    kfold_classifier,
)
from aoe.evaluate.senteval_batches import transfer_batches, transfer_order
from aoe.util.progress import Progress, progress

__all__ = [
    "TASKS",
    "cap_transfer",
    "embed_in_senteval_batches",
    "evaluate_transfer",
    "evaluate_transfer_in_senteval_batches",
]

TASKS: tuple[str, ...] = TRANSFER_TASKS


def cap_transfer(data: TransferData, max_rows: int, seed: int = 0) -> TransferData:
    """``data`` with at most ``max_rows`` samples in each split: a seeded random subset in file order
    (the same rows for every model; a split that small already stays whole).

    A CPU budget (``evaluation.transfer.max_rows``), recorded in transfer.json; the paper's
    protocol reads every sample (SentEval has no such cap).
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")

    def cap(split: TransferSplit) -> TransferSplit:
        if len(split) <= max_rows:
            return split
        keep = np.sort(np.random.RandomState(seed).choice(len(split), size=max_rows, replace=False))
        pick = lambda xs: [xs[i] for i in keep]  # noqa: E731
        return TransferSplit(pick(split.sentences), pick(split.labels), None if split.sentences2 is None else pick(split.sentences2))

    return replace(data, splits={name: cap(split) for name, split in data.splits.items()})


def _sentevals_order(split: TransferSplit) -> np.ndarray:
    """Sample order after SentEval's stable sort by token count(s), then label
    (:func:`aoe.evaluate.senteval_batches.transfer_order`)."""
    return np.array(transfer_order(split.sentences, split.labels, split.sentences2), dtype=np.int64)


def _task_sentences(data: TransferData) -> list[str]:
    out: list[str] = []
    for split in data.splits.values():
        out.extend(split.sentences)
        if split.sentences2 is not None:
            out.extend(split.sentences2)
    return out


# split name -> (u, v or None): the embeddings of a split's sentences (and MRPC's second sentences), in SentEval's order
SplitEmbeddings = Mapping[str, tuple[np.ndarray, np.ndarray | None]]


def _deduplicated_embeddings(
    data: TransferData, emb: np.ndarray, row: Mapping[str, int]
) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Each split's rows of ``emb`` (one per unique text, ``row``: text -> index) in SentEval's order."""
    out = {}
    for name, split in data.splits.items():
        order = _sentevals_order(split)
        u = emb[np.array([row[split.sentences[i]] for i in order], dtype=np.int64)]
        v = None if split.sentences2 is None else emb[np.array([row[split.sentences2[i]] for i in order], dtype=np.int64)]
        out[name] = (u, v)
    return out


def _features(split: TransferSplit, u: np.ndarray, v: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a split in SentEval's order (``u``, ``v``: its embeddings in that order); pairs become
    SentEval's MRPC features [|u - v|, u * v]."""
    y = np.asarray(split.labels, dtype=np.int64)[_sentevals_order(split)]
    if split.sentences2 is None:
        return u, y
    return np.c_[np.abs(u - v), u * v], y


def _protocol(data: TransferData) -> str:
    """Which SentEval classifier a task's splits call for (a :func:`classifier_fits` kind)."""
    kinds = {frozenset({"all"}): "inner_kfold", frozenset({"train", "dev", "test"}): "split", frozenset({"train", "test"}): "kfold"}
    kind = kinds.get(frozenset(data.splits))
    if kind is None:
        raise ValueError(f"{data.task}: no SentEval classifier for splits {sorted(data.splits)}")
    return kind


def _run_task(data: TransferData, embedded: SplitEmbeddings, params: ClassifierParams, seed: int, bar: Progress | None = None) -> dict:
    s = data.splits
    kind = _protocol(data)

    def features(name: str) -> tuple[np.ndarray, np.ndarray]:
        return _features(s[name], *embedded[name])

    if kind == "inner_kfold":
        X, y = features("all")
        result = inner_kfold_classifier(X, y, data.n_classes, params, seed, bar=bar)
        return {**result, "ndev": len(y), "ntest": len(y)}
    if kind == "split":
        (xtr, ytr), (xdv, ydv), (xte, yte) = (features(k) for k in ("train", "dev", "test"))
        result = fit_split_classifier(xtr, ytr, xdv, ydv, xte, yte, params, seed, n_classes=data.n_classes, bar=bar)
        return {"devacc": result["devacc"], "acc": result["acc"], "ndev": len(ydv), "ntest": len(yte)}
    if kind == "kfold":
        (xtr, ytr), (xte, yte) = (features(k) for k in ("train", "test"))
        result = kfold_classifier(xtr, ytr, xte, yte, data.n_classes, params, seed, bar=bar)
        out = {"devacc": result["devacc"], "acc": result["acc"], "ndev": len(ytr), "ntest": len(yte)}
        if data.pair:
            out["f1"] = float(round(100 * f1_score(yte, result["yhat"]), 2))
        return out
    raise ValueError(f"{data.task}: no SentEval classifier for splits {sorted(s)}")


def _wanted_tasks(
    tasks: Sequence[str] | None, data_root: str | None, data: Mapping[str, TransferData] | None
) -> tuple[list[str], dict[str, TransferData]]:
    """The tasks asked for (default all seven, each once) and their data, read from ``data_root`` where not supplied."""
    wanted = list(TASKS) if tasks is None else list(dict.fromkeys(tasks))
    unknown = sorted(set(wanted) - set(TASKS))
    if unknown:
        raise KeyError(f"unknown transfer task(s) {unknown}; known: {list(TASKS)}")
    if not wanted:
        raise ValueError("no transfer task requested")
    supplied = dict(data or {})
    if any(t not in supplied for t in wanted):
        if data_root is None:
            raise ValueError(f"data_root is needed to read {[t for t in wanted if t not in supplied]}")
        root = resolve_transfer_root(data_root)
        supplied.update({t: read_transfer(root, t) for t in wanted if t not in supplied})
    return wanted, supplied


def _classify(wanted: list[str], supplied: Mapping[str, TransferData], embedded: Mapping[str, SplitEmbeddings],
              params: ClassifierParams, seed: int) -> tuple[dict[str, dict], dict[str, float]]:
    """Each task's SentEval classifier on its embeddings, with a progress line per task."""
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    for task in wanted:
        start = time.perf_counter()
        # one progress line per interval with an ETA (aoe.util.progress): a task fits up to 410 classifiers
        total = classifier_fits(_protocol(supplied[task]), params)
        with progress(total=total, desc=f"transfer {task}", unit="fit") as bar:
            results[task] = _run_task(supplied[task], embedded[task], params, seed, bar)
        seconds[task] = time.perf_counter() - start
    return results, seconds


def _protocol_record(mode: str, seed: int, params: ClassifierParams) -> dict:
    return {
        "name": "senteval-transfer",
        "mode": mode,
        "seed": seed,
        **asdict(params),
        "reg_grid": (
            list(TORCH_REGS)
            if params.usepytorch
            else {"inner_kfold_and_split": list(SKLEARN_REGS), "kfold": list(SKLEARN_KFOLD_REGS)}
        ),
        "validation_split": VALIDATION_SPLIT,
        "inner_kfold_shuffle_seed": INNER_KFOLD_SHUFFLE_SEED,
        "mrpc_features": "[|u-v|, u*v]",
        "metric": "accuracy x100, rounded to 2 decimals as SentEval rounds",
        "reference": f"SimCSE evaluation.py --mode {mode} --task_set transfer (SentEval fork, princeton-nlp/SimCSE@49fa580)",
    }


def evaluate_transfer(
    encode: Callable[[list[str]], np.ndarray],
    tasks: Sequence[str] | None = None,
    data_root: str | None = None,
    mode: str = "test",
    seed: int = 1111,
    *,
    usepytorch: bool = True,
    data: Mapping[str, TransferData] | None = None,
) -> dict:
    """Evaluate ``encode`` (list[str] -> (N, H) array) on SentEval's transfer tasks.

    ``tasks`` defaults to all seven; ``data_root`` is SentEval's downstream
    folder or the data mirror root. ``data`` may supply already-read tasks
    instead (then ``data_root`` is only needed for the others). ``mode`` picks
    SimCSE's "test" or "fasttest" classifier settings; ``usepytorch=False``
    switches to scikit-learn's logistic regression.

    Every unique sentence of the requested tasks is embedded once, in one call.
    Each task reports its classifier fits on stderr with an ETA (:mod:`aoe.util.progress`).
    Returns ``{"tasks": {task: {"acc", "devacc", "ndev", "ntest"[, "f1"]}},
    "avg": mean acc, "protocol": {...}, "embedding": {...}, "timing": {...}}``.
    """
    wanted, supplied = _wanted_tasks(tasks, data_root, data)
    params = ClassifierParams.from_mode(mode, usepytorch=usepytorch)

    sentences = [s for t in wanted for s in _task_sentences(supplied[t])]
    unique = list(dict.fromkeys(sentences))
    start = time.perf_counter()
    emb = np.asarray(encode(unique))
    encode_seconds = time.perf_counter() - start
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(f"encode returned shape {emb.shape} for {len(unique)} sentences; expected (N, H)")
    row = {s: i for i, s in enumerate(unique)}

    embedded = {t: _deduplicated_embeddings(supplied[t], emb, row) for t in wanted}
    results, seconds = _classify(wanted, supplied, embedded, params, seed)
    return {
        "tasks": results,
        "avg": float(np.mean([results[t]["acc"] for t in wanted])),
        "protocol": _protocol_record(mode, seed, params),
        "embedding": {
            "unique_sentences": len(unique),
            "sentences_in_tasks": len(sentences),
            "dim": int(emb.shape[1]),
            "dtype": str(emb.dtype),
        },
        "timing": {"encode_seconds": encode_seconds, "classify_seconds": seconds},
    }


# batcher calls handed to encode_batches at a time: a progress line between them (SST2: ~4,400 calls at 16)
_BATCHES_PER_CALL = 256


def embed_in_senteval_batches(
    encode_batches: Callable[[list[list[str]]], np.ndarray], data: TransferData, batch_size: int
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray | None]], int]:
    """A task's split embeddings in SentEval's order, each text embedded in the batcher call SentEval
    makes for it (:func:`aoe.evaluate.senteval_batches.transfer_batches`); and the number of texts embedded.

    ``encode_batches``: list of text batches -> (sum of their sizes, H) array, one forward pass per batch
    (:meth:`aoe.model.encoder.Encoder.encode_batches`). Nothing is deduplicated: a text repeated in a task may
    embed differently in another batch, as it did there.
    """
    calls = transfer_batches(data, batch_size)
    texts = [[getattr(data.splits[c.split], c.side)[i] for i in c.rows] for c in calls]
    parts: list[np.ndarray] = []
    with progress(total=len(calls), desc=f"transfer {data.task} embed", unit="batch") as bar:
        for start in range(0, len(calls), _BATCHES_PER_CALL):
            chunk = texts[start : start + _BATCHES_PER_CALL]
            emb = np.asarray(encode_batches(chunk))
            if emb.ndim != 2 or emb.shape[0] != sum(map(len, chunk)):
                raise ValueError(f"encode_batches returned shape {emb.shape} for {sum(map(len, chunk))} texts; expected (N, H)")
            parts.append(emb)
            bar.update(len(chunk))
    emb = np.concatenate(parts)
    # the calls of one (split, side) follow each other and together are that split's order
    sides: dict[tuple[str, str], list[np.ndarray]] = {}
    offset = 0
    for call in calls:
        sides.setdefault((call.split, call.side), []).append(emb[offset : offset + len(call.rows)])
        offset += len(call.rows)
    out = {}
    for name, split in data.splits.items():
        u = np.concatenate(sides[(name, "sentences")])
        v = None if split.sentences2 is None else np.concatenate(sides[(name, "sentences2")])
        out[name] = (u, v)
    return out, offset


def evaluate_transfer_in_senteval_batches(
    encode_batches: Callable[[list[list[str]]], np.ndarray],
    batch_size: int,
    tasks: Sequence[str] | None = None,
    data_root: str | None = None,
    mode: str = "test",
    seed: int = 1111,
    *,
    usepytorch: bool = True,
    data: Mapping[str, TransferData] | None = None,
) -> dict:
    """:func:`evaluate_transfer` for a batch-dependent pooling (:data:`aoe.model.pooling.BATCH_DEPENDENT_POOLINGS`).

    The official poolings average over padding or over the whole batch's tokens, so a text's embedding
    depends on the texts SentEval batched it with. Here every text is embedded where the official
    evaluation embedded it: SentEval's batcher calls of ``batch_size`` texts in its order
    (:func:`embed_in_senteval_batches`); the classifiers are :func:`evaluate_transfer`'s.
    """
    wanted, supplied = _wanted_tasks(tasks, data_root, data)
    params = ClassifierParams.from_mode(mode, usepytorch=usepytorch)
    start = time.perf_counter()
    embedded, n_texts, dim = {}, 0, None
    for task in wanted:
        embedded[task], n = embed_in_senteval_batches(encode_batches, supplied[task], batch_size)
        n_texts += n
        dim = next(iter(embedded[task].values()))[0].shape[1]
    encode_seconds = time.perf_counter() - start
    results, seconds = _classify(wanted, supplied, embedded, params, seed)
    return {
        "tasks": results,
        "avg": float(np.mean([results[t]["acc"] for t in wanted])),
        "protocol": {**_protocol_record(mode, seed, params),
                     "batches": {"batch_size": int(batch_size),
                                 "order": "SentEval's, per split and side (aoe.evaluate.senteval_batches.transfer_batches)"}},
        "embedding": {"sentences_in_tasks": int(n_texts), "dim": int(dim)},
        "timing": {"encode_seconds": encode_seconds, "classify_seconds": seconds},
    }

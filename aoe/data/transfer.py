"""Readers for SentEval's transfer (classification) tasks in its ``data/downstream`` layout.

SimCSE, AnglE and AoE report MR, CR, SUBJ, MPQA, SST2, TREC and MRPC with
SimCSE's fork of SentEval, so these readers return exactly the samples that code
feeds to the encoder, in the order it reads them:

* MR, CR, SUBJ, MPQA: two files per task read as latin-1 and split with
  ``str.splitlines`` (SentEval reads the whole file, then ``splitlines``); the
  positive file (label 1) comes first, then the negative one (label 0). For
  SUBJ the *objective* file plays the positive role (label 1), as in SentEval.
  Blank lines are kept as empty samples (CR has 4, MPQA 3): SentEval encodes them,
  and dropping them would change the cross-validation folds.
* SST2 (``SST/binary/sentiment-{train,dev,test}``): UTF-8, file iteration
  (universal newlines), each stripped line split on tab into sentence and label.
* TREC (``TREC/train_5500.label`` for train, ``TREC/TREC_10.label`` for test):
  latin-1, ``COARSE:fine sentence``; the coarse label maps ABBR, DESC, ENTY,
  HUM, LOC, NUM to 0..5 and the fine label is discarded with the first word.
* MRPC (``MRPC/msr_paraphrase_{train,test}.txt``): UTF-8 (the BOM stays in the
  header, which is dropped), tab-separated quality, id1, id2, sentence1,
  sentence2; the first line is the header.

Every sentence is whitespace-split and re-joined with single spaces, which is
what SentEval's ``split()`` followed by SimCSE's ``' '.join`` batcher yields.
SentEval then sorts samples by length before encoding; that order decides the
cross-validation folds, so it is part of the evaluation protocol
(:mod:`aoe.evaluate.transfer`), not of these readers, which keep file order.

Where SentEval would crash (a line with too few fields) or silently read
something else (a different file, a missing MRPC header), these readers raise
:class:`~aoe.data.io.DataError` naming the file and line; every file they read
is then held to its task's contract (:data:`aoe.data.contracts.TRANSFER_CONTRACTS`:
the labels the task allows, no empty sentence but the published file's blank
lines, the published sample count), one error naming the file, the field, the
first offending lines and the fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aoe.data.contracts import TRANSFER_CONTRACTS, check_transfer_file
from aoe.data.io import DataError, read_text, text_lines
from aoe.data.mirror import DOWNSTREAM_SUBDIR, check_published, find_downstream

TRANSFER_TASKS: tuple[str, ...] = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")

# (positive file, negative file) of the binary tasks, as SentEval pairs them.
_BINARY_FILES: dict[str, tuple[str, str]] = {
    "MR": ("MR/rt-polarity.pos", "MR/rt-polarity.neg"),
    "CR": ("CR/custrev.pos", "CR/custrev.neg"),
    "SUBJ": ("SUBJ/subj.objective", "SUBJ/subj.subjective"),
    "MPQA": ("MPQA/mpqa.pos", "MPQA/mpqa.neg"),
}

_SPLIT_FILES: dict[str, dict[str, str]] = {
    "SST2": {
        "train": "SST/binary/sentiment-train",
        "dev": "SST/binary/sentiment-dev",
        "test": "SST/binary/sentiment-test",
    },
    "TREC": {"train": "TREC/train_5500.label", "test": "TREC/TREC_10.label"},
    "MRPC": {"train": "MRPC/msr_paraphrase_train.txt", "test": "MRPC/msr_paraphrase_test.txt"},
}

# Samples per file (MRPC without its header line), labels and blank lines: the tasks' contracts
# (aoe.data.contracts.TRANSFER_CONTRACTS), written once there.
EXPECTED_ROWS: dict[str, int] = {rel: n for c in TRANSFER_CONTRACTS.values() for rel, n in c.rows.items()}

N_CLASSES: dict[str, int] = {task: c.n_classes for task, c in TRANSFER_CONTRACTS.items()}

TREC_LABELS: dict[str, int] = {label: i for i, label in enumerate(TRANSFER_CONTRACTS["TREC"].labels)}

_MRPC_HEADER_FIRST_FIELD = "Quality"
_MRPC_MIN_FIELDS = 5  # quality, #1 ID, #2 ID, #1 String, #2 String


@dataclass(frozen=True)
class TransferSplit:
    """One split of a transfer task, in file order.

    ``sentences2`` holds the second sentence of each pair for pair tasks (MRPC)
    and is None otherwise. Sentences may be empty strings where the file has a
    blank line (SentEval keeps those samples).
    """

    sentences: list[str]
    labels: list[int]
    sentences2: list[str] | None = None

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class TransferData:
    """A transfer task as SentEval reads it.

    ``splits`` maps split names to samples: ``{"all"}`` for the cross-validated
    binary tasks (MR, CR, SUBJ, MPQA), ``{"train", "dev", "test"}`` for SST2 and
    ``{"train", "test"}`` for TREC and MRPC. ``files`` are the paths read,
    relative to the downstream root.
    """

    task: str
    splits: dict[str, TransferSplit]
    n_classes: int
    pair: bool
    files: tuple[str, ...]


def _check_task(task: str) -> None:
    if task not in TRANSFER_TASKS:
        raise DataError(f"unknown transfer task {task!r}; valid: {', '.join(TRANSFER_TASKS)}")


def transfer_files(task: str) -> list[str]:
    """Paths, relative to the downstream root, that :func:`read_transfer` reads for ``task``.

    Lets a Snakemake rule declare them as inputs; :func:`read_transfer` checks
    them against their published sha256 (:func:`aoe.data.mirror.check_published`, which
    names them with :data:`aoe.data.mirror.DOWNSTREAM_SUBDIR` in front).
    """
    _check_task(task)
    if task in _BINARY_FILES:
        return list(_BINARY_FILES[task])
    return list(_SPLIT_FILES[task].values())


def resolve_transfer_root(path: str | os.PathLike[str]) -> Path:
    """SentEval's downstream folder from either the mirror root or the downstream folder itself.

    A folder holding any transfer task's folder counts: the workflow lays out only the tasks it
    evaluates (rule download_file), e.g. TREC/ and MRPC/ alone."""
    path = Path(path)
    task_dirs = sorted({f.split("/")[0] for task in TRANSFER_TASKS for f in transfer_files(task)})
    found = find_downstream(path, task_dirs)
    if found is not None:
        return found
    raise DataError(
        f"{path} is neither a data mirror (no {DOWNSTREAM_SUBDIR}/ inside) "
        f"nor a SentEval downstream folder (none of {', '.join(f'{d}/' for d in task_dirs)} inside)"
    )


def _check(path: Path, rel: str, task: str, expected_rows: Mapping[str, int] | None, *, texts: dict[str, list[str]],
           lines: list[int], labels: list[str] | None = None) -> None:
    """The file's contract (aoe.data.contracts.check_transfer_file), with the published count unless ``expected_rows`` is None."""
    rows = None if expected_rows is None else expected_rows.get(rel)
    check_transfer_file(path, rel, task, texts=texts, lines=lines, labels=labels, rows=rows)


def _join(text: str) -> str:
    return " ".join(text.split())


def _read_binary_file(root: Path, rel: str, task: str, expected_rows: Mapping[str, int] | None) -> list[str]:
    path = root / rel
    # splitlines, not file iteration: SentEval reads these files whole and calls
    # str.splitlines, which also breaks at \x0b, \x0c, \x1c-\x1e and \x85.
    sentences = [_join(line) for line in read_text(path, "latin-1").splitlines()]
    _check(path, rel, task, expected_rows, texts={"sentence": sentences}, lines=list(range(1, len(sentences) + 1)))
    return sentences


def _read_sst(root: Path, rel: str, expected_rows: Mapping[str, int] | None) -> TransferSplit:
    path = root / rel
    sentences: list[str] = []
    raw: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(text_lines(read_text(path, "utf-8")), start=1):
        fields = line.strip().split("\t")
        if len(fields) < 2:
            raise DataError(f"{path}:{number}: expected a sentence and a label separated by a tab")
        sentences.append(_join(fields[0]))
        raw.append(fields[1])
        numbers.append(number)
    _check(path, rel, "SST2", expected_rows, texts={"sentence": sentences}, lines=numbers, labels=raw)
    return TransferSplit(sentences, [int(label) for label in raw])


def _read_trec(root: Path, rel: str, expected_rows: Mapping[str, int] | None) -> TransferSplit:
    path = root / rel
    sentences: list[str] = []
    raw: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(text_lines(read_text(path, "latin-1")), start=1):
        parts = line.strip().split(":", 1)
        if len(parts) != 2 or " " not in parts[1]:
            raise DataError(f"{path}:{number}: expected 'COARSE:fine sentence'")
        coarse, rest = parts
        sentences.append(_join(rest.split(" ", 1)[1]))
        raw.append(coarse)
        numbers.append(number)
    _check(path, rel, "TREC", expected_rows, texts={"sentence": sentences}, lines=numbers, labels=raw)
    return TransferSplit(sentences, [TREC_LABELS[coarse] for coarse in raw])


def _read_mrpc(root: Path, rel: str, expected_rows: Mapping[str, int] | None) -> TransferSplit:
    path = root / rel
    lines = text_lines(read_text(path, "utf-8"))
    # SentEval drops the first line unseen; without a header that would lose a pair.
    if not lines or lines[0].lstrip("\ufeff").split("\t")[0] != _MRPC_HEADER_FIRST_FIELD:
        raise DataError(f"{path}:1: expected a header line starting with {_MRPC_HEADER_FIRST_FIELD!r}")
    first: list[str] = []
    second: list[str] = []
    raw: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.strip().split("\t")
        if len(fields) < _MRPC_MIN_FIELDS:
            raise DataError(
                f"{path}:{number}: expected at least {_MRPC_MIN_FIELDS} tab-separated fields, got {len(fields)}"
            )
        first.append(_join(fields[3]))
        second.append(_join(fields[4]))
        raw.append(fields[0])
        numbers.append(number)
    _check(path, rel, "MRPC", expected_rows, texts={"sentence1": first, "sentence2": second}, lines=numbers, labels=raw)
    return TransferSplit(first, [int(label) for label in raw], second)


def read_transfer(
    downstream_root: str | os.PathLike[str],
    task: str,
    expected_rows: Mapping[str, int] | None = EXPECTED_ROWS,
    *,
    published: bool = True,
) -> TransferData:
    """Load one transfer task from SentEval's downstream folder, as SentEval reads it.

    Raises DataError for an unknown task, a missing or undecodable file, a
    malformed line, a file whose sample count differs from ``expected_rows``
    (keyed by path relative to the root; default :data:`EXPECTED_ROWS`, the
    published sizes), or, with ``published``, a file whose sha256 is not the
    published one (:func:`aoe.data.mirror.check_published`). Synthetic data
    in SentEval's layout passes ``expected_rows=None, published=False``.
    """
    _check_task(task)
    root = Path(downstream_root)
    files = tuple(transfer_files(task))
    missing = [str(root / rel) for rel in files if not (root / rel).is_file()]
    if missing:
        raise DataError(f"{task}: missing file(s): {', '.join(missing)}")

    splits: dict[str, TransferSplit]
    if task in _BINARY_FILES:
        pos_rel, neg_rel = _BINARY_FILES[task]
        pos = _read_binary_file(root, pos_rel, task, expected_rows)
        neg = _read_binary_file(root, neg_rel, task, expected_rows)
        splits = {"all": TransferSplit(pos + neg, [1] * len(pos) + [0] * len(neg))}
    elif task == "SST2":
        splits = {split: _read_sst(root, rel, expected_rows) for split, rel in _SPLIT_FILES[task].items()}
    elif task == "TREC":
        splits = {split: _read_trec(root, rel, expected_rows) for split, rel in _SPLIT_FILES[task].items()}
    else:
        splits = {split: _read_mrpc(root, rel, expected_rows) for split, rel in _SPLIT_FILES[task].items()}
    if published:
        # after parsing, so that a malformed line is still named by its line number
        for rel in files:
            check_published(root / rel, f"{DOWNSTREAM_SUBDIR}/{rel}")
    return TransferData(task=task, splits=splits, n_classes=N_CLASSES[task], pair=task == "MRPC", files=files)

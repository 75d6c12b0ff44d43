"""Readers for the STS evaluation / training sets in SentEval's ``data/downstream`` layout.

The AoE paper reports STS numbers computed with SimCSE's fork of SentEval, so
these readers reproduce exactly what that code feeds to the encoder:

* STS12-16: ``STS.input.<subset>.txt`` holds tab-separated sentence pairs and
  ``STS.gs.<subset>.txt`` the gold score on the same line number; lines whose
  gold score is the empty string are dropped. Lines are split the way
  ``str.splitlines`` splits them, as SentEval does for these files.
* STS-B (``sts-{train,dev,test}.csv``): tab-separated, score in field 4 and the
  sentences in fields 5 and 6, after stripping the line.
* SICK-R (``SICK_{train,trial,test_annotated}.txt``): header line skipped, then
  sentences in fields 1 and 2 and the relatedness score in field 3. SICK trial
  is SentEval's dev split.

Every sentence is whitespace-split and re-joined with single spaces, which is
what SentEval's ``s.split()`` followed by SimCSE's ``' '.join`` batcher yields.
SentEval sorts pairs by length before encoding; that changes no correlation,
so rows here stay in file order.

Beyond what SentEval does, every problem that would silently change the
evaluation (a misaligned gold file, an empty sentence, a score off the scale,
a missing subset, a row count differing from the published one) raises
:class:`~aoe.data.io.DataError` naming the file and line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from aoe.data.io import DataError, read_text, text_lines

STS_DATASETS: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")

SPLITS: dict[str, tuple[str, ...]] = {
    "sts12": ("test",),
    "sts13": ("test",),
    "sts14": ("test",),
    "sts15": ("test",),
    "sts16": ("test",),
    "stsb": ("train", "dev", "test"),
    "sickr": ("train", "dev", "test"),
}

# SentEval's subset lists, in SentEval's order. STS13's SMT subset is not
# redistributed (licence), so SentEval and everyone comparing to it omit it.
STS_SUBSETS: dict[str, tuple[str, ...]] = {
    "sts12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "sts13": ("FNWN", "headlines", "OnWN"),
    "sts14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "sts15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "sts16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

_STS_YEAR_DIRS: dict[str, str] = {
    "sts12": "STS/STS12-en-test",
    "sts13": "STS/STS13-en-test",
    "sts14": "STS/STS14-en-test",
    "sts15": "STS/STS15-en-test",
    "sts16": "STS/STS16-en-test",
}

_PAIR_FILES: dict[tuple[str, str], str] = {
    ("stsb", "train"): "STS/STSBenchmark/sts-train.csv",
    ("stsb", "dev"): "STS/STSBenchmark/sts-dev.csv",
    ("stsb", "test"): "STS/STSBenchmark/sts-test.csv",
    ("sickr", "train"): "SICK/SICK_train.txt",
    ("sickr", "dev"): "SICK/SICK_trial.txt",
    ("sickr", "test"): "SICK/SICK_test_annotated.txt",
}

# Pairs with a gold score, as published (test sets) and as measured on the
# SentEval distribution (STS-B / SICK train and dev). A different count means a
# different file, and results would not be comparable with the paper.
EXPECTED_ROWS: dict[tuple[str, str], int] = {
    ("sts12", "test"): 3108,
    ("sts13", "test"): 1500,
    ("sts14", "test"): 3750,
    ("sts15", "test"): 3000,
    ("sts16", "test"): 1186,
    ("stsb", "train"): 5749,
    ("stsb", "dev"): 1500,
    ("stsb", "test"): 1379,
    ("sickr", "train"): 4500,
    ("sickr", "dev"): 500,
    ("sickr", "test"): 4927,
}

# Gold scale of each dataset (inclusive). SICK relatedness starts at 1.
SCORE_RANGE: dict[str, tuple[float, float]] = {
    "sts12": (0.0, 5.0),
    "sts13": (0.0, 5.0),
    "sts14": (0.0, 5.0),
    "sts15": (0.0, 5.0),
    "sts16": (0.0, 5.0),
    "stsb": (0.0, 5.0),
    "sickr": (1.0, 5.0),
}

COLUMNS: tuple[str, ...] = ("sentence1", "sentence2", "score", "split", "subset")

# STS task name in results -> dataset key of results/data/{dataset}/test.parquet
STS_TASKS = {
    "STS12": "sts12",
    "STS13": "sts13",
    "STS14": "sts14",
    "STS15": "sts15",
    "STS16": "sts16",
    "STSB": "stsb",
    "SICKR": "sickr",
}

_STSB_MIN_FIELDS = 7  # genre, file, year, id, score, s1, s2 (+ optional source columns)
_SICK_MIN_FIELDS = 4  # pair_ID, sentence_A, sentence_B, relatedness_score (+ entailment)
_SICK_HEADER_FIRST_FIELD = "pair_ID"

_Row = tuple[str, str, float]


def _check_known(dataset: str, split: str) -> None:
    if dataset not in SPLITS:
        raise DataError(f"unknown STS dataset {dataset!r}; valid: {', '.join(STS_DATASETS)}")
    if split not in SPLITS[dataset]:
        raise DataError(
            f"unknown split {split!r} for {dataset}; valid: {', '.join(SPLITS[dataset])}"
        )


def sts_files(dataset: str, split: str) -> list[str]:
    """Paths, relative to the downstream root, that :func:`read_sts` reads for this split.

    Lets a Snakemake rule declare them as inputs and the preparation check them
    against their published sha256 (:func:`aoe.data.mirror.check_published`, which names
    them with :data:`aoe.data.mirror.DOWNSTREAM_SUBDIR` in front).
    """
    _check_known(dataset, split)
    if dataset in STS_SUBSETS:
        year_dir = _STS_YEAR_DIRS[dataset]
        files: list[str] = []
        for subset in STS_SUBSETS[dataset]:
            files.append(f"{year_dir}/STS.input.{subset}.txt")
            files.append(f"{year_dir}/STS.gs.{subset}.txt")
        return files
    return [_PAIR_FILES[(dataset, split)]]


def _normalise(sentence: str, path: Path, line: int, column: str) -> str:
    normalised = " ".join(sentence.split())
    if not normalised:
        raise DataError(f"{path}:{line}: {column} is empty")
    return normalised


def _parse_score(raw: str, dataset: str, path: Path, line: int) -> float:
    try:
        score = float(raw)
    except ValueError:
        raise DataError(f"{path}:{line}: gold score {raw!r} is not a number") from None
    low, high = SCORE_RANGE[dataset]
    if not math.isfinite(score) or not low <= score <= high:
        raise DataError(
            f"{path}:{line}: gold score {raw!r} is outside the {dataset} scale [{low:g}, {high:g}]"
        )
    return score


def _read_sts_subset(input_path: Path, gold_path: Path, dataset: str) -> list[_Row]:
    # str.splitlines (not file iteration) because that is how SentEval splits these files.
    pairs = read_text(input_path, "UTF-8").splitlines()
    golds = read_text(gold_path, "UTF-8").splitlines()
    if len(pairs) != len(golds):
        raise DataError(
            f"{gold_path} has {len(golds)} lines but {input_path} has {len(pairs)}; "
            "gold scores would be misaligned with the sentence pairs"
        )
    rows: list[_Row] = []
    for line, (pair, gold) in enumerate(zip(pairs, golds, strict=True), start=1):
        fields = pair.split("\t")
        # A tab inside a sentence would shift the pair; SentEval would silently
        # drop the tail, so a line that is not exactly two fields is an error.
        if len(fields) != 2:
            raise DataError(
                f"{input_path}:{line}: expected 2 tab-separated sentences, got {len(fields)} fields"
            )
        if gold == "":
            continue  # unscored pair: SentEval drops it
        rows.append(
            (
                _normalise(fields[0], input_path, line, "sentence1"),
                _normalise(fields[1], input_path, line, "sentence2"),
                _parse_score(gold, dataset, gold_path, line),
            )
        )
    return rows


def _read_pair_file(
    path: Path,
    dataset: str,
    *,
    skip_header: bool,
    min_fields: int,
    columns: tuple[int, int, int],
) -> list[_Row]:
    """Read one STS-B / SICK style file; ``columns`` = (sentence1, sentence2, score) field indices."""
    # SentEval reads STS-B and SICK by iterating the open file: universal newlines
    # (SICK's test file has CRLF endings), not str.splitlines.
    lines = text_lines(read_text(path, "UTF-8"))
    start = 0
    if skip_header:
        if not lines or lines[0].split("\t")[0] != _SICK_HEADER_FIRST_FIELD:
            # Without the header SentEval would silently lose the first pair.
            raise DataError(f"{path}:1: expected a header line starting with {_SICK_HEADER_FIRST_FIELD!r}")
        start = 1
    s1_col, s2_col, score_col = columns
    rows: list[_Row] = []
    for index in range(start, len(lines)):
        line = index + 1
        fields = lines[index].strip().split("\t")
        if len(fields) < min_fields:
            raise DataError(
                f"{path}:{line}: expected at least {min_fields} tab-separated fields, got {len(fields)}"
            )
        rows.append(
            (
                _normalise(fields[s1_col], path, line, "sentence1"),
                _normalise(fields[s2_col], path, line, "sentence2"),
                _parse_score(fields[score_col], dataset, path, line),
            )
        )
    return rows


def read_sts(
    downstream: str | os.PathLike[str] | Mapping[str, str | os.PathLike[str]], dataset: str, split: str
) -> pd.DataFrame:
    """Load one STS dataset split as SentEval (SimCSE fork) would evaluate it.

    ``downstream`` is SentEval's downstream folder, or a mapping from each of
    :func:`sts_files` to where that file is (a mirror lacking some of them has
    them fetched into another folder).

    Returns a DataFrame with exactly the columns ``sentence1, sentence2, score,
    split, subset`` (score float64, the others pandas' ``str`` dtype, which is
    also what a parquet round trip gives back), rows in file order and, for STS12-16,
    subsets in SentEval's order. ``subset`` is the SemEval subset name for
    STS12-16 and the dataset name (``stsb`` / ``sickr``) otherwise.

    Raises DataError for an unknown dataset/split, a missing file, a malformed
    row, or a row count differing from :data:`EXPECTED_ROWS`.
    """
    _check_known(dataset, split)
    relpaths = sts_files(dataset, split)
    if isinstance(downstream, Mapping):
        unmapped = [rel for rel in relpaths if rel not in downstream]
        if unmapped:
            raise DataError(f"{dataset}/{split}: no path given for {', '.join(unmapped)}")
        paths = {rel: Path(downstream[rel]) for rel in relpaths}
    else:
        paths = {rel: Path(downstream) / rel for rel in relpaths}
    missing = [str(path) for path in paths.values() if not path.is_file()]
    if missing:
        raise DataError(f"{dataset}/{split}: missing file(s): {', '.join(missing)}")

    subsets: list[tuple[str, list[_Row]]] = []
    if dataset in STS_SUBSETS:
        year_dir = _STS_YEAR_DIRS[dataset]
        for subset in STS_SUBSETS[dataset]:
            rows = _read_sts_subset(
                paths[f"{year_dir}/STS.input.{subset}.txt"], paths[f"{year_dir}/STS.gs.{subset}.txt"], dataset
            )
            subsets.append((subset, rows))
    elif dataset == "stsb":
        rows = _read_pair_file(
            paths[relpaths[0]], dataset, skip_header=False, min_fields=_STSB_MIN_FIELDS, columns=(5, 6, 4)
        )
        subsets.append((dataset, rows))
    else:
        rows = _read_pair_file(
            paths[relpaths[0]], dataset, skip_header=True, min_fields=_SICK_MIN_FIELDS, columns=(1, 2, 3)
        )
        subsets.append((dataset, rows))

    all_rows = [row for _, rows in subsets for row in rows]
    expected = EXPECTED_ROWS.get((dataset, split))
    if expected is not None and len(all_rows) != expected:
        raise DataError(
            f"{dataset}/{split}: expected {expected} scored pairs, got {len(all_rows)} "
            f"from {', '.join(map(str, paths.values()))}"
        )

    return pd.DataFrame(
        {
            "sentence1": pd.Series([r[0] for r in all_rows], dtype="str"),
            "sentence2": pd.Series([r[1] for r in all_rows], dtype="str"),
            "score": pd.Series([r[2] for r in all_rows], dtype="float64"),
            "split": pd.Series([split] * len(all_rows), dtype="str"),
            "subset": pd.Series([name for name, rows in subsets for _ in rows], dtype="str"),
        },
        columns=list(COLUMNS),
    )

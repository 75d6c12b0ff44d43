"""SNLI / MultiNLI: readers and the three training formats built from them.

Sources:

* the mirror's ``nli/snli_1.0_{dev,test}.csv`` and ``nli/multinli_1.0_dev_{matched,mismatched}.csv``
  (columns pairID, sentence1, sentence2, label; rows whose gold label is ``-`` have no
  annotator majority and are dropped, as every NLI paper does);
* sentence-transformers' ``AllNLI.tsv.gz`` (SNLI + MultiNLI, columns split, dataset,
  filename, sentence1, sentence2, label), which the official AnglE NLI recipe downloads
  (SeanLee97/AnglE ``examples/NLI/data/download_data.sh``). Its ``train`` rows are the
  paper's NLI training data.

Formats (``aoe.losses.objectives``):

* ``pairs``: (premise, hypothesis, score) with entailment 1 and contradiction 0, neutral
  dropped (the official recipe, fcb6223:train_angle.py:94-111, and the angle-emb
  ``all_nli_angle_format`` sets; AoE §4 "Datasets", aoe-acl2024.txt l.109, names SNLI and MultiNLI only);
* ``triplets``: (premise, entailment, contradiction). Within one premise, the k-th
  entailment hypothesis is joined with the k-th contradiction in file order: SNLI and
  MultiNLI collected one hypothesis per label from the same annotator prompt, so the k-th
  of each belong together, as in SimCSE's ``nli_for_simcse.csv``;
* ``nli3``: (premise, hypothesis, class) with 0 entailment, 1 neutral, 2 contradiction
  (SBERT's SoftmaxLoss).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import zlib
from pathlib import Path

import pandas as pd

from aoe.data.io import DataError

__all__ = ["NLI_CLASSES", "NLI_MIRROR_FILES", "read_nli_csv", "read_allnli", "nli_formats"]

NLI_CLASSES = {"entailment": 0, "neutral": 1, "contradiction": 2}

# dataset -> split -> (mirror-relative file, labelled rows after dropping gold label "-")
NLI_MIRROR_FILES: dict[str, dict[str, tuple[str, int]]] = {
    "snli": {
        "dev": ("nli/snli_1.0_dev.csv", 9842),
        "test": ("nli/snli_1.0_test.csv", 9824),
    },
    "mnli": {
        "dev_matched": ("nli/multinli_1.0_dev_matched.csv", 9815),
        "dev_mismatched": ("nli/multinli_1.0_dev_mismatched.csv", 9832),
    },
}


def _check_rows(df: pd.DataFrame, path: Path, first_line: int) -> pd.DataFrame:
    """Keep rows with a gold label; reject unknown labels and empty sentences, naming the line."""
    labelled = df[df["label"] != "-"]
    bad = ~labelled["label"].isin(NLI_CLASSES)
    if bad.any():
        i = int(labelled.index[bad][0])
        raise DataError(f"{path}, line {i + first_line}: unknown NLI label {labelled.loc[i, 'label']!r}")
    for col in ("sentence1", "sentence2"):
        empty = labelled[col].str.strip() == ""
        if empty.any():
            i = int(labelled.index[empty][0])
            raise DataError(f"{path}, line {i + first_line}: empty {col}")
    return labelled.reset_index(drop=True)


def read_nli_csv(path: str | os.PathLike, expected_rows: int | None = None) -> pd.DataFrame:
    """The mirror's SNLI/MultiNLI csv as (pair_id, premise, hypothesis, label), unlabelled rows dropped."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: NLI file not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable csv ({exc})") from exc
    missing = {"pairID", "sentence1", "sentence2", "label"} - set(df.columns)
    if missing:
        raise DataError(f"{path}: missing columns {sorted(missing)} (has {list(df.columns)})")
    # data line k of the file is df row k - 2 (1-based lines, one header line)
    df = _check_rows(df, path, first_line=2)
    if expected_rows is not None and len(df) != expected_rows:
        raise DataError(f"{path}: {len(df)} labelled rows, expected {expected_rows}")
    return pd.DataFrame(
        {"pair_id": df["pairID"], "premise": df["sentence1"], "hypothesis": df["sentence2"], "label": df["label"]}
    )


def read_allnli(path: str | os.PathLike, split: str = "train") -> pd.DataFrame:
    """Rows of one split of sentence-transformers' AllNLI.tsv(.gz), as read_nli_csv returns them.

    The file is tab-separated without quoting (sentences contain quote characters), so
    it is parsed with ``csv.QUOTE_NONE``; a row with a wrong field count names its line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: AllNLI file not found")
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    line = 1
    want = ["split", "dataset", "filename", "sentence1", "sentence2", "label"]
    try:
        with opener(path, "rb") as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            reader = csv.reader(text, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header != want:
                raise DataError(f"{path}, line 1: header {header}, expected {want}")
            for line, fields in enumerate(reader, start=2):
                if len(fields) != len(want):
                    raise DataError(f"{path}, line {line}: {len(fields)} fields, expected {len(want)}")
                if fields[0] == split:
                    rows.append((f"{fields[1]}:{line}", fields[3], fields[4], fields[5], line))
    # a download or copy cut short ends the gzip stream early: without this, a bare EOFError naming no file
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DataError(f"{path}: not a whole gzip file ({type(exc).__name__}: {exc}; {line} lines read): a copy cut short; "
                        "delete it (and the mirror's copy, if it came from there) and rerun") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 after line {line} ({exc.reason}), where sentence-transformers' AllNLI is UTF-8; "
                        "delete it and rerun to fetch the published file") from None
    if not rows:
        raise DataError(f"{path}: no rows in split {split!r}")
    df = pd.DataFrame(rows, columns=["pair_id", "sentence1", "sentence2", "label", "line"])
    bad = ~df["label"].isin([*NLI_CLASSES, "-"])
    if bad.any():
        raise DataError(f"{path}, line {int(df.loc[bad, 'line'].iloc[0])}: unknown NLI label {df.loc[bad, 'label'].iloc[0]!r}")
    empty = (df["sentence1"].str.strip() == "") | (df["sentence2"].str.strip() == "")
    if empty.any():
        raise DataError(f"{path}, line {int(df.loc[empty, 'line'].iloc[0])}: empty sentence")
    df = df[df["label"] != "-"].reset_index(drop=True)
    return pd.DataFrame(
        {"pair_id": df["pair_id"], "premise": df["sentence1"], "hypothesis": df["sentence2"], "label": df["label"]}
    )


def nli_formats(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``pairs``, ``triplets`` and ``nli3`` tables of NLI rows (see the module docstring)."""
    two_way = df[df["label"] != "neutral"]
    pairs = pd.DataFrame(
        {
            "sentence1": two_way["premise"].to_numpy(),
            "sentence2": two_way["hypothesis"].to_numpy(),
            "score": (two_way["label"] == "entailment").astype("float64").to_numpy(),
            "pair_id": two_way["pair_id"].to_numpy(),
        }
    )
    nli3 = pd.DataFrame(
        {
            "sentence1": df["premise"].to_numpy(),
            "sentence2": df["hypothesis"].to_numpy(),
            "score": df["label"].map(NLI_CLASSES).astype("float64").to_numpy(),
            "pair_id": df["pair_id"].to_numpy(),
        }
    )
    # k-th entailment with k-th contradiction of the same premise, in file order
    rank = df.groupby(["premise", "label"], sort=False).cumcount()
    keyed = df.assign(k=rank)
    ent = keyed[keyed["label"] == "entailment"][["premise", "k", "hypothesis", "pair_id"]]
    con = keyed[keyed["label"] == "contradiction"][["premise", "k", "hypothesis", "pair_id"]]
    joined = ent.merge(con, on=["premise", "k"], suffixes=("_pos", "_neg"), sort=False)
    triplets = pd.DataFrame(
        {
            "sentence1": joined["premise"].to_numpy(),
            "sentence2": joined["hypothesis_pos"].to_numpy(),
            "sentence3": joined["hypothesis_neg"].to_numpy(),
            "pair_id": (joined["pair_id_pos"] + "|" + joined["pair_id_neg"]).to_numpy(),
        }
    )
    return {"pairs": pairs, "triplets": triplets, "nli3": nli3}

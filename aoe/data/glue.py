"""GLUE pair sets of the AnglE non-transfer table (MRPC, QQP, QNLI) and the GIS dataset, as scored pairs.

Every table has ``sentence1, sentence2, score`` with score 1 for a positive pair
(paraphrase, duplicate question, entailment, duplicate issue) and 0 otherwise, which
is the ``pairs`` format with ``score_range: [0, 1]``.

Sources:

* MRPC: GLUE's ``train.tsv`` (3,668 pairs) and ``dev.tsv`` (408), the Microsoft release's
  ``msr_paraphrase_train.txt`` split by GLUE's ``dev_ids.tsv`` (mirror ``glue/MRPC``; the two together
  are that file's 4,076 pairs, in its order), and the release's labelled ``msr_paraphrase_test.txt``
  (1,725; GLUE's ``test.tsv`` has no labels). These are SetFit/mrpc's train / validation / test
  splits, which AnglE's in-domain script trains, validates and tests on (fcb6223 train_angle.py:59-67,
  167-170). All tab-separated with a UTF-8 BOM, the release's header and no quoting: sentences contain
  quote characters.
* QNLI v1 dev: mirror ``glue/QNLI/dev.csv`` (question, sentence, entailment/not_entailment).
* QQP, QNLI train and GLUE v2 splits: the Hugging Face hub ``nyu-mll/glue`` (not mirrored;
  QNLI's label 0 is entailment there).
* GIS: the hub's ``WhereIsAI/github-issue-similarity`` (text1, text2, label).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from aoe.data.io import DataError

__all__ = ["MRPC_FILES", "QNLI_MIRROR_FILES", "HUB_PAIR_SETS", "read_mrpc", "read_qnli_csv", "hub_pairs"]

# split -> (mirror-relative file, rows)
MRPC_FILES = {
    "train": ("glue/MRPC/train.tsv", 3668),  # SetFit/mrpc train = GLUE train: the script's --task MRPC train split
    "dev": ("glue/MRPC/dev.tsv", 408),  # SetFit/mrpc validation = GLUE dev (dev_ids.tsv), the script's valid_ds
    "test": ("glue/MRPC/msr_paraphrase_test.txt", 1725),
}
QNLI_MIRROR_FILES = {"dev": ("glue/QNLI/dev.csv", 5732)}

# dataset -> hub repo, subfolder, text columns, how to map the hub label to a 0/1 score,
# and the rows each split must have (None: not checked).
HUB_PAIR_SETS: dict[str, dict] = {
    "qqp": {
        "repo": "nyu-mll/glue",
        "subdir": "qqp",
        "columns": ("question1", "question2"),
        "positive_label": 1,  # 1 = duplicate
        "splits": {"train": ("train", 363846), "dev": ("validation", 40430)},
    },
    "qnli": {
        "repo": "nyu-mll/glue",
        "subdir": "qnli",
        "columns": ("question", "sentence"),
        "positive_label": 0,  # 0 = entailment in the hub's ClassLabel
        "splits": {"train": ("train", 104743), "dev": ("validation", 5463)},
    },
    "gis": {
        "repo": "WhereIsAI/github-issue-similarity",
        "subdir": None,
        "columns": ("text1", "text2"),
        "positive_label": 1,
        "splits": {"train": ("train", 18565), "valid": ("valid", 1547), "test": ("test", 1548)},
    },
}


def read_mrpc(path: str | os.PathLike, expected_rows: int | None = None) -> pd.DataFrame:
    """An MRPC release file as (sentence1, sentence2, score, pair_id)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: MRPC file not found")
    rows = []
    with open(path, encoding="utf-8-sig") as fh:
        header = fh.readline().rstrip("\r\n").split("\t")
        if header[:1] != ["Quality"] or len(header) != 5:
            raise DataError(f"{path}, line 1: not an MRPC header: {header}")
        for line, raw in enumerate(fh, start=2):
            fields = raw.rstrip("\r\n").split("\t")
            if len(fields) != 5:
                raise DataError(f"{path}, line {line}: {len(fields)} tab-separated fields, expected 5")
            if fields[0] not in ("0", "1"):
                raise DataError(f"{path}, line {line}: quality {fields[0]!r} is not 0 or 1")
            if not fields[3].strip() or not fields[4].strip():
                raise DataError(f"{path}, line {line}: empty sentence")
            rows.append((fields[3], fields[4], float(fields[0]), f"{fields[1]}-{fields[2]}"))
    if expected_rows is not None and len(rows) != expected_rows:
        raise DataError(f"{path}: {len(rows)} rows, expected {expected_rows}")
    return pd.DataFrame(rows, columns=["sentence1", "sentence2", "score", "pair_id"])


def read_qnli_csv(path: str | os.PathLike, expected_rows: int | None = None) -> pd.DataFrame:
    """The mirror's QNLI csv (premise = question, hypothesis = sentence) as scored pairs."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: QNLI file not found")
    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    if list(df.columns) != ["premise", "hypothesis", "label"]:
        raise DataError(f"{path}: columns {list(df.columns)}, expected ['premise', 'hypothesis', 'label']")
    bad = ~df["label"].isin(["entailment", "not_entailment"])
    if bad.any():
        raise DataError(f"{path}, line {int(df.index[bad][0]) + 2}: unknown QNLI label {df.loc[bad, 'label'].iloc[0]!r}")
    if expected_rows is not None and len(df) != expected_rows:
        raise DataError(f"{path}: {len(df)} rows, expected {expected_rows}")
    return pd.DataFrame(
        {
            "sentence1": df["premise"],
            "sentence2": df["hypothesis"],
            "score": (df["label"] == "entailment").astype("float64"),
            "pair_id": [f"qnli-dev-{i}" for i in range(len(df))],
        }
    )


def hub_pairs(dataset: str, split: str, rows: pd.DataFrame, source: str) -> pd.DataFrame:
    """A hub split (already read into ``rows``) as scored pairs, checked against its known size.

    Rows with an empty text are dropped and counted in ``attrs['dropped_empty']``: GIS
    issues can have an empty body, and the collector drops those pairs too.
    """
    spec = HUB_PAIR_SETS[dataset]
    c1, c2 = spec["columns"]
    missing = {c1, c2, "label"} - set(rows.columns)
    if missing:
        raise DataError(f"{source}: missing columns {sorted(missing)} (has {list(rows.columns)})")
    expected = spec["splits"][split][1]
    if expected is not None and len(rows) != expected:
        raise DataError(f"{source}: {len(rows)} rows in {dataset}/{split}, expected {expected}")
    labels = pd.to_numeric(rows["label"], errors="coerce")
    if labels.isna().any() or not labels.isin([0, 1]).all():
        i = int(rows.index[labels.isna() | ~labels.isin([0, 1])][0])
        raise DataError(f"{source}, row {i}: label {rows.loc[i, 'label']!r} is not 0 or 1 (an unlabelled test split?)")
    t1, t2 = rows[c1].fillna("").astype(str), rows[c2].fillna("").astype(str)
    keep = (t1.str.strip() != "") & (t2.str.strip() != "")
    out = pd.DataFrame(
        {
            "sentence1": t1[keep].to_numpy(),
            "sentence2": t2[keep].to_numpy(),
            "score": (labels[keep] == spec["positive_label"]).astype("float64").to_numpy(),
            "pair_id": [f"{dataset}-{split}-{i}" for i in rows.index[keep]],
        }
    )
    out.attrs["dropped_empty"] = int((~keep).sum())
    return out

"""STS evaluation in SentEval's "all" setting, as reported by SimCSE, AnglE and AoE.

Protocol (SimCSE's fork of SentEval, ``evaluation.py --mode test --task_set sts``):

* similarity of a pair = cosine of the two pooled embeddings;
* STS12-STS16: Spearman correlation over the *concatenation* of all subsets of
  the year (SentEval's ``results[task]['all']['spearman']['all']``), rows with an
  empty gold score skipped, STS13 without the undistributed SMT subset;
* STS-B and SICK-R: Spearman on the test split (``results[task]['test']['spearman']``);
* reported x100; "avg" = mean of the seven.

Each sentence is embedded once however many tasks contain it.
"""

from __future__ import annotations

import math
import time
from typing import Mapping

import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr

__all__ = ["TASKS", "PROTOCOL", "cosine_rows", "sts_scores", "evaluate_sts"]

# task name in results -> dataset key of results/data/{dataset}/test.parquet
TASKS = {
    "STS12": "sts12",
    "STS13": "sts13",
    "STS14": "sts14",
    "STS15": "sts15",
    "STS16": "sts16",
    "STSB": "stsb",
    "SICKR": "sickr",
}

PROTOCOL = {
    "name": "senteval-sts-all",
    "similarity": "cosine",
    "metric": "spearman x100",
    "sts12_16": "spearman over the concatenation of all subsets ('all' setting)",
    "stsb_sickr": "spearman on the test split",
    "reference": "SimCSE evaluation.py --mode test --task_set sts (SentEval fork)",
}


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (N, H) arrays, in float64; a zero vector gives 0 (SentEval's nan_to_num)."""
    a = np.nan_to_num(a.astype(np.float64))
    b = np.nan_to_num(b.astype(np.float64))
    num = (a * b).sum(axis=1)
    den = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(num / den)


def sts_scores(sims: np.ndarray, table: pd.DataFrame) -> dict:
    """Spearman/Pearson x100 of predicted similarities against a task table's gold scores.

    The headline number is over all rows (SentEval's "all"); each subset is also
    reported on its own, for diagnosis.
    """
    gold = table["score"].to_numpy(dtype=np.float64)
    result = {
        "spearman": 100 * float(spearmanr(sims, gold).statistic),
        "pearson": 100 * float(pearsonr(sims, gold).statistic),
        "n": int(len(table)),
        "subsets": {},
    }
    for subset, idx in table.groupby("subset", sort=False).indices.items():
        result["subsets"][subset] = {
            "spearman": 100 * float(spearmanr(sims[idx], gold[idx]).statistic),
            "n": int(len(idx)),
        }
    return result


def evaluate_sts(encode, tables: Mapping[str, pd.DataFrame]) -> dict:
    """Evaluate ``encode`` (list[str] -> (N, H) array) on the task tables.

    ``tables`` maps task names of :data:`TASKS` to their test tables (columns
    sentence1, sentence2, score, subset). Every task of :data:`TASKS` must be
    present: a missing task is an error, never a silently smaller average.
    """
    missing = [t for t in TASKS if t not in tables]
    if missing:
        raise KeyError(f"STS evaluation needs all of {list(TASKS)}; missing {missing}")
    unique = pd.unique(pd.concat([pd.concat([t["sentence1"], t["sentence2"]]) for t in tables.values()], ignore_index=True))
    n_total = sum(2 * len(t) for t in tables.values())
    start = time.perf_counter()
    emb = encode(list(unique))
    encode_seconds = time.perf_counter() - start
    row = {s: i for i, s in enumerate(unique)}
    tasks = {}
    for task in TASKS:
        t = tables[task]
        sims = cosine_rows(emb[t["sentence1"].map(row).to_numpy()], emb[t["sentence2"].map(row).to_numpy()])
        tasks[task] = sts_scores(sims, t)
    avg = float(np.mean([tasks[t]["spearman"] for t in TASKS]))
    if not math.isfinite(avg):
        raise FloatingPointError(f"non-finite STS average: {[(t, tasks[t]['spearman']) for t in TASKS]}")
    return {
        "tasks": tasks,
        "avg": avg,
        "protocol": PROTOCOL,
        "embedding": {
            "unique_sentences": int(len(unique)),
            "sentences_in_tasks": int(n_total),
            "dedup_saved_share": 1 - len(unique) / n_total,
            "encode_seconds": encode_seconds,
            "sentences_per_s": len(unique) / encode_seconds if encode_seconds > 0 else None,
        },
    }

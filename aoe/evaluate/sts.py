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
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from aoe.data.sts import STS_TASKS as TASKS

__all__ = ["TASKS", "PROTOCOL", "unique_texts", "pair_embeddings", "cosine_rows", "sts_scores", "evaluate_sts"]

PROTOCOL = {
    "name": "senteval-sts-all",
    "similarity": "cosine",
    "metric": "spearman x100",
    "sts12_16": "spearman over the concatenation of all subsets ('all' setting)",
    "stsb_sickr": "spearman on the test split",
    "reference": "SimCSE evaluation.py --mode test --task_set sts (SentEval fork)",
}


def unique_texts(tables: Iterable[pd.DataFrame]) -> list[str]:
    """The distinct sentences of pair tables, first seen first (each table's sentence1, then sentence2).

    A model embeds this set once; it is also the key of the embedding cache, so every
    job that wants the STS evaluation's embeddings must build it this same way.
    """
    return list(pd.unique(pd.concat([pd.concat([t["sentence1"], t["sentence2"]]) for t in tables], ignore_index=True)))


def pair_embeddings(emb: np.ndarray, texts: list[str], table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``emb`` (one per text of ``texts``) for each pair's sentence1 and sentence2."""
    index = {s: i for i, s in enumerate(texts)}
    return emb[table["sentence1"].map(index).to_numpy()], emb[table["sentence2"].map(index).to_numpy()]


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two (N, H) arrays, computed exactly as SentEval does.

    SentEval scores each pair with ``nan_to_num(dot(u, v) / (norm(u) * norm(v)))``
    in the dtype the encoder returned (float32 for SimCSE's batcher). Vectorised
    formulas round differently, and with many exact ties (identical sentences score
    1.0) a last-bit difference changes Spearman in the 4th decimal, so this keeps
    SentEval's per-row operations; 40k pairs take about 0.1 s.
    """
    a, b = np.nan_to_num(a), np.nan_to_num(b)
    out = np.empty(len(a), dtype=np.result_type(a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        for i, (u, v) in enumerate(zip(a, b)):
            out[i] = np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v))
    return np.nan_to_num(out)


def _corr100(fn, x: np.ndarray, y: np.ndarray) -> float | None:
    """fn's correlation x100, or None where it is undefined (constant predictions)."""
    value = float(fn(x, y).statistic)
    return 100 * value if math.isfinite(value) else None


def sts_scores(sims: np.ndarray, table: pd.DataFrame, task: str = "") -> dict:
    """Spearman/Pearson x100 of predicted similarities against a task table's gold scores.

    The headline number is over all rows (SentEval's "all"); each subset is also
    reported on its own, for diagnosis (null where undefined). An undefined headline
    number is an error: it would otherwise vanish from the average.
    """
    from scipy.stats import pearsonr, spearmanr  # here: planning imports this module, and scipy.stats takes ~1 s

    gold = table["score"].to_numpy(dtype=np.float64)
    spearman = _corr100(spearmanr, sims, gold)
    if spearman is None:
        raise FloatingPointError(f"{task or 'STS task'}: Spearman is undefined (constant similarities over {len(sims)} pairs)")
    result = {
        "spearman": spearman,
        "pearson": _corr100(pearsonr, sims, gold),
        "n": int(len(table)),
        "subsets": {},
    }
    for subset, idx in table.groupby("subset", sort=False).indices.items():
        result["subsets"][subset] = {"spearman": _corr100(spearmanr, sims[idx], gold[idx]), "n": int(len(idx))}
    return result


CAP_SEED = 0


def cap_pairs(table: pd.DataFrame, max_pairs: int, seed: int = CAP_SEED) -> pd.DataFrame:
    """A seeded random subset of at most ``max_pairs`` rows, in the table's order (the same rows for every model)."""
    if len(table) <= max_pairs:
        return table
    return table.sample(n=max_pairs, random_state=seed).sort_index()


def scores_every_pair(task: str, max_pairs: int | None, uncapped_tasks: Iterable[str] | None = None) -> bool:
    """Whether the STS evaluation scores all of ``task``'s pairs under ``evaluation.sts`` ``max_pairs``/``uncapped_tasks``."""
    return max_pairs is None or task in set(uncapped_tasks or [])


def capped_tables(
    task_tables: Mapping[str, pd.DataFrame], max_pairs: int | None, uncapped_tasks: Iterable[str] | None = None
) -> dict[str, pd.DataFrame]:
    """The pairs the STS evaluation scores per task: all of them, or :func:`cap_pairs` of each task but ``uncapped_tasks``.

    The figures build the evaluation's text set from this too (an embedding cache hit needs the same set).
    """
    return {
        t: df if scores_every_pair(t, max_pairs, uncapped_tasks) else cap_pairs(df, max_pairs)
        for t, df in task_tables.items()
    }


def evaluate_sts(encode, tables: Mapping[str, pd.DataFrame], tasks: list[str] | None = None) -> dict:
    """Evaluate ``encode`` (list[str] -> (N, H) array) on the task tables.

    ``tables`` maps task names of :data:`TASKS` to their test tables (columns
    sentence1, sentence2, score, subset). ``tasks`` (default: all seven) must all be
    present: a missing task is an error. Tasks left out on purpose are written as
    explicit nulls and the average is then null too, never a smaller average.
    """
    wanted = list(TASKS) if tasks is None else [t for t in TASKS if t in tasks]
    unknown = sorted(set(tasks or []) - set(TASKS))
    if unknown:
        raise KeyError(f"unknown STS task(s) {unknown}; known: {list(TASKS)}")
    missing = [t for t in wanted if t not in tables]
    if missing:
        raise KeyError(f"STS evaluation needs all of {wanted}; missing {missing}")
    used = [tables[t] for t in wanted]
    unique = unique_texts(used)
    n_total = sum(2 * len(t) for t in used)
    start = time.perf_counter()
    emb = encode(unique)
    encode_seconds = time.perf_counter() - start
    results: dict[str, dict | None] = {}
    for task in TASKS:
        if task not in wanted:
            results[task] = None
            continue
        results[task] = sts_scores(cosine_rows(*pair_embeddings(emb, unique, tables[task])), tables[task], task)
    avg = float(np.mean([results[t]["spearman"] for t in TASKS])) if len(wanted) == len(TASKS) else None
    return {
        "tasks": results,
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


def evaluate_sts_in_senteval_batches(
    encode_batches, tables: Mapping[str, pd.DataFrame], batch_size: int, tasks: list[str] | None = None, copy: str = "angle"
) -> dict:
    """:func:`evaluate_sts` for a batch-dependent pooling (:data:`aoe.model.pooling.BATCH_DEPENDENT_POOLINGS`).

    The official poolings average over padding or over the whole batch's tokens, so a text's embedding
    depends on the texts it was batched with. Here every pair is embedded where the official
    evaluation embedded it: SentEval's batches of ``batch_size`` in its order
    (:func:`aoe.evaluate.senteval_batches.task_batches`), the sentence-1 texts of a batch in one pass and
    its sentence-2 texts in the next. ``encode_batches``: list of text batches -> (N, H) array. Nothing
    is deduplicated or cached: a repeated text may embed differently in another batch, as there.
    """
    from aoe.evaluate.senteval_batches import task_batches

    wanted = list(TASKS) if tasks is None else [t for t in TASKS if t in tasks]
    missing = [t for t in wanted if t not in tables]
    if missing:
        raise KeyError(f"STS evaluation needs all of {wanted}; missing {missing}")
    results: dict[str, dict | None] = {}
    start, n_texts = time.perf_counter(), 0
    for task in TASKS:
        if task not in wanted:
            results[task] = None
            continue
        table = tables[task].reset_index(drop=True)
        batches = task_batches(table, TASKS[task], batch_size, copy).batches
        rows = [i for batch in batches for i in batch]
        side = {}
        for column in ("sentence1", "sentence2"):
            texts = table[column].astype(str).tolist()
            emb = encode_batches([[texts[i] for i in batch] for batch in batches])
            side[column] = np.empty_like(emb)
            side[column][rows] = emb
        n_texts += 2 * len(rows)
        results[task] = sts_scores(cosine_rows(side["sentence1"], side["sentence2"]), table, task)
    encode_seconds = time.perf_counter() - start
    avg = float(np.mean([results[t]["spearman"] for t in TASKS])) if len(wanted) == len(TASKS) else None
    return {
        "tasks": results,
        "avg": avg,
        "protocol": {**PROTOCOL, "batches": {"senteval_copy": copy, "batch_size": int(batch_size),
                                             "order": "SentEval's, per subset (aoe.evaluate.senteval_batches)"}},
        "embedding": {"sentences_in_tasks": int(n_texts), "encode_seconds": encode_seconds},
    }


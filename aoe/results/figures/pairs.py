"""Per model: the embeddings of an STS test set's pairs and what every figure needs from them.

One small job per model (rule figure_pairs) writes an .npz that the plotting rules read;
changing plot code never re-embeds. The embeddings come through the model's on-disk
cache (:mod:`aoe.evaluate.embcache`) with the very text set the STS evaluation of the
same model embeds (the deduplicated sentences of the evaluated tasks, in task order),
so a model that was evaluated is not run again.

The .npz holds, per pair of the test table (in table order): ``sentence1``,
``sentence2``, ``score`` (gold), ``u``, ``v`` (float32 embeddings as the evaluation
saw them), ``cos`` (cosine as SentEval computes it), and the unscaled gradient norms of
:func:`aoe.results.figures.gradients.score_gradient_norms` (``grad_cos``, ``grad_angle``);
``meta`` is a JSON string (model, settings, cache hit, table hash).
"""

from __future__ import annotations

import json
import os
import time
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from aoe.data.contracts import read_manifest, read_table
from aoe.util.fsutil import atomic_file

__all__ = ["eval_text_set", "pair_arrays", "run_figure_pairs", "load_pairs"]


def eval_text_set(
    tables: Mapping[str, pd.DataFrame],
    tasks: list[str] | None,
    dataset: str,
    max_pairs: int | None = None,
    uncapped_tasks: list[str] | None = None,
) -> list[str]:
    """The distinct texts the STS evaluation embeds (aoe.evaluate.run.run_sts_evaluation), or ``dataset``'s own.

    ``tables`` maps dataset keys to test tables. When ``dataset`` is one of the
    evaluated tasks' datasets, and the evaluation scores all of its pairs, the text set
    is the evaluation's, capped as the evaluation caps the other tasks (an embedding
    cache hit); otherwise it is the table's own deduplicated sentences.
    """
    from aoe.data.sts import STS_TASKS
    from aoe.evaluate.sts import capped_tables, scores_every_pair, unique_texts

    wanted = [t for t in STS_TASKS if tasks is None or t in tasks]
    datasets = [STS_TASKS[t] for t in wanted]
    task = next((t for t in wanted if STS_TASKS[t] == dataset), None)
    whole = task is not None and scores_every_pair(task, max_pairs, uncapped_tasks)
    if not whole or any(d not in tables for d in datasets):
        return unique_texts([tables[dataset]])
    return unique_texts(capped_tables({t: tables[STS_TASKS[t]] for t in wanted}, max_pairs, uncapped_tasks).values())


def pair_arrays(encode: Callable[[list[str]], np.ndarray], texts: list[str], table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Embed ``texts`` once and return the per-pair arrays of ``table`` (see the module docstring)."""
    from aoe.evaluate.sts import cosine_rows, pair_embeddings
    from aoe.results.figures.gradients import score_gradient_norms

    u, v = pair_embeddings(np.asarray(encode(texts)), texts, table)
    grads = score_gradient_norms(u, v)
    return {
        "sentence1": table["sentence1"].to_numpy(dtype=str),
        "sentence2": table["sentence2"].to_numpy(dtype=str),
        "score": table["score"].to_numpy(dtype=np.float64),
        "u": u.astype(np.float32),
        "v": v.astype(np.float32),
        "cos": cosine_rows(u, v).astype(np.float64),
        "grad_cos": grads["grad_cos"],
        "grad_angle": grads["grad_angle"],
        "score_angle": grads["score_angle"],
    }


def run_figure_pairs(
    model_dir: str | os.PathLike,
    tables: list[str],
    manifests: list[str],
    dataset: str,
    out: str | os.PathLike,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = 64,
    max_length: int = 512,
    tasks: list[str] | None = None,
    cache_root: str | os.PathLike | None = None,
    cell: dict | None = None,
    max_pairs: int | None = None,
    uncapped_tasks: list[str] | None = None,
    eval_text: str = "raw",
) -> dict:
    """Write ``out`` (.npz) for ``model_dir`` on ``dataset``'s test pairs; returns its meta.

    ``tasks``, ``max_pairs`` and ``uncapped_tasks`` are the STS evaluation's settings: they
    decide the text set (:func:`eval_text_set`), never which pairs the figures draw; so does
    ``eval_text`` decide what a prompted model reads (the STS evaluation's, for a cache hit).
    """
    from aoe.evaluate.run import cached_encoder
    from aoe.util.provenance import library_versions

    start = time.perf_counter()
    frames, metas = {}, {}
    for table, manifest in zip(tables, manifests, strict=True):
        meta = read_manifest(manifest, table)
        frames[meta["dataset"]] = read_table(table, manifest)
        metas[meta["dataset"]] = meta
    if dataset not in frames:
        raise KeyError(f"figure pairs: no prepared test table for {dataset!r} among {sorted(frames)}")
    texts = eval_text_set(frames, tasks, dataset, max_pairs, uncapped_tasks)
    encoder, encode, cache = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root, prompt=prompt, eval_text=eval_text)
    arrays = pair_arrays(encode, texts, frames[dataset])
    meta = {
        "model": {"path": str(model_dir), "cell": cell, "pooling": encoder.pooling, "max_length": max_length},
        "data": {"dataset": dataset, "split": metas[dataset].get("split"), "table_sha256": metas[dataset].get("table_sha256"), "rows": len(frames[dataset])},
        "embedding": {"texts": len(texts), "cache": None if cache is None else {"dir": str(cache.dir), "hit": cache.hit}},
        "versions": library_versions(),
        "wall_seconds": time.perf_counter() - start,
    }
    with atomic_file(out, "wb") as fh:
        np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)
    return meta


def load_pairs(path: str | os.PathLike) -> dict:
    """The arrays of a figure_pairs .npz, ``meta`` decoded."""
    with np.load(path, allow_pickle=False) as z:
        data = {k: z[k] for k in z.files}
    data["meta"] = json.loads(str(data["meta"]))
    return data

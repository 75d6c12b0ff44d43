"""How many training pairs sit in the cosine saturation zone under a backbone (AoE §1, Fig. 1; §4).

The paper motivates the angle objective by the share of NLI training pairs whose
similarity is already high, where cos' gradient vanishes (§4 quotes shares above 0.95
and 0.8: paper_numbers.yaml ``acl2024_quoted``, compared in REPORT.md by
:data:`aoe.publish.quoted.QUOTED`). This module measures that share for any backbone and pair
table, overall and per gold label.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np
import pandas as pd

from aoe.data.contracts import read_manifest, read_table
from aoe.evaluate.sts import cosine_rows, pair_embeddings, unique_texts
from aoe.util.jsonio import write_json_atomic
from aoe.util.provenance import library_versions

__all__ = ["saturation_stats", "run_saturation"]

THRESHOLDS = (0.8, 0.9, 0.95)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _summary(cos: np.ndarray, thresholds: tuple[float, ...]) -> dict:
    return {
        "pairs": int(cos.size),
        "share_above": {f"{t:g}": float((cos > t).mean()) for t in thresholds},
        "mean": float(cos.mean()),
        "quantiles": {f"{q:g}": float(np.quantile(cos, q)) for q in QUANTILES},
    }


def saturation_stats(
    encode: Callable[[list[str]], np.ndarray], table: pd.DataFrame, thresholds: tuple[float, ...] = THRESHOLDS
) -> dict:
    """Cosine of every (sentence1, sentence2) pair; shares above each threshold, overall and per ``score``.

    Each distinct text is embedded once.
    """
    if table.empty:
        raise ValueError("saturation statistics of an empty table")
    texts = unique_texts([table])
    cos = cosine_rows(*pair_embeddings(np.asarray(encode(texts), dtype=np.float64), texts, table))
    result = {"unique_texts": len(texts), "all": _summary(cos, thresholds), "by_label": {}}
    if "score" in table:
        for label, idx in table.groupby("score").indices.items():
            result["by_label"][f"{label:g}"] = _summary(cos[idx], thresholds)
    return result


def run_saturation(
    model_dir: str | os.PathLike,
    table: str | os.PathLike,
    manifest: str | os.PathLike,
    out: str | os.PathLike,
    pooling: str | None = None,
    prompt: str | None = None,
    batch_size: int = 64,
    max_length: int = 128,
    max_pairs: int | None = None,
    seed: int = 0,
) -> dict:
    """saturation_stats of ``table`` under the model in ``model_dir``, written to ``out`` with provenance.

    ``max_pairs`` draws a seeded random subset (the full AllNLI train is 600k+ pairs).
    """
    from aoe.evaluate.run import cached_encoder

    start = time.perf_counter()
    df = read_table(table, manifest)
    if max_pairs is not None and len(df) > max_pairs:
        df = df.sample(n=max_pairs, random_state=seed).sort_index()
    encoder, encode, _ = cached_encoder(model_dir, pooling, batch_size, max_length, cache_root=None, prompt=prompt)
    result = saturation_stats(encode, df)
    meta = read_manifest(manifest, table)
    result.update(
        {
            "model": {"path": str(model_dir), "pooling": encoder.pooling},
            "data": {"dataset": meta["dataset"], "split": meta["split"], "table": str(table), "max_pairs": max_pairs, "seed": seed},
            "versions": library_versions(),
            "wall_seconds": time.perf_counter() - start,
        }
    )
    write_json_atomic(result, out)
    return result

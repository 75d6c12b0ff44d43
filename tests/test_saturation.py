"""Cosine-saturation statistics against hand-built embeddings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from aoe.evaluate.saturation import saturation_stats


def test_shares_by_label_from_known_angles():
    # unit vectors at chosen angles from e1: cos = 1.0, 0.96, 0.85, 0.0
    angles = {"a": 0.0, "b": np.arccos(0.96), "c": np.arccos(0.85), "d": np.pi / 2}
    vec = {k: np.array([np.cos(t), np.sin(t), 0.0]) for k, t in angles.items()}
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return np.stack([vec[t] for t in texts])

    table = pd.DataFrame(
        {"sentence1": ["a", "a", "a", "a"], "sentence2": ["a", "b", "c", "d"], "score": [1.0, 1.0, 0.0, 0.0]}
    )
    out = saturation_stats(encode, table)
    assert len(calls) == 1 and sorted(calls[0]) == ["a", "b", "c", "d"]  # each text embedded once
    assert out["all"]["share_above"] == {"0.8": 0.75, "0.9": 0.5, "0.95": 0.5}
    assert out["by_label"]["1"]["share_above"]["0.95"] == 1.0
    assert out["by_label"]["0"]["share_above"] == {"0.8": 0.5, "0.9": 0.0, "0.95": 0.0}
    assert out["by_label"]["0"]["mean"] == pytest.approx((0.85 + 0.0) / 2)


def test_empty_table_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        saturation_stats(lambda t: np.zeros((len(t), 2)), pd.DataFrame({"sentence1": [], "sentence2": []}))

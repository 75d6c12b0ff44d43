"""JSON results: a result file either exists complete or not at all, and a number that is
missing or not finite is null in it (never NaN, never 0)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from aoe.util.fsutil import atomic_file

__all__ = ["write_json_atomic", "json_safe", "finite_or_none"]


def finite_or_none(value) -> float | None:
    """A finite float, or None for a missing, non-numeric or non-finite value (printed as –, never 0)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def json_safe(obj):
    """``obj`` with non-finite floats as None and numpy scalars as Python numbers (keys as strings)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_json_atomic(obj, path: str | os.PathLike) -> Path:
    path = Path(path)
    with atomic_file(path) as fh:
        json.dump(obj, fh, indent=2, allow_nan=False)
        fh.write("\n")
    return path

"""Flickr30k captions of the Karpathy split (the mirror's ``flickr30k/{test,dev}_caps.txt``).

Line i of a file is caption i % 5 of image i // 5; the table has ``image, caption_index, caption``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from aoe.data.io import DataError

__all__ = ["FLICKR_FILES", "CAPTIONS_PER_IMAGE", "read_flickr30k"]

# split -> (mirror-relative file, captions); 5 consecutive captions per image (Karpathy split)
FLICKR_FILES = {"test": ("flickr30k/test_caps.txt", 5000), "dev": ("flickr30k/dev_caps.txt", 5070)}
CAPTIONS_PER_IMAGE = 5


def read_flickr30k(path: str | os.PathLike, expected_rows: int | None = None) -> pd.DataFrame:
    """Karpathy-split captions: line i is caption i % 5 of image i // 5."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: Flickr30k captions not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            raise DataError(f"{path}, line {i}: empty caption")
    if len(lines) % CAPTIONS_PER_IMAGE:
        raise DataError(f"{path}: {len(lines)} captions, not a multiple of {CAPTIONS_PER_IMAGE}")
    if expected_rows is not None and len(lines) != expected_rows:
        raise DataError(f"{path}: {len(lines)} captions, expected {expected_rows}")
    n = len(lines)
    return pd.DataFrame(
        {"image": [i // CAPTIONS_PER_IMAGE for i in range(n)], "caption_index": [i % CAPTIONS_PER_IMAGE for i in range(n)], "caption": lines}
    )

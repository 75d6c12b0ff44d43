"""Small file-level helpers shared by the data loaders.

Everything here exists so that pipeline outputs are either complete or absent
(atomic writes) and so that inputs can be pinned by content (sha256), which is
what lets Snakemake rules trust a file that merely exists.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from aoe.util.fsutil import atomic_file

if TYPE_CHECKING:  # a download job imports this module and needs no pandas
    import pandas as pd

_HASH_CHUNK_BYTES = 1 << 20


class DataError(ValueError):
    """A problem with input data: missing file, malformed row, wrong count, bad checksum.

    Messages always name the offending file, plus the 1-based line number when
    the problem is confined to one line, so the user can open the file and look.
    """


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Return the hex sha256 of a file's bytes, read in chunks so large archives fit in memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def write_parquet_atomic(df: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``df`` (without its index) to ``path`` as parquet, atomically and fsynced: a crash leaves the
    previous file or none, never a truncated one a later rule would take for a finished output.

    Returns ``path`` as a ``Path``.
    """
    path = Path(path)
    with atomic_file(path, "wb", fsync=True) as fh:
        df.to_parquet(fh, index=False)
    return path


def read_text(path: str | os.PathLike[str], encoding: str = "utf-8") -> str:
    """Read and decode a file, as is (no newline translation).

    Raises DataError naming the file when it is missing, and the file and the 1-based
    line number when its bytes are not valid ``encoding`` (the message spells the
    encoding as given: ``"UTF-8"`` or ``"utf-8"``).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"missing file: {path}") from None
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{path}:{line}: not valid {encoding} ({exc.reason})") from exc


def text_lines(text: str) -> list[str]:
    """Lines as iterating a text-mode file yields them (universal newlines), without terminators.

    Splits on ``\\n``, ``\\r\\n`` and ``\\r`` only, unlike ``str.splitlines``, which also
    breaks at ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e`` and ``\\x85``.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    return lines

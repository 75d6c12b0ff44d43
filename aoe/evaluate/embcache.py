"""On-disk embedding cache keyed by model and text set: evaluations of one model never re-embed.

STS, its figures (Fig. 3, 4, 10), transfer tasks, the NLI probe and retrieval of one
model are separate Snakemake jobs. Each embeds its deduplicated text set through
:class:`EmbeddingCache`; a job asking for a text set that was embedded before (the
figures ask for the STS evaluation's set) reads it back instead of running the model.

Why keyed by the whole text set and not per text: a text's embedding depends in its
last float bits on the batch it was padded with, and Spearman with many ties moves
in the 4th decimal on such bits. Keying by set keeps every number a pure function of
(model, settings, texts), whatever ran first.

Layout: ``<root>/<model key>/model.json`` (what the key was computed from) and
``<text-set key>.npz`` (``texts``, ``emb`` float32), written to a temporary name and
renamed, so concurrent jobs never see a partial file and never lock each other. A write killed
by SIGKILL leaves its hidden temporary; the next cache opened on the folder removes it once its
writer is gone (:func:`aoe.util.fsutil.remove_orphaned_files`).
The model key covers the weight, config and tokenizer files' sha256 and the
embedding settings (pooling, truncation length, prompt, and how a prompted text is
rewritten before the prompt: the set's key is its texts as the table holds them).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from aoe.data.io import sha256_file
from aoe.util.fsutil import atomic_file, remove_orphaned_files

__all__ = ["EmbeddingCache", "model_key"]

# the errors of a folder this process may read but not write
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)

# files whose bytes define a model's embeddings (tokenizer files included: they change the ids)
_IDENTITY_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model")


def _text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def model_key(model_dir: str | os.PathLike, **settings) -> tuple[str, dict]:
    """A key for (model files, embedding settings), and the record it was computed from."""
    model_dir = Path(model_dir)
    files = {
        p.name: sha256_file(p)
        for p in sorted(model_dir.iterdir())
        if p.is_file() and p.suffix in _IDENTITY_SUFFIXES and p.name not in ("metrics.jsonl",)
    }
    if not files:
        raise FileNotFoundError(f"{model_dir}: no model files to key an embedding cache on")
    record = {"files": files, "settings": settings}
    key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:24]
    return key, record


class EmbeddingCache:
    """Wrap ``encode(list[str]) -> (N, H)`` with a per-model on-disk store under ``root``."""

    def __init__(self, root: str | os.PathLike, key: str, record: dict, encode: Callable[[list[str]], np.ndarray]):
        self.dir = Path(root) / key
        self.writable = True
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # every text set's leftovers, not only the one asked for next: a killed write of a set no later job asks for
            remove_orphaned_files(self.dir)
            meta = self.dir / "model.json"
            if not meta.is_file():
                with atomic_file(meta) as fh:
                    json.dump(record, fh, indent=2)
        except OSError as e:
            self._read_only(e)
        self._encode = encode
        self.hit: bool | None = None  # whether the last call was served from disk

    @staticmethod
    def set_key(texts: list[str]) -> str:
        digest = hashlib.sha256()
        for t in texts:
            digest.update(_text_key(t))
        return digest.hexdigest()[:32]

    def encode(self, texts: Iterable[str]) -> np.ndarray:
        """Embeddings of the distinct ``texts`` in the given order (callers deduplicate)."""
        texts = list(texts)
        if len(set(texts)) != len(texts):
            raise ValueError("EmbeddingCache.encode takes distinct texts (deduplicate first: one embedding per text)")
        path = self.dir / f"{self.set_key(texts)}.npz"
        if path.is_file():
            stored = _read(path, len(texts))
            if stored is not None and len(stored[0]) == len(texts) and all(a == b for a, b in zip(stored[0], texts)):
                self.hit = True
                return stored[1]
        self.hit = False
        emb = np.asarray(self._encode(texts), dtype=np.float32)
        if self.writable:
            # a failed write (disk full, SIGTERM turned into SystemExit) leaves no hidden partial file
            try:
                with atomic_file(path, "wb") as fh:
                    np.savez(fh, texts=np.array(texts, dtype=str), emb=emb)
            except OSError as e:
                self._read_only(e)
        return emb

    def _read_only(self, error: OSError) -> None:
        """Go on without writing where the cache folder refuses writes (another group's shared cache, a read-only
        mount): the cache only saves time, so it must not fail the evaluation it serves. Other errors (a full
        disk) still fail the job."""
        if error.errno not in _NOT_WRITABLE:
            raise error
        self.writable = False
        print(
            f"embedding cache {self.dir} is not writable ({error.strerror}); embedding without storing the result "
            "(set evaluation.embedding_cache to a folder you can write to keep it)",
            file=sys.stderr,
            flush=True,
        )


def _read(path: Path, n_texts: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(texts, emb) of a cache file, or None (with a warning) where it cannot be read whole.

    The cache only saves time: a damaged file (a copy cut short, a disk error, a file
    an older layout wrote) must cost one re-embedding, not fail every later evaluation
    of the model with a bare ``BadZipFile``. The file is replaced by the fresh one.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            texts, emb = z["texts"], z["emb"]
        if emb.ndim != 2 or len(emb) != len(texts):
            raise ValueError(f"embeddings of shape {emb.shape} for {len(texts)} texts")
    except Exception as e:  # zipfile.BadZipFile, a missing member (KeyError), a cut array (ValueError, EOFError), OSError
        print(
            f"embedding cache file {path} is damaged ({type(e).__name__}: {e}); embedding its {n_texts} texts again",
            file=sys.stderr,
            flush=True,
        )
        return None
    return texts, emb

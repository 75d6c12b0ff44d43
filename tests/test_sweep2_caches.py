"""Caches under faults (issue 53's second sweep, bench/faults/fault_sweep.py): a cache folder that refuses writes
(another group's shared cache, a read-only mount) costs the caching, not the job; a full disk still fails it."""

from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pytest

import aoe.evaluate.embcache as embcache
from aoe.evaluate.embcache import EmbeddingCache
from aoe.llm_supervised.generate import GenerationCache


def _refuse(code: int):
    def refuse(*args, **kwargs):
        raise OSError(code, {errno.EROFS: "Read-only file system", errno.ENOSPC: "No space left on device"}[code])

    return refuse


def _encode(texts):
    return np.arange(len(texts) * 4, dtype=np.float32).reshape(len(texts), 4)


def test_an_embedding_cache_that_refuses_writes_embeds_without_storing(tmp_path: Path, monkeypatch, capsys) -> None:
    # the evaluation failed in OSError: [Errno 30] Read-only file system at its first text set
    monkeypatch.setattr(embcache, "atomic_file", _refuse(errno.EROFS))
    cache = EmbeddingCache(tmp_path / "emb", "k", {"files": {}}, _encode)
    np.testing.assert_array_equal(cache.encode(["a", "b", "c"]), _encode(["a", "b", "c"]))
    assert cache.hit is False and not list((tmp_path / "emb" / "k").glob("*.npz"))
    assert f"embedding cache {tmp_path / 'emb' / 'k'} is not writable (Read-only file system)" in capsys.readouterr().err


def test_an_embedding_cache_on_a_full_disk_still_fails_the_job(tmp_path: Path, monkeypatch) -> None:
    cache = EmbeddingCache(tmp_path / "emb", "k", {"files": {}}, _encode)
    monkeypatch.setattr(embcache, "atomic_file", _refuse(errno.ENOSPC))
    with pytest.raises(OSError, match="No space left"):
        cache.encode(["a"])


def test_a_generation_cache_that_refuses_writes_keeps_the_outputs_in_memory(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "gen.jsonl"
    cache = GenerationCache(path)
    cache.add([{"key": "k0", "output": "zero"}])
    real_open = Path.open

    def read_only(self, mode="r", *args, **kwargs):
        if self == path and "a" in mode:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", read_only)
    cache.add([{"key": "k1", "output": "one"}])
    cache.add([{"key": "k2", "output": "two"}])
    assert [cache.get(k)["output"] for k in ("k0", "k1", "k2")] == ["zero", "one", "two"]
    assert capsys.readouterr().err.count(f"generation cache {path} is not writable") == 1
    monkeypatch.undo()
    assert list(GenerationCache(path).records) == ["k0"]

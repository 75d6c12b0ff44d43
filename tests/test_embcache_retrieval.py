"""Embedding cache (reuse, identity, concurrency-safe files) and Flickr30k strict accuracy on known geometry."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from aoe.evaluate.embcache import EmbeddingCache, model_key
from aoe.evaluate.retrieval import flickr_strict_accuracy


def test_cache_serves_a_text_set_once_and_keys_on_model_and_settings(tiny_bert, tmp_path):
    from aoe.model.encoder import Encoder

    enc = Encoder(tiny_bert, pooling="cls", device="cpu")
    calls = []

    def encode(texts):
        calls.append(len(texts))
        return enc.encode(texts, max_length=32)

    texts = ["a cat sits", "a dog runs far away", "rain"]
    key, record = model_key(tiny_bert, pooling="cls", max_length=32)
    cache = EmbeddingCache(tmp_path, key, record, encode)
    first = cache.encode(texts)
    assert cache.hit is False and calls == [3]
    again = EmbeddingCache(tmp_path, key, record, encode).encode(texts)  # a later job
    assert calls == [3] and np.array_equal(first, again)
    np.testing.assert_array_equal(first, enc.encode(texts, max_length=32))
    # another text set is embedded, not assembled from pieces of earlier sets
    cache.encode(texts[:2])
    assert calls == [3, 2]
    # settings and weights are part of the key
    assert model_key(tiny_bert, pooling="avg", max_length=32)[0] != key
    other = tmp_path / "other_model"
    shutil.copytree(tiny_bert, other)
    weights = next(other.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    assert model_key(other, pooling="cls", max_length=32)[0] != key
    assert not list(tmp_path.glob(f"{key}/.*"))  # no temporary files left behind
    with pytest.raises(ValueError, match="distinct"):
        cache.encode(["x", "x"])


def _captions(n_images: int, per: int = 5) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "image": [i // per for i in range(n_images * per)],
            "caption_index": [i % per for i in range(n_images * per)],
            "caption": [f"img{i // per} cap{i % per}" for i in range(n_images * per)],
        }
    )


def test_strict_accuracy_on_known_geometry():
    caps = _captions(4)
    rng = np.random.default_rng(0)
    centers = np.eye(8)[:4] * 10
    vec = {}
    for row in caps.itertuples():
        vec[row.caption] = centers[row.image] + rng.normal(0, 0.1, 8)
    # image 3: one of its captions points at image 0 instead -> its query fails the strict test
    vec["img3 cap2"] = centers[0] + rng.normal(0, 0.1, 8)
    out = flickr_strict_accuracy(lambda t: np.stack([vec[x] for x in t]), caps)
    assert out["queries"] == 4 and out["candidates"] == 19
    # image 0's query now has img3 cap2 among its top 4 as well -> also fails
    assert out["strict_accuracy"] == pytest.approx(50.0)
    assert out["recall"]["@4"] == pytest.approx(100 * (1 + 1 + 0.75 + 0.75) / 4)


def test_uneven_caption_counts_are_refused():
    caps = _captions(2).iloc[:-1]
    with pytest.raises(ValueError, match="same number of captions"):
        flickr_strict_accuracy(lambda t: np.ones((len(t), 2)), caps)


def test_a_damaged_cache_file_is_embedded_again_and_replaced(tmp_path, capsys):
    # a cache file cut short (a copy interrupted, a disk error) failed every later evaluation
    # of the model with a bare "BadZipFile: File is not a zip file" naming no file
    calls = []

    def encode(texts):
        calls.append(len(texts))
        return np.arange(len(texts) * 3, dtype=np.float32).reshape(len(texts), 3)

    texts = ["a cat sits", "a dog runs", "rain"]
    cache = EmbeddingCache(tmp_path, "k", {"files": {}}, encode)
    first = cache.encode(texts)
    (stored,) = tmp_path.glob("k/*.npz")
    stored.write_bytes(stored.read_bytes()[: stored.stat().st_size // 2])
    again = EmbeddingCache(tmp_path, "k", {"files": {}}, encode).encode(texts)
    assert calls == [3, 3] and np.array_equal(first, again)
    assert f"embedding cache file {stored} is damaged" in capsys.readouterr().err
    assert EmbeddingCache(tmp_path, "k", {"files": {}}, encode).encode(texts) is not None and calls == [3, 3]  # replaced
    # rows that do not match the texts are not served either
    np.savez(stored, texts=np.array(texts, dtype=str), emb=np.zeros((2, 3), dtype=np.float32))
    assert np.array_equal(EmbeddingCache(tmp_path, "k", {"files": {}}, encode).encode(texts), first) and calls == [3, 3, 3]


def test_a_failed_cache_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    # disk full (or SIGTERM, raised as SystemExit by aoe.util.fsutil.exit_on_sigterm) mid-write
    # left a hidden .<key>.*.npz beside the cache for good
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    cache = EmbeddingCache(tmp_path, "k", {"files": {}}, lambda texts: np.zeros((len(texts), 2), dtype=np.float32))
    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(OSError, match="No space left"):
        cache.encode(["a", "b"])
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == ["model.json"]

"""Tokenization cache: a prepared pair table tokenized once per (tokenizer, max_length).

The cache is a ``datasets`` Arrow folder with one row per pair::

    input_ids_1, input_ids_2   token ids of sentence1 / sentence2 (truncated, unpadded)
    text_id_1, text_id_2       integer identity of each text: equal id = identical text
    score                      the table's gold score, unchanged

and ``cache.json`` recording what it was built from (the table's sha256, the
tokenizer's fingerprint, max_length). :func:`load_token_cache` refuses a cache
whose recorded identity differs from the current table or tokenizer, so a
changed dataset or tokenizer never trains on stale tokens.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from aoe.data.io import DataError, sha256_file
from aoe.models import tokenizer_fingerprint

__all__ = ["build_token_cache", "load_token_cache", "StaleCacheError", "CACHE_FORMAT"]

CACHE_FORMAT = 1


class StaleCacheError(RuntimeError):
    """A token cache built from another table or tokenizer than the one asked for."""


def build_token_cache(table: str | Path, tokenizer_dir: str | Path, max_length: int, out_dir: str | Path) -> dict:
    """Tokenize ``table`` (parquet with sentence1, sentence2, score) into ``out_dir``; return its identity."""
    import datasets
    from transformers import AutoTokenizer

    table, out_dir = Path(table), Path(out_dir)
    df = pd.read_parquet(table)
    missing = {"sentence1", "sentence2", "score"} - set(df.columns)
    if missing:
        raise DataError(f"{table}: missing column(s) {sorted(missing)}")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    # Each distinct text is tokenized once and gets one id, which the contrastive
    # loss uses to recognise identical texts inside a batch.
    texts = pd.unique(pd.concat([df["sentence1"], df["sentence2"]], ignore_index=True))
    text_id = {t: i for i, t in enumerate(texts)}
    ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    t1 = df["sentence1"].map(text_id).to_numpy()
    t2 = df["sentence2"].map(text_id).to_numpy()
    ds = datasets.Dataset.from_dict(
        {
            "input_ids_1": [ids[i] for i in t1],
            "input_ids_2": [ids[i] for i in t2],
            "text_id_1": t1.tolist(),
            "text_id_2": t2.tolist(),
            "score": df["score"].astype("float64").tolist(),
        }
    )
    identity = {
        "format": CACHE_FORMAT,
        "table": str(table),
        "table_sha256": sha256_file(table),
        "tokenizer": str(tokenizer_dir),
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer_dir),
        "max_length": int(max_length),
        "n_pairs": len(ds),
        "n_texts": len(texts),
        # texts that reach max_length: truncated, or exactly that long
        "n_at_max_length": int(sum(len(x) >= max_length for x in ids)),
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    tmp.chmod(0o755)
    try:
        ds.save_to_disk(str(tmp / "pairs"))
        (tmp / "cache.json").write_text(json.dumps(identity, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return identity


def load_token_cache(cache_dir: str | Path, table: str | Path, tokenizer_dir: str | Path, max_length: int):
    """The cached ``datasets.Dataset``, after checking it was built from this table and tokenizer."""
    import datasets

    cache_dir = Path(cache_dir)
    meta_file = cache_dir / "cache.json"
    if not meta_file.is_file():
        raise StaleCacheError(f"{cache_dir}: no cache.json; not a complete token cache (delete it and rerun)")
    meta = json.loads(meta_file.read_text())
    expected = {
        "format": CACHE_FORMAT,
        "table_sha256": sha256_file(table),
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer_dir),
        "max_length": int(max_length),
    }
    stale = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
    if stale:
        detail = "; ".join(f"{k}: cached {old!r}, now {new!r}" for k, (old, new) in stale.items())
        raise StaleCacheError(f"token cache {cache_dir} is stale ({detail}); delete it and rerun")
    return datasets.load_from_disk(str(cache_dir / "pairs"))

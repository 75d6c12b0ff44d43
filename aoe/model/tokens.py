"""Tokenization cache: a prepared pair table tokenized once per (tokenizer, max_length).

The cache is a ``datasets`` Arrow folder with one row per pair::

    input_ids_1, input_ids_2   token ids of sentence1 / sentence2 (truncated, unpadded)
    text_id_1, text_id_2       integer identity of each text: equal id = equal token ids
    score                      the table's gold score, unchanged

and ``cache.json`` recording what it was built from (the table's sha256, the
tokenizer's fingerprint, max_length, and an LLM backbone's prompt: texts are
wrapped in it here, by the same function the evaluation Encoder uses). :func:`load_token_cache` refuses a cache
whose recorded identity differs from the current table or tokenizer, so a
changed dataset or tokenizer never trains on stale tokens.

The tokenization itself lives here too, shared with :class:`aoe.model.encoder.Encoder`:
:func:`tokenize_texts` (prompt, truncation), :func:`check_max_length`, :func:`ensure_pad_token`,
and :func:`length_buckets` (rows of similar length for :func:`aoe.model.encoder.embed_bucketed`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from aoe.data.contracts import read_table, refuse_empty_texts
from aoe.data.io import DataError, sha256_file
from aoe.model.backbones import tokenizer_fingerprint
from aoe.model.prompts import apply_prompt
from aoe.util.formats import TOKEN_CACHE_FORMAT
from aoe.util.fsutil import atomic_dir

__all__ = [
    "text_columns",
    "text_identities",
    "build_token_cache",
    "load_token_cache",
    "StaleCacheError",
    "CACHE_FORMAT",
    "tokenize_texts",
    "check_max_length",
    "max_length_floor",
    "text_overhead",
    "ensure_pad_token",
    "length_buckets",
]

CACHE_FORMAT = TOKEN_CACHE_FORMAT  # aoe.util.formats: the tokenize rule reruns when it changes


class StaleCacheError(RuntimeError):
    """A token cache built from another table or tokenizer than the one asked for."""


def text_columns(df: pd.DataFrame) -> list[str]:
    """sentence1, sentence2[, sentence3]: the text columns of a prepared table, in order."""
    cols = []
    while f"sentence{len(cols) + 1}" in df.columns:
        cols.append(f"sentence{len(cols) + 1}")
    return cols


def text_identities(ids: list[list[int]]) -> list[int]:
    """One identity per token sequence: ``out[i] == out[j]`` iff ``ids[i] == ids[j]``.

    Texts are identical when the model sees the same tokens, as the official collators
    decide (``tuple(input_ids)`` of the truncated text, angle-emb 0.1.1 ``similar_matrix``
    and >= 0.3.8 ``filter_duplicate``): an uncased tokenizer makes "A man ..." and
    "a man ..." one text, and so does truncation of two texts that differ only past
    max_length. Identities are numbered 0, 1, ... in order of first appearance.
    """
    number: dict[tuple[int, ...], int] = {}
    return [number.setdefault(tuple(x), len(number)) for x in ids]


def _refuse_hollow(table: Path, df: pd.DataFrame, hollow: dict[str, np.ndarray]) -> None:
    """A DataError naming the rows whose text the tokenizer drops whole, per column, if any.

    Such a text is only its special tokens (and prompt) to the model, as an empty one is
    (:func:`aoe.data.contracts.check_table` refuses those on reading, with the same message), but
    ``str.strip`` cannot see it: zero-width spaces, control characters.
    """
    refuse_empty_texts(table, len(df), hollow, "is dropped whole by the tokenizer")


def _refuse_past_positions(table: Path, model_dir: Path, ids: list[list[int]], max_length: int) -> None:
    """A ``max_length`` past the model's positions that leaves texts longer than the model takes is refused here.

    Such a text fails the train job with a tensor-size error deep in the model ("The
    expanded size of the tensor ...") only when its batch comes up, perhaps hours in;
    here it costs seconds and names the setting. A larger ``max_length`` that no text
    reaches changes nothing and passes. Only where the folder has the model's config.json.
    """
    if not (model_dir / "config.json").is_file():
        return
    from aoe.model.folder import position_limit  # config.json's positions, lowered by the tokenizer's model_max_length

    limit = position_limit(model_dir)
    if limit is None or max_length <= limit[0]:
        return
    over = sum(len(x) > limit[0] for x in ids)
    if over:
        raise ValueError(
            f"{table}: max_length {max_length} is past what {model_dir} takes ({limit[0]} tokens, {limit[1]}) "
            f"and {over} distinct text(s) tokenize to more than {limit[0]} tokens, which would fail training; "
            f"set the train set's max_length (trainsets.<name>.train.max_length) to {limit[0]} or less"
        )


def build_token_cache(
    table: str | Path, tokenizer_dir: str | Path, max_length: int, out_dir: str | Path, prompt: str | None = None
) -> dict:
    """Tokenize ``table`` into ``out_dir``; return its identity.

    The table has text columns ``sentence1 .. sentenceK`` (K = 2 for pairs and NLI
    classes, 3 for triplets) and optionally ``score`` (a pair's gold score or an NLI
    class); the cache gets ``input_ids_k`` and ``text_id_k`` per text column and
    ``score`` (1.0 where the table has none: every triplet is a positive).
    A table that breaks its contract (:mod:`aoe.data.contracts`: empty texts, NaN scores, ...) is a
    :class:`DataError`, as is a text the tokenizer drops whole; a ``max_length`` that leaves no room for
    text is a ``ValueError`` (aoe.model.tokens.check_max_length).
    """
    import datasets
    from transformers import AutoTokenizer

    table, out_dir = Path(table), Path(out_dir)
    reused = _cache_elsewhere(table, tokenizer_dir, max_length, out_dir, prompt)
    if reused is not None:
        return reused
    # the one place a train table enters training: its contract (texts, scores, rows) is checked here
    df = read_table(table)
    cols = text_columns(df)
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(tokenizer_dir))
    check_max_length(tokenizer, max_length, prompt)  # before the tokenizer runs over the whole table
    # Each distinct string is tokenized once; its text id (text_identities) is what the
    # losses use to recognise identical texts inside a batch.
    texts = pd.unique(pd.concat([df[c] for c in cols], ignore_index=True))
    # the cache stores ids as int32 (checked before the tokenizer runs)
    if len(texts) >= 2**31 or (tokenizer.vocab_size or 0) >= 2**31:  # never for real vocabularies
        raise DataError(f"{table}: {len(texts)} texts / vocabulary {tokenizer.vocab_size} exceed int32 ids")
    index = {t: i for i, t in enumerate(texts)}
    ids = tokenize_texts(tokenizer, list(texts), max_length, prompt)
    _refuse_past_positions(table, Path(tokenizer_dir), ids, max_length)
    # what str.strip does not see: a text of characters the tokenizer drops (zero-width
    # spaces, control characters) is as empty to the model
    overhead = text_overhead(tokenizer, prompt)
    hollow = np.array([x == overhead for x in ids], dtype=bool)
    _refuse_hollow(table, df, {c: hollow[df[c].map(index).to_numpy(dtype=np.int64)] for c in cols})
    identity_of = text_identities(ids)
    columns: dict[str, list] = {}
    for k, col in enumerate(cols, start=1):
        i = df[col].map(index).to_numpy()
        columns[f"input_ids_{k}"] = [ids[j] for j in i]
        columns[f"text_id_{k}"] = [identity_of[j] for j in i]
    columns["score"] = df["score"].astype("float64").tolist() if "score" in df.columns else [1.0] * len(df)
    features = {}
    for k in range(1, len(cols) + 1):
        features[f"input_ids_{k}"] = datasets.List(datasets.Value("int32"))
        features[f"text_id_{k}"] = datasets.Value("int32")
    features["score"] = datasets.Value("float64")
    ds = datasets.Dataset.from_dict(columns, features=datasets.Features(features))
    identity = {
        "format": CACHE_FORMAT,
        "table": str(table),
        "table_sha256": sha256_file(table),
        "tokenizer": str(tokenizer_dir),
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer_dir),
        "max_length": int(max_length),
        "prompt": prompt,
        "n_examples": len(ds),
        "texts_per_example": len(cols),
        "n_texts": len(texts),
        # distinct token sequences: fewer than n_texts where strings differ only in what the
        # tokenizer drops (case, under an uncased one) or past max_length
        "n_distinct_token_sequences": len(set(identity_of)),
        # texts that reach max_length: truncated, or exactly that long
        "n_at_max_length": int(sum(len(x) >= max_length for x in ids)),
    }
    with atomic_dir(out_dir) as tmp:
        ds.save_to_disk(str(tmp / "pairs"))
        (tmp / "cache.json").write_text(json.dumps(identity, indent=2) + "\n")
    return identity


def _cache_elsewhere(table: Path, tokenizer_dir, max_length: int, out_dir: Path, prompt: str | None) -> dict | None:
    """The token cache of the same table, tokenizer, max_length and prompt in a results tree beside this one (issue 71:
    a tree of one's own costs what is new), laid out in ``out_dir`` as hard links; its identity, or None where no tree
    has one. The table's contract was checked when that cache was built from the same bytes."""
    from aoe.util.othertrees import in_other_trees, link_tree

    others = in_other_trees(out_dir / "cache.json", "tokens")
    if not others:
        return None
    key = {"format": CACHE_FORMAT, "table_sha256": sha256_file(table), "tokenizer_sha256": tokenizer_fingerprint(tokenizer_dir),
           "max_length": int(max_length), "prompt": prompt}
    for other in others:
        try:
            identity = json.loads(other.read_text())
        except (OSError, ValueError):
            continue
        if {k: identity.get(k) for k in key} != key or not (other.parent / "pairs").is_dir():
            continue
        identity = {**identity, "table": str(table), "tokenizer": str(tokenizer_dir), "reused_from": str(other.parent)}
        with atomic_dir(out_dir) as tmp:
            link_tree(other.parent / "pairs", tmp / "pairs")
            (tmp / "cache.json").write_text(json.dumps(identity, indent=2) + "\n")
        print(f"{out_dir}: the token cache of {other.parent} (same table, tokenizer, max_length and prompt), as hard links")
        return identity
    return None


def load_token_cache(
    cache_dir: str | Path, table: str | Path, tokenizer_dir: str | Path, max_length: int, prompt: str | None = None
):
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
        "prompt": prompt,
    }
    stale = {k: (meta.get(k), v) for k, v in expected.items() if meta.get(k) != v}
    if stale:
        detail = "; ".join(f"{k}: cached {old!r}, now {new!r}" for k, (old, new) in stale.items())
        raise StaleCacheError(f"token cache {cache_dir} is stale ({detail}); delete it and rerun")
    # a cache cut short (a copy or a disk write interrupted) fails in pyarrow naming no file, or,
    # cut at a record-batch boundary, loads fewer rows without a word: the run would train on part
    # of the data under the identity (cache.json's n_examples) of all of it
    try:
        ds = datasets.load_from_disk(str(cache_dir / "pairs"))
    except Exception as e:
        raise StaleCacheError(
            f"token cache {cache_dir} cannot be read ({type(e).__name__}: {e}); delete it and rerun"
        ) from e
    if meta.get("n_examples") is not None and len(ds) != meta["n_examples"]:
        raise StaleCacheError(
            f"token cache {cache_dir} holds {len(ds)} examples where its cache.json records {meta['n_examples']} "
            f"(a file cut short); delete it and rerun"
        )
    return ds


# ---------------------------------------------------------------------------
# Prompts and tokenization, shared by the token cache (training) and aoe.model.encoder.Encoder
# (every evaluation), so a prompted LLM sees byte-identical inputs in both.


def text_overhead(tokenizer, prompt: str | None = None) -> list[int]:
    """The token ids every text gets whatever its content: the special tokens, and the prompt around it."""
    return tokenizer(apply_prompt("", prompt) if prompt is not None else "")["input_ids"]


def max_length_floor(tokenizer, prompt: str | None = None) -> tuple[int, str]:
    """The smallest ``max_length`` that keeps a token of text after the special tokens (and the prompt), and why.

    A fast tokenizer asked to truncate below its special tokens does not truncate at all
    (it logs an error and returns every text whole), so a smaller value would be recorded
    while texts stay untruncated; exactly the special tokens would make every text the
    same sequence, which the in-batch losses then drop as identical texts.
    """
    overhead = text_overhead(tokenizer, prompt)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if prompt is None:
        tokens = " ".join(tokenizer.convert_ids_to_tokens(overhead)) or "none"
        why = f"tokenizer {name} adds {len(overhead)} special tokens to every text ({tokens})"
    else:
        why = f"prompt {prompt!r} alone needs {len(overhead)} tokens with tokenizer {name} (special tokens included)"
    return len(overhead) + 1, why


def check_max_length(tokenizer, max_length: int, prompt: str | None = None) -> None:
    """Refuse a ``max_length`` below :func:`max_length_floor`, naming the value, the tokenizer and the minimum."""
    floor, why = max_length_floor(tokenizer, prompt)
    if max_length < floor:
        raise ValueError(f"max_length {max_length} is too small: {why}; use max_length {floor} or more")


def tokenize_texts(tokenizer, texts: list[str], max_length: int, prompt: str | None = None) -> list[list[int]]:
    """Token ids (unpadded) of ``texts``, each wrapped in ``prompt`` and cut to ``max_length``.

    Without a prompt this is the tokenizer's own right truncation. With one, truncation
    shortens the text, never the prompt: cutting AoE's prompt would drop its closing
    ``in one word:"``, the tokens last-token pooling reads. (The official angle-emb
    truncates the prompted string, so its long texts lose the prompt's end.)
    A ``max_length`` with no room for text is an error (:func:`check_max_length`).
    """
    texts = list(texts)
    check_max_length(tokenizer, max_length, prompt)
    if prompt is None:
        ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    else:
        ids = tokenizer([apply_prompt(t, prompt) for t in texts])["input_ids"]
        over = [i for i, x in enumerate(ids) if len(x) > max_length]
        budget = max_length - len(text_overhead(tokenizer, prompt)) if over else 0
        for i in over:
            text_ids = tokenizer(texts[i], add_special_tokens=False)["input_ids"]
            # decoding a cut and re-tokenizing inside the prompt can merge tokens differently at
            # the seams, so shorten until the prompted text fits
            for keep in range(min(budget, len(text_ids)), -1, -1):
                cut = tokenizer.decode(text_ids[:keep])
                ids[i] = tokenizer(apply_prompt(cut, prompt))["input_ids"]
                if len(ids[i]) <= max_length:
                    break
    # checked, not trusted: a tokenizer that cannot truncate returns texts whole, which
    # would be recorded as cut to max_length (and can overflow the model's positions)
    longest = max(map(len, ids), default=0)
    if longest > max_length:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ValueError(
            f"tokenizer {name} returned {longest} tokens for a text with max_length {max_length}; it did not truncate"
        )
    return ids


def ensure_pad_token(tokenizer):
    """LLaMA tokenizers ship without a pad token: pad with UNK (as the official angle-emb, id 0) or EOS.

    Padding never reaches an embedding under :data:`aoe.model.pooling.POOLINGS` (all mask-aware); only the official
    replicas (:data:`aoe.model.pooling.OFFICIAL_POOLINGS`) read it, as the official code did.
    """
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.unk_token if tokenizer.unk_token is not None else tokenizer.eos_token
    return tokenizer


# ---------------------------------------------------------------------------
# Length bucketing: rows of similar length embedded together (aoe.model.encoder.embed_bucketed).


def length_buckets(lengths: list[int], n: int) -> list[list[int]]:
    """Split row indices into at most ``n`` groups of similar length, fewest padded positions first.

    Rows sorted longest first are cut into contiguous runs; a run costs (rows x its longest
    length), the positions a forward pass over it computes. The cuts minimise the total
    (dynamic programming over the sorted lengths, numpy, O(n m^2) for m rows).
    """
    m = len(lengths)
    if m == 0:
        return []
    order = np.argsort(-np.asarray(lengths), kind="stable")
    ls = np.asarray(lengths, dtype=np.int64)[order]
    n = max(1, min(n, m))
    inf = np.iinfo(np.int64).max // 4
    # run[i, j]: rows i..j-1 (sorted) as one group, (j - i) * ls[i]; no group where j <= i
    i, j = np.arange(m + 1)[:, None], np.arange(m + 1)[None, :]
    run = np.where(j > i, (j - i) * ls[np.minimum(i, m - 1)], inf)
    best = run[0].copy()  # best[j]: the cheapest split of rows 0..j-1 into the groups allowed so far
    best[0] = 0
    starts = [np.zeros(m + 1, dtype=np.int64)]  # starts[k][j]: where the last group of that split begins
    for _ in range(1, n):
        total = best[:, None] + run
        starts.append(total.argmin(axis=0))  # the first minimum: ties keep the longer last group
        best = np.minimum(best, total.min(axis=0))
    groups, end = [], m
    for k in range(n - 1, -1, -1):
        start = int(starts[k][end])
        groups.append(order[start:end].tolist())
        end = start
        if end == 0:
            break
    return groups[::-1]

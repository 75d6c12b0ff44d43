"""The token cache: ids per distinct text, truncation, recorded identity, staleness checks."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aoe.data.io import DataError
from aoe.model.backbones import tokenizer_fingerprint
from aoe.model.tokens import CACHE_FORMAT, StaleCacheError, build_token_cache, load_token_cache

LONG = " ".join(f"word{i}" for i in range(40))  # far more than MAX_LENGTH tokens
MAX_LENGTH = 12
PAIRS = [
    ("a cat sits on the mat", "a dog sits on the mat", 4.0),
    ("a dog sits on the mat", "the sky is blue", 0.5),
    ("the sky is blue", "a cat sits on the mat", 1.0),
    ("a cat sits on the mat", "a cat sits on the mat", 5.0),  # identical pair
    (LONG, "short text", 2.5),
]
# distinct texts in order of first appearance over sentence1 then sentence2
DISTINCT = ["a cat sits on the mat", "a dog sits on the mat", "the sky is blue", LONG, "short text"]


def _write_table(path: Path, pairs=PAIRS) -> Path:
    df = pd.DataFrame(pairs, columns=["sentence1", "sentence2", "score"])
    df["split"] = "train"  # extra columns are carried by prepared tables and must not matter
    df.to_parquet(path, index=False)
    return path


@pytest.fixture
def table(tmp_path) -> Path:
    return _write_table(tmp_path / "train.parquet")


@pytest.fixture
def tokenizer_dir(tiny_bert, tmp_path) -> Path:
    """A private copy of the tokenizer files, free to modify."""
    out = tmp_path / "tok"
    out.mkdir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        if (tiny_bert / name).is_file():
            shutil.copy2(tiny_bert / name, out / name)
    return out


@pytest.fixture
def cache(table, tokenizer_dir, tmp_path) -> tuple[Path, dict]:
    out = tmp_path / "caches" / "tiny"
    return out, build_token_cache(table, tokenizer_dir, MAX_LENGTH, out)


def test_text_ids_identify_identical_texts(cache, table, tokenizer_dir):
    out, _ = cache
    ds = load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)
    texts = [t for s1, s2, _ in PAIRS for t in (s1, s2)]
    ids = [i for r in ds for i in (r["text_id_1"], r["text_id_2"])]
    assert len(ids) == len(texts) == 2 * len(PAIRS)
    for a in range(len(texts)):
        for b in range(len(texts)):
            assert (ids[a] == ids[b]) == (texts[a] == texts[b]), (texts[a], texts[b])
    assert sorted(set(ids)) == list(range(len(DISTINCT)))


def test_text_ids_identify_token_sequences_not_strings(tmp_path, tokenizer_dir):
    # the official collators compare tuple(input_ids): strings that differ only past max_length (or in
    # case, under an uncased tokenizer) are one text to the model and to the in-batch losses
    past_end = [LONG + " tail one", LONG + " tail two"]
    pairs = [(past_end[0], "short text", 1.0), (past_end[1], "A Cat Sits", 2.0), ("a cat sits", "short text", 3.0)]
    table = _write_table(tmp_path / "t.parquet", pairs)
    meta = build_token_cache(table, tokenizer_dir, MAX_LENGTH, tmp_path / "c")
    ds = load_token_cache(tmp_path / "c", table, tokenizer_dir, MAX_LENGTH)
    seqs = [tuple(r[f"input_ids_{k}"]) for r in ds for k in (1, 2)]
    ids = [r[f"text_id_{k}"] for r in ds for k in (1, 2)]
    for a in range(len(ids)):
        for b in range(len(ids)):
            assert (ids[a] == ids[b]) == (seqs[a] == seqs[b])
    assert ids[0] == ids[2]  # the two long texts, cut at MAX_LENGTH
    assert meta["n_texts"] == 5 and meta["n_distinct_token_sequences"] == len(set(seqs)) < 5


def test_input_ids_match_the_tokenizer_and_truncate(cache, table, tokenizer_dir):
    from transformers import AutoTokenizer

    out, _ = cache
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ds = load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)
    assert len(ds) == len(PAIRS)
    for row, (s1, s2, score) in zip(ds, PAIRS):
        for ids, text in ((row["input_ids_1"], s1), (row["input_ids_2"], s2)):
            full = tok(text)["input_ids"]
            if len(full) <= MAX_LENGTH:
                assert ids == full
            else:
                # truncated to MAX_LENGTH keeping [CLS] ... [SEP], unpadded
                assert len(ids) == MAX_LENGTH
                assert ids[:-1] == full[: MAX_LENGTH - 1]
                assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert row["score"] == score
    assert len(ds[4]["input_ids_1"]) == MAX_LENGTH  # the long text


def test_cache_json_records_identity(cache, table, tokenizer_dir):
    out, identity = cache
    meta = json.loads((out / "cache.json").read_text())
    assert meta == identity
    assert meta["format"] == CACHE_FORMAT
    assert meta["table_sha256"] == hashlib.sha256(table.read_bytes()).hexdigest()
    assert meta["tokenizer_sha256"] == tokenizer_fingerprint(tokenizer_dir)
    assert meta["max_length"] == MAX_LENGTH
    assert meta["n_examples"] == len(PAIRS) and meta["texts_per_example"] == 2
    assert meta["n_texts"] == len(DISTINCT)
    assert meta["n_at_max_length"] == 1
    # atomic: only the cache folder appears beside it
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny"]


def test_rebuild_replaces_the_cache(cache, table, tokenizer_dir):
    out, _ = cache
    (out / "junk").write_text("x")
    build_token_cache(table, tokenizer_dir, MAX_LENGTH, out)
    assert not (out / "junk").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["tiny"]


def test_missing_column_is_a_data_error(tmp_path, tokenizer_dir):
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"sentence1": ["a"], "score": [1.0]}).to_parquet(bad)
    with pytest.raises(DataError, match="sentence2"):
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_triplets_get_three_text_columns_and_unit_scores(tmp_path, tokenizer_dir):
    from datasets import load_from_disk

    table = tmp_path / "triplets.parquet"
    pd.DataFrame({"sentence1": ["a cat", "a dog"], "sentence2": ["a pet", "a pet"], "sentence3": ["a car", "a cat"]}).to_parquet(table)
    meta = build_token_cache(table, tokenizer_dir, MAX_LENGTH, tmp_path / "c")
    ds = load_from_disk(str(tmp_path / "c" / "pairs"))
    assert meta["texts_per_example"] == 3 and ds["score"] == [1.0, 1.0]
    # identical texts across columns share an id: "a pet" twice, "a cat" as anchor and as negative
    assert ds["text_id_2"][0] == ds["text_id_2"][1] and ds["text_id_3"][1] == ds["text_id_1"][0]


def test_stale_when_table_changes(cache, table, tokenizer_dir):
    out, _ = cache
    changed = list(PAIRS)
    changed[1] = (PAIRS[1][0], PAIRS[1][1], 0.75)  # one score differs
    _write_table(table, changed)
    with pytest.raises(StaleCacheError, match="table_sha256"):
        load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)


@pytest.mark.parametrize("what", ["vocab", "tokenizer_config"])
def test_stale_when_tokenizer_changes(cache, table, tokenizer_dir, what):
    out, _ = cache
    if what == "vocab":
        with (tokenizer_dir / "vocab.txt").open("a", encoding="utf-8") as fh:
            fh.write("[NEWTOKEN]\n")
    else:
        cfg = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
        cfg["do_lower_case"] = not cfg.get("do_lower_case", True)
        (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(cfg))
    with pytest.raises(StaleCacheError, match="tokenizer_sha256"):
        load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)


def test_stale_when_max_length_differs(cache, table, tokenizer_dir):
    out, _ = cache
    with pytest.raises(StaleCacheError, match="max_length: cached 12, now 16"):
        load_token_cache(out, table, tokenizer_dir, 16)


def test_unchanged_inputs_load(cache, table, tokenizer_dir):
    out, _ = cache
    ds = load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)
    assert set(ds.column_names) == {"input_ids_1", "input_ids_2", "text_id_1", "text_id_2", "score"}


def test_folder_without_cache_json(cache, table, tokenizer_dir, tmp_path):
    out, _ = cache
    (out / "cache.json").unlink()
    with pytest.raises(StaleCacheError, match="no cache.json"):
        load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)
    with pytest.raises(StaleCacheError, match="no cache.json"):
        load_token_cache(tmp_path / "never_built", table, tokenizer_dir, MAX_LENGTH)


# --- max_length below the special tokens, empty texts, NaN scores ---


@pytest.mark.parametrize("max_length", [1, 2, 3, 4, 6])
def test_every_cached_sequence_fits_max_length_or_the_length_is_refused(minilm_dir, table, tmp_path, max_length):
    # MiniLM's fast tokenizer, asked for fewer tokens than its [CLS] [SEP], truncates nothing
    # (it logs an error and returns each text whole): the cache must not record a cut it did not make
    out = tmp_path / "c"
    if max_length < 3:
        with pytest.raises(ValueError) as exc:
            build_token_cache(table, minilm_dir, max_length, out)
        assert str(exc.value) == (
            f"max_length {max_length} is too small: tokenizer {minilm_dir} adds 2 special tokens to every text "
            "([CLS] [SEP]); use max_length 3 or more"
        )
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["train.parquet"]
        return
    meta = build_token_cache(table, minilm_dir, max_length, out)
    ds = load_token_cache(out, table, minilm_dir, max_length)
    lengths = [len(r[f"input_ids_{k}"]) for r in ds for k in (1, 2)]
    assert meta["max_length"] == max_length and max(lengths) == max_length
    assert all(3 <= n <= max_length for n in lengths)  # [CLS], at least one token of text, [SEP]


def test_tokenize_texts_refuses_a_max_length_without_room_for_text(minilm_dir):
    from transformers import AutoTokenizer

    from aoe.model.tokens import max_length_floor, tokenize_texts

    tok = AutoTokenizer.from_pretrained(minilm_dir)
    assert max_length_floor(tok)[0] == 3
    with pytest.raises(ValueError, match=r"max_length 1 is too small: .* \(\[CLS\] \[SEP\]\); use max_length 3 or more"):
        tokenize_texts(tok, ["a cat sits on the mat"], 1)
    assert tokenize_texts(tok, ["a cat sits on the mat", ""], 3) == [[101, 1037, 102], [101, 102]]


def _table_with(tmp_path: Path, rows, name="blank.parquet") -> Path:
    path = tmp_path / name
    df = pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"])
    df.astype({"sentence1": object, "sentence2": object, "score": "float64"}).to_parquet(path, index=False)
    return path


def test_empty_and_whitespace_texts_are_a_data_error_naming_rows_and_columns(tmp_path, tokenizer_dir):
    rows = [("a cat", "a dog", 1.0), ("a cat", "", 0.0), ("  \t", "a dog", 2.0), ("a cow", "\u3000\n", 3.0), ("x", "y", 4.0)]
    bad = _table_with(tmp_path, rows)
    with pytest.raises(DataError) as exc:
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")
    assert str(exc.value) == (
        f"{bad}: 3 of 5 rows have a text that is empty or whitespace-only (sentence1: 1, sentence2: 2; 0-based rows 1, 2, 3); "
        "the model would see only special tokens, the same for every such text, and the losses would drop these pairs "
        "as identical texts: remove or fix those rows in the table (or in the data it was prepared from) and rerun"
    )
    assert not (tmp_path / "c").exists()


def test_missing_texts_are_empty_texts(tmp_path, tokenizer_dir):
    bad = _table_with(tmp_path, [("a cat", None, 1.0)] + [("a cat", f"dog {i}", 1.0) for i in range(7)])
    with pytest.raises(DataError, match=r"1 of 8 rows .* \(sentence2: 1; 0-based rows 0\)"):
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")


def test_texts_the_tokenizer_drops_whole_are_a_data_error(tmp_path, tokenizer_dir):
    # a zero-width space is not whitespace to str.strip, but BERT's tokenizer keeps nothing of it
    bad = _table_with(tmp_path, [("a cat", "a dog", 1.0), ("\u200b", "a dog", 1.0)])
    expected = r"1 of 2 rows have a text that is dropped whole by the tokenizer \(sentence1: 1; 0-based rows 1\)"
    with pytest.raises(DataError, match=expected):
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")


def test_many_bad_rows_are_listed_by_their_first_few(tmp_path, tokenizer_dir):
    bad = _table_with(tmp_path, [("a cat", " ", 1.0)] * 9)
    with pytest.raises(DataError, match=r"9 of 9 rows .* 0-based rows 0, 1, 2, 3, 4, \.\.\.\)"):
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")


def test_nan_scores_are_a_data_error(tmp_path, tokenizer_dir):
    bad = _table_with(tmp_path, [("a cat", "a dog", 1.0), ("a cow", "a dog", float("nan")), ("a cat", "a cow", None)])
    with pytest.raises(DataError) as exc:
        build_token_cache(bad, tokenizer_dir, MAX_LENGTH, tmp_path / "c")
    assert str(exc.value) == (
        f"{bad}: 2 of 3 rows have no score (NaN in column score; 0-based rows 1, 2); "
        "they would train as negative pairs: fill in or remove those rows and rerun"
    )
    assert not (tmp_path / "c").exists()


def test_an_empty_table_is_a_data_error(tmp_path, tokenizer_dir):
    empty = _table_with(tmp_path, [], name="empty.parquet")
    with pytest.raises(DataError, match=r"empty.parquet: the table has no rows; check the table"):
        build_token_cache(empty, tokenizer_dir, MAX_LENGTH, tmp_path / "c")


# --- a damaged cache, a max_length past the model's positions ---


def _record_batch_ends(arrow: Path) -> list[int]:
    import pyarrow as pa

    with pa.memory_map(str(arrow)) as src:
        ends = []
        for _ in pa.ipc.open_stream(src):
            ends.append(src.tell())
    return ends


def test_a_token_cache_cut_short_is_refused_not_loaded_in_part(tmp_path, tokenizer_dir):
    # cut at a record-batch boundary, the Arrow stream loaded 2000 of 2500 rows without a word
    # (training went on under the identity of the whole table); cut elsewhere, pyarrow's
    # "Expected to read 424 metadata bytes, but only read 144" named no file
    rows = [(f"first text {i}", f"second text {i}", float(i % 5)) for i in range(2500)]
    table = _write_table(tmp_path / "big.parquet", rows)
    out = tmp_path / "cache"
    build_token_cache(table, tokenizer_dir, MAX_LENGTH, out)
    (arrow,) = (out / "pairs").glob("*.arrow")
    ends = _record_batch_ends(arrow)
    assert len(ends) >= 3  # datasets writes 1000 rows a batch
    whole = arrow.read_bytes()
    arrow.write_bytes(whole[: ends[1]])
    with pytest.raises(StaleCacheError, match=r"holds 2000 examples where its cache.json records 2500.*delete it and rerun"):
        load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)
    arrow.write_bytes(whole[: ends[1] - 100])
    with pytest.raises(StaleCacheError, match=rf"token cache {out} cannot be read .*delete it and rerun"):
        load_token_cache(out, table, tokenizer_dir, MAX_LENGTH)


def test_a_max_length_past_the_models_positions_is_refused_when_texts_reach_it(tmp_path, tokenizer_dir):
    # tiny_bert has 128 positions: a 300-token text passed tokenization and failed the train
    # job's forward pass ("The expanded size of the tensor ...") when its batch came up
    long_text = " ".join(f"word{i}" for i in range(300))
    table = _write_table(tmp_path / "long.parquet", [(long_text, "short text", 1.0), ("a b", "c d", 2.0)])
    with pytest.raises(ValueError, match=r"max_length 512 is past what .* takes \(128 tokens, max_position_embeddings 128.*1 distinct text\(s\).*max_length\) to 128 or less"):
        build_token_cache(table, tokenizer_dir, 512, tmp_path / "c1")
    # past the positions but reached by no text: the same tokens, nothing to refuse
    build_token_cache(_write_table(tmp_path / "short.parquet"), tokenizer_dir, 512, tmp_path / "c2")
    build_token_cache(table, tokenizer_dir, 128, tmp_path / "c3")


def test_a_tree_of_its_own_takes_another_trees_cache_of_the_same_inputs(table, tokenizer_dir, tmp_path, monkeypatch):
    # issue 71: an overlay's own tree tokenized again what the demo's tree had; by identity it links it
    import aoe.model.tokens

    rel = Path("tokens/tiny-12/stsb/train")
    demo, mine, other = (tmp_path / "results" / t / rel for t in ("cpu-demo", "mine", "other"))
    built = build_token_cache(table, tokenizer_dir, MAX_LENGTH, demo)
    monkeypatch.setattr(aoe.model.tokens, "tokenize_texts", lambda *a, **kw: pytest.fail("tokenized again"))
    reused = build_token_cache(table, tokenizer_dir, MAX_LENGTH, mine)
    assert reused["reused_from"] == str(demo) and {k: v for k, v in reused.items() if k != "reused_from"} == built
    arrow = sorted((mine / "pairs").glob("*.arrow"))
    assert arrow and all(f.stat().st_ino == (demo / "pairs" / f.name).stat().st_ino for f in arrow)  # links, no copy
    assert load_token_cache(mine, table, tokenizer_dir, MAX_LENGTH)[0]["input_ids_1"] == load_token_cache(demo, table, tokenizer_dir, MAX_LENGTH)[0]["input_ids_1"]
    # another max_length is another cache: tokenized (the refusal above fires)
    with pytest.raises(pytest.fail.Exception, match="tokenized again"):
        build_token_cache(table, tokenizer_dir, MAX_LENGTH + 1, other)

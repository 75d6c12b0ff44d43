"""Input contracts (aoe.data.contracts): each table kind refused once for each way it can be wrong, at the place
it enters (the token cache, the trainer, the evaluations), and every real prepared table of the mirror accepted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from aoe.data.catalog import SOURCES
from aoe.data.contracts import check_manifest, check_score_range, check_table, contract_of, manifest_of, read_table
from aoe.data.io import DataError, sha256_file
from aoe.data.prepare import prepare_pairset, prepare_sts_table
from aoe.data.sts import SPLITS as STS_SPLITS, sts_files


def _pairs(n: int = 8, scores=None) -> dict:
    return {"sentence1": [f"a cat {i}" for i in range(n)], "sentence2": [f"a dog {i}" for i in range(n)],
            "score": [float(i % 2) for i in range(n)] if scores is None else scores}


VALID = {
    "stsb/test.parquet": lambda: pd.DataFrame({**_pairs(scores=[0.0, 1.5, 5.0, 2.0, 3.0, 4.0, 0.2, 4.8]), "split": "test", "subset": "stsb"}),
    "sickr/test.parquet": lambda: pd.DataFrame({**_pairs(scores=[1.0, 1.5, 5.0, 2.0, 3.0, 4.0, 1.2, 4.8]), "split": "test", "subset": "sickr"}),
    "mrpc/train.parquet": lambda: pd.DataFrame({**_pairs(), "pair_id": [f"p{i}" for i in range(8)]}),
    "snli/dev.parquet": lambda: pd.DataFrame(_pairs()),
    "snli/dev.nli3.parquet": lambda: pd.DataFrame(_pairs(scores=[float(i % 3) for i in range(8)])),
    "snli/dev.triplets.parquet": lambda: pd.DataFrame({**{k: v for k, v in _pairs().items() if k != "score"}, "sentence3": [f"no {i}" for i in range(8)]}),
    "flickr30k/test.parquet": lambda: pd.DataFrame({"image": [i // 5 for i in range(10)], "caption_index": [i % 5 for i in range(10)],
                                                    "caption": [f"a dog runs {i}" for i in range(10)]}),
    "stsb_llm/train.parquet": lambda: pd.DataFrame({**_pairs(), "split": "train", "subset": "similar"}),
    "stsb_llm_qwen/train.parquet": lambda: pd.DataFrame({**_pairs(), "split": "train", "subset": "similar"}),
    "anything/mine.parquet": lambda: pd.DataFrame(_pairs(scores=[7.5] * 8)),  # no catalogued data set: its format alone
}


def _write(root: Path, rel: str, df: pd.DataFrame) -> Path:
    path = root / "data" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("rel", sorted(VALID))
def test_a_valid_table_of_each_kind_passes(tmp_path, rel):
    path = _write(tmp_path, rel, VALID[rel]())
    assert len(read_table(path)) == len(VALID[rel]())


def _set(df: pd.DataFrame, col: str, row: int, value) -> pd.DataFrame:
    """``df`` with one cell changed; a value its column's type cannot hold (None or a number in a str column,
    a string in a number column) turns the column into objects, as a hand-edited table would hold them."""
    df = df.copy()
    if value is not None and isinstance(value, str) == (df[col].dtype == object or pd.api.types.is_string_dtype(df[col])):
        df.loc[row, col] = value
    else:
        df[col] = df[col].astype(object)
        df.loc[row, col] = value
    return df


# (table, how it is broken, the message): one row per clause of a contract
BROKEN = [
    ("stsb/test.parquet", lambda d: _set(d, "score", 3, 5.5),
     r"stsb/test.parquet \(a sts table\): 1 of 8 rows have a score outside the stsb gold scale \[0, 5\] \(column score; 0-based rows 3: values 5.5\); delete it and rerun snakemake"),
    ("sickr/test.parquet", lambda d: _set(d, "score", 0, 0.5), r"outside the sickr gold scale \[1, 5\] \(column score; 0-based rows 0: values 0.5\)"),
    ("stsb/test.parquet", lambda d: _set(d, "score", 2, float("inf")), r"1 of 8 rows have a score that is not a finite number \(column score; 0-based rows 2: values inf\)"),
    ("stsb/test.parquet", lambda d: _set(d, "score", 1, float("nan")), r"1 of 8 rows have no score \(NaN in column score; 0-based rows 1\)"),
    ("stsb/test.parquet", lambda d: d.drop(columns=["subset"]), r"\(a sts table\): no column subset \(it has sentence1, sentence2, score, split\)"),
    ("stsb/test.parquet", lambda d: d.assign(score=d["score"].astype(str)), r"column score holds \w+ values, not number ones"),
    ("mrpc/train.parquet", lambda d: _set(d, "score", 4, 0.5), r"\(a pairs table\): 1 of 8 rows have a score that is not one of 0, 1 \(column score; 0-based rows 4: values 0.5\)"),
    ("mrpc/train.parquet", lambda d: _set(d, "sentence2", 6, "  "), r"1 of 8 rows have a text that is empty or whitespace-only \(sentence2: 1; 0-based rows 6\)"),
    ("mrpc/train.parquet", lambda d: d.assign(sentence1=range(8)), r"column sentence1 holds int64 values, not text ones"),
    ("snli/dev.nli3.parquet", lambda d: _set(d, "score", 5, 3.0), r"\(a nli3 table\): 1 of 8 rows have a score that is not one of 0, 1, 2"),
    ("snli/dev.triplets.parquet", lambda d: _set(d, "sentence3", 0, None), r"\(sentence3: 1; 0-based rows 0\)"),
    ("flickr30k/test.parquet", lambda d: _set(d, "caption_index", 9, 5), r"\(a captions table\): 1 of 10 rows have a caption_index that is not one of 0, 1, 2, 3, 4"),
    ("flickr30k/test.parquet", lambda d: _set(d, "caption_index", 9, 3),
     r"\(a captions table\): 1 rows repeat an earlier row's image, caption_index \(columns image, caption_index; 0-based rows 9\)"),
    ("stsb_llm/train.parquet", lambda d: _set(d, "score", 7, 2.0), r"\(a generated table\): 1 of 8 rows have a score that is not one of 0, 1 .*rule llm_pairs"),
    ("anything/mine.parquet", lambda d: _set(d, "score", 0, float("-inf")), r"mine.parquet \(a pairs table\): 1 of 8 rows have a score that is not a finite number"),
    ("anything/mine.parquet", lambda d: d.iloc[:0], r"mine.parquet: the table has no rows"),
    ("stsb/test.parquet", lambda d: pd.DataFrame(columns=d.columns), r"test.parquet: the table has no rows"),
]


@pytest.mark.parametrize(("rel", "damage", "message"), BROKEN, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(BROKEN)])
def test_a_table_breaking_its_contract_is_refused_naming_file_column_rows_and_fix(tmp_path, rel, damage, message):
    path = _write(tmp_path, rel, damage(VALID[rel]()))
    with pytest.raises(DataError, match=message):
        read_table(path)


def test_more_offending_rows_than_shown_are_counted_and_cut(tmp_path):
    path = _write(tmp_path, "mrpc/train.parquet", VALID["mrpc/train.parquet"]().assign(score=0.5))
    with pytest.raises(DataError, match=r"8 of 8 rows .* 0-based rows 0, 1, 2, 3, 4, \.\.\.: values 0.5, 0.5, 0.5, 0.5, 0.5\)"):
        read_table(path)


def test_the_published_row_count_is_checked_where_a_table_is_written(tmp_path):
    path = tmp_path / "data" / "stsb" / "test.parquet"
    df = VALID["stsb/test.parquet"]()
    check_table(df, path)  # a reader compares rows with the manifest instead
    with pytest.raises(DataError, match=r"\(a sts table\): 8 rows where the published data set has 1379"):
        check_table(df, path, written=True)


# ---- where a table enters: the token cache, the trainer, the evaluations ----------------------------------


def test_the_token_cache_refuses_a_catalogued_table_breaking_its_contract(tmp_path, tiny_bert):
    from aoe.model.tokens import build_token_cache

    stsb = _write(tmp_path, "stsb/train.parquet", _set(VALID["stsb/test.parquet"]().assign(split="train"), "score", 1, 50.0))
    with pytest.raises(DataError, match=r"outside the stsb gold scale \[0, 5\] \(column score; 0-based rows 1: values 50.0\)"):
        build_token_cache(stsb, tiny_bert, 16, tmp_path / "cache")
    binary = _write(tmp_path, "mrpc/train.parquet", _set(VALID["mrpc/train.parquet"](), "score", 0, 0.7))
    with pytest.raises(DataError, match=r"not one of 0, 1"):
        build_token_cache(binary, tiny_bert, 16, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def _cfg(**kw):
    from aoe.training.train import TrainConfig

    return TrainConfig(**{**dict(objective="aoe", pooling="cls", seed=0, learning_rate=1e-3, batch_size=4, max_steps=2,
                                 log_every=1, max_length=16), **kw})


@pytest.mark.parametrize("score_range", [(0.0, 1.0), (1.0, 5.0)])
def test_train_scores_outside_the_declared_score_range_fail_before_training(tmp_path, tiny_bert, score_range):
    from aoe.model.tokens import build_token_cache
    from aoe.training.train import train

    # a user's own table (no catalogued data set): STS-like scores 0-5
    table = _write(tmp_path, "mine/train.parquet", pd.DataFrame(_pairs(scores=[0.0, 1.0, 2.5, 5.0, 3.0, 4.0, 0.5, 2.0])))
    build_token_cache(table, tiny_bert, 16, tmp_path / "cache")
    out = tmp_path / "seed0"
    lo, hi = score_range
    with pytest.raises(DataError, match=rf"have a score outside the train set's score_range \[{lo:g}, {hi:g}\] \(trainsets.mine.score_range; "
                                        r"column score; 0-based rows .*the table's scores run from 0 to 5\).*set trainsets.mine.score_range to the table's scale"):
        train(tmp_path / "cache", table, tiny_bert, out, _cfg(score_range=score_range), extra_record={"cell": {"trainset": "mine"}})
    assert not out.exists()
    train(tmp_path / "cache", table, tiny_bert, out, _cfg(score_range=(0.0, 5.0)), extra_record={"cell": {"trainset": "mine"}})
    assert (out / "aoe_config.json").is_file()


def test_non_finite_train_scores_are_refused():
    with pytest.raises(DataError, match=r"t.parquet: 1 of 3 rows have a score that is not a finite number \(column score; 0-based rows 1: values inf\)"):
        check_score_range(np.array([0.0, np.inf, 1.0]), (0.0, 1.0), "t.parquet", "trainsets.x.score_range")
    check_score_range(np.array([0.0, 1.0]), (0.0, 1.0), "t.parquet", "trainsets.x.score_range")


def _prepared(tmp_path: Path, rel: str) -> tuple[Path, Path]:
    """A valid table with the manifest its prepare rule writes (the STS layout)."""
    table = _write(tmp_path, rel, VALID[rel]())
    manifest = manifest_of(table)
    manifest.write_text(json.dumps({"dataset": table.parent.name, "split": "test", "rows": 8, "table_sha256": sha256_file(table)}))
    return table, manifest


def test_an_evaluation_refuses_a_table_changed_after_its_manifest_before_loading_the_model(tmp_path):
    from aoe.evaluate.run import run_indomain_evaluation, run_sts_evaluation

    table, manifest = _prepared(tmp_path, "stsb/test.parquet")
    recorded = sha256_file(table)
    _set(VALID["stsb/test.parquet"](), "score", 0, 4.0).to_parquet(table, index=False)  # one gold score edited
    expected = (rf"{table} is not the table its manifest {manifest} records: sha256 {sha256_file(table)} where {recorded} was written, "
                r"8 rows where 8 were written; it changed after it was prepared: delete it and rerun snakemake")
    for run in (lambda: run_sts_evaluation(tmp_path / "no-model", [str(table)], [str(manifest)], tmp_path / "sts.json", tasks=["STSB"]),
                lambda: run_indomain_evaluation(tmp_path / "no-model", table, manifest, tmp_path / "in.json", evalset="stsb_test")):
        with pytest.raises(DataError, match=expected):
            run()
    # cut to fewer rows: both numbers named
    VALID["stsb/test.parquet"]().iloc[:5].to_parquet(table, index=False)
    with pytest.raises(DataError, match=r"5 rows where 8 were written"):
        check_manifest(table, manifest)


def test_an_evaluation_names_a_manifest_cut_short_before_loading_the_model(tmp_path):
    # the STS, in-domain and retrieval evaluations, the MTEB tasks and the STS figures read a manifest's dataset
    # before checking the table against it: a manifest cut short failed there in a bare JSONDecodeError
    # (issue 53's second sweep, I20)
    from aoe.evaluate.run import run_indomain_evaluation, run_sts_evaluation

    table, manifest = _prepared(tmp_path, "stsb/test.parquet")
    manifest.write_bytes(manifest.read_bytes()[:40])
    expected = rf"{manifest}: not a readable manifest \(.*\); delete it and {table}, and rerun snakemake"
    for run in (lambda: run_sts_evaluation(tmp_path / "no-model", [str(table)], [str(manifest)], tmp_path / "sts.json", tasks=["STSB"]),
                lambda: run_indomain_evaluation(tmp_path / "no-model", table, manifest, tmp_path / "in.json", evalset="stsb_test")):
        with pytest.raises(DataError, match=expected):
            run()


def test_an_evaluation_refuses_a_table_without_its_manifest(tmp_path):
    from aoe.evaluate.run import run_nli_probe

    table = _write(tmp_path, "snli/test.nli3.parquet", VALID["snli/dev.nli3.parquet"]())
    with pytest.raises(DataError, match=rf"{table}: its manifest {table.parent / 'test.manifest.json'} is missing"):
        run_nli_probe(tmp_path / "no-model", [str(table)], tmp_path / "probe.json")


# ---- the real prepared tables of the mirror ----------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory) -> list[Path]:
    """Every table the prepare rules make from the mirror, as they make it (with manifests)."""
    out = tmp_path_factory.mktemp("prepared")
    tables = []
    for ds, splits in SOURCES.items():
        for split, src in splits.items():
            if src.kind == "mirror":
                tables += [Path(t["path"]) for t in prepare_pairset(ds, split, mirror, out)["tables"].values()]
    downstream = mirror / "senteval" / "downstream"
    for ds, splits in STS_SPLITS.items():
        for split in splits:
            table = out / ds / f"{split}.parquet"
            prepare_sts_table(ds, split, {r: downstream / r for r in sts_files(ds, split)}, table, manifest_of(table))
            tables.append(table)
    return tables


def test_every_real_prepared_table_keeps_its_contract_and_equals_its_manifest(prepared):
    kinds = {}
    for table in prepared:
        df = read_table(table, manifest=True)
        check_table(df, table, written=True)  # the published row count too
        kinds[contract_of(table).kind] = kinds.get(contract_of(table).kind, 0) + 1
    assert kinds == {"pairs": 8, "triplets": 4, "nli3": 4, "captions": 2, "sts": 11}  # pairs: MRPC's dev split too (issue 61)


def test_the_gis_collectors_pairs_keep_their_contract(tmp_path):
    from aoe.gis.stats import load_pairs

    path = tmp_path / "pairs.jsonl"
    good = [{"text1": f"issue {i}", "text2": f"issue {i + 1}", "label": i % 2, "repo": "o/r"} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in good))
    assert load_pairs(path) == good
    for row, message in (({"label": 2}, r"\(a gis_pairs table\): 1 of 4 rows have a label that is not one of 0, 1 \(column label; 0-based rows 2: values 2\)"),
                         ({"text2": " "}, r"1 of 4 rows have a text that is empty or whitespace-only \(text2: 1; 0-based rows 2\)")):
        bad = [dict(r) for r in good]
        bad[2].update(row)
        path.write_text("".join(json.dumps(r) + "\n" for r in bad))
        with pytest.raises(DataError, match=message):
            load_pairs(path)

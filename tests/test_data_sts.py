"""Tests for the STS readers (aoe.data.sts), the mirror lookup (aoe.data.mirror) and the file helpers (aoe.data.io).

The real-data tests read the read-only data mirror in place (``$AOE_DATA_MIRROR``
or ``../shared/data`` next to the repository) and are skipped when it is absent;
malformed-input tests build small synthetic SentEval trees under tmp_path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from aoe.data import sts
from aoe.data.io import DataError, sha256_file, write_parquet_atomic
from aoe.data.mirror import DOWNSTREAM_SUBDIR, resolve_downstream_root, verify_manifest
from tests.workflow_utils import MIRROR, needs_mirror

ALL_SPLITS = [(dataset, split) for dataset in sts.STS_DATASETS for split in sts.SPLITS[dataset]]


@pytest.fixture(autouse=True)
def _no_mirror_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests that exercise the env-var fallback set it themselves.
    monkeypatch.delenv("AOE_DATA_MIRROR", raising=False)


# ---------------------------------------------------------------- real mirror


@pytest.fixture(scope="module")
def downstream() -> Path:
    assert MIRROR is not None
    return MIRROR / DOWNSTREAM_SUBDIR


@needs_mirror
@pytest.mark.parametrize(("dataset", "split"), ALL_SPLITS)
def test_real_split_shape(downstream: Path, dataset: str, split: str) -> None:
    df = sts.read_sts(downstream, dataset, split)
    assert list(df.columns) == list(sts.COLUMNS)
    assert len(df) == sts.EXPECTED_ROWS[(dataset, split)]
    assert df["score"].dtype == "float64"
    for column in ("sentence1", "sentence2", "split", "subset"):
        assert pd.api.types.is_string_dtype(df[column])
    assert (df["split"] == split).all()
    low, high = sts.SCORE_RANGE[dataset]
    assert df["score"].between(low, high).all()
    # Single-space normalisation, as SentEval's split + SimCSE's join produce.
    for column in ("sentence1", "sentence2"):
        assert (df[column] == df[column].str.split().str.join(" ")).all()
        assert (df[column] != "").all()
    expected_subsets = list(sts.STS_SUBSETS.get(dataset, (dataset,)))
    assert list(dict.fromkeys(df["subset"])) == expected_subsets


def test_expected_rows_cover_every_split() -> None:
    assert set(sts.EXPECTED_ROWS) == set(ALL_SPLITS)
    assert set(sts.SCORE_RANGE) == set(sts.STS_DATASETS) == set(sts.SPLITS)


@needs_mirror
def test_real_subset_counts(downstream: Path) -> None:
    sts12 = sts.read_sts(downstream, "sts12", "test")["subset"].value_counts().to_dict()
    assert sts12 == {
        "MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399
    }
    sts16 = sts.read_sts(downstream, "sts16", "test")["subset"].value_counts().to_dict()
    assert sts16 == {
        "answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209
    }


def _senteval_reference(downstream: Path, dataset: str, split: str) -> list[tuple[str, str, float]]:
    """What SentEval's loaders yield (file order, before its length sort), written independently."""

    def join(sentence: str) -> str:
        return " ".join(sentence.split())

    if dataset in sts.STS_SUBSETS:
        rows = []
        for rel_input, rel_gold in zip(*[iter(sts.sts_files(dataset, split))] * 2, strict=True):
            pairs = (downstream / rel_input).read_text(encoding="utf-8").splitlines()
            golds = (downstream / rel_gold).read_text(encoding="utf-8").splitlines()
            rows += [
                (join(pair.split("\t")[0]), join(pair.split("\t")[1]), float(gold))
                for pair, gold in zip(pairs, golds, strict=True)
                if gold != ""
            ]
        return rows
    s1, s2, score, skip = (5, 6, 4, 0) if dataset == "stsb" else (1, 2, 3, 1)
    (rel,) = sts.sts_files(dataset, split)
    with open(downstream / rel, encoding="utf-8") as fh:
        fields = [line.strip().split("\t") for line in fh][skip:]
    return [(join(f[s1]), join(f[s2]), float(f[score])) for f in fields]


@needs_mirror
@pytest.mark.parametrize(("dataset", "split"), ALL_SPLITS)
def test_real_matches_senteval_semantics(downstream: Path, dataset: str, split: str) -> None:
    df = sts.read_sts(downstream, dataset, split)
    got = list(zip(df["sentence1"], df["sentence2"], df["score"], strict=True))
    assert got == _senteval_reference(downstream, dataset, split)


@needs_mirror
def test_real_first_rows(downstream: Path) -> None:
    first = sts.read_sts(downstream, "sts12", "test").iloc[0]
    assert first["sentence1"] == (
        "the problem likely will mean corrective changes before the shuttle fleet starts flying again ."
    )
    assert first["score"] == 4.4
    assert first["subset"] == "MSRpar"

    # STS16 answer-answer: lines 1-8 have no gold score, the first kept pair is line 9.
    first = sts.read_sts(downstream, "sts16", "test").iloc[0]
    assert first["sentence1"].startswith("i remained under the banyan tree")
    assert first["score"] == 3.0

    first = sts.read_sts(downstream, "stsb", "train").iloc[0]
    assert (first["sentence1"], first["sentence2"], first["score"], first["subset"]) == (
        "a plane is taking off .",
        "an air plane is taking off .",
        5.0,
        "stsb",
    )

    # SICK test has CRLF line endings; the header line is skipped.
    first = sts.read_sts(downstream, "sickr", "test").iloc[0]
    assert first["sentence1"] == "There is no boy playing outdoors and there is no man smiling"
    assert first["score"] == 3.3
    assert first["subset"] == "sickr"
    assert sts.read_sts(downstream, "sickr", "dev").iloc[0]["score"] == 3.6


@needs_mirror
def test_real_manifest_provenance() -> None:
    assert MIRROR is not None
    relpaths = [
        f"{DOWNSTREAM_SUBDIR}/{rel}"
        for dataset, split in ALL_SPLITS
        for rel in sts.sts_files(dataset, split)
    ]
    provenance = verify_manifest(MIRROR, relpaths)
    assert set(provenance) == set(relpaths)
    for rel, info in provenance.items():
        assert info["sha256"] == sha256_file(MIRROR / rel)
        assert info["source"]


@needs_mirror
def test_resolve_real_mirror(monkeypatch: pytest.MonkeyPatch, downstream: Path) -> None:
    assert MIRROR is not None
    assert resolve_downstream_root(str(MIRROR)) == downstream.absolute()
    assert resolve_downstream_root(downstream) == downstream.absolute()
    monkeypatch.setenv("AOE_DATA_MIRROR", str(MIRROR))
    assert resolve_downstream_root(None) == downstream.absolute()


# ---------------------------------------------------------------- synthetic trees


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _make_sts13(root: Path, lines: int = 2) -> None:
    """Minimal STS13 tree: every subset gets ``lines`` scored pairs plus one unscored pair."""
    year = root / "STS" / "STS13-en-test"
    for subset in sts.STS_SUBSETS["sts13"]:
        pairs = "".join(f"{subset}  a {i}\t {subset} b {i}\n" for i in range(lines)) + "unscored\tpair\n"
        golds = "".join(f"{i}.5\n" for i in range(lines)) + "\n"
        _write(year / f"STS.input.{subset}.txt", pairs)
        _write(year / f"STS.gs.{subset}.txt", golds)


def _make_stsb(root: Path, split: str, rows: list[str]) -> Path:
    return _write(root / "STS" / "STSBenchmark" / f"sts-{split}.csv", "".join(r + "\n" for r in rows))


def _make_sick(root: Path, name: str, rows: list[str], newline: str = "\n") -> Path:
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    return _write(root / "SICK" / name, "".join(r + newline for r in [header, *rows]))


def _stsb_row(score: str = "3.0", s1: str = "a b", s2: str = "c d") -> str:
    return f"main-news\tfile\t2012\t0001\t{score}\t{s1}\t{s2}"


def test_synthetic_sts13(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_sts13(tmp_path)
    # A stray gold file without input (like the real STS13 SMT one) must be ignored.
    _write(tmp_path / "STS" / "STS13-en-test" / "STS.gs.SMT.txt", "1\n")
    monkeypatch.setitem(sts.EXPECTED_ROWS, ("sts13", "test"), 6)
    df = sts.read_sts(tmp_path, "sts13", "test")
    assert list(df["subset"]) == ["FNWN", "FNWN", "headlines", "headlines", "OnWN", "OnWN"]
    assert list(df["sentence1"][:2]) == ["FNWN a 0", "FNWN a 1"]
    assert list(df["sentence2"][:2]) == ["FNWN b 0", "FNWN b 1"]
    assert list(df["score"][:2]) == [0.5, 1.5]


def test_synthetic_sick_crlf_and_dev_is_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_sick(tmp_path, "SICK_trial.txt", ["1\tx  y\tz\t4.5\tNEUTRAL", "2\tp\tq\t1\tNEUTRAL"], newline="\r\n")
    monkeypatch.setitem(sts.EXPECTED_ROWS, ("sickr", "dev"), 2)
    df = sts.read_sts(tmp_path, "sickr", "dev")
    assert df.to_dict("list") == {
        "sentence1": ["x y", "p"],
        "sentence2": ["z", "q"],
        "score": [4.5, 1.0],
        "split": ["dev", "dev"],
        "subset": ["sickr", "sickr"],
    }


def test_unknown_dataset_and_split(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"unknown STS dataset 'sts17'.*sts12.*sickr"):
        sts.read_sts(tmp_path, "sts17", "test")
    with pytest.raises(DataError, match=r"unknown split 'train' for sts12; valid: test"):
        sts.sts_files("sts12", "train")


def test_missing_subset_file(tmp_path: Path) -> None:
    _make_sts13(tmp_path)
    missing = tmp_path / "STS" / "STS13-en-test" / "STS.input.headlines.txt"
    missing.unlink()
    with pytest.raises(DataError, match="missing file") as info:
        sts.read_sts(tmp_path, "sts13", "test")
    assert str(missing) in str(info.value)


def test_empty_sentence(tmp_path: Path) -> None:
    _make_sts13(tmp_path)
    path = tmp_path / "STS" / "STS13-en-test" / "STS.input.OnWN.txt"
    _write(path, "ok\tfine\n \t  \nunscored\tpair\n")
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sts13", "test")
    assert f"{path}:2: sentence1 is empty" in str(info.value)


def test_empty_sentence_stsb(tmp_path: Path) -> None:
    path = _make_stsb(tmp_path, "dev", [_stsb_row(), _stsb_row(s2="   ") + "\textra"])
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "stsb", "dev")
    assert f"{path}:2: sentence2 is empty" in str(info.value)


def test_non_numeric_score(tmp_path: Path) -> None:
    _make_sts13(tmp_path)
    gold = tmp_path / "STS" / "STS13-en-test" / "STS.gs.headlines.txt"
    _write(gold, "1.0\nabc\n\n")
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sts13", "test")
    assert f"{gold}:2: gold score 'abc' is not a number" in str(info.value)


@pytest.mark.parametrize("bad", ["5.5", "-0.1", "nan", "inf"])
def test_score_outside_scale(tmp_path: Path, bad: str) -> None:
    path = _make_stsb(tmp_path, "test", [_stsb_row(), _stsb_row(), _stsb_row(score=bad)])
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "stsb", "test")
    assert f"{path}:3: gold score {bad!r} is outside the stsb scale [0, 5]" in str(info.value)


def test_sick_scale_starts_at_one(tmp_path: Path) -> None:
    path = _make_sick(tmp_path, "SICK_train.txt", ["1\ta\tb\t0.5\tNEUTRAL"])
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sickr", "train")
    assert f"{path}:2: gold score '0.5' is outside the sickr scale [1, 5]" in str(info.value)


def test_too_few_fields(tmp_path: Path) -> None:
    path = _make_stsb(tmp_path, "train", [_stsb_row(), "main-news\tfile\t2012\t0001\t3.0\tonly one"])
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "stsb", "train")
    assert f"{path}:2: expected at least 7 tab-separated fields, got 6" in str(info.value)


def test_sts_line_with_extra_tab(tmp_path: Path) -> None:
    _make_sts13(tmp_path)
    path = tmp_path / "STS" / "STS13-en-test" / "STS.input.FNWN.txt"
    _write(path, "a\tb\na\tb\tc\nunscored\tpair\n")
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sts13", "test")
    assert f"{path}:2: expected 2 tab-separated sentences, got 3 fields" in str(info.value)


def test_gold_and_input_misaligned(tmp_path: Path) -> None:
    _make_sts13(tmp_path)
    gold = tmp_path / "STS" / "STS13-en-test" / "STS.gs.FNWN.txt"
    _write(gold, "1\n2\n")
    with pytest.raises(DataError, match="misaligned") as info:
        sts.read_sts(tmp_path, "sts13", "test")
    assert str(gold) in str(info.value)


def test_sick_missing_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "SICK" / "SICK_test_annotated.txt", "1\ta\tb\t3\tNEUTRAL\n")
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sickr", "test")
    assert f"{path}:1: expected a header line" in str(info.value)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    path = _make_stsb(tmp_path, "dev", [_stsb_row(), _stsb_row()])
    path.write_bytes(path.read_bytes() + b"bad\xff\n")
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "stsb", "dev")
    assert f"{path}:3: not valid UTF-8" in str(info.value)


def test_wrong_row_count(tmp_path: Path) -> None:
    path = _make_stsb(tmp_path, "test", [_stsb_row(), _stsb_row()])
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "stsb", "test")
    message = str(info.value)
    assert "expected 1379 scored pairs, got 2" in message
    assert str(path) in message

    _make_sts13(tmp_path)
    with pytest.raises(DataError) as info:
        sts.read_sts(tmp_path, "sts13", "test")
    message = str(info.value)
    assert "expected 1500 scored pairs, got 6" in message
    assert str(tmp_path / "STS" / "STS13-en-test" / "STS.gs.OnWN.txt") in message


def test_sts_files() -> None:
    assert sts.sts_files("stsb", "dev") == ["STS/STSBenchmark/sts-dev.csv"]
    assert sts.sts_files("sickr", "dev") == ["SICK/SICK_trial.txt"]
    assert sts.sts_files("sts13", "test") == [
        "STS/STS13-en-test/STS.input.FNWN.txt",
        "STS/STS13-en-test/STS.gs.FNWN.txt",
        "STS/STS13-en-test/STS.input.headlines.txt",
        "STS/STS13-en-test/STS.gs.headlines.txt",
        "STS/STS13-en-test/STS.input.OnWN.txt",
        "STS/STS13-en-test/STS.gs.OnWN.txt",
    ]


# ---------------------------------------------------------------- resolve / manifest


def test_resolve_downstream_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_downstream_root(None) is None
    assert resolve_downstream_root("") is None

    mirror = tmp_path / "mirror"
    (mirror / "senteval" / "downstream" / "STS").mkdir(parents=True)
    expected = mirror / "senteval" / "downstream"
    assert resolve_downstream_root(mirror) == expected
    assert resolve_downstream_root(str(expected)) == expected

    monkeypatch.setenv("AOE_DATA_MIRROR", str(mirror))
    assert resolve_downstream_root(None) == expected
    # An explicit argument wins over the environment.
    other = tmp_path / "other" / "downstream"
    (other / "STS").mkdir(parents=True)
    assert resolve_downstream_root(other) == other


def test_resolve_downstream_root_bad_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absent = tmp_path / "absent"
    with pytest.raises(DataError, match="does not exist") as info:
        resolve_downstream_root(absent)
    assert str(absent) in str(info.value)

    monkeypatch.setenv("AOE_DATA_MIRROR", str(absent))
    with pytest.raises(DataError, match=str(absent)):
        resolve_downstream_root(None)

    wrong = tmp_path / "wrong"
    (wrong / "senteval").mkdir(parents=True)
    with pytest.raises(DataError, match="neither a data mirror") as info:
        resolve_downstream_root(wrong)
    assert str(wrong) in str(info.value)


def _manifest_line(root: Path, rel: str, source: str = "owner/repo@abc:path") -> str:
    path = root / rel
    data = path.read_bytes()
    lines = data.count(b"\n")
    return f"{rel}\t{lines}\t{len(data)}\t{hashlib.sha256(data).hexdigest()}\t{source}\n"


def test_verify_manifest(tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    good = "senteval/downstream/STS/STSBenchmark/sts-test.csv"
    bad = "senteval/downstream/STS/STSBenchmark/sts-dev.csv"
    _write(root / good, "one\n")
    _write(root / bad, "two\n")
    _write(root / "unlisted.txt", "three\n")
    _write(
        root / "MANIFEST.tsv",
        "path\tlines\tbytes\tsha256\tsource\n" + _manifest_line(root, good, "src/a") + _manifest_line(root, bad),
    )
    assert verify_manifest(root, [good]) == {good: {"sha256": sha256_file(root / good), "source": "src/a"}}

    _write(root / bad, "tampered\n")
    with pytest.raises(DataError, match="does not match") as info:
        verify_manifest(root, [good, bad])
    assert str(root / bad) in str(info.value)

    with pytest.raises(DataError, match="not listed") as info:
        verify_manifest(root, ["unlisted.txt"])
    assert str(root / "unlisted.txt") in str(info.value)

    (root / good).unlink()
    with pytest.raises(DataError, match="does not exist"):
        verify_manifest(root, [good])


@needs_mirror
def test_verify_manifest_tampered_copy_of_real_file(tmp_path: Path) -> None:
    assert MIRROR is not None
    rel = f"{DOWNSTREAM_SUBDIR}/{sts.sts_files('sts13', 'test')[1]}"
    copy = tmp_path / "mirror"
    (copy / rel).parent.mkdir(parents=True)
    shutil.copyfile(MIRROR / "MANIFEST.tsv", copy / "MANIFEST.tsv")
    shutil.copyfile(MIRROR / rel, copy / rel)
    assert verify_manifest(copy, [rel])[rel]["sha256"] == sha256_file(MIRROR / rel)
    with open(copy / rel, "a", encoding="utf-8") as fh:
        fh.write("5.0\n")
    with pytest.raises(DataError, match="sha256") as info:
        verify_manifest(copy, [rel])
    assert str(copy / rel) in str(info.value)


def test_verify_manifest_without_manifest(tmp_path: Path) -> None:
    _write(tmp_path / "a.txt", "x")
    expected = {"a.txt": {"sha256": hashlib.sha256(b"x").hexdigest(), "source": None}}
    assert verify_manifest(tmp_path, ["a.txt"]) == expected


def test_verify_manifest_malformed(tmp_path: Path) -> None:
    manifest = _write(tmp_path / "MANIFEST.tsv", "path\tlines\tbytes\tsha256\tsource\na.txt\t1\n")
    with pytest.raises(DataError) as info:
        verify_manifest(tmp_path, ["a.txt"])
    assert f"{manifest}:2: expected 5 tab-separated fields, got 2" in str(info.value)


# ---------------------------------------------------------------- io helpers


def test_sha256_file(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = os.urandom(3 << 20)  # spans several read chunks
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_write_parquet_atomic_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_sick(tmp_path / "tree", "SICK_trial.txt", ["1\ta\tb\t2\tNEUTRAL"])
    monkeypatch.setitem(sts.EXPECTED_ROWS, ("sickr", "dev"), 1)
    df = sts.read_sts(tmp_path / "tree", "sickr", "dev")
    out = tmp_path / "new" / "dir" / "sick.parquet"
    assert write_parquet_atomic(df, out) == out
    pd.testing.assert_frame_equal(pd.read_parquet(out), df)
    assert sorted(p.name for p in out.parent.iterdir()) == ["sick.parquet"]


def test_write_parquet_atomic_failure_keeps_old_file(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    write_parquet_atomic(pd.DataFrame({"x": [1]}), out)
    before = out.read_bytes()
    # A column of arbitrary Python objects cannot be written to parquet.
    with pytest.raises(Exception):
        write_parquet_atomic(pd.DataFrame({"x": [object()]}), out)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]

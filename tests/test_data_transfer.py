"""SentEval transfer tasks' readers (aoe.data.transfer): the real data mirror's files and a synthetic corpus.

The synthetic corpus in SentEval's layout (:func:`tests.senteval_reference.write_synthetic_senteval`)
carries the quirks the readers must reproduce and needs no mirror; the mirror's tests skip without it.
The evaluation on what they read is tests/test_evaluate_transfer.py.
"""

from __future__ import annotations

import pytest

from aoe.data.io import DataError
from aoe.data.transfer import EXPECTED_ROWS, TRANSFER_TASKS, read_transfer, resolve_transfer_root, transfer_files
from tests.senteval_reference import MIRROR_SIZES, write_synthetic_senteval

# Each task's first sample on the mirror: (first sentence, its label, second sentence).
MIRROR_FIRST = {
    "MR": (
        (
            "the rock is destined to be the 21st century 's new `` conan `` and that he 's going to make a splash "
            "even greater than arnold schwarzenegger , jean-claud van damme or steven segal ."
        ),
        1,
        None,
    ),
    "CR": ("im a more happier person after discovering the i/p button ! .", 1, None),
    "SUBJ": ("the movie begins in the past where a young boy named sam attempts to save celebi from a hunter .", 1, None),
    "MPQA": ("are also being encouraged", 1, None),
    "SST2": ("hide new secretions from the parental units", 0, None),
    "TREC": ("How did serfdom develop in and then leave Russia ?", 1, None),
    "MRPC": (
        "Amrozi accused his brother , whom he called \" the witness \" , of deliberately distorting his evidence .",
        1,
        (
            "Referring to him as only \" the witness \" , Amrozi accused his brother of deliberately distorting his "
            "evidence ."
        ),
    ),
}


# --------------------------------------------------------------------------
# Readers on the mirror
# --------------------------------------------------------------------------


@pytest.mark.parametrize("task", TRANSFER_TASKS)
def test_mirror_sizes_and_first_rows(mirror_data, task):
    data = mirror_data[task]
    assert {split: len(s) for split, s in data.splits.items()} == MIRROR_SIZES[task]
    first = next(iter(data.splits.values()))
    sentence, label, second = MIRROR_FIRST[task]
    assert (first.sentences[0], first.labels[0]) == (sentence, label)
    assert (first.sentences2[0] if data.pair else None) == second
    assert data.pair == (task == "MRPC")
    assert data.n_classes == (6 if task == "TREC" else 2)
    assert {y for s in data.splits.values() for y in s.labels} == set(range(data.n_classes))
    assert list(data.files) == transfer_files(task)


def test_mirror_quirks(mirror_data):
    # Blank lines are samples to SentEval (it encodes the empty sentence).
    assert sum(not s for s in mirror_data["CR"].splits["all"].sentences) == 4
    assert sum(not s for s in mirror_data["MPQA"].splits["all"].sentences) == 3
    # Positive file first; SUBJ's objective file plays the positive role.
    assert mirror_data["MR"].splits["all"].labels[:5331] == [1] * 5331
    assert sum(mirror_data["SUBJ"].splits["all"].labels[:5000]) == 5000


def test_transfer_files_are_in_the_manifest(mirror):
    from aoe.data.mirror import verify_manifest

    rels = [f"senteval/downstream/{rel}" for task in TRANSFER_TASKS for rel in transfer_files(task)]
    assert len(rels) == len(EXPECTED_ROWS)
    provenance = verify_manifest(mirror, rels)
    assert set(provenance) == set(rels)


# --------------------------------------------------------------------------
# Readers: synthetic quirks and error paths
# --------------------------------------------------------------------------


def test_synthetic_quirks(synthetic):
    cr = synthetic["CR"].splits["all"]
    assert len(cr) == 71 + 45  # the NEL byte split one line in two; blank lines kept
    assert sum(not s for s in cr.sentences) == 2
    assert synthetic["MR"].splits["all"].sentences[3].startswith("caf\u00e9 au lait ")
    assert synthetic["SST2"].splits["train"].sentences[2].startswith("na\u00efve ")
    trec = synthetic["TREC"].splits["test"]
    assert len(trec) == 60 and not any("\r" in s or "fine" in s for s in trec.sentences)
    assert synthetic["TREC"].splits["train"].sentences[1].endswith(" r\u00e9sum\u00e9")
    mrpc = synthetic["MRPC"].splits["train"]
    assert len(mrpc) == 200 and len(mrpc.sentences2) == 200
    assert "Quality" not in mrpc.sentences[0]


def test_published_row_counts_are_enforced(tmp_path):
    root = write_synthetic_senteval(tmp_path)
    with pytest.raises(DataError, match=r"MR/rt-polarity\.pos: expected 5331 samples, got 60"):
        read_transfer(root, "MR")
    with pytest.raises(DataError, match=r"TREC/train_5500\.label: expected 5452 samples, got 300"):
        read_transfer(root, "TREC")


def test_missing_file_is_named(tmp_path):
    root = write_synthetic_senteval(tmp_path)
    (root / "SST/binary/sentiment-dev").unlink()
    with pytest.raises(DataError, match=r"missing file\(s\): .*SST/binary/sentiment-dev"):
        read_transfer(root, "SST2", expected_rows=None)


@pytest.mark.parametrize(
    "rel, text, message",
    [
        ("TREC/TREC_10.label", "FOO:bar What is it ?\n", r"TREC_10\.label:1: unknown TREC label 'FOO'"),
        ("TREC/TREC_10.label", "NUM:dist\n", r"TREC_10\.label:1: expected 'COARSE:fine sentence'"),
        ("SST/binary/sentiment-test", "a sentence without a label\n", r"sentiment-test:1: expected a sentence and a label"),
        ("SST/binary/sentiment-test", "a fine film\t3\n", r"sentiment-test:1: label 3 is not 0 or 1"),
        ("MRPC/msr_paraphrase_test.txt", "1\t1\t2\ta\tb\n", r"msr_paraphrase_test\.txt:1: expected a header"),
        ("MRPC/msr_paraphrase_test.txt", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\n",
         r"msr_paraphrase_test\.txt:2: expected at least 5 tab-separated fields, got 4"),
    ],
)
def test_malformed_lines_are_located(tmp_path, rel, text, message):
    root = write_synthetic_senteval(tmp_path)
    (root / rel).write_text(text, encoding="utf-8")
    task = rel.split("/")[0].replace("SST", "SST2")
    with pytest.raises(DataError, match=message):
        read_transfer(root, task, expected_rows=None)


def test_unknown_task_and_root(tmp_path):
    with pytest.raises(DataError, match="unknown transfer task 'SST5'"):
        transfer_files("SST5")
    with pytest.raises(DataError, match="neither a data mirror"):
        resolve_transfer_root(tmp_path)
    root = write_synthetic_senteval(tmp_path / "senteval" / "downstream")
    assert resolve_transfer_root(tmp_path) == root
    assert resolve_transfer_root(root) == root
    # the workflow lays out only the tasks it evaluates (the CI preset: TREC and MRPC)
    only = tmp_path / "only"
    (only / "TREC").mkdir(parents=True)
    assert resolve_transfer_root(only) == only

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
    with pytest.raises(DataError, match=r"MR/rt-polarity\.pos \(SentEval MR\): 60 samples where the published file has 5331 "
                                        r"\(a copy cut short, or another version\); restore the published file: delete it and rerun snakemake"):
        read_transfer(root, "MR")
    with pytest.raises(DataError, match=r"TREC/train_5500\.label \(SentEval TREC\): 300 samples where the published file has 5452"):
        read_transfer(root, "TREC")


def test_missing_file_is_named(tmp_path):
    root = write_synthetic_senteval(tmp_path)
    (root / "SST/binary/sentiment-dev").unlink()
    with pytest.raises(DataError, match=r"missing file\(s\): .*SST/binary/sentiment-dev"):
        read_transfer(root, "SST2", expected_rows=None)


@pytest.mark.parametrize(
    "rel, text, message",
    [
        ("TREC/TREC_10.label", "NUM:dist\n", r"TREC_10\.label:1: expected 'COARSE:fine sentence'"),
        ("SST/binary/sentiment-test", "a sentence without a label\n", r"sentiment-test:1: expected a sentence and a label"),
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


# --------------------------------------------------------------------------
# The tasks' contract (aoe.data.contracts.TRANSFER_CONTRACTS), checked on every file read
# --------------------------------------------------------------------------


def _edit_line(path, number, edit, encoding="utf-8"):
    lines = path.read_bytes().decode(encoding).split("\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_bytes("\n".join(lines).encode(encoding))


@pytest.mark.parametrize(
    "task, rel, encoding, edits, message",
    [
        # SentEval's TREC loader raised a KeyError on the first such line; the reader named that line alone
        ("TREC", "TREC/TREC_10.label", "latin-1", {3: lambda ln: "FOO" + ln[ln.index(":"):], 9: lambda ln: "BAR" + ln[ln.index(":"):]},
         r"TREC/TREC_10\.label \(SentEval TREC\): 2 of 60 samples have a label that is not one of ABBR, DESC, ENTY, HUM, LOC, NUM "
         r"\(the coarse label before ':'; lines 3, 9: values 'FOO', 'BAR'\); restore the published file: delete it and rerun snakemake"),
        ("SST2", "SST/binary/sentiment-test", "utf-8", {4: lambda ln: ln[: ln.rindex("\t")] + "\t3"},
         r"sentiment-test \(SentEval SST2\): 1 of 80 samples have a label that is not one of 0, 1 \(the label after the tab; "
         r"lines 4: values '3'\)"),
        ("MRPC", "MRPC/msr_paraphrase_test.txt", "utf-8", {5: lambda ln: "0.5" + ln[ln.index("\t"):]},
         r"msr_paraphrase_test\.txt \(SentEval MRPC\): 1 of \d+ samples have a label that is not one of 0, 1 \(the Quality field; "
         r"lines 5: values '0\.5'\)"),
    ],
)
def test_a_label_outside_the_tasks_classes_names_the_file_field_lines_and_fix(tmp_path, task, rel, encoding, edits, message):
    root = write_synthetic_senteval(tmp_path)
    for number, edit in edits.items():
        _edit_line(root / rel, number, edit, encoding)
    with pytest.raises(DataError, match=message):
        read_transfer(root, task, expected_rows=None, published=False)


@pytest.mark.parametrize(
    "task, rel, number, edit, message",
    [
        # the old readers encoded these as the special tokens alone: the same vector for each, a silent sample
        ("MRPC", "MRPC/msr_paraphrase_train.txt", 7, lambda ln: "\t".join(ln.split("\t")[:3] + [" "] + ln.split("\t")[4:]),
         r"msr_paraphrase_train\.txt \(SentEval MRPC\): 1 of 200 samples have an empty sentence \(sentence1: 1; lines 7\), "
         r"where the published file has none: each would be encoded as the special tokens alone"),
        ("MR", "MR/rt-polarity.neg", 10, lambda ln: "   ", r"rt-polarity\.neg \(SentEval MR\): 1 of 60 samples have an empty sentence "
         r"\(sentence: 1; lines 10\), where the published file has none"),
    ],
)
def test_an_empty_sentence_the_published_file_does_not_have_is_refused(tmp_path, task, rel, number, edit, message):
    root = write_synthetic_senteval(tmp_path)
    _edit_line(root / rel, number, edit, "latin-1" if task == "MR" else "utf-8")
    with pytest.raises(DataError, match=message):
        read_transfer(root, task, expected_rows=None, published=False)


def test_the_blank_lines_a_published_file_keeps_pass_and_one_more_is_refused(tmp_path):
    # CR's published files keep two blank lines each (SentEval encodes them as empty samples): the synthetic
    # custrev.neg has one, a second passes, a third does not
    root = write_synthetic_senteval(tmp_path)
    neg = root / "CR/custrev.neg"
    _edit_line(neg, 2, lambda ln: "", "latin-1")
    read_transfer(root, "CR", expected_rows=None, published=False)
    _edit_line(neg, 3, lambda ln: "", "latin-1")
    with pytest.raises(DataError, match=r"custrev\.neg \(SentEval CR\): 3 of 45 samples have an empty sentence \(sentence: 3; "
                                        r"lines 2, 3, 6\), where the published file has 2 \(blank lines SentEval keeps\)"):
        read_transfer(root, "CR", expected_rows=None, published=False)


def test_a_file_short_of_its_published_size_is_refused_before_the_sha256(tmp_path, mirror):
    # the published TREC test file cut to 65 lines: the sample count, not only a mismatching sha256, says what is wrong
    import shutil

    root = tmp_path / "downstream"
    src = resolve_transfer_root(mirror)
    for rel in transfer_files("TREC"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, root / rel)
    test = root / "TREC/TREC_10.label"
    test.write_bytes(b"\n".join(test.read_bytes().split(b"\n")[:65]) + b"\n")
    with pytest.raises(DataError, match=r"TREC/TREC_10\.label \(SentEval TREC\): 65 samples where the published file has 500 "
                                        r"\(a copy cut short, or another version\); restore the published file"):
        read_transfer(root, "TREC")

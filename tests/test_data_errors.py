"""Data problems the pipeline must report in one line naming the file or key and the fix (issue 23).

A changed published file fails whichever folder it was found in (the package ships the sha256
of every published file it reads, aoe.data.mirror); a file the mirror lacks is fetched from
its recorded source, or, where the evaluations read SentEval's folder as a whole, named when
the job is planned; a bad mirror setting names the setting it came from; a saturation dataset
that is no pair table lists the valid ones.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from aoe.data.catalog import pair_table_problem
from aoe.data.io import DataError, sha256_file
from aoe.data.mirror import DOWNSTREAM_SUBDIR, TABLE, check_published, mirror_sources, resolve_downstream_root, upstream_url
from aoe.data.prepare import prepare_sts_table
from aoe.data.published import pipeline_files, write_table
from aoe.data.transfer import read_transfer
from tests.forkserver import forked_snakemake
from tests.workflow_utils import MIRROR, REPO, copy_workflow, needs_mirror

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

STSB_TEST = "STS/STSBenchmark/sts-test.csv"
STSB_TEST_SOURCE = "yan-soares/research_embeddings_fine_tuning@045c5e94572a:data/downstream/STS/STSBenchmark/sts-test.csv"
# what the STS-B test file holds on its line 10, and the edit of issue 23
GOLD_LINE, EDITED_LINE = "\t1.714\ta man is playing a guitar .", "\t4.9\ta man is playing a guitar ."
MISMATCH_FIX = (
    "restore the published file (a downloaded copy: delete it to fetch it again) "
    "or point AOE_DATA_MIRROR (config data.mirror) at an intact copy of the mirror"
)
# no download is refused because the suite runs offline, unless a test serves the file itself
ONLINE = {"HF_HUB_OFFLINE": "", "AOE_OFFLINE": ""}


def _mismatch(path: Path, rel: str, source: str) -> str:
    found = sha256_file(path)
    expected = mirror_sources()[rel]["sha256"]
    return f"{path}: sha256 {found} is not the published {expected} of {rel} (from {source}); {MISMATCH_FIX}"


def _downstream_copy(root: Path, *rels: str) -> Path:
    """A bare SentEval downstream folder (a supported mirror layout) with these files of the mirror."""
    downstream = root / "downstream"
    for rel in rels:
        (downstream / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MIRROR / DOWNSTREAM_SUBDIR / rel, downstream / rel)
    return downstream


def _edit_gold_score(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    assert GOLD_LINE in lines[9]
    lines[9] = lines[9].replace(GOLD_LINE, EDITED_LINE)
    path.write_text("\n".join(lines), encoding="utf-8")


def _message_after(stdout: str, header: str) -> str:
    """The line after the first line starting with ``header`` (Snakemake prints the message there)."""
    lines = stdout.splitlines()
    index = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    assert index is not None, stdout[-3000:]
    return lines[index + 1].strip()


@pytest.fixture(scope="module")
def workflow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the workflow for the dry runs (they write nothing but .snakemake/)."""
    return copy_workflow(tmp_path_factory.mktemp("wf") / "wf")


# ---------------------------------------------------------------- the shipped table


@needs_mirror
def test_the_shipped_table_is_what_the_mirror_regenerates(tmp_path):
    # every file a reader reads is pinned, with the mirror's sha256 and source, and nothing else is
    out = write_table(MIRROR, tmp_path / TABLE)
    shipped = REPO / "aoe" / "resources" / TABLE
    assert out.read_text(encoding="utf-8") == shipped.read_text(encoding="utf-8")
    assert sorted(mirror_sources()) == pipeline_files()


def test_regenerating_needs_a_full_mirror(tmp_path):
    with pytest.raises(DataError) as info:
        write_table(tmp_path)
    assert str(info.value) == f"{tmp_path} has no MANIFEST.tsv: give the root of a full data mirror"


# ---------------------------------------------------------------- a changed published file


@needs_mirror
def test_edited_gold_score_in_a_downstream_only_mirror_fails_prepare(tmp_path):
    downstream = _downstream_copy(tmp_path, STSB_TEST)
    _edit_gold_score(downstream / STSB_TEST)
    table, manifest = tmp_path / "out" / "test.parquet", tmp_path / "out" / "test.manifest.json"
    with pytest.raises(DataError) as info:
        prepare_sts_table("stsb", "test", {STSB_TEST: downstream / STSB_TEST}, table, manifest)
    rel = f"{DOWNSTREAM_SUBDIR}/{STSB_TEST}"
    assert str(info.value) == _mismatch(downstream / STSB_TEST, rel, STSB_TEST_SOURCE)
    assert not table.exists() and not manifest.exists()


@needs_mirror
def test_an_intact_file_records_its_published_source(tmp_path):
    downstream = _downstream_copy(tmp_path, STSB_TEST)
    out = tmp_path / "out"
    out.mkdir()
    manifest = prepare_sts_table("stsb", "test", {STSB_TEST: downstream / STSB_TEST}, out / "t.parquet", out / "t.json")
    expected = {"path": str(downstream / STSB_TEST), "sha256": sha256_file(MIRROR / DOWNSTREAM_SUBDIR / STSB_TEST), "source": STSB_TEST_SOURCE}
    assert manifest["source"]["files"] == {STSB_TEST: expected}


@pytest.mark.slow
@needs_mirror
def test_edited_gold_score_fails_the_pipeline_job(tmp_path):
    """Issue 23 item 2: the edited score went into the parquet with exit 0. The mirror's copy is
    refused where it is copied, naming it, and never replaced by a silent download."""
    downstream = _downstream_copy(tmp_path, STSB_TEST)
    _edit_gold_score(downstream / STSB_TEST)
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "--cores", "1", "results/ci/data/stsb/test.parquet", "--configfile", "presets/ci.yaml",
                    env={"AOE_DATA_MIRROR": str(downstream), **ONLINE})
    assert out.returncode == 1, out.stdout[-3000:]
    assert "Error in rule download_file" in out.stdout
    rel = f"{DOWNSTREAM_SUBDIR}/{STSB_TEST}"
    assert not (work / "results/ci/data/stsb/test.parquet").exists() and not (work / "results/ci/downloads/files" / rel).exists()
    log = (work / f"results/ci/logs/download_file/{rel}.log").read_text().splitlines()
    assert log[-1] == f"aoe.data.io.DataError: {_mismatch(downstream / STSB_TEST, rel, STSB_TEST_SOURCE)}"


@needs_mirror
def test_edited_transfer_file_fails_its_reader(tmp_path):
    trec = ("TREC/train_5500.label", "TREC/TREC_10.label")
    downstream = _downstream_copy(tmp_path, *trec)
    path = downstream / trec[1]
    path.write_bytes(path.read_bytes().replace(b"NUM:dist", b"LOC:dist", 1))
    with pytest.raises(DataError) as info:
        read_transfer(downstream, "TREC")
    rel = f"{DOWNSTREAM_SUBDIR}/{trec[1]}"
    assert str(info.value) == _mismatch(path, rel, mirror_sources()[rel]["source"])


def test_a_file_without_a_published_sha256_is_refused(tmp_path):
    (tmp_path / "x.txt").write_text("x\n")
    with pytest.raises(DataError) as info:
        check_published(tmp_path / "x.txt", "senteval/downstream/STS/STS17/x.txt")
    assert str(info.value) == f"senteval/downstream/STS/STS17/x.txt: no published sha256 recorded for it in aoe/resources/{TABLE}"


# ---------------------------------------------------------------- a bad mirror setting


def test_a_bad_mirror_names_the_setting_it_came_from(tmp_path, monkeypatch):
    valid = "a data mirror is a folder holding senteval/downstream/STS/ (the mirror root) or STS/ (SentEval's downstream folder)"
    absent = tmp_path / "absent"
    monkeypatch.setenv("AOE_DATA_MIRROR", str(absent))
    with pytest.raises(DataError) as info:
        resolve_downstream_root(None)
    unset = "unset AOE_DATA_MIRROR to download the data, or point it at such a folder"
    assert str(info.value) == f"AOE_DATA_MIRROR={absent} does not exist; {valid}; {unset}"

    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as info:
        resolve_downstream_root(tmp_path / "empty")  # config data.mirror wins over the environment
    assert str(info.value) == (
        f"config data.mirror: {tmp_path / 'empty'} is neither a data mirror nor SentEval's downstream folder; "
        f"{valid}; set data.mirror to null to download the data, or point it at such a folder"
    )

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AOE_DATA_MIRROR", "absent")
    with pytest.raises(DataError) as info:
        resolve_downstream_root(None)
    assert str(info.value).startswith(f"AOE_DATA_MIRROR=absent ({absent}) does not exist;")


@pytest.mark.slow
def test_a_bad_mirror_variable_fails_planning(workflow, tmp_path):
    """Issue 23 item 10a: it was reported as 'data.mirror: ...'."""
    absent = tmp_path / "no-such-mirror"
    out = dry_run(workflow, "--configfile", "presets/ci.yaml", mirror=absent, env=ONLINE)
    assert out.returncode == 1
    assert _message_after(out.stdout, "WorkflowError in file") == (
        f"AOE_DATA_MIRROR={absent} does not exist; a data mirror is a folder holding senteval/downstream/STS/ "
        "(the mirror root) or STS/ (SentEval's downstream folder); unset AOE_DATA_MIRROR to download the data, "
        "or point it at such a folder"
    )


# ---------------------------------------------------------------- a file the mirror lacks


@pytest.fixture(scope="module")
def partial_mirror_plan(workflow, tmp_path_factory) -> tuple[Path, str]:
    """The CI preset's dry run with a SentEval folder that has STS-B's test file but not its dev file, and TREC's
    train file but not its test file (MRPC's two whole): (that folder, the plan). Read by the tests of files a
    mirror lacks, STS and transfer."""
    downstream = _downstream_copy(tmp_path_factory.mktemp("partial"), STSB_TEST, "TREC/train_5500.label",
                                  "MRPC/msr_paraphrase_train.txt", "MRPC/msr_paraphrase_test.txt")
    out = dry_run(workflow, "--configfile", "presets/ci.yaml", mirror=downstream, env=ONLINE)
    assert out.returncode == 0, out.stdout[-3000:]
    return downstream, out.stdout


@pytest.mark.slow
@needs_mirror
def test_a_missing_sts_file_is_fetched_from_its_source(partial_mirror_plan):
    """Issue 23 item 10b: it was a MissingInputException, though README says such files are fetched."""
    downstream, stdout = partial_mirror_plan
    assert not (downstream / "STS/STSBenchmark/sts-dev.csv").exists()
    # the file the mirror has and the one it lacks: the same job, into the same folder
    for rel in (STSB_TEST, "STS/STSBenchmark/sts-dev.csv"):
        fetched = f"results/ci/downloads/files/{DOWNSTREAM_SUBDIR}/{rel}"
        assert f"output: {fetched}" in stdout and f"input: {fetched}" in stdout
    assert str(downstream) not in stdout
    assert upstream_url(f"{DOWNSTREAM_SUBDIR}/{STSB_TEST}") == (
        "https://raw.githubusercontent.com/yan-soares/research_embeddings_fine_tuning/045c5e94572a/data/downstream/STS/STSBenchmark/sts-test.csv"
    )


def _planned_jobs(stdout: str) -> list[str]:
    """Each planned job as its rule and output lines (the order Snakemake prints is not the run order)."""
    jobs, current = [], []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith(("rule ", "localrule ")):
            current = [line]
            jobs.append(current)
        elif current and line.startswith(("input:", "output:", "wildcards:")):
            current.append(line)
    return sorted(" | ".join(job) for job in jobs)


@pytest.mark.slow
@needs_mirror
def test_the_plan_does_not_depend_on_the_mirror(tmp_path):
    """Issue 38 item 1: after a run with the mirror, planning without it planned download, prepare,
    tokenize and training again ("set of input files has changed")."""
    work = copy_workflow(tmp_path / "wf")
    target = ("results/ci/data/stsb/test.parquet", "results/ci/data/sts12/test.parquet")
    plans = {name: _planned_jobs(dry_run(work, *target, "--configfile", "presets/ci.yaml", mirror=mirror, env=ONLINE).stdout)
             for name, mirror in (("full mirror", MIRROR), ("SentEval folder", MIRROR / DOWNSTREAM_SUBDIR), ("none", ""))}
    assert len(plans["none"]) == 2 + 1 + 10  # two prepare_sts, STS-B's file and STS12's ten
    assert plans["full mirror"] == plans["SentEval folder"] == plans["none"]

    out = snakemake(work, "--cores", "1", *target, "--configfile", "presets/ci.yaml", env={"AOE_DATA_MIRROR": str(MIRROR), **ONLINE})
    assert out.returncode == 0, out.stdout[-3000:]
    log = (work / f"results/ci/logs/download_file/{DOWNSTREAM_SUBDIR}/{STSB_TEST}.log").read_text()
    assert f"copied from the data mirror: {MIRROR / DOWNSTREAM_SUBDIR / STSB_TEST}" in log
    for mirror in ("", MIRROR / DOWNSTREAM_SUBDIR):
        out = dry_run(work, *target, "--configfile", "presets/ci.yaml", mirror=mirror, env=ONLINE)
        assert out.returncode == 0 and "Nothing to be done" in out.stdout, out.stdout[-3000:]


@pytest.fixture
def file_server(tmp_path):
    """A plain HTTP server for a folder, standing in for the files' public source."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()


@pytest.mark.slow
@needs_mirror
@pytest.mark.parametrize("tampered", [False, True])
def test_a_missing_sts_file_is_downloaded_and_checked(tmp_path, file_server, tampered):
    served, url = file_server
    shutil.copyfile(MIRROR / DOWNSTREAM_SUBDIR / STSB_TEST, served / "sts-test.csv")
    if tampered:
        _edit_gold_score(served / "sts-test.csv")
    rel = f"{DOWNSTREAM_SUBDIR}/{STSB_TEST}"
    work = copy_workflow(tmp_path / "wf")
    (work / "urls.yaml").write_text(f"data:\n  urls:\n    {rel}: {url}/sts-test.csv\n")
    downstream = _downstream_copy(tmp_path, "STS/STSBenchmark/sts-dev.csv")
    out = snakemake(work, "--cores", "1", "results/ci/data/stsb/test.parquet", "--configfile", "presets/ci.yaml", "urls.yaml",
                    env={"AOE_DATA_MIRROR": str(downstream), **ONLINE})
    fetched = work / "results/ci/downloads/files" / rel
    if not tampered:
        assert out.returncode == 0, out.stdout[-3000:]
        manifest = (work / "results/ci/data/stsb/test.manifest.json").read_text()
        assert f'"path": "results/ci/downloads/files/{rel}"' in manifest and STSB_TEST_SOURCE in manifest
        return
    assert out.returncode == 1, out.stdout[-3000:]
    assert not fetched.exists()
    log = (work / f"results/ci/logs/download_file/{rel}.log").read_text().splitlines()
    found = sha256_file(served / "sts-test.csv")
    assert log[-1] == (
        f"aoe.data.io.DataError: {fetched.relative_to(work)}: sha256 mismatch for {url}/sts-test.csv: "
        f"expected {mirror_sources()[rel]['sha256']}, got {found}"
    )


@pytest.mark.slow
@needs_mirror
def test_a_missing_transfer_file_is_fetched_into_sentevals_folder(partial_mirror_plan):
    # the transfer evaluation reads SentEval's folder as a whole: the files the mirror has and the
    # ones it lacks are laid out together (it was a planning error naming the missing file)
    downstream, stdout = partial_mirror_plan
    assert not (downstream / "TREC/TREC_10.label").exists()
    folder = f"results/ci/downloads/files/{DOWNSTREAM_SUBDIR}"
    for rel in ("TREC/TREC_10.label", "TREC/train_5500.label"):
        assert f"output: {folder}/{rel}" in stdout
    assert f"downstream: {folder}" in stdout or folder in stdout


# ---------------------------------------------------------------- analysis.saturation


def test_pair_table_problem_lists_the_valid_values():
    assert pair_table_problem("snli", "dev") is None
    assert pair_table_problem("snli", "train") == "dataset 'snli' has no split 'train'; its splits: dev, test; set split to one of them"
    problem = pair_table_problem("flickr30k", "test")  # captions, not pairs
    assert problem.startswith("dataset 'flickr30k' is not a pair dataset; valid: sts12 (test); ")
    assert problem.endswith("; set dataset to one of them and split to one of its splits")
    assert "flickr30k (" not in problem and "stsb (train, dev, test)" in problem


@pytest.mark.slow
def test_saturation_dataset_written_with_its_split_fails_planning(workflow, tmp_path):
    """Issue 23 item 10c: it said "dataset 'snli_dev' has no split 'dev'"."""
    (workflow / "sat.yaml").write_text("analysis:\n  saturation:\n    dataset: snli_dev\n")
    out = snakemake(workflow, "-n", "--configfile", "presets/ci.yaml", "sat.yaml", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 1
    line = _message_after(out.stdout, "WorkflowError in file")
    assert line.startswith("config: analysis.saturation: dataset 'snli_dev' is not a pair dataset; valid: sts12 (test); ")
    assert "; snli (dev, test); mnli (dev_matched, dev_mismatched); " in line
    assert line.endswith("; set dataset: snli and split: dev")

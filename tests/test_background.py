"""The test suite's own machinery: background runs (tests/background.py) and the kill past a time limit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests import background
from tests.cputime import wait_or_kill


def test_a_process_past_its_limit_is_killed_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    script = f"import subprocess, time; p = subprocess.Popen(['sleep', '60']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    while not pid_file.is_file() or not pid_file.read_text():
        assert proc.poll() is None
        threading.Event().wait(0.05)
    assert wait_or_kill(proc, 0.5) is True
    child = Path(f"/proc/{pid_file.read_text()}/stat")

    def gone() -> bool:  # or a zombie until init reaps it
        try:
            return child.read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    for _ in range(100):  # SIGKILL is delivered at once, the exit takes a moment
        if gone():
            break
        threading.Event().wait(0.02)
    assert gone(), "the grandchild survived the group's SIGKILL"
    assert wait_or_kill(subprocess.Popen(["true"], start_new_session=True), 30) is False


def test_readers_of_a_background_run_are_ordered_after_it():
    # conftest registers ci_run first; the test modules register theirs as they are collected
    import tests.test_llm_e2e  # noqa: F401
    import tests.test_slurm  # noqa: F401

    names = list(background._REGISTRY)
    assert names[0] == "ci_run" and {"llm_run", "slurm_run"} <= set(names)
    assert background.position(["tmp_path"]) == 0
    assert background.position(["ci_run", "tmp_path"]) == 1
    slurm = names.index("slurm_run") + 1
    assert background.position(["ci_run", "slurm_run"]) == slurm < background.position(["cluster", "slurm_failure"])


@pytest.mark.parametrize(
    ("code", "timeout", "expected"),
    [
        ("print('the output'); raise SystemExit(3)", 30, r"(?s)failing failed \(rc 3\).*the output"),
        ("import time; print('the output', flush=True); time.sleep(60)", 1, r"(?s)still going after 1 s, killed.*the output"),
    ],
    ids=["exit-3", "hung"],
)
def test_a_run_that_failed_fails_its_readers_with_its_output(tmp_path, code, timeout, expected):
    def setup(root, cores):
        return background.Launch([sys.executable, "-c", code], root, dict(os.environ), timeout)

    run = background.Run("failing", setup, ("failing",))
    background.execute(run, tmp_path, 1)
    assert run.done.is_set()
    with pytest.raises((AssertionError, pytest.fail.Exception), match=expected):
        background.checked(run)


@pytest.mark.parametrize(("code", "ok"), [("raise SystemExit(3)", True), ("pass", False)], ids=["exit-3", "passed"])
def test_a_run_that_must_fail_passes_its_readers_only_when_it_fails(tmp_path, code, ok):
    """``checked(run, fails=True)``: a run that checks a failure (tests/test_slurm.py's slurm_failure)."""
    def setup(root, cores):
        return background.Launch([sys.executable, "-c", code], root, dict(os.environ), 30)

    run = background.Run("must-fail", setup, ("must-fail",))
    background.execute(run, tmp_path, 1)
    if ok:
        assert background.checked(run, fails=True) is run
    else:
        with pytest.raises(AssertionError, match="must-fail did not fail"):
            background.checked(run, fails=True)


def test_a_run_whose_setup_declines_skips_and_one_that_raises_fails(tmp_path):
    declined = background.Run("declined", lambda root, cores: "no cluster here", ())
    background.execute(declined, tmp_path, 1)
    with pytest.raises(pytest.skip.Exception, match="no cluster here"):
        background.checked(declined)
    broken = background.Run("broken", lambda root, cores: 1 / 0, ())
    background.execute(broken, tmp_path, 1)
    with pytest.raises(pytest.fail.Exception, match="(?s)its set-up failed.*ZeroDivisionError"):
        background.checked(broken)


@pytest.mark.parametrize(("code", "ok"), [("print('the output')", True), ("print('the output'); raise SystemExit(3)", False)],
                         ids=["passed", "exit-3"])
def test_a_run_published_by_one_worker_reads_the_same_on_another(tmp_path, code, ok):
    # under pytest-xdist the worker that claimed the chain writes <name>.json; a reader elsewhere waits for it
    def setup(root, cores):
        return background.Launch([sys.executable, "-c", code], root, dict(os.environ), 30)

    run = background.Run("published", setup, ("published",))
    background.execute(run, tmp_path, 1)
    background._publish(run, tmp_path / "published.json")
    read = background._read_published("published", tmp_path / "published.json")
    assert (read.returncode, read.launch.cwd, read.output) == (run.returncode, run.launch.cwd, run.output)
    if ok:
        assert background.checked(read) is read
    else:
        with pytest.raises(AssertionError, match=r"(?s)published failed \(rc 3\).*the output"):
            background.checked(read)


def test_a_reader_stops_waiting_when_the_worker_running_the_chain_is_gone(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / background._OWNER).write_text(str(gone.pid))
    run = background._read_published("never", tmp_path / "never.json")
    with pytest.raises(pytest.fail.Exception, match=rf"the worker running it \(pid {gone.pid}\) ended before it finished"):
        background.checked(run)


def test_a_background_runs_cpu_is_its_own_not_the_tests(tmp_path):
    from tests import cputime

    burn = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.5: pass')"
    run = background.Run("burner", lambda root, cores: background.Launch([sys.executable, "-c", burn], root, dict(os.environ), 30), ())
    before = cputime.foreground_cpu()
    background.execute(run, tmp_path, 1)
    assert cputime.foreground_cpu() - before < 0.3  # its half second went to its own record
    (record,) = [b for b in cputime.background if b["name"] == "burner"]
    assert record["cpu_s"] >= 0.5 and record["returncode"] == 0


def test_a_run_selected_alone_brings_the_run_it_reads():
    # tests/test_real_model.py selected alone: real_model reads ci_run's data, so ci_run starts too
    assert [run.name for run in background.selected({"real_model"})] == ["ci_run", "real_model"]
    assert [run.name for run in background.selected({"tmp_path"})] == []

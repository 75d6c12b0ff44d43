"""Workflow runs that start in the background when the tests are collected, in chains (a run that reads
another's results after it, one at a time on one core; the chains side by side), while the rest of the
suite runs beside them; the tests that read a run go last, in the order the runs were registered.

A test module registers a run with :func:`register` (its name is the fixture that returns it);
``tests/conftest.py`` starts the chain of the runs whose fixtures the selected tests use, orders those
tests, and kills what is still running when the session ends. The fixture itself returns
``checked(result(name))``: the finished run, or the test's skip or failure.
Run in the background, a run gets one core (Snakemake then gives each job one thread, as it sets
OMP_NUM_THREADS to a job's threads); with nothing else selected it gets both, as in the foreground.

Under pytest-xdist every worker collects the same tests and would start the same chain: the first to
claim the session's shared folder (its base temporary folder's parent) runs it, and writes each run's
outcome there as ``<name>.json`` when it ends; a reader on another worker waits for that file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from tests.workflow_utils import run_to_file


@dataclass
class Launch:
    """What a set-up returns: the command, its folder and full environment, and its time limit.
    Its stdout and stderr go to ``cwd/snakemake.out``."""

    cmd: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float


@dataclass
class Run:
    name: str
    setup: Callable[[Path, int], Launch | str]  # (a fresh folder, cores) -> Launch, or why it cannot start
    fixtures: tuple[str, ...]  # the fixture names whose tests wait for it
    after: str | None = None  # the run it follows in one chain (it reads that one's results); None: a chain of its own
    launch: Launch | None = None
    proc: subprocess.Popen | None = None
    skipped: str | None = None  # why the set-up did not start it (a missing mirror, cluster, package)
    error: str | None = None  # its set-up raised, or the session ended before it started
    hung: bool = False
    returncode: int | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def output(self) -> str:
        return (self.launch.cwd / "snakemake.out").read_text(errors="replace") if self.launch else ""


_REGISTRY: dict[str, Run] = {}
_chain: list[Run] = []
_elsewhere: dict[str, Path] = {}  # run name -> its outcome file, for runs another worker runs
_stopping = threading.Event()
_lock = threading.Lock()
_OWNER = "background-owner"
_shared: list[Path] = []  # the session's shared folder, once known (_shared_folder)


def register(name: str, setup: Callable[[Path, int], Launch | str], *, after: str | None = None) -> None:
    """Register the background run ``name`` (also its fixture's name). ``after``: a registered run it
    starts after, in the same chain; without it the run heads a chain of its own, beside the others."""
    _REGISTRY[name] = Run(name, setup, (name,), after)


def position(fixturenames) -> int:
    """0 for a test that waits for no background run, else 1 + the index in the chain of the last it waits for."""
    names = set(fixturenames)
    order = [run for run in _REGISTRY.values() if names & set(run.fixtures)]
    return max((list(_REGISTRY).index(run.name) + 1 for run in order), default=0)


def start(used: set[str], tmp_path_factory, cores: int) -> bool:
    """Start the registered runs whose fixture is in ``used``, and the runs they are ``after``: each chain (a run, then those ``after`` it)
    in a daemon thread of its own, each run in a fresh folder of ``tmp_path_factory``; True when any is started,
    here or, under pytest-xdist, by the worker that claimed them."""
    wanted = selected(used)
    if not wanted:
        return False
    shared = _shared_folder(tmp_path_factory)
    try:
        fd = os.open(shared / _OWNER, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # another worker runs them
        _elsewhere.update({run.name: shared / f"{run.name}.json" for run in wanted})
        return True
    with os.fdopen(fd, "w") as fh:
        fh.write(str(os.getpid()))
    _chain[:] = wanted
    roots = {run.name: tmp_path_factory.mktemp(run.name) for run in _chain}  # here: mktemp is not for threads

    def chain(runs: list[Run]) -> None:
        for run in runs:
            if _stopping.is_set():
                run.error = "the test session ended before it started"
                run.done.set()
            else:
                execute(run, roots[run.name], cores)
            _publish(run, shared / f"{run.name}.json")

    for head in [run for run in _chain if run.after not in roots]:  # (an `after` run not selected heads one too)
        runs, follower = [head], head
        while follower := next((r for r in _chain if r.after == follower.name), None):
            runs.append(follower)
        threading.Thread(target=chain, args=(runs,), name=f"background-{head.name}", daemon=True).start()
    return True


def selected(used: set[str]) -> list[Run]:
    """The registered runs whose fixture is in ``used`` and the runs they are ``after`` (they read their
    results), in registration order."""
    names = {name for name in _REGISTRY if name in used}
    # an `after` run that no collected module registered (a file run alone) is not waited for
    while missing := {_REGISTRY[n].after for n in names if _REGISTRY[n].after in _REGISTRY} - names:
        names |= missing
    return [run for name, run in _REGISTRY.items() if name in names]


def _shared_folder(tmp_path_factory) -> Path:
    """The folder all workers of this session share: the controller's base temporary folder under
    pytest-xdist (a worker's is inside it), else this session's own."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "background"
    shared.mkdir(exist_ok=True)
    _shared[:] = [shared]
    return shared


def _publish(run: Run, path: Path) -> None:
    """Write ``run``'s outcome for the readers on other workers (atomically: they poll for the file)."""
    import json

    record = {"skipped": run.skipped, "error": run.error, "hung": run.hung, "returncode": run.returncode,
              "cwd": str(run.launch.cwd) if run.launch else None, "timeout": run.launch.timeout if run.launch else None}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def _read_published(name: str, path: Path) -> Run:
    """Wait for the outcome of run ``name`` that another worker runs; a Run with what it published."""
    import json
    import time

    owner = path.parent / _OWNER
    while not path.is_file():
        pid = owner.read_text().strip() if owner.is_file() else ""
        if pid and not Path(f"/proc/{pid}").exists():
            return Run(name, None, (), error=f"the worker running it (pid {pid}) ended before it finished")
        time.sleep(1)
    record = json.loads(path.read_text())
    launch = Launch([], Path(record["cwd"]), {}, record["timeout"]) if record["cwd"] else None
    run = Run(name, None, (), launch=launch, skipped=record["skipped"], error=record["error"], hung=record["hung"],
              returncode=record["returncode"])
    run.done.set()
    return run


def execute(run: Run, root: Path, cores: int) -> None:
    """Set ``run`` up in ``root`` and run it to its end or its time limit; then mark it done."""
    try:
        launch = run.setup(root, cores)
        if isinstance(launch, str):
            run.skipped = launch
            return
        run.launch = launch
        if _stopping.is_set():
            run.error = "the test session ended before it started"
            return

        def started(proc: subprocess.Popen) -> None:
            with _lock:  # stop() kills what it sees; a run started as the session ends is killed here
                run.proc = proc
                if _stopping.is_set():
                    os.killpg(proc.pid, signal.SIGKILL)

        run.returncode, run.hung = run_to_file(launch.cmd, launch.cwd, launch.env, launch.cwd / "snakemake.out",
                                               launch.timeout, record_as=run.name, started=started)
    except Exception:
        run.error = f"its set-up failed:\n{traceback.format_exc()}"
    finally:
        run.done.set()


def result(name: str) -> Run | None:
    """The background run ``name`` once finished (waits for it), or None when it was not started."""
    if name in _elsewhere:
        return _read_published(name, _elsewhere[name])
    run = next((run for run in _chain if run.name == name), None)
    if run is not None:
        run.done.wait()
    return run


def checked(run: Run | None, *, fails: bool = False) -> Run:
    """``run`` if it ran and succeeded (``fails``: ran and failed, as a run that checks a failure must); else the
    test skips (the set-up's reason) or fails (the output's tail)."""
    if run is None:
        pytest.fail("not started at collection: its fixture must be a parameter of the test", pytrace=False)
    if run.skipped:
        pytest.skip(run.skipped)
    if run.error:
        pytest.fail(f"background run {run.name}: {run.error}", pytrace=False)
    if run.hung:
        pytest.fail(f"background run {run.name} still going after {run.launch.timeout:.0f} s, killed; "
                    f"output tail:\n{run.output[-6000:]}", pytrace=False)
    if fails:
        assert run.returncode != 0, f"background run {run.name} did not fail:\n{run.output[-8000:]}"
    else:
        assert run.returncode == 0, f"background run {run.name} failed (rc {run.returncode}):\n{run.output[-8000:]}"
    return run


def announce(tmp_path_factory) -> None:
    """Mark this process as one of the session's (under pytest-xdist the worker running the runs waits,
    at its end, while another lives: that one may still read them)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        (_shared_folder(tmp_path_factory) / f"alive-{os.getpid()}").touch()


def _others_alive() -> bool:
    pids = [f.name.removeprefix("alive-") for shared in _shared for f in shared.glob("alive-*")]
    return any(pid != str(os.getpid()) and Path(f"/proc/{pid}").exists() for pid in pids)


def stop(finished: bool = False) -> None:
    """Start nothing more; kill the run going, with its jobs. ``finished``: this session ran its tests to
    their end, and another worker of it that may still read the runs is waited for first."""
    import time

    while finished and any(not run.done.is_set() for run in _chain) and _others_alive():
        time.sleep(1)
    with _lock:
        _stopping.set()
    for run in _chain:
        if run.proc is not None and run.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.proc.pid, signal.SIGKILL)
            run.done.wait(timeout=30)  # its thread reaps it (and counts its CPU)
    for shared in _shared:
        with contextlib.suppress(FileNotFoundError):
            (shared / f"alive-{os.getpid()}").unlink()

"""CPU-seconds per test and per background run, the measure of the CI budget (wall time lies when both
cores are busy): the pytest process's own plus its waited-for children's (``resource.getrusage``).

``tests/conftest.py`` wraps each test's protocol (set-up, call, tear-down) with :func:`measure`; a
background run's CPU comes from ``os.wait4`` on its process (:func:`wait_or_kill` with ``record_as``) and is taken off
the test during which it was reaped, so it is counted once, under its own name. At the session's end
the 30 largest are printed and everything is written to ``$AOE_TEST_CPU_JSON`` (default
``.pytest_cache/test-cpu.json``): each test's CPU-s, wall-s, start and end (seconds from the session's
start) and outcome; the background runs' likewise; sums by test file; the session's totals. Under
pytest-xdist each worker measures its own tests and hands them to the controller (:func:`payload`,
:func:`absorb`), which reports them all; a record's ``worker`` says where it ran.

A scheduler's jobs (the SLURM run's) are children of slurmd, not of the tests: their CPU is not here.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

T0 = time.time()  # epoch seconds: the workers' records share one clock with the controller's
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
_lock = threading.Lock()
_reaped = 0.0  # CPU-s of background runs already reaped (they are in RUSAGE_CHILDREN from then on)
tests: list[dict] = []
background: list[dict] = []
workers: dict[str, float] = {}  # worker -> its process CPU-s (own and children), as it reported at its end


def process_cpu() -> float:
    """CPU-s of this process and of its children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def foreground_cpu() -> float:
    """process_cpu() less the background runs reaped so far."""
    with _lock:
        return process_cpu() - _reaped


def wait_or_kill(proc: subprocess.Popen, timeout: float, record_as: str | None = None) -> bool:
    """Wait up to ``timeout`` s for ``proc`` (started in a session of its own); past the limit SIGKILL its
    whole process group (a job's script would otherwise go on running, orphaned, and slow every later
    test). True when it was killed. ``record_as``: a background run's name; it is then reaped with
    ``os.wait4`` to read its CPU (its own and its waited-for descendants'), recorded under that name and
    kept out of the test that is running when it ends."""
    global _reaped
    start, deadline, killed = time.time(), time.monotonic() + timeout, False
    while True:
        with _lock:  # the reaping and the counter move together: a test's measure never sees one alone
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                cpu = usage.ru_utime + usage.ru_stime
                if record_as is not None:
                    _reaped += cpu
                proc.returncode = os.waitstatus_to_exitcode(status)
                break
        if time.monotonic() > deadline and not killed:
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05 if record_as is None else 0.2)
    if record_as is not None:
        background.append({"name": record_as, "cpu_s": round(cpu, 1), "wall_s": round(time.time() - start, 1), "start": start,
                           "end": time.time(), "returncode": proc.returncode, "killed": killed, "worker": WORKER})
    return killed


class measure:
    """Context manager around one test's protocol: appends its record to ``tests``."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid

    def __enter__(self):
        self.cpu, self.wall = foreground_cpu(), time.time()
        return self

    def __exit__(self, *exc):
        end = time.time()
        tests.append({"nodeid": self.nodeid, "cpu_s": round(foreground_cpu() - self.cpu, 2),
                      "wall_s": round(end - self.wall, 2), "start": self.wall, "end": end, "worker": WORKER})
        return False


def payload() -> dict:
    """What a pytest-xdist worker hands to the controller at its end."""
    return {"worker": WORKER, "tests": tests, "background": background, "process_cpu": process_cpu()}


def absorb(data: dict | None) -> None:
    """Take a worker's :func:`payload` into this (the controller's) records."""
    if data:
        tests.extend(data["tests"])
        background.extend(data["background"])
        workers[data["worker"]] = data["process_cpu"]


def _relative(record: dict) -> dict:
    out = {k: v for k, v in record.items() if k not in ("start", "end")}
    return {**out, "start_s": round(record["start"] - T0, 1), "end_s": round(record["end"] - T0, 1)}


def by_file() -> dict[str, dict]:
    """Test file -> {cpu_s, wall_s, tests, start_s, end_s}."""
    out: dict[str, dict] = defaultdict(lambda: {"cpu_s": 0.0, "wall_s": 0.0, "tests": 0, "start_s": None, "end_s": 0.0})
    for t in map(_relative, tests):
        f = out[t["nodeid"].split("::")[0]]
        f["cpu_s"] += t["cpu_s"]
        f["wall_s"] += t["wall_s"]
        f["tests"] += 1
        f["start_s"] = t["start_s"] if f["start_s"] is None else min(f["start_s"], t["start_s"])
        f["end_s"] = max(f["end_s"], t["end_s"])
    return {k: {**v, "cpu_s": round(v["cpu_s"], 1), "wall_s": round(v["wall_s"], 1)}
            for k, v in sorted(out.items(), key=lambda kv: -kv[1]["cpu_s"])}


def report(path: Path, outcomes: dict[str, str]) -> list[str]:
    """Write the JSON; return the lines to print (the 30 largest tests and the background runs)."""
    for t in tests:
        t["outcome"] = outcomes.get(t["nodeid"], "?")
    own = resource.getrusage(resource.RUSAGE_SELF)
    # with workers: the controller's own and what each worker reported (its tests' children included)
    total = own.ru_utime + own.ru_stime + sum(workers.values()) if workers else process_cpu()
    summary = {"session_cpu_s": round(total, 1), "session_wall_s": round(time.time() - T0, 1),
               "tests_cpu_s": round(sum(t["cpu_s"] for t in tests), 1),
               "background_cpu_s": round(sum(b["cpu_s"] for b in background), 1), "tests": len(tests),
               "workers": {w: round(c, 1) for w, c in sorted(workers.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"summary": summary, "background": [_relative(b) for b in background], "files": by_file(),
                                "tests": sorted(map(_relative, tests), key=lambda t: -t["cpu_s"])}, indent=1))
    lines = [f"session: {summary['session_cpu_s']:.0f} CPU-s in {summary['session_wall_s']:.0f} s wall "
             f"(tests {summary['tests_cpu_s']:.0f}, background runs {summary['background_cpu_s']:.0f}); {path}"]
    lines += [f"{b['cpu_s']:8.1f} CPU-s {b['wall_s']:7.1f} s wall  background {b['name']} "
              f"({b['start'] - T0:.0f}-{b['end'] - T0:.0f} s)" for b in background]
    lines += [f"{t['cpu_s']:8.1f} CPU-s {t['wall_s']:7.1f} s wall  {t['nodeid']}"
              for t in sorted(tests, key=lambda t: -t["cpu_s"])[:30]]
    return lines


def _blocks(path: Path) -> dict[str, dict]:
    """Block -> {cpu_s, tests, start_s, end_s} of one JSON file: each test file, each background run."""
    data = json.loads(Path(path).read_text())
    blocks = {f"`{name}`": {k: v[k] for k in ("cpu_s", "tests", "start_s", "end_s")} for name, v in data["files"].items()}
    for b in data["background"]:
        if b["cpu_s"] >= 1:  # tests/test_background.py's own runs are not blocks
            blocks[f"background `{b['name']}`"] = {"cpu_s": b["cpu_s"], "tests": 0, "start_s": b["start_s"], "end_s": b["end_s"]}
    return blocks


def compare(before: Path, after: Path) -> str:
    """A Markdown table of each block's CPU-s in two runs' JSON files, the largest first."""
    a, b = _blocks(before), _blocks(after)
    rows = ["| block | CPU-s before | CPU-s after | after: span (s from start) |", "|---|---:|---:|---|"]
    for name in sorted(set(a) | set(b), key=lambda n: -max(a.get(n, {}).get("cpu_s", 0), b.get(n, {}).get("cpu_s", 0))):
        x, y = a.get(name), b.get(name)
        span = f"{y['start_s']:.0f}-{y['end_s']:.0f}" if y else "-"
        rows.append(f"| {name} | {x['cpu_s']:.1f} | {y['cpu_s']:.1f} | {span} |" if x and y else
                    f"| {name} | {x['cpu_s']:.1f} | - | - |" if x else f"| {name} | - | {y['cpu_s']:.1f} | {span} |")
    totals = [json.loads(Path(p).read_text())["summary"] for p in (before, after)]
    rows.append(f"| **session** (tests + background runs) | {totals[0]['session_cpu_s']:.0f} | {totals[1]['session_cpu_s']:.0f} | "
                f"0-{totals[1]['session_wall_s']:.0f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    # python -m tests.cputime BEFORE.json AFTER.json: the block table of docs/testing.md
    import sys

    print(compare(Path(sys.argv[1]), Path(sys.argv[2])))

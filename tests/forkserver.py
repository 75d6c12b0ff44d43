"""Real processes without paying for their imports each time: a fork server.

A training process spends most of its CPU importing torch, transformers and accelerate (a tiny model's
run of a few steps takes a fraction of a second), and the tests that need a process of its own (one to
kill, to signal, or to run as a user runs it) start many of them. The server is one Python process that
imports those modules once and then, for each request, forks a child that runs the given code as
``python -c CODE ARGS...`` would, in the given folder and environment: its own process (in a session
of its own: a SIGKILL or SIGTERM sent to it reaches it alone, as in a real job), its own stdout and
stderr (files), its exit status seen by ``os.wait4`` as ``subprocess`` sees it (negative: the signal
that ended it). A child starts from the server's state right after its imports, which has run nothing,
so it is a fresh process that has done those imports early; what it does after that is what a fresh
process does. The modules must not read the environment when imported (the child gets its own after).

The children's CPU is counted as a test's, as a subprocess's is (tests/cputime.py): the server waits
for each child, and the fixture that made the server waits for it at its tear-down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_SERVER = r"""
import json, os, signal, sys, time

for name in sys.argv[1:]:
    try:  # an optimization only: a module another version lacks is imported by whatever needs it, in the child
        __import__(name)
    except ModuleNotFoundError:
        pass


def serve():
    # one JSON request a line; the reply once the child has ended (killed with its process group past its timeout)
    for line in iter(sys.stdin.readline, ""):
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            return request
        deadline, killed = time.monotonic() + request["timeout"], False
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline and not killed:
                os.killpg(pid, signal.SIGKILL)
                killed = True
            time.sleep(0.02)
        sys.stdout.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status), "killed": killed}) + "\n")
        sys.stdout.flush()
    raise SystemExit(0)


request = serve()
# the child: a session of its own, stdin empty, stdout and stderr into their files, its folder and environment,
# then the code as `python -c` runs it (an exception or SystemExit ends the interpreter as it ends a fresh one:
# message, atexit, exit status)
os.setsid()
files = [(0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)]
if request["stderr"] is not None:
    files.append((2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
for fd, path, flags in files:
    opened = os.open(path, flags, 0o644)
    os.dup2(opened, fd)
    os.close(opened)
if request["stderr"] is None:
    os.dup2(1, 2)
os.chdir(request["cwd"])
os.environ.clear()
os.environ.update(request["env"])
sys.argv = ["-c", *request["argv"]]
code = request["code"]
del serve, request, files
exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"""


class ForkServer:
    """``run(code, args)``: ``subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)``
    in a child forked from a process that has imported ``modules``."""

    def __init__(self, modules: list[str], env: dict[str, str], folder: Path):
        self.folder, self.env, self.count = folder, env, 0
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "server.stderr"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, *modules], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, env=env, text=True)

    def run(self, code: str, args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
            merge: bool = False, timeout: float = 900) -> subprocess.CompletedProcess:
        """Run ``code`` with ``args`` in ``cwd`` (default: this process's) with ``env`` (default: the server's);
        ``merge``: stderr into stdout, as one text. Past ``timeout`` s its process group is killed: TimeoutExpired."""
        self.count += 1
        out, err = self.folder / f"{self.count}.stdout", self.folder / f"{self.count}.stderr"
        request = {"code": code, "argv": [str(a) for a in args], "stdout": str(out), "stderr": None if merge else str(err),
                   "cwd": str(cwd or os.getcwd()), "env": dict(self.env if env is None else env), "timeout": timeout}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the fork server ended: {self.log.read_text(errors='replace')[-3000:]}")
        reply = json.loads(reply)
        cmd = [sys.executable, "-c", code, *args]
        stdout = out.read_text(errors="replace")
        if reply["killed"]:
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout)
        return subprocess.CompletedProcess(cmd, reply["returncode"], stdout, None if merge else err.read_text(errors="replace"))

    def close(self) -> None:
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=120)
        assert rc == 0, f"the fork server ended with {rc}: {self.log.read_text(errors='replace')[-3000:]}"


def python_m(module: str) -> str:
    """The code of ``python -m module`` for ForkServer.run, for a module whose ``main()`` reads sys.argv."""
    return f"from {module} import main\nmain()\n"


# What `python -m snakemake` imports before it reads a Snakefile (and pandas, which the workflow's planning imports):
# none reads the environment when imported, which each run sets for itself.
SNAKEMAKE_MODULES = ["snakemake.cli", "snakemake.api", "snakemake.workflow", "snakemake.dag", "snakemake.persistence",
                     "snakemake.executors.local", "snakemake.executors.dryrun", "snakemake.scheduling.job_scheduler",
                     "snakemake_executor_plugin_slurm", "snakemake_executor_plugin_slurm_jobstep", "jsonschema", "yaml", "pandas"]


class SnakemakeForks:
    """``snakemake(workdir, *args, env=, timeout=)`` as tests.workflow_utils.snakemake runs it (``python -m snakemake``
    in ``workdir``, this process's environment with ``env`` over it, stdout and stderr as one text, its process group
    killed past ``timeout``: TimeoutExpired), each run a child of a fork server that has imported Snakemake once,
    started at the first run; ``close()`` ends it (a module's fixture)."""

    def __init__(self):
        self.server: ForkServer | None = None

    def snakemake(self, workdir: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        if self.server is None:
            import tempfile

            self.server = ForkServer(SNAKEMAKE_MODULES, dict(os.environ), Path(tempfile.mkdtemp(prefix="snakemake-forks-")))
        return self.server.run("from snakemake.cli import main\nmain()\n", list(args), cwd=workdir,
                               env={**os.environ, **(env or {})}, merge=True, timeout=timeout)

    def dry_run(self, workdir: Path, *args: str, mirror: Path | str | None = None, env: dict | None = None,
                timeout: float = 900) -> subprocess.CompletedProcess:
        """tests.workflow_utils.dry_run: ``snakemake -n`` with AOE_DATA_MIRROR set to ``mirror`` (None or "": none)."""
        return self.snakemake(workdir, "-n", *args, env={"AOE_DATA_MIRROR": str(mirror or ""), **(env or {})}, timeout=timeout)

    def close(self) -> None:
        if self.server is not None:
            import shutil

            self.server.close()
            shutil.rmtree(self.server.folder, ignore_errors=True)  # its runs' output files, read already
            self.server = None


def forked_snakemake():
    """``(snakemake, dry_run, fixture)`` for a test module whose Snakemake runs fork from one server
    (:class:`SnakemakeForks`): the import is most of a dry run's CPU. The module keeps the fixture under a name
    of its own (``snakemake, dry_run, _forks = forked_snakemake()``); autouse, it ends the server after the
    module's last test."""
    import pytest

    forks = SnakemakeForks()

    @pytest.fixture(scope="module", autouse=True)
    def _snakemake_forks():
        yield
        forks.close()

    return forks.snakemake, forks.dry_run, _snakemake_forks

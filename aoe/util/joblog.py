"""A rule's log: where a job's script sends its output, first thing.

Import-light on purpose (no pandas, no torch): every job imports it before its own work, and a download
job needs nothing heavier.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["start_log"]


def start_log(log_path: str | os.PathLike) -> None:
    """Send this process's stdout and stderr (C-level output included) to a rule's log file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    # Snakemake's own stderr, kept: on a full disk the log cannot take the job's lines or its error (a table job
    # ended with exit status 120, the interpreter failing to flush its last log line, and an empty log: no reason)
    terminal = os.dup(2)
    log = _LogFile(open(log_path, "w", buffering=1), log_path, terminal)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    sys.excepthook = log.report_uncaught
    # SLURM's time limit and scancel send SIGTERM: let a job's cleanups (partial folders) run
    from aoe.util.fsutil import exit_on_sigterm

    exit_on_sigterm()


class _LogFile:
    """A rule's log that a full disk cannot fail: what it cannot take is dropped, said once on Snakemake's stderr,
    and the job's uncaught error goes there too. A job that wrote its outputs is not failed by its log."""

    def __init__(self, fh, path, terminal: int):
        self._fh, self._path, self._terminal, self.lost = fh, path, terminal, None

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def _to_terminal(self, text: str) -> None:
        try:
            os.write(self._terminal, text.encode(errors="replace"))
        except OSError:
            pass

    def _guarded(self, call, *args):
        if self.lost is not None:
            return None
        try:
            return call(*args)
        except OSError as exc:
            self.lost = exc
            self._to_terminal(f"(the log {self._path} cannot be written: {exc.strerror}; what the job logs from here on "
                              "is lost, and its error, if any, follows here)\n")
            return None

    def write(self, text: str) -> int:
        self._guarded(self._fh.write, text)
        return len(text)

    def flush(self) -> None:
        self._guarded(self._fh.flush)

    def report_uncaught(self, etype, value, tb) -> None:
        import traceback

        text = "".join(traceback.format_exception(etype, value, tb))
        self.write(text)
        self.flush()
        if self.lost is not None:
            self._to_terminal(text)

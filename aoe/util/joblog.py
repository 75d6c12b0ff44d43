"""A rule's log: where a job's script sends its output, first thing.

Import-light on purpose (no pandas, no torch): every job imports it before its own work, and a download
job needs nothing heavier.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["forget_kept", "start_log"]


def start_log(log_path: str | os.PathLike, kept: str | os.PathLike | None = None) -> None:
    """Send this process's stdout and stderr (C-level output included) to a rule's log file.

    ``kept``: a second name of the log, outside Snakemake's reach. Snakemake deletes a job's log before it runs the
    job again, so a training that resumes an interrupted one would lose that one's lines (issue 71): the log
    starts with what ``kept`` holds, below it a line saying so, and ``kept`` becomes a hard link to the new log.
    The job removes ``kept`` once it ends well (:func:`forget_kept`)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    # Snakemake's own stderr, kept: on a full disk the log cannot take the job's lines or its error (a table job
    # ended with exit status 120, the interpreter failing to flush its last log line, and an empty log: no reason)
    terminal = os.dup(2)
    earlier = _read(kept)
    log = _LogFile(open(log_path, "w", buffering=1), log_path, terminal)
    if earlier:
        from datetime import datetime, timezone

        log.write(earlier.rstrip("\n") + f"\n\n----- {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC: the job again; "
                  "the lines above are its earlier run (a checkpoint of the same run resumes)\n")
    if kept is not None:
        _link(log_path, kept)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    sys.excepthook = log.report_uncaught
    # SLURM's time limit and scancel send SIGTERM: let a job's cleanups (partial folders) run
    from aoe.util.fsutil import exit_on_sigterm

    exit_on_sigterm()


def forget_kept(kept: str | os.PathLike) -> None:
    """The job ended well: the next run of it starts a log of its own."""
    Path(kept).unlink(missing_ok=True)


def _read(path: str | os.PathLike | None) -> str:
    try:
        return Path(path).read_text(errors="replace") if path is not None else ""
    except OSError:
        return ""


def _link(log_path: str | os.PathLike, kept: str | os.PathLike) -> None:
    """``kept``, a hard link to the log; where the file system has none, nothing is kept (the log is as before)."""
    try:
        Path(kept).parent.mkdir(parents=True, exist_ok=True)
        Path(kept).unlink(missing_ok=True)
        os.link(log_path, kept)
    except OSError:
        pass


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

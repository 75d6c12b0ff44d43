"""A training stopped by a signal, told apart from one that failed (issue 71).

SIGTERM (SLURM's time limit, ``scancel``) or SIGINT (Ctrl-C) ends a training after its current step with a
checkpoint (:mod:`aoe.training.train`). That is not a failure, and the job says so in two ways that Snakemake
and a cluster user can read without the log:

* its exit status is :data:`RESUMABLE_EXIT`, 75 (``EX_TEMPFAIL`` of sysexits.h: "a temporary failure; the user is
  invited to retry"), never the 1 of an error;
* ``seed{N}.ckpt/interrupted.json`` records the signal, the step and the checkpoint, until the rerun that
  resumes from it starts.

:mod:`aoe.plan.interruptions` reads the record to print one line where Snakemake would print a failed job.
Import-light (no torch): the Snakefile imports it at every planning.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from aoe.util.jsonio import write_json_atomic

__all__ = ["INTERRUPTED", "RESUMABLE_EXIT", "clear_interrupted", "interruption_line", "mark_interrupted", "read_interrupted",
           "stop_on_signals"]

RESUMABLE_EXIT = 75
INTERRUPTED = "interrupted.json"


def mark_interrupted(ckpt_root: Path, signal_name: str, step: int, total: int, checkpoint: Path) -> Path:
    """Record that a signal stopped the run of ``ckpt_root`` at ``step`` with ``checkpoint`` saved."""
    record = {"signal": signal_name, "step": step, "total": total, "checkpoint": str(checkpoint)}
    return write_json_atomic(record, Path(ckpt_root) / INTERRUPTED)


def read_interrupted(ckpt_root: Path) -> dict | None:
    """The record of the signal that stopped the run of ``ckpt_root``; None where none did (or it is unreadable)."""
    try:
        record = json.loads((Path(ckpt_root) / INTERRUPTED).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and {"signal", "step", "total", "checkpoint"} <= set(record) else None


def clear_interrupted(ckpt_root: Path) -> None:
    """A run that starts again (resuming or not) is no longer the interrupted one."""
    (Path(ckpt_root) / INTERRUPTED).unlink(missing_ok=True)


def interruption_line(what: str, record: dict) -> str:
    """The one line that says what happened to the training ``what`` and what to do."""
    return (f"{what}: interrupted ({record['signal']}) at step {record['step']} of {record['total']}, "
            f"checkpoint {record['checkpoint']}: rerun the same command to resume from it")


@contextlib.contextmanager
def stop_on_signals():
    """Which of SIGTERM or SIGINT arrived (None: neither), for the loop to save a checkpoint after the step it is in.

    SIGTERM: SLURM's time limit and ``scancel`` (SIGKILL follows after the cluster's KillWait);
    SIGINT: Ctrl-C, which reaches the job too (Snakemake's process group). Both used to end the
    job mid-step and lose every step since the last ``checkpoint_every``. A second Ctrl-C stops at once.
    """
    import signal
    import threading

    arrived: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield arrived  # signal handlers belong to the main thread
        return

    def on_signal(signum, frame):
        if signum == signal.SIGINT and arrived:
            raise KeyboardInterrupt
        arrived.append(signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield arrived
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

"""Interruptions read as what they are on Snakemake's terminal (issue 71).

A training stopped by Ctrl-C or SIGTERM saves a checkpoint and exits with status 75
(:mod:`aoe.training.interruption`); SIGTERM to Snakemake itself lets the running jobs finish. Snakemake reports
both as failures: "Error in rule train_model ... non-zero exit status", then "Exiting because a job execution
failed" and "WorkflowError: At least one job did not complete successfully", and "Will exit after finishing
currently running jobs" at every turn of its scheduler, although no job failed.

:class:`InterruptionFilter`, a :class:`logging.Filter` on Snakemake's logger (the Snakefile adds it in the main
process), rewrites those records: an interrupted training's error block becomes one line (where it stopped, the
checkpoint, rerun to resume), the repeated "Will exit" line is said once, and the closing failure lines become
one line that says no job failed, unless one did: a real failure keeps every line Snakemake prints. A record of
another shape passes unchanged, so a newer Snakemake that words these differently prints its own lines.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aoe.training.checkpoints import checkpoint_dir
from aoe.training.interruption import RESUMABLE_EXIT, interruption_line, read_interrupted

__all__ = ["InterruptionFilter", "install"]

# Snakemake's wording (snakemake 9: scheduling/job_scheduler.py, workflow.py): matched to rewrite, else passed
_WILL_EXIT = "Will exit after finishing currently running jobs"
_EXITING = "Exiting because a job execution failed"
_NOT_COMPLETE = "At least one job did not complete successfully"
_INTERRUPTED_CALL = f"non-zero exit status {RESUMABLE_EXIT}."


class InterruptionFilter(logging.Filter):
    """Rewrites Snakemake's records of interrupted trainings and of a stop on request; see the module."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted: list[str] = []  # the line of each interrupted training, in the order Snakemake reported them
        self.failed = 0  # jobs that failed for another reason: then Snakemake's closing lines stay
        self.stopping = False  # SIGTERM to Snakemake: it said it will exit once the running jobs finish

    def filter(self, record: logging.LogRecord) -> bool:
        event = str(getattr(record, "event", "") or "").lower()
        message = str(record.msg or "")
        if event.endswith("job_error") or message.startswith("Error in rule "):
            line = self._interrupted_line(record)
            if line is None:
                self.failed += 1
                return True
            self.interrupted.append(line)
            return _rewrite(record, line, logging.WARNING)
        if _INTERRUPTED_CALL in message:  # the exception line before the block (RuleException: CalledProcessError)
            return False
        if message.startswith(_WILL_EXIT):
            said, self.stopping = self.stopping, True
            return not said and _rewrite(
                record, "Stopping on request: no new job starts; the running ones finish (said once)", logging.WARNING)
        if self.failed == 0 and (self.interrupted or self.stopping):
            if message.startswith(_EXITING):
                return False
            if _NOT_COMPLETE in message:
                return _rewrite(record, self.closing_line(), logging.WARNING)
        return True

    def closing_line(self) -> str:
        """The line in place of "At least one job did not complete successfully" where none failed."""
        if self.interrupted:
            n = len(self.interrupted)
            which = f"{n} trainings were interrupted, each with a checkpoint" if n > 1 else "1 training was interrupted with a checkpoint"
            return f"No job failed: {which} (above); rerun the same command to resume, finished jobs are kept"
        return "No job failed: stopped on request; rerun the same command to go on, finished jobs are kept"

    @staticmethod
    def _interrupted_line(record: logging.LogRecord) -> str | None:
        """The one line for a failed job that is an interrupted training (its checkpoint folder records the
        signal); None for any other job."""
        outputs = getattr(record, "output", None) or []
        if isinstance(outputs, str):
            outputs = outputs.split(", ")
        rule = getattr(record, "rule_name", None) or "train_model"
        for out in outputs:
            path = str(out).split(" (")[0].strip()  # Snakemake may annotate a path: "x (directory)"
            found = read_interrupted(checkpoint_dir(Path(path)))
            if found is not None:
                return interruption_line(f"{rule} {path}", found)
        return None


def _rewrite(record: logging.LogRecord, line: str, level: int) -> bool:
    """Let ``record`` through as the plain ``line`` at ``level`` (no Snakemake event: its formatter prints the text)."""
    record.msg, record.args, record.event = line, (), None
    record.levelno, record.levelname = level, logging.getLevelName(level)
    return True


def install(logger: logging.Logger | None = None) -> InterruptionFilter:
    """Add the filter to Snakemake's logger (once per process) and return it."""
    if logger is None:
        from snakemake.logging import logger
    for existing in logger.filters:
        if isinstance(existing, InterruptionFilter):
            return existing
    filt = InterruptionFilter()
    logger.addFilter(filt)
    return filt

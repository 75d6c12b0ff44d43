"""Snakemake's default job-rate limit, dropped as a run starts.

Snakemake 9 (9.27.1, pinned in pyproject.toml) limits job starts to ``--max-jobs-per-timespan``, default
``100/1s``. While a limit is set, each pass of its scheduler ends by starting a timer that wakes the
scheduler one timespan later, and that wake-up is a pass that starts another timer
(``snakemake/scheduling/job_scheduler.py``: ``schedule``, ``_schedule_reevalutation``). Every finished job
wakes the scheduler once more, so the timers pile up: after n finished jobs the scheduler makes n passes a
second, each over the ready jobs' input files, until the run ends (a pass without ready jobs starts no timer: the
pile grows while jobs wait for cores or for a cluster's ``jobs`` slots). Measured on the CI preset's run alone (124
jobs, one core): 16,215 passes and 30.6 CPU-s in Snakemake's own process, against 8.4 CPU-s with the limit dropped
(the run 244 → 211 CPU-s, 226 → 204 s).

No rule here needs a start rate (a SLURM profile caps what is queued with ``jobs``), so the default limit is
dropped; a limit set on purpose (any other value, on the command line or in a profile) is kept, with its
cost. The scheduler exists only once the run starts, after the Snakefile is read: the Snakefile's
``onstart`` calls :func:`drop_default_rate_limit` (``--no-hooks`` leaves Snakemake's behaviour as it is).
"""

from __future__ import annotations

SNAKEMAKE_DEFAULT = "100/1s"  # snakemake/cli.py's default of --max-jobs-per-timespan (tests/test_scheduling.py reads it)


def drop_default_rate_limit(scheduler) -> bool:
    """Remove ``scheduler.job_rate_limiter`` (a Snakemake ``JobScheduler``'s, before it schedules) when its
    limit is Snakemake's default; True when it did."""
    from snakemake.settings.types import MaxJobsPerTimespan

    limiter = getattr(scheduler, "job_rate_limiter", None)
    default = MaxJobsPerTimespan.parse_choice(SNAKEMAKE_DEFAULT)
    if limiter is None or (limiter.max_jobs, limiter.timespan) != (default.max_jobs, default.timespan):
        return False
    scheduler.job_rate_limiter = None
    return True

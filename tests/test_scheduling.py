"""aoe.plan.scheduling: Snakemake's default job-rate limit dropped as a run starts, a limit set on purpose kept.

That the dropped limit stops the scheduler's passes piling up is read from a real run's debug log
(test_a_run_passes_once_per_finished_job).
"""

from __future__ import annotations

from types import SimpleNamespace

from snakemake.scheduling.job_scheduler import JobRateLimiter
from snakemake.settings.types import MaxJobsPerTimespan

from aoe.plan.scheduling import SNAKEMAKE_DEFAULT, drop_default_rate_limit


def test_the_default_is_snakemakes():
    from snakemake.cli import get_argument_parser

    assert get_argument_parser().get_default("max_jobs_per_timespan") == SNAKEMAKE_DEFAULT


def test_only_the_default_limit_is_dropped():
    scheduler = SimpleNamespace(job_rate_limiter=JobRateLimiter(MaxJobsPerTimespan.parse_choice(SNAKEMAKE_DEFAULT)))
    assert drop_default_rate_limit(scheduler) and scheduler.job_rate_limiter is None
    assert not drop_default_rate_limit(scheduler)  # none left (a dry run has none either)
    for chosen in ("50/1s", "100/1m"):
        limiter = JobRateLimiter(MaxJobsPerTimespan.parse_choice(chosen))
        scheduler = SimpleNamespace(job_rate_limiter=limiter)
        assert not drop_default_rate_limit(scheduler) and scheduler.job_rate_limiter is limiter, chosen


def test_a_run_passes_once_per_finished_job(tmp_path):
    """Through Snakemake itself: ten jobs queued for one core, the scheduler's passes counted in its debug log
    ("Resources before job selection", one a pass). With the default limit each finished job adds a pass a second
    while jobs wait (measured: 31 passes here, with the onstart line removed); dropped, one pass per finished job
    (the ten and `all`) and one to start."""
    import subprocess
    import sys

    from tests.workflow_utils import REPO

    (tmp_path / "Snakefile").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom aoe.plan.scheduling import drop_default_rate_limit\n"
        "onstart:\n    drop_default_rate_limit(workflow.scheduler)\n"
        "rule all:\n    input: expand('out/{i}.txt', i=range(10))\n"
        "rule one:\n    output: 'out/{i}.txt'\n    shell: 'sleep 0.5; touch {output}'\n")
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--verbose"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    log = out.stdout + out.stderr
    assert log.count("Finished jobid") == 11 and log.count("Resources before job selection") <= 11 + 1, log[-3000:]


def test_the_workflow_drops_it_as_a_run_starts():
    from tests.workflow_utils import REPO

    onstart = (REPO / "Snakefile").read_text().split("\nonstart:\n", 1)[1].split("\n\n", 1)[0]
    assert "drop_default_rate_limit(workflow.scheduler)" in onstart, onstart

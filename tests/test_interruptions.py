"""Interruptions read as what they are (issue 71): an interrupted training is one line on Snakemake's terminal, not a
failed job; a stop on request is said once; a resumed training's log keeps the run it resumes.

The records fed to the filter are made by Snakemake's own code (Job.get_log_error_info's keys, print_exception's
event), so a Snakemake that renames them fails here, not on a user's terminal. The training's side (exit 75 and
the record it writes) is tests/test_train_engine.py's SIGTERM and Ctrl-C tests; the whole path through a real
Snakemake run was tried by hand (the closing note of issue 71).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from snakemake.logging import LogEvent

from aoe.plan.interruptions import InterruptionFilter, install
from aoe.training.checkpoints import checkpoint_dir
from aoe.training.interruption import RESUMABLE_EXIT, clear_interrupted, mark_interrupted, read_interrupted
from tests.workflow_utils import REPO


def _job_error(out: Path, rule: str = "train_model") -> logging.LogRecord:
    # the shape of snakemake.jobs.Job.log_error's record: message, and the job's fields as extra
    record = logging.LogRecord("snakemake.logging", logging.ERROR, __file__, 0, f"Error in rule {rule}, jobid: 0", (), None)
    record.__dict__.update(rule_name=rule, output=[str(out)], log=[], event=LogEvent.JOB_ERROR)
    return record


def _line(message: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord("snakemake.logging", logging.ERROR, __file__, 0, message, (), None)
    record.__dict__.update(extra)
    return record


def _interrupted(tmp_path: Path, name: str = "seed1") -> Path:
    out = tmp_path / "models" / name
    mark_interrupted(checkpoint_dir(out), "SIGINT", 31, 200, checkpoint_dir(out) / "step31")
    return out


def test_an_interrupted_training_is_one_line_and_the_closing_lines_say_no_job_failed(tmp_path):
    filt, out = InterruptionFilter(), _interrupted(tmp_path)
    call = _line(f"RuleException:\nCalledProcessError in file rules/train.smk, line 36:\nCommand 'python train.py' "
                 f"returned non-zero exit status {RESUMABLE_EXIT}.", event=LogEvent.ERROR, exception="RuleException")
    assert not filt.filter(call)  # the exception before the block: the block says it
    block = _job_error(out)
    assert filt.filter(block) and block.levelno == logging.WARNING and getattr(block, "event") is None
    assert block.getMessage() == (f"train_model {out}: interrupted (SIGINT) at step 31 of 200, checkpoint "
                                  f"{checkpoint_dir(out) / 'step31'}: rerun the same command to resume from it")
    assert not filt.filter(_line("Exiting because a job execution failed. Look above for error messages"))
    closing = _line("At least one job did not complete successfully.", event=LogEvent.ERROR, exception="WorkflowError")
    assert filt.filter(closing) and closing.getMessage().startswith("No job failed: 1 training was interrupted with a checkpoint")
    assert filt.filter(_line("Shutting down, this might take some time."))  # everything else passes unchanged


def test_a_real_failure_keeps_every_line_snakemake_prints(tmp_path):
    filt = InterruptionFilter()
    assert filt.filter(_job_error(_interrupted(tmp_path, "seed1")))
    failed = _job_error(tmp_path / "models" / "seed2")  # no record: it failed
    assert filt.filter(failed) and failed.getMessage().startswith("Error in rule train_model") and failed.levelno == logging.ERROR
    for message in ("Exiting because a job execution failed. Look above for error messages",
                    "At least one job did not complete successfully."):
        record = _line(message)
        assert filt.filter(record) and record.getMessage() == message


def test_a_stop_on_request_is_said_once_and_is_not_a_failure():
    filt = InterruptionFilter()
    said = [filt.filter(r) for r in (_line("Will exit after finishing currently running jobs (scheduler).") for _ in range(7))]
    assert said == [True] + [False] * 6
    closing = _line("At least one job did not complete successfully.")
    assert filt.filter(closing) and closing.getMessage().startswith("No job failed: stopped on request")


def test_a_stale_record_never_hides_a_failure(tmp_path):
    # each run of a training clears the record as it starts (workflow_scripts/train.py, train()): a failure after it
    out = _interrupted(tmp_path)
    clear_interrupted(checkpoint_dir(out))
    assert read_interrupted(checkpoint_dir(out)) is None
    record = _job_error(out)
    assert InterruptionFilter().filter(record) and record.getMessage().startswith("Error in rule")


def test_the_filter_is_on_snakemakes_logger_once():
    logger = logging.getLogger("tests.interruptions")
    assert install(logger) is install(logger) and len(logger.filters) == 1


def test_a_resumed_job_keeps_the_log_of_the_run_it_resumes(tmp_path):
    # Snakemake deletes a job's log before it runs the job again: steps 0..N of the interrupted run were gone
    log, kept = tmp_path / "logs" / "seed1.log", tmp_path / "seed1.ckpt" / "job.log"
    code = textwrap.dedent("""
        import sys
        from aoe.util.joblog import forget_kept, start_log
        start_log(sys.argv[1], kept=sys.argv[2])
        print(sys.argv[3])
        if sys.argv[3] == "finished":
            forget_kept(sys.argv[2])
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    texts = []
    for line in ("step 0 to 31, SIGINT", "step 31 to 60", "finished", "a forced run"):
        log.unlink(missing_ok=True)  # as Snakemake does
        subprocess.run([sys.executable, "-c", code, str(log), str(kept), line], check=True, env=env)
        texts.append(log.read_text())
    runs = texts[2].split("\n----- ")
    assert [r.splitlines()[-1] for r in runs] == ["step 0 to 31, SIGINT", "step 31 to 60", "finished"]
    assert "UTC: the job again; the lines above are its earlier run" in runs[1]
    assert texts[3] == "a forced run\n"  # the finished job forgot its earlier runs

"""The CI preset through a real SLURM scheduler: ``snakemake --profile slurm`` (about 5 min, in the background).

Needs a cluster with a GPU GRES on this machine: ``.ci/slurm/setup.sh`` (root) makes a single-node
one with a fake GPU, and ``.ci/run`` calls it before the tests. Without a cluster these tests skip,
except in CI (``CI=true``), where they fail. The run layers the test-cluster overrides
(``profiles/slurm-ci``: squeue for status, first status check after 1 s, memory and CPUs that fit
a 2-CPU node) on the real profile (``slurm/``), so the profile users run is the one tested.

What is checked: every output of the CI preset; the training and evaluation jobs were submitted
with ``--gpus=1`` and SLURM allocated them a GPU (``scontrol show job``), the CPU jobs without;
the GPU jobs asked for one node (``--nodes=1``) in their backbone's partition (``-p``);
the jobs ran under SLURM (``slurm_job_id`` recorded by training and evaluation equals the job id
Snakemake reports) with this environment's Python; and a job that fails on the cluster is
reported with its SLURM log and its rule log.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import background
from tests.workflow_utils import MIRROR, REPO, SNAKEMAKE, TINY_OVERLAY, copy_workflow, needs_mirror, tiny_backbone_overlay

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PROFILES = ("--profile", str(REPO / "slurm"), "--profile", str(REPO / "profiles" / "slurm-ci"))
# Hard limit for one snakemake run; past it the whole process group is SIGKILLed.
TIMEOUT_S = float(os.environ.get("AOE_SLURM_TEST_TIMEOUT", "1200"))

# evaluate_sts_eval_pooling: the CI preset's evaluation-only variant row of table1_sts (a `use rule` of evaluate_sts)
GPU_RULES = {"train_model", "evaluate_sts", "evaluate_indomain", "evaluate_sts_eval_pooling"}
SUBMITTED = re.compile(r"Job (\d+) has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.")
SBATCH = re.compile(r"^sbatch call: (sbatch .*?) --wrap=\"(.*)\"$", re.MULTILINE)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.slurm,
    needs_mirror,
]


def cluster_problem() -> str | None:
    """Why SLURM cannot run these tests here, or None when a node with a GPU GRES is up."""
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed"
    missing = [tool for tool in ("sbatch", "squeue", "sinfo", "scontrol", "srun") if shutil.which(tool) is None]
    if missing:
        return f"SLURM client tools not found: {', '.join(missing)} (run .ci/slurm/setup.sh as root)"
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T %G"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo timed out: slurmctld does not answer"
    if out.returncode != 0:
        return f"sinfo failed: {out.stderr.strip()} (run .ci/slurm/setup.sh as root)"
    nodes = [line.split() for line in out.stdout.splitlines() if line.strip()]
    usable = [n for n in nodes if n[0] in ("idle", "mixed", "allocated") and "gpu" in " ".join(n[1:])]
    if not usable:
        return f"no usable SLURM node with a gpu GRES (sinfo: {out.stdout.strip() or 'no nodes'})"
    return None


@pytest.fixture(scope="module")
def cluster() -> None:
    problem = cluster_problem()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"CI must run the SLURM tests, but: {problem}", pytrace=False)
        pytest.skip(problem)


def queued_jobs() -> list[str]:
    """The jobs queued or running on the test cluster, as ``squeue`` lists them (id, run name, state)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True, timeout=20)
    return out.stdout.splitlines() if out.returncode == 0 else []


def default_partition() -> str:
    """The partition ``sinfo`` marks with * (the test cluster's only one)."""
    out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=20)
    return next(p.rstrip("*") for p in out.stdout.split() if p.endswith("*"))


def _slurm_env(env: dict[str, str]) -> dict[str, str]:
    """This process's environment less its own SLURM variables (a test run inside a SLURM job), plus ``env``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}, **env}


def cancel_jobs(text: str) -> None:
    """Cancel the SLURM jobs of the run whose output is ``text`` (the plugin names each job by its run ID)."""
    run_id = re.search(r"SLURM run ID: (\S+)", text)
    if run_id:
        subprocess.run(["scancel", "--name", run_id.group(1)], capture_output=True, timeout=30)


def scontrol_job(jobid: str) -> dict[str, str]:
    """``scontrol show job -d`` as a dict (finished jobs stay visible for MinJobAge)."""
    out = subprocess.run(["scontrol", "show", "job", "-d", "-o", jobid], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, f"scontrol show job {jobid}: {out.stderr}"
    return dict(field.split("=", 1) for field in out.stdout.split() if "=" in field)


def submissions(text: str) -> list[dict[str, str]]:
    """Submitted jobs from a --verbose log: rule, SLURM job id, SLURM log, sbatch options, command."""
    calls = {}
    for options, command in SBATCH.findall(text):
        log = re.search(r"--output (\S+)", options).group(1)
        calls[os.path.dirname(log)] = (options, command)
    jobs = []
    for _, jobid, log in SUBMITTED.findall(text):
        options, command = calls[os.path.dirname(log)]
        rule = re.search(r"--allowed-rules (\S+)", command).group(1)
        jobs.append({"rule": rule, "jobid": jobid, "log": log, "options": options, "command": command})
    return jobs


def _slurm_setup(root: Path, cores: int) -> background.Launch | str:
    """The CI preset, lightened, through the SLURM profiles: the background run of fixture slurm_run."""
    problem = "data mirror not found" if MIRROR is None else cluster_problem()
    if problem is not None:
        return problem  # the fixture cluster fails (CI) or skips with it first
    if leftovers := queued_jobs():
        # The node has one GPU: a job of another run (one left running by a killed session) would hold
        # this run's GPU jobs until its time limit, and the run would time out 20 min later.
        raise RuntimeError(f"the test cluster is busy before this run starts: {'; '.join(leftovers)}. "
                           "Cancel them (scancel <id>), or rerun .ci/slurm/setup.sh, which cancels jobs "
                           "left from an earlier session")
    work = copy_workflow(root / "wf")
    # What a scheduler changes is under test here (sbatch lines, resources, job ids, logs), not scores:
    # the tiny random BERT in MiniLM-L6's place (tests/workflow_utils.py::tiny_backbone_overlay), the
    # last weights kept (no STS-B dev scoring) and 250 STS-B test pairs. The CI preset's other
    # evaluations and its six other STS tasks are the shared end-to-end run's business
    # (tests/conftest.py::ci_run), and each would only add a queued job (~10 s of start-up apiece on
    # this single node, whose one GPU runs the GPU jobs one at a time). STS-B alone and 12 training
    # steps keep every rule kind (prepare_sts, tokenize, train_model, evaluate_sts, evaluate_indomain, table).
    # MiniLM's GPU jobs name their partition, as a backbone's resources.partition does (docs/cluster.md)
    tiny_backbone_overlay(work, root.parent / "tiny-bert")
    (work / "slurm-light.yaml").write_text(
        f"backbones: {{minilm-l6: {{resources: {{partition: {default_partition()}}}}}}}\n"
        "trainsets: {stsb: {train: {max_steps: 12, select_checkpoint: last, select_split: null}}}\n"
        "evaluation: {suites: [sts], sts: {tasks: [STSB], max_pairs: 250, uncapped_tasks: []}}\n"
        "build: {tables: [table1_sts, table2_indomain], figures: [], analyses: []}\n"
    )
    env = _slurm_env({"AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1"})
    cmd = [*SNAKEMAKE, *PROFILES, "--verbose", "--configfile", "presets/ci.yaml", TINY_OVERLAY, "slurm-light.yaml"]
    return background.Launch(cmd, work, env, TIMEOUT_S)


# Started at collection after the QLoRA cell's run, beside the CI preset's (tests/background.py); the failing run follows it
# in the same chain rather than queue its job behind it on the one node.
background.register("slurm_run", _slurm_setup, after="llm_run")


def _failure_setup(root: Path, cores: int) -> background.Launch | str:
    """A job that fails on the cluster: STS-B test's laid-out copy damaged after it was fetched, so prepare_sts fails
    inside its SLURM job (a damaged mirror copy fails before, in the local download_file job). The background run
    after slurm_run, on the idle node: its half minute of queueing overlaps the tests instead of ending the session."""
    problem = cluster_problem()
    if problem is not None:
        return problem
    work = copy_workflow(root / "wf")
    bad = work / "results/ci/downloads/files/senteval/downstream/STS/STSBenchmark"
    bad.mkdir(parents=True)
    (bad / "sts-test.csv").write_text("not a SentEval line\n")
    env = _slurm_env({"AOE_DATA_MIRROR": "", "HF_HUB_OFFLINE": "1"})
    cmd = [*SNAKEMAKE, *PROFILES, "--verbose", "results/ci/data/stsb/test.parquet", "--configfile", "presets/ci.yaml"]
    return background.Launch(cmd, work, env, 240)


background.register("slurm_failure", _failure_setup, after="slurm_run")


@pytest.fixture(scope="module")
def slurm_run(cluster):
    run = background.result("slurm_run")
    if run is not None:
        cancel_jobs(run.output)  # after a hang or a failure, nothing of it stays queued
    run = background.checked(run)
    return run.launch.cwd, run.output, submissions(run.output)


@pytest.fixture(scope="module")
def slurm_failure(cluster) -> str:
    """The output of the run of _failure_setup, which must fail."""
    run = background.result("slurm_failure")
    if run is not None:
        cancel_jobs(run.output)  # after a hang, nothing of it stays queued
    return background.checked(run, fails=True).output


def test_all_outputs_built_on_slurm(slurm_run):
    work, _, jobs = slurm_run
    res = work / "results/ci"
    for table in ("table1_sts", "table2_indomain"):
        assert (res / "tables" / f"{table}.tex").is_file() and (res / "tables" / f"{table}.csv").is_file(), table
    for cell in ("minilm-l6/aoe/stsb/seed1", "minilm-l6/pretrained/none/seed0"):
        assert (res / "eval" / cell / "sts.json").is_file(), cell
    assert (res / "models/minilm-l6/aoe/stsb/seed1/model.safetensors").is_file()
    ran = {job["rule"] for job in jobs}
    assert {"prepare_sts", "tokenize", "train_model", "evaluate_sts", "evaluate_indomain", "table"} <= ran, ran
    # Downloads stay on the submit host (local rules), never in a SLURM job; so do the report's and recipe's
    # second-long writers (rules/report.smk), whose files the run still builds.
    assert not ran & {"fetch_backbone", "download_file", "download_hub", "report_md", "recipe", "report_page", "table_html"}
    assert (res / "REPORT.md").is_file() and (res / "RECIPE.md").is_file()


def test_gpu_jobs_request_and_get_a_gpu(slurm_run):
    _, _, jobs = slurm_run
    for job in jobs:
        options = job["options"]
        if job["rule"] in GPU_RULES:
            assert "--gpus=1" in options.split() and "--cpus-per-gpu=2" in options.split(), options
            info = scontrol_job(job["jobid"])
            assert info.get("TresPerJob") == "gres:gpu:1", info  # requested
            assert info.get("JOB_GRES") == "gpu:1", info  # allocated
            assert info.get("JobState") == "COMPLETED", info
        else:
            assert "--gpus" not in options and "--gres" not in options, options
            assert "--cpus-per-task=" in options, options


def test_gpu_jobs_ask_for_one_node_in_their_backbones_partition(slurm_run):
    """Every GPU job asks for one node (a multi-GPU training is one accelerate launch on one node:
    without --nodes, --gpus=4 may be spread over nodes) and the backbone's resources.partition
    reaches sbatch -p, where SLURM ran it. CPU jobs keep the plugin's defaults."""
    _, _, jobs = slurm_run
    partition = default_partition()
    gpu_jobs = [job for job in jobs if job["rule"] in GPU_RULES]
    assert {job["rule"] for job in gpu_jobs} == GPU_RULES
    for job in gpu_jobs:
        options = job["options"].split()
        assert "--nodes=1" in options, job["options"]
        assert options[options.index("-p") + 1] == partition, job["options"]
        assert "--ntasks-per-gpu" not in job["options"], job["options"]  # one task; accelerate starts the processes
        info = scontrol_job(job["jobid"])  # once allocated, NumNodes is the count given (a pending --nodes=1 job shows 1-1)
        assert (info.get("Partition"), info.get("NumNodes"), info.get("JobState")) == (partition, "1", "COMPLETED"), info
    for job in jobs:
        if job["rule"] not in GPU_RULES:
            assert "--nodes" not in job["options"] and "--ntasks=1" in job["options"].split(), job["options"]


def test_jobs_ran_under_slurm_with_this_python(slurm_run):
    work, _, jobs = slurm_run
    res = work / "results/ci"
    # SLURM logs are .snakemake/slurm_logs/rule_<rule>/<wildcards joined by _>/<jobid>.log
    job_of = {(job["rule"], Path(job["log"]).parent.name): job["jobid"] for job in jobs}
    train = json.loads((res / "models/minilm-l6/aoe/stsb/seed1/aoe_config.json").read_text())
    assert train["slurm_job_id"] is not None
    assert train["slurm_job_id"] == job_of["train_model", "minilm-l6_aoe_stsb_1"]
    for cell, log_dir in (("minilm-l6/aoe/stsb/seed1", "minilm-l6_aoe_stsb_1"), ("minilm-l6/pretrained/none/seed0", "minilm-l6_pretrained_none_0")):
        result = json.loads((res / "eval" / cell / "sts.json").read_text())
        assert result["slurm_job_id"] is not None, cell
        assert result["slurm_job_id"] == job_of["evaluate_sts", log_dir], cell
    for job in jobs:
        # The job runs `<this venv's python> -m snakemake`: same packages as the submitting process.
        assert job["command"].startswith(f"{sys.executable} -m snakemake "), job["command"][:200]
    # slurm-keep-successful-logs: the GPU job's log shows the GPU SLURM gave it.
    (train_job,) = [job for job in jobs if job["rule"] == "train_model"]
    log = Path(train_job["log"]).read_text(errors="replace")
    assert "'CUDA_VISIBLE_DEVICES': '0'" in log


def test_failed_slurm_job_is_reported_with_its_logs(slurm_failure):
    text = slurm_failure  # its exit status is not 0: fixture slurm_failure
    assert "Error in rule prepare_sts" in text, text[-3000:]
    (job,) = submissions(text)
    assert re.search(rf"SLURM-job '{job['jobid']}' failed, SLURM status is: 'FAILED'", text), text[-3000:]
    # Both logs are named in the error report; the SLURM log is kept, the rule log is shown.
    slurm_log = Path(job["log"])
    assert str(slurm_log) in text.split("Error in rule prepare_sts", 1)[1]
    assert slurm_log.is_file() and "Error in rule prepare_sts" in slurm_log.read_text(errors="replace")
    assert "results/ci/logs/prepare_sts/stsb-test.log" in text
    assert "sts-test.csv:1: expected at least 7 tab-separated fields" in text  # the rule log, printed (show-failed-logs)
    assert scontrol_job(job["jobid"])["JobState"] == "FAILED"

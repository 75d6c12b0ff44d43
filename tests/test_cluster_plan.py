"""A cluster plan that states its cost (issue 71): the profile's placeholders said, a dry run's trainings costed, time
limits sized from each training's estimate (aoe.plan.cluster, aoe.plan.cost). The grid's own numbers are held by
tests/test_workflow.py (its LLaMA cell's runtime, in the paper grid's plan) and docs/cluster.md's example."""

from __future__ import annotations

import logging

import pytest
from snakemake.logging import LogEvent

from aoe.config.cell_settings import train_params
from aoe.plan.check import load_config
from aoe.plan.cluster import PlanCost, placeholder_line, slurm_profile, slurm_retries
from aoe.plan.cost import MEASURED_MARGIN, MIN_RUNTIME, PAPER_MARGIN, CostError, training_gpu_hours, training_runtime_minutes
from tests.workflow_utils import REPO


@pytest.fixture(scope="module")
def grid():
    return load_config(REPO, [])


def test_a_slurm_profile_is_found_as_snakemake_finds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    folder, settings = slurm_profile(["snakemake", "--profile", "slurm", "-n", "table1"], env={})
    assert folder.name == "slurm" and settings["executor"] == "slurm" and settings["retries"] == 2
    assert slurm_profile(["snakemake", "--profile=slurm"], env={})[0].name == "slurm"
    assert slurm_profile(["snakemake", "-n"], env={"SNAKEMAKE_PROFILE": "slurm"})[0].name == "slurm"
    assert slurm_profile(["snakemake", "--executor", "slurm"], env={}) == (None, {})
    assert slurm_profile(["snakemake", "--cores", "2"], env={}) is None  # a local run: nothing said
    # the retries a failed training may take: the command line's over the profile's, in either spelling
    assert [slurm_retries(argv, settings) for argv in (["snakemake"], ["snakemake", "--retries", "5"], ["snakemake", "--retries=0"])] == [2, 5, 0]
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "config.yaml").write_text("cores: 2\n")
    assert slurm_profile(["snakemake", "--profile", str(tmp_path / "local")], env={}) is None


def test_the_unedited_placeholders_are_one_line_and_an_edited_profile_none(grid, monkeypatch):
    monkeypatch.chdir(REPO)
    folder, settings = slurm_profile(["snakemake", "--profile", "slurm"], env={})
    line = placeholder_line(folder, settings, grid)
    assert line.startswith("slurm/config.yaml sets no partition and no account (the EDIT lines under default-resources)")
    edited = {**settings, "default-resources": {**settings["default-resources"], "slurm_partition": "gpu"}}
    assert "sets no account (" in placeholder_line(folder, edited, grid)
    edited["default-resources"]["slurm_account"] = "proj"
    assert placeholder_line(folder, edited, grid) is None
    # the command-line form of default-resources, and a partition config in place of a partition
    assert placeholder_line(None, {"default-resources": ["slurm_account=proj"], "slurm-partition-config": "p.yaml"}, grid) is None


def _job(rule: str, gpu: int, runtime: int, **wildcards) -> logging.LogRecord:
    # the shape of snakemake.jobs.Job.log_info's record
    record = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 0, " Rule: x, Jobid: 1", (), None)
    record.__dict__.update(event=LogEvent.JOB_INFO, rule_name=rule, wildcards=wildcards, resources={"gpu": gpu, "runtime": runtime})
    return record


def test_a_dry_run_ends_with_what_its_trainings_request_and_are_estimated_to_take():
    estimates = {"a": (10.0, "speed A"), "b": None}
    cost = PlanCost(2, lambda w: estimates[w["backbone"]])
    for record in (_job("train_model", 4, 600, backbone="a"), _job("train_model", 4, 600, backbone="a"),
                   _job("train_model", 1, 60, backbone="b"), _job("evaluate_sts", 1, 600, backbone="a")):
        assert cost.filter(record)
    end = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 0, "This was a dry-run (flag -n). ...", (), None)
    assert cost.filter(end)
    lines = end.getMessage().splitlines()
    assert lines[0] == ("Cluster plan: 3 trainings request 81 GPU-hours (gpus x runtime, config.yaml backbones.<b>.resources); "
                        "with retries: 2 a training that fails may take up to 3x its request")
    assert lines[1:3] == ["  a: 2 trainings, requested 80.0 GPU-h, estimated 20.0 (speed A)", "  b: 1 training, requested 1.0 GPU-h, no estimate"]
    assert lines[3].startswith("This was a dry-run")
    again = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 0, "This was a dry-run (flag -n).", (), None)
    assert cost.filter(again) and again.getMessage() == "This was a dry-run (flag -n)."  # said once


def test_runtime_auto_is_the_estimate_over_the_gpus_times_the_margin(grid):
    params = train_params(grid, "llama-2-7b", "aoe", "nli", 42, job=True)
    resources = grid["backbones"]["llama-2-7b"]["resources"]
    hours, source, measured = training_gpu_hours(params, "llama-2-7b", "nli", resources)
    assert measured and "56.6 pairs/s a GPU measured at max_length 45" in source
    assert training_runtime_minutes(params, "llama-2-7b", "nli", resources) == pytest.approx(hours / 4 * 60 * MEASURED_MARGIN, abs=1)
    # without a measured speed: the paper's RTX 3090 Ti, its own margin
    paper_hours, paper_source, measured = training_gpu_hours(params, "llama-2-7b", "nli", {"gpus": 4})
    assert not measured and "Appendix D, AoE-LLaMA7B" in paper_source and paper_hours > hours
    assert training_runtime_minutes(params, "llama-2-7b", "nli", {"gpus": 4}) == pytest.approx(paper_hours / 4 * 60 * PAPER_MARGIN, abs=1)
    # a short STS-B training asks for the floor, not for 0 minutes
    short = train_params(grid, "bert-base-uncased", "aoe", "stsb", 42, job=True)
    assert training_runtime_minutes(short, "bert-base-uncased", "stsb", grid["backbones"]["bert-base-uncased"]["resources"]) == MIN_RUNTIME
    with pytest.raises(CostError, match="no size of trainset 'mine'"):
        training_runtime_minutes({**params, "max_steps": 0}, "llama-2-7b", "mine", resources)

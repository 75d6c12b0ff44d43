"""A target no rule can build names its unknown part, or the table the config does not build (aoe.targets)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aoe.targets import explain_target, requested_targets
from tests.workflow_utils import REPO, copy_workflow, snakemake

RULES = ["all", "train", "table2", "train_model", "evaluate_sts", "download_file"]


@pytest.fixture(scope="module")
def config():
    from aoe.configcheck import load_config

    return load_config(REPO)


@pytest.mark.parametrize(
    "target, line",
    [
        ("results/models/nope/aoe/stsb/seed1", "results/models/nope/aoe/stsb/seed1: unknown backbone 'nope'; valid: bert-base-uncased, "),
        ("results/models/bert-base-uncased/aoee/stsb/seed1", "results/models/bert-base-uncased/aoee/stsb/seed1: unknown objective 'aoee'; valid: angle_arxiv, "),
        ("results/eval/bert-base-uncased/aoe/stsbb/seed1/sts.json", "results/eval/bert-base-uncased/aoe/stsbb/seed1/sts.json: unknown trainset 'stsbb'; valid: angle-bert-base-nli-v1, "),
        ("results/eval/bert-base-uncased/aoe/stsb/s1/sts.json", "results/eval/bert-base-uncased/aoe/stsb/s1/sts.json: the seed folder 's1' must be seed<integer>, e.g. seed42"),
        ("results/data/stsb/valid.parquet", "results/data/stsb/valid.parquet: dataset 'stsb' has no split 'valid'; its splits: dev, test, train"),
        ("results/data/stsbx/test.parquet", "results/data/stsbx/test.parquet: unknown dataset 'stsbx'; valid: allnli, "),
        ("results/tables/table9.tex", "results/tables/table9.tex: unknown table 'table9'; valid: "),
        ("results/backbones/bert-large", "results/backbones/bert-large: unknown backbone 'bert-large'; valid: "),
        ("tabel2", "tabel2: no rule or output of that name; named targets: all, evaluate_sts, table2, train, train_model (or a results/ path)"),
    ],
)
def test_unknown_part_is_named(config, target, line):
    assert explain_target(target, config, rule_names=RULES).startswith(line)


@pytest.mark.parametrize(
    "target",
    ["all", "table2", "results/models/bert-base-uncased/aoe/stsb/seed7", "results/eval/llama-2-7b/pretrained/none/seed0/sts.json",
     "results/data/snli/dev.triplets.parquet", "results/tables/table2_indomain.tex", "results/REPORT.md", "results/downloads/files/x"],
)
def test_buildable_targets_pass(config, target):
    # a seed outside the grid is still a cell Snakemake can train: only malformed parts are refused
    assert explain_target(target, config, rule_names=RULES) is None


def test_a_table_not_built_names_the_file(tmp_path, config):
    preset = tmp_path / "preset.yaml"
    built = [t for t in config["build"]["tables"] if t != "table3_transfer"]
    preset.write_text(yaml.safe_dump({"build": {"tables": built}}))
    config = {**config, "build": {**config["build"], "tables": built}}
    line = f"table table3_transfer is not built by this configuration (build.tables in {preset} does not name it); add it to that list to build it"
    assert explain_target("table3", config, rule_names=RULES, configfiles=[REPO / "config.yaml", preset]) == f"table3: {line}"
    # its file, in the configuration's tree, the same
    why = explain_target("results/tables/table3_transfer.tex", config, rule_names=RULES, configfiles=[REPO / "config.yaml", preset])
    assert why == f"results/tables/table3_transfer.tex: {line}"


def test_requested_targets_reads_the_command_line():
    argv = ["snakemake", "-n", "--cores", "2", "table3", "results/REPORT.md", "--configfile", "presets/cpu-demo.yaml"]
    assert requested_targets(argv) == ["table3", "results/REPORT.md"]
    assert requested_targets(["snakemake", "--target-jobs", "train_model:seed=1", "--mode", "remote"]) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, line",
    [
        (["results/models/nope/aoe/stsb/seed1"],
         "target results/models/nope/aoe/stsb/seed1: unknown backbone 'nope'; valid: bert-base-uncased, bert-large-uncased, chatglm-6b, gemma3-270m, llama-2-13b, llama-2-7b, minilm-l6 (config.yaml backbones)"),
        (["table3", "--configfile", "presets/cpu-demo.yaml"],
         "target table3: table table3_transfer is not built by this configuration (build.tables in presets/cpu-demo.yaml does not name it); add it to that list to build it"),
        # issue 38 item 2: a path of the paper grid's tree asked of a preset, which has its own
        (["results/tables/table1_sts.tex", "--configfile", "presets/cpu-demo.yaml"],
         "target results/tables/table1_sts.tex: this configuration writes under results/cpu-demo/ (results: results/cpu-demo in presets/cpu-demo.yaml); ask for results/cpu-demo/tables/table1_sts.tex"),
        (["results/cpu-demo/tables/table9.tex", "--configfile", "presets/cpu-demo.yaml"],
         "target results/cpu-demo/tables/table9.tex: unknown table 'table9'; valid: angle_flickr30k, angle_table2_nontransfer, angle_table3_ablation, angle_table4_llm, angle_transfer_sts, angle_transfer_tasks, released, released_mteb, released_transfer, table1_sts, table2_indomain, table3_transfer, table4_ablation, table5_nli, table_gis_stats, table_mteb, table_train_time (config.yaml tables)"),
    ],
)
def test_snakemake_names_the_reason_before_planning(tmp_path, args, line):
    # was: "MissingRuleException: No rule to produce <target>" and nothing else
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "-n", *args, env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("WorkflowError"))
    assert lines[at + 1] == line, out.stdout[-2000:]
    assert "Building DAG" not in out.stdout and "MissingRuleException" not in out.stdout


def test_every_configuration_has_its_own_results_tree():
    """Issue 38 item 2: a bare `snakemake recipe` after the demo overwrote the demo's RECIPE.md."""
    roots = {"config.yaml": yaml.safe_load((REPO / "config.yaml").read_text())["results"]}
    for preset in sorted((REPO / "presets").glob("*.yaml")):
        roots[f"presets/{preset.name}"] = yaml.safe_load(preset.read_text()).get("results")
    assert roots["config.yaml"] == "results"
    assert all(root == f"results/{Path(name).stem}" for name, root in roots.items() if name != "config.yaml"), roots

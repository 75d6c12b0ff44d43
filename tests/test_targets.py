"""A target no rule can build names its unknown part, or the table the config does not build (aoe.plan.targets)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aoe.config.hparams import read_yaml
from aoe.plan.targets import explain_report, explain_target, explain_workdir, preset_trees, requested_report, requested_targets
from tests.forkserver import forked_snakemake
from tests.workflow_utils import REPO, copy_workflow

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

RULES = ["all", "train", "table2", "train_model", "evaluate_sts", "download_file"]


@pytest.fixture(scope="module")
def config():
    from aoe.plan.check import load_config

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
        ("tabel2", "tabel2: no rule or output of that name; did you mean table2? named targets: all, evaluate_sts, table2, train, train_model (or a results/ path)"),
        ("trian", "trian: no rule or output of that name; did you mean train? named targets: "),
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


@pytest.fixture(scope="module")
def demo_config():
    from aoe.plan.check import load_config

    return load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])


def test_a_path_of_another_presets_tree_names_that_preset(config, demo_config):
    """Issue 54: results/ci/... asked of the demo was answered "ask for results/cpu-demo/ci/...", which fails too;
    results/cpu-demo/... asked without --configfile got Snakemake's bare MissingRuleException."""
    assert explain_target("results/ci/tables/table1_sts.md", demo_config, rule_names=RULES) == (
        "results/ci/tables/table1_sts.md is in the tree of presets/ci.yaml (results/ci/), not of this configuration "
        "(which writes under results/cpu-demo/): give --configfile presets/ci.yaml to build it there")
    assert explain_target("results/cpu-demo/tables/table1_sts.md", config, rule_names=RULES) == (
        "results/cpu-demo/tables/table1_sts.md is in the tree of presets/cpu-demo.yaml (results/cpu-demo/), not of this "
        "configuration (which writes under results/): give --configfile presets/cpu-demo.yaml to build it there")
    # the demo's own tree, and the grid's tree asked of the demo (its file in the demo's tree is named) stay as they were
    assert explain_target("results/cpu-demo/tables/table1_sts.md", demo_config, rule_names=RULES) is None
    assert explain_target("results/tables/table1_sts.md", demo_config, rule_names=RULES).endswith(
        "ask for results/cpu-demo/tables/table1_sts.md")
    assert preset_trees()["results/ci"] == "presets/ci.yaml" and len(preset_trees()) == len(list((REPO / "presets").glob("*.yaml")))


def test_a_report_names_the_configuration_it_needs(config, demo_config, tmp_path, monkeypatch):
    """`snakemake --report` without the run's --configfile printed 1,039 "Missing metadata" lines (issue 54)."""
    monkeypatch.chdir(tmp_path)  # no results/ here: no run of any configuration
    demo = [REPO / "config.yaml", REPO / "presets" / "cpu-demo.yaml"]
    assert explain_report("results/cpu-demo/report.html", config, [REPO / "config.yaml"]) == (
        "--report results/cpu-demo/report.html: that is the run of presets/cpu-demo.yaml (results/cpu-demo/), this command's "
        "configuration is config.yaml alone (the paper grid) (under results/): give --configfile presets/cpu-demo.yaml, "
        "the files the run was given")
    why = explain_report("report.html", demo_config, demo)
    assert why.startswith("--report report.html: this command's configuration, ") and "has no run under results/cpu-demo/" in why
    (tmp_path / "results" / "cpu-demo" / "tables").mkdir(parents=True)
    assert explain_report("results/cpu-demo/report.html", demo_config, demo) is None
    (tmp_path / "results" / "cpu-demo" / "REPORT.md").write_text("")
    assert explain_report("report.html", config, [REPO / "config.yaml"]).endswith(
        "finished here: presets/cpu-demo.yaml (results/cpu-demo/)")
    assert requested_report(["snakemake", "--report", "r.html", "--configfile", "presets/ci.yaml"]) == "r.html"
    assert requested_report(["snakemake", "-n", "all"]) is None


def test_a_run_outside_the_repository_root_says_where_to_run(tmp_path):
    why = explain_workdir(REPO, tmp_path)
    assert why == (f"snakemake runs in {tmp_path.resolve()}, which has no config.yaml: run it from the repository root ({REPO}), "
                   f"where config.yaml and the rules' relative paths are read (cd {REPO}; the -s option does not change that)")
    assert explain_workdir(REPO, REPO) is None


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
         # issue 62: what table3 needs, at once (it was "add it to that list", then a check naming one missing run)
         "target table3: table table3_transfer is not built by this configuration (build.tables in presets/cpu-demo.yaml does not name it); "
         "it reads 8 trained model(s) no run of this configuration makes (bert-base-uncased sbert on nli, bert-base-uncased sbert_paper on nli, "
         "bert-base-uncased simcse_sup on nli, bert-base-uncased simcse_paper on nli and 4 more): the paper grid trains them (run it without "
         "--configfile: GPU-sized, docs/cluster.md)"),
        # issue 38 item 2: a path of the paper grid's tree asked of a preset, which has its own
        (["results/tables/table1_sts.tex", "--configfile", "presets/cpu-demo.yaml"],
         "target results/tables/table1_sts.tex: this configuration writes under results/cpu-demo/ (results: results/cpu-demo in presets/cpu-demo.yaml); ask for results/cpu-demo/tables/table1_sts.tex"),
        (["results/cpu-demo/tables/table9.tex", "--configfile", "presets/cpu-demo.yaml"],
         "target results/cpu-demo/tables/table9.tex: unknown table 'table9'; valid: angle_flickr30k, angle_table2_nontransfer, angle_table3_ablation, angle_table4_llm, angle_transfer_sts, angle_transfer_tasks, released, released_mteb, released_transfer, study_batch, study_pooling, study_tau, study_weights, table1_sts, table2_indomain, table3_transfer, table4_ablation, table5_nli, table_gis_stats, table_mteb, table_train_time (config.yaml tables)"),
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


@pytest.mark.slow
def test_snakemake_from_a_subfolder_and_a_report_without_its_preset_are_named(tmp_path):
    """The Snakefile says these before Snakemake plans (issue 54): was "'backbones' is a required property
    (in presets/ci.yaml)" from a subfolder, and a thousand "Missing metadata" lines for the report."""
    work = copy_workflow(tmp_path / "wf")
    (work / "docs").mkdir(exist_ok=True)
    out = snakemake(work / "docs", "-n", "-s", "../Snakefile", "--configfile", "../presets/ci.yaml", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 1 and f"snakemake runs in {(work / 'docs').resolve()}, which has no config.yaml" in out.stdout, out.stdout[-2000:]
    out = snakemake(work, "--report", "results/ci/report.html", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 1 and "give --configfile presets/ci.yaml, the files the run was given" in out.stdout, out.stdout[-2000:]
    assert "Missing metadata" not in out.stdout


def test_every_configuration_has_its_own_results_tree():
    """Issue 38 item 2: a bare `snakemake recipe` after the demo overwrote the demo's RECIPE.md."""
    roots = {"config.yaml": read_yaml(REPO / "config.yaml")["results"]}
    for preset in sorted((REPO / "presets").glob("*.yaml")):
        roots[f"presets/{preset.name}"] = read_yaml(preset).get("results")
    assert roots["config.yaml"] == "results"
    assert all(root == f"results/{Path(name).stem}" for name, root in roots.items() if name != "config.yaml"), roots


def test_a_rule_with_wildcards_is_no_named_target(demo_config):
    """Issue 62: the named-target list offered train_model, which Snakemake refuses ("Target rules may not contain
    wildcards"); asked for, it names one of its outputs."""
    wildcard_rules = {"train_model": "results/cpu-demo/models/{backbone}/{objective}/{trainset}/seed{seed}", "evaluate_sts": "x"}
    why = explain_target("tabel2", demo_config, rule_names=RULES, wildcard_rules=wildcard_rules)
    assert why == "tabel2: no rule or output of that name; did you mean table2? named targets: all, table2, train (or a results/ path)"
    assert explain_target("train_model", demo_config, rule_names=RULES, wildcard_rules=wildcard_rules) == (
        "train_model: rule train_model makes one output per value of its wildcards, so it is no target: ask for one of its "
        "outputs (results/cpu-demo/models/{backbone}/{objective}/{trainset}/seed{seed}) or a named target: all, table2, train")


def test_a_table_the_configuration_can_build_by_naming_it_says_so(demo_config):
    """A table whose rows the runs train: naming it in build.tables is all it takes."""
    config = {**demo_config, "build": {**demo_config["build"], "tables": ["table1_sts"]}}
    assert explain_target("table2", config, rule_names=["all"]) == (
        "table2: table table2_indomain is not built by this configuration (build.tables does not name it); add it to that "
        "list to build it")


def test_job_counts_are_logged_once():
    """Issue 62: `-q rules` printed Snakemake's job counts twice; the filter passes the first table only."""
    import logging

    from aoe.plan.targets import _FirstJobCounts

    def record(stats):
        rec = logging.LogRecord("snakemake", logging.INFO, "", 0, "Job stats: ...", None, None)
        rec.event, rec.stats = "run_info", stats
        return rec

    once = _FirstJobCounts()
    other = logging.LogRecord("snakemake", logging.INFO, "", 0, "Reasons: ...", None, None)
    assert [once.filter(r) for r in (record({"all": 1}), other, record({"all": 1}), other)] == [True, True, False, True]


# -- a results tree belongs to the file that names it (issue 62, aoe.plan.trees) --------------------------------


@pytest.fixture
def demo_tree(tmp_path, monkeypatch, demo_config):
    """A working folder with the demo's preset, a finished-looking tree of it, and my.yaml: the preset copied with a
    new learning rate. Returns (the demo's config, my.yaml's config)."""
    import copy

    monkeypatch.chdir(tmp_path)
    (tmp_path / "presets").mkdir()
    text = (REPO / "presets" / "cpu-demo.yaml").read_text()
    (tmp_path / "presets" / "cpu-demo.yaml").write_text(text)
    (tmp_path / "my.yaml").write_text(text.replace("learning_rate: 5.0e-5", "learning_rate: 1.0e-4"))
    (tmp_path / "same.yaml").write_text(text)
    (tmp_path / "overlay.yaml").write_text("trainsets: {stsb: {train: {learning_rate: 1.0e-4}}}\n")
    (tmp_path / "results" / "cpu-demo" / "models").mkdir(parents=True)
    mine = copy.deepcopy(demo_config)
    mine["trainsets"]["stsb"]["train"]["learning_rate"] = 1e-4
    return demo_config, mine


GRID = str(REPO / "config.yaml")
REFUSED = ("results/cpu-demo/ is the tree of presets/cpu-demo.yaml ({how}); this run's my.yaml names it too, with other "
           "settings (1 value differs; first: trainsets.stsb.train.learning_rate is 0.0001 in this run, 5e-05 in the tree): "
           "give my.yaml its own results: (e.g. results: results/my); the models it trains as results/cpu-demo/ did are "
           "taken from there, not trained again")


def test_a_copied_preset_with_other_settings_is_refused_the_presets_tree(demo_tree):
    from aoe.plan.trees import RECORD, explain_tree, read_record, record_tree

    demo, mine = demo_tree
    assert record_tree(demo, [GRID, "presets/cpu-demo.yaml"]) is not None
    record = read_record("results/cpu-demo")
    assert (record["file"], record["settings"]["trainsets"]["stsb"]["train"]["learning_rate"]) == ("presets/cpu-demo.yaml", 5e-5)
    assert explain_tree(mine, [GRID, "my.yaml"]) == REFUSED.format(how=f"recorded in results/cpu-demo/{RECORD}")
    # a copy that changes nothing, the preset edited, --config values: allowed
    assert explain_tree(demo, [GRID, "same.yaml"]) is None
    assert explain_tree(mine, [GRID, "presets/cpu-demo.yaml"]) is None
    assert explain_tree(mine, [GRID, "presets/cpu-demo.yaml"], {"trainsets": {"stsb": {"train": {"learning_rate": 1e-4}}}}) is None
    # an overlay that names no tree is another list of files (issue 71): its rows went into the demo's tables, which
    # README command 1 then rewrote without them
    assert explain_tree(mine, [GRID, "presets/cpu-demo.yaml", "overlay.yaml"]) == REFUSED.format(
        how=f"recorded in results/cpu-demo/{RECORD}").replace("this run's my.yaml", "this run's presets/cpu-demo.yaml + overlay.yaml"
        ).replace("give my.yaml its own results: (e.g. results: results/my)", "give overlay.yaml its own results: (e.g. results: results/overlay)")
    # the tree named on the command line
    assert explain_tree(mine, [GRID], {"results": "results/cpu-demo"}) == REFUSED.format(
        how=f"recorded in results/cpu-demo/{RECORD}").replace("this run's my.yaml names it", "this run's config.yaml with --config results=... names it").replace(
        "give my.yaml its own results: (e.g. results: results/my)", "give it its own tree (--config results=results/NAME)")
    # the copy that changed nothing leaves the preset's record; the preset itself updates it
    assert record_tree(demo, [GRID, "same.yaml"]) is None and read_record("results/cpu-demo")["file"] == "presets/cpu-demo.yaml"
    assert record_tree(mine, [GRID, "presets/cpu-demo.yaml", "overlay.yaml"]) is None  # another list's: kept as it is
    record_tree(mine, [GRID, "presets/cpu-demo.yaml"], {"trainsets": {"stsb": {"train": {"learning_rate": 1e-4}}}})
    record = read_record("results/cpu-demo")
    assert (record["file"], record["configfiles"][1:]) == ("presets/cpu-demo.yaml", ["presets/cpu-demo.yaml"])
    assert record["settings"]["trainsets"]["stsb"]["train"]["learning_rate"] == 1e-4


def test_a_tree_from_before_the_records_is_presumed_its_presets(demo_tree, monkeypatch):
    """No configuration.json yet: the preset whose results: names the tree (or its recipe.json's run) owns it; a tree
    without outputs, or one nothing names, is the run's."""
    import json

    import aoe.plan.trees as trees

    demo, mine = demo_tree
    loaded = []
    monkeypatch.setattr(trees, "load_config", lambda repo, files: loaded.append(files) or demo)  # the preset's settings
    assert trees.explain_tree(mine, [GRID, "my.yaml"], repo=REPO) == REFUSED.format(
        how="presumed: its results: names it; no configuration.json yet")
    assert loaded == [["presets/cpu-demo.yaml"]]
    assert trees.explain_tree(demo, [GRID, "same.yaml"], repo=REPO) is None
    Path("results/cpu-demo/recipe.json").write_text(json.dumps({"configfiles": ["presets/cpu-demo.yaml", "overlay.yaml"]}))
    assert trees.explain_tree(mine, [GRID, "my.yaml"], repo=REPO) == REFUSED.format(
        how="presumed from its recipe.json; no configuration.json yet").replace(
        "presets/cpu-demo.yaml (", "presets/cpu-demo.yaml + overlay.yaml (")  # the tree of that run's whole list
    assert loaded[-1] == ["presets/cpu-demo.yaml", "overlay.yaml"]
    for name in ("models", "recipe.json"):
        Path("results/cpu-demo", name).rename(Path(name))
    assert trees.explain_tree(mine, [GRID, "my.yaml"], repo=REPO) is None  # nothing in the tree to overwrite
    mine = {**mine, "results": "results/mine"}
    Path("results/mine/tables").mkdir(parents=True)
    assert trees.explain_tree(mine, [GRID, "my.yaml"], repo=REPO) is None  # no preset names it: adopted


def test_the_same_files_named_absolute_are_the_same_owner(demo_tree):
    # Snakemake hands a run's config files over absolute; the record names them relative to the working folder
    from aoe.plan.trees import explain_tree, record_tree

    demo, mine = demo_tree
    record_tree(demo, [GRID, "presets/cpu-demo.yaml"])
    assert explain_tree(mine, [GRID, str(Path("presets/cpu-demo.yaml").resolve())]) is None  # an edited preset: its own tree

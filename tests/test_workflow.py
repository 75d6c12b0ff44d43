"""The workflow's DAG and its config checks, through real `snakemake -n` runs (seconds each)."""

from __future__ import annotations

import copy
import re
import sys
from collections import defaultdict
import textwrap
from pathlib import Path

import pytest
import yaml

from aoe.config.hparams import YAML_LOADER, read_yaml
from aoe.plan.check import check_config
from aoe.config.errors import ConfigError
from aoe.config.cells import Cell
from aoe.config.cell_settings import train_params
from aoe.config.rows import table_rows
from aoe.config.workflow import table_inputs
from tests.forkserver import forked_snakemake
from tests.workflow_utils import (MIRROR, REPO, TINY_OVERLAY, copy_workflow, dry_run_jobs, job_counts, needs_mirror, tiny_backbone_overlay,
                                  validated_config)

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()


def test_a_row_of_named_only_runs_must_name_its_seeds():
    from aoe.config.errors import ConfigError

    config = validated_config({"runs": [{"backbone": "bert-base-uncased", "trainset": "nli", "objectives": ["aoe"], "seeds": [42],
                                          "reruns": 5, "named_rows_only": True}],
                                "build": {"tables": ["table4_ablation"], "figures": [], "analyses": []}})
    config["tables"] = {"table4_ablation": {**config["tables"]["table4_ablation"], "rows": [
        {"backbone": "bert-base-uncased", "objective": "aoe", "label": "AoE"}]}}
    with pytest.raises(ConfigError, match="every run of 'aoe' on 'nli' is named_rows_only, so a row that names no seeds takes none"):
        check_config(config)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"runs": [{"backbone": "nope", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]}]}, "runs[0].backbone: unknown backbone 'nope'"),
        ({"runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoee"], "seeds": [1]}]}, "unknown objective 'aoee'"),
        ({"runs": [{"backbone": "minilm-l6", "trainset": "quora", "objectives": ["aoe"], "seeds": [1]}]}, "unknown train set 'quora'"),
        ({"trainsets": {"nli": {"split": "dev"}}}, "trainsets.nli: dataset 'allnli' has no split 'dev'"),
        ({"trainsets": {"mrpc": {"formats": ["pairs", "triplets"]}}}, "trainsets.mrpc.formats: mrpc provides ['pairs'], not ['triplets']"),
        ({"analysis": {"saturation": {"backbones": ["nope"]}}}, "analysis.saturation.backbones: unknown backbone 'nope'"),
        ({"tables": {"table5_nli": {"backbones": ["minilm-l6"]}}}, "tables.table5_nli: no run trains backbone 'minilm-l6'"),
        # a gold variant reads in-domain files only
        ({"tables": {"table4_ablation": {"rows": [{"backbone": "bert-base-uncased", "objective": "aoe", "eval_gold": "int"}]}}},
         "tables.table4_ablation.rows[0].eval_gold: a gold variant reads the by_gold of in-domain"),
        ({"tables": {"table2_x": {"kind": "stsb", "trainset": "stsb", "backbones": ["bert-base-uncased"], "objectives": ["aoe"]}},
          "build": {"tables": ["table2_indomain", "table2_x"]}}, "its target 'table2' is also the target of tables.table2_indomain"),
        ({"tables": {"table4_ablation": {"rows": [{"backbone": "bert-base-uncased", "objective": "aoe", "seeds": [7]}]}}}, "seeds [7] of 'aoe' on 'nli' are not trained"),
        ({"tables": {"table4_ablation": {"rows": [{"backbone": "bert-base-uncased", "objective": "aoe", "seeds": [43], "reruns": 3}]}}},
         "tables.table4_ablation.rows[0]: reruns 3 of 'aoe' on 'nli' seed 43, but the runs train it 1 time(s); give that run reruns: 3"),
        ({"objectives": {"aoe_pool_avg": {"base": "aoee"}}}, "objectives.aoe_pool_avg.base: unknown objective 'aoee'"),
    ],
)
def test_check_config_names_the_key(overrides, message):
    with pytest.raises(ConfigError) as err:
        check_config(validated_config(overrides))
    assert message in str(err.value)


def _ci_with_override(tmp_path, preset_text: str, *targets: str, mirror: Path | str | None = MIRROR):
    """The dry run of ``targets`` with the CI preset and ``preset_text`` over it, on a fresh copy."""
    work = copy_workflow(tmp_path / "wf")
    (work / "override.yaml").write_text(textwrap.dedent(preset_text))
    return dry_run(work, *targets, "--configfile", "presets/ci.yaml", "override.yaml", mirror=mirror)


# One case through the Snakefile: its other schema errors are the same call printing another message, each checked
# in process (tests/test_key_sources.py: 'median' test_a_bad_value_names_the_file_it_was_merged_from; tests/test_schema_check.py:
# max_steps -5 test_override_dictionaries_take_the_schema_of_what_they_override); its dry runs name the file of a schema error
# and of a cross-key one (test_a_dry_run_names_the_file_that_set_the_bad_value).
@pytest.mark.slow
@pytest.mark.parametrize(
    "text, line",
    [
        ("colour: blue\n", "config: colour: unknown key (in override.yaml); valid keys: analysis, backbones,"),
    ],
)
def test_schema_errors_are_one_line_before_planning(tmp_path, text, line):
    """The Snakefile checks the schema (aoe.plan.check, cases in tests/test_schema_check.py) before it plans."""
    out = _ci_with_override(tmp_path, text)
    assert out.returncode != 0
    assert line in out.stdout, out.stdout[-3000:]
    # the message, not the schema and config after it (3,534 lines before)
    assert len(out.stdout.splitlines()) < 30, out.stdout[-3000:]


@pytest.fixture(scope="module")
def ci_table2_plan(tmp_path_factory) -> tuple[Path, str]:
    """`snakemake -n table2` of the CI preset with the mirror (the per-table target: in-domain STS-B), once for the
    tests that read it: (work folder, its output)."""
    tmp = tmp_path_factory.mktemp("ci_table2")
    out = _ci_with_override(tmp, "{}\n", "table2")
    assert out.returncode == 0, out.stdout[-3000:]
    return tmp / "wf", out.stdout


@pytest.mark.slow
@needs_mirror
def test_one_table_plans_only_its_jobs(ci_table2_plan):
    _, stdout = ci_table2_plan
    # STS-B's train, dev and test files laid out, their tables (dev: the preset's select_split); one
    # trained model and the backbone, each scored on STS-B test only
    assert job_counts(stdout) == {
        "download_file": 3,
        "fetch_backbone": 1,
        "prepare_sts": 3,
        "tokenize": 1,
        "train_model": 1,
        "evaluate_indomain": 2,
        "table": 1,
        "table2": 1,
    }


# Issue 40: a preset names what it builds (build.*, lists a --configfile replaces whole); a table,
# figure or analysis added to config.yaml is built by the paper grid and by no preset that leaves it out.
_NEW_TABLE = {"kind": "stsb", "trainset": "stsb", "backbones": ["bert-base-uncased"], "objectives": ["aoe"]}  # a model the grid trains


def _with_new_table(config: dict) -> dict:
    """config.yaml as someone adding a table to the paper grid leaves it: defined and in build.tables."""
    config = copy.deepcopy(config)
    config["tables"]["table9_new"] = dict(_NEW_TABLE)
    config["build"]["tables"].append("table9_new")
    return config


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "presets").glob("*.yaml")))
def test_a_table_added_to_config_yaml_is_built_only_by_configurations_that_name_it(preset):
    from snakemake.utils import update_config

    from aoe.config.workflow import built_tables

    config = _with_new_table(yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER))
    assert "table9_new" in built_tables(config)
    text = yaml.load((REPO / "presets" / preset).read_text(), Loader=YAML_LOADER)
    update_config(config, text)
    if "tables" in text.get("build", {}):  # a preset building a selection of its own: not the new table
        assert "table9_new" not in built_tables(config) and list(built_tables(config)) == [
            t for t in config["tables"] if t in text["build"]["tables"]]
    else:  # an overlay of the paper grid builds what the grid builds
        assert "table9_new" in built_tables(config)


@pytest.mark.slow
@needs_mirror
def test_a_table_added_to_config_yaml_is_not_planned_by_a_preset(tmp_path):
    """The real `snakemake -n`: the CPU demo plans the same jobs after config.yaml gained a table."""
    work = copy_workflow(tmp_path / "wf")
    config = _with_new_table(yaml.load((work / "config.yaml").read_text(), Loader=YAML_LOADER))
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {"AOE_DATA_MIRROR": str(MIRROR)}
    out = snakemake(work, "-n", "--configfile", "presets/cpu-demo.yaml", env=env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "table9_new" not in out.stdout
    counts = job_counts(out.stdout)
    assert counts["table"] == 2 and counts["training_curves"] == 2, counts
    # asked for by name, it says which list leaves it out and, since it reads BERT-base models the demo does not
    # train, that the paper grid trains them (issue 62)
    out = snakemake(work, "-n", "table9_new", "--configfile", "presets/cpu-demo.yaml", env=env)
    assert out.returncode != 0
    assert ("target table9_new: table table9_new is not built by this configuration (build.tables in presets/cpu-demo.yaml "
            "does not name it); it reads 1 trained model(s) no run of this configuration makes (bert-base-uncased aoe on stsb): "
            "the paper grid trains them") in " ".join(out.stdout.split()), out.stdout[-3000:]


HEAVY = ("torch", "transformers", "matplotlib", "scipy.stats")
# `snakemake -n` as `python -m snakemake -n` runs it, printing at its exit which of HEAVY it imported
_PLAN_RECORDING_IMPORTS = (
    "import atexit, sys\n"
    f"atexit.register(lambda: (sys.stdout.flush(), print('\\nHEAVY', [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr, flush=True)))\n"
    "sys.argv = ['snakemake', '-n']\n"
    "from snakemake.cli import main\n"
    "main()\n"
)


@pytest.fixture(scope="module")
def paper_grid_plan(tmp_path_factory):
    """`snakemake -n all` of config.yaml without a mirror: (work folder, its output, the HEAVY modules it imported).
    One run for every reader: the plan, and what planning imports (recorded at its exit, taken off the output)."""
    import os

    from tests.workflow_utils import run_to_file

    tmp = tmp_path_factory.mktemp("paper")
    work = copy_workflow(tmp / "wf")
    rc, killed = run_to_file([sys.executable, "-c", _PLAN_RECORDING_IMPORTS], work, {**os.environ, "AOE_DATA_MIRROR": ""},
                             tmp / "plan.out", 900)
    stdout = (tmp / "plan.out").read_text(errors="replace")
    assert rc == 0 and not killed, stdout[-3000:]
    # the record: a line of its own after a newline of its own (the plan's output may not end in one), taken off
    stdout, heavy = stdout.rsplit("\nHEAVY ", 1)
    return work, stdout, "HEAVY " + heavy.strip()


@pytest.fixture(scope="module")
def paper_table2_plan(paper_grid_plan) -> str:
    """`snakemake -n table2` of the paper grid without a mirror: its output."""
    out = snakemake(paper_grid_plan[0], "-n", "table2", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    return out.stdout


# each count the README and docs/configuration.md state of a dry run: (file, the phrase with its numbers in groups)
DOCS_COUNTS = {
    "all": [
        ("README.md", r"snakemake -n all -q rules +# ([\d,]+) trainings in ([\d,]+) jobs \((\d+) of them evaluation-only variants\)"),
        ("docs/configuration.md", r"`snakemake -n all` plans ([\d,]+) trainings in ([\d,]+) jobs \((\d+) of them evaluation-only variants: "
                                  r"(\d+) `evaluate_sts_eval_pooling`, (\d+) `evaluate_transfer_eval_pooling`; ([\d,]+) model cards, "
                                  r"(\d+) training-curve figures; (\d+) tables"),
    ],
    "lines": [("README.md", r"a dry run prints every job \(([\d,]+) lines for the grid\)"),
              ("docs/configuration.md", r"it prints every job \(([\d,]+) lines\)")],
    "table2": [("README.md", r"\(`snakemake -n table2`: [^)]*: ([\d,]+) trainings in ([\d,]+) jobs")],
    # issue 71: docs/cluster.md's counts of the grid (its cost table's `all` row: trainings)
    "cluster": [("docs/cluster.md", r"now ([\d,]+) trainings in ([\d,]+) jobs"),
                ("docs/cluster.md", r"\| `all` \| ([\d,]+) \|")],
}


def _stated(key: str) -> list[tuple[str, list[int]]]:
    found = []
    for doc, phrase in DOCS_COUNTS[key]:
        match = re.search(phrase, re.sub(r"\s*\n\s*", " ", (REPO / doc).read_text()))
        assert match, f"{doc} no longer states {phrase!r}: update the doc or tests/test_workflow.py DOCS_COUNTS"
        found.append((doc, [int(g.replace(",", "")) for g in match.groups()]))
    return found


@pytest.mark.slow
def test_the_docs_counts_are_the_dry_runs(paper_grid_plan, paper_table2_plan):
    """Issue 62: the job and line counts the README and docs/configuration.md state are those of `snakemake -n`, read
    from the dry runs the other tests of this file make (no run of its own)."""
    stdout = paper_grid_plan[1]
    counts = job_counts(stdout)
    variants = counts["evaluate_sts_eval_pooling"] + counts["evaluate_transfer_eval_pooling"]
    grid = [counts["train_model"], sum(counts.values()), variants]
    full = [*grid, counts["evaluate_sts_eval_pooling"], counts["evaluate_transfer_eval_pooling"], counts["model_card"],
            counts["training_curves"], counts["table"]]
    expected = {"README.md": grid, "docs/configuration.md": full}
    wrong = [f"{doc}: states {numbers}, the dry run gives {expected[doc]}" for doc, numbers in _stated("all") if numbers != expected[doc]]
    lines = len(stdout.splitlines())
    wrong += [f"{doc}: states {numbers[0]} lines, the dry run prints {lines}" for doc, numbers in _stated("lines") if numbers[0] != lines]
    table2 = job_counts(paper_table2_plan)
    wrong += [f"{doc}: states table2's {numbers}, the dry run gives {[table2['train_model'], sum(table2.values())]}"
              for doc, numbers in _stated("table2") if numbers != [table2["train_model"], sum(table2.values())]]
    wrong += [f"{doc}: states {numbers}, the dry run gives {grid[:len(numbers)]}"
              for doc, numbers in _stated("cluster") if numbers != grid[:len(numbers)]]
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_full_paper_config_plans(paper_grid_plan, paper_table2_plan):
    work, stdout, _ = paper_grid_plan
    counts = job_counts(stdout)
    # no mirror: each published file is downloaded by a local rule (STS-B dev too: simcse_paper selects on it);
    # the whole grid is trained
    assert counts["download_file"] == 75 and counts["download_hub"] == 3 and counts["train_model"] == 364
    # the evaluation-only variant rows: AoE-BERT under the official NLI eval's cls_avg (Table 1), AnglE-BERT
    # under its training CLS (AnglE's transfer STS table), 5 seeds each, nothing retrained; and the released
    # AnglE-BERT checkpoint under 0.1.1's padded cls_avg (table released), once, and under the four other evaluations
    # that may have made 82.37 or 82.43 (issue 69 §4)
    assert counts["evaluate_sts_eval_pooling"] == 15
    # and on the transfer tasks: AnglE-BERT under its training CLS (AnglE's transfer-task table), AoE-BERT
    # under the official NLI eval's cls_avg (Table 3), 5 seeds each; the released AnglE-BERT under 0.1.1's
    # padded cls_avg (Table 3's AoE-BERT, issue 61), once
    assert counts["evaluate_transfer_eval_pooling"] == 11
    assert counts["table"] == len(validated_config()["build"]["tables"]) == len(validated_config()["tables"])
    # one table of the paper grid: AoE Table 2 trains only BERT on STS-B and GIS (5 objectives x seeds 42-46:
    # AoE from the NLI model, AoE at the reproduction report's recipe, AnglE's in-domain recipe, SBERT, SimCSE),
    # AoE from the NLI AnglE model of its seed (5 more), which it does not evaluate
    out = paper_table2_plan
    counts = job_counts(out)
    assert counts["train_model"] == 55 and counts["evaluate_indomain"] == 52 and "evaluate_sts" not in counts
    trains = {tuple(j["wildcards"][k] for k in ("objective", "trainset", "seed")): j["input"]
              for j in dry_run_jobs(out) if j["rule"] == "train_model"}
    # a seed's chain is its own: AoE on GIS with seed 45 starts from the NLI model of seed 45; the
    # baselines start from BERT as downloaded (angle-arxiv-a.txt l.134, l.173)
    assert "results/models/bert-base-uncased/angle_arxiv/nli/seed45" in trains[("aoe", "gis", "45")]
    assert not any(path.startswith("results/models/") for path in trains[("sbert", "gis", "45")])
    assert not any(path.startswith("results/models/") for path in trains[("angle_arxiv", "nli", "45")])


def test_pretrained_variants_embed_the_backbone_as_downloaded_another_way():
    """AnglE arXiv v2's LLaMA-2 7B -avg / -max / -last rows: the downloaded backbone (no training),
    without the prompt, each pooling its own cell beside the prompted last-token one."""
    from aoe.config.pretrained import pretrained_embedding

    config = validated_config()
    prompt = config["backbones"]["llama-2-7b"]["prompt"]
    assert pretrained_embedding(config, "llama-2-7b") == ("last", prompt)
    assert [pretrained_embedding(config, "llama-2-7b", v) for v in ("no_prompt_avg", "no_prompt_max", "no_prompt_last")] == [
        ("avg", None), ("max", None), ("last", None)]
    # a key the variant leaves out keeps the backbone's
    config["evaluation"]["pretrained_variants"]["prompted_avg"] = {"pooling": "avg"}
    assert pretrained_embedding(config, "llama-2-7b", "prompted_avg") == ("avg", prompt)
    rows = [r for r in table_rows(config, "angle_transfer_sts") if r.objective == "pretrained"]
    assert [c.path for r in rows for c in r.cells] == [
        f"llama-2-7b/pretrained/{v}/seed0" for v in ("none", "no_prompt_avg", "no_prompt_max", "no_prompt_last")]
    assert "results/eval/llama-2-7b/pretrained/no_prompt_max/seed0/sts.json" in table_inputs(config, "angle_transfer_sts")
    assert not any(c.trained for r in rows for c in r.cells)
    # target `evaluate` runs its suites on the backbone's own embedding; a variant only gets what its tables read
    from aoe.config.workflow import suite_results

    config["evaluation"]["suites"] = ["sts", "transfer"]
    files = suite_results(config)
    assert "results/eval/llama-2-7b/pretrained/none/seed0/transfer.json" in files
    assert "results/eval/llama-2-7b/pretrained/no_prompt_avg/seed0/sts.json" in files
    assert not any("no_prompt" in f and f.endswith("transfer.json") for f in files)


@pytest.mark.slow
def test_angle_transfer_sts_plans_the_unprompted_llama_rows(paper_grid_plan):
    """The arXiv v2 rows cost three STS evaluations of the one downloaded LLaMA-2 7B, on its evaluation resources."""
    work = paper_grid_plan[0]
    out = snakemake(work, "-n", "angle_transfer_sts", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    jobs = dry_run_jobs(out.stdout)
    pretrained = {j["wildcards"]["trainset"]: j for j in jobs
                  if j["rule"] == "evaluate_sts" and j["wildcards"]["objective"] == "pretrained"}
    assert sorted(pretrained) == ["no_prompt_avg", "no_prompt_last", "no_prompt_max", "none"]
    assert all(j["input"][0] == "results/backbones/llama-2-7b" and int(j["resources"]["mem_mb"]) == 48000
               for j in pretrained.values())
    assert [j["wildcards"]["backbone"] for j in jobs if j["rule"] == "fetch_backbone"].count("llama-2-7b") == 1


@pytest.mark.slow
def test_released_checkpoint_tables_plan(paper_grid_plan):
    """AoE Table 8's checkpoints: fetched once each by a local rule, evaluated as downloaded (no training),
    an adapter's evaluation on its base's backbone resources; UAE-Large-V1 through MTEB with its query prompt."""
    work = paper_grid_plan[0]
    out = snakemake(work, "-n", "released", "released_transfer", "released_mteb", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    assert counts["fetch_released"] == 5 and counts["evaluate_sts"] == 5 and counts["evaluate_transfer"] == 4
    assert counts["evaluate_mteb"] == 1 and "train_model" not in counts and "fetch_backbone" not in counts
    # AnglE-BERT's 82.37 row: the same downloaded checkpoint scored under 0.1.1's padded cls_avg, beside its sts.json;
    # and the other evaluations that may have made 82.37 or 82.43 (issue 69 §4: CLS, SentEval's other batch sizes,
    # 0.4.6's arithmetic), evaluation-only rows without a Δ
    jobs = dry_run_jobs(out.stdout)
    variants = sorted(j["wildcards"]["eval_pooling"] for j in jobs if j["rule"] == "evaluate_sts_eval_pooling")
    assert variants == ["cls", "cls_avg_batchsum", "cls_avg_padded", "cls_avg_padded-bs2", "cls_avg_padded-bs32"], variants
    pooled = next(j for j in jobs if j["rule"] == "evaluate_sts_eval_pooling" and j["wildcards"]["eval_pooling"] == "cls_avg_padded")
    assert pooled["wildcards"] == {"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-base-nli-v1",
                                   "seed": "0", "eval_pooling": "cls_avg_padded"}
    assert pooled["input"][0] == "results/released/angle-bert-base-nli-v1"
    assert "results/eval/bert-base-uncased/released/angle-bert-base-nli-v1/seed0/sts.pool-cls_avg_padded.json" in out.stdout
    sts = {j["wildcards"]["trainset"]: j for j in jobs if j["rule"] == "evaluate_sts"}
    assert sts["angle-llama-13b-nli"]["wildcards"]["backbone"] == "llama-2-13b"
    assert sts["angle-llama-13b-nli"]["input"][0] == "results/released/angle-llama-13b-nli"
    fetches = [j for j in jobs if j["rule"] == "fetch_released"]
    assert sorted(j["wildcards"]["checkpoint"] for j in fetches) == sorted(validated_config()["released"]["checkpoints"])


@pytest.mark.slow
def test_llm_supervised_table_plans_one_chain_per_generator(paper_grid_plan):
    """AnglE Table 4: LLaMA-2 7B and ChatGLM-6B each label the same sampled texts into their own table
    (one GPU job each, sized by the generator), BERT-base trains on each and on the self pairs."""
    work = paper_grid_plan[0]
    out = snakemake(work, "-n", "angle_table4_llm", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    counts = job_counts(out.stdout)
    assert counts["llm_sample_texts"] == 1 and counts["llm_generate"] == 2 and counts["llm_pairs"] == 2
    assert counts["train_model"] == 5 * (2 + 2 + 1) and counts["evaluate_sts"] == 25
    jobs = dry_run_jobs(out.stdout)
    generate = {j["wildcards"]["llmset"]: j for j in jobs if j["rule"] == "llm_generate"}
    assert set(generate) == {"stsb_llm", "stsb_llm_chatglm"}
    assert "results/backbones/chatglm-6b" in generate["stsb_llm_chatglm"]["input"]
    assert "results/backbones/llama-2-7b" in generate["stsb_llm"]["input"]
    assert all(int(j["resources"]["gpu"]) == 1 and int(j["resources"]["mem_mb"]) == 48000 for j in generate.values())
    trained = {(j["wildcards"]["objective"], j["wildcards"]["trainset"]) for j in jobs if j["rule"] == "train_model"}
    assert trained == {(o, t) for o in ("aoe", "angle_arxiv") for t in ("stsb_llm", "stsb_llm_chatglm")} | {("simcse_sup", "stsb_self")}


@pytest.mark.slow
def test_every_job_of_all_requests_the_memory_it_needs(paper_grid_plan):
    """SLURM's --mem of every model-loading job of the paper grid covers aoe.config.memory's host need,
    and each scales with its backbone (a LLaMA-2-13B STS job once asked for BERT's 16 GB)."""
    from aoe.config.memory import EVAL_TEXTS, host_need_gb

    stdout = paper_grid_plan[1]
    jobs = [j for j in dry_run_jobs(stdout) if "backbone" in j["wildcards"]]
    checked, short = defaultdict(int), []
    for job in jobs:
        rule, res, backbone = job["rule"], job["resources"], job["wildcards"]["backbone"]
        if rule not in EVAL_TEXTS and rule != "train_model":
            # tokenizers and downloads load no weights; any GPU job must be costed in aoe.config.memory
            assert "gpu" not in res, f"GPU rule {rule} has no host-memory model in aoe.config.memory.EVAL_TEXTS"
            continue
        need_mb = 1000 * host_need_gb(backbone, rule, int(res.get("gpu", 1)) if rule == "train_model" else 1)
        checked[rule] += 1
        if int(res["mem_mb"]) < need_mb:
            short.append(f"{rule} {backbone}: mem_mb {res['mem_mb']} < need {need_mb:.0f}")
    assert not short, "\n".join(short)
    assert checked["evaluate_sts"] > 200 and checked["train_model"] == 364 and checked["evaluate_mteb"] > 0
    requested = {(j["rule"], j["wildcards"]["backbone"]): int(j["resources"]["mem_mb"]) for j in jobs if j["rule"] == "evaluate_sts"}
    assert requested[("evaluate_sts", "llama-2-13b")] > requested[("evaluate_sts", "bert-base-uncased")]


@pytest.mark.slow
def test_workflow_passes_snakemake_lint(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "--lint", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0 and "good condition" in out.stdout, out.stdout[-3000:]


def test_workflow_is_snakefmt_clean():
    import subprocess

    # the module, not the console script: wheels installed with pip --target (the GPU machine's) have no scripts
    files = ["Snakefile", *sorted(str(p.relative_to(REPO)) for p in (REPO / "rules").glob("*.smk"))]
    out = subprocess.run([sys.executable, "-m", "snakefmt", "--check", *files], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_a_llama_cell_plans_a_4_gpu_training_job(paper_grid_plan):
    """Its training job as the paper grid's plan has it (a job's resources do not depend on the targets asked)."""
    stdout = paper_grid_plan[1]
    cell = {"backbone": "llama-2-7b", "objective": "aoe", "trainset": "nli", "seed": "42"}
    (resources,) = [j["resources"] for j in dry_run_jobs(stdout) if j["rule"] == "train_model" and j["wildcards"] == cell]
    # runtime auto (issue 71): its estimate at config.yaml's measured speed, times the margin, not a fixed 24 h
    from aoe.plan.cost import training_runtime_minutes

    config = validated_config()
    params = train_params(config, "llama-2-7b", "aoe", "nli", 42, job=True)
    minutes = training_runtime_minutes(params, "llama-2-7b", "nli", config["backbones"]["llama-2-7b"]["resources"])
    assert resources["gpu"] == "4" and resources["mem_mb"] == "128000" and resources["runtime"] == str(minutes)
    assert 60 < minutes < 1440, minutes
    assert "not implemented" not in stdout


def test_readme_commands():
    """README command 2 is what CI runs; command 1 shows a failed job's log; the report row names the run's config."""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme.split("## Quick start", 1)[1], flags=re.S)
    demo, tests = blocks[0].strip(), blocks[1].strip()
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in ci.splitlines(), "README command 2 must be the line .ci/run runs"
    assert "--show-failed-logs" in demo.split() and "--configfile presets/cpu-demo.yaml" in demo
    report = next(line for line in readme.splitlines() if "--report results/cpu-demo/report.html" in line)
    assert "--configfile presets/cpu-demo.yaml" in report


def test_documented_table_files_are_tables():
    """Every results/tables/<name>.tex a user is told about (README, docs/, CHANGELOG, SLURM profile, Snakefile,
    bench/'s READMEs) is a configured table."""
    names = set(read_yaml(REPO / "config.yaml")["tables"])
    for preset in (REPO / "presets").glob("*.yaml"):
        names |= set((read_yaml(preset) or {}).get("tables", {}))
    docs = sorted(str(path.relative_to(REPO)) for path in (REPO / "docs").glob("*.md"))
    assert docs, "no docs/*.md"
    bench = ["bench/README.md", *sorted(str(path.relative_to(REPO)) for path in (REPO / "bench").glob("*/*.md")
                                        if path.parent.name != "out")]
    for doc in ("README.md", "CHANGELOG.md", *docs, "slurm/config.yaml", "Snakefile", *bench):
        for name in re.findall(r"results/(?:[\w-]+/)?tables/(\w+)\.(?:tex|csv|md|json)", (REPO / doc).read_text()):
            assert name in names, f"{doc} names results/tables/{name}, which no table writes"


@pytest.mark.slow
@needs_mirror
def test_a_two_stage_cell_trains_from_its_start(tmp_path):
    """init: Snakemake trains the start first and the second stage starts from its weights."""
    import hashlib
    import json

    work = copy_workflow(tmp_path / "wf")
    # the chain, not the weights, is under test: a tiny random BERT, the last weights kept (no dev scoring)
    tiny_backbone_overlay(work, tmp_path / "tiny-bert")
    (work / "override.yaml").write_text(textwrap.dedent("""\
        trainsets:
          stsb:
            train: {max_steps: 2, batch_size: 8, checkpoint_every: 0, select_checkpoint: last, select_split: null}
          stsb_second:
            dataset: stsb
            split: train
            score_range: [0, 5]
            train: {init: {trainset: stsb, objective: aoe}, max_steps: 2, batch_size: 8, max_length: 64}
        """))
    target = "results/ci/models/minilm-l6/aoe/stsb_second/seed1"
    # one core: Snakemake sets a job's OMP_NUM_THREADS to its threads, and two torch threads spin-wait on a core the
    # other pytest worker or a background run holds (the batch study's test cost 3x its CPU so, tests/test_studies.py)
    out = snakemake(work, "--cores", "1", target, "--configfile", "presets/ci.yaml", TINY_OVERLAY, "override.yaml",
                    env={"AOE_DATA_MIRROR": str(MIRROR)})
    assert out.returncode == 0, out.stdout[-3000:]
    start = work / "results/ci/models/minilm-l6/aoe/stsb/seed1"
    record = json.loads((work / target / "aoe_config.json").read_text())
    assert record["init"]["model"] == "results/ci/models/minilm-l6/aoe/stsb/seed1"
    assert record["init"]["cell"] == json.loads((start / "aoe_config.json").read_text())["cell"]
    assert record["init"]["aoe_config_sha256"] == hashlib.sha256((start / "aoe_config.json").read_bytes()).hexdigest()
    assert record["provenance"]["init"] == "trainsets.stsb_second.train.init"
    assert record["train"]["init"] == {"trainset": "stsb", "objective": "aoe"}
    # the start itself trained from the backbone
    assert "init" not in json.loads((start / "aoe_config.json").read_text())


@pytest.mark.slow
def test_gpu_jobs_ask_for_one_node_a_backbones_partition_and_a_capped_runtime(tmp_path):
    """SLURM placement (issue 6, docs/cluster.md): the 4-GPU LLaMA training asks for one node (its one
    accelerate launch spans one node's GPUs; the plugin writes sbatch --nodes=1), a backbone's
    partition and constraint reach its GPU jobs only, and no job asks for more than its backbone's
    max_runtime (MTEB(eng, v1) on LLaMA-2 7B once asked for 8,640 minutes)."""
    work = copy_workflow(tmp_path / "wf")
    targets = ["results/models/llama-2-7b/aoe/nli/seed42", "results/models/bert-base-uncased/aoe/nli/seed42",
               "results/eval/llama-2-7b/aoe/nli/seed42/mteb.json", "results/eval/llama-2-13b/aoe/nli/seed42/mteb.json"]

    def plan(*args):
        out = snakemake(work, "-n", *targets, *args, env={"AOE_DATA_MIRROR": ""})
        assert out.returncode == 0, out.stdout[-3000:]
        return {(j["rule"], j["wildcards"].get("backbone")): j["resources"] for j in dry_run_jobs(out.stdout)}

    jobs = plan()
    llama = jobs["train_model", "llama-2-7b"]
    assert llama["nodes"] == "1" and llama["gpu"] == "4" and "tasks" not in llama
    assert jobs["train_model", "bert-base-uncased"]["nodes"] == "1"
    # nothing set: no partition or constraint of the workflow's own, the profile's default-resources decide
    assert not any("slurm_partition" in r or "constraint" in r for r in jobs.values())
    assert int(jobs["evaluate_mteb", "llama-2-7b"]["runtime"]) == 4320  # 180 min x 48, cut to 3 days
    assert int(jobs["evaluate_mteb", "llama-2-13b"]["runtime"]) == 4320
    # runtime auto (issue 71): the training's estimate at config.yaml's measured speed, times the margin, under the cap
    from aoe.plan.cost import training_runtime_minutes

    config = validated_config()
    params = train_params(config, "llama-2-7b", "aoe", "nli", 42, job=True)
    auto = training_runtime_minutes(params, "llama-2-7b", "nli", config["backbones"]["llama-2-7b"]["resources"])
    assert int(jobs["train_model", "llama-2-7b"]["runtime"]) == auto < 1440

    (work / "cluster.yaml").write_text(textwrap.dedent("""\
        backbones:
          llama-2-7b:
            resources: {partition: gpu-a100, constraint: "a100|h100", max_runtime: 10080}
        """))
    jobs = plan("--configfile", "cluster.yaml")
    llama = jobs["train_model", "llama-2-7b"]
    assert (llama["slurm_partition"], llama["constraint"], llama["nodes"]) == ("gpu-a100", "a100|h100", "1")
    assert jobs["evaluate_mteb", "llama-2-7b"]["slurm_partition"] == "gpu-a100"
    assert int(jobs["evaluate_mteb", "llama-2-7b"]["runtime"]) == 8640  # a 7-day MaxTime: the full request
    # another backbone's GPU jobs and the CPU jobs (tokenize) are not sent there
    assert "slurm_partition" not in jobs["train_model", "bert-base-uncased"]
    assert "constraint" not in jobs["evaluate_mteb", "llama-2-13b"]
    assert all("slurm_partition" not in r and "nodes" not in r for (rule, _), r in jobs.items() if rule == "tokenize")


def test_an_evaluation_pooling_is_the_cells_or_a_variant_rows_and_never_the_train_jobs():
    """Issue 36 point 1: AnglE-BERT on NLI is scored with 0.1.1's cls_avg (the official eval.py), AoE-BERT
    with its training CLS; each table that compares a BERT NLI row with the paper also shows the other
    evaluation of the same models, read from sts.pool-<pooling>.json, and no training changes."""
    from aoe.config.errors import ConfigError
    from aoe.config.cell_settings import cell_eval_pooling, train_params
    from aoe.config.workflow import suite_file, suite_results

    config = validated_config()
    angle, aoe = Cell("bert-base-uncased", "angle_arxiv", "nli", 42, 2), Cell("bert-base-uncased", "aoe", "nli", 42)
    assert cell_eval_pooling(config, angle) == "cls_avg_padded" and cell_eval_pooling(config, aoe) is None
    assert cell_eval_pooling(config, Cell("bert-base-uncased", "angle_arxiv", "stsb", 42)) is None
    assert "eval_pooling" not in train_params(config, "bert-base-uncased", "angle_arxiv", "nli", 42)
    assert suite_file("sts") == "sts.json" and suite_file("sts", "cls") == "sts.pool-cls.json"
    inputs = table_inputs(config, "table1_sts")
    assert "results/eval/bert-base-uncased/aoe/nli/seed46/sts.pool-cls_avg_batchsum.json" in inputs
    assert "results/eval/bert-base-uncased/aoe/nli/seed46/sts.json" in inputs
    variant = [r for r in table_rows(config, "angle_transfer_sts") if r.eval_pooling]
    assert [(r.objective, r.eval_pooling, r.seeds) for r in variant] == [
        ("released", "cls_avg_padded", (0,)), ("angle_arxiv", "cls", (42, 43, 44, 45, 46))]
    assert "results/eval/bert-base-uncased/angle_arxiv/nli/seed42/sts.pool-cls.json" in table_inputs(config, "angle_transfer_sts")
    # a released checkpoint's row too: AnglE-BERT's 82.37 is scored as 0.1.1's eval.py scored it, the
    # checkpoint's own masked cls_avg (sts.json) a variant row beside it; no cell-level pooling for it
    released = [(r.label, r.eval_pooling) for r in table_rows(config, "released") if r.trainsets == ("angle-bert-base-nli-v1",)]
    assert released[:2] == [("SeanLee97/angle-bert-base-uncased-nli-en-v1", "cls_avg_padded"),
                            ("SeanLee97/angle-bert-base-uncased-nli-en-v1 (evaluated cls_avg, masked)", "")]
    # the candidate evaluations of 82.37 / 82.43 (issue 69 §4): CLS, 0.1.1's padded cls_avg at SentEval batches 32 and 2, 0.4.6's
    assert [p for _, p in released[2:]] == ["cls", "cls_avg_padded-bs32", "cls_avg_padded-bs2", "cls_avg_batchsum"]
    assert cell_eval_pooling(config, Cell("bert-base-uncased", "released", "angle-bert-base-nli-v1", 0)) is None
    ckpt = "results/eval/bert-base-uncased/released/angle-bert-base-nli-v1/seed0/"
    assert {ckpt + "sts.pool-cls_avg_padded.json", ckpt + "sts.json"} <= set(table_inputs(config, "released"))
    assert ckpt + "sts.pool-cls_avg_padded.json" in suite_results(config)  # target evaluate builds it too
    assert not any(".pool-" in f for f in table_inputs(config, "released_transfer"))
    # only an STS or transfer table's trained or released row takes one
    bad = copy.deepcopy(config)
    flickr = {k: v for k, v in bad["tables"]["angle_flickr30k"].items() if k not in ("backbones", "objectives", "paper")}
    bad["tables"]["angle_flickr30k"] = {**flickr, "rows": [{"backbone": "bert-base-uncased", "objective": "angle_arxiv", "eval_pooling": "cls"}]}
    with pytest.raises(ConfigError, match=r"tables.angle_flickr30k.rows\[0\].eval_pooling: .*table kind 'flickr30k'"):
        check_config(bad)


def test_a_transfer_evaluation_pooling_is_the_cells_or_a_variant_rows():
    """Issue 36: the transfer suite follows the cell's eval_pooling as the STS suite does (the official eval.py
    scores both with one --pooling_strategy): AnglE-BERT on NLI's transfer.json is 0.1.1's padded cls_avg, its
    training CLS a variant row (transfer.pool-cls.json); AoE-BERT's Table 3 row keeps CLS beside the official
    NLI eval's cls_avg (transfer.pool-cls_avg_batchsum.json); every run of the rows, nothing retrained."""
    from aoe.config.workflow import EVAL_POOLING_SUITES, suite_file, suite_results

    config = validated_config()
    assert EVAL_POOLING_SUITES == ("sts", "transfer") and suite_file("transfer", "cls") == "transfer.pool-cls.json"
    angle = table_inputs(config, "angle_transfer_tasks")
    run = "results/eval/bert-base-uncased/angle_arxiv/nli/seed{}/transfer{}.json"
    for seed in (42, 43, 46):
        assert run.format(seed, "") in angle and run.format(seed, ".pool-cls") in angle
    assert [(r.label, r.eval_pooling, len(r.seeds)) for r in table_rows(config, "angle_transfer_tasks") if r.objective == "angle_arxiv"] == [
        ("AnglE-BERT", "", 5), ("AnglE-BERT (evaluated cls)", "cls", 5)]
    # AnglE-LLaMA: the October 2023 command's aoe cell, ACL's AoE-LLaMA cell too
    assert [(r.backbone, r.label) for r in table_rows(config, "angle_transfer_tasks") if r.objective == "aoe"] == [
        ("llama-2-7b", "AnglE-LLaMA (Oct-2023 command)")]
    table3 = table_inputs(config, "table3_transfer")
    assert "results/eval/bert-base-uncased/aoe/nli/seed46/transfer.pool-cls_avg_batchsum.json" in table3
    assert "results/eval/bert-base-uncased/aoe/nli/seed46/transfer.json" in table3
    assert "results/eval/bert-base-uncased/angle_arxiv/nli/seed46/transfer.json" in table3  # ACL's AoE-BERT's cell (issue 61)
    # the 2024 recipe's five cls_avg_batchsum files, the released AnglE-BERT's 0.1.1 cls_avg, and the arXiv-era cell's
    # five CLS files (its t-test row beside the CLS-scored baselines, issue 69: angle_transfer_tasks's files, nothing new)
    assert sum(".pool-" in f for f in table3) == 11 and sum(".pool-" in f for f in angle) == 5
    assert {f for f in table3 if "angle_arxiv" in f and ".pool-cls." in f} == {f for f in angle if ".pool-cls." in f}
    assert set(angle) | set(table3) <= set(suite_results(config))  # target evaluate builds them too
    # the pool files are evaluation-only: the model folders they read are the cells' own
    assert "eval_pooling" not in train_params(config, "bert-base-uncased", "aoe", "nli", 42)


@pytest.mark.slow
def test_planning_the_paper_grid_imports_no_heavy_library(paper_grid_plan):
    """Planning runs on every snakemake call (and on the cluster's login node): the paper grid's plan
    imports none of torch, transformers, matplotlib or scipy.stats (scipy.stats alone took ~1 s).
    Read from the plan the other tests read (paper_grid_plan records what it imported)."""
    _, stdout, heavy = paper_grid_plan
    assert heavy == "HEAVY []", heavy
    assert job_counts(stdout)["train_model"] > 200


def test_a_download_job_imports_no_data_library():
    """60 of the CI preset's 124 jobs are downloads: what their script imports (its log, the download) leaves
    pandas, numpy and torch out (pandas alone was 0.6 of its 1.1 CPU-seconds; bench/speed/job_startup.py), and
    requests, which only a download from upstream needs (the script's imports 0.184 CPU-seconds with it, 0.126 without)."""
    import ast
    import subprocess

    tree = ast.parse((REPO / "workflow_scripts" / "download_file.py").read_text())
    modules = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module.startswith("aoe")]
    assert modules == ["aoe.util.joblog", "aoe.data.download"], modules
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print([m for m in ('pandas', 'numpy', 'torch', 'requests') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.slow
@needs_mirror
def test_a_moved_results_tree_plans_nothing_new(ci_table2_plan):
    """No planned input names the workflow folder's absolute path: Snakemake records a job's input set, so the
    package modules a table job reads, given as absolute paths, replanned 17 rendering jobs of the CI preset's
    finished tree once it was moved (issue 53's second sweep, D7)."""
    work, stdout = ci_table2_plan
    work = str(work.resolve())
    tables = [j for j in dry_run_jobs(stdout) if j["rule"] == "table"]
    assert tables and "aoe/results/tables.py" in tables[0]["input"]
    assert not [i for j in dry_run_jobs(stdout) for i in j["input"] if i.startswith(work)]

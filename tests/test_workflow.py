"""The workflow's DAG and its config checks, through real `snakemake -n` runs (seconds each)."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from aoe.workflow import Cell, ConfigError, check_config, eval_cells, run_cells, table_cells, train_params
from tests.workflow_utils import REPO, copy_workflow, mirror_path, snakemake

MIRROR = mirror_path()
needs_mirror = pytest.mark.skipif(MIRROR is None, reason="data mirror (AOE_DATA_MIRROR or ../shared/data) not found")


def _validated_config(overrides: dict | None = None) -> dict:
    """config.yaml (+ overrides) with the schema defaults filled, as the workflow sees it."""
    from snakemake.utils import update_config, validate

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    update_config(config, overrides or {})
    validate(config, str(REPO / "schemas" / "config.schema.yaml"))
    return config


def test_cells_of_the_paper_grid():
    config = _validated_config()
    cells = run_cells(config)
    assert [c.seed for c in cells] == [42, 43, 44, 45, 46]
    assert all(c.path.startswith("bert-base-uncased/aoe/stsb/seed") for c in cells)
    assert Cell("bert-base-uncased", "pretrained", "none", 0) in table_cells(config, "table2_stsb")
    assert len(eval_cells(config)) == 6


def test_train_params_merge_trainset_backbone_and_objective():
    config = _validated_config({"backbones": {"bert-base-uncased": {"train_overrides": {"learning_rate": 1e-5}}}})
    params = train_params(config, "bert-base-uncased", "aoe", "stsb", 43)
    assert params["learning_rate"] == 1e-5  # backbone override wins over the train set's 2e-5
    assert params["batch_size"] == 32 and params["seed"] == 43 and params["pooling"] == "cls"
    assert params["objective_overrides"]["contrastive_threshold"] == 0.8
    assert params["objective_overrides"]["weights"] == {"angle": 1.0, "contrastive": 1.0}
    from aoe.train import TrainConfig

    TrainConfig(**params)  # every resolved key is a TrainConfig field


def test_nli_recipe_is_the_official_one():
    config = _validated_config()
    params = train_params(config, "bert-base-uncased", "aoe", "nli", 42)
    assert params["objective_overrides"]["weights"] == {"angle": 1.0, "contrastive": 30.0}  # ibn_w 30, angle_w 1
    assert params["learning_rate"] == 5e-5 and params["max_length"] == 128 and params["warmup_steps"] == 50
    assert params["format"] == "pairs"
    # other objectives on NLI keep their own weights and pick their own format
    assert "weights" not in train_params(config, "bert-base-uncased", "sbert", "nli", 42)["objective_overrides"]
    assert train_params(config, "bert-base-uncased", "sbert", "nli", 42)["format"] == "nli3"
    assert train_params(config, "bert-base-uncased", "simcse_sup", "nli", 42)["format"] == "triplets"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"runs": [{"backbone": "nope", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]}]}, "runs[0].backbone: unknown backbone 'nope'"),
        ({"runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoee"], "seeds": [1]}]}, "unknown objective 'aoee'"),
        ({"runs": [{"backbone": "minilm-l6", "trainset": "quora", "objectives": ["aoe"], "seeds": [1]}]}, "unknown train set 'quora'"),
        ({"trainsets": {"nli": {"split": "dev"}}}, "trainsets.nli: dataset 'allnli' has no split 'dev'"),
        ({"trainsets": {"mrpc": {"formats": ["pairs", "triplets"]}}}, "trainsets.mrpc.formats: mrpc provides ['pairs'], not ['triplets']"),
        ({"analysis": {"saturation": {"backbones": ["nope"]}}}, "analysis.saturation.backbones: unknown backbone 'nope'"),
        ({"tables": {"table2_stsb": {"backbones": ["minilm-l6"]}}}, "tables.table2_stsb: no run trains backbone 'minilm-l6'"),
    ],
)
def test_check_config_names_the_key(overrides, message):
    with pytest.raises(ConfigError) as err:
        check_config(_validated_config(overrides))
    assert message in str(err.value)


def _dry_run(tmp_path, preset_text: str, *targets: str, env: dict | None = None):
    work = copy_workflow(tmp_path / "wf")
    (work / "override.yaml").write_text(textwrap.dedent(preset_text))
    env = {"AOE_DATA_MIRROR": str(MIRROR) if MIRROR else "", **(env or {})}
    return snakemake(work, *targets, "-n", "--configfile", "presets/ci.yaml", "override.yaml", env=env)


@pytest.mark.parametrize(
    "text, names",
    [
        ("trainsets:\n  stsb:\n    train:\n      lerning_rate: 0.1\n", "lerning_rate"),
        ("evaluation:\n  sts:\n    batch_size: big\n", "batch_size"),
        ("backbones:\n  minilm-l6:\n    pooling: median\n", "median"),
        ("colour: blue\n", "colour"),
    ],
)
def test_schema_rejects_unknown_keys_and_wrong_types(tmp_path, text, names):
    out = _dry_run(tmp_path, text)
    assert out.returncode != 0
    assert names in out.stdout, out.stdout[-3000:]


def test_bad_mirror_is_named(tmp_path):
    out = _dry_run(tmp_path, "{}\n", env={"AOE_DATA_MIRROR": str(tmp_path / "no-such-mirror")})
    assert out.returncode != 0
    assert "no-such-mirror" in out.stdout and "does not exist" in out.stdout


@needs_mirror
def test_missing_mirror_file_is_named(tmp_path):
    # a mirror with STS-B's test file missing: the DAG must name that file
    fake = tmp_path / "mirror" / "senteval" / "downstream"
    for sub in ("STS", "SICK"):
        (fake / sub).mkdir(parents=True)
        for child in (MIRROR / "senteval" / "downstream" / sub).iterdir():
            if child.name != "STSBenchmark":
                (fake / sub / child.name).symlink_to(child)
    bench = fake / "STS" / "STSBenchmark"
    bench.mkdir()
    for name in ("sts-train.csv", "sts-dev.csv"):
        (bench / name).symlink_to(MIRROR / "senteval" / "downstream" / "STS" / "STSBenchmark" / name)
    out = _dry_run(tmp_path, "{}\n", env={"AOE_DATA_MIRROR": str(tmp_path / "mirror")})
    assert out.returncode != 0
    assert "STSBenchmark/sts-test.csv" in out.stdout


@needs_mirror
def test_one_table_plans_only_its_jobs(tmp_path):
    out = _dry_run(tmp_path, "{}\n", "table2")  # the per-table target
    assert out.returncode == 0, out.stdout[-3000:]
    stats = out.stdout.split("Job stats:")[1]
    # STS-B training set + 7 test tables; one trained model + the pretrained backbone
    assert "prepare_sts           8" in stats and "train                 1" in stats
    assert "evaluate_sts          2" in stats and "table                 1" in stats
    assert "table2                1" in stats and "gis" not in stats and "saturation" not in stats


def test_full_paper_config_plans(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "-n", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0, out.stdout[-3000:]
    # no mirror: the SentEval archive is downloaded by a local rule; 5 seeds of BERT-base
    assert "download_senteval        1" in out.stdout
    assert "train                    5" in out.stdout


def test_workflow_passes_snakemake_lint(tmp_path):
    work = copy_workflow(tmp_path / "wf")
    out = snakemake(work, "--lint", env={"AOE_DATA_MIRROR": ""})
    assert out.returncode == 0 and "good condition" in out.stdout, out.stdout[-3000:]

"""aoe.configcheck: a config that breaks the schema fails in one line naming the key, its file and the fix;
one that breaks a cross-key check fails through the same start-up call (complete_config, load_config).

In-process cases for every kind of problem; tests/test_workflow.py runs the Snakefile on a few
of them to show the workflow calls the check before anything is planned.
"""

from __future__ import annotations

import pytest
import yaml
from snakemake.utils import update_config

from aoe.configcheck import CHECKS, check_schema, load_config
from aoe.workflow import ConfigError
from tests.workflow_utils import REPO

SCHEMA = REPO / "schemas" / "config.schema.yaml"


def _check(tmp_path, override: dict) -> str:
    """check_schema on config.yaml + presets/ci.yaml + ``override`` (written to override.yaml); the error line."""
    files = [REPO / "config.yaml", REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"]
    files[-1].write_text(yaml.safe_dump(override))
    config = {}
    for file in files:
        update_config(config, yaml.safe_load(file.read_text()))
    with pytest.raises(ConfigError) as err:
        check_schema(config, SCHEMA, files)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_the_shipped_configs_pass():
    for preset in [None, *sorted((REPO / "presets").glob("*.yaml"))]:
        config = yaml.safe_load((REPO / "config.yaml").read_text())
        if preset is not None:
            update_config(config, yaml.safe_load(preset.read_text()))
        check_schema(config, SCHEMA, [REPO / "config.yaml"])


def test_unknown_top_level_key(tmp_path):
    message = _check(tmp_path, {"colour": "blue"})
    assert message.startswith(f"colour: unknown key (in {tmp_path / 'override.yaml'}); valid keys: analysis, backbones,"), message


def test_unknown_nested_key_and_bad_value(tmp_path):
    message = _check(tmp_path, {"trainsets": {"stsb": {"train": {"lerning_rate": 0.1}}}})
    assert message.startswith("trainsets.stsb.train.lerning_rate: unknown key (in "), message
    assert "learning_rate" in message.split("valid keys:")[1]
    message = _check(tmp_path, {"evaluation": {"sts": {"batch_size": "big"}}})
    assert message.startswith("evaluation.sts.batch_size: 'big' is not of type 'integer' (in "), message


@pytest.mark.parametrize(
    "override, start",
    [
        # typos: named where they stand, with the keys they could have meant
        ({"backbones": {"minilm-l6": {"train_overrides": {"max_step": 10}}}}, "backbones.minilm-l6.train_overrides.max_step: unknown key (in "),
        ({"backbones": {"minilm-l6": {"train_overrides": {"max_step": 10, "lerning_rate": 1.0}}}}, "backbones.minilm-l6.train_overrides: unknown keys lerning_rate, max_step (in "),
        # values the same keys under trainsets.*.train refuse
        ({"backbones": {"minilm-l6": {"train_overrides": {"max_steps": -5}}}}, "backbones.minilm-l6.train_overrides.max_steps: -5 is less than the minimum of 0"),
        ({"backbones": {"minilm-l6": {"train_overrides": {"learning_rate": -1.0}}}}, "backbones.minilm-l6.train_overrides.learning_rate: -1.0 is less than or equal to the minimum of 0"),
        ({"trainsets": {"stsb": {"objective_overrides": {"contrastive_treshold": 0.8}}}}, "trainsets.stsb.objective_overrides.contrastive_treshold: unknown key"),
        ({"trainsets": {"stsb": {"objective_settings": {"aoe": {"angle_tau": 0}}}}}, "trainsets.stsb.objective_settings.aoe.angle_tau: 0 is less than or equal to the minimum of 0"),
        ({"backbones": {"minilm-l6": {"objective_settings": {"stsb": {"aoe": {"weights": {"angel": 1}}}}}}}, "backbones.minilm-l6.objective_settings.stsb.aoe.weights.angel: unknown key"),
        ({"objectives": {"sbert": {"by_format": {"pairs": {"cosine_mse": "one"}}}}}, "objectives.sbert.by_format.pairs.cosine_mse: 'one' is not of type 'number'"),
        ({"llm_supervised": {"generators": {"stsb_llm_chatglm": {"backbone": "chatglm-6b", "generation": {"temprature": 0.9}}}}},
         "llm_supervised.generators.stsb_llm_chatglm.generation.temprature: unknown key"),
        ({"llm_supervised": {"generators": {"stsb_llm_chatglm": {"backbone": "chatglm-6b", "generation": {"top_p": 1.5}}}}},
         "llm_supervised.generators.stsb_llm_chatglm.generation.top_p: 1.5 is greater than the maximum of 1"),
    ],
)
def test_override_dictionaries_take_the_schema_of_what_they_override(tmp_path, override, start):
    message = _check(tmp_path, override)
    assert message.startswith(start), message
    assert str(tmp_path / "override.yaml") in message and "takes the keys of" in message


# One config per cross-key check of aoe.configcheck.CHECKS that only it refuses: config.yaml with
# the override merged over it, and the start of the message. A new check needs a case here.
CROSS_KEY_CASES = {
    "check_objectives": ({"objectives": {"aoe_pool_avg": {"base": "aoee"}}}, "objectives.aoe_pool_avg.base: unknown objective 'aoee'"),
    "check_runs": (
        {"runs": [{"backbone": "minilm-l6", "trainset": "quora", "objectives": ["aoe"], "seeds": [1]}]},
        "runs[0].trainset: unknown train set 'quora'",
    ),
    "check_backbones": (
        {"backbones": {"minilm-l6": {"prompt": "no placeholder"}}},
        "backbones.minilm-l6.prompt: prompt template 'no placeholder' has no {text} placeholder",
    ),
    "check_trainsets": ({"trainsets": {"stsb": {"score_range": [5.0, 0.0]}}}, "trainsets.stsb.score_range: must be increasing, got [5.0, 0.0]"),
    "check_inits": (
        {"trainsets": {"stsb": {"train": {"init": {"trainset": "nil"}}}}},
        "trainsets.stsb.train.init.trainset: unknown train set 'nil'",
    ),
    "check_saturation": ({"analysis": {"saturation": {"backbones": ["nope"]}}}, "analysis.saturation.backbones: unknown backbone 'nope'"),
    "check_table_targets": (
        {"tables": {"train": {"kind": "stsb", "trainset": "stsb", "backbones": ["bert-base-uncased"], "objectives": ["aoe"]}}},
        "tables.train: its target 'train' is the name of a workflow rule",
    ),
    "check_released": (
        {"released": {"checkpoints": {"uae-large-v1": {"backbone": "bert-huge"}}}},
        "released.checkpoints.uae-large-v1.backbone: unknown backbone 'bert-huge'",
    ),
    "check_pretrained_variants": (
        {"evaluation": {"pretrained_variants": {"prompted_avg": {"pooling": "avg", "prompt": "Sentence:"}}}},
        "evaluation.pretrained_variants.prompted_avg.prompt: prompt template 'Sentence:' has no {text} placeholder",
    ),
    "check_tables": (
        {"tables": {"table2_indomain": {"backbones": ["minilm-l6"]}}},
        "tables.table2_indomain: no run trains backbone 'minilm-l6' with objective",
    ),
    "check_llm_supervised": (
        {"llm_supervised": {"generators": {"stsb_llm": {"backbone": "no-such-model"}}}},
        "llm_supervised.generators.stsb_llm.backbone: unknown backbone 'no-such-model'",
    ),
    # the schema's enum refuses an unknown name first: drop a task from the code to reach the check
    "check_mteb": ({"evaluation": {"mteb": {"local_tasks": ["TRECLocal"]}}}, "evaluation.mteb.local_tasks: unknown local MTEB task(s) ['TRECLocal']"),
    "check_figures": (
        {"figures": {"gradients": {"model": {"backbone": "bert-huge"}}}},
        "figures.gradients.model: unknown backbone 'bert-huge'",
    ),
}


def test_every_cross_key_check_has_a_case():
    assert sorted(CROSS_KEY_CASES) == sorted(check.__name__ for check in CHECKS)


@pytest.mark.parametrize("check", sorted(CROSS_KEY_CASES))
def test_complete_config_runs_each_cross_key_check(tmp_path, monkeypatch, check):
    """load_config (complete_config, what rules/common.smk calls at start-up) refuses each case with its check's line."""
    override, start = CROSS_KEY_CASES[check]
    if check == "check_mteb":
        from aoe.evaluate import mteb_eval

        monkeypatch.delitem(mteb_eval.LOCAL_TASKS, "TRECLocal")
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    message = str(err.value)
    assert message.startswith(start) and "\n" not in message, message


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"gis": {"train": {"init": {"trainset": "nli", "objective": "anglee"}}}}},
         "trainsets.gis.train.init.objective: unknown objective 'anglee'"),
        # QLoRA adapters train on the quantized base: a full model as the start cannot be loaded into it
        ({"backbones": {"llama-2-7b": {"train_overrides": {"init": {"trainset": "stsb"}}}}},
         "backbones.llama-2-7b.train_overrides.init: cell llama-2-7b/aoe/nli/seed42 fine-tunes with 'qlora'"),
        # nli/angle_arxiv would start from stsb/angle_arxiv, which starts from nli/angle_arxiv
        ({"trainsets": {"nli": {"train": {"init": {"trainset": "stsb", "objective": "angle_arxiv"}}}}},
         "trainsets.stsb.train.init: the starts form a cycle: bert-base-uncased/angle_arxiv/nli/seed42 starts from "
         "bert-base-uncased/angle_arxiv/stsb/seed42 starts from bert-base-uncased/angle_arxiv/nli/seed42"),
        ({"trainsets": {"stsb_llm": {"train": {"init": {"objective": "aoe"}}}}},
         "trainsets.stsb_llm.train.init: 'trainset' is a required property"),
    ],
)
def test_a_trained_start_is_checked_at_planning_time(tmp_path, override, start):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(start), str(err.value)


def test_load_config_passes_the_shipped_configs():
    for preset in [None, *sorted((REPO / "presets").glob("*.yaml"))]:
        config = load_config(REPO, [preset] if preset else [])
        assert config["evaluation"]["sts"]["batch_size"] >= 1  # a schema default filled in


@pytest.mark.parametrize(
    "override, start",
    [
        ({"released": {"checkpoints": {"nli": {"hf_id": "x/y", "backbone": "bert-base-uncased", "pooling": "cls"}}}},
         "released.checkpoints.nli: the name is also a train set's"),
        ({"released": {"checkpoints": {"angle-llama-13b-nli": {"base": {"hf_id": ""}}}}},
         "released.checkpoints.angle-llama-13b-nli.base: an adapter needs the model it was trained on"),
        ({"tables": {"released": {"rows": [{"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-nli"}]}}},
         "tables.released.rows[0]: 'angle-bert-nli' is not a checkpoint of released.checkpoints"),
        ({"tables": {"released": {"rows": [{"backbone": "llama-2-7b", "objective": "released", "trainset": "angle-llama-13b-nli"}]}}},
         "tables.released.rows[0]: checkpoint 'angle-llama-13b-nli' is evaluated as backbone 'llama-2-13b'"),
        # the variant's name is the cell's third folder, where a train set's name also goes
        ({"evaluation": {"pretrained_variants": {"nli": {"pooling": "avg"}}}},
         "evaluation.pretrained_variants.nli: the name is also a train set's"),
        ({"evaluation": {"pretrained_variants": {"uae-large-v1": {"pooling": "avg"}}}},
         "evaluation.pretrained_variants.uae-large-v1: the name is also a released checkpoint's"),
        ({"evaluation": {"pretrained_variants": {"avg": {"pooling": "mean"}}}},
         "evaluation.pretrained_variants.avg.pooling: 'mean' is not one of"),
        ({"evaluation": {"pretrained_variants": {"avg": {}}}},
         "evaluation.pretrained_variants.avg: {} should be non-empty"),
        ({"tables": {"angle_transfer_sts": {"rows": [{"backbone": "llama-2-7b", "objective": "pretrained", "variant": "no_prompt_mean"}]}}},
         "tables.angle_transfer_sts.rows[0].variant: 'no_prompt_mean' is not an evaluation.pretrained_variants entry"),
        ({"tables": {"angle_transfer_sts": {"rows": [{"backbone": "bert-base-uncased", "objective": "angle_arxiv", "variant": "no_prompt_avg"}]}}},
         "tables.angle_transfer_sts.rows[0].variant: only a pretrained row takes a variant"),
    ],
)
def test_models_evaluated_as_downloaded_are_checked_at_planning_time(tmp_path, override, start):
    """Released checkpoints and pretrained variants: names, sources and the table rows that use them."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(start), str(err.value)


def test_a_preset_giving_backbones_to_a_table_of_rows_is_refused(tmp_path):
    """Snakemake merges a preset's table into config.yaml's key by key: backbones/objectives given to
    table1_sts (rows in config.yaml) would silently lose to those rows; the check names the table."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(
        {"tables": {"table1_sts": {"backbones": ["minilm-l6"], "objectives": ["aoe"]}}}))
    with pytest.raises(ConfigError, match=r"^tables\.table1_sts: has both rows and backbones/objectives .*must give rows$"):
        load_config(REPO, [tmp_path / "override.yaml"])

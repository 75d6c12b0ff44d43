"""aoe.plan.schema_check: a config that breaks the schema fails in one line naming the key, its file and the fix,
the override dictionaries against the schema of what they override, text the schema takes as a number read as one,
the defaults filled in as Snakemake's validate fills them.

The cross-key checks after it: tests/test_check.py and the test file of each check's module; the file a message
names: tests/test_key_sources.py.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from snakemake.utils import update_config

from aoe.config.errors import ConfigError
from aoe.config.hparams import YAML_LOADER
from aoe.plan.schema_check import check_schema, fill_defaults
from tests.workflow_utils import REPO

SCHEMA = REPO / "schemas" / "config.schema.yaml"
GRID = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)


def _check(tmp_path, override: dict) -> str:
    """check_schema on config.yaml + presets/ci.yaml + ``override`` (written to override.yaml); the error line."""
    files = [REPO / "config.yaml", REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"]
    files[-1].write_text(yaml.safe_dump(override))
    config = copy.deepcopy(GRID)  # config.yaml parsed once (~0.3 s each time with PyYAML's pure-Python loader)
    for file in files[1:]:
        update_config(config, yaml.load(file.read_text(), Loader=YAML_LOADER))
    with pytest.raises(ConfigError) as err:
        check_schema(config, SCHEMA, files)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_the_defaults_filled_are_snakemakes():
    """fill_defaults (one parse of the schema, with libyaml) against Snakemake's validate, which parses it at each call
    (aoe.plan.check.complete_config used it until issue 73): config.yaml alone, and with two presets that add
    backbones, train sets, tables and LLM generators, where defaults are filled inside what they add."""
    from snakemake.utils import validate

    for presets in ([], ["ci.yaml"], ["llm-supervised-cpu.yaml", "studies-cpu.yaml"]):
        config = copy.deepcopy(GRID)
        for preset in presets:
            update_config(config, yaml.load((REPO / "presets" / preset).read_text(), Loader=YAML_LOADER))
        ours, snakemakes = copy.deepcopy(config), copy.deepcopy(config)
        fill_defaults(ours, SCHEMA)
        validate(snakemakes, str(SCHEMA))
        assert ours == snakemakes and ours != config, presets
    # a default is the config's own copy: editing it leaves the schema's (read once, shared) as it was
    first, second = ({k: copy.deepcopy(v) for k, v in GRID.items() if k != "evaluation"} for _ in range(2))
    fill_defaults(first, SCHEMA)
    first["evaluation"]["suites"].append("edited")
    fill_defaults(second, SCHEMA)
    assert "edited" not in second["evaluation"]["suites"]


@pytest.mark.slow
def test_the_shipped_configs_pass():
    for preset in [None, *sorted((REPO / "presets").glob("*.yaml"))]:
        config = copy.deepcopy(GRID)  # config.yaml as parsed once (a parse costs more than the check)
        if preset is not None:
            update_config(config, yaml.load(preset.read_text(), Loader=YAML_LOADER))
        check_schema(config, SCHEMA, [REPO / "config.yaml"])


def test_unknown_top_level_key(tmp_path):
    message = _check(tmp_path, {"colour": "blue"})
    assert message.startswith(f"colour: unknown key (in {tmp_path / 'override.yaml'}); valid keys: analysis, backbones,"), message


@pytest.mark.parametrize(
    "override, key, lists",
    [
        ({"tables": {"table3_transfer": {"enabled": False}}}, "tables.table3_transfer.enabled", "tables"),
        ({"figures": {"enabled": False}}, "figures.enabled", "figures"),
        ({"figures": {"training_curves": {"enabled": False}}}, "figures.training_curves.enabled", "figures"),
        ({"analysis": {"gis": {"enabled": False}}}, "analysis.gis.enabled", "analyses"),
    ],
)
def test_a_retired_enabled_switch_names_the_build_list(tmp_path, override, key, lists):
    """Issue 40: presets select what they build (build.*) instead of switching config.yaml's entries off."""
    message = _check(tmp_path, override)
    assert message.startswith(f"{key}: unknown key (in {tmp_path / 'override.yaml'}); valid keys: "), message
    assert message.endswith(f"; the enabled switches gave way to build.{lists}: list what is built there"), message


def test_a_retired_objective_overrides_names_its_replacement(tmp_path):
    """Issue 40: a train set's objective_overrides became its objective_settings.all (one key for one idea)."""
    message = _check(tmp_path, {"trainsets": {"stsb": {"objective_overrides": {"contrastive_threshold": 0.8}}}})
    assert message.startswith(f"trainsets.stsb.objective_overrides: unknown key (in {tmp_path / 'override.yaml'}); valid keys: "), message
    assert message.endswith("; objective_overrides gave way to trainsets.stsb.objective_settings.all: move its keys there"), message


def test_a_build_list_names_known_figures_and_analyses(tmp_path):
    message = _check(tmp_path, {"build": {"figures": ["fig3", "fig99"]}})
    assert message.startswith("build.figures[1]: 'fig99' is not one of ['fig3', "), message
    assert message.endswith(f"(in {tmp_path / 'override.yaml'})"), message
    message = _check(tmp_path, {"build": {"analyses": ["saturation", "gis", "gis"]}})
    assert message.startswith("build.analyses: ['saturation', 'gis', 'gis'] has non-unique elements"), message


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
        ({"trainsets": {"stsb": {"objective_settings": {"all": {"contrastive_treshold": 0.8}}}}}, "trainsets.stsb.objective_settings.all.contrastive_treshold: unknown key"),
        ({"trainsets": {"stsb": {"objective_settings": {"aoe": {"angle_tau": 0}}}}}, "trainsets.stsb.objective_settings.aoe.angle_tau: 0 is less than or equal to the minimum of 0"),
        ({"backbones": {"minilm-l6": {"objective_settings": {"stsb": {"aoe": {"weights": {"angel": 1}}}}}}}, "backbones.minilm-l6.objective_settings.stsb.aoe.weights.angel: unknown key"),
        ({"backbones": {"minilm-l6": {"objective_train": {"stsb": {"aoe": {"lerning_rate": 1e-4}}}}}}, "backbones.minilm-l6.objective_train.stsb.aoe.lerning_rate: unknown key (in "),
        ({"backbones": {"minilm-l6": {"objective_train": {"stsb": {"aoe": {"epochs": -1}}}}}}, "backbones.minilm-l6.objective_train.stsb.aoe.epochs: -1 is less than"),
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


def test_numbers_yaml_and_the_command_line_read_as_text_are_read_as_numbers():
    """Issue 62: `learning_rate: 5e-5` (YAML 1.1 reads it as text) and --config's nested values (Snakemake reads them
    all as text) were refused: "'5e-5' is not of type 'number'". Where the schema takes a number, an integer, a boolean
    or null and not text, such text is read as one, in the config and in the override dictionaries alike."""
    files = [REPO / "config.yaml", REPO / "presets" / "cpu-demo.yaml"]
    config = copy.deepcopy(GRID)
    update_config(config, yaml.load(files[1].read_text(), Loader=YAML_LOADER))
    # as Snakemake's --config gives 'trainsets={"stsb":{"train":{...}}}': every value text
    update_config(config, {"trainsets": {"stsb": {"train": {"learning_rate": "5e-5", "max_steps": "300", "deterministic": "true",
                                                            "init": "null", "warmup_ratio": "1e-1"}}},
                           "backbones": {"minilm-l6": {"train_overrides": {"weight_decay": "1e-2"}, "revision": "1234"}}})
    check_schema(config, SCHEMA, files, {"trainsets": {}})
    train = config["trainsets"]["stsb"]["train"]
    assert (train["learning_rate"], train["max_steps"], train["deterministic"], train["init"], train["warmup_ratio"]) == (5e-5, 300, True, None, 0.1)
    assert config["backbones"]["minilm-l6"]["train_overrides"]["weight_decay"] == 0.01
    assert config["backbones"]["minilm-l6"]["revision"] == "1234"  # the schema takes text there: kept
    # (text that is no number is still refused, naming the key: test_unknown_nested_key_and_bad_value)


def test_a_misspelt_key_names_the_closest_first(tmp_path):
    """Issue 62: `learning_rat:` listed 27 keys (an unknown backbone: tests/test_training_checks.py)."""
    message = _check(tmp_path, {"trainsets": {"stsb": {"train": {"learning_rat": 1e-4}}}})
    assert message.startswith(f"trainsets.stsb.train.learning_rat: unknown key (in {tmp_path / 'override.yaml'}); did you mean "
                              "learning_rate? valid keys: batch_size, "), message

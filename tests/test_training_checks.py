"""aoe.plan.training_checks: what the runs train, checked by name (objectives, runs, backbones, train sets), each
refused at planning time with one line naming the key (every check's own case: tests/test_check.py)."""

from __future__ import annotations

import pytest
import yaml

from aoe.config.errors import ConfigError
from aoe.plan.check import load_config
from aoe.plan.training_checks import check_objectives, unknown_backbone
from tests.workflow_utils import REPO, planning_error


def test_no_objective_takes_the_name_of_the_every_objective_entry():
    config = load_config(REPO)
    config["objectives"]["all"] = {"base": "aoe"}
    with pytest.raises(ConfigError, match=r"^objectives\.all: reserved name"):
        check_objectives(config)


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"stsb": {"score_range": [0, 1]}}},
         "trainsets.stsb.score_range: [0, 1] does not hold the scores of stsb/train (the stsb gold scale: 0 to 5); "
         "its labels are the scores rescaled by this range: set it to [0, 5]"),
        ({"trainsets": {"mrpc": {"score_range": [0.5, 5]}}},
         "trainsets.mrpc.score_range: [0.5, 5] does not hold the scores of mrpc/train (its labels 0, 1: 0 to 1)"),
    ],
)
def test_a_score_range_that_does_not_hold_the_tables_scores_fails_planning(tmp_path, override, start):
    message = planning_error(tmp_path, override)
    assert message.startswith(start), message


def test_an_eval_text_rewrite_needs_a_prompt(tmp_path):
    # the official eval.py rewrites prompted texts only: on a BERT backbone the setting would do nothing
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"backbones": {"minilm-l6": {"eval_text": "official_eval_py"}}}))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith("backbones.minilm-l6.eval_text: official_eval_py rewrites the text a prompt wraps"), str(err.value)


def test_an_unknown_backbone_names_the_closest_first():
    """Issue 62: an unknown backbone listed the names without the one meant or how to add one (a misspelt key:
    tests/test_schema_check.py)."""
    assert unknown_backbone("minilm", {"backbones": {"minilm-l6": {}, "bert-base-uncased": {}}}) == (
        "unknown backbone 'minilm'; did you mean minilm-l6? known: bert-base-uncased, minilm-l6 (a new one is a backbones: "
        'entry with one source, hf_id, package, gguf_package or path: docs/configuration.md, "Adding a backbone")')

"""aoe.plan.check: every cross-key check runs through the start-up call (complete_config, load_config) and refuses
its case with one line naming the key; the shipped configs pass.

Each check's own cases are in the test file of its module (tests/test_training_checks.py, test_cell_checks.py,
test_table_checks.py), the schema's in tests/test_schema_check.py, the file a message names in
tests/test_key_sources.py; tests/test_workflow.py runs the Snakefile on a few of them to show the workflow calls
the check before anything is planned.
"""

from __future__ import annotations

import pytest
import yaml

from aoe.config.errors import ConfigError
from aoe.plan.check import CHECKS, load_config
from tests.workflow_utils import REPO, building, planning_error


# One config per cross-key check of aoe.plan.check.CHECKS that only it refuses: config.yaml with
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
    "check_batch_sizes": (
        {"trainsets": {"stsb": {"train": {"batch_size": 5750}}}},
        "trainsets.stsb.train.batch_size: 5750 (in ",
    ),
    "check_saturation": ({"analysis": {"saturation": {"backbones": ["nope"]}}}, "analysis.saturation.backbones: unknown backbone 'nope'"),
    "check_build": ({"build": {"tables": ["table1_sts", "table9"]}}, "build.tables: no table 'table9' in tables (in "),
    "check_table_targets": (
        {"tables": {"train": {"kind": "stsb", "trainset": "stsb", "backbones": ["bert-base-uncased"], "objectives": ["aoe"]}},
         **building("train")},
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
        {"tables": {"table5_nli": {"backbones": ["minilm-l6"]}}},
        "tables.table5_nli: no run trains backbone 'minilm-l6' with objective",
    ),
    # SimCSE's SentEval batches STS12-16 otherwise than the official copy: a cell's batch-dependent pooling cannot run there
    # (the tables with such rows not built, or check_tables names a row first)
    "check_eval_pooling_backend": (
        {"evaluation": {"backend": "senteval"}, **building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released"))},
        "trainsets.nli.objective_train.angle_arxiv.eval_pooling: 'cls_avg_padded' (cell bert-base-uncased/angle_arxiv/nli/seed42's",
    ),
    # a padded pooling reads the micro-batch's padding: buckets would train another arithmetic
    "check_padded_pooling_buckets": (
        {"objectives": {"angle_pool_avg": {"length_buckets": 4}}},
        "objectives.angle_pool_avg.pooling: 'avg_padded' pools over the micro-batch's padding, so cell "
        "bert-base-uncased/angle_pool_avg/stsb/seed42 must embed each micro-batch in one pass padded to its longest text "
        "(the official padding='longest'), but length_buckets is 4 (objectives.angle_pool_avg.length_buckets); "
        "add length_buckets: 1 to objectives.angle_pool_avg",
    ),
    # the pooler drawn afresh is read by cls_mlp only (SimCSE's MLP over [CLS])
    "check_pooler_poolings": (
        {"objectives": {"simcse_paper": {"pooling": "cls"}}},
        "trainsets.nli.objective_train.simcse_paper.reinit_pooler: reinit_pooler draws afresh the pooler that pooling "
        "cls_mlp reads, but cell bert-base-uncased/simcse_paper/nli/seed42 pools with 'cls'",
    ),
    # SimCSE's SentEval scores every pair and sample: a CPU cap would be ignored there
    "check_senteval_caps": (
        {"evaluation": {"backend": "senteval", "transfer": {"max_rows": 500}}},
        "evaluation.transfer.max_rows: 500 caps what the builtin protocol scores, and evaluation.backend senteval",
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


@pytest.mark.slow
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
    message = planning_error(tmp_path, override)
    assert message.startswith(start), message

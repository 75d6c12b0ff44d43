"""aoe.plan.check: a config that breaks the schema fails in one line naming the key, its file and the fix;
one that breaks a cross-key check fails through the same start-up call (complete_config, load_config).

In-process cases for every kind of problem; tests/test_workflow.py runs the Snakefile on a few
of them to show the workflow calls the check before anything is planned.
"""

from __future__ import annotations

import copy
import types

import pytest
import yaml
from snakemake.utils import update_config

from aoe.config.errors import ConfigError
from aoe.plan.check import CHECKS, check_schema, complete_config, config_sources, load_config
from tests.forkserver import forked_snakemake
from tests.workflow_utils import MIRROR, REPO, copy_workflow

# Each Snakemake run a process of its own, forked from one that imported Snakemake once (tests/forkserver.py)
snakemake, dry_run, _snakemake_forks = forked_snakemake()

SCHEMA = REPO / "schemas" / "config.schema.yaml"
# the tables config.yaml builds (build.tables): a list a --configfile replaces whole
GRID = yaml.safe_load((REPO / "config.yaml").read_text())
PAPER_TABLES = GRID["build"]["tables"]


def _building(*tables: str, without: tuple = ()) -> dict:
    """An override building config.yaml's tables, less ``without``, plus ``tables`` (build.tables replaced whole)."""
    return {"build": {"tables": [t for t in PAPER_TABLES if t not in without] + list(tables)}}


def _check(tmp_path, override: dict) -> str:
    """check_schema on config.yaml + presets/ci.yaml + ``override`` (written to override.yaml); the error line."""
    files = [REPO / "config.yaml", REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"]
    files[-1].write_text(yaml.safe_dump(override))
    config = copy.deepcopy(GRID)  # config.yaml parsed once (~0.3 s each time with PyYAML's pure-Python loader)
    for file in files[1:]:
        update_config(config, yaml.safe_load(file.read_text()))
    with pytest.raises(ConfigError) as err:
        check_schema(config, SCHEMA, files)
    message = str(err.value)
    assert "\n" not in message, message
    return message


@pytest.mark.slow
def test_the_shipped_configs_pass():
    for preset in [None, *sorted((REPO / "presets").glob("*.yaml"))]:
        config = copy.deepcopy(GRID)  # config.yaml as parsed once (a parse costs more than the check)
        if preset is not None:
            update_config(config, yaml.safe_load(preset.read_text()))
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


def test_no_objective_takes_the_name_of_the_every_objective_entry():
    from aoe.plan.check import check_objectives

    config = load_config(REPO)
    config["objectives"]["all"] = {"base": "aoe"}
    with pytest.raises(ConfigError, match=r"^objectives\.all: reserved name"):
        check_objectives(config)


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
         **_building("train")},
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
        {"evaluation": {"backend": "senteval"}, **_building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released"))},
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


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"gis": {"train": {"init": {"trainset": "nli", "objective": "anglee"}}}}},
         "trainsets.gis.train.init.objective: unknown objective 'anglee'"),
        # QLoRA adapters train on the quantized base: a full model as the start cannot be loaded into it
        ({"backbones": {"llama-2-7b": {"train_overrides": {"init": {"trainset": "stsb"}}}}},
         "backbones.llama-2-7b.train_overrides.init: cell llama-2-7b/aoe/nli/seed42 fine-tunes with 'qlora'"),
        # nli/angle_arxiv would start from stsb/aoe, which starts from nli/angle_arxiv
        ({"trainsets": {"nli": {"objective_train": {"angle_arxiv": {"init": {"trainset": "stsb", "objective": "aoe"}}}}}},
         "trainsets.stsb.train.init: the starts form a cycle: bert-base-uncased/angle_arxiv/nli/seed42 starts from "
         "bert-base-uncased/aoe/stsb/seed42 starts from bert-base-uncased/angle_arxiv/nli/seed42"),
        ({"trainsets": {"stsb_llm": {"train": {"init": {"objective": "aoe"}}}}},
         "trainsets.stsb_llm.train.init: 'trainset' is a required property"),
    ],
)
def test_a_trained_start_is_checked_at_planning_time(tmp_path, override, start):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(start), str(err.value)


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
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(start), str(err.value)


def test_an_eval_text_rewrite_needs_a_prompt(tmp_path):
    # the official eval.py rewrites prompted texts only: on a BERT backbone the setting would do nothing
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"backbones": {"minilm-l6": {"eval_text": "official_eval_py"}}}))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith("backbones.minilm-l6.eval_text: official_eval_py rewrites the text a prompt wraps"), str(err.value)


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
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(start), str(err.value)


_ANGLE_BERT = {"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-base-nli-v1"}


def test_a_released_row_of_an_sts_table_takes_an_evaluation_only_pooling(tmp_path):
    """config.yaml's table released scores AnglE-BERT's 82.37 row under 0.1.1's padded cls_avg (the official
    eval.py's), its masked cls_avg in a variant row; any released checkpoint's STS row may take one."""
    config = load_config(REPO, [])
    rows = [r for r in config["tables"]["released"]["rows"] if r["trainset"] == "angle-bert-base-nli-v1"]
    # the candidate evaluations of 82.37 / 82.43 (issue 69): CLS, 0.1.1's padded cls_avg in batches of 32 and 2, 0.4.6's
    assert [r.get("eval_pooling") for r in rows] == ["cls_avg_padded", None, "cls", "cls_avg_padded-bs32", "cls_avg_padded-bs2",
                                                     "cls_avg_batchsum"]
    # a SentEval batch size is named only for an arithmetic that depends on the batch
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg-bs16"}]}}}))
    with pytest.raises(ConfigError, match="cls_avg-bs16"):
        load_config(REPO, [tmp_path / "override.yaml"])
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released": {"kind": "stsb", "rows": [
        {**_ANGLE_BERT, "eval_pooling": "avg_padded-bs8"},
        {"backbone": "llama-2-7b", "objective": "released", "trainset": "angle-llama-7b-nli-v2", "eval_pooling": "last_position"}]}}}))
    config = load_config(REPO, [tmp_path / "override.yaml"])
    assert [r["eval_pooling"] for r in config["tables"]["released"]["rows"]] == ["avg_padded-bs8", "last_position"]


def test_a_transfer_row_takes_an_evaluation_only_pooling(tmp_path):
    """Issue 36: config.yaml scores AnglE-BERT's transfer tasks as its STS (the cell's cls_avg_padded, the official
    eval.py's), its training CLS a variant row; AoE-BERT's Table 3 row has the official NLI eval's cls_avg beside it.
    Any trained or released row of a transfer table may take one (rule evaluate_transfer_eval_pooling)."""
    config = load_config(REPO, [])
    pools = {t: [(r["objective"], r.get("eval_pooling")) for r in config["tables"][t]["rows"] if r["backbone"] == "bert-base-uncased"]
             for t in ("angle_transfer_tasks", "table3_transfer")}
    assert pools["angle_transfer_tasks"] == [("pretrained", None), ("angle_arxiv", None), ("angle_arxiv", "cls")]
    assert ("aoe", None) in pools["table3_transfer"] and ("aoe", "cls_avg_batchsum") in pools["table3_transfer"]
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"tables": {"released_transfer": {"rows": [
        {**_ANGLE_BERT, "eval_pooling": "cls_avg_padded"}, _ANGLE_BERT]}}}))
    config = load_config(REPO, [tmp_path / "override.yaml"])
    assert [r.get("eval_pooling") for r in config["tables"]["released_transfer"]["rows"]] == ["cls_avg_padded", None]
    # SimCSE's SentEval (backend senteval) batches the transfer tasks as the official copy: a transfer row may keep one
    # the cells trained with a padded pooling are scored with it on STS too: masked here, as the backend needs
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({
        "evaluation": {"backend": "senteval"},
        "trainsets": {"nli": {"objective_train": {"angle_arxiv": {"eval_pooling": None}}}},
        "objectives": {"angle_pool_cls_avg": {"pooling": "cls_avg"}, "angle_pool_avg": {"pooling": "avg"},
                       "angle_pool_max": {"pooling": "max"}, "aoe_pool_max": {"pooling": "max"},
                       "aoe_pool_cls_avg": {"pooling": "cls_avg"}},
        **_building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released")),
    }))
    load_config(REPO, [tmp_path / "override.yaml"])


def test_senteval_backend_refuses_a_cell_trained_with_a_padded_pooling(tmp_path):
    """Its STS evaluation must batch as the official eval did (aoe.evaluate.run.scoring_pooling), which SimCSE's
    SentEval does not; the message names the key that gave the cell its pooling."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({
        "evaluation": {"backend": "senteval"},
        "trainsets": {"nli": {"objective_train": {"angle_arxiv": {"eval_pooling": None}}}},
        **_building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released")),
    }))
    with pytest.raises(ConfigError, match=r"^objectives\.angle_pool_avg\.pooling: 'avg_padded' \(cell bert-base-uncased/angle_pool_avg/stsb/seed42's"):
        load_config(REPO, [tmp_path / "override.yaml"])


@pytest.mark.parametrize(
    "override, start",
    [
        # the in-domain, MTEB, NLI probe ... evaluations have no evaluation-only variant, a released row's neither
        ({"tables": {"released_mteb": {"rows": [{"backbone": "bert-large-uncased", "objective": "released", "trainset": "uae-large-v1",
                                                  "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released_mteb.rows[0].eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation "
         "(rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling); table kind 'mteb' has none: drop the key or move "
         "the row to a table of kind sts7, stsb, ablation or transfer"),
        ({"tables": {"nli_probe_rows": {"kind": "nli_probe", "trainset": "nli",
                                         "rows": [{"backbone": "bert-base-uncased", "objective": "aoe", "eval_pooling": "cls_avg"}]}},
          **_building("nli_probe_rows")},
         "tables.nli_probe_rows.rows[0].eval_pooling: an evaluation-only pooling is a variant of an STS or transfer evaluation"),
        # a transfer table's pretrained row: a pretrained variant, as on STS
        ({"tables": {"table3_transfer": {"rows": [{"backbone": "bert-base-uncased", "objective": "pretrained", "eval_pooling": "cls_avg_padded"}]}}},
         "tables.table3_transfer.rows[0].eval_pooling: a backbone as downloaded has no evaluation-only pooling"),
        # a transfer row of a released checkpoint under its own pooling: its transfer.json
        ({"tables": {"released_transfer": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg"}]}}},
         "tables.released_transfer.rows[0].eval_pooling: 'cls_avg' is checkpoint 'angle-bert-base-nli-v1''s own pooling"),
        # SimCSE's SentEval orders STS12-16 otherwise than AnglE's copy: no batch-dependent pooling on STS there,
        # neither a row's nor a cell's (config.yaml's AnglE-BERT NLI cell scores its STS under cls_avg_padded; so does
        # the released AnglE-BERT's row set against ACL's 82.43)
        ({"evaluation": {"backend": "senteval"}},
         "tables.table1_sts.rows[5].eval_pooling: 'cls_avg_padded' depends on the batch, and evaluation.backend senteval "
         "(SimCSE's SentEval) batches STS12-16 in another order than the official copy (aoe.evaluate.senteval_batches); "
         "set evaluation.backend builtin or drop the key"),
        ({"evaluation": {"backend": "senteval"}, **_building(without=("table1_sts", "table4_ablation", "angle_transfer_sts", "released"))},
         "trainsets.nli.objective_train.angle_arxiv.eval_pooling: 'cls_avg_padded' (cell bert-base-uncased/angle_arxiv/nli/seed42"),
        # the backbone as downloaded embeds another way through a pretrained variant
        ({"tables": {"released": {"rows": [{"backbone": "bert-base-uncased", "objective": "pretrained", "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released.rows[0].eval_pooling: a backbone as downloaded has no evaluation-only pooling; give it another "
         "pooling as a pretrained variant (evaluation.pretrained_variants"),
        # the checkpoint's own pooling is its sts.json, the row without the key
        ({"tables": {"released": {"rows": [{**_ANGLE_BERT, "eval_pooling": "cls_avg"}]}}},
         "tables.released.rows[0].eval_pooling: 'cls_avg' is checkpoint 'angle-bert-base-nli-v1''s own pooling "
         "(released.checkpoints.angle-bert-base-nli-v1.pooling)"),
        # the released row's own checks still run
        ({"tables": {"released": {"rows": [{"backbone": "bert-base-uncased", "objective": "released", "trainset": "angle-bert-nli",
                                             "eval_pooling": "cls_avg_padded"}]}}},
         "tables.released.rows[0]: 'angle-bert-nli' is not a checkpoint of released.checkpoints"),
    ],
)
def test_an_evaluation_only_pooling_elsewhere_is_refused_at_planning_time(tmp_path, override, start):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    message = str(err.value)
    assert message.startswith(start) and "\n" not in message, message


def test_a_preset_giving_backbones_to_a_table_of_rows_is_refused(tmp_path):
    """Snakemake merges a preset's table into config.yaml's key by key: backbones/objectives given to
    table1_sts (rows in config.yaml) would silently lose to those rows; the check names the table."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(
        {"tables": {"table1_sts": {"backbones": ["minilm-l6"], "objectives": ["aoe"]}}}))
    with pytest.raises(ConfigError, match=r"^tables\.table1_sts: has both rows and backbones/objectives .*must give rows$"):
        load_config(REPO, [tmp_path / "override.yaml"])


# -- batch sizes: refused at planning time, not inside the training job ------------------------
# aoe.training.train refuses a batch larger than the train set, or one that does not split over the
# accumulation steps and processes, only once the job runs: after Snakemake has deleted the
# cell's previous model. The same checks run when the workflow is planned.


def _ci_error(tmp_path, override: dict) -> str:
    """load_config on the CI preset and ``override`` (override.yaml): the one-line error."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])
    message = str(err.value)
    assert "\n" not in message, message
    return message


def test_a_batch_larger_than_the_train_set_is_refused_at_planning_time(tmp_path):
    message = _ci_error(tmp_path, {"trainsets": {"stsb": {"train": {"batch_size": 6000}}}})
    assert message == (
        f"trainsets.stsb.train.batch_size: 6000 (in {tmp_path / 'override.yaml'}) is more than the 5749 rows of "
        "stsb train (its published size), the most train set 'stsb' can hold: cell minilm-l6/aoe/stsb/seed1 "
        "would have no batch to train on; set it to at most 5749"
    )


def test_the_batch_check_names_the_key_that_set_the_batch(tmp_path):
    # a backbone's train_overrides wins over the train set's key: it is the one to change
    message = _ci_error(tmp_path, {"backbones": {"minilm-l6": {"train_overrides": {"batch_size": 5750}}}})
    assert message.startswith(f"backbones.minilm-l6.train_overrides.batch_size: 5750 (in {tmp_path / 'override.yaml'}) "
                              "is more than the 5749 rows of stsb train"), message


def test_a_batch_of_the_whole_train_set_passes(tmp_path):
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"trainsets": {"stsb": {"train": {"batch_size": 5749}}}}))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


def _nli_dev_run(batch_size: int) -> dict:
    return {
        # the CI preset's run (its tables read it) and one on SNLI dev
        "runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]},
                 {"backbone": "minilm-l6", "trainset": "snli_dev", "objectives": ["aoe"], "seeds": [1]}],
        "trainsets": {"snli_dev": {"dataset": "snli", "split": "dev", "score_range": [0, 1],
                                   "train": {"batch_size": batch_size}}},
    }


def test_the_train_set_size_is_an_upper_bound_of_its_examples(tmp_path):
    """SNLI dev has 9842 labelled rows; its pairs table drops the neutral ones, so fewer examples than
    that are certain only above 9842: a batch between the two is left to the training job."""
    message = _ci_error(tmp_path, _nli_dev_run(9843))
    assert message.startswith(f"trainsets.snli_dev.train.batch_size: 9843 (in {tmp_path / 'override.yaml'}) is more "
                              "than the 9842 rows of snli dev (its published size)"), message
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(_nli_dev_run(9000)))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


def test_a_train_set_of_unknown_size_is_not_checked(tmp_path):
    # AllNLI's size is known only once it is downloaded; the job checks it
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"trainsets": {"nli": {"train": {"batch_size": 10_000_000}}}}))
    load_config(REPO, [tmp_path / "override.yaml"])


def test_a_trained_start_is_checked_too(tmp_path):
    """A cell's trained start (trainsets.<t>.train.init) is trained though no run lists it: its batch is checked."""
    override = {
        "runs": [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]},  # the CI preset's
                 {"backbone": "bert-base-uncased", "trainset": "stsb", "objectives": ["aoe"], "seeds": [42]}],
        "trainsets": {"stsb": {"train": {"init": {"trainset": "snli_dev"}}},
                      "snli_dev": {"dataset": "snli", "split": "dev", "score_range": [0, 1], "train": {"batch_size": 20000}}},
    }
    message = _ci_error(tmp_path, override)
    assert message.startswith("trainsets.snli_dev.train.batch_size: 20000 (in "), message
    assert "cell bert-base-uncased/aoe/snli_dev/seed42" in message
    override["trainsets"]["snli_dev"]["train"]["batch_size"] = 64
    (tmp_path / "override.yaml").write_text(yaml.safe_dump(override))
    load_config(REPO, [REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"])


@pytest.mark.parametrize(
    "override, start",
    [
        ({"trainsets": {"stsb": {"train": {"batch_size": 30, "gradient_accumulation_steps": 4}}}},
         "trainsets.stsb.train.batch_size: 30 (in {override}) must split into gradient_accumulation_steps "
         "(4: trainsets.stsb.train.gradient_accumulation_steps, in {override}) micro-batches each divisible by the "
         "number of processes (1: backbones.minilm-l6.resources.gpus, in config.yaml) of cell minilm-l6/aoe/stsb/seed1; "
         "set it to a multiple of 4"),
        # the processes are the backbone's GPUs (the rule launches one process per GPU)
        ({"backbones": {"minilm-l6": {"resources": {"gpus": 3}}}},
         "trainsets.stsb.train.batch_size: 32 (in config.yaml) must split into gradient_accumulation_steps "
         "(1: trainsets.stsb.train.gradient_accumulation_steps, unset: the default of "
         "aoe.config.hparams.TrainSettings.gradient_accumulation_steps) micro-batches each divisible by "
         "the number of processes (3: backbones.minilm-l6.resources.gpus, in {override}) of cell "
         "minilm-l6/aoe/stsb/seed1; set it to a multiple of 3"),
    ],
)
def test_a_batch_that_does_not_split_over_accumulation_and_processes_is_refused(tmp_path, override, start):
    message = _ci_error(tmp_path, override)
    assert message == start.format(override=tmp_path / "override.yaml"), message


def test_the_paper_grid_splits_its_llm_batches_over_four_gpus(tmp_path):
    """llama-2-7b trains on 4 GPUs (config.yaml): 640 pairs split, 642 do not."""
    (tmp_path / "override.yaml").write_text(yaml.safe_dump({"backbones": {"llama-2-7b": {"train_overrides": {"batch_size": 642}}}}))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [tmp_path / "override.yaml"])
    assert str(err.value).startswith(
        f"backbones.llama-2-7b.train_overrides.batch_size: 642 (in {tmp_path / 'override.yaml'}) must split into "
        "gradient_accumulation_steps (1: backbones.llama-2-7b.train_overrides.gradient_accumulation_steps, in config.yaml) "
        "micro-batches each divisible by the number of processes (4: backbones.llama-2-7b.resources.gpus, in config.yaml)"
    ), str(err.value)


# -- the file named is the one whose value won --------------------------------------------------
# Snakemake lists workflow.configfiles as [--configfile files..., config.yaml] (the Snakefile's
# configfile: comes last) but merges config.yaml first: a bad value a preset sets over config.yaml's
# was reported "(in config.yaml)". And a --config value was named after whatever file set the key.


def _snakemake_order(tmp_path, monkeypatch, override: dict, command_line: dict | None = None):
    """The merged config, and config_sources() of a stand-in workflow of config.yaml, ci.yaml and
    ``override`` (as rules/common.smk hands it the running one)."""
    files = [REPO / "config.yaml", REPO / "presets" / "ci.yaml", tmp_path / "override.yaml"]
    files[-1].write_text(yaml.safe_dump(override))
    config = {}
    for file in files:
        update_config(config, yaml.safe_load(file.read_text()))
    update_config(config, command_line or {})
    listed = [*files[1:], "config.yaml"]  # as Snakemake lists them
    workflow = types.SimpleNamespace(configfiles=listed, overwrite_configfiles=files[1:],
                                     config_settings=types.SimpleNamespace(config=command_line or {}))
    monkeypatch.chdir(REPO)
    return config, config_sources(workflow)


@pytest.mark.parametrize(
    "override, start",
    [
        # ci.yaml and config.yaml set learning_rate too: the override's value is the one merged
        ({"trainsets": {"stsb": {"train": {"learning_rate": "fast"}}}}, "trainsets.stsb.train.learning_rate: 'fast' is not of type 'number'"),
        ({"trainsets": {"stsb": {"train": {"batch_size": -4}}}}, "trainsets.stsb.train.batch_size: -4 is less than the minimum of 2"),
        ({"backbones": {"minilm-l6": {"pooling": "median"}}}, "backbones.minilm-l6.pooling: 'median' is not one of"),
    ],
)
def test_a_bad_value_names_the_file_it_was_merged_from(tmp_path, monkeypatch, override, start):
    config, (files, command_line) = _snakemake_order(tmp_path, monkeypatch, override)
    assert files[0].endswith("config.yaml") and command_line == {}
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, files, command_line)
    assert str(err.value).startswith(start) and str(err.value).endswith(f"(in {tmp_path / 'override.yaml'})"), str(err.value)


def test_a_value_given_by_config_on_the_command_line_is_named_so(tmp_path, monkeypatch):
    command_line = {"trainsets": {"stsb": {"train": {"learning_rate": "fast"}}}}
    config, sources = _snakemake_order(tmp_path, monkeypatch, {}, command_line)
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value) == "trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (from --config)"
    # as check_schema's own argument, outside a Snakemake run
    with pytest.raises(ConfigError, match=r"^colour: unknown key \(from --config\); valid keys: "):
        check_schema({**config, "colour": "blue"}, SCHEMA, [REPO / "config.yaml"], overrides={"colour": "blue"})


def test_a_table_built_but_not_defined_names_the_file_that_lists_it(tmp_path, monkeypatch):
    """build.tables is replaced whole by the last file that gives it: that file is the one named."""
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"build": {"tables": ["table1_sts", "table9_x", "table8_y"]}})
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value).startswith(
        f"build.tables: no tables 'table9_x', 'table8_y' in tables (in {tmp_path / 'override.yaml'}); defined: table1_sts, "), str(err.value)
    # ci.yaml's own list, all defined, passes; a table only defined, not listed, is simply not built
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"tables": {"table9_x": {"kind": "stsb"}}})
    complete_config(config, SCHEMA, *sources)


def test_a_cross_key_error_names_the_file_it_was_merged_from(tmp_path, monkeypatch):
    config, sources = _snakemake_order(tmp_path, monkeypatch, {"trainsets": {"stsb": {"train": {"batch_size": 6000}}}})
    with pytest.raises(ConfigError) as err:
        complete_config(config, SCHEMA, *sources)
    assert str(err.value).startswith(f"trainsets.stsb.train.batch_size: 6000 (in {tmp_path / 'override.yaml'}) is more"), str(err.value)


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("configcheck") / "wf")


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, text, line",
    [
        (["--configfile", "presets/ci.yaml", "override.yaml"], "trainsets: {stsb: {train: {learning_rate: fast}}}\n",
         "config: trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (in override.yaml)"),
        # a file outside the workflow folder, given relative to it: its absolute path, without the ".."
        (["--configfile", "presets/ci.yaml", "../outside.yaml"], "trainsets: {stsb: {train: {batch_size: -4}}}\n",
         "config: trainsets.stsb.train.batch_size: -4 is less than the minimum of 2 (in {outside})"),
        (["--configfile", "presets/ci.yaml", "--config", "trainsets={stsb: {train: {learning_rate: fast}}}"], "",
         "config: trainsets.stsb.train.learning_rate: 'fast' is not of type 'number' (from --config)"),
        (["--configfile", "presets/ci.yaml", "override.yaml"], "trainsets: {stsb: {train: {batch_size: 6000}}}\n",
         "config: trainsets.stsb.train.batch_size: 6000 (in override.yaml) is more than the 5749 rows of stsb train"),
    ],
)
def test_a_dry_run_names_the_file_that_set_the_bad_value(workflow_copy, args, text, line):
    """The real `snakemake -n`: the line names the file whose value Snakemake merged, before anything is planned."""
    outside = workflow_copy.parent / "outside.yaml"
    for path in (workflow_copy / "override.yaml", outside):
        path.write_text(text or "{}\n")
    out = snakemake(workflow_copy, "-n", *args, env={"AOE_DATA_MIRROR": str(MIRROR or "")}, timeout=300)
    assert out.returncode != 0
    assert line.format(outside=outside) in out.stdout, out.stdout[-3000:]


@pytest.mark.slow
def test_a_preset_building_an_undefined_table_is_refused_at_planning(workflow_copy):
    """Issue 40: a preset's build.tables names a table neither it nor config.yaml defines: `snakemake -n`
    stops before planning with one line naming the preset and the key (not a KeyError, nor a silent skip)."""
    preset = workflow_copy / "presets" / "builds-undefined.yaml"
    preset.write_text(
        (REPO / "presets" / "cpu-demo.yaml").read_text().replace("tables: [table1_sts, table2_indomain]", "tables: [table1_sts, table9_new]")
    )
    assert "table9_new" in preset.read_text()
    try:
        out = snakemake(workflow_copy, "-n", "--configfile", "presets/builds-undefined.yaml",
                        env={"AOE_DATA_MIRROR": str(MIRROR or "")}, timeout=300)
    finally:
        preset.unlink()
    assert out.returncode != 0
    assert ("config: build.tables: no table 'table9_new' in tables (in presets/builds-undefined.yaml); defined: table1_sts, "
            in out.stdout), out.stdout[-3000:]


def test_numbers_yaml_and_the_command_line_read_as_text_are_read_as_numbers():
    """Issue 62: `learning_rate: 5e-5` (YAML 1.1 reads it as text) and --config's nested values (Snakemake reads them
    all as text) were refused: "'5e-5' is not of type 'number'". Where the schema takes a number, an integer, a boolean
    or null and not text, such text is read as one, in the config and in the override dictionaries alike."""
    files = [REPO / "config.yaml", REPO / "presets" / "cpu-demo.yaml"]
    config = copy.deepcopy(GRID)
    update_config(config, yaml.safe_load(files[1].read_text()))
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


def test_a_misspelt_key_and_backbone_name_the_closest_first(tmp_path):
    """Issue 62: `learning_rat:` listed 27 keys; an unknown backbone its names without the one meant or how to add one."""
    from aoe.plan.check import unknown_backbone

    message = _check(tmp_path, {"trainsets": {"stsb": {"train": {"learning_rat": 1e-4}}}})
    assert message.startswith(f"trainsets.stsb.train.learning_rat: unknown key (in {tmp_path / 'override.yaml'}); did you mean "
                              "learning_rate? valid keys: batch_size, "), message
    assert unknown_backbone("minilm", {"backbones": {"minilm-l6": {}, "bert-base-uncased": {}}}) == (
        "unknown backbone 'minilm'; did you mean minilm-l6? known: bert-base-uncased, minilm-l6 (a new one is a backbones: "
        'entry with one source, hf_id, package, gguf_package or path: docs/configuration.md, "Adding a backbone")')

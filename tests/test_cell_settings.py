"""What a cell's jobs read of its resolved settings (aoe.config.cell_settings): a train job's params, the text rewriting
of its evaluations, and the trained models whose recorded settings the config no longer gives."""

from __future__ import annotations

from aoe.config.cell_settings import train_params
from tests.workflow_utils import REPO, validated_config


def test_pooling_variant_trains_its_base_recipe():
    config = validated_config()
    params = train_params(config, "bert-base-uncased", "aoe_pool_avg", "nli", 42)
    assert params["objective"] == "aoe" and params["pooling"] == "avg"
    # the base's NLI weights (ibn_w 30) come with it
    assert params["objective_overrides"]["weights"] == {"angle": 1.0, "contrastive": 30.0}
    assert "pooling" not in params["objective_overrides"] and "base" not in params["objective_overrides"]
    from aoe.training.train import TrainConfig

    TrainConfig(**params)


def test_train_params_merge_trainset_backbone_and_objective():
    config = validated_config({"backbones": {"bert-base-uncased": {"train_overrides": {"learning_rate": 1e-5}}}})
    params = train_params(config, "bert-base-uncased", "aoe", "stsb", 43)
    assert params["learning_rate"] == 1e-5  # backbone override wins over the train set's 2e-5
    assert params["batch_size"] == 32 and params["seed"] == 43 and params["pooling"] == "cls"
    assert params["objective_overrides"]["contrastive_threshold"] == 0.8
    # AoE's in-domain weights are the built-in recipe's (aoe/config/recipes.py), written once
    assert "weights" not in params["objective_overrides"]
    from aoe.config.recipes import objective_spec

    assert objective_spec("aoe", params["objective_overrides"])["weights"] == {"angle": 1.0, "contrastive": 1.0}
    from aoe.training.train import TrainConfig

    TrainConfig(**params)  # every resolved key is a TrainConfig field


def test_nli_recipe_is_the_official_one():
    config = validated_config()
    params = train_params(config, "bert-base-uncased", "aoe", "nli", 42)
    assert params["objective_overrides"]["weights"] == {"angle": 1.0, "contrastive": 30.0}  # ibn_w 30, angle_w 1
    assert params["learning_rate"] == 5e-5 and params["max_length"] == 128 and params["warmup_steps"] == 50
    assert params["format"] == "pairs"
    # other objectives on NLI keep their own weights and pick their own format
    assert "weights" not in train_params(config, "bert-base-uncased", "sbert", "nli", 42)["objective_overrides"]
    assert train_params(config, "bert-base-uncased", "sbert", "nli", 42)["format"] == "nli3"
    assert train_params(config, "bert-base-uncased", "simcse_sup", "nli", 42)["format"] == "triplets"


def test_llama_cells_train_through_qlora_with_their_own_recipe():
    from aoe.training.train import TrainConfig

    config = validated_config()
    for backbone in ("llama-2-7b", "llama-2-13b"):
        params = train_params(config, backbone, "aoe", "nli", 42)
        assert params["finetune"] == "qlora" and params["pooling"] == "last"
        assert params["prompt"] == 'Summarize sentence "{text}" in one word:"'
        assert params["lora"]["r"] == 32 and params["lora"]["alpha"] == 32 and params["lora"]["dropout"] == 0.1
        # the official October 2023 LLaMA command whole: cosine 1, in-batch 35, angle 1 at tau 1.0, 2e-4, fp16
        assert params["objective_overrides"]["weights"] == {"cosine": 1.0, "contrastive": 35.0, "angle": 1.0}
        assert params["objective_overrides"]["angle_tau"] == 1.0
        assert params["learning_rate"] == 2e-4 and params["max_length"] == 45 and params["mixed_precision"] == "fp16"
        assert (params["batch_size"], params["gradient_accumulation_steps"], params["in_batch_pool"]) == (640, 1, "process")
        assert params["eval_base_dtype"] == "fp16" and params["warmup_steps"] == 100
        TrainConfig(**params)
        # SBERT / SimCSE on the same backbone keep their own objective
        assert "weights" not in train_params(config, backbone, "sbert", "nli", 42)["objective_overrides"]
    assert train_params(config, "bert-base-uncased", "aoe", "nli", 42)["finetune"] == "full"


def test_the_llm_evaluations_rewrite_texts_as_the_official_eval_py_and_bert_ones_do_not():
    """backbones.<name>.eval_text reaches a cell's evaluation where a prompt wraps its texts, raw elsewhere."""
    from aoe.config.cell_settings import evaluation_text

    config = validated_config()
    for backbone in ("llama-2-7b", "llama-2-13b", "gemma3-270m"):
        assert config["backbones"][backbone]["eval_text"] == "official_eval_py"
        assert evaluation_text(config, backbone, "aoe", "nli") == "official_eval_py"
    assert evaluation_text(config, "llama-2-7b", "pretrained", "none") == "official_eval_py"
    assert evaluation_text(config, "llama-2-7b", "pretrained", "no_prompt_avg") == "raw"  # no prompt: nothing rewritten
    assert evaluation_text(config, "llama-2-7b", "released", "angle-llama-7b-nli-v2") == "official_eval_py"
    assert evaluation_text(config, "bert-large-uncased", "released", "uae-large-v1") == "raw"
    assert config["backbones"]["bert-base-uncased"].get("eval_text", "raw") == "raw"
    assert evaluation_text(config, "bert-base-uncased", "aoe", "nli") == "raw"
    config["backbones"]["llama-2-7b"]["eval_text"] = "raw"
    assert evaluation_text(config, "llama-2-7b", "aoe", "nli") == "raw"


def test_a_model_trained_with_other_settings_is_named_at_planning(tmp_path):
    """Snakemake retrains a changed cell from the params it recorded in .snakemake/; with that record gone it
    cannot tell (a deleted .snakemake/ planned only the recipe ledger): the planner compares each model's
    aoe_config.json with the config and warns."""
    import json
    from dataclasses import asdict

    from aoe.config.cells import Cell
    from aoe.config.cell_settings import settings_changed, train_params
    from aoe.losses import get_objective
    from aoe.plan.check import load_config

    config = load_config(REPO, ["presets/ci.yaml"])
    cell = Cell("minilm-l6", "aoe", "stsb", 1)
    params = train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
    model = tmp_path / "results/ci" / "models" / cell.path
    model.mkdir(parents=True)

    def record(**train):
        objective = asdict(get_objective(params["objective"], params["objective_overrides"], format=params["format"]))
        (model / "aoe_config.json").write_text(json.dumps({"train": {**params, **train}, "objective": objective}))

    record()
    assert settings_changed(config, [cell], tmp_path) == []
    record(log_every=99)  # how a run logs: not a training setting
    assert settings_changed(config, [cell], tmp_path) == []
    # how the model is scored neither: the train job records the code's eval_gold where the cell resolves int
    record(eval_gold="int" if params.get("eval_gold") == "float" else "float", eval_pooling="cls_avg_padded")
    assert settings_changed(config, [cell], tmp_path) == []
    record(max_steps=6)
    assert settings_changed(config, [cell], tmp_path) == [(cell, f"max_steps: 6 -> {params['max_steps']}")]
    assert settings_changed(config, [Cell("minilm-l6", "aoe", "stsb", 2)], tmp_path) == []  # not trained yet

"""Supervised SimCSE at its own published recipe (issue 51): the ``cls_mlp`` pooling, the pooler drawn afresh, the
cell's recipe with its sources, and the planning check for a backbone without a pooler.

SimCSE's ``cls`` pooler is an MLP (dense + tanh) over [CLS], a new layer (princeton-nlp/SimCSE simcse/models.py:19-33,
86-95), kept at test time for the supervised model (models.py:262-263); its released checkpoints store it as BERT's
pooler (simcse_to_huggingface.py:21-23). Here the MLP is the backbone's own pooler: checked against the arithmetic
written out by hand on a tiny random BERT.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from aoe.config.errors import ConfigError
from aoe.config.cells import Cell
from aoe.model.encoder import Encoder, embed
from aoe.model.tokens import build_token_cache
from aoe.training.train import TrainConfig, reinit_pooler, train
from tests.train_utils import random_pairs_table
from tests.workflow_utils import REPO

TEXTS = ["A man is playing a guitar.", "short", "Two dogs run across a snowy field while a child watches.", "Café in Zürich"]


def _batch(model_dir: Path) -> dict:
    tok = AutoTokenizer.from_pretrained(model_dir)
    return tok(TEXTS, padding=True, return_tensors="pt")


def test_cls_mlp_is_tanh_of_the_pooler_dense_over_cls(tiny_bert):
    model = AutoModel.from_pretrained(tiny_bert).eval()
    enc = _batch(tiny_bert)
    with torch.no_grad():
        pooled = embed(model, "cls_mlp", enc["input_ids"], enc["attention_mask"])
        cls = model(**enc).last_hidden_state[:, 0]
    w, b = model.pooler.dense.weight, model.pooler.dense.bias
    by_hand = torch.tanh(cls @ w.T + b)
    torch.testing.assert_close(pooled, by_hand, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(pooled, cls, atol=1e-3)  # the MLP is applied, not the bare [CLS]


def test_cls_mlp_refuses_a_model_without_a_pooler(tiny_bert, tiny_llama):
    enc = _batch(tiny_bert)
    headless = AutoModel.from_pretrained(tiny_bert, add_pooling_layer=False).eval()
    with pytest.raises(ValueError, match="needs the backbone's pooler output"):
        embed(headless, "cls_mlp", enc["input_ids"], enc["attention_mask"])
    with pytest.raises(ValueError, match="has no pooler"):
        reinit_pooler(AutoModel.from_pretrained(tiny_llama), 0)


def test_the_pooler_is_drawn_afresh_as_simcses_new_head_and_the_same_for_a_seed(tiny_bert):
    loaded = AutoModel.from_pretrained(tiny_bert).pooler.dense
    draws = {}
    for name, seed in (("a", 42), ("b", 42), ("c", 43)):
        model = AutoModel.from_pretrained(tiny_bert)
        reinit_pooler(model, seed)
        draws[name] = model.pooler.dense
    assert torch.equal(draws["a"].weight, draws["b"].weight)  # the seed fixes the draw
    assert not torch.equal(draws["a"].weight, draws["c"].weight)
    assert not torch.equal(draws["a"].weight, loaded.weight)  # not the pooler as downloaded
    assert torch.equal(draws["a"].bias, torch.zeros_like(loaded.bias))  # transformers' _init_weights: bias 0
    std = AutoModel.from_pretrained(tiny_bert).config.initializer_range
    # normal(0, initializer_range) over 32 x 32 = 1,024 draws: the sample std within 10% of it
    assert abs(draws["a"].weight.std().item() / std - 1) < 0.1 and abs(draws["a"].weight.mean().item()) < 0.1 * std


@pytest.fixture(scope="module")
def data(tiny_bert, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("simcse_paper")
    table = random_pairs_table(root / "train.parquet", 0, 32)
    build_token_cache(table, tiny_bert, 16, root / "cache")
    return {"backbone": tiny_bert, "table": table, "cache": root / "cache"}


def _cfg(**kw) -> TrainConfig:
    base = dict(objective="simcse_sup", pooling="cls_mlp", reinit_pooler=True, seed=7, learning_rate=1e-3, batch_size=8,
                max_steps=3, log_every=1, max_length=16, score_range=(0.0, 5.0))
    return TrainConfig(**{**base, **kw})


def test_training_starts_from_the_fresh_pooler_and_saves_it(data, tmp_path):
    """With a learning rate of 0 the saved weights are those training started from: the redrawn pooler (seed 7's
    draw) and every other tensor as downloaded."""
    out = tmp_path / "lr0"
    train(data["cache"], data["table"], data["backbone"], out, _cfg(learning_rate=0.0), extra_record={"cell": {"seed": 7}})
    saved, start = load_file(out / "model.safetensors"), load_file(data["backbone"] / "model.safetensors")
    fresh = AutoModel.from_pretrained(data["backbone"])
    reinit_pooler(fresh, 7)
    key = next(k for k in saved if k.endswith("pooler.dense.weight"))
    torch.testing.assert_close(saved[key], fresh.pooler.dense.weight.detach(), rtol=0, atol=0)
    assert not torch.equal(saved[key], start[key])
    assert all(torch.equal(saved[k], start[k]) for k in saved if "pooler" not in k)
    record = json.loads((out / "aoe_config.json").read_text())
    assert record["pooling"] == "cls_mlp" and record["train"]["reinit_pooler"] is True


def test_a_trained_folder_reloads_with_the_same_embeddings(data, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "trained"
    train(data["cache"], data["table"], data["backbone"], out, _cfg(), extra_record={"cell": {"seed": 7}})
    saved = load_file(out / "model.safetensors")
    w = saved[next(k for k in saved if k.endswith("pooler.dense.weight"))]
    b = saved[next(k for k in saved if k.endswith("pooler.dense.bias"))]
    encoder = Encoder(out, device="cpu")
    assert encoder.pooling == "cls_mlp"
    ours = encoder.encode(TEXTS, batch_size=2, max_length=32)
    # the trained pooler, applied by hand to the reloaded model's [CLS]
    model = AutoModel.from_pretrained(out).eval()
    enc = _batch(out)
    with torch.no_grad():
        cls = model(**enc).last_hidden_state[:, 0]
    np.testing.assert_allclose(ours, torch.tanh(cls @ w.T + b).numpy(), rtol=1e-5, atol=1e-6)
    bare = Encoder(out, device="cpu", eval_pooling="cls").encode(TEXTS, batch_size=2, max_length=32)
    assert np.abs(bare - ours).max() > 1e-3
    # the sentence-transformers files training wrote: [CLS], then a Dense with tanh holding the trained pooler
    theirs = SentenceTransformer(str(out), device="cpu").encode(TEXTS, batch_size=3)
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kw, message", [
    ({"pooling": "cls"}, "pooling 'cls' never reads it"),
    ({"finetune": "lora"}, "reinit_pooler needs full fine-tuning"),
])
def test_train_config_refuses_a_pooler_draw_that_nothing_trains(kw, message):
    with pytest.raises(ValueError, match=message):
        _cfg(**kw)


@pytest.fixture(scope="module")
def grid() -> dict:
    from aoe.plan.check import load_config

    return load_config(REPO, [])


@pytest.mark.parametrize("backbone", ["llama-2-7b", "gemma3-270m"])
def test_planning_refuses_a_backbone_without_a_pooler(grid, backbone):
    from aoe.plan.cell_checks import check_pooler_poolings

    config = copy.deepcopy(grid)
    config["runs"].append({"backbone": backbone, "trainset": "nli", "objectives": ["simcse_paper"], "seeds": [42], "reruns": 1})
    with pytest.raises(ConfigError, match=rf"objectives\.simcse_paper\.pooling: 'cls_mlp' .* backbone '{backbone}' is a decoder without one"):
        check_pooler_poolings(config)


def test_planning_refuses_the_pooler_under_an_adapter_and_a_draw_nothing_reads(grid):
    from aoe.plan.cell_checks import check_pooler_poolings

    check_pooler_poolings(grid)  # the grid's simcse_paper cells: BERT-base, full fine-tuning
    config = copy.deepcopy(grid)
    config["backbones"]["bert-base-uncased"]["finetune"] = "lora"
    with pytest.raises(ConfigError, match=r"finetune 'lora' \(backbones\.bert-base-uncased\.finetune\) neither trains nor saves"):
        check_pooler_poolings(config)
    config = copy.deepcopy(grid)
    config["objectives"]["simcse_paper"]["pooling"] = "cls"
    with pytest.raises(ConfigError, match=r"trainsets\.nli\.objective_train\.simcse_paper\.reinit_pooler: .* pools with 'cls'"):
        check_pooler_poolings(config)


# SimCSE 49fa580's value of every setting its command, code or transformers 4.2.1 fixes, and where config.yaml cites it
SIMCSE = {
    "pooling": ("cls_mlp", "run_sup_example.sh:30"),
    "format": ("triplets", None),  # the simcse loss's first format: the train set's (premise, entailment, contradiction)
    "batch_size": (512, "run_sup_example.sh:6,23"),
    "gradient_accumulation_steps": (1, "run_sup_example.sh"),
    "learning_rate": (5e-5, "run_sup_example.sh:24"),
    "epochs": (3, "run_sup_example.sh:22"),
    "max_length": (32, "run_sup_example.sh:25"),
    "warmup_ratio": (0.0, "transformers 4.2.1"),
    "warmup_steps": (0, "transformers 4.2.1"),
    "weight_decay": (0.0, "transformers 4.2.1"),
    "max_grad_norm": (1.0, "transformers 4.2.1"),
    "detached_processes": (4, "run_sup_example.sh:6,18"),  # the gather without gradient over 4 DDP processes (models.py:170-192)
    "mixed_precision": ("fp16", "run_sup_example.sh:35"),
    "reinit_pooler": (True, "simcse/models.py:92-95"),
    "select_checkpoint": ("best", "run_sup_example.sh:27-28"),
    "select_split": ({"dataset": "stsb", "split": "dev"}, "simcse/trainers.py:125,131"),
    "select_every": (125, "run_sup_example.sh:26,29"),
    "select_max_length": (512, "simcse/trainers.py:105-111"),
    "simcse_tau": (20.0, "run_sup_example.sh:32"),
    "init": ("bert-base-uncased", None),  # --model_name_or_path bert-base-uncased (run_sup_example.sh:19): the backbone
}


def test_the_resolved_recipe_has_each_simcse_value_with_its_source(grid):
    from aoe.plan.ledger import ConfigFiles, cell_ledger

    official, rows = cell_ledger(grid, Cell("bert-base-uncased", "simcse_paper", "nli", 42), ConfigFiles([REPO / "config.yaml"]))
    assert official is None  # no official AnglE recipe to compare SimCSE's with
    found = {r["key"]: r for r in rows}
    for key, (value, cited) in SIMCSE.items():
        row = found[key]
        assert row["value"] == (pytest.approx(value) if isinstance(value, float) else value), (key, row)
        if cited is not None:
            assert "SimCSE" in row["source"] and cited in row["source"], (key, row["source"])
    # the pool of in-batch negatives: the whole 512, as SimCSE all-gathers its 4 GPUs' embeddings, the others' without gradient
    assert found["in_batch_pool"]["value"] == 512 and "all-gathered" in found["in_batch_pool"]["source"]
    assert "without gradient" in found["in_batch_pool"]["source"]


def test_the_grid_selects_simcse_on_a_split_no_table_scores(grid):
    from aoe.config.checkpoint_selection import scored_split_selections, selection_split

    found = selection_split(grid, Cell("bert-base-uncased", "simcse_paper", "nli", 42))
    assert (found["dataset"], found["split"], found["split_is_test"]) == ("stsb", "dev", False)
    for table in ("table1_sts", "table3_transfer"):
        assert scored_split_selections(grid, table) == []  # no § mark
        held = scored_split_selections(grid, table, held_out=True)
        assert [(s["objective"], s["split"]) for s in held] == [("simcse_paper", "stsb dev")], table

"""select_checkpoint (aoe.training.train, aoe.config.checkpoint_selection): the model folder holds the epoch with the best validation
Spearman (``best``) or the last step's weights (``last``, the default, as the official code's printed numbers).

In-process on a tiny random BERT: 40 training pairs at batch 8 make 5 steps an epoch. Most tests script
the validation scores (``_validation_spearman`` replaced) so that the best epoch is neither the first nor
the last and one epoch ties it; one checks the real scorer against the evaluation Encoder. A job "killed"
here raises out of the loop right after a checkpoint, as tests/test_checkpoints.py does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

import aoe.training.selection
import aoe.training.train
from aoe.config.errors import ConfigError
from aoe.model.tokens import build_token_cache
from aoe.training.checkpoints import FINAL, checkpoint_dir, step_dirs
from aoe.training.train import TrainConfig, train
from tests.train_utils import killed_after_checkpoint, random_pairs_table

SPLIT = {"dataset": "stsb", "split": "dev"}
BEST = {"select_checkpoint": "best", "select_split": SPLIT}
# epoch 1 is the best; epoch 2 ties it (the earlier stays); the last epoch scores lower
SCORES = [10.0, 30.0, 30.0, 20.0]
STEPS_PER_EPOCH = 5


@pytest.fixture(scope="module")
def data(tiny_bert, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("select_data")
    table = random_pairs_table(root / "train.parquet", 0, 8 * STEPS_PER_EPOCH)
    build_token_cache(table, tiny_bert, 16, root / "cache")
    # gold reversed: with it the tiny model's Spearman lies above 0 (the official initial best), so the real scorer
    # selects an epoch; with the drawn gold it is below 0 at every epoch end and the last weights are kept
    dev = random_pairs_table(root / "dev.parquet", 1, 30)
    pd.read_parquet(dev).assign(score=lambda d: 5.0 - d["score"]).to_parquet(dev, index=False)
    return {"backbone": tiny_bert, "table": table, "cache": root / "cache", "dev": dev}


def _cfg(select: bool, **kw) -> TrainConfig:
    base = dict(objective="aoe", pooling="cls", seed=0, learning_rate=1e-3, batch_size=8, epochs=len(SCORES), log_every=1,
                max_length=16, score_range=(0.0, 5.0), **(BEST if select else {}))
    return TrainConfig(**{**base, **kw})


def _train(data, out: Path, select: bool = True, **kw) -> dict:
    return train(data["cache"], data["table"], data["backbone"], out, _cfg(select, **kw), extra_record={"cell": {"seed": 0}},
                 select_table=data["dev"] if select else None)


def _script(monkeypatch, scores=SCORES) -> dict[int, dict]:
    """Replace the scorer: epoch e scores ``scores[e]``; returns {epoch: a copy of the weights it scored}."""
    seen: dict[int, dict] = {}

    def scripted(run):
        epoch = len(run.selection.scores)  # one score per epoch end so far, restored by a resume
        encoder = run.accelerator.unwrap_model(run.module).encoder
        # on the CPU, where the saved files are read: training runs on the GPU where there is one
        seen[epoch] = {k: v.detach().to("cpu", copy=True) for k, v in encoder.state_dict().items()}
        return scores[epoch]

    monkeypatch.setattr(aoe.training.selection, "validation_spearman", scripted)
    return seen


def _record(out: Path) -> dict:
    return json.loads((out / "aoe_config.json").read_text())


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]


def _select_lines(out: Path) -> list[tuple]:
    return [(x["epoch"], x["step"], x["select_split"], x["select_spearman"], x["select_best"]) for x in _lines(out) if "select_spearman" in x]


def _killed_after_checkpoint(data, out: Path, at: int, monkeypatch, **kw) -> None:
    """Train into ``out`` until the checkpoint of step ``at`` is written, then die as a preempted job."""
    killed_after_checkpoint(lambda: _train(data, out, **kw), out, at, monkeypatch)


# ---- the choice, its weights and its record ------------------------------------------------------


def test_the_best_epoch_wins_and_a_tie_keeps_the_earlier(data, tmp_path, monkeypatch):
    seen = _script(monkeypatch)
    out = tmp_path / "seed0"
    summary = _train(data, out)
    record = _record(out)
    sel = record["selection"]
    assert (sel["rule"], sel["epoch"], sel["step"], sel["score"]) == ("best", 1, 2 * STEPS_PER_EPOCH, 30.0)
    assert sel["scores"] == [{"epoch": e, "step": (e + 1) * STEPS_PER_EPOCH, "spearman": s} for e, s in enumerate(SCORES)]
    assert sel["split"] == SPLIT and sel["split_is_test"] is False
    assert summary["selection"] == sel and "selection" not in record["summary"]
    assert record["train"]["select_checkpoint"] == "best" and record["train"]["select_split"] == SPLIT
    # the model folder holds epoch 1's weights, not the last epoch's
    saved = load_file(out / "model.safetensors")
    assert saved.keys() <= seen[1].keys()
    assert all(torch.equal(saved[k], seen[1][k]) for k in saved)
    assert not all(torch.equal(saved[k], seen[3][k]) for k in saved)
    # one metrics line per epoch end, beside the loss lines
    assert _select_lines(out) == [(e, (e + 1) * STEPS_PER_EPOCH, "stsb/dev", s, e in (0, 1)) for e, s in enumerate(SCORES)]
    assert [x["step"] for x in _lines(out) if "loss" in x] == list(range(1, len(SCORES) * STEPS_PER_EPOCH + 1))


def test_the_selection_split_is_flagged_when_it_is_evaluated_on(data, tmp_path, monkeypatch):
    _script(monkeypatch)
    out = tmp_path / "seed0"
    train(data["cache"], data["table"], data["backbone"], out, _cfg(True), select_table=data["dev"], select_is_test=True)
    assert _record(out)["selection"]["split_is_test"] is True


def test_an_undefined_score_is_never_the_best(data, tmp_path, monkeypatch):
    _script(monkeypatch, [None, 5.0, None, 3.0])
    _train(data, tmp_path / "a")
    assert _record(tmp_path / "a")["selection"]["epoch"] == 1


@pytest.mark.parametrize("scores", [[None] * 4, [-10.0, -5.0, -20.0, -8.0], [0.0, None, -3.0, 0.0]],
                         ids=["all-undefined", "all-negative", "zero-at-most"])
def test_no_score_above_0_keeps_the_last_steps_weights(data, tmp_path, monkeypatch, scores):
    """As angle-emb 0.1.1's EvaluateCallback, whose best starts at 0: it then saves no best-checkpoint and the
    official output_dir holds the final model (bench/parity/selection_parity.py compares the two rules)."""
    seen = _script(monkeypatch, scores)
    out = tmp_path / "seed0"
    _train(data, out)
    sel = _record(out)["selection"]
    assert (sel["epoch"], sel["step"], sel["score"]) == (None, None, None)
    assert [s["spearman"] for s in sel["scores"]] == scores
    assert [x[-1] for x in _select_lines(out)] == [False] * len(scores)
    saved = load_file(out / "model.safetensors")
    assert saved.keys() <= seen[3].keys()
    assert all(torch.equal(saved[k], seen[3][k]) for k in saved)  # the last epoch ends at the last step


def test_a_score_above_0_after_negative_ones_is_the_best(data, tmp_path, monkeypatch):
    _script(monkeypatch, [-10.0, -5.0, 0.5, 0.0])
    _train(data, tmp_path / "a")
    assert _record(tmp_path / "a")["selection"]["epoch"] == 2


def test_max_steps_scores_the_cut_last_epoch(data, tmp_path, monkeypatch):
    _script(monkeypatch, [10.0, 5.0, 40.0])
    out = tmp_path / "seed0"
    _train(data, out, max_steps=2 * STEPS_PER_EPOCH + 2)  # two whole epochs and 2 steps of the third
    sel = _record(out)["selection"]
    assert [(s["epoch"], s["step"]) for s in sel["scores"]] == [(0, 5), (1, 10), (2, 12)]
    assert (sel["epoch"], sel["step"]) == (2, 12)


def test_the_recorded_score_is_the_saved_models_spearman_as_the_evaluation_embeds(data, tmp_path):
    from scipy.stats import spearmanr

    from aoe.evaluate.sts import cosine_rows, pair_embeddings, unique_texts
    from aoe.model.encoder import Encoder

    out = tmp_path / "seed0"
    _train(data, out, epochs=3, pooling="avg")  # mean pooling spreads the tiny model's cosines: no near-ties to reorder
    sel = _record(out)["selection"]
    scores = [s["spearman"] for s in sel["scores"]]
    assert len(scores) == 3 and all(np.isfinite(scores)) and max(scores) > 0
    assert sel["score"] == max(scores) and sel["epoch"] == scores.index(max(scores))  # the first of the highest
    dev = pd.read_parquet(data["dev"])
    texts = unique_texts([dev])
    emb = Encoder(out, device="cpu").encode(texts, batch_size=8, max_length=16)
    ours = 100 * spearmanr(cosine_rows(*pair_embeddings(emb, texts, dev)), dev["score"]).statistic
    assert ours == pytest.approx(sel["score"], abs=1e-6)


def test_select_max_length_cuts_the_selection_texts_there_not_at_the_training_length(data, tmp_path):
    """SimCSE's STS-B dev batcher cuts nothing (simcse/trainers.py:105-111) while its training cuts at 32: the selection
    embeds at select_max_length, here 4 tokens against training's 16, as the Encoder does at 4."""
    from scipy.stats import spearmanr

    from aoe.evaluate.sts import cosine_rows, pair_embeddings, unique_texts
    from aoe.model.encoder import Encoder

    out = tmp_path / "seed0"
    _train(data, out, epochs=1, pooling="avg", select_max_length=4)
    score = _record(out)["selection"]["scores"][0]["spearman"]
    dev = pd.read_parquet(data["dev"])
    texts = unique_texts([dev])
    encoder = Encoder(out, device="cpu")
    at = {n: 100 * spearmanr(cosine_rows(*pair_embeddings(encoder.encode(texts, batch_size=8, max_length=n), texts, dev)),
                             dev["score"]).statistic for n in (4, 16)}
    gap = abs(at[4] - at[16])
    # on a GPU the selection embeds there and this check on the CPU: near-tied cosines of 30 pairs may swap ranks,
    # 0.04 a swap (0.08 on the H200, bench/gpu/results/pytest-fast-lane-cuda-h200-f869dda.txt), against a gap of points
    tol = 0.1 * gap if torch.cuda.is_available() else 1e-6
    assert gap > 1e-3 and score == pytest.approx(at[4], abs=tol)


def test_select_every_scores_every_n_steps_and_never_at_the_end(data, tmp_path, monkeypatch):
    """SimCSE's selection (run_sup_example.sh:26-29, --evaluation_strategy steps --eval_steps 125): the HF Trainer scores
    at multiples of eval_steps, never at an epoch end nor at the last step; the best of those wins."""
    scores = [10.0, 30.0, 30.0, 20.0, 5.0, 1.0]  # steps 3, 6, ..., 18 of 20: the best is step 6's
    seen = _script(monkeypatch, scores)
    out = tmp_path / "seed0"
    _train(data, out, select_every=3)
    sel = _record(out)["selection"]
    assert [s["step"] for s in sel["scores"]] == [3, 6, 9, 12, 15, 18]
    assert (sel["step"], sel["score"]) == (6, 30.0) and sel["criterion"].startswith("the step (one every 3)")
    saved = load_file(out / "model.safetensors")
    assert all(torch.equal(saved[k], seen[1][k]) for k in saved)
    assert _record(out)["train"]["select_every"] == 3


def test_select_every_resumed_after_a_kill_selects_as_an_uninterrupted_one(data, tmp_path, monkeypatch):
    scores = [10.0, 30.0, 30.0, 20.0, 5.0, 1.0]
    _script(monkeypatch, scores)
    full = tmp_path / "full"
    _train(data, full, select_every=3, checkpoint_every=6)
    killed = tmp_path / "killed"
    # step 6 is scored before its checkpoint, which then holds that score and its weights
    _killed_after_checkpoint(data, killed, 6, monkeypatch, select_every=3, checkpoint_every=6)
    kept = torch.load(step_dirs(checkpoint_dir(killed))[0] / "custom_checkpoint_1.pkl", weights_only=False)
    assert [s["step"] for s in kept["scores"]] == [3, 6] and kept["best"]["step"] == 6
    summary = _train(data, killed, select_every=3, checkpoint_every=6)
    assert summary["resumed_from_step"] == 6
    assert _record(killed)["selection"] == _record(full)["selection"]
    a, b = load_file(full / "model.safetensors"), load_file(killed / "model.safetensors")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-6)


# ---- a kill does not change the choice -----------------------------------------------------------


@pytest.mark.parametrize("at, every", [(10, 5), (12, 6)], ids=["at-epoch-1s-last-step-before-scoring", "after-epoch-1-scored"])
def test_a_killed_and_resumed_run_selects_as_an_uninterrupted_one(data, tmp_path, monkeypatch, at, every):
    _script(monkeypatch)
    full = tmp_path / "full"
    _train(data, full, checkpoint_every=every)
    killed = tmp_path / "killed"
    _killed_after_checkpoint(data, killed, at, monkeypatch, checkpoint_every=every)
    kept = torch.load(step_dirs(checkpoint_dir(killed))[0] / "custom_checkpoint_1.pkl", weights_only=False)
    # epoch 1 ends at step 10: scored after the step's checkpoint, so only the later one holds its weights
    assert [s["epoch"] for s in kept["scores"]] == ([0] if at == 10 else [0, 1])
    assert kept["best"]["epoch"] == (0 if at == 10 else 1)
    summary = _train(data, killed, checkpoint_every=every)
    assert summary["resumed_from_step"] == at
    assert _record(killed)["selection"] == _record(full)["selection"]
    assert _select_lines(killed) == _select_lines(full)
    a, b = load_file(full / "model.safetensors"), load_file(killed / "model.safetensors")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-5, atol=1e-6)


def test_a_resumed_run_with_the_real_scorer_selects_as_an_uninterrupted_one(data, tmp_path, monkeypatch):
    full = tmp_path / "full"
    _train(data, full, checkpoint_every=6, pooling="avg")
    killed = tmp_path / "killed"
    _killed_after_checkpoint(data, killed, 12, monkeypatch, checkpoint_every=6, pooling="avg")
    _train(data, killed, checkpoint_every=6, pooling="avg")
    a, b = _record(full)["selection"], _record(killed)["selection"]
    assert b["epoch"] == a["epoch"]
    np.testing.assert_allclose([s["spearman"] for s in b["scores"]], [s["spearman"] for s in a["scores"]], rtol=1e-6)


def test_a_finished_best_run_is_restored_with_its_selection(data, tmp_path, monkeypatch):
    import shutil

    _script(monkeypatch)
    out = tmp_path / "seed0"
    _train(data, out, checkpoint_every=6)
    trained, selection = load_file(out / "model.safetensors"), _record(out)["selection"]
    shutil.rmtree(out)  # Snakemake deletes the output of a job that did not end cleanly
    monkeypatch.setattr(aoe.training.train, "_build", lambda *a, **k: pytest.fail("trained again"))
    again = _train(data, out, checkpoint_every=6)
    assert again["restored_from"] == str(checkpoint_dir(out) / FINAL)
    assert _record(out)["selection"] == selection
    assert all(torch.equal(load_file(out / "model.safetensors")[k], v) for k, v in trained.items())


def test_another_selection_table_is_another_run(data, tmp_path):
    base = {"train": {"lr": 1.0, "select_checkpoint": "best", "select_split": SPLIT}}
    other = random_pairs_table(tmp_path / "other.parquet", 2, 30)
    assert aoe.training.selection.with_selection(base, data["dev"]) != aoe.training.selection.with_selection(base, other)


# ---- last: as before -----------------------------------------------------------------------------


def test_last_scores_nothing_and_records_as_before(data, tmp_path, monkeypatch):
    monkeypatch.setattr(aoe.training.selection, "validation_spearman", lambda run: pytest.fail("scored under last"))
    out = tmp_path / "seed0"
    summary = _train(data, out, select=False, checkpoint_every=6)
    record = _record(out)
    assert "selection" not in record and "selection" not in summary
    assert all("loss" in x for x in _lines(out))
    # a run trained before the switch existed has this identity: its checkpoints resume, its final restores
    identity = json.loads((checkpoint_dir(out) / FINAL / "final.json").read_text())["identity"]
    assert "select_checkpoint" not in identity["train"] and "select_split" not in identity["train"]
    assert "select_table_sha256" not in identity


def test_scoring_leaves_the_training_as_it_was(data, tmp_path, monkeypatch):
    last = tmp_path / "last"
    _train(data, last, select=False)
    _script(monkeypatch, [10.0, 20.0, 30.0, 40.0])  # rising: the best is the last epoch
    best = tmp_path / "best"
    _train(data, best)
    losses = lambda out: [x["loss"] for x in _lines(out) if "loss" in x]
    assert losses(best) == losses(last)
    a, b = load_file(last / "model.safetensors"), load_file(best / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---- several processes ---------------------------------------------------------------------------


# Two processes (accelerate launch, gloo) keep the epoch of the main process's score: in
# tests/test_train_engine.py::test_two_processes_select_on_the_main_process_score, one launch with the engine's
# other two-process runs.


# ---- LoRA: the adapters only ---------------------------------------------------------------------


def test_lora_keeps_the_best_epochs_adapters_only(tiny_llama, tmp_path, monkeypatch):
    pytest.importorskip("peft")
    table = random_pairs_table(tmp_path / "train.parquet", 0, 24)
    build_token_cache(table, tiny_llama, 16, tmp_path / "cache")
    seen = _script(monkeypatch, [10.0, 30.0, 20.0])
    cfg = TrainConfig(objective="aoe", pooling="last", seed=0, learning_rate=5e-3, batch_size=8, epochs=3, log_every=1,
                      max_length=16, score_range=(0.0, 5.0), finetune="lora", checkpoint_every=7,
                      lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": []}, **BEST)
    kept = {}
    real = aoe.training.train._save_checkpoint

    def save_and_look(accelerator, root, identity, state, metrics_lines):
        saved = real(accelerator, root, identity, state, metrics_lines)
        kept.update(torch.load(saved / "custom_checkpoint_1.pkl", weights_only=False))
        return saved

    monkeypatch.setattr(aoe.training.train, "_save_checkpoint", save_and_look)
    out = tmp_path / "lora"
    train(tmp_path / "cache", table, tiny_llama, out, cfg, select_table=random_pairs_table(tmp_path / "dev.parquet", 1, 20))
    assert kept["best"]["epoch"] == 1 and kept["weights"] and all("lora_" in k for k in kept["weights"])
    assert _record(out)["selection"]["epoch"] == 1
    adapter = load_file(out / "adapter_model.safetensors")
    assert len(adapter) == len(kept["weights"])
    for k, v in kept["weights"].items():
        v = v.cpu()  # the checkpoint keeps the device it was trained on
        assert torch.equal(v, seen[1][k])
        assert torch.equal(adapter[k.replace(".default.", ".")], v)


# ---- settings and the plan -----------------------------------------------------------------------


@pytest.mark.parametrize("kw, message", [
    ({"select_checkpoint": "best"}, "needs select_split"),
    ({"select_checkpoint": "best", "select_split": {"dataset": "stsb"}}, "needs select_split"),
    ({"select_split": SPLIT}, "read only by select_checkpoint best"),
    ({"select_checkpoint": "final"}, "select_checkpoint must be one of"),
    ({"select_every": 125}, "must be 0 or, with select_checkpoint best"),
    ({"select_max_length": 512}, "must be 0 or, with select_checkpoint best"),
    ({**BEST, "select_every": -1}, "must be 0 or, with select_checkpoint best"),
])
def test_train_config_refuses_a_selection_that_cannot_work(kw, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(objective="aoe", **kw)


def test_best_needs_its_table_and_last_takes_none(data, tmp_path):
    with pytest.raises(ValueError, match="best needs the table"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "a", _cfg(True))
    with pytest.raises(ValueError, match="best needs the table"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "b", _cfg(False), select_table=data["dev"])


@pytest.fixture(scope="module")
def configs() -> dict:
    from aoe.plan.check import load_config
    from tests.workflow_utils import REPO

    return {"grid": load_config(REPO, []), "best": load_config(REPO, ["presets/paper-best-checkpoint.yaml"])}


def test_the_grid_selects_only_for_simcses_recipe_and_its_other_train_jobs_keep_their_params(configs):
    """The grid keeps the last step's weights but for SimCSE's own recipe (simcse_paper: STS-B dev every 125 steps,
    SimCSE run_sup_example.sh:26-29); every other train job's params are those it had before selection existed."""
    from aoe.config.hparams import resolve_cell
    from aoe.config.cells import run_cells
    from aoe.config.cell_settings import train_params
    from aoe.config.checkpoint_selection import selection_input

    config = configs["grid"]
    cells = run_cells(config)
    selecting = [c for c in cells if selection_input(config, c)]
    assert {c.objective for c in selecting} == {"simcse_paper"} and len(selecting) == 5
    assert all(selection_input(config, c) == ["results/data/stsb/dev.parquet"] for c in selecting)
    assert not any({"select_checkpoint", "select_split", "select_every", "select_max_length", "reinit_pooler"}
                   & set(train_params(config, c.backbone, c.objective, c.trainset, c.seed, job=True))
                   for c in cells if c.objective != "simcse_paper")
    # the recipe ledger shows the value and the key that set it
    settings = {s.key: s for s in resolve_cell(config, "bert-base-uncased", "aoe", "stsb", 42).settings}
    assert (settings["select_checkpoint"].value, settings["select_checkpoint"].set_by) == ("last", "trainsets.stsb.train.select_checkpoint")


@pytest.mark.parametrize("trainset, objective, table, is_test", [
    ("stsb", "aoe", "stsb/dev", False),
    ("nli", "aoe", "stsb/dev", False),
    ("gis", "aoe", "gis/valid", False),
    ("mrpc", "angle_arxiv", "mrpc/dev", False),  # GLUE dev, the script's validation split (issue 61)
    ("qqp", "angle_arxiv", "qqp/dev", True),
    ("qnli", "angle_arxiv", "qnli/dev", True),
])
def test_the_preset_selects_on_the_validation_split_and_flags_test_splits(configs, trainset, objective, table, is_test):
    from aoe.config.cells import Cell
    from aoe.config.cell_settings import train_params
    from aoe.config.checkpoint_selection import selection_input, selection_split

    config = configs["best"]
    cell = Cell("bert-base-uncased", objective, trainset, 42)
    found = selection_split(config, cell)
    assert found["split_is_test"] is is_test
    assert selection_input(config, cell) == [f"results/paper-best-checkpoint/data/{table}.parquet"]
    params = train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed, job=True)
    assert params["select_checkpoint"] == "best" and f"{params['select_split']['dataset']}/{params['select_split']['split']}" == table


@pytest.mark.parametrize("train_keys, message", [
    ({"select_checkpoint": "best", "select_split": {"dataset": "stsb", "split": "validation"}},
     "trainsets.stsb.train.select_split: dataset 'stsb' has no split 'validation'; its splits: train, dev, test"),
    ({"select_checkpoint": "best", "select_split": {"dataset": "stsbenchmark", "split": "dev"}},
     "trainsets.stsb.train.select_split: dataset 'stsbenchmark' is not a pair dataset"),
    ({"select_checkpoint": "best"}, "trainsets.stsb.train.select_checkpoint: best needs select_split"),
    ({"select_split": SPLIT}, "trainsets.stsb.train.select_split: .* is read only by select_checkpoint: best"),
    ({"select_checkpoint": "best", "select_split": {"dataset": "stsb", "split": "train"}}, "train set 'stsb''s own training split"),
])
def test_a_selection_that_cannot_work_is_a_planning_error_naming_the_key(configs, train_keys, message):
    from aoe.config.cells import Cell
    from aoe.config.checkpoint_selection import selection_input

    config = copy.deepcopy(configs["grid"])
    config["trainsets"]["stsb"]["train"].update(train_keys)
    with pytest.raises(ConfigError, match=message):
        selection_input(config, Cell("bert-base-uncased", "aoe", "stsb", 42))

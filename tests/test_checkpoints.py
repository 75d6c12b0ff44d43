"""Faults around a training run (aoe.training.checkpoints, aoe.training.train): a finished model outlives its job, a checkpoint
of another run is never resumed, a damaged one is not loaded, degenerate data and diverged weights fail.

In-process on a tiny BERT; a job "killed" here raises out of the loop right after a checkpoint, as
tests/test_lora.py does; tests/test_train_engine.py sends the real signals to a subprocess.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from aoe.config.hparams import YAML_LOADER
import aoe.training.train
from aoe.model.tokens import build_token_cache
from aoe.training.checkpoints import FINAL, TRAINER_STATE, checkpoint_dir, save_checkpoint, step_dirs
from aoe.training.train import TrainConfig, train
from tests.train_utils import killed_after_checkpoint

WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()


def _table(path: Path, seed: int = 0, n: int = 40, score=None) -> Path:
    rng = np.random.default_rng(seed)
    pool = [" ".join(rng.choice(WORDS, size=rng.integers(2, 8))) for _ in range(50)]
    rows = [(pool[rng.integers(50)], pool[rng.integers(50)], float(rng.integers(0, 6)) if score is None else score) for _ in range(n)]
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(path, index=False)
    return path


@pytest.fixture(scope="module")
def data(tiny_bert, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("ckpt_data")
    out = {"backbone": tiny_bert}
    for name, seed in (("a", 0), ("b", 1)):  # two train tables of the same shape, other rows
        table = _table(root / f"{name}.parquet", seed)
        build_token_cache(table, tiny_bert, 16, root / f"cache_{name}")
        out[name] = (table, root / f"cache_{name}")
    return out


def _cfg(**kw) -> TrainConfig:
    base = dict(objective="aoe", pooling="cls", seed=0, learning_rate=1e-3, batch_size=8, max_steps=6, log_every=1,
                max_length=16, score_range=(0.0, 5.0))
    return TrainConfig(**{**base, **kw})


def _train(data, out: Path, table: str = "a", **kw) -> dict:
    t, cache = data[table]
    return train(cache, t, data["backbone"], out, _cfg(**kw), extra_record={"cell": {"seed": 0}})


def _killed_after_checkpoint(data, out: Path, at: int, monkeypatch, **kw) -> None:
    """Train into ``out`` until the checkpoint of step ``at`` is written, then die as a preempted job."""
    killed_after_checkpoint(lambda: _train(data, out, **kw), out, at, monkeypatch)


def _weights(folder: Path) -> dict:
    return load_file(folder / "model.safetensors")


def _no_training(monkeypatch):
    def refuse(*args, **kw):
        raise AssertionError("trained again")

    monkeypatch.setattr(aoe.training.train, "_build", refuse)


# ---- 1, 2: a finished model outlives its job; a result-neutral change costs seconds -------------


def test_a_model_deleted_after_training_is_restored_not_retrained(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0"
    summary = _train(data, out, checkpoint_every=2)
    trained = _weights(out)
    root = checkpoint_dir(out)
    assert [p.name for p in root.iterdir()] == [FINAL]  # the step checkpoints went, final stays
    # what Snakemake does to the output of a job that died before it was accepted
    shutil.rmtree(out)
    _no_training(monkeypatch)
    again = _train(data, out, checkpoint_every=2)
    assert again["restored_from"] == str(root / FINAL)
    assert {k: v for k, v in again.items() if k != "restored_from"} == summary
    assert all(torch.equal(_weights(out)[k], trained[k]) for k in trained)
    assert json.loads((out / "aoe_config.json").read_text())["summary"] == again
    assert f"delete {root} to train it again" in capsys.readouterr().out


def test_a_result_neutral_setting_reruns_in_seconds_and_is_recorded(data, tmp_path, monkeypatch):
    out = tmp_path / "seed0"
    _train(data, out, checkpoint_every=2, log_every=1)
    trained = _weights(out)
    shutil.rmtree(out)
    _no_training(monkeypatch)
    summary = _train(data, out, checkpoint_every=3, log_every=2)
    assert "restored_from" in summary
    assert all(torch.equal(_weights(out)[k], trained[k]) for k in trained)
    recorded = json.loads((out / "aoe_config.json").read_text())["train"]
    assert (recorded["checkpoint_every"], recorded["log_every"]) == (3, 2)
    # final keeps the record it was trained with: the restored folder's aoe_config.json is its own file
    assert json.loads((checkpoint_dir(out) / FINAL / "aoe_config.json").read_text())["train"]["checkpoint_every"] == 2


def test_a_run_only_setting_is_not_a_train_job_param():
    from aoe.config.hparams import RUN_ONLY
    from aoe.config.cell_settings import train_params
    from tests.workflow_utils import REPO

    import yaml

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    full = train_params(config, "bert-base-uncased", "aoe", "nli", 42)
    job = train_params(config, "bert-base-uncased", "aoe", "nli", 42, job=True)
    assert set(full) - set(job) == set(RUN_ONLY) and all(job[k] == full[k] for k in job)


def test_resuming_a_resume_neutral_change_keeps_the_checkpoint(data, tmp_path, monkeypatch):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    summary = _train(data, out, checkpoint_every=5)  # another checkpoint cadence: the same run
    assert summary["resumed_from_step"] == 4


# ---- 4: a checkpoint of other data, another backbone or another start is never resumed ----------


def test_a_checkpoint_of_another_train_table_is_not_resumed(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    capsys.readouterr()
    summary = _train(data, out, table="b", checkpoint_every=2)  # the cell now names another split
    assert summary["resumed_from_step"] is None
    said = capsys.readouterr().out
    assert "is of another run (data.table_sha256:" in said and "not resumed" in said
    # and what it trained equals a fresh run on that table
    fresh = tmp_path / "fresh"
    _train(data, fresh, table="b", checkpoint_every=2)
    assert all(torch.equal(_weights(out)[k], _weights(fresh)[k]) for k in _weights(fresh))


def test_the_old_checkpoint_survives_a_run_that_fails_before_its_first_checkpoint(data, tmp_path, monkeypatch):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    with pytest.raises(ValueError, match="fewer than one batch"):
        _train(data, out, checkpoint_every=2, batch_size=64)  # a bad setting, found at start
    assert _train(data, out, checkpoint_every=2)["resumed_from_step"] == 4  # the setting undone: nothing lost


def test_a_checkpoint_of_another_backbone_is_not_resumed(data, tmp_path, monkeypatch, tiny_bert):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    # the same tokenizer (the token cache stays valid), other weights
    from transformers import BertConfig, BertModel

    other = tmp_path / "other_backbone"
    shutil.copytree(tiny_bert, other)
    config = BertConfig.from_pretrained(tiny_bert)
    config.intermediate_size = 48
    torch.manual_seed(1)
    BertModel(config).save_pretrained(other)
    table, cache = data["a"]
    summary = train(cache, table, other, out, _cfg(checkpoint_every=2))
    assert summary["resumed_from_step"] is None


def test_identity_covers_the_start_model(data, tmp_path):
    from aoe.losses import get_objective
    from aoe.training.checkpoints import identity_changes, run_identity

    cfg = _cfg()
    objective = get_objective("aoe", format="pairs")
    table, cache = data["a"]
    a = run_identity(cfg, objective, cache, data["backbone"], {"aoe_config_sha256": "1" * 64})
    b = run_identity(cfg, objective, cache, data["backbone"], {"aoe_config_sha256": "2" * 64})
    assert identity_changes(a, b) == [f"init: '{'1' * 64}' -> '{'2' * 64}'"]
    tau = run_identity(cfg, get_objective("aoe", {"angle_tau": 10.0}, format="pairs"), cache, data["backbone"], None)
    assert "objective.angle_tau: 20.0 -> 10.0" in identity_changes(run_identity(cfg, objective, cache, data["backbone"], None), tau)


# ---- 8: a damaged checkpoint is not loaded ----------------------------------------------------


def test_a_truncated_checkpoint_falls_back_to_the_one_before(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    newest, previous = step_dirs(checkpoint_dir(out))
    assert (newest.name, previous.name) == ("step4", "step2")
    damaged = newest / "model.safetensors"
    damaged.write_bytes(damaged.read_bytes()[:1000])
    capsys.readouterr()
    summary = _train(data, out, checkpoint_every=2)
    said = capsys.readouterr().out
    assert f"checkpoint {newest} is damaged: {damaged} has 1000 bytes" in said and "falling back" in said
    assert summary["resumed_from_step"] == 2
    full = tmp_path / "full"
    _train(data, full, checkpoint_every=2)
    assert all(torch.equal(_weights(out)[k], _weights(full)[k]) for k in _weights(full))


@pytest.mark.parametrize("damage", ["optimizer.bin", TRAINER_STATE])
def test_every_checkpoint_damaged_starts_afresh_naming_the_files(data, tmp_path, monkeypatch, capsys, damage):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    for d in step_dirs(checkpoint_dir(out)):
        f = d / damage
        f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    capsys.readouterr()
    summary = _train(data, out, checkpoint_every=2)
    said = capsys.readouterr().out
    assert summary["resumed_from_step"] is None
    for d in ("step4", "step2"):
        assert f"checkpoint {checkpoint_dir(out) / d}" in said and "skipped" in said or "damaged" in said


# ---- 6: degenerate data and diverged weights fail the job --------------------------------------


@pytest.mark.parametrize(
    ("score", "objective", "match"),
    [
        (0.0, "aoe", r"nothing for objective 'aoe' to learn from 40 examples .*angle: every label is 0: no two labels "
                     r"to order; contrastive: no positive pair \(label non-zero\)"),
        (3.0, "cosent", r"cosine: every label is 0.6: no two labels to order"),  # cosent: the score rescaled by score_range
    ],
)
def test_degenerate_labels_fail_before_training(tiny_bert, tmp_path, score, objective, match):
    table = _table(tmp_path / "t.parquet", score=score)
    build_token_cache(table, tiny_bert, 16, tmp_path / "cache")
    out = tmp_path / "seed0"
    with pytest.raises(ValueError, match=match):
        train(tmp_path / "cache", table, tiny_bert, out, _cfg(objective=objective))
    assert not out.exists() and not checkpoint_dir(out).exists()


def test_equal_labels_warn_where_part_of_the_objective_still_learns(tiny_bert, tmp_path, capsys):
    # all positive pairs: AoE's contrastive term learns, its angle term ranks nothing
    table = _table(tmp_path / "t.parquet", score=1.0)
    build_token_cache(table, tiny_bert, 16, tmp_path / "cache")
    train(tmp_path / "cache", table, tiny_bert, tmp_path / "seed0", _cfg(max_steps=2))
    said = capsys.readouterr().out
    assert "WARNING" in said and "part of objective 'aoe' learns nothing here" in said and "angle: every label is 1: no two labels to order" in said


def test_weights_that_diverge_fail_the_job(data, tmp_path):
    out = tmp_path / "seed0"
    with pytest.raises(FloatingPointError, match=r"after step 1 embeds the train set's first texts to non-finite vectors .*lower learning_rate \(1000000000.0\)"):
        _train(data, out, learning_rate=1.0e9, max_steps=1, max_grad_norm=0.0)
    assert not out.exists()


def test_a_loss_of_zero_at_every_step_fails_the_job(data, tmp_path, monkeypatch):
    real = aoe.training.train._micro_batch_loss

    def nothing_to_rank(run, batch):
        loss, parts = real(run, batch)
        return loss * 0.0, {k: v * 0.0 for k, v in parts.items()}

    monkeypatch.setattr(aoe.training.train, "_micro_batch_loss", nothing_to_rank)
    out = tmp_path / "seed0"
    with pytest.raises(FloatingPointError, match="the loss was exactly 0 at every one of 6 steps"):
        _train(data, out)
    assert not out.exists()


def test_a_final_model_damaged_through_its_hard_links_is_trained_again_not_restored(data, tmp_path, capsys):
    # final/ shares its files with the model folder: a write into seed0/model.safetensors (cut
    # short here) damaged final/ too, and the rerun laid the damaged weights out as a finished model
    out = tmp_path / "seed0"
    _train(data, out, checkpoint_every=2)
    weights = out / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(4096)
    root = checkpoint_dir(out)
    assert (root / FINAL / "model.safetensors").stat().st_size == 4096  # the same file
    shutil.rmtree(out)
    again = _train(data, out, checkpoint_every=2)
    assert "restored_from" not in again
    assert f"{root / FINAL} is not restored: {root / FINAL / 'model.safetensors'} has 4096 bytes" in capsys.readouterr().out
    _weights(out)  # loads


# ---- issue 70: the code that computes the weights is part of the run --------------------------------------


def _edit_the_objective(monkeypatch, module: str = "aoe/losses/angle.py"):
    """What editing the angle loss does: the loss computes otherwise and its module's digest changes."""
    import aoe.losses.objectives
    import aoe.training.checkpoints
    from aoe.training.fingerprint import code_fingerprint

    real_loss, real_code = aoe.losses.objectives.angle_loss, code_fingerprint
    monkeypatch.setattr(aoe.losses.objectives, "angle_loss", lambda *a, **kw: 3.0 * real_loss(*a, **kw))
    edited = lambda: {**real_code(), "modules": {**real_code()["modules"], module: "e" * 16}}
    monkeypatch.setattr(aoe.training.checkpoints, "code_fingerprint", edited)


def test_the_model_records_its_code_and_the_commit(data, tmp_path):
    from aoe.training.fingerprint import code_fingerprint
    from aoe.util.provenance import git_commit

    out = tmp_path / "seed0"
    _train(data, out)
    code = json.loads((out / "aoe_config.json").read_text())["code"]
    assert {k: code[k] for k in ("sha256", "modules")} == code_fingerprint()
    assert code["git_commit"] == json.loads((out / "versions.json").read_text())["git_commit"] == git_commit()


def test_a_forced_rerun_of_an_edited_objective_trains_never_restores_the_old_weights(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0"
    _train(data, out, checkpoint_every=2)
    old = _weights(out)
    shutil.rmtree(out)  # snakemake --force: the output goes, the .ckpt folder's final/ stays
    _edit_the_objective(monkeypatch)
    capsys.readouterr()
    again = _train(data, out, checkpoint_every=2)
    said = capsys.readouterr().out
    assert "restored_from" not in again
    assert "holds a finished training of another run (code.aoe/losses/angle.py: " in said and "not restored: training again" in said
    assert any(not torch.equal(old[k], w) for k, w in _weights(out).items())
    assert json.loads((out / "aoe_config.json").read_text())["code"]["modules"]["aoe/losses/angle.py"] == "e" * 16


def test_a_checkpoint_of_other_code_is_not_resumed(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "seed0"
    _killed_after_checkpoint(data, out, 4, monkeypatch, checkpoint_every=2)
    _edit_the_objective(monkeypatch)
    capsys.readouterr()
    summary = _train(data, out, checkpoint_every=2)
    assert summary["resumed_from_step"] is None
    assert "is of another run (code.aoe/losses/angle.py: " in capsys.readouterr().out


class _FullDisk:
    """An accelerator whose save_state writes part of the weights, then fails as torch does on a full disk."""

    is_main_process = True

    def wait_for_everyone(self):
        pass

    def save_state(self, folder):
        Path(folder).mkdir(parents=True)
        (Path(folder) / "model.safetensors").write_bytes(b"\0" * 4096)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 23744 vs 23636")


def test_a_checkpoint_that_cannot_be_written_is_removed_and_named_with_the_free_space(tmp_path):
    # a full disk (a 120 MiB tmpfs under results/models) failed the job with torch's bare
    # "unexpected pos 23744 vs 23636", and the partial step folder held the space until the next run
    root = tmp_path / "seed0.ckpt"
    with pytest.raises(OSError, match=r"checkpoint .*step3 could not be written \(RuntimeError: .*unexpected pos.*\); \d+ MiB are free.*checkpoint_every"):
        save_checkpoint(_FullDisk(), root, {"id": 1}, {"step": 3}, [])
    assert list(root.iterdir()) == []


# ---- issue 71: a tree of one's own takes what another tree trained --------------------------------------------


def test_a_tree_of_its_own_lays_out_another_trees_model_of_the_same_run_and_trains_any_other(data, tmp_path, monkeypatch, capsys):
    cell = Path("models/minilm-l6/aoe/stsb/seed0")
    demo, mine, other = (tmp_path / "results" / t / cell for t in ("cpu-demo", "mine", "other"))
    _train(data, demo)
    trained = _weights(demo)
    with monkeypatch.context() as m:
        _no_training(m)
        again = _train(data, mine)
    assert again["restored_from"] == str(checkpoint_dir(demo) / FINAL)
    assert all(torch.equal(_weights(mine)[k], trained[k]) for k in trained)
    assert (mine / "model.safetensors").stat().st_ino == (demo / "model.safetensors").stat().st_ino  # links, no copy
    assert "another results tree's: hard links, nothing copied or trained" in capsys.readouterr().out
    assert "restored_from" not in _train(data, other, learning_rate=2e-3)  # another run: trained
    # the paper grid's tree (results/ itself) is looked in too
    grid = tmp_path / "results" / cell
    with monkeypatch.context() as m:
        _no_training(m)
        assert _train(data, grid)["restored_from"] == str(checkpoint_dir(demo) / FINAL)

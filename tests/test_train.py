"""The training loop on a tiny BERT: outputs, determinism, atomicity, non-finite losses, config checks."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer

import aoe.training.finetuning
import aoe.training.train
from aoe.losses import Objective, get_objective
from aoe.model.encoder import Encoder
from aoe.model.tokens import build_token_cache
from aoe.training.train import TrainConfig, train

N_PAIRS = 40
MAX_LENGTH = 16
WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()


@pytest.fixture(scope="module")
def data(tiny_bert, tmp_path_factory) -> dict:
    """~40 synthetic scored pairs (some texts repeated) and their token cache for the tiny BERT."""
    root = tmp_path_factory.mktemp("train_data")
    rng = np.random.default_rng(0)
    pool_ = [" ".join(rng.choice(WORDS, size=rng.integers(2, 8))) for _ in range(50)]
    rows = [(pool_[rng.integers(50)], pool_[rng.integers(50)], float(rng.integers(0, 6))) for _ in range(N_PAIRS)]
    table = root / "train.parquet"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(table, index=False)
    cache = root / "cache"
    build_token_cache(table, tiny_bert, MAX_LENGTH, cache)
    return {"table": table, "cache": cache, "backbone": tiny_bert}


def _cfg(**kw) -> TrainConfig:
    base = dict(
        objective="aoe",
        pooling="avg",
        seed=0,
        learning_rate=1e-3,
        batch_size=8,
        max_steps=6,
        log_every=1,
        max_length=MAX_LENGTH,
        score_range=(0.0, 5.0),
    )
    return TrainConfig(**{**base, **kw})


def _run(data, out: Path, **kw) -> dict:
    return train(data["cache"], data["table"], data["backbone"], out, _cfg(**kw), extra_record={"cell": {"seed": kw.get("seed", 0)}})


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _without_timing(metrics: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "pairs_per_s"} for m in metrics]


@dataclass(frozen=True)
class _Recording(Objective):
    """The real objective, also remembering what each batch fed it."""

    batches: list = field(default_factory=list, compare=False)

    def __call__(self, embs, labels, text_ids=None, head=None):
        self.batches.append((embs[0].shape[0], text_ids.tolist(), labels.tolist()))
        return super().__call__(embs, labels, text_ids, head)


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory) -> dict:
    """Three 6-step runs: seeds 0, 0 and 1; name -> (output folder, summary, batches seen by the objective, collated batches)."""
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        batches: list = []
        collated: list = []

        class RecordingCollator(aoe.training.train.Collator):
            def __call__(self, rows, _seen=collated):
                _seen.append(super().__call__(rows))
                return _seen[-1]

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(
                aoe.training.train,
                "get_objective",
                lambda n, o=None, format=None: _Recording(**{**asdict(get_objective(n, o, format=format)), "batches": batches}),
            )
            mp.setattr(aoe.training.train, "Collator", RecordingCollator)
            summary = _run(data, root / name / "seed", seed=seed)
        out[name] = (root / name / "seed", summary, batches, collated)
    return out


def test_output_folder_contents(runs, data):
    out, summary, _, _ = runs["a"]
    for name in ("config.json", "model.safetensors", "aoe_config.json", "versions.json", "metrics.jsonl", "tokenizer.json"):
        assert (out / name).is_file(), name
    record = json.loads((out / "aoe_config.json").read_text())
    assert record["pooling"] == "avg"
    assert record["objective"]["name"] == "aoe"
    assert record["objective"]["weights"] == {"angle": 1.0, "contrastive": 1.0}
    assert record["train"]["seed"] == 0 and record["train"]["batch_size"] == 8
    assert record["token_cache"] == json.loads((data["cache"] / "cache.json").read_text())
    assert record["summary"] == summary
    assert record["cell"] == {"seed": 0}  # extra_record
    assert summary["steps"] == 6
    assert summary["epochs_started"] == 2  # 40 pairs / 8 = 5 steps per epoch
    assert summary["examples_seen"] == 6 * 8
    versions = json.loads((out / "versions.json").read_text())
    assert versions["torch"] == version("torch")
    # the saved tokenizer tokenizes like the backbone's
    text = "A quick brown fox, unbelievably."
    assert AutoTokenizer.from_pretrained(out)(text)["input_ids"] == AutoTokenizer.from_pretrained(data["backbone"])(text)["input_ids"]
    # beside it only its checkpoint folder, which keeps the finished model as hard links (no extra disk)
    assert sorted(p.name for p in out.parent.iterdir()) == ["seed", "seed.ckpt"]
    final = out.parent / "seed.ckpt" / "final"
    assert [p.name for p in final.parent.iterdir()] == ["final"]
    for name in ("model.safetensors", "config.json", "metrics.jsonl"):
        assert (final / name).stat().st_ino == (out / name).stat().st_ino, name


def test_metrics_log_loss_components(runs):
    out, _, _, _ = runs["a"]
    metrics = _metrics(out)
    assert [m["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert [m["epoch"] for m in metrics] == [0, 0, 0, 0, 0, 1]
    for m in metrics:
        assert {"loss", "angle", "contrastive", "lr", "pairs_per_s"} <= set(m)
        assert all(math.isfinite(m[k]) for k in ("loss", "angle", "contrastive"))
        # aoe = 1 * angle + 1 * contrastive
        assert m["loss"] == pytest.approx(m["angle"] + m["contrastive"], rel=1e-5)
    # linear decay without warmup: lr after k of 6 steps = 1e-3 * (6 - k) / 6
    assert [m["lr"] for m in metrics] == pytest.approx([1e-3 * (6 - k) / 6 for k in range(1, 7)])


def test_trained_weights_change_and_pooling_is_used_by_the_encoder(runs, data):
    out, _, _, _ = runs["a"]
    before = load_file(data["backbone"] / "model.safetensors")
    after = load_file(out / "model.safetensors")
    key = next(k for k in after if "word_embeddings" in k)
    assert not torch.equal(before[key], after[key])
    enc = Encoder(out, device="cpu")
    assert enc.pooling == "avg"
    with pytest.raises(ValueError, match="trained with pooling 'avg'"):
        Encoder(out, pooling="cls", device="cpu")


def test_trained_folder_loads_in_sentence_transformers_as_is(runs):
    from sentence_transformers import SentenceTransformer

    out, _, _, _ = runs["a"]
    texts = ["A man plays a guitar.", "short", "Two dogs run across a snowy field while a child watches them."]
    ours = Encoder(out, device="cpu").encode(texts, max_length=128)
    theirs = SentenceTransformer(str(out), device="cpu").encode(texts)
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)


def test_same_seed_is_deterministic(runs):
    (a, *_), (b, *_) = runs["a"], runs["b"]
    assert _without_timing(_metrics(a)) == _without_timing(_metrics(b))
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_different_seed_differs(runs):
    (a, *_), (c, *_) = runs["a"], runs["c"]
    la = [m["loss"] for m in _metrics(a)]
    lc = [m["loss"] for m in _metrics(c)]
    assert la != lc


def test_batches_pair_texts_and_cover_each_epoch(runs, data):
    from datasets import load_from_disk

    cache = load_from_disk(str(data["cache"] / "pairs"))
    # labels are the objective's own reading of the 0..5 scores (Objective.train_labels)
    labels_of = get_objective("aoe").train_labels(torch.tensor(cache["score"]), (0.0, 5.0)).tolist()
    table_pairs = Counter((r["text_id_1"], r["text_id_2"], y) for r, y in zip(cache, labels_of))
    _, _, batches, collated = runs["a"]
    assert len(batches) == 6
    epoch0 = Counter()
    for n, ids, labels in batches[:5]:
        assert n == 8 and len(ids) == 8 and all(len(row) == 2 for row in ids) and len(labels) == 8
        # one row per pair: (text id of sentence1, text id of sentence2)
        epoch0.update((ids[r][0], ids[r][1], labels[r]) for r in range(n))
    # the first epoch shows every pair exactly once
    assert epoch0 == table_pairs
    # each padded sequence holds the tokens of the text its text id names
    tokens = {r["text_id_1"]: r["input_ids_1"] for r in cache} | {r["text_id_2"]: r["input_ids_2"] for r in cache}
    assert len(collated) == 6
    for batch, (_, ids, _) in zip(collated, batches):
        assert batch["text_ids"].tolist() == ids
        for row, pair in enumerate(ids):
            for j, tid in enumerate(pair):
                real = batch["attention_mask"][row, j].bool()
                assert batch["input_ids"][row, j][real].tolist() == tokens[tid]
    # the shuffle follows the seed
    assert [b[1] for b in runs["b"][2]] == [b[1] for b in batches]
    assert [b[1] for b in runs["c"][2]] != [b[1] for b in batches]


def test_gradient_accumulation_counts_optimizer_steps(data, tmp_path):
    out = tmp_path / "acc"
    summary = _run(data, out, gradient_accumulation_steps=2, max_steps=3)
    assert summary["steps"] == 3
    assert summary["examples_seen"] == 3 * 8  # 2 micro-batches of 4 pairs per step
    metrics = _metrics(out)
    assert [m["step"] for m in metrics] == [1, 2, 3]
    # the schedule advances once per optimizer step, not per micro-batch
    assert [m["lr"] for m in metrics] == pytest.approx([1e-3 * (3 - k) / 3 for k in range(1, 4)])


@dataclass(frozen=True)
class _NaNObjective(Objective):
    """Stands in for an objective whose loss blows up on the first batch."""

    def __call__(self, embs, labels, text_ids=None, head=None):
        nan = (embs[0] * embs[1]).sum() * float("nan")
        return nan, {"angle": nan}


def test_non_finite_loss_raises_and_leaves_nothing(data, tmp_path, monkeypatch):
    monkeypatch.setattr(aoe.training.train, "get_objective", lambda name, overrides=None, format=None: _NaNObjective(**asdict(get_objective(name, overrides, format=format))))
    out = tmp_path / "models" / "seed0"
    with pytest.raises(FloatingPointError, match=r"at step 0 .*text ids \[\[\d+") as err:
        _run(data, out)
    assert "nan" in str(err.value)
    assert not out.exists()
    assert list(out.parent.iterdir()) == []  # no temporary folder either


def test_train_config_validation():
    with pytest.raises(ValueError, match="unknown pooling 'mean'"):
        TrainConfig(objective="aoe", pooling="mean")
    with pytest.raises(ValueError, match="mixed_precision"):
        TrainConfig(objective="aoe", mixed_precision="fp8")
    with pytest.raises(ValueError, match="score_range"):
        TrainConfig(objective="aoe", score_range=(5, 0))
    cfg = TrainConfig(objective="aoe", score_range=[0, 5])
    assert cfg.score_range == (0.0, 5.0)


def test_in_batch_pool_is_checked():
    with pytest.raises(ValueError, match=r"in_batch_pool must be one of \('process', 'global', 'global_detached'\), got 'gpu'"):
        TrainConfig(objective="aoe", in_batch_pool="gpu")
    assert TrainConfig(objective="aoe").in_batch_pool == "process"
    with pytest.raises(ValueError, match="detached_processes 4 must be 0 or, with in_batch_pool global_detached"):
        TrainConfig(objective="aoe", in_batch_pool="global", detached_processes=4)


def test_global_detached_back_propagates_as_simcse():
    """SimCSE's gather (princeton-nlp/SimCSE simcse/models.py:170-192), simulated for 4 processes in one: each
    computes the whole batch's loss on the gathered embeddings, the others' slices without gradient; DDP's mean of
    their gradients is the whole loss's gradient / 4 (global's all-gather with gradients gives the whole one).
    detached_processes 4 scales the loss so one process (or 2) makes that same update."""
    from aoe.training.gathers import detached_loss_scale, splice_local

    torch.manual_seed(0)
    n, local, h = 4, 3, 6
    w = torch.randn(h, h, dtype=torch.float64, requires_grad=True)
    x = torch.randn(n * local, h, dtype=torch.float64)

    def loss_of(emb):  # in-batch InfoNCE over every row, as the SimCSE loss
        z = torch.nn.functional.normalize(emb, dim=-1)
        return torch.nn.functional.cross_entropy(20 * z @ z.roll(1, 0).T, torch.arange(len(z)))

    whole = torch.autograd.grad(loss_of(x @ w), w)[0]
    per_process = []
    for rank in range(n):
        parts = [(x[i * local:(i + 1) * local] @ w).detach() for i in range(n)]
        emb = splice_local(parts, x[rank * local:(rank + 1) * local] @ w, rank)
        assert torch.isclose(loss_of(emb), loss_of(x @ w))  # every process logs the whole batch's loss
        per_process.append(torch.autograd.grad(loss_of(emb), w)[0])
    ddp_mean = sum(per_process) / n
    assert torch.allclose(ddp_mean, whole / n)
    assert not torch.allclose(per_process[0], per_process[1])  # each reaches its own texts only
    cfg = TrainConfig(objective="simcse_sup", in_batch_pool="global_detached", detached_processes=4)
    assert [detached_loss_scale(cfg, k) for k in (1, 2, 4)] == [0.25, 0.5, 1.0]
    assert torch.allclose(detached_loss_scale(cfg, 1) * whole, ddp_mean)  # one process, SimCSE's 4-GPU update
    assert detached_loss_scale(TrainConfig(objective="aoe", in_batch_pool="global"), 4) == 1.0
    with pytest.raises(ValueError, match="rank 4 outside the 4 gathered slices"):
        splice_local(parts, parts[0], 4)


def test_eval_base_dtype_is_checked_before_training():
    with pytest.raises(ValueError, match=r"eval_base_dtype must be null or one of \['bf16', 'fp16', 'fp32'\], got 'fp8'"):
        TrainConfig(objective="aoe", finetune="qlora", eval_base_dtype="fp8")
    with pytest.raises(ValueError, match="a full fine-tuning has none"):
        TrainConfig(objective="aoe", eval_base_dtype="fp16")
    assert TrainConfig(objective="aoe", finetune="qlora", eval_base_dtype="fp16").eval_base_dtype == "fp16"


def test_one_process_trains_the_same_with_either_pool(data, tmp_path, monkeypatch):
    """With one process a slice is the whole micro-batch: process and global give the same bits;
    only global goes through the all-gather."""
    gathers, gather = [], aoe.training.train.gather_with_grad
    monkeypatch.setattr(aoe.training.train, "gather_with_grad", lambda *a: gathers.append(a[0].shape) or gather(*a))
    weights, metrics, calls = {}, {}, {}
    for pool in ("process", "global"):
        gathers.clear()
        out = tmp_path / pool
        _run(data, out, in_batch_pool=pool, max_steps=3, gradient_accumulation_steps=2)
        weights[pool], metrics[pool] = load_file(out / "model.safetensors"), _without_timing(_metrics(out))
        calls[pool] = len(gathers)
    assert calls == {"process": 0, "global": 6}  # 3 steps of 2 micro-batches
    assert metrics["process"] == metrics["global"]
    assert weights["process"].keys() == weights["global"].keys()
    assert all(torch.equal(weights["process"][k], weights["global"][k]) for k in weights["global"])


@pytest.fixture
def restore_determinism():
    """deterministic: true switches process-wide state; give the later tests theirs back."""
    env = os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[1:]
    os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    if env is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = env


def test_deterministic_runs_are_bit_identical(data, tmp_path, monkeypatch, restore_determinism):
    assert not torch.are_deterministic_algorithms_enabled()
    # the switch must be on before the model is built (cuBLAS reads its workspace setting once)
    at_load, load = [], aoe.training.finetuning.Full.load_encoder

    def recording_load(self, *args):
        at_load.append(torch.are_deterministic_algorithms_enabled())
        return load(self, *args)

    monkeypatch.setattr(aoe.training.finetuning.Full, "load_encoder", recording_load)
    for name in ("a", "b"):
        _run(data, tmp_path / name, deterministic=True, max_steps=3)
    assert at_load == [True, True]
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert _without_timing(_metrics(tmp_path / "a")) == _without_timing(_metrics(tmp_path / "b"))
    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_batch_not_divisible_by_accumulation(data, tmp_path):
    out = tmp_path / "bad"
    with pytest.raises(ValueError, match="must split into"):
        _run(data, out, batch_size=6, gradient_accumulation_steps=4)
    assert not out.exists()


def test_epoch_batches_cover_each_example_once_and_follow_the_seed():
    from aoe.training.train import epoch_batches

    batches = epoch_batches(50, 8, seed=3, epoch=0)
    flat = [i for b in batches for i in b]
    assert len(batches) == 6 and all(len(b) == 8 for b in batches)  # 50 // 8 full batches, 2 dropped
    assert len(set(flat)) == 48 and set(flat) <= set(range(50))
    assert epoch_batches(50, 8, seed=3, epoch=0) == batches
    assert epoch_batches(50, 8, seed=3, epoch=1) != batches
    assert epoch_batches(50, 8, seed=4, epoch=0) != batches


def test_length_grouped_batches_hold_similar_lengths():
    from aoe.training.train import epoch_batches

    lengths = [(i * 37) % 100 for i in range(800)]
    grouped = epoch_batches(800, 16, seed=0, epoch=0, lengths=lengths)
    plain = epoch_batches(800, 16, seed=0, epoch=0)
    assert sorted(i for b in grouped for i in b) == sorted(i for b in plain for i in b)

    def spread(batches):
        return np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches])

    assert spread(grouped) < spread(plain) / 5


@pytest.mark.slow
def test_bf16_mixed_precision_runs_on_cpu(data, tmp_path):
    # accelerate's state is per process and cannot change precision once set: a fresh process
    import subprocess
    import sys

    cfg = {**asdict(_cfg(mixed_precision="bf16", max_steps=2)), "score_range": [0.0, 5.0]}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    out = tmp_path / "bf16"
    subprocess.run(
        [sys.executable, "-m", "aoe.training.train", "--cache", str(data["cache"]), "--table", str(data["table"]),
         "--backbone", str(data["backbone"]), "--out", str(out), "--config", str(tmp_path / "cfg.json")],
        check=True, capture_output=True,
    )
    assert json.loads((out / "aoe_config.json").read_text())["train"]["mixed_precision"] == "bf16"
    assert [m["step"] for m in _metrics(out)] == [1, 2]
    assert all(math.isfinite(m["loss"]) for m in _metrics(out))


def test_warmup_steps_override_the_ratio():
    from aoe.training.train import TrainConfig, num_warmup_steps

    assert num_warmup_steps(TrainConfig(objective="aoe", warmup_ratio=0.1), 380) == 38
    assert num_warmup_steps(TrainConfig(objective="aoe", warmup_ratio=0.1, warmup_steps=50), 380) == 50
    assert num_warmup_steps(TrainConfig(objective="aoe", warmup_steps=50), 20) == 20  # never past the end


def test_a_trained_start_loads_its_weights_and_is_recorded(runs, data, tmp_path):
    """init: the run starts from a trained model's weights (a two-stage run), not the backbone's."""
    start = runs["a"][0]
    out = tmp_path / "second"
    # a vanishing rate: one step leaves the weights where they started
    cfg = _cfg(init={"trainset": "stage1"}, learning_rate=1e-12, max_steps=1)
    train(data["cache"], data["table"], data["backbone"], out, cfg, extra_record={"cell": {"seed": 0}}, init_dir=start)
    first, second, backbone = (load_file(p / "model.safetensors") for p in (start, out, Path(data["backbone"])))
    shared = sorted(set(first) & set(second) & set(backbone))
    assert shared
    assert all(torch.allclose(first[k], second[k], atol=1e-6) for k in shared)
    assert any(not torch.allclose(backbone[k], second[k], atol=1e-4) for k in shared)
    record = json.loads((out / "aoe_config.json").read_text())
    assert record["train"]["init"] == {"trainset": "stage1"}
    assert record["init"]["model"] == str(start) and record["init"]["cell"] == {"seed": 0}
    assert len(record["init"]["aoe_config_sha256"]) == 64


def test_a_trained_start_must_be_named_and_compatible(runs, data, tmp_path):
    start = runs["a"][0]
    with pytest.raises(ValueError, match="give both"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "x", _cfg(), init_dir=start)
    with pytest.raises(ValueError, match="give both"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "x", _cfg(init={"trainset": "nli"}))
    with pytest.raises(FileNotFoundError, match="no aoe_config.json"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "x", _cfg(init={"trainset": "nli"}), init_dir=tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "aoe_config.json").write_text(json.dumps({"finetune": "full", "backbone": {"hf_id": "bert-large-uncased"}}))
    with pytest.raises(ValueError, match="trained from backbone"):
        train(data["cache"], data["table"], data["backbone"], tmp_path / "x", _cfg(init={"trainset": "nli"}), init_dir=other)
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="needs full fine-tuning"):
        _cfg(init={"trainset": "nli"}, finetune="qlora")
    with pytest.raises(ValueError, match="init must be null"):
        _cfg(init={"objective": "aoe"})

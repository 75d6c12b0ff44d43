"""The training loop's faster pieces (issue 13) compute what the slower ones they replace computed.

No timings here: speed is measured by bench/speed/train_limit.py and bench/speed/train_vs_official.py.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
from transformers import AutoTokenizer

from aoe.model.encoder import embed_bucketed, pad_ids
from aoe.model.tokens import length_buckets
from aoe.training.train import _adamw, _clip_gradients


@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_equals_the_tokenizers_pad(minilm_dir, side):
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    tokenizer.padding_side = side
    seqs = tokenizer(["a", "a much longer sentence than the first one", "", "two words"])["input_ids"]
    expected = tokenizer.pad({"input_ids": seqs}, return_tensors="pt")
    got = pad_ids(seqs, tokenizer)
    for key in ("input_ids", "attention_mask"):
        assert got[key].dtype == expected[key].dtype
        assert torch.equal(got[key], expected[key])


def _model_and_grads(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 3))
    grads = [torch.randn_like(p) * 3 for p in model.parameters()]
    return model, grads


def test_fused_adamw_follows_the_default_adamw():
    a, grads = _model_and_grads()
    b = copy.deepcopy(a)
    groups = lambda m: [{"params": list(m.parameters())[:2], "weight_decay": 0.01}, {"params": list(m.parameters())[2:], "weight_decay": 0.0}]  # noqa: E731
    opt_a = _adamw(groups(a), 1e-2)
    opt_b = torch.optim.AdamW(groups(b), lr=1e-2, foreach=False)
    assert opt_a.defaults.get("fused") is True  # CPU float32 parameters take the fused kernel
    for step in range(5):
        for m in (a, b):
            for p, g in zip(m.parameters(), grads):
                p.grad = g * (step + 1)
        opt_a.step()
        opt_b.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
    # its state dict restores into a fused optimizer (checkpoints resume)
    restored = _adamw(groups(copy.deepcopy(a)), 1e-2)
    restored.load_state_dict(opt_a.state_dict())


def test_adamw_falls_back_where_fused_is_refused(monkeypatch):
    real = torch.optim.AdamW

    def refusing(params, lr, **kw):
        if kw.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")
        return real(params, lr=lr, **kw)

    monkeypatch.setattr(torch.optim, "AdamW", refusing)
    opt = _adamw([{"params": [torch.nn.Parameter(torch.zeros(3))]}], 1e-3)
    assert isinstance(opt, real) and not opt.defaults.get("fused")


def test_clip_gradients_equals_torch_clip_grad_norm(cpu_accelerator):
    accelerator = cpu_accelerator
    a, grads = _model_and_grads(1)
    b = copy.deepcopy(a)
    for m in (a, b):
        for p, g in zip(m.parameters(), grads):
            p.grad = g.clone()
    _clip_gradients(accelerator, a, 1.0)
    torch.nn.utils.clip_grad_norm_(b.parameters(), 1.0)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in a.parameters()]))
    assert total == pytest.approx(1.0, rel=1e-5)


def _padded_positions(groups, lengths):
    return sum(len(g) * max(lengths[i] for i in g) for g in groups)


def test_length_buckets_minimise_padded_positions():
    """The dynamic programme against every way of cutting the length-sorted rows into <= n runs."""
    import itertools
    import random

    rng = random.Random(0)
    for _ in range(200):
        m, n = rng.randint(1, 9), rng.randint(1, 4)
        lengths = [rng.randint(1, 20) for _ in range(m)]
        groups = length_buckets(lengths, n)
        assert sorted(i for g in groups for i in g) == list(range(m))
        assert 1 <= len(groups) <= n and all(groups)
        order = sorted(range(m), key=lambda i: -lengths[i])
        best = min(
            sum((b[t + 1] - b[t]) * lengths[order[b[t]]] for t in range(len(b) - 1))
            for k in range(1, n + 1)
            for cuts in itertools.combinations(range(1, m), k - 1)
            for b in [(0, *cuts, m)]
        )
        assert _padded_positions(groups, lengths) == best, (lengths, n, groups)
    # the STS-B-like case the option is for: a few long texts no longer pad the short ones
    lengths = [12, 14, 11, 60, 13, 10, 58, 12]
    groups = length_buckets(lengths, 2)
    assert sorted(map(sorted, groups)) == [[0, 1, 2, 4, 5, 7], [3, 6]]


@pytest.mark.parametrize(
    "model_fixture,side,pooling",
    [
        ("tiny_bert", "right", "cls"),
        ("tiny_bert", "right", "avg"),
        ("tiny_bert", "right", "first_last_avg"),
        ("tiny_llama", "left", "last"),
        ("tiny_llama", "right", "last"),
        ("tiny_llama", "left", "max"),
    ],
)
def test_bucketed_forward_equals_one_padded_pass(request, model_fixture, side, pooling):
    """Same embeddings and same gradients as the whole batch padded to its longest text."""
    from transformers import AutoModel

    model_dir = request.getfixturevalue(model_fixture)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = side
    texts = ["short", "a somewhat longer sentence about a river", "two words", "x " * 40, "and a middle one here", "a"]
    enc = pad_ids(tokenizer(texts)["input_ids"], tokenizer)
    model = AutoModel.from_pretrained(model_dir).eval()  # dropout off: one pass vs several draws no masks
    weights = torch.randn(len(texts), model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    results = []
    for buckets in (1, 3):
        model.zero_grad()
        emb = embed_bucketed(model, pooling, enc["input_ids"], enc["attention_mask"], buckets)
        (emb * weights).sum().backward()
        results.append((emb.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (e1, g1), (e3, g3) = results
    torch.testing.assert_close(e3, e1, rtol=1e-5, atol=1e-5)
    assert g1.keys() == g3.keys()
    for name in g1:
        torch.testing.assert_close(g3[name], g1[name], rtol=1e-4, atol=1e-5, msg=name)


def test_bucketed_training_follows_the_one_pass_losses(tiny_bert, tmp_path, monkeypatch):
    """A dropout-free model trains to the same losses and weights with length_buckets 1 and 4."""
    import pandas as pd
    from safetensors.torch import load_file
    from transformers import AutoModel

    from aoe.model.tokens import build_token_cache
    from aoe.training.train import TrainConfig, train

    backbone = tmp_path / "bert"
    model = AutoModel.from_pretrained(tiny_bert, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model.save_pretrained(backbone)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(backbone)
    words = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()
    rng = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(32):
        n1, n2 = (int(x) for x in torch.randint(1, 14, (2,), generator=rng))
        pick = lambda n: " ".join(words[int(i)] for i in torch.randint(0, len(words), (n,), generator=rng))  # noqa: E731
        rows.append((pick(n1), pick(n2), float(torch.randint(0, 6, (1,), generator=rng))))
    table = tmp_path / "train.parquet"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(table)
    build_token_cache(table, backbone, 24, tmp_path / "cache")
    import aoe.model.encoder

    # on a GPU the engine buckets only from 64 texts a bucket (effective_buckets); this is the bucketed path's test there too
    monkeypatch.setattr(aoe.model.encoder, "GPU_MIN_BUCKET_ROWS", 1)
    passes, one_pass = [], aoe.model.encoder.embed
    monkeypatch.setattr(aoe.model.encoder, "embed", lambda *a: passes.append(a[2].shape) or one_pass(*a))
    losses, weights, shapes = {}, {}, {}
    for buckets in (1, 4):
        passes.clear()
        cfg = TrainConfig(objective="aoe", pooling="cls", seed=0, learning_rate=1e-3, batch_size=8, max_steps=4,
                          log_every=1, max_length=24, score_range=(0.0, 5.0), length_buckets=buckets)
        out = tmp_path / f"b{buckets}"
        train(tmp_path / "cache", table, backbone, out, cfg)
        losses[buckets] = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
        weights[buckets] = load_file(out / "model.safetensors")
        # the last pass embeds 8 texts with the trained weights (aoe.training.train._check_trained), not a training step
        assert passes[-1][0] == 8
        shapes[buckets] = list(passes[:-1])
    assert len(losses[1]) == 4
    # 4 steps of 16 texts: one pass each, or 4 narrower ones
    assert len(shapes[1]) == 4 and all(s[0] == 16 for s in shapes[1])
    assert len(shapes[4]) == 16 and sum(s[0] for s in shapes[4]) == 64
    assert sum(s[0] * s[1] for s in shapes[4]) < 0.8 * sum(s[0] * s[1] for s in shapes[1])
    torch.testing.assert_close(torch.tensor(losses[4]), torch.tensor(losses[1]), rtol=1e-5, atol=1e-6)
    for name in weights[1]:
        torch.testing.assert_close(weights[4][name], weights[1][name], rtol=1e-3, atol=1e-4, msg=name)


def test_a_gpu_micro_batch_is_bucketed_only_where_each_bucket_keeps_64_texts():
    from aoe.model.encoder import GPU_MIN_BUCKET_ROWS, effective_buckets

    # the CPU keeps the config's buckets at any size; a GPU gives each bucket 64 texts or runs one pass
    assert [effective_buckets(4, rows, "cpu") for rows in (8, 64, 256)] == [4, 4, 4]
    assert GPU_MIN_BUCKET_ROWS == 64
    assert [effective_buckets(4, rows, "cuda") for rows in (8, 64, 127, 128, 200, 256, 320)] == [1, 1, 1, 2, 3, 4, 4]
    assert effective_buckets(1, 1024, "cuda") == 1

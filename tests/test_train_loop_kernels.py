"""The training loop's faster pieces (issue 13) compute what the slower ones they replace computed.

No timings here: speed is measured by bench/train_limit.py and bench/train_vs_official.py.
"""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoTokenizer

from aoe.models import pad_ids
from aoe.train import _adamw, _clip_gradients


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


def test_clip_gradients_equals_torch_clip_grad_norm():
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
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

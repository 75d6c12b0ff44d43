"""LLM backbones: prompt, last-token pooling under both paddings, LoRA / QLoRA training, adapter folders, resume.

A tiny random LLaMA (hidden 64) stands in for LLaMA-2 / Gemma: the same transformers,
peft and bitsandbytes code paths run, on the CPU, in seconds. The 4-bit path is the
real one (bitsandbytes NF4 on the CPU), never a float fallback.
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

from aoe.model.encoder import Encoder, embed
from aoe.model.tokens import tokenize_texts
from aoe.model.tokens import StaleCacheError, build_token_cache, load_token_cache
from aoe.training.checkpoints import step_dirs
from aoe.training.train import TrainConfig, train

PROMPT = 'Summarize sentence "{text}" in one word:"'
MAX_LENGTH = 24
WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()

pytest.importorskip("peft")
bnb = pytest.importorskip("bitsandbytes")


@pytest.fixture(scope="module")
def llm(tmp_path_factory, minilm_dir) -> Path:
    """A tiny random LLaMA (hidden 64, 2 layers) with MiniLM's tokenizer, saved like a materialised backbone."""
    from transformers import LlamaConfig, LlamaModel

    out = tmp_path_factory.mktemp("tiny_llm")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (minilm_dir / name).is_file():
            shutil.copy2(minilm_dir / name, out / name)
    vocab = sum(1 for _ in (minilm_dir / "vocab.txt").open(encoding="utf-8"))
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=128, pad_token_id=0,
    )
    torch.manual_seed(0)
    LlamaModel(config).save_pretrained(out, safe_serialization=True)
    (out / "backbone.json").write_text(json.dumps({"name": "tiny-llm", "source": "test"}))
    return out


@pytest.fixture(scope="module")
def data(llm, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("llm_data")
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(2, 9))) for _ in range(40)]
    rows = [(texts[rng.integers(40)], texts[rng.integers(40)], float(rng.integers(0, 6))) for _ in range(48)]
    table = root / "train.parquet"
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(table, index=False)
    cache = root / "cache"
    build_token_cache(table, llm, MAX_LENGTH, cache, prompt=PROMPT)
    return {"table": table, "cache": cache, "backbone": llm}


def _cfg(finetune: str, **kw) -> TrainConfig:
    base = dict(
        objective="aoe", pooling="last", seed=0, learning_rate=5e-3, batch_size=8, max_steps=4, log_every=1,
        max_length=MAX_LENGTH, score_range=(0.0, 5.0), finetune=finetune, prompt=PROMPT,
        lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": []},
    )
    return TrainConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("llm_models")
    out = {}
    for finetune in ("lora", "qlora"):
        train(data["cache"], data["table"], data["backbone"], root / finetune, _cfg(finetune))
        out[finetune] = root / finetune
    return out


# ---------------------------------------------------------------------------
# prompt and pooling


def test_prompt_reaches_the_tokenizer_byte_exactly(llm, data, monkeypatch):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(llm)
    seen: list[str] = []
    real = type(tok).__call__
    monkeypatch.setattr(type(tok), "__call__", lambda self, text, *a, **k: seen.extend([text] if isinstance(text, str) else text) or real(self, text, *a, **k))
    tokenize_texts(tok, ['a "quoted" {brace} text', "ünïcode"], 64, PROMPT)
    # the prompt alone is tokenized once too: how many tokens a text has left (aoe.model.tokens.max_length_floor)
    assert seen == ['Summarize sentence "" in one word:"', 'Summarize sentence "a "quoted" {brace} text" in one word:"', 'Summarize sentence "ünïcode" in one word:"']
    # training's token cache holds exactly those ids
    ds = load_token_cache(data["cache"], data["table"], llm, MAX_LENGTH, PROMPT)
    first = pd.read_parquet(data["table"])["sentence1"].iloc[0]
    assert ds[0]["input_ids_1"] == real(tok, PROMPT.replace("{text}", first))["input_ids"]
    with pytest.raises(StaleCacheError, match="prompt"):
        load_token_cache(data["cache"], data["table"], llm, MAX_LENGTH, None)


def test_truncation_shortens_the_text_not_the_prompt(llm):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(llm)
    long = " ".join(["river"] * 60)
    (ids,) = tokenize_texts(tok, [long], 20, PROMPT)
    assert len(ids) <= 20
    text = tok.decode(ids, skip_special_tokens=True)
    assert text.startswith("summarize sentence") and text.endswith('in one word : "')  # MiniLM's tokenizer lower-cases
    with pytest.raises(ValueError, match="alone needs"):
        tokenize_texts(tok, [long], 8, PROMPT)


@pytest.mark.parametrize("side", ["left", "right"])
def test_last_token_pooling_is_the_same_under_both_paddings(llm, side):
    enc = Encoder(llm, pooling="last", device="cpu", prompt=PROMPT)
    enc.tokenizer.padding_side = side
    texts = ["a", "a much longer sentence about a dog that runs in the park", "two words"]
    got = enc.encode(texts, batch_size=3, max_length=64)
    with torch.inference_mode():
        for i, text in enumerate(texts):  # each text alone: no padding at all
            ids = enc.tokenizer(PROMPT.replace("{text}", text), return_tensors="pt")
            h = enc.model(**ids).last_hidden_state[0, -1]
            np.testing.assert_allclose(got[i], h.numpy(), atol=1e-5, err_msg=f"{side}: {text}")


def test_left_padding_counts_positions_from_the_first_real_token(llm, tmp_path):
    """RoPE models (LLaMA, Gemma) are shift-invariant; a decoder with absolute positions (GPT-2) is not."""
    from transformers import AutoTokenizer, GPT2Config, GPT2Model

    tok = AutoTokenizer.from_pretrained(llm)
    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=tok.vocab_size, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()
    tok.padding_side = "left"
    batch = tok(["one", "one two three four"], padding=True, return_tensors="pt")
    assert batch["attention_mask"][0, 0] == 0
    with torch.inference_mode():
        pooled = embed(model, "last", batch["input_ids"], batch["attention_mask"])
        one = tok(["one"], return_tensors="pt")
        alone = model(input_ids=one["input_ids"], attention_mask=one["attention_mask"]).last_hidden_state[0, -1]
        # positions counted from the padding
        naive = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state[0, -1]
    np.testing.assert_allclose(pooled[0].numpy(), alone.numpy(), atol=1e-5)
    assert not np.allclose(naive.numpy(), alone.numpy(), atol=1e-3)


# ---------------------------------------------------------------------------
# LoRA / QLoRA training


def test_qlora_base_layers_are_4bit(llm):
    from aoe.model.lora import build_lora_model

    model = build_lora_model(llm, "qlora", {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": []}, "no", True, "cpu")
    linear = [m for n, m in model.named_modules() if n.endswith("q_proj.base_layer")]
    assert linear and all(isinstance(m, bnb.nn.Linear4bit) for m in linear)
    w = linear[0].weight
    assert w.quant_state.quant_type == "nf4" and w.quant_state.nested  # NF4, double quantization
    assert {n for n, p in model.named_parameters() if p.requires_grad} and all(
        "lora_" in n for n, p in model.named_parameters() if p.requires_grad
    )


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_only_lora_weights_change(trained, llm, finetune):
    out = trained[finetune]
    adapter = load_file(out / "adapter_model.safetensors")
    assert adapter and all("lora_" in k for k in adapter), "the folder holds the adapter only"
    assert not (out / "model.safetensors").exists()
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in adapter.items()), "lora_B starts at 0: it trained"
    record = json.loads((out / "aoe_config.json").read_text())
    assert record["finetune"] == finetune and record["prompt"] == PROMPT and record["pooling"] == "last"
    assert (out / record["base_model"]).resolve() == llm.resolve()
    assert (record["quantization"] or {}).get("bnb_4bit_quant_type") == ("nf4" if finetune == "qlora" else None)
    base = load_file(llm / "model.safetensors")
    enc = Encoder(out, device="cpu")
    if finetune == "lora":  # the frozen base inside the trained model is the backbone, bit for bit
        state = {k.replace("base_model.model.", "").replace(".base_layer", ""): v for k, v in enc.model.state_dict().items()}
        for k, v in base.items():
            torch.testing.assert_close(state[k], v, rtol=0, atol=0)


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_encoder_loads_the_adapter_with_its_prompt_and_it_differs_from_the_base(trained, llm, finetune):
    texts = ["apple river", "a bright green stone"]
    tuned = Encoder(trained[finetune], device="cpu").encode(texts, max_length=MAX_LENGTH)
    base = Encoder(llm, pooling="last", device="cpu", prompt=PROMPT).encode(texts, max_length=MAX_LENGTH)
    assert tuned.shape == base.shape == (2, 64)
    assert not np.allclose(tuned, base, atol=1e-4)
    with pytest.raises(ValueError, match="trained with prompt"):
        Encoder(trained[finetune], device="cpu", prompt="other {text}")
    # training wrote the sentence-transformers files: the adapter over its base, with the prompt
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(trained[finetune]), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(st.encode(texts), tuned, atol=1e-5, rtol=0)


def test_qlora_resume_equals_the_uninterrupted_run(data, tmp_path, monkeypatch):
    import aoe.training.train

    cfg = _cfg("qlora", max_steps=6, checkpoint_every=3)
    full = tmp_path / "full"
    train(data["cache"], data["table"], data["backbone"], full, cfg)
    # interrupted: stop right after the step-3 checkpoint, as a preempted job would
    killed = tmp_path / "killed"
    real_save = aoe.training.train._save_checkpoint

    def save_then_die(*args, **kw):
        real_save(*args, **kw)
        raise KeyboardInterrupt("preempted")

    monkeypatch.setattr(aoe.training.train, "_save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train(data["cache"], data["table"], data["backbone"], killed, cfg)
    monkeypatch.undo()
    ckpt = step_dirs(aoe.training.train.checkpoint_dir(killed))[0]
    saved = load_file(next(ckpt.glob("model*.safetensors")))
    assert saved and all("lora_" in k for k in saved), "a LoRA checkpoint holds the adapters, not the 4-bit base"
    summary = train(data["cache"], data["table"], data["backbone"], killed, cfg)
    assert summary["resumed_from_step"] == 3
    losses = lambda d: [json.loads(x)["loss"] for x in (d / "metrics.jsonl").read_text().splitlines()]
    np.testing.assert_allclose(losses(killed), losses(full), rtol=1e-5)
    a, b = load_file(full / "adapter_model.safetensors"), load_file(killed / "adapter_model.safetensors")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)


def test_a_qlora_adapter_evaluates_on_the_unquantized_base_when_its_record_says_so(trained, tmp_path):
    # the official LLaMA evaluation: fp16 base under the adapter (eval.py --load_kbit 16); fp32 here, on the CPU
    out = tmp_path / "adapter"
    shutil.copytree(trained["qlora"], out)
    record = json.loads((out / "aoe_config.json").read_text())
    record["base_model"] = str((trained["qlora"] / record["base_model"]).resolve())  # the copy sits elsewhere
    quantized = Encoder(out, device="cpu")
    record["train"]["eval_base_dtype"] = "fp32"
    (out / "aoe_config.json").write_text(json.dumps(record))
    full = Encoder(out, device="cpu")
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in quantized.model.modules())
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in full.model.modules())
    texts = ["apple river", "a bright green stone"]
    a, b = quantized.encode(texts, max_length=MAX_LENGTH), full.encode(texts, max_length=MAX_LENGTH)
    assert a.shape == b.shape and not np.allclose(a, b, atol=1e-6)  # NF4 rounding is gone


def test_a_qlora_run_computes_in_float32_as_the_official_load_kbit_4_unless_configured(llm, trained):
    from aoe.model.encoder import bnb_config
    from aoe.model.lora import build_lora_model, quantization_settings

    # the official --load_kbit 4 (fcb6223:angle_emb/angle.py:506): float32 whatever the run's mixed precision
    assert quantization_settings("qlora", "fp16")["bnb_4bit_compute_dtype"] == "float32"
    assert _cfg("qlora").qlora_compute_dtype == "fp32"
    assert json.loads((trained["qlora"] / "aoe_config.json").read_text())["quantization"]["bnb_4bit_compute_dtype"] == "float32"
    # the alternatives: a fixed dtype, or the run's autocast dtype (float32 under "no")
    for compute, mixed, torch_dtype in [("bf16", "no", torch.bfloat16), ("fp16", "bf16", torch.float16),
                                        ("mixed_precision", "fp16", torch.float16), ("mixed_precision", "no", torch.float32)]:
        assert bnb_config(quantization_settings("qlora", mixed, compute)).bnb_4bit_compute_dtype == torch_dtype
    assert quantization_settings("lora", "fp16", "bf16") is None
    with pytest.raises(ValueError, match="qlora_compute_dtype"):
        quantization_settings("qlora", "no", "float32")
    with pytest.raises(ValueError, match="qlora_compute_dtype"):
        _cfg("qlora", qlora_compute_dtype="half")
    # the BitsAndBytesConfig built reaches every 4-bit layer
    for compute, torch_dtype in [("fp32", torch.float32), ("bf16", torch.bfloat16)]:
        model = build_lora_model(llm, "qlora", {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": []}, "no", False, "cpu", compute)
        layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
        assert layers and {m.compute_dtype for m in layers} == {torch_dtype}


# ---------------------------------------------------------------------------
# the official evaluation's rewrite of each text (fcb6223:eval.py:134-139)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A man plays a guitar", "A man plays a guitar."),  # a final '.' where none of .?"' ends it
        ("A man plays a guitar.", "A man plays a guitar."),
        ('He said "stop"', "He said 'stop'"),  # ends in '"': no '.', then '"' -> "'"
        ('a "quoted" word here', "a 'quoted' word here."),
        ("Is it raining?", "Is it raining."),  # a final '?' becomes '.'
        ('Did he say "why?"', "Did he say 'why?'"),  # the '?' is not last once the quote is
        ("it's the dog'", "it's the dog'"),
        ("", ""),
        ("wait!", "wait!."),  # '!' is not among .?"'
    ],
)
def test_official_eval_text_rewrites_as_the_official_eval_py(text, expected):
    from aoe.model.prompts import eval_text, official_eval_text

    assert official_eval_text(text) == expected
    assert eval_text(text, "official_eval_py") == expected and eval_text(text, "raw") == text


def test_eval_text_rewrites_prompted_texts_only_and_keys_the_embedding_cache(llm, trained, tmp_path):
    from aoe.evaluate.run import cached_encoder

    texts = ['a "bright" stone', "is the river green?", "apple."]
    rewritten = ["a 'bright' stone.", "is the river green.", "apple."]
    raw = Encoder(llm, pooling="last", device="cpu", prompt=PROMPT)
    official = Encoder(llm, pooling="last", device="cpu", prompt=PROMPT, eval_text="official_eval_py")
    assert official.eval_text == "official_eval_py"
    np.testing.assert_array_equal(official.encode(texts, max_length=MAX_LENGTH), raw.encode(rewritten, max_length=MAX_LENGTH))
    assert not np.allclose(official.encode(texts[:1], max_length=MAX_LENGTH), raw.encode(texts[:1], max_length=MAX_LENGTH), atol=1e-4)
    # a trained model reads its prompt from its record, and gets the rewrite too
    tuned = Encoder(trained["lora"], device="cpu", eval_text="official_eval_py")
    np.testing.assert_array_equal(
        tuned.encode(texts, max_length=MAX_LENGTH), Encoder(trained["lora"], device="cpu").encode(rewritten, max_length=MAX_LENGTH)
    )
    # no prompt, no rewrite: the official eval.py rewrites only for a prompted LLM (BERT stays as it is)
    bare = Encoder(llm, pooling="last", device="cpu", eval_text="official_eval_py")
    assert bare.eval_text == "raw"
    unprompted = Encoder(llm, pooling="last", device="cpu")
    np.testing.assert_array_equal(bare.encode(texts, max_length=MAX_LENGTH), unprompted.encode(texts, max_length=MAX_LENGTH))
    with pytest.raises(ValueError, match="eval_text"):
        Encoder(llm, pooling="last", device="cpu", prompt=PROMPT, eval_text="rewritten")

    # the cache is keyed on the table's texts: what the model read must be in the model key
    def cache_dir(**kw):
        return cached_encoder(llm, "last", 8, MAX_LENGTH, tmp_path, "cpu", **kw)[2].dir

    assert cache_dir(prompt=PROMPT, eval_text="official_eval_py") != cache_dir(prompt=PROMPT)
    assert cache_dir(prompt=PROMPT, eval_text="raw") == cache_dir(prompt=PROMPT)  # earlier caches keep their keys
    assert cache_dir(eval_text="official_eval_py") == cache_dir()  # nothing rewritten
    _, encode, _ = cached_encoder(llm, "last", 8, MAX_LENGTH, tmp_path, "cpu", prompt=PROMPT, eval_text="official_eval_py")
    np.testing.assert_array_equal(encode(texts), official.encode(texts, batch_size=8, max_length=MAX_LENGTH))

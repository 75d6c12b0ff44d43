"""Released checkpoints (aoe.model.released, rule fetch_released): a local stand-in of the hub (a tiny BERT, and a
tiny LLaMA LoRA adapter trained as a causal LM over its named base), evaluated as the official code embeds them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.fake_hub import commit_of, folder_files, serve

TEXTS = ["A man is playing a guitar.", "Ukraine offers unilateral ceasefire", "two dogs run"]
PROMPT = 'Summarize sentence "{text}" in one word:"'


@pytest.fixture(scope="module")
def hub_repos(tmp_path_factory, tiny_bert, tiny_llama):
    """Repositories laid out as the hub serves them: a full BERT checkpoint (safetensors and a stale
    .bin twin), a LLaMA base, and a LoRA adapter (pickled .bin, no tokenizer) trained over the
    base as AutoModelForCausalLM with a LoRA on the LM head too, as angle-emb 0.1.1 saves them."""
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import LlamaForCausalLM

    root = tmp_path_factory.mktemp("hub")
    bert = root / "bert"
    shutil.copytree(tiny_bert, bert)
    (bert / "pytorch_model.bin").write_bytes(b"not loaded: a safetensors twin exists")
    base = root / "llama-base"
    torch.manual_seed(0)
    causal = LlamaForCausalLM.from_pretrained(tiny_llama)
    causal.save_pretrained(base, safe_serialization=True)
    for f in tiny_llama.iterdir():
        if f.is_file() and not f.name.startswith(("model", "config")):
            shutil.copy2(f, base / f.name)
    adapter = root / "adapter"
    peft_model = get_peft_model(
        causal,
        LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "lm_head"], init_lora_weights=False),
    )
    peft_model.save_pretrained(adapter, safe_serialization=False)
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "org/llama-base"
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    return {"org/bert-nli": bert, "org/llama-base": base, "org/llama-adapter": adapter}


def _spec_full(**kw):
    return {"hf_id": "org/bert-nli", "revision": "main", "backbone": "bert-base-uncased", "pooling": "cls_avg", **kw}


def _spec_adapter(**kw):
    return {
        "hf_id": "org/llama-adapter", "revision": "main", "backbone": "llama-2-7b", "adapter": True,
        "base": {"hf_id": "org/llama-base", "revision": "main"}, "pooling": "last", "prompt": PROMPT, "base_dtype": "fp32", **kw,
    }


def _official_llm_embeddings(base: Path, adapter: Path, texts: list[str]) -> np.ndarray:
    """What angle-emb 0.1.1 computes: the causal LM with its adapter, hidden_states[-1] at the last
    real token of the prompted text (angle_emb/angle.py:347-361)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapter).eval()
    out = []
    with torch.inference_mode():
        for text in texts:
            enc = tok(PROMPT.format(text=text), return_tensors="pt")
            hidden = model(**enc, output_hidden_states=True).hidden_states[-1]
            out.append(hidden[0, -1].numpy())
    return np.stack(out)


def test_full_checkpoint_from_the_hub_at_a_commit(monkeypatch, hub_repos, tmp_path, tiny_bert):
    from aoe.model.encoder import Encoder
    from aoe.model.released import materialize_released

    repos = {k: folder_files(v) for k, v in hub_repos.items()}
    with serve(monkeypatch, repos) as hub:
        record = materialize_released("bert-nli", _spec_full(), tmp_path / "bert-nli")
    out = tmp_path / "bert-nli"
    assert record["commit"] == commit_of("org/bert-nli") and record["revision"] == "main"
    assert all(f"/resolve/{record['commit']}/" in p for _, p in hub.requests if "/resolve/" in p)
    # the safetensors weights, never their pickled twin; the file hashes as published
    assert not (out / "pytorch_model.bin").exists() and "model.safetensors" in record["files"]
    assert json.loads((out / "released.json").read_text()) == record
    assert json.loads((out / "aoe_config.json").read_text())["pooling"] == "cls_avg"
    # it embeds as the same weights loaded by hand with the configured pooling
    ours = Encoder(out, device="cpu").encode(TEXTS)
    assert np.allclose(ours, Encoder(tiny_bert, pooling="cls_avg", device="cpu").encode(TEXTS), atol=1e-6)
    assert [p.name for p in tmp_path.iterdir()] == ["bert-nli"]


def test_causal_lm_adapter_embeds_as_the_official_code(monkeypatch, hub_repos, tmp_path):
    """The adapter over its named base, converted to an adapter over the decoder, gives the official
    hidden_states[-1] last-token embeddings of the prompted texts; its base comes from the hub too."""
    from aoe.model.encoder import Encoder
    from aoe.model.released import materialize_released

    with serve(monkeypatch, {k: folder_files(v) for k, v in hub_repos.items()}):
        record = materialize_released("llama-nli", _spec_adapter(), tmp_path / "llama-nli")
    out = tmp_path / "llama-nli"
    assert record["base"]["commit"] == commit_of("org/llama-base") and record["base"]["named_by_adapter"] == "org/llama-base"
    conv = record["adapter_conversion"]
    assert conv["from"] == "causal_lm" and conv["renamed_tensors"] == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)
    assert any("lm_head" in k for k in conv["dropped_tensors"]) and "adapter_model.bin" in record["files"]
    assert record["tokenizer_from"] == "base" and (out / "tokenizer_config.json").is_file()
    assert json.loads((out / "adapter_config.json").read_text())["task_type"] == "FEATURE_EXTRACTION"
    enc = Encoder(out, device="cpu")
    assert enc.prompt == PROMPT and enc.pooling == "last"
    ours = enc.encode(TEXTS, batch_size=2)
    official = _official_llm_embeddings(hub_repos["org/llama-base"], hub_repos["org/llama-adapter"], TEXTS)
    assert np.abs(ours - official).max() < 1e-5
    # the adapter matters: the base alone embeds differently
    plain = Encoder(out / "base", pooling="last", prompt=PROMPT, device="cpu").encode(TEXTS)
    assert np.abs(plain - official).max() > 1e-3


def test_local_stand_in_is_used_without_the_hub(hub_repos, tmp_path):
    """``path`` (a copy laid out as the hub serves it) and ``base.path``: no request is made."""
    from aoe.model.encoder import Encoder
    from aoe.model.released import materialize_released

    spec = _spec_adapter(path=str(hub_repos["org/llama-adapter"]), base={"path": str(hub_repos["org/llama-base"])})
    record = materialize_released("llama-nli", spec, tmp_path / "llama-nli")
    assert record["source"] == "path" and record["copy_of"] == "org/llama-adapter" and record["base"]["source"] == "path"
    assert Encoder(tmp_path / "llama-nli", device="cpu").encode(TEXTS[:1]).shape == (1, 64)


def test_unreachable_hub_names_the_checkpoint_and_the_setting(monkeypatch, hub_repos, tmp_path):
    from aoe.model.released import ReleasedError, materialize_released

    with serve(monkeypatch, {}):  # a hub that has none of them
        with pytest.raises(ReleasedError, match=r"(?s)released checkpoint 'bert-nli': cannot fetch org/bert-nli@main .*"
                                                r"huggingface-cli download org/bert-nli --revision main --local-dir DIR\) "
                                                r"and set released\.checkpoints\.bert-nli\.path: DIR"):
            materialize_released("bert-nli", _spec_full(), tmp_path / "bert-nli")
    # the adapter reachable, its base not: the error names the base's setting
    with serve(monkeypatch, {"org/llama-adapter": folder_files(hub_repos["org/llama-adapter"])}):
        with pytest.raises(ReleasedError, match=r"(?s)'llama-nli': its base: .*org/llama-base.*set released\.checkpoints\.llama-nli\.base\.path: DIR"):
            materialize_released("llama-nli", _spec_adapter(), tmp_path / "llama-nli")
    # no hub at all (a closed port): the same message, with the connection error
    import huggingface_hub.constants as const

    dead = "http://127.0.0.1:9"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    monkeypatch.setattr(const, "ENDPOINT", dead)
    monkeypatch.setattr(const, "HF_HUB_OFFLINE", False)
    with pytest.raises(ReleasedError, match=r"(?s)cannot fetch org/bert-nli@main .*set released\.checkpoints\.bert-nli\.path: DIR"):
        materialize_released("bert-nli", _spec_full(), tmp_path / "bert-nli")
    assert list(tmp_path.iterdir()) == []  # nothing half-made left behind


def test_layout_errors_name_the_fix(hub_repos, tmp_path):
    from aoe.model.released import ReleasedError, materialize_released

    with pytest.raises(ReleasedError, match=r"released\.checkpoints\.x: the checkpoint is a LoRA adapter; set adapter: true and base"):
        materialize_released("x", _spec_full(path=str(hub_repos["org/llama-adapter"])), tmp_path / "x")
    wrong_base = _spec_adapter(path=str(hub_repos["org/llama-adapter"]), base={"hf_id": "org/other-base"})
    with pytest.raises(ReleasedError, match=r"base\.hf_id is 'org/other-base', but the adapter was trained on 'org/llama-base'"):
        materialize_released("x", wrong_base, tmp_path / "x")
    with pytest.raises(ReleasedError, match=r"released\.checkpoints\.x\.path .* is not a folder"):
        materialize_released("x", _spec_full(path=str(tmp_path / "nowhere")), tmp_path / "x")


def test_file_choice_prefers_safetensors():
    from aoe.model.released import released_files

    assert released_files(["config.json", "model.safetensors", "pytorch_model.bin", "onnx/model.onnx", "README.md", "vocab.txt"]) == [
        "config.json", "model.safetensors", "vocab.txt"]
    assert released_files(["adapter_config.json", "adapter_model.bin"]) == ["adapter_config.json", "adapter_model.bin"]
    assert released_files(["adapter_config.json", "adapter_model.bin", "adapter_model.safetensors"]) == [
        "adapter_config.json", "adapter_model.safetensors"]

"""Tiny random generators for the LLM-supervised tests and bench/parity/generate_compat.py.

``build_tiny_lm``: a causal LLaMA (hidden 32, 2 layers) with a byte-level BPE tokenizer trained on a
few sentences. ``build_remote_code_lm``: the same weights laid out as a remote-code model the way
THUDM/chatglm-6b is (its classes in .py files beside the weights, the generating class registered
only as AutoModel), which transformers loads only with trust_remote_code. Both work under the
pipeline's transformers and under the 4.33 of envs/chatglm.yaml.
"""

from __future__ import annotations

import json
from pathlib import Path

TEXTS = [
    "A plane is taking off.",
    "A man is playing a large flute.",
    "Three men are playing chess.",
    "A woman is slicing an onion with a very sharp knife in the kitchen.",
    "Some men are fighting.",
]

_CONFIGURATION = '''from transformers import LlamaConfig


class TinyGlmConfig(LlamaConfig):
    model_type = "tinyglm"
'''

_MODELING = '''from transformers import LlamaForCausalLM

from .configuration_tinyglm import TinyGlmConfig


class TinyGlmForConditionalGeneration(LlamaForCausalLM):
    config_class = TinyGlmConfig
'''


def build_tiny_lm(out: Path, name: str = "tiny-lm") -> Path:
    """A tiny random causal LLaMA with a byte-level BPE tokenizer (BOS, EOS, PAD), and a backbone.json."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from aoe.llm_supervised.prompts import PAPER_PROMPTS, render_prompt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    corpus = TEXTS + [render_prompt(t, "x", 1) for t in PAPER_PROMPTS.values()]
    bpe.train_from_iterator(corpus, vocab_size=400, min_frequency=1, special_tokens=["<pad>", "<s>", "</s>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    # a BOS in front of every prompt, as LLaMA's and Gemma's tokenizers add one
    tok.backend_tokenizer.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.bos_token_id)])
    tok.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=256, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, initializer_range=0.2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)
    (out / "backbone.json").write_text(json.dumps({"source": "path", "from": "tests", "name": name}))
    return out


def build_remote_code_lm(out: Path, trusted: bool = True) -> Path:
    """``build_tiny_lm``'s model as a remote-code checkpoint registered only as AutoModel; its
    backbone.json records trust_remote_code as fetch_backbone does for such a backbone."""
    out = build_tiny_lm(out, name="tiny-remote")
    (out / "configuration_tinyglm.py").write_text(_CONFIGURATION)
    (out / "modeling_tinyglm.py").write_text(_MODELING)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(
        model_type="tinyglm",
        architectures=["TinyGlmForConditionalGeneration"],
        auto_map={
            "AutoConfig": "configuration_tinyglm.TinyGlmConfig",
            "AutoModel": "modeling_tinyglm.TinyGlmForConditionalGeneration",
        },
    )
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    record = {"source": "path", "from": "tests", "name": "tiny-remote"}
    if trusted:
        record["trust_remote_code"] = True
    (out / "backbone.json").write_text(json.dumps(record))
    return out

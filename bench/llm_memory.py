"""GPU memory of a QLoRA training process for LLaMA-2 7B / 13B, and the check of the formula on a real model.

    python bench/llm_memory.py [--measure results/backbones/gemma3-270m] [--out results/bench/llm_memory.json]

The LLaMA-2 rows are computed (no GPU needed) from the architecture and the
recipe of config.yaml (micro-batch 120 pairs = 240 texts x 50 tokens per GPU,
LoRA r 32 on every linear layer, bf16 compute, gradient checkpointing):

- 4-bit weights: NF4 is 4 bits a weight plus, with double quantization, an 8-bit
  scale per 64 weights and a float32 scale per 256 scales; the embedding matrix
  stays in bf16 (bitsandbytes quantizes linear layers only).
- LoRA: r x (in + out) parameters per adapted linear layer, float32, with their
  gradient and AdamW's two moments: 16 bytes a parameter.
- Activations with checkpointing: every layer's input (tokens x hidden, bf16) is
  kept; one layer is recomputed at a time during backward (its MLP intermediates,
  attention projections and its weights dequantized to bf16).

``--measure`` loads a real backbone in 4-bit on the CPU and compares the formula's
weight bytes and LoRA parameter count with bitsandbytes' and peft's own numbers.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

GB = 1e9


@dataclass
class Arch:
    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


LLAMA2 = [
    Arch("llama-2-7b", 4096, 11008, 32, 32, 32, 128, 32000),
    Arch("llama-2-13b", 5120, 13824, 40, 40, 40, 128, 32000),
]


def linear_shapes(a: Arch) -> list[tuple[int, int]]:
    """(in, out) of the seven linear layers of one decoder block."""
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim
    return [(a.hidden, q), (a.hidden, kv), (a.hidden, kv), (q, a.hidden),
            (a.hidden, a.intermediate), (a.hidden, a.intermediate), (a.intermediate, a.hidden)]


def nf4_bytes_per_weight() -> float:
    # 4 bits + 8-bit absmax per 64-weight block + fp32 absmax per 256 blocks (double quantization)
    return 0.5 + 1 / 64 + 4 / (64 * 256)


def estimate(a: Arch, tokens: int, r: int = 32) -> dict:
    shapes = linear_shapes(a)
    linear_params = a.layers * sum(i * o for i, o in shapes)
    weights = linear_params * nf4_bytes_per_weight() + a.vocab * a.hidden * 2
    lora_params = a.layers * sum(r * (i + o) for i, o in shapes)
    lora = lora_params * 16
    kept = tokens * a.hidden * 2 * a.layers
    one_layer = (
        tokens * a.intermediate * 2 * 3  # gate, up, activation
        + tokens * (a.heads + 2 * a.kv_heads) * a.head_dim * 2 * 2  # q, k, v and the attention output
        + tokens * a.hidden * 2 * 4  # norms, residuals, o_proj output
        + sum(i * o for i, o in shapes) * 2  # the block's weights dequantized to bf16
    )
    total = weights + lora + kept + one_layer
    return {
        "backbone": a.name,
        "tokens_per_micro_batch": tokens,
        "weights_4bit_gb": weights / GB,
        "lora_params_m": lora_params / 1e6,
        "lora_with_adamw_gb": lora / GB,
        "checkpointed_activations_gb": kept / GB,
        "recomputed_layer_gb": one_layer / GB,
        "total_gb": total / GB,
        "fits_40gb": total < 40 * GB * 0.9,
        "fits_80gb": total < 80 * GB * 0.9,
    }


def measure(backbone: Path) -> dict:
    """bitsandbytes' and peft's own numbers for a real backbone in 4-bit, beside the formula's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig

    from aoe.lora import quantization_settings
    from aoe.models import load_base_model

    cfg = AutoConfig.from_pretrained(backbone)
    arch = Arch(backbone.name, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
                cfg.num_key_value_heads, getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads), cfg.vocab_size)
    start = time.perf_counter()
    model = load_base_model(backbone, quantization_settings("qlora", "no"), "cpu")
    load_s = time.perf_counter() - start
    # the embedding stays in float32 on the CPU (compute dtype float32), bf16 in the GPU formula
    embed_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "embed" in n)
    quantized = model.get_memory_footprint() - embed_bytes
    formula = estimate(arch, tokens=1)
    formula_linear = formula["weights_4bit_gb"] * GB - arch.vocab * arch.hidden * 2
    peft_model = get_peft_model(model, LoraConfig(r=32, lora_alpha=32, target_modules="all-linear"))
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    return {
        "backbone": str(backbone),
        "load_seconds": load_s,
        "linear_4bit_bytes_measured": int(quantized),
        "linear_4bit_bytes_formula": int(formula_linear),
        "lora_params_measured": int(trainable),
        "lora_params_formula": int(formula["lora_params_m"] * 1e6),
        "torch": torch.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--micro-batch-pairs", type=int, default=120, help="pairs per GPU per micro-batch (official: 120)")
    parser.add_argument("--max-length", type=int, default=50, help="tokens per text (official: 50)")
    parser.add_argument("--measure", type=Path, help="a backbone folder to load in 4-bit and check the formula on")
    parser.add_argument("--out", type=Path, default=Path("results/bench/llm_memory.json"))
    args = parser.parse_args()
    tokens = args.micro_batch_pairs * 2 * args.max_length
    rows = [estimate(a, tokens) for a in LLAMA2]
    print(f"QLoRA training memory per GPU, {args.micro_batch_pairs} pairs x 2 texts x {args.max_length} tokens a micro-batch")
    print(f"{'backbone':<12} {'4-bit W':>8} {'LoRA M':>7} {'LoRA+Adam':>9} {'ckpt act':>8} {'layer':>6} {'total':>6}  40GB  80GB")
    for r in rows:
        print(f"{r['backbone']:<12} {r['weights_4bit_gb']:>7.2f}G {r['lora_params_m']:>7.1f} {r['lora_with_adamw_gb']:>8.2f}G "
              f"{r['checkpointed_activations_gb']:>7.2f}G {r['recomputed_layer_gb']:>5.2f}G {r['total_gb']:>5.1f}G  "
              f"{'yes' if r['fits_40gb'] else 'no':>4}  {'yes' if r['fits_80gb'] else 'no':>4}")
    record = {"estimates": rows, "assumptions": {"micro_batch_pairs": args.micro_batch_pairs, "max_length": args.max_length,
                                                 "lora_r": 32, "archs": [asdict(a) for a in LLAMA2]}}
    if args.measure:
        m = measure(args.measure)
        record["check"] = m
        print(f"\ncheck on {m['backbone']}: 4-bit linear bytes measured {m['linear_4bit_bytes_measured']:,} vs formula "
              f"{m['linear_4bit_bytes_formula']:,}; LoRA params measured {m['lora_params_measured']:,} vs formula "
              f"{m['lora_params_formula']:,}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

"""GPU memory of a QLoRA training process for LLaMA-2 7B / 13B, each job's host memory, and the check of the formula on a real model.

    python bench/gpu/llm_memory.py [--configfile PRESET ...] [--measure results/backbones/gemma3-270m] [--out bench/out/llm_memory.json]

The formulas live in aoe/config/memory.py; the host table puts each backbone's training and STS
evaluation need beside what its ``resources`` request (tests/test_workflow.py asserts the
request covers the need for every job of ``snakemake -n all``).

The LLaMA-2 rows are computed (no GPU needed) by aoe.config.memory's GPU model (its docstrings have the terms;
tests/test_memory.py holds it to the committed GPU runs, bench/gpu/results/llama_cells.json, within 10%)
for the recipe of config.yaml: a training process at micro-batch 160 pairs = 320 texts x 45 tokens, LoRA r 32
on every linear layer, NF4 weights, fp16 autocast, gradient checkpointing; an evaluation of the fp16 base
under the adapter at the STS batches (64 texts; 3,648 tokens in STS-B test's longest batch with MiniLM's
tokenizer, the measured runs') and at a full batch of 64 x 512 tokens (the evaluation's max_length: an
upper bound). "on GPU" adds the allocator's cached blocks and the CUDA context; a card fits at 95% of it.

``--measure`` loads a real backbone in 4-bit on the CPU and compares the formula's
weight bytes and LoRA parameter count with bitsandbytes' and peft's own numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aoe.config.memory import ARCHS, GB, GPU_CARDS_GB, Arch, eval_gpu_estimate, host_need_gb, nf4_bytes_per_weight, qlora_gpu_estimate  # noqa: E402

LLAMA2 = ["llama-2-7b", "llama-2-13b"]


STS_BATCH_TOKENS = 3648  # STS-B test's longest batch of 64 texts (bench/gpu/results/llama_cells.json batch_tokens_max)
FULL_BATCH_TOKENS = 64 * 512  # evaluation.sts batch_size x max_length (config.yaml): every text at the limit


def estimate(name: str, tokens: int, r: int = 32) -> dict:
    return qlora_gpu_estimate(name, ARCHS[name], tokens, r)


def eval_estimates(name: str, r: int = 32) -> dict:
    return {k: eval_gpu_estimate(name, ARCHS[name], t, r) for k, t in (("sts_b", STS_BATCH_TOKENS), ("full_batch", FULL_BATCH_TOKENS))}


def host_table(config: dict) -> list[dict]:
    """Each backbone x model-loading rule of ``config``: the host need beside what the rule requests."""
    rows = []
    for name, spec in config["backbones"].items():
        if name not in ARCHS:
            continue
        res = spec["resources"]
        gpus = max(1, res["gpus"])
        rows.append({"backbone": name, "rule": "train_model", "processes": gpus,
                     "need_gb": host_need_gb(name, "train_model", gpus), "requested_gb": res["mem_mb"] / 1000})
        rows.append({"backbone": name, "rule": "evaluate_sts", "processes": 1,
                     "need_gb": host_need_gb(name, "evaluate_sts"), "requested_gb": res["eval_mem_mb"] / 1000})
    return rows


def measure(backbone: Path) -> dict:
    """bitsandbytes' and peft's own numbers for a real backbone in 4-bit, beside the formula's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig

    from aoe.model.encoder import load_base_model
    from aoe.model.lora import quantization_settings

    cfg = AutoConfig.from_pretrained(backbone)
    arch = Arch("llama", cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
                cfg.num_key_value_heads, getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads), cfg.vocab_size,
                4, cfg.tie_word_embeddings)
    start = time.perf_counter()
    model = load_base_model(backbone, quantization_settings("qlora", "no"), "cpu")
    load_s = time.perf_counter() - start
    # the embedding stays in float32 on the CPU (compute dtype float32), bf16 in the GPU formula
    embed_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if "embed" in n)
    quantized = model.get_memory_footprint() - embed_bytes
    formula = qlora_gpu_estimate(backbone.name, arch, tokens=1)
    formula_linear = arch.layers * sum(i * o for i, o in arch.linear_shapes()) * nf4_bytes_per_weight()
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
    parser.add_argument("--micro-batch-pairs", type=int, default=160, help="pairs per GPU per micro-batch (the official Oct-2023 command: 160)")
    parser.add_argument("--max-length", type=int, default=45, help="tokens per text (the official Oct-2023 command: 45)")
    parser.add_argument("--measure", type=Path, help="a backbone folder to load in 4-bit and check the formula on")
    parser.add_argument("--configfile", nargs="*", default=[], help="presets merged over config.yaml, as snakemake --configfile")
    parser.add_argument("--out", type=Path, default=Path("bench/out/llm_memory.json"))
    args = parser.parse_args()
    tokens = args.micro_batch_pairs * 2 * args.max_length
    rows = [estimate(name, tokens) for name in LLAMA2]
    evals = {name: eval_estimates(name) for name in LLAMA2}
    cards = " ".join(f"{c:>4}" for c in GPU_CARDS_GB)
    print(f"QLoRA training memory per GPU process, {args.micro_batch_pairs} pairs x 2 texts x {args.max_length} tokens a micro-batch (GB)")
    print(f"{'backbone':<12} {'4-bit W':>8} {'LoRA M':>7} {'LoRA+Adam':>9} {'ckpt act':>8} {'layer':>6} {'alloc':>6} {'reserv':>6} {'on GPU':>6}  fits {cards}")
    for r in rows:
        print(f"{r['backbone']:<12} {r['weights_4bit_gb']:>8.2f} {r['lora_params_m']:>7.1f} {r['lora_with_adamw_gb']:>9.2f} "
              f"{r['checkpointed_activations_gb']:>8.2f} {r['recomputed_layer_gb']:>6.2f} {r['allocated_gb']:>6.1f} {r['reserved_gb']:>6.1f} "
              f"{r['on_gpu_gb']:>6.1f}       " + " ".join(f"{'yes' if r[f'fits_{c}gb'] else 'no':>4}" for c in GPU_CARDS_GB))
    print("\nEvaluation of the fp16 base under the adapter, one process (GB)")
    print(f"{'backbone':<12} {'batch':<10} {'tokens':>6} {'base':>6} {'forward':>7} {'alloc':>6} {'on GPU':>6}  fits {cards}")
    for name, ev in evals.items():
        for batch, e in ev.items():
            print(f"{name:<12} {batch:<10} {e['batch_tokens']:>6} {e['base_gb']:>6.1f} {e['forward_gb']:>7.2f} {e['allocated_gb']:>6.1f} "
                  f"{e['on_gpu_gb']:>6.1f}       " + " ".join(f"{'yes' if e[f'fits_{c}gb'] else 'no':>4}" for c in GPU_CARDS_GB))
    record = {"estimates": rows, "evaluation": evals,
              "assumptions": {"micro_batch_pairs": args.micro_batch_pairs, "max_length": args.max_length, "lora_r": 32,
                              "eval_batch_tokens": {"sts_b": STS_BATCH_TOKENS, "full_batch": FULL_BATCH_TOKENS},
                              "archs": {n: asdict(ARCHS[n]) for n in LLAMA2}}}
    from aoe.plan.check import load_config

    host = host_table(load_config(Path(__file__).resolve().parents[2], args.configfile))
    record["host"] = host
    print("\nHost memory per job (SLURM --mem): aoe.config.memory's need beside the backbone's request")
    print(f"{'backbone':<18} {'rule':<13} {'procs':>5} {'need':>7} {'requested':>9}")
    for r in host:
        print(f"{r['backbone']:<18} {r['rule']:<13} {r['processes']:>5} {r['need_gb']:>6.1f}G {r['requested_gb']:>8.1f}G")
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

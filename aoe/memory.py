"""Memory the grid's jobs need: a QLoRA training process's GPU memory, and every model-loading job's
host memory (what SLURM's ``--mem`` requests, ``mem_mb`` in the rules).

Both are computed from the backbone's architecture (:data:`ARCHS`, the numbers of each model's
published ``config.json``), never measured here. ``bench/llm_memory.py`` prints them and checks the
weight formula on a real 4-bit model; ``tests/test_resources.py`` asserts that every job of
``snakemake -n all`` requests at least :func:`host_need_gb`.

Host memory of one job, in GB (a lower bound; a request should leave headroom above it):

* per process: the checkpoint as stored on disk (every shard can be resident while
  ``from_pretrained`` reads it, also when the weights end up quantized on the GPU) plus
  :data:`PROCESS_OVERHEAD_GB` for the interpreter, torch, the CUDA context, the tokenizer and the
  data loader (our estimate);
* a multi-GPU training job runs one process per GPU on one node (``accelerate launch``);
* an evaluation keeps the embeddings of the texts it reads in float32 twice (the embedding cache and
  the copy the scorer works on): :data:`EVAL_TEXTS` per rule.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
PROCESS_OVERHEAD_GB = 4.0


@dataclass(frozen=True)
class Arch:
    """A backbone's shape, from its published ``config.json``; ``family`` picks the parameter layout."""

    family: str  # "bert" (encoder, learned positions, biases) or "llama" (decoder, gated MLP, no biases)
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    stored_bytes: int  # bytes per parameter in the checkpoint on disk
    tied_embeddings: bool = False

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of the linear layers of one block (LLaMA: the seven QLoRA adapts)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        if self.family == "bert":
            return [(self.hidden, q), (self.hidden, kv), (self.hidden, kv), (q, self.hidden),
                    (self.hidden, self.intermediate), (self.intermediate, self.hidden)]
        return [(self.hidden, q), (self.hidden, kv), (self.hidden, kv), (q, self.hidden),
                (self.hidden, self.intermediate), (self.hidden, self.intermediate), (self.intermediate, self.hidden)]

    def params(self) -> int:
        """Parameters in the checkpoint (LLaMA: with its separate output matrix unless tied)."""
        linear = sum(i * o for i, o in self.linear_shapes())
        if self.family == "bert":
            biases = sum(o for _, o in self.linear_shapes())
            norms = 2 * 2 * self.hidden
            embeddings = (self.vocab + 512 + 2) * self.hidden + 2 * self.hidden  # word, position, type, norm
            pooler = self.hidden * self.hidden + self.hidden
            return self.layers * (linear + biases + norms) + embeddings + pooler
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * (linear + 2 * self.hidden) + embeddings + self.hidden

    def checkpoint_gb(self) -> float:
        return self.params() * self.stored_bytes / GB

    def embedding_dim(self) -> int:
        return self.hidden


# Keyed by the backbone names of config.yaml and presets/. Stored bytes: LLaMA-2 is published in
# fp16; BERT and MiniLM in float32; Gemma 3 270M is dequantized to float32 by fetch_backbone.
ARCHS = {
    "bert-base-uncased": Arch("bert", 768, 3072, 12, 12, 12, 64, 30522, 4),
    "bert-large-uncased": Arch("bert", 1024, 4096, 24, 16, 16, 64, 30522, 4),  # also WhereIsAI/UAE-Large-V1's shape
    "minilm-l6": Arch("bert", 384, 1536, 6, 12, 12, 32, 30522, 4),
    "llama-2-7b": Arch("llama", 4096, 11008, 32, 32, 32, 128, 32000, 2),
    "llama-2-13b": Arch("llama", 5120, 13824, 40, 40, 40, 128, 32000, 2),
    "gemma3-270m": Arch("llama", 640, 2048, 18, 4, 1, 256, 262144, 4, tied_embeddings=True),
}

# Distinct texts an evaluation job embeds and holds (upper bounds):
EVAL_TEXTS = {
    "evaluate_sts": 26_289,  # the 7 STS test sets, deduplicated (bench/embed_throughput.py on the mirror)
    "evaluate_sts_eval_pooling": 26_289,  # the same sets under another pooling (a batch-dependent one holds one task at a time: fewer)
    "evaluate_indomain": 2 * 10_000,  # the largest in-domain test split (QNLI dev 5,732, GIS test, MRPC) x 2
    "saturation": 2 * 10_000,  # SNLI/MultiNLI dev/test: 10k pairs
    "evaluate_flickr30k": 5_000,  # Flickr30k Karpathy test captions (1,000 images x 5)
    "evaluate_transfer": 130_000,  # the SentEval transfer sets together (SST2 ~70k, MR, SUBJ, MPQA 10k each, ...)
    "evaluate_transfer_eval_pooling": 130_000,  # the same sets, not deduplicated under a batch-dependent pooling (~123k texts)
    "evaluate_nli_probe": 2 * 20_000,  # SNLI dev + test pairs
    "evaluate_mteb": 500_000,  # local tasks: STS + SentEval; full MTEB: mteb encodes corpora in chunks
    "figure_pairs": 2 * 4_927,  # one STS test set (SICK-R, the largest)
    "llm_generate": 0,  # generation keeps texts, not embeddings
}


class UnknownBackbone(KeyError):
    pass


def arch_of(backbone: str) -> Arch:
    if backbone not in ARCHS:
        raise UnknownBackbone(f"no architecture recorded for backbone {backbone!r}; add its config.json shape to aoe.memory.ARCHS")
    return ARCHS[backbone]


def host_need_gb(backbone: str, rule: str, processes: int = 1) -> float:
    """Host memory (GB) one job of ``rule`` needs for ``backbone`` (module docstring)."""
    arch = arch_of(backbone)
    need = max(1, processes) * (arch.checkpoint_gb() + PROCESS_OVERHEAD_GB)
    if rule != "train_model":
        if rule not in EVAL_TEXTS:
            raise KeyError(f"no text count recorded for rule {rule!r}; add it to aoe.memory.EVAL_TEXTS")
        need += 2 * EVAL_TEXTS[rule] * arch.embedding_dim() * 4 / GB
    return need


def nf4_bytes_per_weight() -> float:
    # 4 bits + 8-bit absmax per 64-weight block + fp32 absmax per 256 blocks (double quantization)
    return 0.5 + 1 / 64 + 4 / (64 * 256)


def qlora_gpu_estimate(name: str, a: Arch, tokens: int, r: int = 32) -> dict:
    """GPU memory of one QLoRA training process: ``tokens`` per micro-batch, LoRA ``r`` on every linear
    layer, bf16 compute, gradient checkpointing (bench/llm_memory.py's docstring has the terms)."""
    shapes = a.linear_shapes()
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
        "backbone": name,
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

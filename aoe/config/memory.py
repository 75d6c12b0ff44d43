"""Memory the grid's jobs need: a QLoRA training process's and an evaluation's GPU memory, and every
model-loading job's host memory (what SLURM's ``--mem`` requests, ``mem_mb`` in the rules).

All are computed from the backbone's architecture (:data:`ARCHS`, the numbers of each model's published
``config.json``). The GPU terms that are not counted bytes (activations, the allocator's cached blocks, the CUDA
context) are fitted on GPU runs of the LLaMA-2 shapes (:data:`GPU_RUNS`), and tests/test_memory.py holds the
model to each run within 10%. ``bench/gpu/llm_memory.py`` prints them and checks the weight formula on a real
4-bit model; ``tests/test_resources.py`` asserts that every job of ``snakemake -n all`` requests at least
:func:`host_need_gb`.

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

import math
from collections.abc import Callable
from dataclasses import dataclass

GB = 1e9
PROCESS_OVERHEAD_GB = 4.0

# Each retry of a job asks for this many times the memory of the attempt before it (attempt k: the first
# attempt's request times RETRY_MEMORY_FACTOR ** (k - 1)). A job the scheduler killed for its memory (SLURM's
# "Exceeded job memory limit", OUT_OF_MEMORY) and resubmitted with the same --mem is killed again at the same
# point: the retries of the SLURM profile (retries: 2) would be spent for nothing. 1.5 rather than 2: two
# retries ask for 2.25 times the first request, which a node that fits the first one usually still has.
RETRY_MEMORY_FACTOR = 1.5


def memory_for_attempt(mem_mb: float, attempt: int) -> int:
    """``mem_mb`` (the first attempt's request) for Snakemake's ``attempt`` (1 for the first), in whole MB."""
    return int(math.ceil(mem_mb * RETRY_MEMORY_FACTOR ** (max(int(attempt), 1) - 1)))


def grows_on_retry(mem_mb: Callable[..., float] | float) -> Callable[..., int]:
    """A rule's ``mem_mb`` resource (a number, or a function of the job's wildcards) that grows with the job's
    ``attempt`` (:data:`RETRY_MEMORY_FACTOR`): Snakemake passes ``attempt`` to a resource function that names it."""
    first = mem_mb if callable(mem_mb) else (lambda wildcards: mem_mb)

    def resource(wildcards, attempt):
        return memory_for_attempt(first(wildcards), attempt)

    return resource


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
    "evaluate_sts": 26_289,  # the 7 STS test sets, deduplicated (bench/speed/embed_throughput.py on the mirror)
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
        raise UnknownBackbone(f"no architecture recorded for backbone {backbone!r}; add its config.json shape to aoe.config.memory.ARCHS")
    return ARCHS[backbone]


def host_need_gb(backbone: str, rule: str, processes: int = 1) -> float:
    """Host memory (GB) one job of ``rule`` needs for ``backbone`` (module docstring)."""
    arch = arch_of(backbone)
    need = max(1, processes) * (arch.checkpoint_gb() + PROCESS_OVERHEAD_GB)
    if rule != "train_model":
        if rule not in EVAL_TEXTS:
            raise KeyError(f"no text count recorded for rule {rule!r}; add it to aoe.config.memory.EVAL_TEXTS")
        need += 2 * EVAL_TEXTS[rule] * arch.embedding_dim() * 4 / GB
    return need


def nf4_bytes_per_weight() -> float:
    # 4 bits + 8-bit absmax per 64-weight block + fp32 absmax per 256 blocks (double quantization)
    return 0.5 + 1 / 64 + 4 / (64 * 256)


DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# The GPU runs the constants below come from, random weights of the published shapes (speed and memory do not
# depend on the values), the grid's cell through aoe.training.train.train and the evaluation through
# aoe.evaluate.run.run_sts_evaluation: bench/gpu/results/llama_cells.json (one H100, bench/gpu/gpu_check.py --parts
# llama). ../shared/measurements/gpu-2026-11-27 (one H200) measured the same shapes before aoe.model.encoder.no_cache:
# the 7B shape with 8 layers reproduces its numbers to the byte with the cache on the H100 (5.31 GB allocated).
GPU_RUNS = "bench/gpu/results/llama_cells.json"
# Bytes a checkpointed layer input keeps per token x hidden unit: the fp16 hidden state (2) and a third of a
# byte more; fitted with the next constant by least squares on the three shapes (7B with 8 and 32 layers, 13B)
KEPT_BYTES_PER_HIDDEN = 2.33
# Bytes the recomputed decoder layer holds per token x intermediate unit during its backward (gradient
# checkpointing recomputes one layer at a time): its MLP's gate and up outputs, the activation and the product
# in fp16 under the cells' fp16 autocast, the LoRA branches' float32 copies and dropout masks
RECOMPUTE_BYTES_PER_INTERMEDIATE = 11.0
# torch's caching allocator holds more than the tensors alive at the peak (length-grouped micro-batches give
# each step new shapes): about a second recomputed layer of freed blocks and a third more of the checkpointed
# inputs' (max_memory_reserved - max_memory_allocated, fitted on the three shapes: within 0.21 GB)
RESERVE_RECOMPUTED_LAYERS = 1.0
RESERVE_PER_KEPT = 0.36
# What a process holds on the GPU outside torch's allocator (CUDA context, cuBLAS, the kernels' modules):
# measured 0.79 GB while training and 0.72 GB while evaluating (torch 2.11, CUDA 13.0, H100)
CUDA_CONTEXT_GB = 0.8


def _lora_params(a: Arch, r: int) -> int:
    return a.layers * sum(r * (i + o) for i, o in a.linear_shapes())


def qlora_gpu_estimate(name: str, a: Arch, tokens: int, r: int = 32) -> dict:
    """GPU memory of one QLoRA training process as the grid's cells run it (:func:`aoe.model.encoder.load_base_model`
    with bitsandbytes NF4, fp16 autocast, gradient checkpointing, LoRA ``r`` on every linear layer of the
    block), ``tokens`` per micro-batch (pairs x 2 x max_length).

    * 4-bit weights: the linear layers in NF4; the embedding and the norms stay in float32, the dtype
      load_base_model loads a 4-bit model in.
    * LoRA: the float32 adapters, their gradients and AdamW's two moments: 16 bytes a parameter.
    * checkpointed activations: every layer's input, :data:`KEPT_BYTES_PER_HIDDEN` per token and hidden unit.
    * recomputed layer: :data:`RECOMPUTE_BYTES_PER_INTERMEDIATE` per token and intermediate unit, and the
      largest linear weight dequantized for its matmul (fp16).
    * allocated = the sum (``torch.cuda.max_memory_allocated``); reserved (``max_memory_reserved``) adds the
      allocator's cached blocks; on the GPU = reserved + :data:`CUDA_CONTEXT_GB`, the number to set beside a card.

    The cells' ``qlora_compute_dtype`` is not a term: fp32 and bf16 peaked at 4.61 and 4.59 GB
    (the 7B shape with 8 layers, GPU_RUNS).
    """
    shapes = a.linear_shapes()
    linear_params = a.layers * sum(i * o for i, o in shapes)
    weights = linear_params * nf4_bytes_per_weight() + (a.vocab * a.hidden + (2 * a.layers + 1) * a.hidden) * 4
    lora_params = _lora_params(a, r)
    lora = lora_params * 16
    kept = tokens * a.hidden * KEPT_BYTES_PER_HIDDEN * a.layers
    one_layer = tokens * a.intermediate * RECOMPUTE_BYTES_PER_INTERMEDIATE + max(i * o for i, o in shapes) * 2
    allocated = weights + lora + kept + one_layer
    reserved = allocated + RESERVE_RECOMPUTED_LAYERS * one_layer + RESERVE_PER_KEPT * kept
    on_gpu = reserved + CUDA_CONTEXT_GB * GB
    return {
        "backbone": name,
        "tokens_per_micro_batch": tokens,
        "weights_4bit_gb": weights / GB,
        "lora_params_m": lora_params / 1e6,
        "lora_with_adamw_gb": lora / GB,
        "checkpointed_activations_gb": kept / GB,
        "recomputed_layer_gb": one_layer / GB,
        "allocated_gb": allocated / GB,
        "reserved_gb": reserved / GB,
        "on_gpu_gb": on_gpu / GB,
        **{f"fits_{c}gb": on_gpu <= CARD_USABLE * c * 2**30 for c in GPU_CARDS_GB},
    }


# The cards the docs' advice names, as sold (24: RTX 3090/4090, A10; 40 and 80: A100; 48: A6000, L40S; 80: H100),
# which is GiB; a process fits when it needs at most CARD_USABLE of it (room for the driver and a shape's spike)
GPU_CARDS_GB = (24, 40, 48, 80)
CARD_USABLE = 0.95
# Bytes the evaluation's forward pass holds per token of a batch and intermediate unit (inference mode, one
# layer at a time): the MLP's fp16 tensors and the float32 copies the LoRA branches of gate, up and down make.
# Fitted on the evaluations of GPU_RUNS (7B with 8 and 32 layers, 13B; with and without the cache: within 0.1 GB)
EVAL_BYTES_PER_INTERMEDIATE = 18.0
# max_memory_reserved / max_memory_allocated of the evaluations: 1.05 (13B), 1.07 (7B), 1.17 (7B with 8 layers)
EVAL_RESERVE = 1.1


def eval_gpu_estimate(name: str, a: Arch, batch_tokens: int, r: int = 32, base_dtype: str = "fp16", kv_cache: bool = False) -> dict:
    """GPU memory of an evaluation job of a LoRA model (``aoe.model.encoder.Encoder``): the base unquantized in
    ``base_dtype`` (the cells' ``eval_base_dtype``; the official eval.py --load_kbit 16), the adapters in float32,
    and one batch's forward pass of ``batch_tokens`` (texts x padded length: the longest batch decides).

    ``kv_cache``: the decoder's key/value cache of every layer, which a forward pass with transformers'
    default ``use_cache`` builds and :func:`aoe.model.encoder.embed` no longer asks for (before: 2 x layers x
    tokens x kv width in fp16, held until the pass returns).
    """
    if base_dtype not in DTYPE_BYTES:
        raise ValueError(f"base_dtype must be one of {sorted(DTYPE_BYTES)}, got {base_dtype!r}")
    base = a.params() * DTYPE_BYTES[base_dtype]
    if not a.tied_embeddings:  # AutoModel loads the decoder without its output matrix
        base -= a.vocab * a.hidden * DTYPE_BYTES[base_dtype]
    adapters = _lora_params(a, r) * 4
    forward = batch_tokens * a.intermediate * EVAL_BYTES_PER_INTERMEDIATE
    cache = 2 * a.layers * batch_tokens * a.kv_heads * a.head_dim * 2 if kv_cache else 0
    allocated = base + adapters + forward + cache
    # inference frees one layer's tensors as the next needs the same sizes: the allocator keeps little more
    on_gpu = allocated * EVAL_RESERVE + CUDA_CONTEXT_GB * GB
    return {
        "backbone": name,
        "batch_tokens": batch_tokens,
        "base_dtype": base_dtype,
        "base_gb": base / GB,
        "adapters_gb": adapters / GB,
        "forward_gb": forward / GB,
        "kv_cache_gb": cache / GB,
        "allocated_gb": allocated / GB,
        "reserved_gb": allocated * EVAL_RESERVE / GB,
        "on_gpu_gb": on_gpu / GB,
        **{f"fits_{c}gb": on_gpu <= CARD_USABLE * c * 2**30 for c in GPU_CARDS_GB},
    }

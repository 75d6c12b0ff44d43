"""The sentence encoder: load a model (in 4-bit when trained so), run it on padded batches, pool.

The pieces it is built from have their own modules: where a backbone's weights come from
(:mod:`aoe.model.backbones`), the poolings (:mod:`aoe.model.pooling`), tokenization and length
bucketing (:mod:`aoe.model.tokens`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np
import torch

from aoe.model.folder import is_adapter_dir
from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS, EVAL_POOLINGS, NEEDS_FIRST_LAYER, NEEDS_POOLER, POOLINGS, pool
from aoe.model.prompts import check_eval_text, check_prompt, eval_text
from aoe.model.tokens import ensure_pad_token, length_buckets, tokenize_texts

__all__ = ["embed", "embed_bucketed", "effective_buckets", "Encoder", "bnb_config", "load_base_model", "pin_4bit_cpu_path", "pad_ids",
           "avoid_cudnn_attention", "no_cache", "DamagedModelError", "EVAL_DTYPES"]


def embed(model, pooling: str, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Run ``model`` on a padded batch and pool: the one path shared by training and evaluation.

    A left-padded batch (decoder tokenizers pad on the left) gets explicit position ids
    counted from each text's first real token, so a text's embedding is the same under
    left and right padding; right-padded batches keep the model's own positions.
    """
    need_layers = pooling in NEEDS_FIRST_LAYER
    kwargs = no_cache(model)
    if bool((attention_mask[:, 0] == 0).any()):
        kwargs["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=need_layers, **kwargs)
    first = out.hidden_states[1] if need_layers else None
    pooler = getattr(out, "pooler_output", None) if pooling in NEEDS_POOLER else None
    return pool(pooling, out.last_hidden_state, attention_mask, first, pooler)


def no_cache(model) -> dict:
    """``use_cache=False`` for a model that has a key/value cache (the decoders), nothing for one that has none.

    A decoder's forward pass builds every layer's key/value cache by default and holds it until it returns,
    for a generation that an embedding never does: 2 x layers x tokens x kv width, about 10% of LLaMA-2 7B's
    evaluation peak at the STS batches (aoe.config.memory.eval_gpu_estimate, bench/gpu/results/llama_cells.json).
    """
    return {"use_cache": False} if getattr(getattr(model, "config", None), "use_cache", None) is not None else {}


def avoid_cudnn_attention(device: torch.device | str) -> None:
    """On a GPU, keep scaled-dot-product attention off cuDNN's backend (flash, memory-efficient or math remain).

    Length buckets give nearly every attention call a new (rows, length) shape, and cuDNN's attention
    builds an execution plan per shape: on an H200 with torch 2.11 under bf16 autocast, where PyTorch
    prefers cuDNN, a BERT-base NLI step spent 6.7 of its 10.2 s of CPU time in 1,536 cuDNN attention calls
    (768 forward, 768 backward, 4-5 ms each) against 0.66 s of GPU time, and trained at a quarter of fp32's speed
    (bench/gpu/results/gpu_check.json). fp32 never takes that backend (it ran memory-efficient attention).
    Process-wide: our jobs train or embed with one model per process.
    """
    if torch.device(device).type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)


# On a GPU a forward pass over a few rows is bound by kernel launches, not by the padded positions that buckets
# save. NVIDIA H200, fp32, the same batches (bench/gpu/results/train_vs_official_cuda.json and _cuda-lb1.json):
# BERT-base at 32 pairs a micro-batch (64 texts) trained at 283 pairs/s in 4 buckets of 16 texts and 605 in one
# pass; at 128 pairs (256 texts) 4 buckets of 64 beat one pass, 1,039 against 796 pairs/s, at half the peak memory.
GPU_MIN_BUCKET_ROWS = 64


def effective_buckets(buckets: int, rows: int, device_type: str) -> int:
    """The length buckets a micro-batch of ``rows`` texts is embedded in: ``buckets`` (the config's
    ``length_buckets``), on a GPU no more than leaves each bucket :data:`GPU_MIN_BUCKET_ROWS` rows."""
    if device_type == "cuda":
        return max(1, min(buckets, rows // GPU_MIN_BUCKET_ROWS))
    return buckets


def embed_bucketed(
    model, pooling: str, input_ids: torch.Tensor, attention_mask: torch.Tensor, buckets: int
) -> torch.Tensor:
    """:func:`embed` over groups of rows of similar length, each cut to its own longest row.

    The same embeddings as one padded forward pass (every pooling of :data:`POOLINGS` is mask-aware
    and left-padded rows get positions counted from their first token; a batch-dependent official
    replica gets that one pass), for fewer computed positions: a batch
    padded to its longest text spends most of its compute on padding (60% of STS-B's positions
    at batch 32, max_length 64). Rows are grouped by :func:`length_buckets`; with dropout the
    masks are drawn per group, so a bucketed step equals an unbucketed one in distribution.
    """
    buckets = effective_buckets(buckets, input_ids.shape[0], input_ids.device.type)
    # a batch-dependent pooling must see the batch it was given, not buckets of it
    if buckets <= 1 or input_ids.shape[0] < 2 or pooling in BATCH_DEPENDENT_POOLINGS:
        return embed(model, pooling, input_ids, attention_mask)
    lengths = attention_mask.sum(-1).tolist()
    groups = length_buckets(lengths, buckets)
    width = input_ids.shape[1]
    left = bool((attention_mask[:, 0] == 0).any())
    parts = []
    for rows in groups:
        w = max(lengths[r] for r in rows)
        cols = slice(width - w, width) if left else slice(0, w)
        idx = torch.as_tensor(rows, device=input_ids.device)
        parts.append(embed(model, pooling, input_ids[idx][:, cols], attention_mask[idx][:, cols]))
    inverse = torch.empty(input_ids.shape[0], dtype=torch.long)
    inverse[torch.as_tensor([r for rows in groups for r in rows])] = torch.arange(input_ids.shape[0])
    return torch.cat(parts)[inverse.to(parts[0].device)]


def pad_ids(seqs: list[list[int]], tokenizer) -> dict[str, torch.Tensor]:
    """``tokenizer.pad({"input_ids": seqs}, return_tensors="pt")`` without its per-row Python work.

    Pads with the tokenizer's pad token on its padding side; the one padding of training,
    :meth:`Encoder.encode` and the sentence-transformers module (aoe.model.interop).
    """
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    right = tokenizer.padding_side == "right"
    for i, s in enumerate(seqs):
        cols = slice(0, len(s)) if right else slice(width - len(s), width)
        ids[i, cols] = torch.tensor(s, dtype=torch.long)
        mask[i, cols] = 1
    return {"input_ids": ids, "attention_mask": mask}


def bnb_config(quantization: dict | None):
    """transformers' BitsAndBytesConfig from the JSON-able dict training records (None: no quantization)."""
    if not quantization:
        return None
    from transformers import BitsAndBytesConfig

    q = dict(quantization)
    if isinstance(q.get("bnb_4bit_compute_dtype"), str):
        q["bnb_4bit_compute_dtype"] = getattr(torch, q["bnb_4bit_compute_dtype"])
    return BitsAndBytesConfig(**q)


def pin_4bit_cpu_path(model: torch.nn.Module, packed: bool = False) -> int:
    """Fix which kernel bitsandbytes runs a 4-bit layer with on the CPU; returns the number of 4-bit layers.

    bitsandbytes chooses by CPU model: on a CPU with AVX512-BF16 an eval-mode, no-grad
    forward repacks each layer once and multiplies in bfloat16 (activations and block
    scales rounded to bf16); on other CPUs, and whenever a layer trains, it dequantizes
    to the compute dtype (float32 on the CPU). Left to itself, the same trained adapter
    would embed differently on two CPUs of the same cluster, and its repacking refuses
    layers narrower than a quantization block. ``packed=False`` (what every loader here
    uses) runs the dequantizing path on every CPU; ``packed=True`` forces the repacked
    one, which needs AVX512-BF16. CUDA layers are not affected: the flag is CPU-only.
    """
    from bitsandbytes.functional import has_avx512bf16
    from bitsandbytes.nn import Linear4bit

    if packed and not has_avx512bf16():
        raise RuntimeError("the packed bf16 4-bit CPU kernel needs a CPU with AVX512-BF16; this one has none")
    layers = [m for m in model.modules() if isinstance(m, Linear4bit)]
    for layer in layers:
        if getattr(layer.weight.quant_state, "packing_format_for_cpu", False):
            raise RuntimeError("pin_4bit_cpu_path: a layer was already repacked by an inference pass; pin right after loading")
        layer.support_avx512bf16_for_cpu = packed
    return len(layers)


EVAL_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _weight_read_errors() -> tuple[type[BaseException], ...]:
    try:
        from safetensors import SafetensorError
    except ImportError:  # an older safetensors: its error is an OSError subclass there
        return ()
    return (SafetensorError,)


class DamagedModelError(RuntimeError):
    """A model folder (a backbone as downloaded, a trained model) whose weights cannot be read."""


def _damaged_folder(model_dir: str | Path, e: BaseException) -> DamagedModelError:
    """The error for a model folder whose weights cannot be read: which folder, what failed, and the fix.

    transformers says "Error while deserializing header: invalid header length" for a
    weights file cut short, or "no file named model.safetensors" for a missing one, and
    names neither the folder's role nor what to do. Snakemake does not notice a file
    changed or gone inside a directory output, so the fix is to delete the folder.
    """
    return DamagedModelError(
        f"{model_dir}: its weights cannot be loaded ({type(e).__name__}: {e}); the folder is damaged or incomplete. "
        f"Delete it and rerun the job that made it (a trained model: also its .ckpt folder beside it, "
        f"whose final/ holds hard links to the same files)"
    )


def load_base_model(
    model_dir: str | Path, quantization: dict | None = None, device: torch.device | str | None = None, dtype: str | None = None
):
    """``AutoModel`` of a backbone folder, in 4-bit when ``quantization`` says so (placed on ``device``).

    ``dtype`` (fp16 | bf16 | fp32, unquantized only): the weights' dtype; None: as transformers loads them.
    A 4-bit model runs bitsandbytes' dequantizing CPU kernel on every CPU (:func:`pin_4bit_cpu_path`).
    """
    from transformers import AutoModel

    if not quantization:
        try:
            model = AutoModel.from_pretrained(model_dir, **({"dtype": EVAL_DTYPES[dtype]} if dtype else {}))
        except (OSError, *_weight_read_errors()) as e:
            raise _damaged_folder(model_dir, e) from e
        return model.to(device) if device is not None else model
    device = torch.device(device or "cpu")
    # bitsandbytes places quantized weights at load time; moving them afterwards is refused
    model = AutoModel.from_pretrained(
        model_dir, quantization_config=bnb_config(quantization), device_map={"": str(device)}, dtype=torch.float32
    )
    pin_4bit_cpu_path(model, packed=False)
    return model


class Encoder:
    """A transformer plus pooling (and an LLM's prompt) that turns texts into embeddings.

    The pooling and prompt of a fine-tuned model are read from the ``aoe_config.json``
    that training wrote beside the weights, so training and evaluation always embed
    the same way; a pretrained backbone takes them from the caller. A LoRA/QLoRA
    folder holds the adapter only: its base is loaded from the recorded backbone
    folder, quantized as in training, and the adapter applied on it.

    ``eval_text`` (:data:`aoe.model.prompts.EVAL_TEXTS`) rewrites each text before the prompt wraps
    it, as the official evaluation does; with no prompt it does nothing (the official eval.py
    rewrites prompted texts only), and :attr:`eval_text` is then ``raw``.

    ``pooling`` is the model's own pooling: a fine-tuned folder's recorded one (asking for
    another is an error; an official padded one where the cell trained with it) or, for a backbone,
    the caller's (a masked one). ``eval_pooling`` (any key of
    :data:`EVAL_POOLINGS`) embeds with another pooling on purpose, for evaluation only, e.g.
    an official replica (:data:`OFFICIAL_POOLINGS`). :attr:`pooling` is the pooling used,
    :attr:`trained_pooling` the model's own (None for a backbone given only ``eval_pooling``).
    """

    def __init__(
        self,
        model_dir: str | Path,
        pooling: str | None = None,
        device: str | None = None,
        prompt: str | None = None,
        eval_text: str = "raw",
        eval_pooling: str | None = None,
    ):
        from transformers import AutoTokenizer

        model_dir = Path(model_dir)
        recorded = model_dir / "aoe_config.json"
        record = json.loads(recorded.read_text()) if recorded.is_file() else None
        if record is not None:
            trained_pooling = record["pooling"]
            if pooling is not None and pooling != trained_pooling:
                raise ValueError(
                    f"{model_dir} was trained with pooling {trained_pooling!r}, asked for {pooling!r}"
                    f" (evaluating with another pooling on purpose: eval_pooling={pooling!r})"
                )
            pooling = trained_pooling
            trained_prompt = record.get("prompt")
            if prompt is not None and prompt != trained_prompt:
                raise ValueError(f"{model_dir} was trained with prompt {trained_prompt!r}, asked for {prompt!r}")
            prompt = trained_prompt
        if pooling is None and eval_pooling is None:
            raise ValueError(f"{model_dir}: no aoe_config.json and no pooling given")
        # a folder may record an official padded pooling (the pooling-ablation cells train with one);
        # a caller's own pooling is a masked one, the padded ones being asked for as eval_pooling
        trainable = EVAL_POOLINGS if record is not None else POOLINGS
        if pooling is not None and pooling not in trainable:
            hint = " (an evaluation-only pooling: pass it as eval_pooling)" if pooling in EVAL_POOLINGS else ""
            raise ValueError(f"unknown pooling {pooling!r}; known: {sorted(POOLINGS)}{hint}")
        if eval_pooling is not None and eval_pooling not in EVAL_POOLINGS:
            raise ValueError(f"unknown eval_pooling {eval_pooling!r}; known: {sorted(EVAL_POOLINGS)}")
        check_prompt(prompt)  # a template without {text} fails here, not mid-evaluation
        check_eval_text(eval_text)
        self.model_dir = model_dir
        self.trained_pooling = pooling
        self.pooling = eval_pooling if eval_pooling is not None else pooling
        self.prompt = prompt
        self.eval_text = eval_text if prompt is not None else "raw"
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        avoid_cudnn_attention(self.device)
        self.tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(model_dir))
        if is_adapter_dir(model_dir):
            from peft import PeftModel

            if record is None or "base_model" not in record:
                raise ValueError(f"{model_dir}: a LoRA adapter without aoe_config.json naming its base_model")
            base_dir = (model_dir / record["base_model"]).resolve()
            if not (base_dir / "config.json").is_file():
                raise FileNotFoundError(f"{model_dir}: its base model folder {base_dir} (aoe_config.json base_model) is missing")
            # the official LLaMA evaluation loads the base in fp16 under the adapter (eval.py --load_kbit 16)
            eval_dtype = record.get("train", {}).get("eval_base_dtype")
            quantization = None if eval_dtype else record.get("quantization")
            base = load_base_model(base_dir, quantization, self.device, dtype=eval_dtype)
            self.model = PeftModel.from_pretrained(base, model_dir).to(self.device).eval()
        else:
            self.model = load_base_model(model_dir, None, self.device).eval()
        self.hidden_size = self.model.config.hidden_size

    @torch.inference_mode()
    def encode(self, texts: Iterable[str], batch_size: int = 64, max_length: int = 128, progress: bool = False) -> np.ndarray:
        """(N, H) float32 embeddings, in the order of ``texts``.

        Texts are batched by length (longest first) so padding is minimal; the
        result is put back in input order. A batch-dependent :attr:`pooling`
        (:data:`BATCH_DEPENDENT_POOLINGS`) then depends on these batches and ``batch_size``:
        :meth:`encode_batches` takes the batches an official evaluation formed.
        """
        texts = [eval_text(t, self.eval_text) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.hidden_size), dtype=np.float32)
        batches = range(0, len(texts), batch_size)
        if progress:
            from aoe.util.progress import progress as progress_lines

            batches = progress_lines(batches, desc="encode", unit="batch")
        for start in batches:
            idx = order[start : start + batch_size]
            ids = tokenize_texts(self.tokenizer, [texts[i] for i in idx], max_length, self.prompt)
            enc = {k: v.to(self.device) for k, v in pad_ids(ids, self.tokenizer).items()}
            pooled = embed(self.model, self.pooling, enc["input_ids"], enc["attention_mask"])
            out[idx] = pooled.float().cpu().numpy()
        return out

    @torch.inference_mode()
    def encode_batches(self, batches: list[list[str]], max_length: int = 128) -> np.ndarray:
        """(sum of batch sizes, H) float32 embeddings of exactly these batches, in the given order.

        Each batch is embedded as one forward pass, padded to its own longest text on the
        tokenizer's side (right for BERT), as the official ``AnglE.encode``
        (``tokenizer(..., padding='longest', truncation=True)``) pads what SentEval's batcher
        hands it; texts are neither reordered nor regrouped, so a batch-dependent pooling
        gives the official numbers for the same batches (:mod:`aoe.evaluate.senteval_batches`).
        """
        batches = [list(b) for b in batches]
        empty = [i for i, b in enumerate(batches) if not b]
        if empty:
            raise ValueError(f"encode_batches: batch(es) {empty[:5]} are empty")
        parts = []
        for batch in batches:
            ids = tokenize_texts(self.tokenizer, [eval_text(t, self.eval_text) for t in batch], max_length, self.prompt)
            enc = {k: v.to(self.device) for k, v in pad_ids(ids, self.tokenizer).items()}
            parts.append(embed(self.model, self.pooling, enc["input_ids"], enc["attention_mask"]).float().cpu().numpy())
        if not parts:
            return np.empty((0, self.hidden_size), dtype=np.float32)
        return np.concatenate(parts)

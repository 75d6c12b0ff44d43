"""LoRA and QLoRA (peft + bitsandbytes) for LLM backbones: the model the trainer optimises, and its saved form.

``finetune: qlora`` loads the base in 4-bit NF4 with double quantization (QLoRA,
Dettmers et al. 2023; AoE §4 "Implementation Details", aoe-acl2024.txt l.166, trains LLaMA-2
this way), its other weights in float32 and the 4-bit layers computing in ``qlora_compute_dtype``
(:data:`QLORA_COMPUTE_DTYPES`; float32 as the official ``--load_kbit 4``), prepares it with
``prepare_model_for_kbit_training`` and adds LoRA adapters; ``finetune: lora`` adds
the same adapters to the base in full precision. Only the adapters train.

The saved model folder holds the adapter (``adapter_config.json``,
``adapter_model.safetensors``), the tokenizer and ``aoe_config.json`` whose
``base_model`` (relative path), ``quantization``, ``prompt`` and ``pooling`` let
:class:`aoe.model.encoder.Encoder` rebuild exactly the trained model.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from aoe.model.encoder import load_base_model

__all__ = ["FINETUNES", "LORA_KEYS", "QLORA_COMPUTE_DTYPES", "quantization_settings", "build_lora_model", "trainable_names"]

FINETUNES = ("full", "lora", "qlora")
# The dtype a 4-bit layer dequantizes to and multiplies in. fp32: the official code
# (fcb6223:angle_emb/angle.py:506 bnb_4bit_compute_dtype=torch.float32, :510 torch_dtype float32;
# the same at 70cbd01 and 1c5515b); mixed_precision: the run's autocast dtype (float32 under "no").
QLORA_COMPUTE_DTYPES = ("fp32", "fp16", "bf16", "mixed_precision")
_BNB_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_AUTOCAST = {"no": "fp32", "fp16": "fp16", "bf16": "bf16"}


def quantization_settings(finetune: str, mixed_precision: str, compute_dtype: str = "fp32") -> dict | None:
    """BitsAndBytesConfig kwargs (JSON-able) of a run: NF4 + double quantization for qlora, None otherwise.

    ``compute_dtype`` is one of :data:`QLORA_COMPUTE_DTYPES` (``mixed_precision``: the run's).
    """
    if finetune != "qlora":
        return None
    if compute_dtype not in QLORA_COMPUTE_DTYPES:
        raise ValueError(f"qlora_compute_dtype must be one of {QLORA_COMPUTE_DTYPES}, got {compute_dtype!r}")
    dtype = _AUTOCAST[mixed_precision] if compute_dtype == "mixed_precision" else compute_dtype
    return {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": _BNB_DTYPE[dtype],
    }


# the keys of a backbone's lora setting (peft.LoraConfig r, lora_alpha, lora_dropout, target_modules)
LORA_KEYS = ("r", "alpha", "dropout", "target_modules")


def build_lora_model(
    base_dir: str | Path,
    finetune: str,
    lora: dict,
    mixed_precision: str,
    gradient_checkpointing: bool,
    device: torch.device | str,
    compute_dtype: str = "fp32",
):
    """The base model (4-bit for qlora, computing in ``compute_dtype``) with LoRA adapters on
    ``lora['target_modules']`` ([]: all linear layers); ``lora`` gives every key of :data:`LORA_KEYS`."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if finetune not in ("lora", "qlora"):
        raise ValueError(f"finetune must be lora or qlora here, got {finetune!r}")
    quant = quantization_settings(finetune, mixed_precision, compute_dtype)
    model = load_base_model(base_dir, quant, device)
    ckpt_kwargs = {"use_reentrant": False}  # reentrant checkpointing drops gradients of frozen-input blocks
    if quant:
        # float32 layer norms and input gradients for the frozen 4-bit layers (peft's recipe); the
        # official --load_kbit 4 called it with peft's default use_gradient_checkpointing=True
        # (fcb6223:angle_emb/angle.py:515; peft 0.5.0 utils/other.py:81,103-115)
        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=gradient_checkpointing, gradient_checkpointing_kwargs=ckpt_kwargs
        )
    elif gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=ckpt_kwargs)
        model.enable_input_require_grads()
    missing = [k for k in LORA_KEYS if k not in lora]
    if missing:
        # the defaults are the schema's (backbones.<b>.lora), which fills every one in a workflow run
        raise ValueError(f"LoRA settings lack {', '.join(missing)}: give all of {', '.join(LORA_KEYS)} "
                         "(schemas/config.schema.yaml backbones.<b>.lora has their defaults)")
    targets = list(lora["target_modules"]) or "all-linear"
    config = LoraConfig(
        r=int(lora["r"]),
        lora_alpha=float(lora["alpha"]),
        lora_dropout=float(lora["dropout"]),
        target_modules=targets,
        bias="none",
    )
    try:
        model = get_peft_model(model, config)
    except ValueError as exc:  # peft names the module it could not find
        raise ValueError(f"{base_dir}: LoRA target_modules {targets!r}: {exc}") from exc
    return model


def trainable_names(module: torch.nn.Module) -> set[str]:
    """Names of the parameters that train (adapters, an objective's head): all a checkpoint needs to hold."""
    return {n for n, p in module.named_parameters() if p.requires_grad}


def relative_base(model_dir: str | Path, base_dir: str | Path) -> str:
    """``base_dir`` relative to ``model_dir`` (results/ moves as a whole; absolute paths would not)."""
    return os.path.relpath(Path(base_dir).resolve(), Path(model_dir).resolve())

"""What a run fine-tunes: the whole transformer (:class:`Full`) or adapters over a frozen, perhaps quantized, base
(:class:`LoRA`). Every difference between the two lives here: how the encoder is loaded, what a checkpoint keeps,
how strictly it is resumed, what aoe_config.json adds, what the best epoch's copy holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from aoe.config.hparams import TrainSettings
from aoe.model.lora import build_lora_model, quantization_settings, relative_base, trainable_names


__all__ = ["Full", "LoRA", "finetuning_of"]


@dataclass(frozen=True)
class Full:
    """Full fine-tuning: the whole transformer trains, is checkpointed, resumed and saved.

    :class:`LoRA` answers the same five questions for adapters (how the encoder is loaded,
    what a checkpoint keeps, how strictly it is resumed, what aoe_config.json adds, what the best
    epoch's copy holds under ``select_checkpoint: best``): every
    difference between the two lives in these two classes, so the stages never ask which
    one they run.
    """

    cfg: TrainSettings
    partial_resume: ClassVar[bool] = False  # a checkpoint holds every weight

    def load_encoder(self, backbone_dir, init_dir, device) -> torch.nn.Module:
        """The backbone's transformer, or ``init_dir``'s (a trained start)."""
        from transformers import AutoModel

        encoder = AutoModel.from_pretrained(init_dir or backbone_dir)
        if self.cfg.gradient_checkpointing:
            encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return encoder

    def hook_checkpoints(self, accelerator) -> None:
        pass

    def record(self, out_dir: Path, backbone_dir) -> dict:
        """What aoe_config.json adds beside the common fields."""
        return {}

    def kept_weights(self, encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
        """A copy (CPU) of what the model folder saves: the whole transformer."""
        return {k: v.detach().to("cpu", copy=True) for k, v in encoder.state_dict().items()}


@dataclass(frozen=True)
class LoRA:
    """LoRA and QLoRA: adapters train over a frozen (quantized) base, reloaded from the backbone folder."""

    cfg: TrainSettings
    partial_resume: ClassVar[bool] = True  # a checkpoint holds the trainable parameters only

    def load_encoder(self, backbone_dir, init_dir, device) -> torch.nn.Module:
        """The backbone with fresh adapters; ``init_dir`` is always None (TrainConfig refuses init here)."""
        # each process holds its own (quantized) copy on its own device, as QLoRA under DDP does
        cfg = self.cfg
        return build_lora_model(
            backbone_dir, cfg.finetune, cfg.lora, cfg.mixed_precision, cfg.gradient_checkpointing, device, cfg.qlora_compute_dtype
        )

    def hook_checkpoints(self, accelerator) -> None:
        # A checkpoint holds what trains (adapters, head): the frozen base is reloaded from the
        # backbone folder, bit for bit, and would cost GBs per checkpoint for LLaMA-2.
        def _trainable_only(models, weights, output_dir):
            for model, state in zip(models, weights):
                keep = trainable_names(model)
                for name in [k for k in state if k not in keep]:
                    del state[name]

        accelerator.register_save_state_pre_hook(_trainable_only)

    def record(self, out_dir: Path, backbone_dir) -> dict:
        """What aoe_config.json adds: peft saved the adapter only, the base is found from here."""
        cfg = self.cfg
        return {
            "base_model": relative_base(out_dir, backbone_dir),
            "quantization": quantization_settings(cfg.finetune, cfg.mixed_precision, cfg.qlora_compute_dtype),
            "lora": cfg.lora,
        }

    def kept_weights(self, encoder: torch.nn.Module) -> dict[str, torch.Tensor]:
        """A copy (CPU) of the adapters: the frozen base is the backbone's, as in a checkpoint."""
        # the parameters, not state_dict(): that would also pack every 4-bit base layer's quantization state
        return {n: p.detach().to("cpu", copy=True) for n, p in encoder.named_parameters() if p.requires_grad}


def finetuning_of(cfg: TrainSettings) -> Full | LoRA:
    return Full(cfg) if cfg.finetune == "full" else LoRA(cfg)

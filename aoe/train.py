"""Fine-tune a backbone on paired texts with a named objective (transformers + accelerate).

Run by the ``train`` rule (``workflow_scripts/train.py``); on one machine with
several GPUs, the rule wraps it in ``accelerate launch``. Each run writes, into
``results/models/{backbone}/{objective}/{trainset}/seed{seed}/``:

    config.json, model.safetensors, tokenizer files   the fine-tuned transformer
    aoe_config.json                                   resolved training config (pooling, objective, hyper-parameters, data identity)
    versions.json                                     library versions and git commit
    metrics.jsonl                                     loss components, lr and pairs/s every ``log_every`` steps

The folder appears only when training finished: it is assembled in a temporary
folder beside it and renamed, so a killed job never leaves a complete-looking model.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from aoe.losses import get_objective
from aoe.models import POOLINGS, embed
from aoe.provenance import library_versions
from aoe.tokens import load_token_cache

__all__ = ["TrainConfig", "train"]


@dataclass
class TrainConfig:
    """Hyper-parameters of one training run (config.yaml ``trainsets.<name>.train``, merged with backbone overrides)."""

    objective: str
    pooling: str = "cls"
    objective_overrides: dict = field(default_factory=dict)
    seed: int = 42
    learning_rate: float = 2e-5
    batch_size: int = 32  # pairs per optimizer step, across processes and accumulation
    epochs: int = 1
    max_steps: int = 0  # > 0 overrides epochs
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    gradient_accumulation_steps: int = 1
    mixed_precision: str = "no"  # no | fp16 | bf16
    gradient_checkpointing: bool = False
    max_length: int = 128
    score_range: tuple[float, float] = (0.0, 1.0)  # gold scale mapped to [0, 1] labels
    log_every: int = 10
    dataloader_workers: int = 0

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}; known: {sorted(POOLINGS)}")
        if self.mixed_precision not in ("no", "fp16", "bf16"):
            raise ValueError(f"mixed_precision must be no, fp16 or bf16, got {self.mixed_precision!r}")
        lo, hi = self.score_range
        if not hi > lo:
            raise ValueError(f"score_range must be increasing, got {self.score_range}")
        self.score_range = (float(lo), float(hi))


def _collate(tokenizer, score_range):
    lo, hi = score_range

    def collate(rows: list[dict]) -> dict:
        # u texts first, then v texts: row r's partner is row (r + B) mod 2B
        seqs = [r["input_ids_1"] for r in rows] + [r["input_ids_2"] for r in rows]
        enc = tokenizer.pad({"input_ids": seqs}, return_tensors="pt")
        return {
            "input_ids": enc["input_ids"],
            "attention_mask": enc["attention_mask"],
            "labels": torch.tensor([(r["score"] - lo) / (hi - lo) for r in rows], dtype=torch.float32),
            "text_ids": torch.tensor([r["text_id_1"] for r in rows] + [r["text_id_2"] for r in rows]),
        }

    return collate


def train(
    cache_dir: str | Path,
    table: str | Path,
    backbone_dir: str | Path,
    out_dir: str | Path,
    cfg: TrainConfig,
    extra_record: dict | None = None,
) -> dict:
    """Train and save the model into ``out_dir``; return the run summary."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader
    from tqdm.auto import tqdm
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    out_dir = Path(out_dir)
    objective = get_objective(cfg.objective, cfg.objective_overrides)
    accelerator = Accelerator(mixed_precision=cfg.mixed_precision, gradient_accumulation_steps=cfg.gradient_accumulation_steps)
    per_device = cfg.batch_size // (accelerator.num_processes * cfg.gradient_accumulation_steps)
    if per_device < 1 or per_device * accelerator.num_processes * cfg.gradient_accumulation_steps != cfg.batch_size:
        raise ValueError(
            f"batch_size {cfg.batch_size} is not divisible by processes ({accelerator.num_processes}) x "
            f"gradient_accumulation_steps ({cfg.gradient_accumulation_steps})"
        )
    set_seed(cfg.seed)  # python, numpy, torch (and cuda) RNGs

    tokenizer = AutoTokenizer.from_pretrained(backbone_dir)
    pairs = load_token_cache(cache_dir, table, backbone_dir, cfg.max_length)
    if len(pairs) == 0:
        raise ValueError(f"{table}: no training pairs")
    model = AutoModel.from_pretrained(backbone_dir)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    loader = DataLoader(
        pairs,
        batch_size=per_device,
        shuffle=True,
        generator=torch.Generator().manual_seed(cfg.seed),
        collate_fn=_collate(tokenizer, cfg.score_range),
        num_workers=cfg.dataloader_workers,
    )
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=cfg.learning_rate)
    steps_per_epoch = math.ceil(len(loader) / (cfg.gradient_accumulation_steps * accelerator.num_processes))
    total_steps = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * steps_per_epoch
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total_steps), total_steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=_ensure_dir(out_dir.parent)))
    work.chmod(0o755)
    log_file = (work / "metrics.jsonl").open("w")
    bar = tqdm(total=total_steps, desc=f"train {cfg.objective} seed {cfg.seed}", mininterval=5, disable=not accelerator.is_main_process)
    model.train()
    step, epoch, pairs_seen = 0, 0, 0
    start = tick = time.perf_counter()
    tick_step = 0
    try:
        while step < total_steps:
            for batch in loader:
                with accelerator.accumulate(model):
                    emb = embed(model, cfg.pooling, batch["input_ids"], batch["attention_mask"]).float()
                    u, v = emb.chunk(2)  # (B, H) each
                    loss, parts = objective(u, v, batch["labels"], batch["text_ids"])
                    if not torch.isfinite(loss):
                        comps = {k: x.item() for k, x in parts.items()}
                        raise FloatingPointError(
                            f"non-finite loss {loss.item()} at step {step} (epoch {epoch}); components {comps}; "
                            f"batch text ids {batch['text_ids'].tolist()}"
                        )
                    accelerator.backward(loss)
                    if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                        accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                pairs_seen += batch["labels"].shape[0] * accelerator.num_processes
                if not accelerator.sync_gradients:
                    continue
                step += 1
                bar.update(1)
                if step % cfg.log_every == 0 or step == total_steps:
                    now = time.perf_counter()
                    record = {
                        "step": step,
                        "epoch": epoch,
                        "loss": loss.item(),
                        **{k: x.item() for k, x in parts.items()},
                        "lr": scheduler.get_last_lr()[0],
                        "pairs_per_s": cfg.batch_size * (step - tick_step) / max(now - tick, 1e-9),
                    }
                    tick, tick_step = now, step
                    bar.set_postfix({k: f"{record[k]:.4g}" for k in ("loss", *parts, "pairs_per_s")})
                    if accelerator.is_main_process:
                        log_file.write(json.dumps(record) + "\n")
                        log_file.flush()
                if step >= total_steps:
                    break
            epoch += 1
        log_file.close()
        wall = time.perf_counter() - start
        summary = {
            "steps": step,
            "epochs_started": epoch,
            "pairs_seen": pairs_seen,
            "train_seconds": wall,
            "pairs_per_s": pairs_seen / wall,
            "num_processes": accelerator.num_processes,
        }
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            accelerator.unwrap_model(model).save_pretrained(work, safe_serialization=True)
            tokenizer.save_pretrained(work)
            backbone_info = Path(backbone_dir) / "backbone.json"
            record = {
                "pooling": cfg.pooling,
                "objective": asdict(objective),
                "train": asdict(cfg),
                "backbone": json.loads(backbone_info.read_text()) if backbone_info.is_file() else str(backbone_dir),
                "token_cache": json.loads((Path(cache_dir) / "cache.json").read_text()),
                "summary": summary,
                **(extra_record or {}),
            }
            (work / "aoe_config.json").write_text(json.dumps(record, indent=2) + "\n")
            (work / "versions.json").write_text(json.dumps(library_versions(), indent=2) + "\n")
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(work, out_dir)
        return summary
    finally:
        bar.close()
        if not log_file.closed:
            log_file.close()
        if work.exists():
            shutil.rmtree(work)


def _ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path

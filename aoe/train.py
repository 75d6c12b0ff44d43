"""Fine-tune a backbone with a named objective (transformers + accelerate).

One process::

    python -c "from aoe.train import ..."      # or the `train` rule (workflow_scripts/train.py)

Several processes (GPUs, or CPU processes with the gloo backend) run the same
script under ``accelerate launch --num_processes N``; the rule does this when its
backbone asks for more than one GPU.

Each run writes, into ``results/models/{backbone}/{objective}/{trainset}/seed{seed}/``:

    config.json, model.safetensors, tokenizer files   the fine-tuned transformer
    aoe_config.json                                   resolved training config (pooling, objective, data identity, summary,
                                                      and ``init``: the trained model it started from, if any)
    versions.json                                     library versions and git commit
    metrics.jsonl                                     loss components, lr and pairs/s every ``log_every`` steps
    modules.json, sentence_bert_config.json, ...      sentence-transformers files (aoe.interop)

The folder appears only when training finished: it is assembled in a temporary
folder beside it and renamed. Checkpoints live in ``seed{seed}.ckpt/`` beside it and
a rerun of the same job resumes from the newest one (a preempted SLURM job retried
by Snakemake continues where it stopped); they are removed when training finishes.

Batches. Every process reads the same global batch (the epoch's order is a
permutation seeded by (seed, epoch)), takes its contiguous slice, embeds it, and the
embeddings are all-gathered with their gradients so each loss sees the whole global
batch, exactly as one process would: in-batch negatives and ranking pairs do not
shrink with the number of processes. Every process computes the same loss; the
all-gather's backward sums the N identical gradients and DDP's mean divides them
back, so the update equals the one-process update.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from aoe.fsutil import atomic_dir
from aoe.hparams import TrainSettings
from aoe.losses import get_objective
from aoe.losses.objectives import FORMATS
from aoe.lora import FINETUNES, build_lora_model, quantization_settings, relative_base, trainable_names
from aoe.models import POOLINGS, embed_bucketed, ensure_pad_token, pad_ids
from aoe.prompts import check_prompt
from aoe.provenance import library_versions
from aoe.tokens import load_token_cache

__all__ = ["TrainConfig", "train", "epoch_batches", "checkpoint_dir", "num_warmup_steps"]


@dataclass
class TrainConfig(TrainSettings):
    """Hyper-parameters of one training run (:class:`aoe.hparams.TrainSettings`, resolved per cell by
    :func:`aoe.hparams.resolve_cell` from config.yaml's train set, backbone and objective keys)."""

    def __post_init__(self) -> None:
        if self.finetune not in FINETUNES:
            raise ValueError(f"finetune must be one of {FINETUNES}, got {self.finetune!r}")
        check_prompt(self.prompt)
        if self.pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}; known: {sorted(POOLINGS)}")
        if self.mixed_precision not in ("no", "fp16", "bf16"):
            raise ValueError(f"mixed_precision must be no, fp16 or bf16, got {self.mixed_precision!r}")
        if self.length_buckets < 1:
            raise ValueError(f"length_buckets must be >= 1 (1: one padded forward pass), got {self.length_buckets}")
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {self.format!r}")
        lo, hi = self.score_range
        if not hi > lo:
            raise ValueError(f"score_range must be increasing, got {self.score_range}")
        self.score_range = (float(lo), float(hi))
        if self.init is not None:
            if not isinstance(self.init, dict) or "trainset" not in self.init or set(self.init) - {"trainset", "objective"}:
                raise ValueError(f"init must be null or {{trainset: <name>, objective: <name, optional>}}, got {self.init!r}")
            if self.finetune != "full":
                raise ValueError(f"init (a trained model to start from) needs full fine-tuning, not {self.finetune!r}")

    def fingerprint(self) -> str:
        """Identity of the run, to refuse resuming a checkpoint of another configuration."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:16]


def num_warmup_steps(cfg: TrainConfig, total_steps: int) -> int:
    """Linear warm-up length: ``warmup_steps`` when set, else ``warmup_ratio`` of the run."""
    return min(cfg.warmup_steps, total_steps) if cfg.warmup_steps > 0 else int(cfg.warmup_ratio * total_steps)


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int, lengths: list[int] | None = None) -> list[list[int]]:
    """The global batches of one epoch: a permutation seeded by (seed, epoch), cut into full batches.

    The last incomplete batch is dropped (a different one each epoch), so every step
    has the same global batch and splits evenly over processes and accumulation.
    With ``lengths``, examples are sorted by length within windows of 50 batches and
    the batch order is shuffled again (length-grouped batching, as transformers'
    LengthGroupedSampler).
    """
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(n, generator=g).tolist()
    if lengths is not None:
        window = 50 * batch_size
        order = [i for s in range(0, n, window) for i in sorted(order[s : s + window], key=lambda i: -lengths[i])]
    batches = [order[s : s + batch_size] for s in range(0, n - batch_size + 1, batch_size)]
    if lengths is not None:
        batches = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
    return batches


def checkpoint_dir(out_dir: str | Path) -> Path:
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".ckpt")


def _adamw(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    """AdamW with torch's fused kernel where the parameters allow it, else the default implementation.

    On CPU torch's default is the per-tensor loop, several times slower per step than the
    fused kernel (bench/train_limit.py); transformers' Trainer uses the fused one since torch 2.8.
    """
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without the fused kernel
        return torch.optim.AdamW(groups, lr=lr)


def _clip_gradients(accelerator, module: torch.nn.Module, max_norm: float) -> None:
    """Clip the global gradient norm; one multi-tensor (foreach) pass where accelerate's clipping is plain torch's."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type in (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU):
        accelerator.unscale_gradients()  # fp16: as accelerator.clip_grad_norm_ does first
        grads = [p for p in module.parameters() if p.grad is not None]
        torch.nn.utils.clip_grad_norm_(grads, max_norm, foreach=True)
    else:  # FSDP, DeepSpeed, XLA: accelerate's own clipping
        accelerator.clip_grad_norm_(module.parameters(), max_norm)


class _Collator:
    """Rows of the token cache -> padded (B, K, T) ids and mask, (B,) labels, (B, K) text ids."""

    def __init__(self, tokenizer, cfg: TrainConfig, objective):
        self.tokenizer, self.cfg, self.objective, self.k = tokenizer, cfg, objective, objective.n_texts

    def __call__(self, rows: list[dict]) -> dict:
        seqs = [r[f"input_ids_{j}"] for r in rows for j in range(1, self.k + 1)]  # example-major
        enc = pad_ids(seqs, self.tokenizer)
        b = len(rows)
        labels = torch.tensor([r["score"] for r in rows], dtype=torch.float32)
        if self.cfg.format == "pairs":
            labels = self.objective.train_labels(labels, self.cfg.score_range)
        return {
            "input_ids": enc["input_ids"].view(b, self.k, -1),
            "attention_mask": enc["attention_mask"].view(b, self.k, -1),
            "labels": labels,
            "text_ids": torch.tensor([[r[f"text_id_{j}"] for j in range(1, self.k + 1)] for r in rows]),
        }


class _Trainee(torch.nn.Module):
    """The encoder plus the objective's own parameters (SBERT's classifier), as one module for DDP."""

    def __init__(self, encoder: torch.nn.Module, head: torch.nn.Module | None, pooling: str, buckets: int = 1):
        super().__init__()
        self.encoder, self.head, self.pooling, self.buckets = encoder, head, pooling, buckets

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        b, k, t = input_ids.shape
        flat_ids, flat_mask = input_ids.view(b * k, t), attention_mask.view(b * k, t)
        pooled = embed_bucketed(self.encoder, self.pooling, flat_ids, flat_mask, self.buckets)
        return pooled.float().view(b, k, -1)  # (b, K, H)


def _gather_with_grad(x: torch.Tensor, num_processes: int) -> torch.Tensor:
    if num_processes == 1:
        return x
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(x.contiguous()), dim=0)


def train(
    cache_dir: str | Path,
    table: str | Path,
    backbone_dir: str | Path,
    out_dir: str | Path,
    cfg: TrainConfig,
    extra_record: dict | None = None,
    init_dir: str | Path | None = None,
) -> dict:
    """Train and save the model into ``out_dir`` (resuming from its checkpoint if one exists); return the run summary.

    ``init_dir``: a model folder this function wrote, of the same backbone, whose weights the run
    starts from (``cfg.init`` names its cell; both or neither must be given).
    """
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs, set_seed
    from tqdm.auto import tqdm
    from transformers import AutoModel, AutoTokenizer, get_linear_schedule_with_warmup

    out_dir = Path(out_dir)
    init_record = _check_init(cfg, backbone_dir, init_dir)
    objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
    # BERT's pooler (and an unused head) get no gradient: DDP must not wait for them
    accelerator = Accelerator(
        mixed_precision=cfg.mixed_precision,
        # without CUDA, several processes are CPU processes on the gloo backend
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )
    n_proc, rank = accelerator.num_processes, accelerator.process_index
    accum = cfg.gradient_accumulation_steps
    micro = cfg.batch_size // accum  # examples per micro-batch, all processes together
    if micro * accum != cfg.batch_size or micro % n_proc:
        raise ValueError(
            f"batch_size {cfg.batch_size} must split into gradient_accumulation_steps ({accum}) micro-batches "
            f"each divisible by the number of processes ({n_proc})"
        )
    local = micro // n_proc
    set_seed(cfg.seed)  # python, numpy, torch (and cuda) RNGs: dropout masks, head init

    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(backbone_dir))
    data = load_token_cache(cache_dir, table, backbone_dir, cfg.max_length, cfg.prompt)
    if len(data) < cfg.batch_size:
        raise ValueError(f"{table}: {len(data)} training examples, fewer than one batch of {cfg.batch_size}")
    n_texts = objective.n_texts
    missing = [f"input_ids_{j}" for j in range(1, n_texts + 1) if f"input_ids_{j}" not in data.column_names]
    if missing:
        raise ValueError(f"{cache_dir}: objective {cfg.objective!r} on {cfg.format} needs {missing}")
    lengths = [len(x) for x in data["input_ids_1"]] if cfg.length_grouped else None
    collate = _Collator(tokenizer, cfg, objective)

    if cfg.finetune == "full":
        encoder = AutoModel.from_pretrained(init_dir or backbone_dir)
        if cfg.gradient_checkpointing:
            encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        # each process holds its own (quantized) copy on its own device, as QLoRA under DDP does
        encoder = build_lora_model(
            backbone_dir, cfg.finetune, cfg.lora, cfg.mixed_precision, cfg.gradient_checkpointing, accelerator.device
        )
    module = _Trainee(encoder, objective.make_head(encoder.config.hidden_size), cfg.pooling, cfg.length_buckets)
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]  # LoRA: the adapters only
    groups = [
        {"params": [p for n, p in params if not any(k in n for k in no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in params if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = _adamw(groups, cfg.learning_rate)
    steps_per_epoch = len(data) // cfg.batch_size
    total_steps = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * steps_per_epoch
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps(cfg, total_steps), total_steps)
    # The scheduler is stepped once per optimizer step by this loop, so it is only
    # registered for checkpointing (a prepared scheduler would step once per process).
    module, optimizer = accelerator.prepare(module, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    if cfg.finetune != "full":
        # A checkpoint holds what trains (adapters, head): the frozen base is reloaded from the
        # backbone folder, bit for bit, and would cost GBs per checkpoint for LLaMA-2.
        def _trainable_only(models, weights, output_dir):
            for model, state in zip(models, weights):
                keep = trainable_names(model)
                for name in [k for k in state if k not in keep]:
                    del state[name]

        accelerator.register_save_state_pre_hook(_trainable_only)

    out_dir.parent.mkdir(parents=True, exist_ok=True)  # checkpoints and the model go here
    state = {"step": 0, "epoch": 0, "batch": 0, "examples_seen": 0, "train_seconds": 0.0}
    ckpt_root = checkpoint_dir(out_dir)
    metrics_lines: list[str] = []
    resumed_from = _try_resume(accelerator, ckpt_root, cfg, state, metrics_lines, partial=cfg.finetune != "full")

    bar = tqdm(total=total_steps, initial=state["step"], desc=f"train {cfg.objective} seed {cfg.seed}",
               mininterval=5, disable=not accelerator.is_main_process)
    module.train()
    tick, tick_step, start = time.perf_counter(), state["step"], time.perf_counter()
    head = accelerator.unwrap_model(module).head
    try:
        while state["step"] < total_steps:
            batches = epoch_batches(len(data), cfg.batch_size, cfg.seed, state["epoch"], lengths)
            for b_idx in range(state["batch"], len(batches)):
                rows = data[batches[b_idx]]
                rows = [dict(zip(rows, vals)) for vals in zip(*rows.values())]
                loss_sum, parts_sum = 0.0, {}
                for m in range(accum):
                    batch = collate(rows[m * micro : (m + 1) * micro])
                    mine = slice(rank * local, (rank + 1) * local)
                    sync = contextlib.nullcontext() if m == accum - 1 else accelerator.no_sync(module)
                    with sync:
                        emb_local = module(
                            batch["input_ids"][mine].to(accelerator.device), batch["attention_mask"][mine].to(accelerator.device)
                        )
                        emb = _gather_with_grad(emb_local, n_proc)  # (micro, K, H), the whole micro-batch
                        labels = batch["labels"].to(accelerator.device)
                        text_ids = batch["text_ids"].to(accelerator.device)
                        loss, parts = objective(tuple(emb.unbind(1)), labels, text_ids, head)
                        if not torch.isfinite(loss):
                            comps = {k: x.item() for k, x in parts.items()}
                            raise FloatingPointError(
                                f"non-finite loss {loss.item()} at step {state['step']} (epoch {state['epoch']}, "
                                f"batch {b_idx}, micro-batch {m}); components {comps}; "
                                f"batch text ids {batch['text_ids'].tolist()}"
                            )
                        accelerator.backward(loss / accum)
                    loss_sum += loss.item() / accum
                    for k, x in parts.items():
                        parts_sum[k] = parts_sum.get(k, 0.0) + x.item() / accum
                if cfg.max_grad_norm > 0:
                    _clip_gradients(accelerator, module, cfg.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                state["step"] += 1
                state["batch"] = b_idx + 1
                state["examples_seen"] += cfg.batch_size
                bar.update(1)
                if state["step"] % cfg.log_every == 0 or state["step"] == total_steps:
                    now = time.perf_counter()
                    record = {
                        "step": state["step"],
                        "epoch": state["epoch"],
                        "loss": loss_sum,
                        **parts_sum,
                        "lr": scheduler.get_last_lr()[0],
                        "pairs_per_s": cfg.batch_size * (state["step"] - tick_step) / max(now - tick, 1e-9),
                    }
                    tick, tick_step = now, state["step"]
                    bar.set_postfix({k: f"{record[k]:.4g}" for k in ("loss", *parts_sum, "pairs_per_s")})
                    metrics_lines.append(json.dumps(record))
                if cfg.checkpoint_every and state["step"] % cfg.checkpoint_every == 0 and state["step"] < total_steps:
                    state["train_seconds"] += time.perf_counter() - start
                    start = time.perf_counter()
                    _save_checkpoint(accelerator, ckpt_root, cfg, state, metrics_lines)
                if state["step"] >= total_steps:
                    break
            else:
                state["epoch"] += 1
                state["batch"] = 0
        state["train_seconds"] += time.perf_counter() - start
        summary = {
            "steps": state["step"],
            "epochs_started": state["epoch"] + 1,
            "examples_seen": state["examples_seen"],
            "train_seconds": state["train_seconds"],
            "pairs_per_s": state["examples_seen"] / max(state["train_seconds"], 1e-9),
            "num_processes": n_proc,
            "resumed_from_step": resumed_from,
        }
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            # everything is written at the end (metrics are kept in memory), into a folder
            # that replaces out_dir only when complete
            with atomic_dir(out_dir) as work:
                # full fine-tuning: the whole transformer; LoRA: peft writes the adapter only
                accelerator.unwrap_model(module).encoder.save_pretrained(work, safe_serialization=True)
                tokenizer.save_pretrained(work)
                (work / "metrics.jsonl").write_text("".join(line + "\n" for line in metrics_lines))
                record = {
                    "pooling": cfg.pooling,
                    "prompt": cfg.prompt,
                    "finetune": cfg.finetune,
                    "objective": asdict(objective),
                    "train": asdict(cfg),
                    "backbone": _backbone_identity(backbone_dir),
                    "token_cache": json.loads((Path(cache_dir) / "cache.json").read_text()),
                    "summary": summary,
                    **({"init": init_record} if init_record else {}),
                    **(extra_record or {}),
                }
                if cfg.finetune != "full":
                    record["base_model"] = relative_base(out_dir, backbone_dir)
                    record["quantization"] = quantization_settings(cfg.finetune, cfg.mixed_precision)
                    record["lora"] = cfg.lora
                (work / "aoe_config.json").write_text(json.dumps(record, indent=2) + "\n")
                (work / "versions.json").write_text(json.dumps(library_versions(), indent=2) + "\n")
                # so that sentence_transformers.SentenceTransformer(out_dir) embeds as our Encoder does
                from aoe.interop import write_sentence_transformers_files

                write_sentence_transformers_files(work)
            shutil.rmtree(ckpt_root, ignore_errors=True)
        accelerator.wait_for_everyone()
        return summary
    finally:
        bar.close()


def _backbone_identity(backbone_dir: str | Path) -> dict | str:
    """What aoe_config.json records as the backbone: its backbone.json (source, revision), else its folder."""
    info = Path(backbone_dir) / "backbone.json"
    return json.loads(info.read_text()) if info.is_file() else str(backbone_dir)


def _check_init(cfg: TrainConfig, backbone_dir: str | Path, init_dir: str | Path | None) -> dict | None:
    """What aoe_config.json records of the model a run starts from (None: the backbone's weights)."""
    if (cfg.init is None) != (init_dir is None):
        raise ValueError(f"init {cfg.init!r} and init_dir {init_dir!r}: give both (a trained start) or neither")
    if init_dir is None:
        return None
    record_file = Path(init_dir) / "aoe_config.json"
    if not record_file.is_file():
        raise FileNotFoundError(f"{init_dir}: not a trained model folder (no aoe_config.json); init {cfg.init!r} starts from one")
    init_record = json.loads(record_file.read_text())
    if init_record.get("finetune") != "full":
        raise ValueError(f"{init_dir}: trained with finetune {init_record.get('finetune')!r}; init starts from a full fine-tuning only")
    # the token cache was built with the backbone's tokenizer: the start must share it
    ours = _backbone_identity(backbone_dir)
    if init_record.get("backbone") != ours:
        raise ValueError(f"{init_dir}: trained from backbone {init_record.get('backbone')!r}, this run's is {ours!r}")
    return {
        "model": str(init_dir),
        "cell": init_record.get("cell"),
        "aoe_config_sha256": hashlib.sha256(record_file.read_bytes()).hexdigest(),
    }


def _save_checkpoint(accelerator, root: Path, cfg: TrainConfig, state: dict, metrics_lines: list[str]) -> None:
    """Model, optimizer, scheduler, RNG states (accelerate), plus step, data position and metrics so far.

    Written into a fresh folder and published by renaming ``latest`` to it, so a job
    killed while saving leaves the previous checkpoint intact.
    """
    step_dir = root / f"step{state['step']}"
    accelerator.save_state(str(step_dir))
    if accelerator.is_main_process:
        (step_dir / "trainer_state.json").write_text(json.dumps({**state, "fingerprint": cfg.fingerprint()}))
        (step_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in metrics_lines))
        link = root / "latest.tmp"
        link.unlink(missing_ok=True)
        link.symlink_to(step_dir.name)
        previous = (root / "latest").resolve() if (root / "latest").exists() else None
        os.replace(link, root / "latest")
        if previous is not None and previous != step_dir.resolve():
            shutil.rmtree(previous, ignore_errors=True)
    accelerator.wait_for_everyone()


def _try_resume(
    accelerator, root: Path, cfg: TrainConfig, state: dict, metrics_lines: list[str], partial: bool = False
) -> int | None:
    """Load the newest checkpoint of this exact configuration; return its step, or None (fresh start).

    ``partial``: the checkpoint holds the trainable parameters only (LoRA), the rest is as loaded.
    """
    latest = root / "latest"
    if not (latest / "trainer_state.json").is_file():
        return None
    saved = json.loads((latest / "trainer_state.json").read_text())
    if saved.pop("fingerprint") != cfg.fingerprint():
        accelerator.print(f"checkpoint {latest.resolve()} belongs to another configuration; starting afresh")
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            shutil.rmtree(root, ignore_errors=True)
        return None
    accelerator.load_state(str(latest.resolve()), **({"strict": False} if partial else {}))
    state.update(saved)
    metrics_lines.extend(line for line in (latest / "metrics.jsonl").read_text().splitlines() if line)
    accelerator.print(f"resumed from {latest.resolve()} at step {state['step']}")
    return state["step"]


def main(argv: list[str] | None = None) -> None:
    """Command line, for ``accelerate launch -m aoe.train`` (several processes) and standalone use."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aoe.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True, help="token cache folder (results/tokens/...)")
    parser.add_argument("--table", required=True, help="the prepared table the cache was built from")
    parser.add_argument("--backbone", required=True, help="backbone folder (results/backbones/...)")
    parser.add_argument("--out", required=True, help="output model folder")
    parser.add_argument("--config", required=True, help="JSON file with the TrainConfig fields")
    parser.add_argument("--record", help="JSON file of extra fields for aoe_config.json")
    parser.add_argument("--init", help="trained model folder to start from (the config's init names its cell)")
    args = parser.parse_args(argv)
    cfg = TrainConfig(**json.loads(Path(args.config).read_text()))
    extra = json.loads(Path(args.record).read_text()) if args.record else None
    summary = train(args.cache, args.table, args.backbone, args.out, cfg, extra_record=extra, init_dir=args.init)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

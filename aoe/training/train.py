"""Fine-tune a backbone with a named objective (transformers + accelerate).

One process::

    python -c "from aoe.training.train import ..."      # or the `train` rule (workflow_scripts/train.py)

Several processes (GPUs, or CPU processes with the gloo backend) run the same
script under ``accelerate launch --num_processes N``; the rule does this when its
backbone asks for more than one GPU.

Each run writes, into ``results/models/{backbone}/{objective}/{trainset}/seed{seed}/``:

    config.json, model.safetensors, tokenizer files   the fine-tuned transformer
    aoe_config.json                                   resolved training config (pooling, objective, data identity, summary,
                                                      and ``init``: the trained model it started from, if any)
    versions.json                                     library versions and git commit
    metrics.jsonl                                     every ``log_every`` steps: the loss and its components (means
                                                      over those steps), lr, gradient norm and pairs/s
                                                      (select_checkpoint best: each epoch end's validation Spearman)
    tensorboard/events.out.tfevents.*                 the same numbers as TensorBoard curves (:func:`aoe.training.curves.curve_scalars`)
    modules.json, sentence_bert_config.json, ...      sentence-transformers files (aoe.model.interop)

The folder appears only when training finished: it is assembled in a temporary
folder beside it and renamed. Checkpoints live in ``seed{seed}.ckpt/`` beside it
(:mod:`aoe.training.checkpoints`): a rerun of the same job resumes from the newest intact one of
the same run (a preempted SLURM job retried by Snakemake continues where it stopped),
and once training finished, ``seed{seed}.ckpt/final`` keeps the model (hard links), so a
job killed after training, or rerun for a setting that does not change the weights,
lays the model out again in seconds. SIGTERM (what SLURM sends at a time limit, before
SIGKILL) or SIGINT (Ctrl-C) ends the current step, saves a checkpoint and exits with status 75, an
interruption and not a failure (:mod:`aoe.training.interruption`).

Batches. Every process reads the same global batch (the epoch's order is a
permutation seeded by (seed, epoch)), cut into ``gradient_accumulation_steps``
micro-batches; each process embeds its contiguous slice of a micro-batch.
``in_batch_pool`` says which texts the in-batch losses (negatives, ranking pairs) see:

* ``process`` (default, as the official angle-emb code, which has no all-gather):
  each process computes every loss on its own slice, so the pool is micro-batch / N
  with N processes; DDP's mean of the gradients makes the update that of the mean of
  the N losses, and the logged loss is that mean.
* ``global``: the embeddings are all-gathered with their gradients so each loss sees
  the whole micro-batch, exactly as one process would: the pool does not shrink with
  the number of processes. Every process computes the same loss; the all-gather's
  backward sums the N identical gradients and DDP's mean divides them back, so the
  update equals the one-process update.
* ``global_detached``: supervised SimCSE's all-gather (princeton-nlp/SimCSE
  simcse/models.py:170-192): the other processes' embeddings arrive without gradient and
  each process's own slice is spliced back in with its graph, so every process computes
  the whole micro-batch's loss but back-propagates through its own texts only; DDP's mean
  then makes the update the one-process gradient / N. ``detached_processes`` names the N
  of the run reproduced (SimCSE's 4 GPUs) and scales the loss by (this run's processes /
  N), so the update is SimCSE's on any number of processes, one included.

With one process the two are the same computation.

Training curves (``tensorboard/``): :mod:`aoe.training.curves`. Checkpoint selection (``select_checkpoint``: ``last``,
the default, or ``best``): :mod:`aoe.training.selection`. What trains (the transformer, or adapters over a frozen
base): :mod:`aoe.training.finetuning`. What the processes share: :mod:`aoe.training.gathers`.

Why this file stays longer than the others (about 800 lines): :func:`train` is the story of a run and reads top to
bottom, and the stages it runs (the run's assembly, the loop, the step, the checks of the weights, the save) all read
and write the one ``_Run`` it assembles; apart, each would be a file of one function passing that record along.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from aoe.config.hparams import TrainSettings
from aoe.data.contracts import check_score_range
from aoe.losses import Objective, get_objective
from aoe.losses.objectives import FORMATS
from aoe.model.encoder import EVAL_DTYPES, avoid_cudnn_attention, embed_bucketed, pad_ids
from aoe.model.lora import FINETUNES, QLORA_COMPUTE_DTYPES
from aoe.model.pooling import BATCH_DEPENDENT_POOLINGS, EVAL_POOLINGS, NEEDS_POOLER
from aoe.model.prompts import check_prompt
from aoe.model.tokens import ensure_pad_token, load_token_cache
from aoe.training import checkpoints
from aoe.training.checkpoints import checkpoint_dir
from aoe.training.fingerprint import fingerprint_of
from aoe.training.curves import Curves
from aoe.training.finetuning import Full, LoRA, finetuning_of
from aoe.training.gathers import agreed, detached_loss_scale, gather_detached, gather_with_grad
from aoe.training.interruption import RESUMABLE_EXIT, clear_interrupted, mark_interrupted, stop_on_signals
from aoe.training.selection import Selection, keep_best, select_at, with_selection
from aoe.util.fsutil import atomic_dir
from aoe.util.provenance import git_commit, library_versions

__all__ = ["TrainConfig", "train", "epoch_batches", "checkpoint_dir", "num_warmup_steps"]

# process: each process's slice of a micro-batch, as the official code; global: the whole micro-batch
IN_BATCH_POOLS = ("process", "global", "global_detached")
# last: the last step's weights, as the official code's printed numbers; best: the best epoch on select_split
SELECTIONS = ("last", "best")


@dataclass
class TrainConfig(TrainSettings):
    """Hyper-parameters of one training run (:class:`aoe.config.hparams.TrainSettings`, resolved per cell by
    :func:`aoe.config.hparams.resolve_cell` from config.yaml's train set, backbone and objective keys)."""

    def __post_init__(self) -> None:
        if self.finetune not in FINETUNES:
            raise ValueError(f"finetune must be one of {FINETUNES}, got {self.finetune!r}")
        check_prompt(self.prompt)
        if self.pooling not in EVAL_POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}; known: {sorted(EVAL_POOLINGS)}")
        if self.mixed_precision not in ("no", "fp16", "bf16"):
            raise ValueError(f"mixed_precision must be no, fp16 or bf16, got {self.mixed_precision!r}")
        if self.qlora_compute_dtype not in QLORA_COMPUTE_DTYPES:
            raise ValueError(f"qlora_compute_dtype must be one of {QLORA_COMPUTE_DTYPES}, got {self.qlora_compute_dtype!r}")
        if self.in_batch_pool not in IN_BATCH_POOLS:
            raise ValueError(f"in_batch_pool must be one of {IN_BATCH_POOLS}, got {self.in_batch_pool!r}")
        if self.detached_processes < 0 or (self.detached_processes and self.in_batch_pool != "global_detached"):
            raise ValueError(f"detached_processes {self.detached_processes!r} must be 0 or, with in_batch_pool global_detached, "
                             "the number of processes of the run reproduced")
        if self.eval_base_dtype is not None:
            # read at evaluation only (aoe.model.encoder.Encoder): a bad value would pass a whole training first
            if self.eval_base_dtype not in EVAL_DTYPES:
                raise ValueError(f"eval_base_dtype must be null or one of {sorted(EVAL_DTYPES)}, got {self.eval_base_dtype!r}")
            if self.finetune == "full":
                raise ValueError("eval_base_dtype sets the base under a LoRA adapter; a full fine-tuning has none")
        if self.length_buckets < 1:
            raise ValueError(f"length_buckets must be >= 1 (1: one padded forward pass), got {self.length_buckets}")
        if self.pooling in BATCH_DEPENDENT_POOLINGS and self.length_buckets != 1:
            # buckets would pad each to its own longest text: another arithmetic than the official collator's
            raise ValueError(f"pooling {self.pooling!r} reads the micro-batch's padding and trains one padded pass per "
                             f"micro-batch: length_buckets must be 1, got {self.length_buckets} (objectives.<name>.length_buckets: 1)")
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
        if self.select_checkpoint not in SELECTIONS:
            raise ValueError(f"select_checkpoint must be one of {SELECTIONS}, got {self.select_checkpoint!r}")
        if self.select_checkpoint == "best":
            if not isinstance(self.select_split, dict) or set(self.select_split) != {"dataset", "split"}:
                raise ValueError(f"select_checkpoint best needs select_split {{dataset: <d>, split: <s>}}, got {self.select_split!r}")
        elif self.select_split is not None:
            raise ValueError(f"select_split {self.select_split!r} is read only by select_checkpoint best, not {self.select_checkpoint!r}")
        if self.select_every < 0 or (self.select_every and self.select_checkpoint != "best"):
            raise ValueError(f"select_every {self.select_every!r} must be 0 or, with select_checkpoint best, a number of steps")
        if self.select_max_length < 0 or (self.select_max_length and self.select_checkpoint != "best"):
            raise ValueError(f"select_max_length {self.select_max_length!r} must be 0 or, with select_checkpoint best, a length in tokens")
        if self.reinit_pooler and self.pooling not in NEEDS_POOLER:
            raise ValueError(f"reinit_pooler re-initialises the pooler that pooling {sorted(NEEDS_POOLER)} trains; "
                             f"pooling {self.pooling!r} never reads it")
        if self.reinit_pooler and self.finetune != "full":
            raise ValueError(f"reinit_pooler needs full fine-tuning (an adapter neither trains nor saves the pooler), not {self.finetune!r}")


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


def _adamw(groups: list[dict], lr: float) -> torch.optim.Optimizer:
    """AdamW with torch's fused kernel where the parameters allow it, else the default implementation.

    On CPU torch's default is the per-tensor loop, several times slower per step than the
    fused kernel (bench/speed/train_limit.py); transformers' Trainer uses the fused one since torch 2.8.
    """
    try:
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without the fused kernel
        return torch.optim.AdamW(groups, lr=lr)


def _clip_gradients(accelerator, module: torch.nn.Module, max_norm: float) -> torch.Tensor | None:
    """Clip the global gradient norm; one multi-tensor (foreach) pass where accelerate's clipping is plain torch's.
    Returns the total norm before clipping (None where accelerate's clipping gives none)."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type in (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU):
        accelerator.unscale_gradients()  # fp16: as accelerator.clip_grad_norm_ does first
        grads = [p for p in module.parameters() if p.grad is not None]
        return torch.nn.utils.clip_grad_norm_(grads, max_norm, foreach=True)
    # FSDP, DeepSpeed, XLA: accelerate's own clipping
    return accelerator.clip_grad_norm_(module.parameters(), max_norm)


def _gradient_norm(accelerator, module: torch.nn.Module) -> torch.Tensor | None:
    """The total gradient norm without clipping (max_grad_norm 0): one foreach pass, read only at logged steps."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type in (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU):
        accelerator.unscale_gradients()  # fp16: the norm of the true gradients (the optimizer step does not unscale twice)
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        return torch.nn.utils.get_total_norm(grads, foreach=True) if grads else None
    return accelerator.clip_grad_norm_(module.parameters(), float("inf"))  # sharded gradients: accelerate's norm, no clipping


class Collator:
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


@dataclass
class _Run:
    """One run as :func:`_build` assembles it: what the step, loop and save stages read."""

    cfg: TrainConfig
    finetuning: Full | LoRA
    accelerator: object
    tokenizer: object
    objective: Objective
    data: object  # the token cache (a datasets.Dataset)
    lengths: list[int] | None  # text lengths for length-grouped batches
    collate: Collator
    module: torch.nn.Module  # the prepared (DDP-wrapped) _Trainee
    head: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: object
    total_steps: int
    micro: int  # examples per micro-batch, all processes together
    local: int  # examples per micro-batch and process
    selection: Selection | None = None  # select_checkpoint best


def train(
    cache_dir: str | Path,
    table: str | Path,
    backbone_dir: str | Path,
    out_dir: str | Path,
    cfg: TrainConfig,
    extra_record: dict | None = None,
    init_dir: str | Path | None = None,
    select_table: str | Path | None = None,
    select_is_test: bool = False,
) -> dict:
    """Train and save the model into ``out_dir`` (resuming from its checkpoint if one exists); return the run summary.

    ``init_dir``: a model folder this function wrote, of the same backbone, whose weights the run
    starts from (``cfg.init`` names its cell; both or neither must be given).
    ``select_table``: ``cfg.select_split``'s prepared pair table, for ``select_checkpoint: best`` only;
    ``select_is_test``: the cell's reported numbers are read on that split too (recorded, never used).

    Stages: :func:`_build` (accelerator, data, model, optimizer), :func:`_train_steps` (the
    loop, one :func:`_step` per optimizer step, logging and checkpoints), :func:`_save`.
    """
    out_dir = Path(out_dir)
    init_record = _check_init(cfg, backbone_dir, init_dir)
    if (cfg.select_checkpoint == "best") != (select_table is not None):
        raise ValueError(f"select_checkpoint {cfg.select_checkpoint!r} and select_table {select_table!r}: best needs the table, last takes none")
    objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
    identity = with_selection(checkpoints.run_identity(cfg, objective, cache_dir, backbone_dir, init_record), select_table)
    ckpt_root = checkpoint_dir(out_dir)
    if int(os.environ.get("RANK", "0")) == 0:
        clear_interrupted(ckpt_root)  # this run is no longer the interrupted one: a failure from here is a failure
    # the code this run trains with, as its identity holds it, and the commit it was in (planning compares the
    # fingerprint with the tree's: aoe.plan.code_changes)
    code = {**fingerprint_of(identity["code"]), "git_commit": git_commit()}

    def record(summary: dict) -> dict:
        # the summary (final.json keeps it) carries the selection; aoe_config.json shows it on its own
        selection = summary.get("selection")
        return {
            "pooling": cfg.pooling,
            "prompt": cfg.prompt,
            "finetune": cfg.finetune,
            "objective": asdict(objective),
            "train": asdict(cfg),
            "backbone": _backbone_identity(backbone_dir),
            "token_cache": json.loads((Path(cache_dir) / "cache.json").read_text()),
            "code": code,
            "summary": {k: v for k, v in summary.items() if k != "selection"},
            **({"selection": {**selection, "split_is_test": bool(select_is_test)}} if selection else {}),
            **({"init": init_record} if init_record else {}),
            **(extra_record or {}),
            **finetuning_of(cfg).record(out_dir, backbone_dir),
        }

    # trained before: by a job that did not end cleanly or whose result-neutral settings changed (its own final/), or
    # in another results tree (an overlay's own tree: the demo's models, issue 71), of the same identity either way
    finished = checkpoints.finished_model(ckpt_root, identity) or checkpoints.finished_elsewhere(out_dir, identity)
    if finished is not None:
        final, summary = finished
        summary = {**summary, "restored_from": str(final)}
        if int(os.environ.get("RANK", "0")) == 0:
            checkpoints.restore_final(final, out_dir, record(summary))
            Curves.rewrite(out_dir)  # final/ keeps no event files: they are drawn again from metrics.jsonl
            print(f"{out_dir}: restored the finished training kept in {final} (same run identity" + (
                f"); delete {ckpt_root} to train it again" if final.parent == ckpt_root else
                ", another results tree's: hard links, nothing copied or trained)"), flush=True)
        return summary
    kept = checkpoints.kept_final_changes(ckpt_root, identity)
    if kept and int(os.environ.get("RANK", "0")) == 0:  # a forced rerun after an edit of the objective: said, never restored (issue 70)
        print(f"{ckpt_root / checkpoints.FINAL} holds a finished training of another run ({'; '.join(kept)}); "
              "not restored: training again", flush=True)

    # the setting a score outside the train set's range is fixed in: the cell (Snakemake's wildcards) names the train set
    cell = (extra_record or {}).get("cell") or {}
    named = {"score_key": f"trainsets.{cell['trainset']}.score_range"} if "trainset" in cell else {}
    run = _build(cfg, objective, cache_dir, table, backbone_dir, init_dir, select_table, select_is_test, project_dir=ckpt_root, **named)
    out_dir.parent.mkdir(parents=True, exist_ok=True)  # checkpoints and the model go here
    state = {"step": 0, "epoch": 0, "batch": 0, "examples_seen": 0, "train_seconds": 0.0, "zero_loss_steps": 0,
             "interval": {"n": 0, "sums": {}}}
    metrics_lines: list[str] = []
    resumed_from = checkpoints.resume(run.accelerator, ckpt_root, identity, state, metrics_lines, partial=run.finetuning.partial_resume)
    with stop_on_signals() as arrived, Curves.opened(run.accelerator, ckpt_root, metrics_lines) as curves:
        _train_steps(run, state, ckpt_root, identity, metrics_lines, arrived, curves)
    keep_best(run)
    _check_trained(run, state)
    summary = {
        "steps": state["step"],
        "epochs_started": state["epoch"] + 1,
        "examples_seen": state["examples_seen"],
        "train_seconds": state["train_seconds"],
        "pairs_per_s": state["examples_seen"] / max(state["train_seconds"], 1e-9),
        "num_processes": run.accelerator.num_processes,
        "resumed_from_step": resumed_from,
        **({"selection": run.selection.record()} if run.selection else {}),
    }
    _save(run, out_dir, record(summary), summary, metrics_lines, identity)
    return summary


def _build(cfg: TrainConfig, objective: Objective, cache_dir, table, backbone_dir, init_dir,
           select_table=None, select_is_test: bool = False, project_dir: str | Path | None = None,
           score_key: str = "trainsets.<name>.score_range") -> _Run:
    """Accelerator, data, encoder, optimizer, scheduler, checkpoint hooks and validation pairs of one run;
    ``project_dir``: where accelerate's TensorBoard tracker writes (None: no tracker); ``score_key``: the
    setting that declares the train set's score_range, for the message refusing a score outside it."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs, set_seed
    from transformers import AutoTokenizer, get_linear_schedule_with_warmup

    finetuning = finetuning_of(cfg)
    # BERT's pooler (and an unused head) get no gradient: DDP must not wait for them
    accelerator = Accelerator(
        mixed_precision=cfg.mixed_precision,
        # without CUDA, several processes are CPU processes on the gloo backend
        cpu=not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        # training curves (Curves): local TensorBoard event files under project_dir, written by the main process
        **({"log_with": "tensorboard", "project_dir": str(project_dir)} if project_dir is not None else {}),
    )
    n_proc, accum = accelerator.num_processes, cfg.gradient_accumulation_steps
    micro = cfg.batch_size // accum
    if micro * accum != cfg.batch_size or micro % n_proc:
        raise ValueError(
            f"batch_size {cfg.batch_size} must split into gradient_accumulation_steps ({accum}) micro-batches "
            f"each divisible by the number of processes ({n_proc})"
        )
    set_seed(cfg.seed)  # python, numpy, torch (and cuda) RNGs: dropout masks, head init
    if cfg.deterministic:
        _use_deterministic_algorithms()

    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(backbone_dir))
    data = _load_data(cfg, objective, cache_dir, table, backbone_dir, score_key)
    avoid_cudnn_attention(accelerator.device)
    encoder = finetuning.load_encoder(backbone_dir, init_dir, accelerator.device)
    if cfg.reinit_pooler:
        reinit_pooler(encoder, cfg.seed)
    module = _Trainee(encoder, objective.make_head(encoder.config.hidden_size), cfg.pooling, cfg.length_buckets)
    optimizer = _adamw(_param_groups(module, cfg.weight_decay), cfg.learning_rate)
    if module.head is not None:
        # The objective runs the head after forward, where DDP cannot follow it ("Expected to mark
        # a variable ready only once"): DDP leaves the head alone and _step averages its gradients.
        from torch.nn.parallel import DistributedDataParallel

        head_names = [n for n, _ in module.named_parameters() if n.startswith("head.")]
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(module, head_names)
    total_steps = cfg.max_steps if cfg.max_steps > 0 else cfg.epochs * (len(data) // cfg.batch_size)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps(cfg, total_steps), total_steps)
    # The scheduler is stepped once per optimizer step by this loop, so it is only
    # registered for checkpointing (a prepared scheduler would step once per process).
    module, optimizer = accelerator.prepare(module, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    selection = Selection(cfg, select_table, tokenizer, select_is_test) if select_table is not None else None
    if selection is not None:
        accelerator.register_for_checkpointing(selection)  # after the scheduler: its index stays that of a last run
    finetuning.hook_checkpoints(accelerator)
    return _Run(
        cfg=cfg, finetuning=finetuning, accelerator=accelerator, tokenizer=tokenizer, objective=objective, data=data,
        lengths=[len(x) for x in data["input_ids_1"]] if cfg.length_grouped else None,
        collate=Collator(tokenizer, cfg, objective), module=module, head=accelerator.unwrap_model(module).head,
        optimizer=optimizer, scheduler=scheduler, total_steps=total_steps, micro=micro, local=micro // n_proc,
        selection=selection,
    )


def reinit_pooler(encoder: torch.nn.Module, seed: int) -> None:
    """Draw the backbone's pooler (dense + tanh over [CLS]) afresh, as SimCSE's new MLP head is drawn.

    SimCSE trains its ``cls`` pooler as a new MLPLayer (princeton-nlp/SimCSE simcse/models.py:19-33, 92-95):
    BertForCL builds BERT without its pooling layer (models.py:281) and ``cl_init`` calls ``init_weights``,
    transformers' ``_init_weights`` for a Linear: weight ~ normal(0, initializer_range), bias 0; from_pretrained
    then loads every BERT weight, the MLP being in no checkpoint. Here the MLP is BERT's own pooler, so it is
    redrawn the same way. Its own generator seeded with the run's seed: the same draw in every rerun of the
    cell, and the other random streams (dropout, batch order) left as a run without it has them.
    """
    pooler = getattr(getattr(encoder, "pooler", None), "dense", None)
    if not isinstance(pooler, torch.nn.Linear):
        raise ValueError(f"reinit_pooler: {type(encoder).__name__} has no pooler (dense + tanh over [CLS]) to draw afresh")
    generator = torch.Generator(device="cpu").manual_seed(seed)
    std = encoder.config.initializer_range
    with torch.no_grad():
        weight = torch.empty(pooler.weight.shape, dtype=torch.float32).normal_(0.0, std, generator=generator)
        pooler.weight.copy_(weight.to(pooler.weight.dtype))
        pooler.bias.zero_()


def _param_groups(module: torch.nn.Module, weight_decay: float) -> list[dict]:
    """The trainable parameters (LoRA: the adapters only), biases and norms without weight decay."""
    no_decay = ("bias", "LayerNorm.weight", "layer_norm", "norm.weight")
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    return [
        {"params": [p for n, p in params if not any(k in n for k in no_decay)], "weight_decay": weight_decay},
        {"params": [p for n, p in params if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]


def _use_deterministic_algorithms() -> None:
    """Deterministic kernels, as transformers' ``enable_full_determinism`` sets them, less its two debugging costs.

    That function also sets ``CUDA_LAUNCH_BLOCKING=1`` (every kernel launch waits for the GPU;
    no result changes) and overwrites ``CUBLAS_WORKSPACE_CONFIG`` with the smaller ``:16:8``.
    Process-wide and left on, as the HF Trainer leaves it.
    """
    # cuBLAS reads it when it first starts: before the model's first matmul
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _load_data(cfg: TrainConfig, objective, cache_dir, table, backbone_dir, score_key: str):
    """The token cache of ``table``, checked to hold a batch, the texts the objective reads, scores within the train
    set's ``score_range`` (``score_key`` names it) and labels the objective can learn from."""
    data = load_token_cache(cache_dir, table, backbone_dir, cfg.max_length, cfg.prompt)
    if len(data) < cfg.batch_size:
        raise ValueError(f"{table}: {len(data)} training examples, fewer than one batch of {cfg.batch_size}")
    missing = [f"input_ids_{j}" for j in range(1, objective.n_texts + 1) if f"input_ids_{j}" not in data.column_names]
    if missing:
        raise ValueError(f"{cache_dir}: objective {cfg.objective!r} on {cfg.format} needs {missing}")
    if cfg.format == "pairs":  # nli3 scores are classes and triplets have none: no scale to leave
        check_score_range(data["score"], cfg.score_range, table, score_key)
    scores = torch.tensor(data["score"], dtype=torch.float64)  # never NaN: build_token_cache refuses them
    labels = objective.train_labels(scores, cfg.score_range) if cfg.format == "pairs" else scores
    problems = objective.label_problems(labels)
    how = f" (labels from the score column by graded_labels {objective.graded_labels!r}, score_range {list(cfg.score_range)})" if cfg.format == "pairs" else ""
    why = "; ".join(f"{name}: {reason}" for name, reason in problems.items())
    if problems and len(problems) == sum(1 for w in objective.weights.values() if w):
        raise ValueError(
            f"{table}: nothing for objective {cfg.objective!r} to learn from {len(scores)} examples{how}: {why}; "
            "check the table's scores, the train set's score_range and its objectives"
        )
    if problems:
        print(f"WARNING: {table}: part of objective {cfg.objective!r} learns nothing here{how}: {why}", flush=True)
    return data


def _train_steps(run: _Run, state: dict, ckpt_root: Path, identity: dict, metrics_lines: list[str], arrived=(),
                 curves: Curves | None = None) -> None:
    """Optimizer steps from ``state`` to the end: a metrics line every ``log_every`` (also to ``curves``),
    a checkpoint every ``checkpoint_every``; once a signal has ``arrived`` (:func:`stop_on_signals`) a
    checkpoint after the current step, then SystemExit."""
    from aoe.util.progress import progress

    cfg, total = run.cfg, run.total_steps
    # whole lines in a rule's log (tqdm's \r redraws make one ever-growing line there)
    bar = progress(total=total, initial=state["step"], desc=f"train {cfg.objective} seed {cfg.seed}", unit="step",
                   disable=not run.accelerator.is_main_process)
    run.module.train()
    tick, tick_step, start = time.perf_counter(), state["step"], time.perf_counter()
    with bar:
        while state["step"] < total:
            batches = epoch_batches(len(run.data), cfg.batch_size, cfg.seed, state["epoch"], run.lengths)
            for b_idx in range(state["batch"], len(batches)):
                rows = run.data[batches[b_idx]]
                logged = _step(run, [dict(zip(rows, vals)) for vals in zip(*rows.values())], state, b_idx)
                interval = _add_to_interval(state, logged)
                state["step"] += 1
                state["batch"] = b_idx + 1
                state["examples_seen"] += cfg.batch_size
                bar.update(1)
                if _logs(run, state["step"]):
                    now = time.perf_counter()
                    record = {
                        "step": state["step"],
                        "epoch": state["epoch"],
                        # the loss and its parts: means over the steps since the last line, as the HF Trainer logs
                        **logged,
                        **{k: v / interval["n"] for k, v in interval["sums"].items()},
                        "steps_averaged": interval["n"],
                        "lr": run.scheduler.get_last_lr()[0],
                        "pairs_per_s": cfg.batch_size * (state["step"] - tick_step) / max(now - tick, 1e-9),
                    }
                    tick, tick_step = now, state["step"]
                    state["interval"] = {"n": 0, "sums": {}}
                    bar.set_postfix({k: f"{record[k]:.4g}" for k in (*logged, "pairs_per_s")})
                    metrics_lines.append(json.dumps(record))
                    if curves is not None:
                        curves.push(metrics_lines)
                state["zero_loss_steps"] += logged["loss"] == 0.0
                if cfg.select_every and state["step"] % cfg.select_every == 0:
                    # before a checkpoint of this step, which then holds the score and the weights it kept
                    start += select_at(run, state, metrics_lines)
                stopping = agreed(run.accelerator, bool(arrived))
                checkpoint = state["step"] < total and (stopping or (cfg.checkpoint_every and state["step"] % cfg.checkpoint_every == 0))
                if checkpoint or state["step"] % cfg.log_every == 0:
                    _check_weights(run, state)  # never a checkpoint of diverged weights
                if checkpoint:
                    state["train_seconds"] += time.perf_counter() - start
                    start = time.perf_counter()
                    saved = _save_checkpoint(run.accelerator, ckpt_root, identity, state, metrics_lines)
                    if stopping:
                        signal_name = arrived[0] if arrived else "a signal on another process"
                        if run.accelerator.is_main_process:
                            mark_interrupted(ckpt_root, signal_name, state["step"], total, saved)
                        # to the log; Snakemake's terminal gets one line from the record (aoe.plan.interruptions)
                        print(f"{signal_name} at step {state['step']} of {total}: checkpoint {saved} saved; "
                              "rerunning the job resumes from it", file=sys.stderr, flush=True)
                        raise SystemExit(RESUMABLE_EXIT)  # not the 1 of an error (aoe.training.interruption)
                if state["step"] >= total:
                    break
            else:
                # an epoch end (also one a resumed run reaches from a checkpoint of the epoch's last step)
                if not cfg.select_every:
                    start += select_at(run, state, metrics_lines)
                if curves is not None:
                    curves.push(metrics_lines)
                state["epoch"] += 1
                state["batch"] = 0
    # the last epoch ends at the last step (or max_steps cuts it), as the HF Trainer's on_epoch_end; by steps
    # (select_every) the HF Trainer evaluates at multiples of eval_steps only, never at the end
    if not cfg.select_every:
        start += select_at(run, state, metrics_lines)
    if curves is not None:
        curves.push(metrics_lines)
    state["train_seconds"] += time.perf_counter() - start


def _add_to_interval(state: dict, logged: dict[str, float]) -> dict:
    """Add one step's loss and parts to the running sums of the logging interval (kept in ``state``, so a
    checkpoint between two lines carries them); the interval so far."""
    interval = state.setdefault("interval", {"n": 0, "sums": {}})
    interval["n"] += 1
    for k, v in logged.items():
        if k != "grad_norm":  # measured at the logged step only
            interval["sums"][k] = interval["sums"].get(k, 0.0) + v
    return interval


def _logs(run: _Run, step: int) -> bool:
    """Whether optimizer step ``step`` (counted from 1) writes a metrics line: every ``log_every``, and the last."""
    return step % run.cfg.log_every == 0 or step == run.total_steps


def _step(run: _Run, rows: list[dict], state: dict, b_idx: int) -> dict[str, float]:
    """One optimizer step over the global batch ``rows``; the loss and its components to log, and at a
    logged step ``grad_norm``: the total gradient norm before clipping (the clipping's own; without
    clipping, computed then only).

    Logged values are means over the micro-batches, and over the processes where each
    computed its own loss (``in_batch_pool: process``).
    """
    cfg, accelerator, accum = run.cfg, run.accelerator, run.cfg.gradient_accumulation_steps
    split = cfg.in_batch_pool == "process" and accelerator.num_processes > 1  # each process its own loss
    scale = detached_loss_scale(cfg, accelerator.num_processes) / accum
    logged: dict[str, float] = {}
    for m in range(accum):
        batch = run.collate(rows[m * run.micro : (m + 1) * run.micro])
        # gradients are averaged over processes once, after the step's last micro-batch
        sync = contextlib.nullcontext() if m == accum - 1 else accelerator.no_sync(run.module)
        with sync:
            loss, parts = _micro_batch_loss(run, batch)
            if not torch.isfinite(loss):
                comps = {k: x.item() for k, x in parts.items()}
                raise FloatingPointError(
                    f"non-finite loss {loss.item()} at step {state['step']} (epoch {state['epoch']}, "
                    f"batch {b_idx}, micro-batch {m}); components {comps}; "
                    f"batch text ids {batch['text_ids'].tolist()}"
                )
            accelerator.backward(loss * scale)
        for k, x in {"loss": loss, **parts}.items():
            logged[k] = logged.get(k, 0.0) + x.item() / accum
    if run.head is not None and split:
        # outside DDP (_build); under global every process computed the same head gradients
        for p in run.head.parameters():
            p.grad = accelerator.reduce(p.grad, "mean")
    norm, measure_norm = None, _logs(run, state["step"] + 1)
    if cfg.max_grad_norm > 0:
        norm = _clip_gradients(accelerator, run.module, cfg.max_grad_norm)
    elif measure_norm:
        norm = _gradient_norm(accelerator, run.module)
    if measure_norm and norm is not None:
        logged["grad_norm"] = float(norm)  # the same on every process: gradients are averaged before it
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad()
    if split:
        # one all-reduce for every logged value; the same key order on every process (same objective)
        means = accelerator.reduce(torch.tensor(list(logged.values()), dtype=torch.float64, device=accelerator.device), "mean")
        logged = dict(zip(logged, means.tolist()))
    return logged


def longest_of_slice(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A process's (b, K, T) slice of a micro-batch without the positions that are padding in all its
    texts: padded to its own longest text, as each GPU's collator padded its own per-device batch
    (fcb6223 angle_emb/angle.py:262, 314-334, padding='longest'), which a padded pooling reads."""
    keep = mask.flatten(0, 1).any(dim=0)  # (T,): right or left padding leaves one contiguous run
    return ids[..., keep], mask[..., keep]


def _micro_batch_loss(run: _Run, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The objective on this process's slice of the micro-batch (``process``) or on the whole micro-batch
    (``global``: gathered with gradients; ``global_detached``: the others' slices without)."""
    accelerator = run.accelerator
    device, n_proc, rank = accelerator.device, accelerator.num_processes, accelerator.process_index
    mine = slice(rank * run.local, (rank + 1) * run.local)
    ids, mask = batch["input_ids"][mine], batch["attention_mask"][mine]
    if run.cfg.pooling in BATCH_DEPENDENT_POOLINGS and n_proc > 1:
        ids, mask = longest_of_slice(ids, mask)
    emb = run.module(ids.to(device), mask.to(device))  # (local, K, H)
    if run.cfg.in_batch_pool in ("global", "global_detached"):
        if run.cfg.in_batch_pool == "global":
            emb = gather_with_grad(emb, n_proc)  # (micro, K, H)
        else:
            emb = gather_detached(emb, n_proc, rank)
        labels, text_ids = batch["labels"], batch["text_ids"]
    else:
        labels, text_ids = batch["labels"][mine], batch["text_ids"][mine]
    return run.objective(tuple(emb.unbind(1)), labels.to(device), text_ids.to(device), run.head)


def _save(run: _Run, out_dir: Path, record: dict, summary: dict, metrics_lines: list[str], identity: dict) -> None:
    """Write the model folder (by the main process), keep it as the checkpoint folder's ``final``, drop the step checkpoints.

    Everything is written at the end (metrics are kept in memory), into a folder that
    replaces ``out_dir`` only when complete; ``final`` (hard links, no extra disk) is in
    place before it, so there is no moment when a kill loses the trained model.
    """
    accelerator = run.accelerator
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        root = checkpoint_dir(out_dir)
        with atomic_dir(out_dir) as work:
            # full fine-tuning: the whole transformer; LoRA: peft writes the adapter only
            accelerator.unwrap_model(run.module).encoder.save_pretrained(work, safe_serialization=True)
            run.tokenizer.save_pretrained(work)
            (work / "metrics.jsonl").write_text("".join(line + "\n" for line in metrics_lines))
            (work / "aoe_config.json").write_text(json.dumps(record, indent=2) + "\n")
            (work / "versions.json").write_text(json.dumps(library_versions(), indent=2) + "\n")
            # so that sentence_transformers.SentenceTransformer(out_dir) embeds as our Encoder does; a padded
            # pooling has no sentence-transformers form (its vector of a text depends on the batch)
            if run.cfg.pooling not in BATCH_DEPENDENT_POOLINGS:
                from aoe.model.interop import write_sentence_transformers_files

                write_sentence_transformers_files(work)
            checkpoints.keep_final(work, root, identity, summary)
            # after final/ is made: TensorBoard would list its hard links as a second copy of every run
            Curves.move_into(root, work)
        checkpoints.remove_steps(root)
    accelerator.wait_for_everyone()


def _check_weights(run: _Run, state: dict) -> None:
    """Refuse weights that an update made non-finite: the loss of the step before was finite, the model is not.

    (A learning rate far too high: the saved model would embed every text to NaN and only the
    evaluation, much later, would notice.)
    """
    module = run.accelerator.unwrap_model(run.module)
    trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    norms = torch._foreach_norm([p.detach() for _, p in trainable]) if trainable else []
    bad = [n for (n, _), x in zip(trainable, norms) if not torch.isfinite(x)]
    if bad:
        raise FloatingPointError(
            f"weights non-finite after step {state['step']} ({len(bad)} of {len(trainable)} tensors, first {bad[0]}); "
            f"the last losses were finite, so the update diverged: lower learning_rate ({run.cfg.learning_rate}) "
            "or check max_grad_norm and mixed_precision"
        )


def _check_trained(run: _Run, state: dict) -> None:
    """Before the model is saved: finite weights that embed a batch to finite vectors (huge finite weights
    overflow in the forward pass), and a loss that was not 0 at every step (nothing learnt)."""
    _check_weights(run, state)
    module = run.accelerator.unwrap_model(run.module)
    enc = pad_ids(run.data[: run.local]["input_ids_1"], run.tokenizer)
    device = run.accelerator.device
    module.eval()
    with torch.no_grad():
        emb = embed_bucketed(module.encoder, module.pooling, enc["input_ids"].to(device), enc["attention_mask"].to(device), 1)
    module.train()
    if not torch.isfinite(emb).all():
        raise FloatingPointError(
            f"the model after step {state['step']} embeds the train set's first texts to non-finite vectors "
            f"({int((~torch.isfinite(emb)).any(-1).sum())} of {emb.shape[0]} texts): the updates diverged; "
            f"lower learning_rate ({run.cfg.learning_rate}) or check max_grad_norm and mixed_precision"
        )
    if state["step"] and state["zero_loss_steps"] == state["step"]:
        raise FloatingPointError(
            f"the loss was exactly 0 at every one of {state['step']} steps: no batch held a pair the objective "
            f"{run.cfg.objective!r} could rank or contrast (identical texts dropped, equal labels); nothing was learnt"
        )


def _save_checkpoint(accelerator, root: Path, identity: dict, state: dict, metrics_lines: list[str]) -> Path:
    """:func:`aoe.training.checkpoints.save_checkpoint` (one name tests can wrap to kill a run right after a checkpoint)."""
    return checkpoints.save_checkpoint(accelerator, root, identity, state, metrics_lines)


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


def main(argv: list[str] | None = None) -> None:
    """Command line, for ``accelerate launch -m aoe.training.train`` (several processes) and standalone use."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m aoe.training.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", required=True, help="token cache folder (results/tokens/...)")
    parser.add_argument("--table", required=True, help="the prepared table the cache was built from")
    parser.add_argument("--backbone", required=True, help="backbone folder (results/backbones/...)")
    parser.add_argument("--out", required=True, help="output model folder")
    parser.add_argument("--config", required=True, help="JSON file with the TrainConfig fields")
    parser.add_argument("--record", help="JSON file of extra fields for aoe_config.json")
    parser.add_argument("--init", help="trained model folder to start from (the config's init names its cell)")
    parser.add_argument("--select-table", help="select_checkpoint best: the prepared pair table of select_split")
    parser.add_argument("--select-is-test", action="store_true", help="select_split is also a split the cell is evaluated on")
    args = parser.parse_args(argv)
    cfg = TrainConfig(**json.loads(Path(args.config).read_text()))
    extra = json.loads(Path(args.record).read_text()) if args.record else None
    summary = train(args.cache, args.table, args.backbone, args.out, cfg, extra_record=extra, init_dir=args.init,
                    select_table=args.select_table, select_is_test=args.select_is_test)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

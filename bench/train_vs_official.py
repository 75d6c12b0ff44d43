"""Training speed of this project's engine against the official AnglE trainer (angle-emb 0.6.1), side by side.

    .venv/bin/python bench/train_vs_official.py [--steps 60] [--repeats 3] [--threads 2]
        [--official-order engine|random] [--eval first|all|none] [--eval-max-pairs N] [--out PATH]
        [--device cpu|cuda] [--tables DIR] [--official-python PY --official-site DIR]

Both sides fine-tune the offline MiniLM-L6 (``_common.backbone_dir()``) on STS-B train from
the data mirror (the pipeline's reader, ``_common.stsb_table``), CLS pooling, batch 32 pairs,
max_length 64, ``--steps`` optimizer steps, fp32, lr 2e-5 with a linear schedule and
``int(0.1 * steps)`` warm-up steps, AdamW (fused, no weight decay), gradient clipping at 1.0,
seed 42, ``--threads`` torch threads (``OMP_NUM_THREADS`` and ``torch.set_num_threads``):

* ``engine``: ``aoe.training.train.train`` as the pipeline's train rule calls it (token cache built once
  before the runs, as the pipeline's tokens rule does; collation in the loop; log every 10
  steps). pairs/s from its run summary: the training loop's wall time, model loading and
  saving excluded.
* ``official``: ``angle_emb.AnglE(...).fit(...)`` in its own venv (``_common.ensure_angle_venv``:
  bench/out/angle-venvs/angle-emb-0.6.1-<key>, built from the configured package index when
  missing; angle-emb 0.6.1 pins transformers 5.3.0). Raw texts go in as a
  ``datasets.Dataset`` with text1/text2/label (label = the raw 0-5 STS-B score, as its README's
  STS-B example); its collator tokenizes inside the loop (that is how the official trainer
  works, and it is counted). ``filter_duplicate=False`` (the official CLI default; fit's
  default True would drop pairs and shrink batches), ``save_strategy='no'`` (no checkpoint
  inside the timed loop), ``logging_steps=10``. pairs/s = 32 * steps / (time from the HF
  Trainer's ``on_train_begin`` to its ``on_train_end``, a TrainerCallback with
  ``time.perf_counter``): the loop only, model loading and ``save_pretrained`` excluded. The
  Trainer's own ``train_runtime`` / ``train_samples_per_second`` are recorded beside it.

Same batches. With ``--official-order engine`` (default) the official side gets the engine's
exact batch sequence (``aoe.training.train.epoch_batches``, seed 42) through the Trainer's
``train_sampling_strategy='sequential'``; the padded input ids and masks of every batch are
hashed on both sides (ours from the token cache and the engine's collator, theirs from
angle-emb's ``AngleDataCollator``) and must be identical. ``--official-order random`` leaves
the order to the HF Trainer's seeded RandomSampler instead.

Loss. angle-emb's STS-B recipe (its README): ``cosine_w 1, ibn_w 1, angle_w 0.02, cosine_tau
20, ibn_tau 20, angle_tau 20`` (``angle_pooling_strategy 'sum'``; ``cln_w`` only acts on
query/positive/negative data). Our ``angle_arxiv`` objective (cosine + contrastive + angle)
with overrides::

    angle-emb (AngleLoss)          ours (get_objective('angle_arxiv', overrides))
    cosine_w 1.0, cosine_tau 20    weights.cosine 1.0, cosine_tau 20
    ibn_w 1.0, ibn_tau 20          weights.contrastive 1.0, contrastive_tau 20
    angle_w 0.02, angle_tau 20     weights.angle 0.02, angle_tau 20
    labels: the raw score          graded_labels score (score / 5: the same ranking order)
    ibn targets int(label) >= 1    contrastive_threshold 0.2 (score / 5 >= 0.2), contrastive_reduction all_rows
    no duplicate handling          identical_texts ignore
    (filter_duplicate False)

``loss_check`` in the JSON evaluates both implementations on the benchmark's first batches
(random embeddings, real labels), angle-emb's loss.py loaded from its venv by path. What
cannot be matched:

* in-batch targets: angle-emb 0.6.1 keeps the raw float label (its tokenizer no longer
  truncates it: 0.6.1 angle_emb/angle.py:223, where 0.1.1-0.5.x stored ``int(label)``), so its
  ranking terms see the graded score while its in-batch loss builds targets from
  ``y.int()`` by index products: besides the partner of a pair scoring >= 1, a text k is a
  target of text r when ``k * int(y_k) == partner(r) * int(y_r)``. Our ``graded_labels int``
  (the 0.1.1/0.4.6 behaviour) would reproduce those targets but tie the ranking terms within
  each integer; ``score`` keeps the ranking and the partner targets and leaves out the
  index-product extras (6-12 per batch here; loss_check shows the in-batch terms agree when
  angle-emb gets binary labels, which have none);
* dropout masks: same seed, different RNG paths (ours seeds before building the model,
  the HF Trainer seeds at its construction);
* library versions: transformers 5.3.0 (pinned by angle-emb) against ours; the JSON records both;
* implementation choices that are what is compared, not settings: angle-emb tokenizes in the
  loop, the engine reads the token cache; angle-emb runs one forward pass over each batch
  padded to its longest text, the engine ``length_buckets`` passes over texts of similar
  length (``aoe.model.encoder.embed_bucketed``: the same embeddings, fewer padded positions;
  ``--length-buckets 1`` turns it off); the HF Trainer clips with torch's default
  (per-tensor on CPU), the engine with foreach; both use fused AdamW (HF's default optim
  ``adamw_torch_fused`` on torch >= 2.8, recorded). angle-emb's fit wraps its backbone in
  ``torch.compile`` after building the trainer, which keeps the eager module (the class the
  trainer ran is recorded).

Runs alternate (engine, official, engine, official, ...), each a fresh process, ``--repeats``
each; the JSON (bench/out/train_vs_official.json) has every run's pairs/s, the load
average before and after it, median/min/max/spread per side, the per-repeat ratio
engine/official and its median, and "steady" pairs/s (the loop after the first 10 steps).

Quality (``--eval first``, default: the first repeat of each side, plus the untrained
backbone as a reference): each saved model folder is loaded in this venv with
``aoe.model.encoder.Encoder(dir, pooling='cls')`` and scored with ``aoe.evaluate.sts.evaluate_sts``
on STS-B test from the mirror (Spearman x100, max_length 512 as the pipeline's evaluation;
``--eval-max-pairs`` scores a seeded subset, for smoke tests only).

Smoke test (tiny, seconds of training): ``--steps 4 --repeats 1 --eval-max-pairs 100 --out /tmp/x.json``.

On a GPU (``--device cuda``; ``bench/gpu_official.sh`` runs it on the lent GPU machine, bench/README.md
"GPU"): both sides train on CUDA (the engine through accelerate, angle-emb through ``AnglE(device='cuda')``
and the HF Trainer), each worker records ``torch.cuda.max_memory_allocated``, and the clocks read after
``torch.cuda.synchronize()`` where a time is taken (the official side's step-10 and last-step ends, its
loop's begin and end; the engine's logged windows end with the loss's ``.item()``, which waits for the GPU).
That machine has no network and no data mirror: ``--tables DIR`` reads STS-B train/test as
``DIR/stsb-{split}.parquet`` (``gpu_check.py prepare`` writes them), ``--official-python`` /
``--official-site`` name the interpreter and the folder of angle-emb 0.6.1's carried wheels
(``gpu_carry.py wheels --for official``) instead of building the venv, and MiniLM travels without its
weights (random ones of its shape: speed only, so ``--eval none``). ``--device cpu`` hides CUDA from the
workers (``CUDA_VISIBLE_DEVICES=''``), so the CPU comparison means the same on a GPU machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C  # noqa: E402

ANGLE_VERSION = "0.6.1"
SIDES = ("engine", "official")

# angle-emb's README STS-B recipe (AngleLoss keyword arguments)
ANGLE_LOSS = {"cosine_w": 1.0, "ibn_w": 1.0, "angle_w": 0.02, "cosine_tau": 20.0, "ibn_tau": 20.0, "angle_tau": 20.0,
              "angle_pooling_strategy": "sum"}
# the same loss in this project's terms
OBJECTIVE = "angle_arxiv"
OVERRIDES = {
    "weights": {"cosine": ANGLE_LOSS["cosine_w"], "contrastive": ANGLE_LOSS["ibn_w"], "angle": ANGLE_LOSS["angle_w"]},
    "cosine_tau": ANGLE_LOSS["cosine_tau"],
    "contrastive_tau": ANGLE_LOSS["ibn_tau"],
    "angle_tau": ANGLE_LOSS["angle_tau"],
    "graded_labels": "score",  # 0.6.1 ranks on the raw score (score / 5: the same order)
    "contrastive_threshold": 0.2,  # its in-batch positives: int(score) >= 1  <=>  score / 5 >= 0.2
    "contrastive_reduction": "all_rows",  # its cross-entropy mean over all 2B texts
    "identical_texts": "ignore",  # angle-emb (filter_duplicate False) treats duplicates as negatives
}
SCORE_RANGE = (0.0, 5.0)
LOG_EVERY = 10
UNMATCHED = [
    "in-batch targets: angle-emb 0.6.1 ranks on the raw score but builds in-batch targets from int(score) by index "
    "products (a text k is also a target of text r when k*int(y_k) == partner(r)*int(y_r)); ours (graded_labels score): "
    "the partner of a pair scoring >= 1 only",
    "dropout masks: same seed, different RNG paths (ours seeds before building the model, the HF Trainer at its init)",
    "transformers version: angle-emb 0.6.1 pins transformers 5.3.0 (see versions)",
    "by design (what is compared): angle-emb tokenizes in its collator inside the loop, the engine reads the token "
    "cache; HF clips gradients with torch's default, the engine with foreach",
]


# --------------------------------------------------------------------------- settings


def _shared(args) -> dict:
    return {
        "backbone": str(C.backbone_dir()),
        "data": "STS-B train (mirror, aoe.data.sts reader)",
        "batch_size": 32,
        "max_length": 64,
        "steps": args.steps,
        "learning_rate": args.lr,
        "warmup_steps": int(args.warmup_ratio * args.steps),
        "warmup_ratio": args.warmup_ratio,
        "lr_schedule": "linear",
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "seed": args.seed,
        "precision": "fp32",
        "device": args.device,
        "pooling": "cls",
        "threads": args.threads,
        "log_every": LOG_EVERY,
        "official_order": args.official_order,
    }


def _config(args):
    from aoe.training.train import TrainConfig

    return TrainConfig(objective=OBJECTIVE, objective_overrides=OVERRIDES, pooling="cls", seed=args.seed,
                       learning_rate=args.lr, batch_size=32, max_steps=args.steps, warmup_ratio=args.warmup_ratio,
                       weight_decay=0.0, max_grad_norm=1.0, mixed_precision="no", max_length=64,
                       score_range=SCORE_RANGE, log_every=LOG_EVERY,
                       **({} if args.length_buckets is None else {"length_buckets": args.length_buckets}))


def _batch_order(n: int, steps: int, seed: int) -> list[list[int]]:
    """The engine's global batches of the first ``steps`` steps (its epoch_batches, epoch after epoch)."""
    from aoe.training.train import epoch_batches

    order, epoch = [], 0
    while len(order) < steps:
        order += epoch_batches(n, 32, seed, epoch)
        epoch += 1
    return order[:steps]


def _hash_batch(h, input_ids, attention_mask) -> None:
    import torch

    h.update(str(tuple(input_ids.shape)).encode())
    h.update(input_ids.to(torch.int64).contiguous().numpy().tobytes())
    h.update(attention_mask.to(torch.int64).contiguous().numpy().tobytes())


# --------------------------------------------------------------------------- official venv


def ensure_angle_venv() -> Path:
    """The python of angle-emb ANGLE_VERSION's venv (``_common.ensure_angle_venv``: built from the configured index when missing)."""
    return C.ensure_angle_venv(ANGLE_VERSION)


def official_env(args) -> dict:
    """The official worker's environment: its carried site alone on PYTHONPATH (never this venv's packages)."""
    return {"PYTHONPATH": args.official_site} if args.official_site else {}


def _angle_loss_module(python: str, env: dict):
    """angle-emb's loss.py (torch only), found by the official interpreter and loaded by path here."""
    import importlib.util

    found = subprocess.run([python, "-c", "import angle_emb.loss as m; print(m.__file__)"], check=False,
                           capture_output=True, text=True, env={**os.environ, **env})
    path = found.stdout.strip().splitlines()[-1:] if found.returncode == 0 else []
    if not path:
        raise SystemExit(f"{python} does not import angle_emb.loss:\n{found.stderr[-2000:]}")
    spec = importlib.util.spec_from_file_location("angle_emb_loss", path[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path[0]


def _table(split: str, args) -> Path:
    """STS-B ``split``: from ``--tables`` (a prepared bundle: the GPU machine has no mirror), else from the mirror."""
    if args.tables:
        path = Path(args.tables) / f"stsb-{split}.parquet"
        if not path.is_file():
            raise SystemExit(f"--tables {args.tables}: no stsb-{split}.parquet there (bench/gpu_check.py prepare writes it)")
        return path
    return C.stsb_table(split, args.mirror)


def _cuda_check(args) -> dict:
    """The worker's device record; refuses ``--device cuda`` without a GPU rather than timing the CPU under its name."""
    import torch

    if args.device != "cuda":
        return {"device": "cpu"}
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    torch.cuda.reset_peak_memory_stats()
    return {"device": "cuda", "gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}


def _cuda_peak(args) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if args.device == "cuda" else None


# --------------------------------------------------------------------------- preparation (this venv)


def prepare(args, official_python: str) -> dict:
    """Token cache, the official side's ordered train rows, the input hash of our batches, the loss check."""
    import pandas as pd
    import torch
    from transformers import AutoTokenizer

    from aoe.losses import get_objective
    from aoe.model.tokens import ensure_pad_token
    from aoe.model.tokens import load_token_cache
    from aoe.training.train import Collator

    table = _table("train", args)
    cache = C.token_cache(table, 64)
    df = pd.read_parquet(table)
    order = _batch_order(len(df), args.steps, args.seed)
    if args.official_order == "engine":
        idx = [i for b in order for i in b]
    else:
        idx = list(range(len(df)))
    rows = [{"text1": str(df["sentence1"].iat[i]), "text2": str(df["sentence2"].iat[i]), "label": float(df["score"].iat[i])}
            for i in idx]
    data_file = C.WORK_DIR / f"tvo-official-train-{args.official_order}-{args.seed}-{args.steps}.json"
    data_file.parent.mkdir(parents=True, exist_ok=True)
    data_file.write_text(json.dumps(rows))

    # our padded batches, exactly as the engine's loop builds them
    cfg = _config(args)
    bb = C.backbone_dir()
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(bb))
    data = load_token_cache(cache, table, bb, 64)
    collate = Collator(tokenizer, cfg, get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format))
    h = hashlib.sha256()
    padded, real = 0, 0
    batches = []
    for b_idx in order:
        r = data[b_idx]
        batch = collate([dict(zip(r, vals)) for vals in zip(*r.values())])
        b, k, t = batch["input_ids"].shape
        ids, mask = batch["input_ids"].view(b * k, t), batch["attention_mask"].view(b * k, t)
        _hash_batch(h, ids, mask)
        padded += ids.numel()
        real += int(mask.sum())
        batches.append((batch["labels"], torch.tensor(df["score"].to_numpy()[b_idx], dtype=torch.float64)))
    return {
        "table": table,
        "cache": cache,
        "official_data": data_file,
        "engine_inputs_sha256": h.hexdigest(),
        "padded_tokens": padded,
        "padding_share": 1 - real / padded,
        "loss_check": loss_check(batches[: min(3, len(batches))], args, official_python),
    }


def loss_check(batches: list[tuple], args, official_python: str) -> dict:
    """Both implementations of the loss on the same embeddings: random (seeded) u, v and the batches' real labels.

    ``batches``: (our labels as the engine's collator makes them (score / 5, float32), the raw scores) per batch.
    The in-batch term is also compared with angle-emb fed binary labels (int(score) >= 1), where its
    targets are the partners only: there it must equal ours.
    """
    import torch

    from aoe.losses import get_objective

    L, path = _angle_loss_module(official_python, official_env(args))
    objective = get_objective(OBJECTIVE, OVERRIDES, format="pairs")
    g = torch.Generator().manual_seed(args.seed)
    weights = {"cosine": ANGLE_LOSS["cosine_w"], "contrastive": ANGLE_LOSS["ibn_w"], "angle": ANGLE_LOSS["angle_w"]}
    per_batch = []
    for ours_labels, scores in batches:
        labels = ours_labels.double()  # score / 5, as the engine trains on
        b = labels.shape[0]
        u = torch.randn(b, 384, generator=g, dtype=torch.float64)
        v = 0.6 * u + 0.8 * torch.randn(b, 384, generator=g, dtype=torch.float64)  # related pairs, cos ~ 0.6
        zig = torch.stack([u, v], dim=1).reshape(2 * b, -1)  # angle-emb's layout: t1_0, t2_0, t1_1, ...
        # raw scores per text, through float32 as angle-emb's collator makes them (torch.Tensor of floats)
        y = scores.float().double().repeat_interleave(2)[:, None]
        official = {
            "cosine": float(L.cosine_loss(y, zig, ANGLE_LOSS["cosine_tau"])),
            "contrastive": float(L.in_batch_negative_loss(y, zig, ANGLE_LOSS["ibn_tau"])),
            "angle": float(L.angle_loss(y, zig, ANGLE_LOSS["angle_tau"], pooling_strategy=ANGLE_LOSS["angle_pooling_strategy"])),
        }
        official_total = sum(weights[k] * x for k, x in official.items())  # AngleLoss.__call__, format A
        official_ibn_binary = float(L.in_batch_negative_loss((y.int() >= 1).double(), zig, ANGLE_LOSS["ibn_tau"]))
        total, parts = objective((u, v), labels, None)
        ours = {k: float(x) for k, x in parts.items()}
        partner_targets, extra_targets = C.official_target_counts(y)
        per_batch.append({
            "official": official, "official_total": official_total, "ours": ours, "ours_total": float(total),
            "abs_diff": {k: abs(official[k] - ours[k]) for k in official},
            "total_abs_diff": abs(official_total - float(total)),
            "official_ibn_targets": partner_targets + extra_targets,
            "official_ibn_partner_targets": partner_targets,
            "official_ibn_extra_targets": extra_targets,
            "texts": 2 * b,
            "official_ibn_binary_labels": official_ibn_binary,
            "contrastive_vs_binary_abs_diff": abs(official_ibn_binary - ours["contrastive"]),
        })
    worst = {k: max(p["abs_diff"][k] for p in per_batch) for k in ("cosine", "angle", "contrastive")}
    worst["total"] = max(p["total_abs_diff"] for p in per_batch)
    return {
        "what": "float64 random embeddings (v = 0.6 u + 0.8 noise), the first batches' real labels; angle-emb's "
                "loss.py functions weighted as AngleLoss (format A) vs get_objective('angle_arxiv', overrides) "
                "(graded_labels score, threshold 0.2, contrastive_reduction all_rows, identical_texts ignore). "
                "contrastive differs by angle-emb's index-product extra targets; with binary labels it must agree",
        "angle_emb_loss_py": path,
        "max_abs_diff": worst,
        "max_contrastive_vs_binary_abs_diff": max(p["contrastive_vs_binary_abs_diff"] for p in per_batch),
        "official_ibn_extra_targets_per_batch": [p["official_ibn_extra_targets"] for p in per_batch],
        "batches": per_batch,
    }


# --------------------------------------------------------------------------- workers


def _steady(step_ends: dict[int, float], steps: int) -> float | None:
    """pairs/s from the end of step LOG_EVERY to the end of the last step (None for short runs)."""
    if steps <= LOG_EVERY or LOG_EVERY not in step_ends or steps not in step_ends:
        return None
    return 32 * (steps - LOG_EVERY) / (step_ends[steps] - step_ends[LOG_EVERY])


def worker_engine(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import accelerate
    import transformers

    from aoe.training.train import train

    device = _cuda_check(args)
    table = _table("train", args)
    cache = C.token_cache(table, 64)
    out = Path(args.model_out)
    shutil.rmtree(out, ignore_errors=True)
    summary = train(cache, table, C.backbone_dir(), out, _config(args))
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    # steady pairs/s: the logged windows after the first (each window's time = its pairs / its pairs/s)
    later = [m for m in metrics if m["step"] > LOG_EVERY]
    prev = [LOG_EVERY] + [m["step"] for m in later[:-1]]
    secs = sum(32 * (m["step"] - p) / m["pairs_per_s"] for m, p in zip(later, prev))
    steady = 32 * (args.steps - LOG_EVERY) / secs if later and args.steps > LOG_EVERY else None
    if not args.keep_model:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "pairs_per_s": summary["pairs_per_s"],
        "train_seconds": summary["train_seconds"],
        "steady_pairs_per_s": steady,
        "timing": "aoe.training.train run summary: examples seen / wall time of the training loop",
        "losses": {m["step"]: m["loss"] for m in metrics},
        "lr_at_logged_steps": {m["step"]: m["lr"] for m in metrics},
        "torch_threads": torch.get_num_threads(),
        **device,
        "cuda_peak_allocated_gib": _cuda_peak(args),
        "model_dir": str(out) if args.keep_model else None,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "accelerate": accelerate.__version__, "python": sys.version.split()[0], "aoe_git": C.git_commit()},
    }


def worker_official(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import accelerate
    import datasets
    import transformers
    from transformers import TrainerCallback, set_seed

    import angle_emb
    import angle_emb.angle as A

    device = _cuda_check(args)
    rows = json.loads(Path(args.official_data).read_text())
    out = Path(args.model_out)
    shutil.rmtree(out, ignore_errors=True)

    class Timer(TrainerCallback):
        """Wall time of the HF Trainer's loop (on_train_begin -> on_train_end) and the end time of each step."""

        def __init__(self):
            self.t0 = self.t1 = None
            self.step_ends: dict[int, float] = {}
            self.logs: list[dict] = []
            self.info: dict = {}

        def on_train_begin(self, args, state, control, model=None, **kw):
            self.info = {
                "torch_threads": torch.get_num_threads(),
                "trainer_model_class": type(model).__name__,
                "param_dtype": str(next(model.parameters()).dtype),
                "training_args": {k: str(getattr(getattr(args, k, None), "value", getattr(args, k, None))) for k in (
                    "optim", "lr_scheduler_type", "learning_rate", "warmup_steps", "max_steps", "weight_decay",
                    "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "seed", "data_seed",
                    "per_device_train_batch_size", "gradient_accumulation_steps", "train_sampling_strategy",
                    "logging_steps", "save_strategy", "fp16", "bf16", "dataloader_num_workers", "torch_compile")},
            }
            sync()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if state.global_step in (LOG_EVERY, state.max_steps):  # the times _steady reads: after the GPU's work
                sync()
            self.step_ends[state.global_step] = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append({"step": state.global_step, **(logs or {})})

        def on_train_end(self, args, state, control, **kw):
            sync()
            self.t1 = time.perf_counter()

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    timer = Timer()

    class TimedAngleTrainer(A.AngleTrainer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.add_callback(timer)

    A.AngleTrainer = TimedAngleTrainer  # fit() looks the class up in its module at call time

    set_seed(args.seed)
    angle = A.AnglE(args.backbone, max_length=64, pooling_strategy="cls", train_mode=True, device=args.device)

    # the padded inputs angle-emb's collator builds for each batch (before the clock, for the identity check)
    inputs_sha = None
    if args.official_order == "engine":
        coll = A.AngleDataCollator(angle.tokenizer, padding="longest", max_length=64, filter_duplicate=False,
                                   dataset_format="A")
        h = hashlib.sha256()
        for s in range(0, len(rows), 32):
            batch = coll(rows[s : s + 32])
            _hash_batch(h, batch["input_ids"], batch["attention_mask"])
        inputs_sha = h.hexdigest()

    ds = datasets.Dataset.from_list(rows)
    warmup = int(args.warmup_ratio * args.steps)
    angle.fit(
        train_ds=ds,
        batch_size=32,
        output_dir=str(out),
        epochs=1,
        learning_rate=args.lr,
        warmup_steps=warmup,
        logging_steps=LOG_EVERY,
        save_strategy="no",
        fp16=False,
        bf16=False,
        filter_duplicate=False,
        loss_kwargs={k: v for k, v in ANGLE_LOSS.items()},
        argument_kwargs={
            "max_steps": args.steps,
            "seed": args.seed,
            "data_seed": args.seed,
            "report_to": "none",
            "train_sampling_strategy": "sequential" if args.official_order == "engine" else "random",
        },
    )
    if timer.t0 is None or timer.t1 is None:
        raise RuntimeError("the timing callback did not see on_train_begin/on_train_end")
    seconds = timer.t1 - timer.t0
    steps = max(timer.step_ends) if timer.step_ends else 0
    final = next((x for x in reversed(timer.logs) if "train_runtime" in x), {})
    saved = (out / "config.json").is_file()
    if not args.keep_model:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "pairs_per_s": 32 * steps / seconds,
        "train_seconds": seconds,
        "steady_pairs_per_s": _steady(timer.step_ends, steps),
        "timing": "TrainerCallback on_train_begin -> on_train_end (time.perf_counter); steps * 32 pairs",
        "steps_done": steps,
        "hf_train_runtime": final.get("train_runtime"),
        "hf_train_samples_per_second": final.get("train_samples_per_second"),
        "hf_train_loss_mean": final.get("train_loss"),
        "losses": {x["step"]: x["loss"] for x in timer.logs if "loss" in x},
        "lr_at_logged_steps": {x["step"]: x["learning_rate"] for x in timer.logs if "learning_rate" in x},
        "inputs_sha256": inputs_sha,
        "model_saved": saved,
        "model_dir": str(out) if args.keep_model else None,
        **device,
        "cuda_peak_allocated_gib": _cuda_peak(args),
        **timer.info,
        "versions": {"angle_emb": angle_emb.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
                     "accelerate": accelerate.__version__, "datasets": datasets.__version__,
                     "python": sys.version.split()[0]},
    }


def worker_eval(args) -> dict:
    """STS-B test Spearman x100 of a model folder: Encoder(dir, pooling='cls') + aoe.evaluate.sts."""
    import pandas as pd
    import torch

    torch.set_num_threads(args.threads)
    from aoe.evaluate.sts import cap_pairs, evaluate_sts
    from aoe.model.encoder import Encoder

    _cuda_check(args)
    test = pd.read_parquet(_table("test", args))
    if args.eval_max_pairs:
        test = cap_pairs(test, args.eval_max_pairs)  # smoke tests only: a seeded subset
    enc = Encoder(args.model_dir, pooling="cls", device=args.device)
    res = evaluate_sts(lambda texts: enc.encode(texts, batch_size=64, max_length=512), {"STSB": test}, tasks=["STSB"])
    stsb = res["tasks"]["STSB"]
    return {"spearman": stsb["spearman"], "pearson": stsb["pearson"], "n_pairs": stsb["n"],
            "encode_seconds": res["embedding"]["encode_seconds"]}


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--official-order", choices=["engine", "random"], default="engine",
                    help="engine: the official trainer gets the engine's batches (sequential sampler); random: HF's RandomSampler")
    ap.add_argument("--eval", choices=["first", "all", "none"], default="first",
                    help="STS-B test Spearman of the first repeat's models (and the backbone), of all, or none")
    ap.add_argument("--eval-max-pairs", type=int, default=0,
                    help="score a seeded subset of STS-B test of this many pairs (smoke tests; 0 = all 1,379)")
    ap.add_argument("--length-buckets", type=int, default=None,
                    help="the engine's forward passes per batch (TrainConfig.length_buckets; default: its default)")
    ap.add_argument("--mirror", default=C.default_mirror())
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where both sides train (cpu hides CUDA from the workers; cuda refuses to run without a GPU)")
    ap.add_argument("--tables", default=None, help="read STS-B as DIR/stsb-{train,test}.parquet instead of the mirror")
    ap.add_argument("--official-python", default=None,
                    help="an interpreter that imports angle-emb 0.6.1 (default: its venv, built when missing)")
    ap.add_argument("--official-site", default=None,
                    help="the official worker's only PYTHONPATH entry (the folder its carried wheels are installed in)")
    ap.add_argument("--out", default=None, help="JSON path (default bench/out/train_vs_official.json)")
    ap.add_argument("--worker", choices=["engine", "official", "eval"], help=argparse.SUPPRESS)
    ap.add_argument("--model-out", help=argparse.SUPPRESS)
    ap.add_argument("--keep-model", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--official-data", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--backbone", help=argparse.SUPPRESS)  # the official venv has no backbone package to resolve it
    args = ap.parse_args()

    if args.worker:
        fn = {"engine": worker_engine, "official": worker_official, "eval": worker_eval}[args.worker]
        print("RESULT " + json.dumps(fn(args)))
        return

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():  # before the venv and the token cache, not in the first worker
            raise SystemExit("--device cuda: torch sees no CUDA device here (bench/gpu_official.sh runs this on the GPU machine)")
    angle_py = args.official_python or str(ensure_angle_venv())
    prep = prepare(args, angle_py)
    common = ["--steps", str(args.steps), "--threads", str(args.threads), "--lr", repr(args.lr),
              "--warmup-ratio", repr(args.warmup_ratio), "--seed", str(args.seed), "--mirror", args.mirror,
              "--official-order", args.official_order, "--backbone", str(C.backbone_dir()), "--device", args.device]
    if args.tables:
        common += ["--tables", args.tables]
    if args.length_buckets is not None:
        common += ["--length-buckets", str(args.length_buckets)]
    script = str(Path(__file__).resolve())
    python = {"engine": sys.executable, "official": angle_py}
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1", **({"CUDA_VISIBLE_DEVICES": ""} if args.device == "cpu" else {})}
    side_env = {"engine": env, "official": {**env, **official_env(args)}}
    runs = []
    try:
        for rep in range(args.repeats):
            for side in SIDES:
                keep = args.eval == "all" or (args.eval == "first" and rep == 0)
                model_out = C.WORK_DIR / f"tvo-{side}-rep{rep}-{os.getpid()}"
                argv = [python[side], script, *common, "--worker", side, "--model-out", str(model_out),
                        "--official-data", str(prep["official_data"])] + (["--keep-model"] if keep else [])
                result, wall, before, after = C.run_worker(argv, side_env[side])
                runs.append({"side": side, "repeat": rep, "process_wall_s": wall, "load_before": before, "load_after": after,
                             **result})
                print(f"  rep {rep} {side:<8} {result['pairs_per_s']:6.2f} pairs/s  load {before[0]:.2f} -> {after[0]:.2f}",
                      flush=True)

        quality = {}
        if args.eval != "none":
            targets = [("backbone", None, str(C.backbone_dir()))]
            targets += [(r["side"], r["repeat"], r["model_dir"]) for r in runs if r.get("model_dir")]
            for name, rep, model_dir in targets:
                result, wall, before, after = C.run_worker(
                    [sys.executable, script, "--threads", str(args.threads), "--mirror", args.mirror, "--device", args.device,
                     *(["--tables", args.tables] if args.tables else []),
                     "--eval-max-pairs", str(args.eval_max_pairs), "--worker", "eval", "--model-dir", model_dir], env)
                quality.setdefault(name, []).append({"repeat": rep, "load_before": before, "load_after": after, **result})
                print(f"  STS-B test {name:<8} rep {rep}: Spearman x100 {result['spearman']:.2f}", flush=True)
    finally:
        for r in runs:
            if r.get("model_dir"):
                shutil.rmtree(r["model_dir"], ignore_errors=True)

    stats = {s: C.summarize([r["pairs_per_s"] for r in runs if r["side"] == s]) for s in SIDES}
    steady = {s: [r["steady_pairs_per_s"] for r in runs if r["side"] == s] for s in SIDES}
    steady_stats = {s: C.summarize(v) if all(x is not None for x in v) else None for s, v in steady.items()}
    ratios = [e["pairs_per_s"] / o["pairs_per_s"] for e, o in zip(runs[0::2], runs[1::2])]
    official_sha = {r["inputs_sha256"] for r in runs if r["side"] == "official"}
    identical = (official_sha == {prep["engine_inputs_sha256"]}) if args.official_order == "engine" else None
    eng = next(r for r in runs if r["side"] == "engine")
    off = next(r for r in runs if r["side"] == "official")
    record = {
        "command": "python bench/train_vs_official.py " + " ".join(sys.argv[1:]),
        "settings": {
            **_shared(args),
            "padded_tokens_per_run": prep["padded_tokens"],
            "padding_share": prep["padding_share"],
            "engine": {"objective": OBJECTIVE, "objective_overrides": OVERRIDES, "score_range": list(SCORE_RANGE),
                       "optimizer": "torch AdamW fused", "gradient_clipping": "clip_grad_norm_ foreach",
                       "length_buckets": _config(args).length_buckets,
                       "token_cache": str(prep["cache"])},
            "official": {"api": "angle_emb.AnglE(backbone, max_length=64, pooling_strategy='cls', train_mode=True).fit(...)",
                         "loss_kwargs": ANGLE_LOSS, "labels": "raw STS-B scores 0-5", "filter_duplicate": False,
                         "save_strategy": "no", "python": angle_py, "site": args.official_site,
                         "training_args_resolved": off.get("training_args"),
                         "trainer_model_class": off.get("trainer_model_class"), "param_dtype": off.get("param_dtype")},
            "loss_mapping": [
                {"angle_emb": "cosine_w 1.0, cosine_tau 20", "ours": "weights.cosine 1.0, cosine_tau 20"},
                {"angle_emb": "ibn_w 1.0, ibn_tau 20", "ours": "weights.contrastive 1.0, contrastive_tau 20"},
                {"angle_emb": "angle_w 0.02, angle_tau 20, angle_pooling_strategy sum", "ours": "weights.angle 0.02, angle_tau 20"},
                {"angle_emb": "labels the raw score; in-batch targets from int(score) by index products, mean over all 2B texts",
                 "ours": "graded_labels score, contrastive_threshold 0.2 (score/5), contrastive_reduction all_rows"},
                {"angle_emb": "filter_duplicate False (duplicates are negatives)", "ours": "identical_texts ignore"},
            ],
            "not_matched": UNMATCHED,
        },
        "versions": {"engine": eng["versions"], "official": off["versions"]},
        "device": {s: {k: r.get(k) for k in ("device", "gpu", "cuda")} for s, r in (("engine", eng), ("official", off))},
        "cuda_peak_allocated_gib": {s: [r.get("cuda_peak_allocated_gib") for r in runs if r["side"] == s] for s in SIDES},
        "timing": {"engine": eng["timing"], "official": off["timing"]},
        "inputs_identical": identical,
        "engine_inputs_sha256": prep["engine_inputs_sha256"],
        "loss_check": prep["loss_check"],
        "runs": runs,
        "pairs_per_s": stats,
        "steady_pairs_per_s": steady_stats,
        "engine_over_official_per_repeat": ratios,
        "engine_over_official_median": C.summarize(ratios)["median"],
        "stsb_test_spearman_x100": quality,
        "stsb_test_pairs": args.eval_max_pairs or "all",
    }
    path = C.write_json("train_vs_official", record, args.out)

    def q(name):
        vals = [x["spearman"] for x in quality.get(name, [])]
        return f"{vals[0]:.2f}" if len(vals) == 1 else (f"{min(vals):.2f}-{max(vals):.2f}" if vals else "-")

    rows = []
    for s, label in (("engine", "engine (aoe.training.train)"), ("official", f"official (angle-emb {ANGLE_VERSION})")):
        st, sd = stats[s], steady_stats[s]
        rows.append([label, st["median"], st["min"], st["max"], f"{100 * st['spread_rel']:.0f}%",
                     sd["median"] if sd else "-", q(s)])
    if "backbone" in quality:
        rows.append(["backbone (untrained)", "-", "-", "-", "-", "-", q("backbone")])
    C.print_table(
        f"Training speed, engine vs angle-emb {ANGLE_VERSION}: MiniLM-L6, STS-B train, batch 32, max_len 64, {args.steps} steps, "
        f"fp32, {args.device}{' (' + eng['gpu'] + ')' if eng.get('gpu') else ''}, {args.threads} threads, {args.repeats} alternating repeats",
        ["trainer", "pairs/s median", "min", "max", "spread", "steady median", "STS-B test x100"],
        rows,
    )
    print(f"  engine / official per repeat: {', '.join(f'{r:.3f}' for r in ratios)} (median {record['engine_over_official_median']:.3f})")
    print(f"  identical padded inputs on both sides: {identical}")
    lc = prep["loss_check"]
    print("  loss check, max |official - ours|: "
          + ", ".join(f"{k} {v:.2e}" for k, v in lc["max_abs_diff"].items())
          + f" (angle-emb's extra ibn targets per batch: {lc['official_ibn_extra_targets_per_batch']}); with binary labels, "
          f"|official ibn - ours| {lc['max_contrastive_vs_binary_abs_diff']:.2e}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

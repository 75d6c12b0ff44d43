"""Training speed of this project's engine against the official AnglE trainer (angle-emb 0.6.1), side by side.

    .venv/bin/python bench/speed/train_vs_official.py [--runs SHAPE:SETTING,...] [--steps 60|40,nli-aoe=3]
        [--repeats 3] [--threads 2] [--official-order engine|random] [--eval first|all|none] [--eval-max-pairs N]
        [--out PATH] [--device cpu|cuda] [--tables DIR] [--official-python PY --official-site DIR] [--batch-cap N]

``--runs`` names what is timed, each a backbone shape and a setting (default ``minilm:bench``, the CPU
table of bench/speed/README.md):

* shapes: ``minilm``, the offline MiniLM-L6 (``_common.backbone_dir()``; on the GPU machine the carried
  package with random weights of its shape, ``gpu_carry.py standin-minilm``); ``bert-base``, random weights
  (seed 0) of bert-base-uncased's published shape (:data:`BERT_BASE`: 12 layers, hidden 768, 12 heads,
  intermediate 3072, vocabulary 30,522, 512 positions), built from the config where the run happens
  (``bench/out/work/shapes/``; 418 MiB of float32 weights never travel) with MiniLM-L6's tokenizer files, whose
  vocabulary is bert-base-uncased's (30,522 uncased WordPiece tokens; the size is checked when a shape is built,
  and the token cache's tokenizer fingerprint is MiniLM's for every shape); ``bert-base-tiny``, the same vocabulary and positions at 2
  layers of width 128, for CPU smoke runs only. Random weights time and size a shape; they score nothing.
* settings: ``bench``, this benchmark's own (STS-B train, batch 32, max_length 64, fp32); and the grid's
  BERT cells as the pipeline resolves them from config.yaml when the script runs
  (``aoe.config.cell_settings.train_params(config, 'bert-base-uncased', objective, trainset, 42)``, what
  ``snakemake recipe`` prints): ``nli-aoe`` (AoE's NLI cell), ``stsb-aoe`` (AoE Table 2's in-domain STS-B
  cell) and ``stsb-angle_arxiv`` (AnglE's arXiv in-domain cell). From a cell this benchmark takes what
  decides the speed: ``batch_size``, ``gradient_accumulation_steps`` (micro-batches of
  batch_size / accumulation on both sides: angle-emb's ``per_device_train_batch_size`` and its
  ``gradient_accumulation_steps``), ``max_length``, ``mixed_precision`` (angle-emb's ``fp16``/``bf16``),
  ``length_buckets``, ``score_range`` and the train set's data: STS-B train, or for ``nli`` SNLI test's
  pairs (entailment 1, contradiction 0; the mirror holds no AllNLI train split, and SNLI's texts are
  most of it, as in ``gpu_check.py``'s bert-nli part). Its loss stays the mapping below in every setting
  (a few small matrix products per micro-batch; the cells' own loss weights change no tensor's shape),
  and so do lr, warm-up and clipping. ``--batch-cap N`` lowers a batch above N to N (keeping the
  accumulation: CPU smoke runs only); the JSON records both.

Two settings whose padded inputs hash equal on the same shape (``stsb-aoe`` at max_length 128 and
``stsb-angle_arxiv`` at 512: no STS-B train text has more than 70 tokens) run the same computation; the
second is timed once, under the first, and the JSON and table say so (``same_as``).

Both sides fine-tune with CLS pooling, ``--steps`` optimizer steps (one count for every setting, or
``40,nli-aoe=3``: a default and per-setting counts), lr 2e-5 with a linear schedule and ``int(0.1 * steps)``
warm-up steps, AdamW (fused, no weight decay), gradient clipping at 1.0, seed 42, ``--threads`` torch threads
(``OMP_NUM_THREADS`` and ``torch.set_num_threads``):

* ``engine``: ``aoe.training.train.train`` as the pipeline's train rule calls it (token cache built once
  before the runs, as the pipeline's tokens rule does; collation in the loop). pairs/s from its run
  summary: the training loop's wall time, model loading and saving excluded.
* ``official``: ``angle_emb.AnglE(...).fit(...)`` in its own venv (``_common.ensure_angle_venv``:
  bench/out/angle-venvs/angle-emb-0.6.1-<key>, built from the configured package index when
  missing; angle-emb 0.6.1 pins transformers 5.3.0). Raw texts go in as a
  ``datasets.Dataset`` with text1/text2/label (label = the raw score, as its README's
  STS-B example); its collator tokenizes inside the loop (that is how the official trainer
  works, and it is counted). ``filter_duplicate=False`` (the official CLI default; fit's
  default True would drop pairs and shrink batches), ``save_strategy='no'`` (no checkpoint
  inside the timed loop). pairs/s = batch * steps / (time from the HF Trainer's ``on_train_begin``
  to its ``on_train_end``, a TrainerCallback with ``time.perf_counter``): the loop only, model loading
  and ``save_pretrained`` excluded. The Trainer's own ``train_runtime`` / ``train_samples_per_second``
  are recorded beside it.

Both log every 10 steps (every step in runs of fewer than 20); "steady" pairs/s is the loop after the first
logged window.

Same batches. With ``--official-order engine`` (default) the official side gets the engine's
exact batch sequence (``aoe.training.train.epoch_batches``, seed 42, each global batch cut into its
micro-batches in order) through the Trainer's ``train_sampling_strategy='sequential'``; the padded
input ids and masks of every micro-batch are hashed on both sides (ours from the token cache and the
engine's collator, theirs from angle-emb's ``AngleDataCollator``) and must be identical.
``--official-order random`` leaves the order to the HF Trainer's seeded RandomSampler instead.

Loss. angle-emb's STS-B recipe (its README): ``cosine_w 1, ibn_w 1, angle_w 0.02, cosine_tau
20, ibn_tau 20, angle_tau 20`` (``angle_pooling_strategy 'sum'``; ``cln_w`` only acts on
query/positive/negative data). Our ``angle_arxiv`` objective (cosine + contrastive + angle)
with overrides::

    angle-emb (AngleLoss)          ours (get_objective('angle_arxiv', overrides))
    cosine_w 1.0, cosine_tau 20    weights.cosine 1.0, cosine_tau 20
    ibn_w 1.0, ibn_tau 20          weights.contrastive 1.0, contrastive_tau 20
    angle_w 0.02, angle_tau 20     weights.angle 0.02, angle_tau 20
    labels: the raw score          graded_labels score (score / the range's top: the same ranking order)
    ibn targets int(label) >= 1    contrastive_threshold 0.2 (STS-B: score / 5 >= 0.2; NLI: label 1)
                                   contrastive_reduction all_rows
    no duplicate handling          identical_texts ignore
    (filter_duplicate False)

``loss_check`` in the JSON evaluates both implementations on each setting's first micro-batches
(random embeddings, real labels), angle-emb's loss.py loaded from its venv by path. What
cannot be matched:

* in-batch targets: angle-emb 0.6.1 keeps the raw float label (its tokenizer no longer
  truncates it: 0.6.1 angle_emb/angle.py:223, where 0.1.1-0.5.x stored ``int(label)``), so its
  ranking terms see the graded score while its in-batch loss builds targets from
  ``y.int()`` by index products: besides the partner of a pair scoring >= 1, a text k is a
  target of text r when ``k * int(y_k) == partner(r) * int(y_r)``. Our ``graded_labels int``
  (the 0.1.1/0.4.6 behaviour) would reproduce those targets but tie the ranking terms within
  each integer; ``score`` keeps the ranking and the partner targets and leaves out the
  index-product extras (6-12 per STS-B batch; loss_check shows the in-batch terms agree when
  angle-emb gets binary labels, which have none);
* dropout masks: same seed, different RNG paths (ours seeds before building the model,
  the HF Trainer seeds at its construction);
* library versions: transformers 5.3.0 (pinned by angle-emb) against ours; the JSON records both;
* implementation choices that are what is compared, not settings: angle-emb tokenizes in the
  loop, the engine reads the token cache; angle-emb runs one forward pass over each micro-batch
  padded to its longest text, the engine ``length_buckets`` passes over texts of similar
  length (``aoe.model.encoder.embed_bucketed``: the same embeddings, fewer padded positions;
  ``--length-buckets 1`` turns it off); the HF Trainer clips with torch's default
  (per-tensor on CPU), the engine with foreach; both use fused AdamW (HF's default optim
  ``adamw_torch_fused`` on torch >= 2.8, recorded). angle-emb's fit wraps its backbone in
  ``torch.compile`` after building the trainer, which keeps the eager module (the class the
  trainer ran is recorded).

Runs alternate by side: in each of ``--repeats`` repeats one fresh engine process runs every timed
(shape, setting) in ``--runs`` order, then one fresh official process does the same (engine, official,
engine, official, ...). Each GPU process first runs one small matrix product forward and backward (CUDA's context,
allocator and cuBLAS start outside the timed loops). Inside a process each run starts after ``gc.collect()`` and
``torch.cuda.empty_cache()`` with the peak-memory counters reset (``cuda_allocated_at_start_gib`` shows
nothing of the previous run stayed). The JSON (bench/out/train_vs_official.json; rewritten after every
repeat with ``complete: false`` until the last) has, per (shape, setting), every run's pairs/s, the load
average before and after its process, median/min/max/spread per side, the per-repeat ratio
engine/official and its median, "steady" pairs/s and the peak GPU memory of each side; and the goal of
issue 63, ours >= 1.5x angle-emb on each shape (a shape's lowest median ratio over its settings),
evaluated and printed (not conclusive with fewer than 3 repeats).

Quality (``--eval first``, default: the first repeat of each side on the ``minilm`` shape, plus the
untrained backbone as a reference; random-weight shapes are never scored): each saved model folder is
loaded in this venv with ``aoe.model.encoder.Encoder(dir, pooling='cls')`` and scored with
``aoe.evaluate.sts.evaluate_sts`` on STS-B test from the mirror (Spearman x100, max_length 512 as the
pipeline's evaluation; ``--eval-max-pairs`` scores a seeded subset, for smoke tests only).

Smoke test (tiny, seconds of training): ``--steps 4 --repeats 1 --eval-max-pairs 100 --out /tmp/x.json``.

On a GPU (``--device cuda``; ``bench/gpu/gpu_official.sh`` runs it on the lent GPU machine, bench/gpu/sessions.md,
"the plan"): both sides train on CUDA (the engine through accelerate, angle-emb through ``AnglE(device='cuda')``
and the HF Trainer), each run records ``torch.cuda.max_memory_allocated`` and ``max_memory_reserved``, and
the clocks read after ``torch.cuda.synchronize()`` where a time is taken (the official side's logged
step ends, its loop's begin and end; the engine's logged windows end with the loss's ``.item()``, which
waits for the GPU). That machine has no network and no data mirror: ``--tables DIR`` reads STS-B
train/test and SNLI test's pairs as ``DIR/stsb-{split}.parquet`` and ``DIR/snli-test-pairs.parquet``
(``gpu_check.py prepare`` writes them), ``--official-python`` / ``--official-site`` name the interpreter
and the folder of angle-emb 0.6.1's carried wheels (``gpu_carry.py wheels --for official``) instead of
building the venv, and MiniLM travels without its weights (random ones of its shape: speed only, so
``--eval none``). ``--device cpu`` hides CUDA from the workers (``CUDA_VISIBLE_DEVICES=''``), so the CPU
comparison means the same on a GPU machine.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
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
    "graded_labels": "score",  # 0.6.1 ranks on the raw score (score / the range's top: the same order)
    "contrastive_threshold": 0.2,  # its in-batch positives: int(score) >= 1  <=>  score / 5 >= 0.2 (NLI: label 1)
    "contrastive_reduction": "all_rows",  # its cross-entropy mean over all 2B texts
    "identical_texts": "ignore",  # angle-emb (filter_duplicate False) treats duplicates as negatives
}
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
# issue 63's goal: ours at least this many times angle-emb's pairs/s, on each shape
GOAL = 1.5

# bert-base-uncased's published shape (its config.json on the hub; transformers' BertConfig() defaults)
BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}
SHAPES: dict[str, dict | None] = {
    "minilm": None,  # the MiniLM package's own weights (the GPU machine's: gpu_carry.py standin-minilm's random ones)
    "bert-base": BERT_BASE,
    # CPU smoke runs: bert-base's vocabulary and positions at 2 layers of width 128
    "bert-base-tiny": {**BERT_BASE, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "intermediate_size": 512},
}
GRID_BACKBONE = "bert-base-uncased"
# the grid's BERT cells timed here: setting name -> (objective, trainset), resolved from config.yaml at run time
CELLS = {"nli-aoe": ("aoe", "nli"), "stsb-aoe": ("aoe", "stsb"), "stsb-angle_arxiv": ("angle_arxiv", "stsb")}
BENCH = {"data": "stsb", "batch_size": 32, "gradient_accumulation_steps": 1, "max_length": 64, "mixed_precision": "no",
         "score_range": [0.0, 5.0], "length_buckets": None,
         "source": "this benchmark's own (the CPU table of bench/speed/README.md): STS-B train, batch 32, max_length 64, fp32"}
SETTINGS = ("bench", *CELLS)
DATA = {"stsb": "STS-B train",
        "nli": "SNLI test, pairs format (for AllNLI train: the mirror holds no NLI train split; SNLI is most of AllNLI)"}
# what bench/gpu/gpu_official.sh times on the GPU machine (issue 63)
GPU_RUNS = "minilm:bench,bert-base:nli-aoe,bert-base:stsb-aoe,bert-base:stsb-angle_arxiv"


# --------------------------------------------------------------------------- what is timed


def parse_runs(spec: str) -> list[tuple[str, str]]:
    """``SHAPE:SETTING,...`` -> [(shape, setting)], in order."""
    runs = []
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        shape, sep, setting = item.partition(":")
        if not sep or shape not in SHAPES or setting not in SETTINGS:
            raise SystemExit(f"--runs {spec!r}: {item!r} is not SHAPE:SETTING with SHAPE among {', '.join(SHAPES)} "
                             f"and SETTING among {', '.join(SETTINGS)}")
        if (shape, setting) in runs:
            raise SystemExit(f"--runs {spec!r}: {item!r} twice")
        runs.append((shape, setting))
    if not runs:
        raise SystemExit(f"--runs {spec!r}: no SHAPE:SETTING given")
    return runs


def parse_steps(spec: str, settings: list[str]) -> dict[str, int]:
    """``60`` or ``40,nli-aoe=3`` (a count for every setting, then a setting's own) -> {setting: steps}."""
    default, own = None, {}
    for item in (x.strip() for x in str(spec).split(",")):
        if not item:
            continue
        name, sep, value = item.rpartition("=")
        if not value.isdigit() or int(value) < 1 or (sep and name not in SETTINGS):
            raise SystemExit(f"--steps {spec!r}: {item!r} is neither a step count >= 1 nor SETTING=COUNT "
                             f"with SETTING among {', '.join(SETTINGS)}")
        if sep:
            own[name] = int(value)
        else:
            default = int(value)
    missing = [s for s in settings if s not in own and default is None]
    if missing:
        raise SystemExit(f"--steps {spec!r}: no step count for {', '.join(missing)} (give a default count first: 40,{missing[0]}=3)")
    return {s: own.get(s, default) for s in settings}


def log_every(steps: int) -> int:
    """Both sides' logging interval: every LOG_EVERY steps, every step in runs too short for two windows."""
    return LOG_EVERY if steps >= 2 * LOG_EVERY else 1


@functools.cache
def _grid_params():
    from aoe.config.cell_settings import train_params
    from aoe.plan.check import load_config

    grid = load_config(C.REPO, [])
    return lambda objective, trainset: train_params(grid, GRID_BACKBONE, objective, trainset, 42)


def resolve_settings(names: list[str], params_of=None, batch_cap: int = 0, device: str = "cpu") -> dict[str, dict]:
    """Each setting's speed-deciding values: ``bench``'s own, a cell's from ``params_of(objective, trainset)``
    (default: ``aoe.config.cell_settings.train_params`` on config.yaml as it is now, the grid's backbone, seed 42)."""
    out = {}
    for name in names:
        if name == "bench":
            s = dict(BENCH)
        else:
            objective, trainset = CELLS[name]
            p = (params_of or _grid_params())(objective, trainset)
            source = f"aoe.config.cell_settings.train_params(config.yaml, {GRID_BACKBONE!r}, {objective!r}, {trainset!r}, 42)"
            if trainset not in DATA:
                raise SystemExit(f"setting {name}: train set {trainset!r} has no data here (only {', '.join(DATA)})")
            if p.get("format", "pairs") != "pairs":
                raise SystemExit(f"setting {name}: {source} trains format {p['format']!r}; this benchmark feeds angle-emb "
                                 "pairs (text1, text2, label) only")
            s = {"data": trainset, "objective": objective, "trainset": trainset, "source": source,
                 **{k: p[k] for k in ("batch_size", "gradient_accumulation_steps", "max_length", "mixed_precision",
                                      "length_buckets")},
                 "score_range": [float(x) for x in p["score_range"]]}
        s["name"] = name
        accum = s["gradient_accumulation_steps"]
        if batch_cap and s["batch_size"] > batch_cap:
            if batch_cap < accum:
                raise SystemExit(f"--batch-cap {batch_cap}: setting {name} accumulates {accum} micro-batches a step; "
                                 f"a cap below {accum} leaves them empty")
            s["batch_size_resolved"] = s["batch_size"]
            s["batch_size"] = batch_cap // accum * accum
        if s["batch_size"] % accum:
            raise SystemExit(f"setting {name} ({s['source']}): batch_size {s['batch_size']} does not split into "
                             f"{accum} micro-batches")
        s["micro_batch"] = s["batch_size"] // accum
        if device == "cpu" and s["mixed_precision"] == "fp16":
            raise SystemExit(f"setting {name} ({s['source']}): mixed_precision fp16 needs --device cuda "
                             "(the HF Trainer refuses fp16 on the CPU)")
        out[name] = s
    return out


def mark_same(items: list[dict]) -> list[dict]:
    """Set each item's ``same_as``: the key of an earlier item that trains the same batches the same way (same
    shape, table, batch, accumulation, precision, length buckets, steps and padded inputs), else None.
    Returns the items to time."""
    seen: dict[tuple, str] = {}
    timed = []
    for it in items:
        s = it["setting_resolved"]
        key = (it["shape"], it["table"], s["batch_size"], s["gradient_accumulation_steps"], s["mixed_precision"],
               it["length_buckets"], it["steps"], it["engine_inputs_sha256"])
        it["same_as"] = seen.get(key)
        if it["same_as"] is None:
            seen[key] = it["key"]
            timed.append(it)
    return timed


def describe(s: dict) -> str:
    """``batch 2048 (16 x 128), max_length 128, fp32``"""
    accum = s["gradient_accumulation_steps"]
    batch = f"batch {s['batch_size']}" + (f" ({accum} x {s['micro_batch']})" if accum > 1 else "")
    capped = f" (capped from {s['batch_size_resolved']})" if "batch_size_resolved" in s else ""
    precision = {"no": "fp32"}.get(s["mixed_precision"], s["mixed_precision"])
    return f"{batch}{capped}, max_length {s['max_length']}, {precision}"


def shape_dir(shape: str) -> Path:
    """The backbone folder of ``shape``: MiniLM's (``_common.backbone_dir()``), or random weights (seed 0, float32)
    of :data:`SHAPES` ``[shape]`` with MiniLM-L6's tokenizer files, built here once into bench/out/work/shapes/."""
    config = SHAPES[shape]
    if config is None:
        return C.backbone_dir()
    from aoe.model.backbones import TOKENIZER_FILES, tokenizer_fingerprint

    tokenizer_from = C.backbone_dir()
    key = {"shape": shape, "config": config, "seed": 0, "tokenizer_sha256": tokenizer_fingerprint(tokenizer_from)}
    dst = C.WORK_DIR / "shapes" / shape
    record = dst / "aoe-shape.json"
    if record.is_file() and json.loads(record.read_text()).get("key") == key:
        return dst
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    vocab = AutoTokenizer.from_pretrained(tokenizer_from).vocab_size
    if vocab != config["vocab_size"]:
        raise SystemExit(f"{tokenizer_from}: a vocabulary of {vocab}, not {shape}'s {config['vocab_size']}")
    start = time.perf_counter()
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    torch.manual_seed(0)
    model = BertModel(BertConfig(**config))
    model.save_pretrained(tmp, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).is_file():
            shutil.copy2(tokenizer_from / name, tmp / name)
    (tmp / "aoe-shape.json").write_text(json.dumps({
        "key": key, "parameters": sum(p.numel() for p in model.parameters()),
        "what": f"random weights (torch.manual_seed(0), BertModel(BertConfig(**config)), float32) of {shape}'s shape, "
                f"tokenizer files of {tokenizer_from}: speed and memory only",
        "build_seconds": round(time.perf_counter() - start, 1)}, indent=2) + "\n")
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
    return dst


def shape_record(shape: str, path: Path) -> dict:
    if SHAPES[shape] is None:
        cfg = json.loads((path / "config.json").read_text())
        return {"backbone": str(path), "config": {k: cfg.get(k) for k in BERT_BASE},
                "weights": "the MiniLM package's model.safetensors (on the GPU machine: gpu_carry.py standin-minilm's random weights)"}
    rec = json.loads((path / "aoe-shape.json").read_text())
    return {"backbone": str(path), "config": SHAPES[shape], "parameters": rec["parameters"], "weights": rec["what"],
            "build_seconds": rec["build_seconds"]}


def _config(setting: dict, steps: int, args):
    from aoe.training.train import TrainConfig

    buckets = args.length_buckets if args.length_buckets is not None else setting["length_buckets"]
    return TrainConfig(objective=OBJECTIVE, objective_overrides=OVERRIDES, pooling="cls", seed=args.seed,
                       learning_rate=args.lr, batch_size=setting["batch_size"],
                       gradient_accumulation_steps=setting["gradient_accumulation_steps"], max_steps=steps,
                       warmup_ratio=args.warmup_ratio, weight_decay=0.0, max_grad_norm=1.0,
                       mixed_precision=setting["mixed_precision"], max_length=setting["max_length"],
                       score_range=tuple(setting["score_range"]), log_every=log_every(steps),
                       **({} if buckets is None else {"length_buckets": buckets}))


def _batch_order(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """The engine's global batches of the first ``steps`` steps (its epoch_batches, epoch after epoch)."""
    from aoe.training.train import epoch_batches

    if n < batch_size:
        raise SystemExit(f"{n} training pairs: fewer than one batch of {batch_size}")
    order, epoch = [], 0
    while len(order) < steps:
        order += epoch_batches(n, batch_size, seed, epoch)
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


@functools.cache
def _angle_loss_module(python: str, site: str | None):
    """angle-emb's loss.py (torch only), found by the official interpreter and loaded by path here."""
    import importlib.util

    env = {**os.environ, **({"PYTHONPATH": site} if site else {})}
    found = subprocess.run([python, "-c", "import angle_emb.loss as m; print(m.__file__)"], check=False,
                           capture_output=True, text=True, env=env)
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
            raise SystemExit(f"--tables {args.tables}: no stsb-{split}.parquet there (bench/gpu/gpu_check.py prepare writes it)")
        return path
    return C.stsb_table(split, args.mirror)


def _nli_table(args) -> Path:
    """SNLI test's pairs (aoe.data.nli's ``pairs`` format): from ``--tables``, else built once from the mirror."""
    if args.tables:
        path = Path(args.tables) / "snli-test-pairs.parquet"
        if not path.is_file():
            raise SystemExit(f"--tables {args.tables}: no snli-test-pairs.parquet there (bench/gpu/gpu_check.py prepare writes it)")
        return path
    out = C.WORK_DIR / "snli-test-pairs.parquet"
    if not out.is_file():
        from aoe.data.io import write_parquet_atomic
        from aoe.data.nli import nli_formats, read_nli_csv

        csv = Path(args.mirror) / "nli" / "snli_1.0_test.csv"
        if not csv.is_file():
            raise SystemExit(f"{csv}: not found (set AOE_DATA_MIRROR or --mirror to the data mirror, or give --tables)")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(nli_formats(read_nli_csv(csv))["pairs"], out)
    return out


def train_table(setting: dict, args) -> Path:
    return _table("train", args) if setting["data"] == "stsb" else _nli_table(args)


def _cuda_begin(args) -> float | None:
    """Before a run: free what earlier runs of this process left, reset the peak counters; GiB still allocated."""
    import torch

    gc.collect()
    if args.device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return round(torch.cuda.memory_allocated() / 2**30, 3)


def _cuda_device(args) -> dict:
    """The worker's device record; refuses ``--device cuda`` without a GPU rather than timing the CPU under its name."""
    import torch

    if args.device != "cuda":
        return {"device": "cpu"}
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    # the context, the allocator and cuBLAS start here, outside every timed loop (else the process's first run pays them)
    x = torch.randn(256, 256, device="cuda", requires_grad=True)
    (x @ x).sum().backward()
    torch.cuda.synchronize()
    return {"device": "cuda", "gpu": torch.cuda.get_device_name(0), "cuda": torch.version.cuda}


def _cuda_peak(args) -> dict:
    import torch

    if args.device != "cuda":
        return {"cuda_peak_allocated_gib": None, "cuda_peak_reserved_gib": None}
    return {"cuda_peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
            "cuda_peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3)}


def _fresh_accelerate_state() -> None:
    """Between two runs of one process: accelerate's process-wide state is set once per mixed_precision."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)


# --------------------------------------------------------------------------- preparation (this venv)


def prepare(setting: dict, steps: int, args, official_python: str) -> dict:
    """One setting's token cache, the official side's ordered train rows, the input hash of our micro-batches,
    the loss check. Every shape shares MiniLM-L6's tokenizer, so the cache and the batches are the shapes' too."""
    import pandas as pd
    import torch
    from transformers import AutoTokenizer

    from aoe.losses import get_objective
    from aoe.model.tokens import ensure_pad_token
    from aoe.model.tokens import load_token_cache
    from aoe.training.train import Collator

    table = train_table(setting, args)
    length, batch, micro = setting["max_length"], setting["batch_size"], setting["micro_batch"]
    # keyed by the table's bytes: the mirror's table and a bundle's of the same name may differ
    cache = C.token_cache(table, length, name=f"{table.stem}-{hashlib.sha256(table.read_bytes()).hexdigest()[:12]}")
    df = pd.read_parquet(table)
    order = _batch_order(len(df), batch, steps, args.seed)
    if args.official_order == "engine":
        idx = [i for b in order for i in b]
    else:
        idx = list(range(len(df)))
    rows = [{"text1": str(df["sentence1"].iat[i]), "text2": str(df["sentence2"].iat[i]), "label": float(df["score"].iat[i])}
            for i in idx]
    data_file = C.WORK_DIR / f"tvo-official-train-{table.stem}-{args.official_order}-{args.seed}-{batch}-{steps}.json"
    data_file.parent.mkdir(parents=True, exist_ok=True)
    data_file.write_text(json.dumps(rows))

    # our padded micro-batches, exactly as the engine's loop builds them
    cfg = _config(setting, steps, args)
    bb = C.backbone_dir()
    tokenizer = ensure_pad_token(AutoTokenizer.from_pretrained(bb))
    data = load_token_cache(cache, table, bb, length)
    collate = Collator(tokenizer, cfg, get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format))
    h = hashlib.sha256()
    padded, real = 0, 0
    batches = []
    scores = df["score"].to_numpy()
    for b_idx in order:
        for m in range(setting["gradient_accumulation_steps"]):
            part = b_idx[m * micro : (m + 1) * micro]
            r = data[part]
            mb = collate([dict(zip(r, vals)) for vals in zip(*r.values())])
            b, k, t = mb["input_ids"].shape
            ids, mask = mb["input_ids"].view(b * k, t), mb["attention_mask"].view(b * k, t)
            _hash_batch(h, ids, mask)
            padded += ids.numel()
            real += int(mask.sum())
            if len(batches) < 3:
                batches.append((mb["labels"], torch.tensor(scores[part], dtype=torch.float64)))
    return {
        "table": table,
        "cache": cache,
        "official_data": data_file,
        "engine_inputs_sha256": h.hexdigest(),
        "padded_tokens": padded,
        "padding_share": 1 - real / padded,
        "loss_check": loss_check(batches, args, official_python, setting["score_range"]),
    }


def loss_check(batches: list[tuple], args, official_python: str, score_range=(0.0, 5.0)) -> dict:
    """Both implementations of the loss on the same embeddings: random (seeded) u, v and the batches' real labels.

    ``batches``: (our labels as the engine's collator makes them (score / the range's top, float32), the raw
    scores) per micro-batch. The in-batch term is also compared with angle-emb fed binary labels
    (int(score) >= 1), where its targets are the partners only: there it must equal ours.
    """
    import torch

    from aoe.losses import get_objective

    L, path = _angle_loss_module(official_python, args.official_site)
    objective = get_objective(OBJECTIVE, OVERRIDES, format="pairs")
    g = torch.Generator().manual_seed(args.seed)
    weights = {"cosine": ANGLE_LOSS["cosine_w"], "contrastive": ANGLE_LOSS["ibn_w"], "angle": ANGLE_LOSS["angle_w"]}
    per_batch = []
    for ours_labels, scores in batches:
        labels = ours_labels.double()  # score / the range's top, as the engine trains on
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
        "what": "float64 random embeddings (v = 0.6 u + 0.8 noise), the first micro-batches' real labels; angle-emb's "
                "loss.py functions weighted as AngleLoss (format A) vs get_objective('angle_arxiv', overrides) "
                "(graded_labels score, threshold 0.2, contrastive_reduction all_rows, identical_texts ignore), "
                f"score range {list(score_range)}. contrastive differs by angle-emb's index-product extra targets; "
                "with binary labels it must agree",
        "angle_emb_loss_py": path,
        "max_abs_diff": worst,
        "max_contrastive_vs_binary_abs_diff": max(p["contrastive_vs_binary_abs_diff"] for p in per_batch),
        "official_ibn_extra_targets_per_batch": [p["official_ibn_extra_targets"] for p in per_batch],
        "batches": per_batch,
    }


# --------------------------------------------------------------------------- workers


def _steady(step_ends: dict[int, float], steps: int, every: int, batch: int) -> float | None:
    """pairs/s from the end of step ``every`` (the first logged window) to the end of the last step (None for short runs)."""
    if steps <= every or every not in step_ends or steps not in step_ends:
        return None
    return batch * (steps - every) / (step_ends[steps] - step_ends[every])


def engine_run(args, run: dict) -> dict:
    import torch

    from aoe.training.train import train

    setting, steps = run["setting"], run["steps"]
    every = log_every(steps)
    out = Path(run["model_out"])
    shutil.rmtree(out, ignore_errors=True)
    cfg = _config(setting, steps, args)
    at_start = _cuda_begin(args)
    summary = train(run["cache"], run["table"], run["backbone"], out, cfg)
    peak = _cuda_peak(args)
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    # steady pairs/s: the logged windows after the first (each window's time = its pairs / its pairs/s)
    later = [m for m in metrics if m["step"] > every]
    prev = [every] + [m["step"] for m in later[:-1]]
    secs = sum(setting["batch_size"] * (m["step"] - p) / m["pairs_per_s"] for m, p in zip(later, prev))
    steady = setting["batch_size"] * (steps - every) / secs if later and steps > every else None
    if not run["keep_model"]:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "pairs_per_s": summary["pairs_per_s"],
        "train_seconds": summary["train_seconds"],
        "steady_pairs_per_s": steady,
        "log_every": every,
        "losses": {m["step"]: m["loss"] for m in metrics},
        "lr_at_logged_steps": {m["step"]: m["lr"] for m in metrics},
        "length_buckets": cfg.length_buckets,
        "torch_threads": torch.get_num_threads(),
        "cuda_allocated_at_start_gib": at_start,
        **peak,
        "model_dir": str(out) if run["keep_model"] else None,
    }


def worker_engine(args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    import accelerate
    import transformers

    device = _cuda_device(args)
    runs = []
    for i, run in enumerate(json.loads(Path(args.plan).read_text())):
        if i:
            _fresh_accelerate_state()
        runs.append({"key": run["key"], "order_in_process": i, **engine_run(args, run)})
    return {
        "runs": runs,
        **device,
        "timing": "aoe.training.train run summary: examples seen / wall time of the training loop",
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

    device = _cuda_device(args)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    class Timer(TrainerCallback):
        """Wall time of the HF Trainer's loop (on_train_begin -> on_train_end) and the end time of each step."""

        def __init__(self, every: int):
            self.every = every
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
            if state.global_step in (self.every, state.max_steps):  # the times _steady reads: after the GPU's work
                sync()
            self.step_ends[state.global_step] = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kw):
            self.logs.append({"step": state.global_step, **(logs or {})})

        def on_train_end(self, args, state, control, **kw):
            sync()
            self.t1 = time.perf_counter()

    current: dict = {}

    class TimedAngleTrainer(A.AngleTrainer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.add_callback(current["timer"])

    A.AngleTrainer = TimedAngleTrainer  # fit() looks the class up in its module at call time

    def one(run: dict) -> dict:
        setting, steps = run["setting"], run["steps"]
        batch, micro, length = setting["batch_size"], setting["micro_batch"], setting["max_length"]
        every = log_every(steps)
        rows = json.loads(Path(run["official_data"]).read_text())
        out = Path(run["model_out"])
        shutil.rmtree(out, ignore_errors=True)
        timer = current["timer"] = Timer(every)
        at_start = _cuda_begin(args)  # the peak covers loading the model, as the engine's train() does
        set_seed(args.seed)
        angle = A.AnglE(run["backbone"], max_length=length, pooling_strategy="cls", train_mode=True, device=args.device)

        # the padded inputs angle-emb's collator builds for each micro-batch (before the clock, for the identity check)
        inputs_sha = None
        if args.official_order == "engine":
            coll = A.AngleDataCollator(angle.tokenizer, padding="longest", max_length=length, filter_duplicate=False,
                                       dataset_format="A")
            h = hashlib.sha256()
            for s in range(0, len(rows), micro):
                mb = coll(rows[s : s + micro])
                _hash_batch(h, mb["input_ids"], mb["attention_mask"])
            inputs_sha = h.hexdigest()

        ds = datasets.Dataset.from_list(rows)
        angle.fit(
            train_ds=ds,
            batch_size=micro,
            gradient_accumulation_steps=setting["gradient_accumulation_steps"],
            output_dir=str(out),
            epochs=1,
            learning_rate=args.lr,
            warmup_steps=int(args.warmup_ratio * steps),
            logging_steps=every,
            save_strategy="no",
            fp16=setting["mixed_precision"] == "fp16",
            bf16=setting["mixed_precision"] == "bf16",
            filter_duplicate=False,
            loss_kwargs=dict(ANGLE_LOSS),
            argument_kwargs={
                "max_steps": steps,
                "seed": args.seed,
                "data_seed": args.seed,
                "report_to": "none",
                "train_sampling_strategy": "sequential" if args.official_order == "engine" else "random",
            },
        )
        peak = _cuda_peak(args)
        if timer.t0 is None or timer.t1 is None:
            raise RuntimeError("the timing callback did not see on_train_begin/on_train_end")
        seconds = timer.t1 - timer.t0
        done = max(timer.step_ends) if timer.step_ends else 0
        final = next((x for x in reversed(timer.logs) if "train_runtime" in x), {})
        saved = (out / "config.json").is_file()
        if not run["keep_model"]:
            shutil.rmtree(out, ignore_errors=True)
        return {
            "pairs_per_s": batch * done / seconds,
            "train_seconds": seconds,
            "steady_pairs_per_s": _steady(timer.step_ends, done, every, batch),
            "log_every": every,
            "steps_done": done,
            "hf_train_runtime": final.get("train_runtime"),
            "hf_train_samples_per_second": final.get("train_samples_per_second"),
            "hf_train_loss_mean": final.get("train_loss"),
            "losses": {x["step"]: x["loss"] for x in timer.logs if "loss" in x},
            "lr_at_logged_steps": {x["step"]: x["learning_rate"] for x in timer.logs if "learning_rate" in x},
            "inputs_sha256": inputs_sha,
            "model_saved": saved,
            "model_dir": str(out) if run["keep_model"] else None,
            "cuda_allocated_at_start_gib": at_start,
            **peak,
            **timer.info,
        }

    runs = []
    for i, run in enumerate(json.loads(Path(args.plan).read_text())):
        if i:
            _fresh_accelerate_state()
        runs.append({"key": run["key"], "order_in_process": i, **one(run)})
    return {
        "runs": runs,
        **device,
        "timing": "TrainerCallback on_train_begin -> on_train_end (time.perf_counter); steps * batch pairs",
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

    _cuda_device(args)
    test = pd.read_parquet(_table("test", args))
    if args.eval_max_pairs:
        test = cap_pairs(test, args.eval_max_pairs)  # smoke tests only: a seeded subset
    enc = Encoder(args.model_dir, pooling="cls", device=args.device)
    res = evaluate_sts(lambda texts: enc.encode(texts, batch_size=64, max_length=512), {"STSB": test}, tasks=["STSB"])
    stsb = res["tasks"]["STSB"]
    return {"spearman": stsb["spearman"], "pearson": stsb["pearson"], "n_pairs": stsb["n"],
            "encode_seconds": res["embedding"]["encode_seconds"]}


# --------------------------------------------------------------------------- results


def summarize_item(item: dict, runs: list[dict]) -> dict:
    """One (shape, setting)'s runs -> pairs/s per side, the per-repeat ratio and its median, peak memory."""
    mine = [r for r in runs if r["key"] == item["key"]]
    side = {s: [r for r in mine if r["side"] == s] for s in SIDES}
    stats = {s: C.summarize([r["pairs_per_s"] for r in v]) if v else None for s, v in side.items()}
    steady = {s: [r["steady_pairs_per_s"] for r in v] for s, v in side.items()}
    steady_stats = {s: C.summarize(v) if v and all(x is not None for x in v) else None for s, v in steady.items()}
    by_rep = {s: {r["repeat"]: r["pairs_per_s"] for r in v} for s, v in side.items()}
    ratios = [by_rep["engine"][k] / by_rep["official"][k] for k in sorted(by_rep["engine"]) if k in by_rep["official"]]
    steady_by_rep = {s: {r["repeat"]: r["steady_pairs_per_s"] for r in v} for s, v in side.items()}
    steady_ratios = [steady_by_rep["engine"][k] / steady_by_rep["official"][k] for k in sorted(steady_by_rep["engine"])
                     if steady_by_rep["official"].get(k) and steady_by_rep["engine"][k]]
    official_sha = {r["inputs_sha256"] for r in side["official"]}
    identical = (official_sha == {item["engine_inputs_sha256"]}) if item["official_order"] == "engine" and side["official"] else None

    def peak(s, k):
        vals = [r.get(k) for r in side[s] if r.get(k) is not None]
        return max(vals) if vals else None

    return {
        "runs": mine,
        "pairs_per_s": stats,
        "steady_pairs_per_s": steady_stats,
        "engine_over_official_per_repeat": ratios,
        "engine_over_official_median": C.summarize(ratios)["median"] if ratios else None,
        "steady_engine_over_official_median": C.summarize(steady_ratios)["median"] if steady_ratios else None,
        "inputs_identical": identical,
        "cuda_peak_allocated_gib": {s: peak(s, "cuda_peak_allocated_gib") for s in SIDES},
        "cuda_peak_reserved_gib": {s: peak(s, "cuda_peak_reserved_gib") for s in SIDES},
        "cuda_allocated_at_start_gib": {s: [r.get("cuda_allocated_at_start_gib") for r in side[s]] for s in SIDES},
    }


def evaluate_goal(results: list[dict], threshold: float = GOAL, repeats: int = 3) -> dict:
    """Issue 63's goal on each shape: the shape's lowest median ours/official over its settings >= ``threshold``.
    Conclusive with 3 repeats or more."""
    per: dict[str, dict] = {}
    for r in results:
        ratio = r.get("engine_over_official_median")
        if ratio is None:
            continue
        per.setdefault(r["shape"], {"settings": {}})["settings"][r["setting"]] = ratio
    for s in per.values():
        worst = min(s["settings"], key=s["settings"].get)
        s.update(lowest=s["settings"][worst], lowest_setting=worst, met=s["settings"][worst] >= threshold)
    return {"rule": f"ours >= {threshold}x angle-emb {ANGLE_VERSION} on each shape (the shape's lowest median "
                    "per-repeat ratio of pairs/s over its settings)",
            "threshold": threshold, "per_shape": per, "met": bool(per) and all(s["met"] for s in per.values()),
            "conclusive": repeats >= 3 and bool(per)}


def goal_lines(goal: dict, device: str, repeats: int) -> list[str]:
    lines = [f"goal: {goal['rule']}, {device}:"]
    for shape, s in goal["per_shape"].items():
        others = ", ".join(f"{k} {v:.2f}x" for k, v in s["settings"].items())
        lines.append(f"  {shape}: {s['lowest']:.2f}x ({others}): {'met' if s['met'] else 'NOT met'}")
    verdict = "met" if goal["met"] else "NOT met"
    why = "" if goal["conclusive"] else f" (not conclusive: {repeats} repeat{'s' if repeats != 1 else ''}, the goal asks 3)"
    lines.append(f"  on every shape: {verdict}{why}")
    return lines


def print_results(record: dict) -> None:
    dev = record["device_name"]
    rows = []
    for r in record["results"]:
        st, eng_peak = r["pairs_per_s"], r["cuda_peak_allocated_gib"]
        ratios = r["engine_over_official_per_repeat"]
        rows.append([
            r["shape"], r["setting"] + (f" (= {r['same_as'].partition(':')[2]})" if r.get("same_as") else ""),
            describe(r["setting_resolved"]),
            r["steps"],
            st["engine"]["median"] if st["engine"] else "-", st["official"]["median"] if st["official"] else "-",
            (f"{r['engine_over_official_median']:.2f} ({', '.join(f'{x:.2f}' for x in ratios)})" if ratios else "-"),
            f"{r['steady_engine_over_official_median']:.2f}" if r["steady_engine_over_official_median"] else "-",
            (f"{eng_peak['engine']:.2f} / {eng_peak['official']:.2f}" if eng_peak["engine"] is not None
             and eng_peak["official"] is not None else "-"),
            {True: "yes", False: "NO", None: "-"}[r["inputs_identical"]],
        ])
    C.print_table(
        f"Training speed, ours (aoe.training.train) vs angle-emb {ANGLE_VERSION}, same batches, {dev}, "
        f"{record['threads']} threads, {record['repeats']} alternating repeat(s)",
        ["shape", "setting", "batch, length, precision", "steps", "ours pairs/s", "angle-emb pairs/s",
         "ours / angle-emb (per repeat)", "steady ratio", "peak GiB ours / angle-emb", "same inputs"],
        rows,
    )
    quality = [(r["key"], r["stsb_test_spearman_x100"]) for r in record["results"] if r.get("stsb_test_spearman_x100")]
    for key, q in quality:
        scores = {name: "/".join(f"{x['spearman']:.2f}" for x in vals) for name, vals in q.items()}
        print(f"  STS-B test x100 ({key}): " + ", ".join(f"{name} {v}" for name, v in scores.items()))
    for r in record["results"]:
        lc = r.get("loss_check")
        if lc:
            print(f"  loss check {r['key']}, max |official - ours|: "
                  + ", ".join(f"{k} {v:.2e}" for k, v in lc["max_abs_diff"].items())
                  + f" (angle-emb's extra ibn targets per micro-batch: {lc['official_ibn_extra_targets_per_batch']}); "
                  f"with binary labels, |official ibn - ours| {lc['max_contrastive_vs_binary_abs_diff']:.2e}")
    for line in goal_lines(record["goal"], dev, record["repeats"]):
        print(line)


# --------------------------------------------------------------------------- main


def main() -> None:
    workers = {"engine": worker_engine, "official": worker_official, "eval": worker_eval}
    ap = C.timed_parser(__doc__, "train_vs_official", list(workers))
    ap.add_argument("--runs", default="minilm:bench",
                    help=f"SHAPE:SETTING,... (shapes {', '.join(SHAPES)}; settings {', '.join(SETTINGS)}); "
                         f"bench/gpu/gpu_official.sh: {GPU_RUNS}")
    ap.add_argument("--steps", default="60", help="optimizer steps: one count, or a count then SETTING=COUNT (40,nli-aoe=3)")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--batch-cap", type=int, default=0,
                    help="lower every batch above N to N, keeping its accumulation (CPU smoke runs; 0: the settings' own)")
    ap.add_argument("--official-order", choices=["engine", "random"], default="engine",
                    help="engine: the official trainer gets the engine's batches (sequential sampler); random: HF's RandomSampler")
    ap.add_argument("--eval", choices=["first", "all", "none"], default="first",
                    help="STS-B test Spearman of the minilm shape's models of the first repeat (and the backbone), of all, or none")
    ap.add_argument("--eval-max-pairs", type=int, default=0,
                    help="score a seeded subset of STS-B test of this many pairs (smoke tests; 0 = all 1,379)")
    ap.add_argument("--length-buckets", type=int, default=None,
                    help="the engine's forward passes per micro-batch (TrainConfig.length_buckets; default: the setting's)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where both sides train (cpu hides CUDA from the workers; cuda refuses to run without a GPU)")
    ap.add_argument("--tables", default=None,
                    help="read STS-B as DIR/stsb-{train,test}.parquet and SNLI test's pairs as DIR/snli-test-pairs.parquet "
                         "instead of the mirror")
    ap.add_argument("--official-python", default=None,
                    help="an interpreter that imports angle-emb 0.6.1 (default: its venv, built when missing)")
    ap.add_argument("--official-site", default=None,
                    help="the official worker's only PYTHONPATH entry (the folder its carried wheels are installed in)")
    ap.add_argument("--plan", help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if C.serve_worker(args, workers):
        return

    items = parse_runs(args.runs)
    names = list(dict.fromkeys(s for _, s in items))
    steps = parse_steps(args.steps, names)
    if args.repeats < 1:
        raise SystemExit(f"--repeats {args.repeats}: at least 1")
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():  # before the venv, the shapes and the token caches, not in the first worker
            raise SystemExit("--device cuda: torch sees no CUDA device here (bench/gpu/gpu_official.sh runs this on the GPU machine)")
    settings = resolve_settings(names, batch_cap=args.batch_cap, device=args.device)
    for s in settings.values():
        train_table(s, args)  # a missing table stops here, before any shape is built or process started
    angle_py = args.official_python or str(ensure_angle_venv())
    shapes = {shape: shape_dir(shape) for shape in dict.fromkeys(sh for sh, _ in items)}
    prepared = {name: prepare(settings[name], steps[name], args, angle_py) for name in names}

    results = []
    for shape, name in items:
        s, prep = settings[name], prepared[name]
        item = {"key": f"{shape}:{name}", "shape": shape, "setting": name, "setting_resolved": s, "steps": steps[name],
                "data": DATA[s["data"]], "table": str(prep["table"]), "official_order": args.official_order,
                "engine_inputs_sha256": prep["engine_inputs_sha256"], "padded_tokens_per_run": prep["padded_tokens"],
                "padding_share": prep["padding_share"], "loss_check": prep["loss_check"],
                "length_buckets": _config(s, steps[name], args).length_buckets}
        results.append(item)
    measured = mark_same(results)

    script = str(Path(__file__).resolve())
    common = ["--threads", str(args.threads), "--lr", repr(args.lr), "--warmup-ratio", repr(args.warmup_ratio),
              "--seed", str(args.seed), "--mirror", args.mirror, "--official-order", args.official_order,
              "--device", args.device]
    if args.tables:
        common += ["--tables", args.tables]
    if args.length_buckets is not None:
        common += ["--length-buckets", str(args.length_buckets)]
    python = {"engine": sys.executable, "official": angle_py}
    env = {"OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1", **({"CUDA_VISIBLE_DEVICES": ""} if args.device == "cpu" else {})}
    side_env = {"engine": env, "official": {**env, **official_env(args)}}
    runs, workers, quality = [], {}, {}
    record = {}

    def write(complete: bool) -> Path:
        out = []
        for item in results:
            src = next(x for x in results if x["key"] == (item["same_as"] or item["key"]))
            out.append({**item, **summarize_item(src, runs), "stsb_test_spearman_x100": quality.get(src["key"], {})})
        eng, off = workers.get("engine", {}), workers.get("official", {})
        record.clear()
        record.update({
            "command": "python bench/speed/train_vs_official.py " + " ".join(sys.argv[1:]),
            "complete": complete,
            "runs_spec": args.runs, "steps": steps, "repeats": args.repeats, "threads": args.threads, "device": args.device,
            "device_name": args.device + (f" ({eng['gpu']})" if eng.get("gpu") else ""),
            "goal": evaluate_goal(out, GOAL, args.repeats),
            "shapes": {k: shape_record(k, v) for k, v in shapes.items()},
            "settings_common": {
                "learning_rate": args.lr, "warmup_ratio": args.warmup_ratio, "lr_schedule": "linear", "weight_decay": 0.0,
                "max_grad_norm": 1.0, "seed": args.seed, "pooling": "cls", "log_every": f"{LOG_EVERY} (1 in runs under {2 * LOG_EVERY} steps)",
                "official_order": args.official_order, "batch_cap": args.batch_cap or None,
                "engine": {"objective": OBJECTIVE, "objective_overrides": OVERRIDES, "optimizer": "torch AdamW fused",
                           "gradient_clipping": "clip_grad_norm_ foreach"},
                "official": {"api": "angle_emb.AnglE(backbone, max_length=L, pooling_strategy='cls', train_mode=True)"
                                    ".fit(batch_size=micro-batch, gradient_accumulation_steps=..., fp16/bf16 ...)",
                             "loss_kwargs": ANGLE_LOSS, "labels": "raw scores", "filter_duplicate": False,
                             "save_strategy": "no", "python": angle_py, "site": args.official_site},
                "loss_mapping": [
                    {"angle_emb": "cosine_w 1.0, cosine_tau 20", "ours": "weights.cosine 1.0, cosine_tau 20"},
                    {"angle_emb": "ibn_w 1.0, ibn_tau 20", "ours": "weights.contrastive 1.0, contrastive_tau 20"},
                    {"angle_emb": "angle_w 0.02, angle_tau 20, angle_pooling_strategy sum", "ours": "weights.angle 0.02, angle_tau 20"},
                    {"angle_emb": "labels the raw score; in-batch targets from int(score) by index products, mean over all 2B texts",
                     "ours": "graded_labels score, contrastive_threshold 0.2 (of the score range), contrastive_reduction all_rows"},
                    {"angle_emb": "filter_duplicate False (duplicates are negatives)", "ours": "identical_texts ignore"},
                ],
                "not_matched": UNMATCHED,
            },
            "versions": {"engine": eng.get("versions"), "official": off.get("versions")},
            "device_record": {s: {k: w.get(k) for k in ("device", "gpu", "cuda")} for s, w in workers.items()},
            "timing": {s: w.get("timing") for s, w in workers.items()},
            "results": out,
            "stsb_test_pairs": args.eval_max_pairs or "all",
        })
        return C.write_json("train_vs_official", record, args.out)

    evaluable = {it["key"] for it in measured if it["shape"] == "minilm"}
    try:
        for rep in range(args.repeats):
            for side in SIDES:
                keep = args.eval == "all" or (args.eval == "first" and rep == 0)
                plan = [{"key": it["key"], "setting": it["setting_resolved"], "steps": it["steps"],
                         "backbone": str(shapes[it["shape"]]), "table": it["table"],
                         "cache": str(prepared[it["setting"]]["cache"]), "official_data": str(prepared[it["setting"]]["official_data"]),
                         "model_out": str(C.WORK_DIR / f"tvo-{side}-{it['shape']}-{it['setting']}-rep{rep}-{os.getpid()}"),
                         "keep_model": keep and it["key"] in evaluable} for it in measured]
                plan_file = C.WORK_DIR / f"tvo-plan-{side}-rep{rep}-{os.getpid()}.json"
                plan_file.write_text(json.dumps(plan))
                result, wall, before, after = C.run_worker(
                    [python[side], script, *common, "--worker", side, "--plan", str(plan_file)], side_env[side])
                plan_file.unlink()
                workers.setdefault(side, {k: v for k, v in result.items() if k != "runs"})
                for r in result["runs"]:
                    runs.append({"side": side, "repeat": rep, "process_wall_s": wall, "load_before": before, "load_after": after, **r})
                    peak = f"  peak {r['cuda_peak_allocated_gib']:.2f} GiB" if r.get("cuda_peak_allocated_gib") is not None else ""
                    print(f"  rep {rep} {side:<8} {r['key']:<28} {r['pairs_per_s']:8.2f} pairs/s{peak}", flush=True)
                print(f"  rep {rep} {side:<8} process {wall:.1f} s, load {before[0]:.2f} -> {after[0]:.2f}", flush=True)
            write(complete=False)

        if args.eval != "none":
            for it in (x for x in measured if x["key"] in evaluable):
                targets = [("backbone", None, str(shapes[it["shape"]]))]
                targets += [(r["side"], r["repeat"], r["model_dir"]) for r in runs if r["key"] == it["key"] and r.get("model_dir")]
                for name, rep, model_dir in targets:
                    result, wall, before, after = C.run_worker(
                        [sys.executable, script, "--threads", str(args.threads), "--mirror", args.mirror, "--device", args.device,
                         *(["--tables", args.tables] if args.tables else []),
                         "--eval-max-pairs", str(args.eval_max_pairs), "--worker", "eval", "--model-dir", model_dir], env)
                    quality.setdefault(it["key"], {}).setdefault(name, []).append(
                        {"repeat": rep, "load_before": before, "load_after": after, **result})
                    print(f"  STS-B test {it['key']} {name:<8} rep {rep}: Spearman x100 {result['spearman']:.2f}", flush=True)
    finally:
        for r in runs:
            if r.get("model_dir"):
                shutil.rmtree(r["model_dir"], ignore_errors=True)

    path = write(complete=True)
    print_results(record)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

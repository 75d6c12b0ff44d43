"""One training cell's hyperparameters, each with the config key that set it and where it comes from.

A cell (backbone, objective, train set, seed) trains with values from several config
sections. :func:`resolve_cell` merges them in one documented order, lowest first
(:data:`TRAIN_LAYERS`, :data:`LOSS_LAYERS`), and records for every value the key that
set it. The source of a value is the comment on that key in the YAML file that set it
(config.yaml or a preset), or the ``source`` of a code default (:class:`TrainSettings`,
:class:`aoe.config.recipes.LossSettings`, :data:`aoe.config.recipes.RECIPE_SOURCES`). The ledger
(``snakemake recipe``: results/RECIPE.md, results/recipe.json) compares every value with
what the official code trained (aoe/resources/official_recipes.yaml).

Torch-free: the Snakefile resolves every cell while it plans the DAG.
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from aoe.config.recipes import OBJECTIVES, RECIPE_SOURCES, LossSettings, objective_spec, resolve_format, source

__all__ = [
    "EVAL_ONLY", "EVERY_OBJECTIVE", "LOSS_LAYERS", "NOT_SET", "RUN_ONLY", "OFF_DEFAULTS", "TRAIN_LAYERS", "CellRecipe", "Setting", "TrainSettings", "key_comments",
    "backbone_pooling", "lookup", "objective_base", "recipe_anchor", "resolve_cell", "schema_default", "train_default",
]


@dataclass
class TrainSettings:
    """Hyper-parameters of one training run; :class:`aoe.training.train.TrainConfig` adds the checks.

    Each default is what a cell gets when no config key sets it, and says where it comes from.
    """

    objective: str
    pooling: str = field(default="cls", metadata=source("AoE §3.1 (aoe-acl2024.txt l.71): the 'CLS' token for BERT (the official angle-emb default 'cls')"))
    format: str = field(default="pairs", metadata=source("resolved from the objective and the train set's formats (aoe.config.recipes.resolve_format)"))
    objective_overrides: dict = field(default_factory=dict)
    seed: int = field(default=42, metadata=source("AoE §4 'Implementation Details' (aoe-acl2024.txt l.182): seed 42 for the main experiments"))
    learning_rate: float = field(default=2e-5, metadata=source("our choice: a common BERT fine-tuning rate (every paper train set sets its own)"))
    # examples per optimizer step, across processes and accumulation
    batch_size: int = field(default=32, metadata=source("the official angle-emb trainer's default batch size"))
    epochs: int = field(default=1, metadata=source("our choice: one pass unless a train set says otherwise"))
    max_steps: int = field(default=0, metadata=source("our choice: 0 = train for `epochs` (presets cap CPU runs with it)"))
    warmup_ratio: float = field(default=0.0, metadata=source("our choice: no warm-up unless a train set sets one"))
    warmup_steps: int = field(default=0, metadata=source("our choice: 0 = use warmup_ratio (the official NLI recipe gives steps)"))
    weight_decay: float = field(default=0.0, metadata=source("AdamW without decay, as the official trainer's default"))
    max_grad_norm: float = field(default=1.0, metadata=source("transformers Trainer default, which the official trainer uses"))
    gradient_accumulation_steps: int = field(default=1, metadata=source("our choice: no accumulation unless a recipe splits its batch"))
    # whose texts the in-batch losses compare: each process's own slice of a micro-batch
    # (process), or the whole micro-batch all-gathered over processes, with the others' gradients
    # (global) or without them (global_detached, SimCSE's)
    in_batch_pool: str = field(
        default="process",
        metadata=source(
            "official angle-emb: no all-gather anywhere in angle_emb (git grep over fcb6223, 00a78ed, 70cbd01, 1c5515b); "
            "each DDP process computes every loss on its own per-GPU micro-batch (aoe/resources/official_recipes.yaml)"
        ),
    )
    # in_batch_pool global_detached: the processes of the run being reproduced. Each of its processes back-propagates
    # through its own texts only and DDP averages, so its update is the whole micro-batch's gradient / this number,
    # whatever number of processes this run has (0: this run's own)
    detached_processes: int = field(default=0, metadata=source("our choice: this run's own processes (in_batch_pool global_detached only)"))
    mixed_precision: str = field(default="no", metadata=source("our choice: fp32 unless a recipe asks for fp16/bf16"))  # no | fp16 | bf16
    # QLoRA only: the dtype the 4-bit layers dequantize to and multiply in (aoe.model.lora.QLORA_COMPUTE_DTYPES)
    qlora_compute_dtype: str = field(
        default="fp32",
        metadata=source(
            "official --load_kbit 4: bnb_4bit_compute_dtype=torch.float32 and torch_dtype float32 "
            "(fcb6223:angle_emb/angle.py:506,510; unchanged at 70cbd01:angle_emb/angle.py:559,563 and 1c5515b:angle_emb/angle.py:1222,1226)"
        ),
    )  # fp32 | fp16 | bf16 | mixed_precision
    gradient_checkpointing: bool = field(default=False, metadata=source("our choice: on only where memory needs it (LLM backbones)"))
    max_length: int = field(default=128, metadata=source("arXiv-b appendix A.2 (angle-arxiv-b.txt l.333): max length 128 in the transfer (NLI) setting"))
    # gold scale mapped to [0, 1] labels (pairs)
    score_range: tuple[float, float] = field(default=(0.0, 1.0), metadata=source("binary labels; graded sets give their scale"))
    length_grouped: bool = field(default=False, metadata=source("our choice: batches in random order, as the official trainer"))
    length_buckets: int = field(
        default=4, metadata=source("our choice, speed only: texts of a batch embedded in 4 length buckets, the loss sees the whole batch; "
                                  "on a GPU at most one bucket per 64 texts (aoe.model.encoder.GPU_MIN_BUCKET_ROWS)")
    )
    deterministic: bool = field(
        default=False,
        metadata=source(
            "official trainer: off (HF Trainer without full_determinism), also for ACL Table 4's repeated seed-42 "
            "runs, whose spread (82.43 +- 0.10, aoe-acl2024.txt Table 4) only nondeterministic kernels make; "
            "on (our switch): bit-identical reruns on the same hardware"
        ),
    )
    log_every: int = field(default=10, metadata=source("our choice: logging only"))
    checkpoint_every: int = field(default=0, metadata=source("our choice: no checkpoints unless a train set sets them (resume only)"))
    finetune: str = field(default="full", metadata=source("AoE §4 'Implementation Details' (aoe-acl2024.txt l.166): QLoRA for LLaMA only, BERT-base trains all its weights"))  # full | lora | qlora
    lora: dict = field(default_factory=dict, metadata=source("no adapters: full fine-tuning"))
    prompt: str | None = field(default=None, metadata=source("no prompt: BERT-style backbones embed the text itself"))
    # LoRA/QLoRA only: the base an adapter is evaluated on; null = as trained (4-bit NF4 for qlora)
    eval_base_dtype: str | None = field(default=None, metadata=source("our choice: the base as it was trained"))  # null | fp16 | bf16 | fp32
    # The pooling of the cell's STS and transfer evaluations (rules evaluate_sts, evaluate_transfer) when it is not the one trained with:
    # a masked pooling, or an official arithmetic over padded batches (aoe.model.pooling.OFFICIAL_POOLINGS,
    # embedded in SentEval's batches as the official script did); null = the trained pooling.
    # Evaluation only: out of the train job (EVAL_ONLY).
    eval_pooling: str | None = field(default=None, metadata=source("our choice: the pooling the model was trained with"))
    # The gold an in-domain evaluation (rule evaluate_indomain) correlates with: the score as annotated (float), or
    # int(score) as angle-emb's AnglE.evaluate did (int). Both are in the result file; this names the headline.
    # Evaluation only: out of the train job (EVAL_ONLY).
    eval_gold: str = field(
        default="float",
        metadata=source("our choice where no official evaluate produced the row: the gold score as annotated (SentEval's and the baselines' own evaluators)"),
    )  # float | int
    # {trainset: <t>, objective: <o>}: start from the trained model of (same backbone, <o>, <t>, same
    # seed) instead of the backbone's weights; no objective: the cell's own (a two-stage run)
    init: dict | None = field(default=None, metadata=source("our choice: the backbone's own pretrained weights, no earlier training stage"))
    # which weights the model folder gets: the last step's (last), or those of the epoch end with the
    # highest Spearman on select_split (best; aoe.training.train)
    select_checkpoint: str = field(
        default="last",
        metadata=source(
            "official angle-emb 0.1.1 (fcb6223): fit() saves the FINAL backbone to output_dir "
            "(angle_emb/angle.py:734) after its EvaluateCallback kept the best epoch apart in output_dir/best-checkpoint "
            "(angle.py:398-415, 691-697); train_angle.py --mode test loads pretrained_model_path=args.save_dir, the final "
            "model (train_angle.py:249-260), and the STS-B example evaluates the in-memory last model after "
            "fit(valid_ds=...) (00a78ed README.md:219-243): the printed numbers are the last model's"
        ),
    )  # last | best
    # select_checkpoint best: the prepared pair table scored at each epoch end, {dataset: <d>, split: <s>}
    select_split: dict | None = field(default=None, metadata=source("no selection split: select_checkpoint last scores none"))
    # select_checkpoint best: score every this many optimizer steps instead of at epoch ends (0: epoch ends)
    select_every: int = field(
        default=0,
        metadata=source("official angle-emb EvaluateCallback: at each epoch end (fcb6223 angle_emb/angle.py:398-415)"),
    )
    # select_checkpoint best: the length the selection pairs are cut to (0: the training max_length)
    select_max_length: int = field(
        default=0,
        metadata=source("official angle-emb EvaluateCallback: valid_ds tokenized as train_ds, at --maxlen (fcb6223 train_angle.py:222-224)"),
    )
    # re-initialise the backbone's pooler (dense + tanh over [CLS]) before training, as a fresh head:
    # what a cls_mlp cell trains when its recipe's MLP was new (SimCSE's MLPLayer)
    reinit_pooler: bool = field(default=False, metadata=source("our choice: the backbone's weights as downloaded"))


# Settings at these values leave a run as it was before they existed: out of a cell's train job params
# (aoe.config.cell_settings.train_params) and of a checkpoint's identity (aoe.training.train), so that adding them reran nothing.
OFF_DEFAULTS = {"select_checkpoint": "last", "select_split": None, "select_every": 0, "select_max_length": 0, "reinit_pooler": False,
                "detached_processes": 0}

# Settings of how a run goes, not of what it trains: left out of a train job's Snakemake params (a
# change reruns nothing) and of a checkpoint's identity (aoe.training.checkpoints: a change resumes).
RUN_ONLY = ("log_every", "checkpoint_every")

# Settings of how a trained cell is evaluated: in the ledger beside its training, never given to the
# train job (aoe.config.cell_settings.train_params), read by the evaluation rules (aoe.config.cell_settings.cell_eval_pooling,
# cell_eval_gold).
EVAL_ONLY = ("eval_pooling", "eval_gold")

# Training settings, lowest precedence first; "{x}" names a cell part. Code defaults
# (TrainSettings) sit below them all.
TRAIN_LAYERS: tuple[tuple[str, ...], ...] = (
    ("trainsets", "{trainset}", "train"),
    # one objective's own recipe on a train set (AnglE's NLI batch of 50, arXiv-b l.333, beside AoE's 2,048)
    ("trainsets", "{trainset}", "objective_train", "{base}"),
    ("trainsets", "{trainset}", "objective_train", "{objective}"),
    ("backbones", "{backbone}", "train_overrides"),
    # one objective of one backbone on one train set: a row of another paper that needs its own cell
    # (a preset's LLaMA cell at another rate than the backbone's train_overrides, say)
    ("backbones", "{backbone}", "objective_train", "{trainset}", "{base}"),
    ("backbones", "{backbone}", "objective_train", "{trainset}", "{objective}"),
)
# The objective_settings entry of a train set that every objective trained on it takes (below the
# objective's own entry); no objective may take this name (aoe.plan.training_checks.check_objectives).
EVERY_OBJECTIVE = "all"
# Loss settings, lowest precedence first, above LossSettings' defaults and the built-in
# recipe aoe.config.recipes.OBJECTIVES[base]. A variant (objectives.<name>.base) trains its base's
# recipe: its own entries sit right above the base's at each level.
LOSS_LAYERS: tuple[tuple[str, ...], ...] = (
    ("objectives", "{base}"),
    ("objectives", "{objective}"),
    # every objective on this train set (STS-B's contrastive_threshold), then one objective's own
    ("trainsets", "{trainset}", "objective_settings", EVERY_OBJECTIVE),
    ("trainsets", "{trainset}", "objective_settings", "{base}"),
    ("trainsets", "{trainset}", "objective_settings", "{objective}"),
    # a backbone's own recipe on a train set wins (LLaMA on NLI: in-batch weight 35, BERT 30)
    ("backbones", "{backbone}", "objective_settings", "{trainset}", "{base}"),
)
# keys of an objectives entry that name the variant, not a loss setting; length_buckets is the one
# training setting a variant carries: a padded pooling's cell needs 1 whatever its train set buckets
# (aoe.plan.cell_checks.check_padded_pooling_buckets)
_VARIANT_KEYS = ("base", "pooling", "length_buckets")


@dataclass(frozen=True)
class Setting:
    """One resolved value: ``set_by`` is a dotted config key, or ``code:<where>`` for a code default."""

    key: str
    value: Any
    set_by: str


@dataclass
class CellRecipe:
    """A cell's TrainConfig keyword arguments and the ledger of where each value came from."""

    params: dict
    settings: list[Setting]

    def provenance(self) -> dict[str, str]:
        return {s.key: s.set_by for s in self.settings}


NOT_SET = object()  # what lookup returns for a path a config does not have (None is a value)


def lookup(node: Any, path: tuple) -> Any:
    """The value at ``path`` in a loaded YAML document (str keys, int list indices), or NOT_SET."""
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return NOT_SET
    return node


def objective_base(config: dict, objective: str) -> str:
    """The recipe an objective trains with: itself, or the ``base`` of a variant (AoE Table 4 poolings)."""
    return config["objectives"].get(objective, {}).get("base", objective)


def _layers(config: dict, layers: tuple[tuple[str, ...], ...], parts: dict[str, str]) -> list[tuple[str, dict]]:
    """(dotted key, mapping) of each layer present for this cell, lowest first, each path once."""
    out, seen = [], set()
    for layer in layers:
        path = tuple(p.format(**parts) for p in layer)
        if path in seen:
            continue
        seen.add(path)
        node = lookup(config, path)
        if isinstance(node, dict):
            out.append((".".join(path), node))
    return out


@lru_cache(maxsize=None)
def _field(cls, name: str):
    return next(f for f in fields(cls) if f.name == name)


def _default(cls, name: str) -> tuple[Any, str]:
    f = _field(cls, name)
    value = f.default_factory() if f.default is MISSING else f.default
    return value, f"code:{cls.__module__}.{cls.__name__}.{name}"


# id(config) -> (config, {cell: CellRecipe}) for configs that no longer change (:func:`freeze_for_planning`)
_FROZEN: dict[int, tuple[dict, dict]] = {}


def freeze_for_planning(config: dict) -> None:
    """Resolve each cell of ``config`` once from now on. Building the paper grid's DAG resolves every
    cell about 13 times (its train job's params and inputs, its evaluations, its model card), and the
    Snakefile's config does not change after :func:`aoe.plan.check.complete_config`. Only configs
    passed here are memoized, so a caller that edits its config between calls is never served a stale
    recipe."""
    _FROZEN[id(config)] = (config, {})


@contextmanager
def frozen_while(config: dict):
    """Each cell of ``config`` resolved once while the block runs, for a caller that does not change it (the
    checks of :func:`aoe.plan.check.check_config` resolved the paper grid's 360 cells 1,290 times: 60% of a
    ``load_config``); forgotten after it, unless :func:`freeze_for_planning` froze the config for good."""
    if id(config) in _FROZEN:
        yield
        return
    freeze_for_planning(config)
    try:
        yield
    finally:
        _FROZEN.pop(id(config), None)


def resolve_cell(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> CellRecipe:
    """The cell's TrainConfig arguments (``params``) and every value's setter (``settings``).

    A variant (``objectives.<name>.base``) trains its base's recipe with the train set's settings
    for the base, and may change the pooling, the loss settings and ``length_buckets`` (above every
    train layer: a padded pooling's one pass); the model folder records the base objective and the
    pooling it was trained with.
    """
    frozen = _FROZEN.get(id(config))
    if frozen is None or frozen[0] is not config:
        return _resolve_cell(config, backbone, objective, trainset, seed)
    key = (backbone, objective, trainset, int(seed))
    if key not in frozen[1]:
        frozen[1][key] = _resolve_cell(config, backbone, objective, trainset, seed)
    # callers may edit the params they get (a deep copy would cost more than resolving again)
    recipe = frozen[1][key]
    return CellRecipe(params={k: copy.copy(v) for k, v in recipe.params.items()}, settings=list(recipe.settings))


def _resolve_cell(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> CellRecipe:
    ts, bb = config["trainsets"][trainset], config["backbones"][backbone]
    variant = config["objectives"].get(objective, {})
    base = objective_base(config, objective)
    parts = {"backbone": backbone, "objective": objective, "base": base, "trainset": trainset}
    settings: dict[str, Setting] = {}

    def put(key: str, value: Any, set_by: str) -> None:
        settings[key] = Setting(key, value, set_by)

    # training settings: code defaults, then the layers
    skip = {"objective", "format", "objective_overrides", "seed", "pooling", "score_range", "finetune", "lora", "prompt"}
    for f in fields(TrainSettings):
        if f.name not in skip:
            put(f.name, *_default(TrainSettings, f.name))
    for where, layer in _layers(config, TRAIN_LAYERS, parts):
        for key, value in layer.items():
            put(key, value, f"{where}.{key}")
    if "length_buckets" in variant:
        put("length_buckets", variant["length_buckets"], f"objectives.{objective}.length_buckets")
    put("objective", base, f"objectives.{objective}.base" if base != objective else "cell")
    put("seed", int(seed), "cell")
    put("score_range", list(ts["score_range"]), f"trainsets.{trainset}.score_range")
    if variant.get("pooling"):
        put("pooling", variant["pooling"], f"objectives.{objective}.pooling")
    else:
        put("pooling", *backbone_pooling(config, backbone))
    for key in ("finetune", "lora", "prompt"):
        put(key, *((bb[key], f"backbones.{backbone}.{key}") if key in bb else _default(TrainSettings, key)))
    if settings["finetune"].value != "qlora":
        # no 4-bit layers to compute in: out of a full or LoRA cell's params, whose jobs it must not rerun
        settings.pop("qlora_compute_dtype")

    # loss settings: the config layers give the overrides the trainer applies to the built-in recipe
    overrides: dict[str, Any] = {}
    loss_setters: dict[str, str] = {}
    for where, layer in _layers(config, LOSS_LAYERS, parts):
        for key, value in layer.items():
            if where.startswith("objectives.") and key in _VARIANT_KEYS:
                continue
            overrides[key] = value
            loss_setters[key] = f"{where}.{key}"
    fmt = resolve_format(base, ts.get("formats", ["pairs"]), overrides or None)
    put("format", fmt, f"trainsets.{trainset}.formats" if "formats" in ts else _default(TrainSettings, "format")[1])
    spec = objective_spec(base, overrides or None)
    builtin = OBJECTIVES.get(base, {})
    for f in fields(LossSettings):
        if f.name in ("name", "format"):
            continue
        if f.name in loss_setters:
            value, set_by = overrides[f.name], loss_setters[f.name]
        elif f.name == "weights" and "by_format" in spec:
            value, set_by = spec["by_format"][fmt], f"code:aoe.config.recipes.OBJECTIVES.{base}.by_format.{fmt}"
        elif f.name in builtin:
            value, set_by = builtin[f.name], f"code:aoe.config.recipes.OBJECTIVES.{base}.{f.name}"
        else:
            value, set_by = _default(LossSettings, f.name)
        put(f"loss.{f.name}", value, set_by)

    # TrainConfig's arguments, every one resolved (a code default included)
    params = {k: s.value for k, s in settings.items() if not k.startswith("loss.")}
    params["objective_overrides"] = overrides
    return CellRecipe(params=params, settings=list(settings.values()))


def train_default(name: str) -> Any:
    """The code default of a training setting (:class:`TrainSettings`), the one place it is written."""
    return _default(TrainSettings, name)[0]


def backbone_pooling(config: dict, backbone: str) -> tuple[str, str]:
    """(pooling, its setter) of a backbone: ``backbones.<b>.pooling``, or left out the code default
    :attr:`TrainSettings.pooling` (CLS, AoE §3.1), which the schema does not repeat."""
    bb = config["backbones"][backbone]
    if "pooling" in bb:
        return bb["pooling"], f"backbones.{backbone}.pooling"
    return _default(TrainSettings, "pooling")


def recipe_anchor(backbone: str, objective: str, trainset: str) -> str:
    """The HTML anchor of a (backbone, objective, train set) group in results/RECIPE.md."""
    return re.sub(r"[^a-z0-9]+", "-", f"recipe-{backbone}-{objective}-{trainset}".lower()).strip("-")


def code_source(set_by: str) -> str:
    """The ``source`` of a code default named ``code:aoe.<module>.<Class or OBJECTIVES>.<...>``."""
    parts = set_by.removeprefix("code:").split(".")
    if "OBJECTIVES" in parts:  # aoe.config.recipes.OBJECTIVES.<objective>.<key>[.<format>]
        i = parts.index("OBJECTIVES")
        return RECIPE_SOURCES.get(parts[i + 1], {}).get(parts[i + 2], "")
    cls = TrainSettings if parts[-2] == "TrainSettings" else LossSettings  # <module>.<Class>.<field>
    f = next((f for f in fields(cls) if f.name == parts[-1]), None)
    return f.metadata.get("source", "") if f else ""


# ---- the comments of a YAML file, by key path -------------------------------------------------


def _comment_of(line: str) -> str:
    """The comment of one YAML line: text after a '#' that is outside quotes and after whitespace."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i + 1 :].strip()
    return ""


@lru_cache(maxsize=32)
def _key_comments(path: str, mtime: float) -> dict[tuple[str, ...], str]:
    text = Path(path).read_text()
    lines = text.splitlines()
    out: dict[tuple[str, ...], str] = {}

    def above(line_no: int) -> str:
        block = []
        i = line_no - 1
        while i >= 0 and lines[i].strip().startswith("#"):
            block.append(lines[i].strip().lstrip("#").strip())
            i -= 1
        return " ".join(reversed(block))

    def walk(node, prefix: tuple[str, ...], parent_line: int, parent_comment: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                keypath = (*prefix, str(key.value))
                line = key.start_mark.line
                comment = " ".join(t for t in (above(line), _comment_of(lines[line])) if t)
                # a key inside a one-line {...} shares its parent key's comment
                if line == parent_line and not above(line):
                    comment = parent_comment
                out[keypath] = comment
                walk(value, keypath, line, comment)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*prefix, str(i)), parent_line, parent_comment)

    walk(yaml.compose(text, Loader=YAML_LOADER), (), -1, "")
    return out


# libyaml's parser where PyYAML was built with it (the same documents, ~10x faster: planning reads
# config.yaml, a preset and the schema several times)
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=32)
def _read_yaml(path: str, mtime: float) -> Any:
    return yaml.load(Path(path).read_text(), Loader=YAML_LOADER)


def read_yaml(path: str | Path) -> Any:
    """A YAML file, parsed once per version of it (its path and mtime). Callers only read the result."""
    path = Path(path)
    return _read_yaml(str(path.resolve()), path.stat().st_mtime)


SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


def schema_default(*keys: str) -> Any:
    """The default that schemas/config.schema.yaml gives the config key ``keys`` (nested ``properties``;
    ``"*"`` for any name of a mapping, or any entry of a list: ``schema_default("backbones", "*", "eval_text")``),
    the one place a value the schema fills in is written. Snakemake fills it in before the workflow
    reads a config; code that may see a config no schema filled (a bench, a hand-made dict) reads it here."""
    return copy.deepcopy(_schema_default(keys))


# Looked up once per key path: call sites pass it as a .get default, so planning the grid asks about
# 35,000 times (a stat of the schema each time cost 0.7 s of `snakemake -n all`). The schema ships
# with the code, and like the code it is read once per process.
@lru_cache(maxsize=None)
def _schema_default(keys: tuple[str, ...]) -> Any:
    node = read_yaml(SCHEMA_PATH)
    for key in keys:
        node = (node["items"] if "items" in node else node["additionalProperties"]) if key == "*" else node["properties"][key]
    return node["default"]


def key_comments(path: str | Path) -> dict[tuple[str, ...], str]:
    """{key path: its comment} of a YAML file: the comment lines right above the key and the
    comment at the end of its line (for a key inside a one-line {...}, its line's)."""
    path = Path(path)
    return _key_comments(str(path.resolve()), path.stat().st_mtime)

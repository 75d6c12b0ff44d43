"""One cell's settings as its jobs take them: a train job's resolved params and loss settings, where its
training starts, the pairs one loss sees, the pooling, gold and text rewriting its evaluations use, and which
trained models' recorded settings differ from the config's now.

Each value is the cell's resolved recipe (:func:`aoe.config.hparams.resolve_cell`) or its backbone's entry; this module
says what each job takes of them, so a change reruns only the jobs it changes (Snakemake's params trigger).
"""

from __future__ import annotations

from pathlib import Path

from aoe.config.cells import PRETRAINED, RELEASED, Cell, results_path
from aoe.config.hparams import schema_default
from aoe.config.pretrained import pretrained_embedding, released_checkpoints

__all__ = [
    "evaluation_text",
    "cell_eval_gold",
    "train_params",
    "loss_settings",
    "settings_changed",
    "in_batch_pool_size",
    "init_cell",
    "start_cell",
    "cell_eval_pooling",
]


def evaluation_text(config: dict, backbone: str, objective: str, trainset: str) -> str:
    """How an evaluation of the cell rewrites each text before the prompt: backbones.<name>.eval_text
    (aoe.model.prompts.EVAL_TEXTS), or ``raw`` where no prompt wraps the text (the official eval.py rewrites
    prompted texts only), so a change reruns only the evaluations it changes (a Snakemake param)."""
    if objective == PRETRAINED:
        prompt = pretrained_embedding(config, backbone, trainset)[1]
    elif objective == RELEASED:
        prompt = released_checkpoints(config)[trainset].get("prompt")
    else:
        prompt = config["backbones"][backbone].get("prompt")
    return config["backbones"][backbone].get("eval_text", schema_default("backbones", "*", "eval_text")) if prompt is not None else "raw"


def cell_eval_pooling(config: dict, cell: Cell) -> str | None:
    """The pooling of a trained cell's STS and transfer evaluations when it is not its trained one (the
    resolved ``eval_pooling``, :data:`aoe.config.hparams.EVAL_ONLY`); None for the trained pooling or an untrained
    cell. Both suites follow it: the official eval.py that scored a cell's STS scores SentEval's transfer
    tasks with the same pooling and batches (fcb6223 eval.py:58, 100-116; 1c5515b examples/NLI/eval_nli.py).
    The other suites (in-domain, NLI probe, Flickr30k, MTEB) score the trained pooling."""
    from aoe.config.hparams import resolve_cell

    if not cell.trained:
        return None
    return resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params.get("eval_pooling")


def cell_eval_gold(config: dict, cell: Cell) -> str:
    """The gold a cell's in-domain evaluation correlates with as its headline (the resolved ``eval_gold``,
    :data:`aoe.config.hparams.EVAL_ONLY`): ``int`` where the row's source scored int(score), as angle-emb's
    AnglE.evaluate did, else ``float``; the schema's default for an untrained cell (the backbone as downloaded)."""
    from aoe.config.hparams import resolve_cell, train_default

    if not cell.trained:
        return train_default("eval_gold")
    return resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params["eval_gold"]


def train_params(config: dict, backbone: str, objective: str, trainset: str, seed: int, job: bool = False) -> dict:
    """Resolved keyword arguments of aoe.training.train.TrainConfig for one cell (:func:`aoe.config.hparams.resolve_cell`).

    ``job``: a train job's Snakemake params, without :data:`aoe.config.hparams.RUN_ONLY` (how often it logs and
    checkpoints): changing those reruns nothing; the job reads them from the config itself.
    """
    from aoe.config.hparams import EVAL_ONLY, RUN_ONLY, OFF_DEFAULTS, resolve_cell

    params = {k: v for k, v in resolve_cell(config, backbone, objective, trainset, seed).params.items() if k not in EVAL_ONLY}
    # at its off default a later setting is left out: the params of jobs planned before it existed stay as they were
    params = {k: v for k, v in params.items() if not (k in OFF_DEFAULTS and v == OFF_DEFAULTS[k])}
    return {k: v for k, v in params.items() if k not in RUN_ONLY} if job else params


def loss_settings(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> dict:
    """Every loss setting of a cell as resolved, code defaults included (aoe.config.recipes): a train job's
    params, so that a changed built-in default reruns the cells it changes (Snakemake's params trigger)."""
    from aoe.config.hparams import resolve_cell

    settings = resolve_cell(config, backbone, objective, trainset, seed).settings
    return {s.key.removeprefix("loss."): s.value for s in settings if s.key.startswith("loss.")}


def settings_changed(config: dict, cells: list[Cell], root: str | Path = ".") -> list[tuple[Cell, str]]:
    """Trained models whose recorded settings (their aoe_config.json) differ from what ``config`` resolves
    for them now, each with the first difference (``key: recorded -> now``).

    Snakemake retrains those through its params trigger, from the params it recorded in .snakemake/;
    where that record is gone (the folder deleted, another working copy) it cannot tell, and a table
    would mix models of the old settings with a recipe ledger of the new.
    """
    import json

    from aoe.config.hparams import EVAL_ONLY, RUN_ONLY, resolve_cell

    out = []
    for cell in cells:
        record = Path(root) / results_path(config, f"results/models/{cell.path}/aoe_config.json")
        if not cell.trained or not record.is_file():
            continue
        try:
            saved = json.loads(record.read_text())
        except (OSError, ValueError):
            continue  # an unreadable record is the model's problem, found when it is loaded
        recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
        loss = {s.key: s.value for s in recipe.settings if s.key.startswith("loss.")}
        was = {**saved.get("train", {}), **{k: saved.get("objective", {}).get(k.removeprefix("loss.")) for k in loss}}
        now = json.loads(json.dumps({**recipe.params, **loss}))
        # how a run logs, and how its model is scored (the train job records the code's default there): no retraining
        diff = [k for k in now if k not in RUN_ONLY + EVAL_ONLY and k in was and was[k] != now[k]]
        if diff:
            out.append((cell, f"{diff[0]}: {was[diff[0]]!r} -> {now[diff[0]]!r}"))
    return out


def in_batch_pool_size(config: dict, backbone: str, params: dict) -> tuple[int, int]:
    """Pairs one loss of a cell sees, and its backbone's GPU count: a micro-batch
    (``batch_size / gradient_accumulation_steps``), split over the GPUs under ``in_batch_pool: process``
    (aoe.training.train: each process its own slice), whole under ``global`` and ``global_detached`` (all-gathered)."""
    micro = params["batch_size"] // max(1, params["gradient_accumulation_steps"])
    gpus = max(1, int(config["backbones"][backbone].get("resources", {}).get("gpus", schema_default("backbones", "*", "resources", "gpus"))))
    return (micro // gpus if params["in_batch_pool"] == "process" else micro), gpus


def start_cell(cell: Cell, init: dict | None) -> Cell | None:
    """The trained cell whose model ``cell`` starts from, given its resolved ``init``: the same backbone,
    seed and rerun, the init's train set and objective (else its own objective); None: the backbone's weights."""
    if not init:
        return None
    # a rerun repeats the whole chain: it starts from the same rerun of its init
    return Cell(cell.backbone, init.get("objective") or cell.objective, init["trainset"], cell.seed, cell.rerun)


def init_cell(config: dict, cell: Cell) -> Cell | None:
    """:func:`start_cell` of ``cell`` with its ``init`` resolved from ``config``."""
    return start_cell(cell, train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed).get("init"))

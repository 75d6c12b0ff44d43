"""What each table row's numbers are measured under, from the configuration (issue 69): the gold its scores
correlate with, the evaluation protocol, the pooling arithmetic of its embeddings and its training recipe.
:func:`row_measure` gives it as a plain mapping, which a table row carries (``aoe.results.likeness.Measure``) into
every Δ, gain and t-test, so that none sets numbers measured otherwise against each other unnoticed.
"""

from __future__ import annotations

import json
from typing import Any

from aoe.config.hparams import EVAL_ONLY, RUN_ONLY
from aoe.config.table_kinds import table_kind
from aoe.config.cells import NO_TRAINSET, PRETRAINED, RELEASED
from aoe.config.pretrained import pretrained_embedding, released_checkpoints
from aoe.config.cell_settings import cell_eval_gold, cell_eval_pooling
from aoe.config.rows import TableRow
from aoe.config.workflow import EVAL_POOLING_SUITES

__all__ = ["AS_DOWNLOADED", "RECIPE_KEYS", "SETTINGS_NOT_RECIPE", "measured_rows", "row_measure", "row_settings"]

AS_DOWNLOADED = "as downloaded"
# The settings that make two trainings one recipe, as far as a comparison of their scores goes: where training
# starts, how long, at what rate and batch, what it sees, which weights it keeps. Not the loss or its weights (what a
# table's rows compare), the trained pooling (the pooling ablations' subject; the scoring pooling is a field of its
# own), the seed, or settings of speed and bookkeeping alone (length_buckets, log_every, checkpoint_every).
RECIPE_KEYS = ("init", "learning_rate", "batch_size", "gradient_accumulation_steps", "epochs", "max_steps", "warmup_ratio",
               "warmup_steps", "weight_decay", "max_grad_norm", "max_length", "mixed_precision", "in_batch_pool",
               "detached_processes", "select_checkpoint", "select_split", "select_every", "finetune", "lora", "reinit_pooler")


def _recipe(config: dict, row: TableRow) -> str:
    """Canonical JSON {train set: {setting: value}} of a trained row's cells (their first seed: seeds share a recipe),
    or what stands for it for a model we did not train."""
    from aoe.config.hparams import resolve_cell

    if row.objective == PRETRAINED:
        return AS_DOWNLOADED
    if row.objective == RELEASED:
        return f"released {','.join(row.trainsets)}"
    seed = row.seeds[0] if row.seeds else 0
    out: dict[str, dict[str, Any]] = {}
    for trainset in row.trainsets:
        params = resolve_cell(config, row.backbone, row.objective, trainset, seed).params
        out[trainset] = {k: params[k] for k in RECIPE_KEYS if k in params}
    return json.dumps(out, sort_keys=True, default=str)


# What two trainings may differ in and still be one recipe, for an objective comparison's caption (every other
# resolved setting, the loss's included, is named where its rows differ): the seed (what the test runs over), the
# settings of how a run goes, not of what it trains (aoe.config.hparams.RUN_ONLY), and those of how a trained cell
# is evaluated (aoe.config.hparams.EVAL_ONLY: the row's measure carries its scoring pooling and gold, which the gate
# checks).
SETTINGS_NOT_RECIPE = ("seed", *RUN_ONLY, *EVAL_ONLY)


def row_settings(config: dict, row: TableRow) -> str:
    """Canonical JSON {train set: {setting: value}} of every resolved setting of a trained row's cells (their first
    seed), training and loss alike (the loss's without their ``loss.`` prefix: graded_labels, weights, ...), less
    :data:`SETTINGS_NOT_RECIPE`; :func:`_recipe`'s name for a model we did not train. What an objective comparison's
    caption names the differences of (:func:`aoe.results.likeness.differences`)."""
    from aoe.config.hparams import resolve_cell

    if row.objective in (PRETRAINED, RELEASED):
        return _recipe(config, row)
    seed = row.seeds[0] if row.seeds else 0
    out: dict[str, dict[str, Any]] = {}
    for trainset in row.trainsets:
        settings = resolve_cell(config, row.backbone, row.objective, trainset, seed).settings
        out[trainset] = {s.key.removeprefix("loss."): s.value for s in settings if s.key not in SETTINGS_NOT_RECIPE}
    return json.dumps(out, sort_keys=True, default=str)


def _pooling(config: dict, suite: str | None, row: TableRow) -> str:
    """The pooling arithmetic a row's scores were embedded with: the row's evaluation-only pooling, else its cells'
    (the resolved eval_pooling of the STS and transfer suites), else the pooling they were trained with; a backbone as
    downloaded its own (or its variant's), a published checkpoint its own."""
    from aoe.config.hparams import resolve_cell

    if row.eval_pooling:
        return row.eval_pooling
    if row.objective == PRETRAINED:
        return pretrained_embedding(config, row.backbone, row.variant or NO_TRAINSET)[0]
    if row.objective == RELEASED:
        return str((released_checkpoints(config).get(row.trainsets[0] if row.trainsets else "") or {}).get("pooling") or "")
    poolings = []
    for cell in row.cells[:1] if len(row.trainsets) <= 1 else [c for c in row.cells if c.seed == row.seeds[0] and c.rerun == 0]:
        own = cell_eval_pooling(config, cell) if suite in EVAL_POOLING_SUITES else None
        poolings.append(own or resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed).params["pooling"])
    return "/".join(dict.fromkeys(poolings))


def _gold(config: dict, kind_name: str, row: TableRow) -> str:
    """The gold a row's scores correlate with: an in-domain row's eval_gold, else its cells' headline gold
    (:func:`aoe.config.cell_settings.cell_eval_gold`), over its graded train sets (:func:`_graded`); every other kind scores
    against its data's gold as annotated."""
    if table_kind(kind_name).read_gold is None:
        return "float"
    graded = [t for t in row.trainsets if _graded(config, t)]
    if row.eval_gold:
        return row.eval_gold if graded else "float"
    cells = [c for c in row.cells if c.rerun == 0 and c.seed == (row.seeds[0] if row.seeds else c.seed) and c.trainset in graded]
    return "/".join(dict.fromkeys(cell_eval_gold(config, c) for c in cells)) or "float"


def _graded(config: dict, trainset: str) -> bool:
    """Whether the gold of a train set's in-domain evaluation moves under int(score): a scale above 1 (STS-B's 0-5).
    The in-domain sets scored on [0, 1] hold 0/1 labels (GIS, MRPC, QQP, QNLI: their score_range comments in
    config.yaml), which int() leaves as they are, so both golds are one number there (the result file's
    gold_int_vs_float_spearman is 1.0) and the gold is recorded as annotated."""
    low, high = (config["trainsets"].get(trainset) or {}).get("score_range", (0, 1))
    return float(high) > 1


def _protocol(config: dict, kind_name: str) -> str:
    """The evaluation protocol: the table kind's (its suite and metric), with the STS / transfer backend."""
    suite = table_kind(kind_name).suite
    backend = (config.get("evaluation") or {}).get("backend") if suite in EVAL_POOLING_SUITES else None
    return f"{kind_name}" + (f" ({backend})" if backend else "")


def row_measure(config: dict, kind_name: str, row: TableRow) -> dict[str, str]:
    """{gold, protocol, pooling, recipe} of a table row (``aoe.results.likeness.FIELDS``), from the configuration."""
    suite = table_kind(kind_name).suite
    return {"gold": _gold(config, kind_name, row), "protocol": _protocol(config, kind_name),
            "pooling": _pooling(config, suite, row), "recipe": _recipe(config, row)}


def measured_rows(config: dict, table: str) -> list[dict]:
    """The rows of a table as the rule table passes them (``TableRow.as_dict``), each with its ``measure``; an objective
    comparison's (table kind ``compares_rows``) with its ``settings`` too (:func:`row_settings`)."""
    from aoe.config.hparams import frozen_while
    from aoe.config.rows import table_rows

    kind = config["tables"][table]["kind"]
    full = table_kind(kind).compares_rows
    with frozen_while(config):  # a row's cells are resolved for its pooling, recipe and settings
        return [{**row.as_dict(), "measure": row_measure(config, kind, row), **({"settings": row_settings(config, row)} if full else {})}
                for row in table_rows(config, table)]

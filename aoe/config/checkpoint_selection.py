"""Checkpoint selection (train setting ``select_checkpoint``): the split a cell chooses its epoch on under
``best``, checked at planning, the prepared table its train job reads for it, and the table rows whose models
were chosen on a split their numbers are read on (not a held-out estimate: the table marks them).
"""

from __future__ import annotations

from aoe.config.cells import PRETRAINED, RELEASED, Cell, results_path
from aoe.config.errors import ConfigError
from aoe.config.rows import table_rows

__all__ = [
    "SCORED_SPLIT_MARK",
    "scored_split_selections",
    "selection_is_test",
    "selection_split",
    "selection_input",
]


def selection_is_test(config: dict, trainset: str, dataset: str, split: str) -> bool:
    """Whether a selection split is one the cell's reported numbers are read on: its train set's
    in-domain eval split, or an STS task's test split (the transfer evaluation of every trained model).

    The official code selects on such splits (fcb6223 train_angle.py:159-161 NLI-STS: the STS test
    set is the validation set; l.171-173 QQP/QNLI/RTE: the validation set is the test set), so a
    number read after such a selection is no longer a held-out estimate: the record says so.
    """
    from aoe.data.sts import STS_TASKS

    ts = config["trainsets"][trainset]
    if dataset == ts["dataset"] and split == ts.get("eval_split"):
        return True
    return split == "test" and dataset in STS_TASKS.values()


def selection_split(config: dict, cell: Cell) -> dict | None:
    """What a cell selects its checkpoint on under ``select_checkpoint: best``: ``{dataset, split, table,
    split_is_test}`` (``table``: the prepared pair table, an input of its train job); None under ``last``.

    A setting that cannot work is a :class:`ConfigError` naming the key that set it and the fix,
    raised while the run is planned rather than after a training.
    """
    from aoe.config.hparams import resolve_cell
    from aoe.data.catalog import pair_table_problem

    recipe = resolve_cell(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
    params, set_by = recipe.params, recipe.provenance()
    rule, split = params.get("select_checkpoint", "last"), params.get("select_split")
    if rule == "last":
        if split is not None:
            raise ConfigError(
                f"{set_by['select_split']}: {split!r} is read only by select_checkpoint: best, and "
                f"{set_by['select_checkpoint']} is last; remove select_split or set select_checkpoint: best"
            )
        return None
    if not isinstance(split, dict) or set(split) != {"dataset", "split"}:
        given = "none is set" if split is None else f"{set_by['select_split']} is {split!r}"
        raise ConfigError(
            f"{set_by['select_checkpoint']}: best needs select_split: {{dataset: <d>, split: <s>}} beside it, a prepared "
            f"pair table with gold scores held out from training (e.g. {{dataset: stsb, split: dev}}); {given}"
        )
    problem = pair_table_problem(split["dataset"], split["split"])
    if problem:
        raise ConfigError(f"{set_by['select_split']}: {problem}")
    ts = config["trainsets"][cell.trainset]
    if (split["dataset"], split["split"]) == (ts["dataset"], ts["split"]):
        raise ConfigError(
            f"{set_by['select_split']}: {split['dataset']}/{split['split']} is train set {cell.trainset!r}'s own "
            "training split, which would select the epoch that fits it best; name a held-out split "
            f"(e.g. {{dataset: stsb, split: dev}})"
        )
    return {
        "dataset": split["dataset"],
        "split": split["split"],
        "table": results_path(config, f"results/data/{split['dataset']}/{split['split']}.parquet"),
        "split_is_test": selection_is_test(config, cell.trainset, split["dataset"], split["split"]),
    }


def selection_input(config: dict, cell: Cell) -> list[str]:
    """The train job's selection table: none under ``select_checkpoint: last``, so its plan is unchanged."""
    found = selection_split(config, cell)
    return [found["table"]] if found else []


# what a table row trained under such a selection carries, and the note that says why
SCORED_SPLIT_MARK = "§"


def scored_split_selections(config: dict, table: str, held_out: bool = False) -> list[dict]:
    """The rows of ``table`` whose models were chosen on a split their numbers are read on (``select_checkpoint:
    best`` with a ``select_split`` that :func:`selection_is_test` calls scored, as the official code chose for NLI-STS
    and QQP / QNLI): ``[{backbone, objective, trainsets, split}]``, one per row; [] under the grid's ``last``.
    Such a number is not a held-out estimate, so the table marks the row (:data:`SCORED_SPLIT_MARK`) and says so.
    ``held_out``: the rows chosen on a split the table does not score instead (SimCSE's recipe: STS-B dev), which
    a note names without the mark: the number is held out, the choice is still part of the recipe."""
    out = []
    for row in table_rows(config, table):
        if row.objective in (PRETRAINED, RELEASED):
            continue
        chosen = sorted({f"{found['dataset']} {found['split']}" for cell in row.cells
                         if (found := selection_split(config, cell)) and found["split_is_test"] != held_out})
        if chosen:
            out.append({"backbone": row.backbone, "objective": row.objective, "trainsets": list(row.trainsets), "split": ", ".join(chosen)})
    return out

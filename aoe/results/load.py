"""Loading a table's result files into one long DataFrame (:data:`RESULT_COLUMNS`: backbone,
objective, trainset, seed, rerun, eval_pooling, eval_gold, column, value): evaluation results through their
kind's reader (:data:`aoe.config.table_kinds.KINDS`), training times from benchmark TSVs and model folders.

Holds no table model (:mod:`aoe.results.table_model`) and no paper numbers (:mod:`aoe.results.paper_numbers`) and prints nothing (:mod:`aoe.results.render`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from aoe.config.table_kinds import table_kind
from aoe.config.cells import parse_run
from aoe.util.jsonio import finite_or_none

__all__ = ["RESULT_COLUMNS", "load_results", "load_sts_results", "load_train_times", "train_time"]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Loading result files into a long table (backbone, objective, trainset, seed, rerun, column, value).

# eval_pooling: "" for a cell's own evaluation, else the evaluation-only pooling of a variant row's file;
# eval_gold: "" for a file's headline value, else the gold of one of its by_gold values (in-domain files)
RESULT_COLUMNS = ["backbone", "objective", "trainset", "seed", "rerun", "eval_pooling", "eval_gold", "column", "value"]


def _cell(result: dict, path: Path) -> dict:
    try:
        cell = dict(result["model"]["cell"])
    except (KeyError, TypeError):
        raise ValueError(f"{path}: no model.cell record") from None
    # the record's seed is the run of the path: "42", or "42-rerun2"
    cell["seed"], cell["rerun"] = parse_run(cell["seed"])
    cell["eval_pooling"] = cell.get("eval_pooling") or ""
    cell["eval_gold"] = ""
    return cell


def load_results(kind: str, paths: list[str | Path]) -> pd.DataFrame:
    """Long table of every value in the result files of a table kind; null values are left out."""
    k = table_kind(kind)
    if k.inputs == "train_time":
        return load_train_times(paths)
    if k.read is None:
        raise ValueError(f"table kind {kind!r} reads no evaluation results")
    rows = []
    for path in map(Path, paths):
        result = json.loads(path.read_text())
        cell = _cell(result, path)
        values = k.read(result, path)
        for column, value in values.items():
            if value is not None:  # null on purpose (task not evaluated): no row, printed as "–"
                rows.append({**cell, "column": column, "value": value})
        for gold, by_column in (k.read_gold(result, path) if k.read_gold else {}).items():
            rows += [{**cell, "eval_gold": gold, "column": c, "value": v} for c, v in by_column.items() if v is not None]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def load_sts_results(paths: list[str | Path]) -> pd.DataFrame:
    """Long table (backbone, objective, trainset, seed, task, spearman) from sts.json files."""
    return load_results("sts7", paths).rename(columns={"column": "task", "value": "spearman"})


def train_time(benchmark: str | Path, model_dir: str | Path) -> dict[str, Any]:
    """One training job's times: Snakemake's benchmark ``s`` (the whole job), the training loop's
    seconds (aoe_config.json summary) and the epochs trained (examples seen / train rows).

    ``sec_per_epoch`` = train-loop seconds / epochs trained, where epochs trained =
    examples seen (steps x batch size x accumulation, as logged) / rows of the train set.
    """
    bench = pd.read_csv(benchmark, sep="\t")
    job_seconds = float(bench["s"].iloc[-1])
    config = json.loads((Path(model_dir) / "aoe_config.json").read_text())
    summary = config.get("summary") or {}
    train = config.get("train") or {}
    rows = (config.get("token_cache") or {}).get("n_examples")
    seen = summary.get("examples_seen")
    if seen is None and summary.get("steps") is not None:
        seen = summary["steps"] * train.get("batch_size", 1) * train.get("gradient_accumulation_steps", 1)
    if seen is None:
        metrics = Path(model_dir) / "metrics.jsonl"
        steps = [json.loads(line).get("step", 0) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
        if steps:
            seen = max(steps) * train.get("batch_size", 1) * train.get("gradient_accumulation_steps", 1)
    epochs = seen / rows if seen and rows else None
    train_seconds = finite_or_none(summary.get("train_seconds"))
    loop = train_seconds if train_seconds is not None else job_seconds
    return {
        "cell": config.get("cell"),
        "job_seconds": job_seconds,
        "train_seconds": train_seconds,
        "epochs": epochs,
        "sec_per_epoch": loop / epochs if epochs else None,
    }


def load_train_times(paths: list[str | Path]) -> pd.DataFrame:
    """train_time rows from the inputs of a train_time table: benchmark TSVs and model folders, paired by cell path."""
    paths = [Path(p) for p in paths]
    benches = {p.with_suffix("").parts[-4:]: p for p in paths if p.suffix == ".tsv"}
    models = {p.parts[-4:]: p for p in paths if p.suffix != ".tsv"}
    rows = []
    for parts, bench in sorted(benches.items()):
        model = models.get(parts)
        if model is None:
            log.warning("no model folder for benchmark %s: skipped", bench)
            continue
        t = train_time(bench, model)
        cell = t["cell"] or dict(zip(("backbone", "objective", "trainset"), parts[:3]), seed=parts[3].removeprefix("seed"))
        cell = {**cell, **dict(zip(("seed", "rerun"), parse_run(cell["seed"])))}
        for column in ("sec_per_epoch", "train_seconds", "job_seconds", "epochs"):
            if t[column] is not None:
                rows.append({**cell, "column": column, "value": float(t[column])})
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)

"""Why a requested target cannot be built, in one line, before Snakemake plans.

For a target no rule matches, Snakemake says only "No rule to produce X". The usual causes are a
typo in one part of a results path (a backbone, objective, train set, seed, dataset or split the
config does not have) or a table the active config does not build; :func:`explain_target` names that
part and the valid values, or the table and the config file whose build.tables leaves it out. It returns None for
anything else, so Snakemake's own planning decides as before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from aoe.configcheck import key_source
from aoe.data.catalog import dataset_splits
from aoe.workflow import built_tables, cell_parts, results_path, table_target

__all__ = ["explain_target", "requested_targets"]

# results roots whose next four folders are a cell: backbone/objective/trainset/seed<N>
_CELL_ROOTS = ("results/models/", "results/eval/", "results/analysis/figures/")
_PARTS = ("backbone", "objective", "trainset", "seed")


def requested_targets(argv: list[str]) -> list[str]:
    """The targets of a `snakemake` command line; [] for a cluster job's own invocation."""
    if "--target-jobs" in argv or "--mode" in argv:
        return []  # a job submitted by the main process: its targets were planned there
    from snakemake.cli import get_argument_parser

    try:
        args, _ = get_argument_parser().parse_known_args(argv[1:])
    except SystemExit:  # Snakemake reports its own usage errors
        return []
    return list(args.targets or [])


def _valid(values: Iterable[str]) -> str:
    return ", ".join(sorted(values))


def _unbuilt(config: dict, table: str, configfiles: list) -> str:
    where = key_source(("build", "tables"), configfiles)
    by = f" in {where}" if where else ""
    return f"table {table} is not built by this configuration (build.tables{by} does not name it); add it to that list to build it"


def _cell_problem(config: dict, parts: list[str]) -> str | None:
    valid = cell_parts(config)
    for name, value in zip(_PARTS, parts):
        if name == "seed":
            if not re.fullmatch(r"seed\d+", value):
                return f"the seed folder {value!r} must be seed<integer>, e.g. seed42"
        elif value not in valid[name]:
            where = "config.yaml trainsets and released.checkpoints" if name == "trainset" else f"config.yaml {name}s"
            return f"unknown {name} {value!r}; valid: {_valid(valid[name])} ({where})"
    return None


def explain_target(
    target: str,
    config: dict,
    *,
    rule_names: Iterable[str],
    configfiles: Iterable[str | Path] = (),
) -> str | None:
    """One line on why ``target`` cannot be built with ``config``; None when nothing is known wrong."""
    configfiles = list(configfiles)
    path = target[2:] if target.startswith("./") else target
    root = config["results"]
    if path.startswith(f"{root}/"):
        path = "results/" + path.removeprefix(f"{root}/")  # the checks below read paths as results/...
    elif path.startswith("results/"):
        # a path of another configuration's tree (a command copied from the paper grid's docs)
        where = key_source(("results",), configfiles)
        return (
            f"{target}: this configuration writes under {root}/ (results: {root}{f' in {where}' if where else ''}); "
            f"ask for {results_path(config, path)}"
        )
    tables = config.get("tables", {})
    if "/" not in path:
        if path in set(rule_names) or Path(path).exists():
            return None
        named = [t for t in tables if table_target(t) == path or t == path]
        if named:
            return f"{target}: " + _unbuilt(config, named[0], configfiles)
        targets = {r for r in rule_names if not r.startswith(("download_", "prepare_"))}
        return f"{target}: no rule or output of that name; named targets: {_valid(targets)} (or a results/ path)"
    if path.startswith("results/tables/"):
        name = Path(path).name.split(".")[0]
        if name not in tables:
            return f"{target}: unknown table {name!r}; valid: {_valid(tables)} (config.yaml tables)"
        if name not in built_tables(config):
            return f"{target}: " + _unbuilt(config, name, configfiles)
        return None
    for root in _CELL_ROOTS:
        if path.startswith(root):
            problem = _cell_problem(config, path[len(root):].split("/")[:4])
            return f"{target}: {problem}" if problem else None
    if path.startswith("results/backbones/"):
        problem = _cell_problem(config, path.split("/")[2:3])
        return f"{target}: {problem}" if problem else None
    m = re.fullmatch(r"results/data/([^/]+)/([^/.]+)\..*", path)
    if m:
        dataset, split = m.groups()
        datasets = dataset_splits(config)
        if dataset not in datasets:
            return f"{target}: unknown dataset {dataset!r}; valid: {_valid(datasets)}"
        if split not in datasets[dataset]:
            return f"{target}: dataset {dataset!r} has no split {split!r}; its splits: {_valid(datasets[dataset])}"
    return None

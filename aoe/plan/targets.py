"""Why a requested target, report or working directory cannot work, in one line, before Snakemake plans.

For a target no rule matches, Snakemake says only "No rule to produce X". The usual causes are a
typo in one part of a results path (a backbone, objective, train set, seed, dataset or split the
config does not have), a misspelled target name, a path of another configuration's tree, or a table
the active config does not build; :func:`explain_target` names that part and the valid values (the
closest names first), the preset whose tree the path is in, or the table and the config file whose
build.tables leaves it out. It returns None for anything else, so Snakemake's own planning decides as
before. :func:`explain_report` does the same for ``--report``, :func:`explain_workdir` for a run
started outside the repository root.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from pathlib import Path
from typing import Callable, Iterable

import yaml

from aoe.config.hparams import read_yaml
from aoe.config.errors import ConfigError
from aoe.config.cells import results_path
from aoe.config.rows import table_rows
from aoe.config.workflow import built_tables, cell_parts, table_target
from aoe.data.catalog import dataset_splits
from aoe.plan.key_sources import key_source
from aoe.plan.table_checks import check_table_row, check_tables

__all__ = ["explain_report", "explain_target", "explain_workdir", "job_counts_once", "preset_trees", "requested_report",
           "requested_targets"]

PRESETS = Path(__file__).resolve().parents[2] / "presets"

# results roots whose next four folders are a cell: backbone/objective/trainset/seed<N>
_CELL_ROOTS = ("results/models/", "results/eval/", "results/analysis/figures/")
_PARTS = ("backbone", "objective", "trainset", "seed")


@functools.lru_cache(maxsize=4)
def _command_line(argv: tuple[str, ...]):
    """Snakemake's own reading of a command line (one parse for the targets and the report), None where it
    refuses it (Snakemake reports its own usage errors)."""
    from snakemake.cli import get_argument_parser

    try:
        return get_argument_parser().parse_known_args(list(argv[1:]))[0]
    except SystemExit:
        return None


def requested_targets(argv: list[str]) -> list[str]:
    """The targets of a `snakemake` command line; [] for a cluster job's own invocation."""
    if "--target-jobs" in argv or "--mode" in argv:
        return []  # a job submitted by the main process: its targets were planned there
    args = _command_line(tuple(argv))
    return list(args.targets or []) if args is not None else []


def requested_report(argv: list[str]) -> str | None:
    """The ``--report`` path of a `snakemake` command line, None without one."""
    args = _command_line(tuple(argv))
    report = getattr(args, "report", None) if args is not None else None
    return str(report) if report else None


def preset_trees(presets: Path = PRESETS) -> dict[str, str]:
    """{results root: preset file} of the repository's presets (their top-level ``results`` key)."""
    trees = {}
    for f in sorted(presets.glob("*.yaml")):
        try:
            root = (read_yaml(f) or {}).get("results")  # parsed once while unchanged
        except yaml.YAMLError:
            continue  # a broken preset is reported when it is used
        if isinstance(root, str):
            trees[root.rstrip("/")] = f"presets/{f.name}"
    return trees


def _tree_of(path: str, root: str, presets: Path = PRESETS) -> tuple[str, str] | None:
    """(results root, config file) of the other configuration whose tree ``path`` lies in, if any."""
    trees = {**preset_trees(presets), "results": "config.yaml alone (the paper grid: no --configfile)"}
    hits = [t for t in trees if t != root and (path == t or path.startswith(f"{t}/"))]
    if not hits:
        return None
    best = max(hits, key=len)  # results/cpu-demo/... is the demo's, not the grid's results/
    if root.startswith(f"{best}/") and not any(path.startswith(f"{t}/") for t in trees if t.startswith(f"{root}/")):
        return None  # the path is under this configuration's own root after all
    return best, trees[best]


def _give(files: str) -> str:
    return "run without --configfile" if files.startswith("config.yaml") else f"give --configfile {files}"


def _valid(values: Iterable[str]) -> str:
    return ", ".join(sorted(values))


def _unbuilt(config: dict, table: str, configfiles: list, grid: Callable[[], dict] | None = None) -> str:
    where = key_source(("build", "tables"), configfiles)
    by = f" in {where}" if where else ""
    return f"table {table} is not built by this configuration (build.tables{by} does not name it){_table_needs(config, table, grid)}"


def _table_needs(config: dict, table: str, grid: Callable[[], dict] | None) -> str:
    """What building ``table`` here would take: "; add it to that list" where naming it is enough, else the models its
    rows read that no run of this configuration trains (and whether the paper grid, ``grid()``, trains them)."""
    trial = {**config, "build": {**config["build"], "tables": [*config["build"]["tables"], table]}}
    missing = []
    for row in table_rows(trial, table):
        try:
            check_table_row(trial, table, row)
        except ConfigError:
            model = f"{row.backbone} {row.objective} on {'/'.join(row.trainsets)}"
            missing += [model] if model not in missing else []
    if not missing:
        try:
            check_tables(trial)  # the table's own checks (train sets, eval splits, a study's rows); not every cell's
        except ConfigError as err:
            return f"; named there, the configuration would stop at: {err}"
        return "; add it to that list to build it"
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    where = ("the paper grid trains them (run it without --configfile: GPU-sized, docs/cluster.md)"
             if grid is not None and table in built_tables(grid()) else "add runs that train them")
    return f"; it reads {len(missing)} trained model(s) no run of this configuration makes ({shown}): {where}"


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
    wildcard_rules: dict[str, str] | None = None,
    grid: Callable[[], dict] | None = None,
) -> str | None:
    """One line on why ``target`` cannot be built with ``config``; None when nothing is known wrong.
    ``rule_names``: the workflow's rules; ``wildcard_rules``: {name: output pattern} of those with wildcards, which
    are no target; ``grid``: returns the paper grid's config (config.yaml alone), named where it builds what this one lacks (called
    only then: reading it costs a planning a second parse and check of config.yaml)."""
    configfiles = list(configfiles)
    wildcard_rules = wildcard_rules or {}
    path = target[2:] if target.startswith("./") else target
    root = config["results"]
    other = _tree_of(path, root) if path.startswith("results/") else None
    if other is not None:
        tree, files = other
        return (f"{target} is in the tree of {files} ({tree}/), not of this configuration (which writes under {root}/): "
                f"{_give(files)} to build it there")
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
        # rules with wildcards are no target (Snakemake: "Target rules may not contain wildcards"), nor the data rules
        targets = {r for r in rule_names if r not in wildcard_rules and not r.startswith(("download_", "prepare_"))}
        if path in wildcard_rules:
            return (f"{target}: rule {path} makes one output per value of its wildcards, so it is no target: ask for one "
                    f"of its outputs ({wildcard_rules[path]}) or a named target: {_valid(targets)}")
        if path in set(rule_names) or Path(path).exists():
            return None
        named = [t for t in tables if table_target(t) == path or t == path]
        if named:
            return f"{target}: " + _unbuilt(config, named[0], configfiles, grid)
        close = difflib.get_close_matches(path, sorted(targets), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return f"{target}: no rule or output of that name; {hint}named targets: {_valid(targets)} (or a results/ path)"
    if path.startswith("results/tables/"):
        name = Path(path).name.split(".")[0]
        if name not in tables:
            return f"{target}: unknown table {name!r}; valid: {_valid(tables)} (config.yaml tables)"
        if name not in built_tables(config):
            return f"{target}: " + _unbuilt(config, name, configfiles, grid)
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


def explain_report(report: str, config: dict, configfiles: Iterable[str | Path] = ()) -> str | None:
    """One line on why ``snakemake --report REPORT`` with ``config`` would not report the run meant; None if fine.

    Snakemake builds a report from the configuration given on its command line: without the run's own
    ``--configfile`` files it plans the paper grid and prints a "Missing metadata" line for each of its
    thousand outputs.
    """
    root = config["results"]
    path = report[2:] if report.startswith("./") else report
    other = _tree_of(path, root) if path.startswith("results/") else None
    given = ", ".join(os.path.relpath(f) for f in configfiles if Path(f).name != "config.yaml") or "config.yaml alone (the paper grid)"
    if other is not None:
        tree, files = other
        return (f"--report {report}: that is the run of {files} ({tree}/), this command's configuration is {given} "
                f"(under {root}/): {_give(files)}, the files the run was given")
    if not any((Path(root) / part).exists() for part in ("REPORT.md", "tables", "models", "eval")):
        finished = [f"{files} ({tree}/)" for tree, files in {**preset_trees(), "results": "config.yaml alone"}.items()
                    if (Path(tree) / "REPORT.md").is_file()]  # the runs `all` finished here
        return (f"--report {report}: this command's configuration, {given}, has no run under {root}/ "
                f"(no REPORT.md, tables, models or eval there); a report needs the --configfile files of the run it reports"
                + (f"; finished here: {', '.join(finished)}" if finished else ""))
    return None


def explain_workdir(basedir: str | Path, cwd: str | Path | None = None) -> str | None:
    """One line when Snakemake runs from another folder than the repository root, where config.yaml and every
    relative path the rules name are read; None there."""
    basedir, cwd = Path(basedir).resolve(), Path(cwd or Path.cwd()).resolve()
    if cwd == basedir or (cwd / "config.yaml").is_file():
        return None
    return (f"snakemake runs in {cwd}, which has no config.yaml: run it from the repository root ({basedir}), "
            f"where config.yaml and the rules' relative paths are read (cd {basedir}; the -s option does not change that)")


class _FirstJobCounts:
    """A logging filter passing the first "Job stats" table a process logs and no other."""

    def __init__(self):
        self.seen = False

    def filter(self, record) -> bool:
        if getattr(record, "stats", None) is None or str(getattr(record, "event", "")) != "run_info":
            return True
        seen, self.seen = self.seen, True
        return not seen


def job_counts_once(workflow) -> None:
    """Under ``-q rules`` (``--quiet rules``), Snakemake's job counts once: a dry run logs the table before the job
    list and again after it, and with the list left out the two tables stood one under the other (a real run logs
    it once: nothing changes there). Without -q rules both stay, around the job list."""
    from snakemake.logging import logger
    from snakemake.settings.enums import Quietness

    quiet = getattr(getattr(workflow, "output_settings", None), "quiet", None) or ()
    if Quietness.RULES in quiet and Quietness.PROGRESS not in quiet:
        logger.addFilter(_FirstJobCounts())

"""What the workflow builds: the tables, figures and analyses its default target names, each table's Snakemake
target, the values a cell path's wildcards may take, and the result files a table or target ``evaluate`` reads.

Import-light on purpose (no torch): the Snakefile imports it at DAG-build time.
"""

from __future__ import annotations

from aoe.config.cells import NO_TRAINSET, PRETRAINED, RELEASED, Cell, results_path, run_cells
from aoe.config.pretrained import pretrained_variants, released_checkpoints
from aoe.config.rows import indomain_cells, table_cells, table_rows
from aoe.config.table_kinds import table_kind

__all__ = [
    "eval_cells",
    "built_tables",
    "built_figures",
    "built_analyses",
    "FIGURE_NAMES",
    "ANALYSIS_NAMES",
    "table_inputs",
    "suite_results",
    "table_target",
    "cell_parts",
    "EVAL_POOLING_SUITES",
    "suite_file",
    "RESERVED_TARGETS",
]


# rule names a table's target must not take
RESERVED_TARGETS = frozenset({"all", "table", "tables", "figures", "analysis", "evaluate", "train", "train_all", "report", "recipe"})


def cell_parts(config: dict) -> dict[str, list[str]]:
    """The values each part of a cell path (results/models/<backbone>/<objective>/<trainset>/seed<N>)
    may take: the workflow's wildcard constraints and the target check (aoe.plan.targets) read them."""
    return {
        "backbone": list(config["backbones"]),
        "objective": list(dict.fromkeys([PRETRAINED, RELEASED, *config["objectives"], *(o for r in config["runs"] for o in r["objectives"])])),
        "trainset": list(dict.fromkeys([NO_TRAINSET, *config["trainsets"], *released_checkpoints(config), *pretrained_variants(config)])),
    }


def table_target(name: str) -> str:
    """The Snakemake target of a table: ``table<N>`` for ``table<N>_...``, else the whole name."""
    import re

    m = re.match(r"(table\d+)_", name)
    return m.group(1) if m else name


def built_tables(config: dict) -> dict[str, dict]:
    """The tables the default target builds: those ``build.tables`` names (null or absent: every table of
    ``tables``), in the order ``tables`` defines them. A name ``tables`` lacks is left out here;
    aoe.plan.table_checks.check_build refuses it at planning."""
    chosen = (config.get("build") or {}).get("tables")
    return {name: spec for name, spec in config["tables"].items() if chosen is None or name in chosen}


# build.figures and build.analyses: what the schema's defaults name (everything); a hand-built config may leave them out
FIGURE_NAMES = ("fig3", "fig10", "fig4", "fig5", "fig_gradients", "training_curves")
ANALYSIS_NAMES = ("saturation", "gis")


def built_figures(config: dict) -> list[str]:
    """The figures the default target builds (config ``build.figures``; absent: every one)."""
    chosen = (config.get("build") or {}).get("figures")
    return list(FIGURE_NAMES if chosen is None else chosen)


def built_analyses(config: dict) -> list[str]:
    """The analyses the default target builds (config ``build.analyses``; absent: every one)."""
    chosen = (config.get("build") or {}).get("analyses")
    return list(ANALYSIS_NAMES if chosen is None else chosen)


EVAL_POOLING_FILE = "{suite}.pool-{eval_pooling}.json"  # an evaluation-only variant's result beside the cell's own
# the suites scored under a cell's or a variant row's eval_pooling (the table kinds' suite names)
EVAL_POOLING_SUITES = ("sts", "transfer")


def suite_file(suite: str, eval_pooling: str = "") -> str:
    """The result file name of a suite: ``sts.json``, or an evaluation-only pooling's ``sts.pool-cls.json``
    (:data:`EVAL_POOLING_SUITES` have one: rules evaluate_sts_eval_pooling, evaluate_transfer_eval_pooling)."""
    return EVAL_POOLING_FILE.format(suite=suite, eval_pooling=eval_pooling) if eval_pooling else f"{suite}.json"


def table_inputs(config: dict, table: str) -> list[str]:
    """The result files a table reads (it never trains or embeds)."""
    kind = table_kind(config["tables"][table]["kind"])
    if kind.inputs == "gis_stats":
        return [results_path(config, "results/analysis/gis/stats.json")]
    if kind.inputs == "train_time":
        # the training jobs' own measurements: Snakemake's benchmark file and the run's metrics
        return [
            results_path(config, path)
            for c in table_cells(config, table)
            if c.trained
            for path in (f"results/benchmarks/train/{c.path}.tsv", f"results/models/{c.path}")
        ]
    if kind.column_per_trainset:
        return [results_path(config, f"results/eval/{c.path}/{kind.suite}_{ts}.json") for c, ts in indomain_cells(config, table)]
    files = {f"results/eval/{c.path}/{suite_file(kind.suite, row.eval_pooling)}" for row in table_rows(config, table) for c in row.cells}
    return [results_path(config, f) for f in sorted(files)]


def suite_results(config: dict) -> list[str]:
    """What target ``evaluate`` builds: the configured suites on every model of the grid, plus what tables read."""
    files = set()
    for c in eval_cells(config):
        if c.objective == PRETRAINED and c.trainset != NO_TRAINSET:
            continue  # a pretrained variant is an evaluation setting of a table: only what its tables read
        for suite in config["evaluation"]["suites"]:
            if suite == "indomain":
                if c.trained:
                    files.add(results_path(config, f"results/eval/{c.path}/indomain_{c.trainset}.json"))
            else:
                files.add(results_path(config, f"results/eval/{c.path}/{suite}.json"))
    for table, spec in built_tables(config).items():
        if table_kind(spec["kind"]).suite is not None:
            files.update(table_inputs(config, table))
    return sorted(files)


def eval_cells(config: dict) -> list[Cell]:
    """Every model that gets evaluated: all trained cells plus each used backbone as downloaded."""
    cells = set(run_cells(config))
    for table in built_tables(config):
        cells.update(table_cells(config, table))
    return sorted(cells)

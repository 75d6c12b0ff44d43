"""Training curves: one figure per table, the loss of each trained model against the optimizer step.

Not a paper figure: what a reader of a training run looks at first. For each built table with
trained models (config ``figures.training_curves``), one panel per cell group (backbone, objective,
train set) overlays that group's seeds and reruns: the loss every ``log_every`` steps and, where a
cell selects its checkpoint (``select_checkpoint: best``), the validation Spearman of each epoch end
in a second row. The numbers come from each model folder's ``metrics.jsonl``, the source of truth
(aoe.training.train also logs them as TensorBoard event files, ``<model>/tensorboard/``, which this module
never reads). Outputs: ``results/figures/training_curves/{table}.pdf``, ``.png``, and ``.json`` with
every plotted number.

The planning half (:func:`curve_tables`, :func:`curve_results`, :func:`curve_panels`,
:func:`curve_inputs`) is import-light (no torch, no matplotlib, no pandas): the Snakefile imports
it at DAG-build time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from aoe.config.workflow import built_figures, built_tables
from aoe.config.cells import results_path, run_name
from aoe.config.errors import ConfigError
from aoe.config.rows import OBJECTIVE_LABELS, table_cells

__all__ = [
    "CURVES",
    "curve_tables",
    "curve_outputs",
    "curve_results",
    "curve_panels",
    "curve_inputs",
    "read_metrics",
    "run_series",
    "curves_summary",
    "panel_title",
    "plot_training_curves",
]

CURVES = "training_curves"  # results/figures/training_curves/{table}.{pdf,png,json}
_GROUP = ("backbone", "objective", "trainset")


def _settings(config: dict) -> dict:
    return (config.get("figures") or {}).get(CURVES) or {}


def curve_tables(config: dict) -> list[str]:
    """The tables that get a training-curves figure: the built ones (``build.tables``; or those of them
    ``figures.training_curves.tables`` names) with at least one trained model; none where ``build.figures``
    does not name training_curves."""
    if CURVES not in built_figures(config):
        return []
    tables = built_tables(config)
    chosen = _settings(config).get("tables")
    unknown = sorted(set(chosen or ()) - set(config.get("tables") or {}))
    if unknown:
        raise ConfigError(f"figures.{CURVES}.tables: unknown table(s) {unknown}; valid: {', '.join(config.get('tables') or {})}")
    names = [t for t in tables if chosen is None or t in chosen]
    return [t for t in names if any(c.trained for c in table_cells(config, t))]


def curve_outputs(table: str) -> list[str]:
    """The files the figure of ``table`` is written to (results/...)."""
    stem = f"results/figures/{CURVES}/{table}"
    return [f"{stem}.pdf", f"{stem}.png", f"{stem}.json"]


def curve_results(config: dict) -> list[str]:
    """Every training-curves output of the configuration (CURVE_RESULTS in rules/figures.smk)."""
    return [results_path(config, f) for t in curve_tables(config) for f in curve_outputs(t)]


def curve_panels(config: dict, table: str) -> list[dict]:
    """The panels of a table's figure, in the order its rows first show each group: ``{backbone, objective,
    trainset, runs: [{seed, rerun, run, model}]}``, ``model`` the run's folder (in the config's results tree)."""
    panels: dict[tuple, dict] = {}
    for cell in table_cells(config, table):
        if not cell.trained:
            continue
        key = (cell.backbone, cell.objective, cell.trainset)
        panel = panels.setdefault(key, {**dict(zip(_GROUP, key)), "runs": []})
        panel["runs"].append({
            "seed": cell.seed,
            "rerun": cell.rerun,
            "run": run_name(cell.seed, cell.rerun),
            "model": results_path(config, f"results/models/{cell.path}"),
        })
    for panel in panels.values():
        panel["runs"].sort(key=lambda r: (r["seed"], r["rerun"]))
    return list(panels.values())


def curve_inputs(config: dict, table: str) -> list[str]:
    """The model folders a table's figure reads (their metrics.jsonl)."""
    return [run["model"] for panel in curve_panels(config, table) for run in panel["runs"]]


# ---- reading and plotting (in the job) --------------------------------------------------------


def read_metrics(model_dir: str | Path) -> list[dict]:
    """The lines of a model folder's metrics.jsonl (aoe.training.train)."""
    path = Path(model_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics.jsonl; is {model_dir} a model folder aoe.training.train wrote?")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_series(lines: list[dict]) -> dict:
    """What a run's panel plots: ``loss`` ({step, value}: every training line's loss) and, where the run
    selected its checkpoint, ``select_spearman`` ({step, value}: each epoch end's score, x100; undefined
    scores left out) with its ``select_split``."""
    train = [x for x in lines if "select_split" not in x and "loss" in x]
    out = {"loss": {"step": [int(x["step"]) for x in train], "value": [float(x["loss"]) for x in train]}}
    selected = [x for x in lines if "select_split" in x]
    if selected:
        scored = [x for x in selected if isinstance(x.get("select_spearman"), (int, float)) and math.isfinite(x["select_spearman"])]
        out["select_spearman"] = {"step": [int(x["step"]) for x in scored], "value": [float(x["select_spearman"]) for x in scored]}
        out["select_split"] = selected[0]["select_split"]
    return out


def panel_title(panel: dict, config: dict | None = None) -> str:
    """How a panel names its group, with the names the tables use: ``all-MiniLM-L6-v2 + AoE, STS-B train``."""
    from aoe.results.figures import backbone_name, dataset_name

    spec = ((config or {}).get("trainsets") or {}).get(panel["trainset"]) or {}
    train = dataset_name(panel["trainset"], spec.get("split", "train"))
    objective = OBJECTIVE_LABELS.get(panel["objective"], panel["objective"])
    return f"{backbone_name(panel['backbone'], config)} + {objective}, {train}"


def curves_summary(table: str, panels: list[dict], config: dict | None = None) -> dict:
    """The figure's numbers (its JSON): per panel its group, title and runs, each run's plotted series
    read from its model folder's metrics.jsonl."""
    out = []
    for panel in panels:
        runs = [{**run, **run_series(read_metrics(run["model"]))} for run in panel["runs"]]
        out.append({**{k: panel[k] for k in _GROUP}, "title": panel.get("title") or panel_title(panel, config), "runs": runs})
    return {"table": table, "source": "metrics.jsonl of each model folder (aoe.training.train)", "panels": out}


def _run_label(run: dict) -> str:
    return f"seed {run['seed']}" + (f" rerun {run['rerun']}" if run.get("rerun") else "")


def plot_training_curves(summary: dict, pdf: str | Path, png: str | Path | None = None, max_cols: int = 4) -> list[Path]:
    """Draw :func:`curves_summary`'s numbers: a panel per group (``max_cols`` a row), the loss against the
    step and, when any run of the table selected its checkpoint, its validation Spearman in a row below."""
    from aoe.results.figures.style import WIDTH, HEIGHT, literal, new_figure, save_figure, series_style, style_context

    panels = summary["panels"]
    if not panels:
        raise ValueError(f"table {summary.get('table')!r}: no trained model to draw training curves of")
    with_selection = any("select_spearman" in run for p in panels for run in p["runs"])
    ncols = min(len(panels), max_cols)
    rows_per_group = 2 if with_selection else 1
    nrows = -(-len(panels) // ncols) * rows_per_group
    with style_context():
        fig, axes = new_figure(ncols, nrows, width=WIDTH * ncols, height=HEIGHT * (0.62 if with_selection else 1) * nrows)
        used: set[tuple[int, int]] = set()
        for i, panel in enumerate(panels):
            row, col = (i // ncols) * rows_per_group, i % ncols
            ax = axes[row][col]
            used.add((row, col))
            for j, run in enumerate(panel["runs"]):
                style = series_style(j)
                ax.plot(run["loss"]["step"], run["loss"]["value"], color=style["color"], linestyle=style["linestyle"],
                        linewidth=0.9, label=_run_label(run))
            ax.set_title(literal(panel["title"]))
            ax.set_ylabel("training loss\n(mean since the last point)")
            ax.legend(loc="upper right")
            splits = sorted({run["select_split"] for run in panel["runs"] if run.get("select_split")})
            if splits:  # the epoch ends' validation Spearman below the loss, on the same steps
                below = axes[row + 1][col]
                used.add((row + 1, col))
                for j, run in enumerate(panel["runs"]):
                    if run.get("select_spearman"):
                        style = series_style(j)
                        below.plot(run["select_spearman"]["step"], run["select_spearman"]["value"], color=style["color"],
                                   linestyle=style["linestyle"], marker=style["marker"], label=_run_label(run))
                below.set_ylabel(literal(f"val. Spearman x100\n({', '.join(splits)})"))
                below.set_xlabel("optimizer step")
                below.sharex(ax)
            else:
                ax.set_xlabel("optimizer step")
        for r in range(nrows):
            for c in range(ncols):
                if (r, c) not in used:
                    axes[r][c].set_visible(False)
        fig.suptitle(literal(f"Training curves: {summary['table']}"), fontsize=8)
        return save_figure(fig, pdf, png)

"""LaTeX (booktabs) and CSV tables from evaluation JSON files. Tables never train or embed.

Each cell is the mean ± sample std over the seeds that exist, with the seed count
in the row label; the best mean per backbone among our rows is bold; the paper's
reported numbers appear as labelled reference rows. A result that does not exist
is printed as "–" and listed in the log, never as 0.
"""

from __future__ import annotations

import json
import logging
import math
import re
from importlib import resources
from pathlib import Path

import pandas as pd
import yaml

from aoe.evaluate.sts import TASKS

__all__ = ["KINDS", "load_sts_results", "paper_reference", "build_table", "to_latex"]

log = logging.getLogger(__name__)

# table kind -> (columns shown, header labels)
KINDS = {
    "sts7": (list(TASKS) + ["avg"], ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "Avg."]),
    "stsb": (["STSB"], ["STS-B test"]),
}

OBJECTIVE_LABELS = {
    "pretrained": "as downloaded",
    "aoe": "AoE",
    "angle_arxiv": "AnglE",
    "cosent": "CoSENT",
    "only_angle": "only angle",
    "only_contrastive": "only contrastive",
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def load_sts_results(paths: list[str | Path]) -> pd.DataFrame:
    """Long table (backbone, objective, trainset, seed, task, spearman) from sts.json files."""
    rows = []
    for path in paths:
        result = json.loads(Path(path).read_text())
        cell = result["model"]["cell"]
        # tasks evaluated on purpose are null, and so is the average then: no row, printed as "–"
        scores = {task: result["tasks"][task]["spearman"] for task in TASKS if result["tasks"].get(task)}
        if result.get("avg") is not None:
            scores["avg"] = result["avg"]
        for task, value in scores.items():
            rows.append({**cell, "seed": int(cell["seed"]), "task": task, "spearman": value})
    return pd.DataFrame(rows, columns=["backbone", "objective", "trainset", "seed", "task", "spearman"])


def paper_reference(ref: str, numbers_file: str | Path | None = None) -> tuple[str, dict[str, float], dict[str, float]]:
    """A reference row of paper_numbers.yaml: (label, {task: value}, {task: std}).

    ``ref`` is ``'<table key>/<row>'`` for tables with ``rows``, or
    ``'<table key>/<group>/<row>'`` for tables with ``groups`` (e.g. a backbone).
    """
    text = (
        Path(numbers_file).read_text()
        if numbers_file
        else resources.files("aoe.resources").joinpath("paper_numbers.yaml").read_text()
    )
    numbers = yaml.safe_load(text)
    parts = ref.split("/")
    entry = numbers.get(parts[0]) if len(parts) in (2, 3) else None
    try:
        if len(parts) == 2:
            values, stds = entry["rows"][parts[1]], entry.get("std", {}).get(parts[1], {})
        else:
            values = entry["groups"][parts[1]][parts[2]]
            stds = entry.get("std", {}).get(parts[1], {}).get(parts[2], {})
    except (KeyError, TypeError):
        raise KeyError(f"paper reference {ref!r} not found in paper_numbers.yaml") from None
    wanted = {_key(t): t for t in [*TASKS, "avg"]}

    def pick(d: dict) -> dict[str, float]:
        return {wanted[_key(k)]: float(v) for k, v in d.items() if _key(k) in wanted and isinstance(v, (int, float))}

    source = entry.get("short") or entry.get("source", parts[0]).split(":")[0]
    return f"{parts[-1]} (paper: {source})", pick(values), pick(stds)


def build_table(
    results: pd.DataFrame,
    spec: dict,
    kind: str,
    references: list[str] | None = None,
    numbers_file: str | Path | None = None,
) -> pd.DataFrame:
    """Rows of a table: one per (backbone, objective), mean/std/n per column; then reference rows.

    ``numbers_file`` replaces the packaged paper_numbers.yaml for the reference rows.
    """
    columns, _ = KINDS[kind]
    objectives = (["pretrained"] if spec.get("include_pretrained", True) else []) + list(spec["objectives"])
    rows = []
    for backbone in spec["backbones"]:
        for objective in objectives:
            trainset = "none" if objective == "pretrained" else spec["trainset"]
            sel = results[
                (results.backbone == backbone) & (results.objective == objective) & (results.trainset == trainset)
            ]
            row = {"backbone": backbone, "objective": objective, "trainset": trainset, "reference": False}
            n_seeds = sel.seed.nunique()
            row["n"] = n_seeds
            for col in columns:
                vals = sel[sel.task == col].spearman
                if vals.empty:
                    log.warning("missing result: %s/%s/%s %s (printed as –)", backbone, objective, trainset, col)
                row[f"{col}_mean"] = float(vals.mean()) if len(vals) else math.nan
                row[f"{col}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else math.nan
            rows.append(row)
    for ref in references or []:
        label, values, stds = paper_reference(ref, numbers_file)
        row = {"backbone": label, "objective": "paper", "trainset": "", "reference": True, "n": math.nan}
        for col in columns:
            row[f"{col}_mean"] = values.get(col, math.nan)
            row[f"{col}_std"] = stds.get(col, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def _fmt(mean: float, std: float, bold: bool) -> str:
    if math.isnan(mean):
        return "–"
    text = f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} $\\pm$ {std:.2f}"
    return f"\\textbf{{{text}}}" if bold else text


def _escape(text: str) -> str:
    return re.sub(r"([_%&#$])", r"\\\1", text)


def to_latex(table: pd.DataFrame, kind: str, caption: str, label: str, note: str = "") -> str:
    """A standalone-compilable LaTeX document holding the booktabs table."""
    columns, headers = KINDS[kind]
    lines = [
        "\\documentclass{article}",
        "\\usepackage{booktabs}",
        "\\usepackage[margin=1cm,landscape]{geometry}",
        "\\pagestyle{empty}",
        "\\begin{document}",
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\begin{{tabular}}{{l{'c' * len(columns)}}}",
        "\\toprule",
        "Model & " + " & ".join(headers) + " \\\\",
        "\\midrule",
    ]
    ours = table[~table.reference]
    for backbone, group in ours.groupby("backbone", sort=False):
        best = {c: group[f"{c}_mean"].max() for c in columns}
        for _, row in group.iterrows():
            name = OBJECTIVE_LABELS.get(row.objective, row.objective)
            seeds = f"n={int(row.n)}" if row.n else "n=0"
            train = "" if row.objective == "pretrained" else f", {row.trainset}"
            cells = [
                _fmt(row[f"{c}_mean"], row[f"{c}_std"], bold=len(group) > 1 and row[f"{c}_mean"] == best[c]) for c in columns
            ]
            lines.append(f"{_escape(backbone)} {_escape(name)}{_escape(train)} ({seeds}) & " + " & ".join(cells) + " \\\\")
        lines.append("\\midrule")
    refs = table[table.reference]
    for _, row in refs.iterrows():
        cells = " & ".join(_fmt(row[f"{c}_mean"], row[f"{c}_std"], False) for c in columns)
        lines.append(f"\\textit{{{_escape(row.backbone)}}} & " + cells + " \\\\")
    if refs.empty:
        lines.pop()  # the last \midrule
    lines += [
        "\\bottomrule",
        "\\end{tabular}",
        f"\\caption{{{caption}{(' ' + note) if note else ''}}}",
        f"\\label{{tab:{label}}}",
        "\\end{table}",
        "\\end{document}",
        "",
    ]
    return "\n".join(lines)

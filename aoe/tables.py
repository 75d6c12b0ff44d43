"""Tables of both papers from result files: LaTeX (booktabs), CSV, Markdown and JSON. Tables never train or embed.

Each cell is the mean ± sample std over the seeds that exist, with the seed count in
the row label; the best mean per backbone among our rows is bold. A row with a paper
counterpart (a row's ``paper`` key, or the table's ``paper`` mapping
``{backbone: {objective: ref}}``) is followed by the paper's numbers and the
difference Δ = ours − paper; a row's ``reproduction`` (or the table's ``reproduction``
mapping, same shape) adds a second such line, the independent reproduction report's
number with Δ = ours − reproduction; the table's other ``paper_reference`` entries (and
mapping entries whose row is not in the table, e.g. a preset on another backbone) are
reference rows at the bottom. Two paper rows of one table printed with one name get the
group the paper prints them under (paper_numbers.yaml ``group_labels``). The notes define
Δ only where a Δ line is printed; a table with no row of the paper's says why. A paired
t-test (``scipy.stats.ttest_rel``) compares the treatment row (AoE / AnglE) with every
other row of its backbone over matched seeds, per column and pooled over the dataset
columns; the p-values go in a note under the table. A result that does not exist is printed as "–" and logged, never 0.

Kinds (columns, the files a table reads, how one file becomes values): :data:`aoe.table_kinds.KINDS`.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from aoe.data.io import sha256_file
from aoe.evaluate.sts import TASKS
from aoe.jsonio import finite_or_none, json_safe
from aoe.stats import paired_ttest
from aoe.table_kinds import KINDS, Column, table_kind
from aoe.workflow import NO_TRAINSET, PRETRAINED, parse_run, run_name

__all__ = [
    "KINDS",
    "OBJECTIVE_LABELS",
    "Column",
    "Row",
    "Table",
    "and_join",
    "build_gis_table",
    "build_table",
    "load_results",
    "load_sts_results",
    "no_delta_reason",
    "paper_digits",
    "paper_reference",
    "render_table",
    "spec_rows",
    "to_frame",
    "to_json",
    "to_latex",
    "to_markdown",
]

log = logging.getLogger(__name__)

# treatment objectives of the t-test, in order of preference (a table's `ttest.treatment` overrides)
TREATMENTS = ("aoe", "angle_arxiv")

OBJECTIVE_LABELS = {
    PRETRAINED: "as downloaded",
    "aoe": "AoE",
    "angle_arxiv": "AnglE",
    "cosent": "CoSENT",
    "sbert": "SBERT",
    "simcse_sup": "SimCSE (sup.)",
    "only_angle": "only angle",
    "only_contrastive": "only contrastive",
    "only_cosine": "only cosine",
    "only_ibn": "only ibn",
    "wo_ibn": "w/o ibn",
    "wo_angle": "w/o angle",
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def kind_columns(kind: str, spec: dict, results: pd.DataFrame | None = None) -> list[Column]:
    """The columns of a table kind (mteb: the categories found in the results, in MTEB's order)."""
    found = set(results.column) if results is not None and not results.empty else set()
    return table_kind(kind).columns(spec, found)


# ---------------------------------------------------------------------------
# Loading result files into a long table (backbone, objective, trainset, seed, rerun, column, value).

# eval_pooling: "" for a cell's own evaluation, else the evaluation-only pooling of a variant row's file
RESULT_COLUMNS = ["backbone", "objective", "trainset", "seed", "rerun", "eval_pooling", "column", "value"]


def _cell(result: dict, path: Path) -> dict:
    try:
        cell = dict(result["model"]["cell"])
    except (KeyError, TypeError):
        raise ValueError(f"{path}: no model.cell record") from None
    # the record's seed is the run of the path: "42", or "42-rerun2"
    cell["seed"], cell["rerun"] = parse_run(cell["seed"])
    cell["eval_pooling"] = cell.get("eval_pooling") or ""
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


# ---------------------------------------------------------------------------
# Paper numbers.


def load_paper_numbers(numbers_file: str | Path | None) -> dict:
    """The parsed numbers file; callers only read it (one parse per distinct text: a table looks up
    every row's reference in it)."""
    text = (
        Path(numbers_file).read_text()
        if numbers_file
        else resources.files("aoe.resources").joinpath("paper_numbers.yaml").read_text()
    )
    return _parse_numbers(text)


@functools.lru_cache(maxsize=8)
def _parse_numbers(text: str) -> dict:
    return yaml.safe_load(text)


def paper_reference(
    ref: str, numbers_file: str | Path | None = None, columns: list[str] | None = None
) -> tuple[str, dict[str, float], dict[str, float]]:
    """A reference row of paper_numbers.yaml: (label, {column: value}, {column: std}).

    ``ref`` is ``'<table key>/<row>'`` for tables with ``rows``, ``'<table key>/<group>/<row>'``
    for tables with ``groups`` (e.g. a backbone) or rows in sections, or a path to a single
    number (then the value of column ``avg``). The paper's column names are matched to
    ``columns`` (default: the STS tasks and avg) ignoring case and punctuation
    (``STS-B`` = ``STSB``); an entry's own ``std`` number is the std of its ``avg``.
    """
    numbers = load_paper_numbers(numbers_file)
    parts = ref.split("/")
    entry = numbers.get(parts[0])
    if not isinstance(entry, dict) or len(parts) < 2:
        raise KeyError(f"paper reference {ref!r} not found in paper_numbers.yaml")
    values: Any = None
    stds: Any = {}
    # a row key may itself hold "/" (a hub id: repo_nli_readme_released_checkpoints/SeanLee97/angle-...)
    for container, path in itertools.product(("rows", "groups", None), (parts[1:], ["/".join(parts[1:])])):
        node: Any = entry.get(container) if container else entry
        std_node: Any = entry.get("std", {}) if container else {}
        try:
            for p in path:
                node = node[p]
                std_node = std_node.get(p, {}) if isinstance(std_node, dict) else {}
        except (KeyError, TypeError):
            continue
        values, stds = node, std_node
        break
    if values is None or not isinstance(values, (dict, int, float)) or isinstance(values, bool):
        raise KeyError(f"paper reference {ref!r} not found in paper_numbers.yaml")
    if not isinstance(values, dict):
        values = {"avg": values}
    else:
        values = dict(values)
        if isinstance(values.get("std"), (int, float)):
            stds = {**(stds if isinstance(stds, dict) else {}), "avg": values.pop("std")}
    wanted = {_key(t): t for t in (columns if columns is not None else [*TASKS, "avg"])}

    def pick(d: dict) -> dict[str, float]:
        return {
            wanted[_key(k)]: float(v)
            for k, v in (d or {}).items()
            if _key(k) in wanted and isinstance(v, (int, float)) and not isinstance(v, bool)
        }

    source = entry.get("short") or entry.get("source", parts[0]).split(":")[0]
    return f"{parts[-1]} (paper: {source})", pick(values), pick(stds if isinstance(stds, dict) else {})


# ---------------------------------------------------------------------------
# Building a table.


@dataclass
class Row:
    label: str
    backbone: str
    objective: str
    trainsets: list[str]
    seeds: list[int] | None  # None: every seed found
    section: str = ""
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # column -> run (run_name) -> value
    reruns: int = 1  # trainings per seed: rerun 0 .. reruns-1
    paper_ref: str | None = None
    paper_label: str = ""
    paper: dict[str, float] = field(default_factory=dict)
    paper_std: dict[str, float] = field(default_factory=dict)
    reference: bool = False  # a paper row with no counterpart among ours
    # the (backbone, objective) of ours a paper row stands for (the table's ``paper`` mapping or the row's
    # own key), also on reference rows: what a preset on another backbone compares by objective
    paper_backbone: str = ""
    paper_objective: str = ""
    repro_ref: str | None = None  # the independent reproduction's row, a second line under ours
    repro_label: str = ""
    repro: dict[str, float] = field(default_factory=dict)
    variant: str = NO_TRAINSET  # a pretrained row: its evaluation.pretrained_variants key ("none": the backbone's own)
    eval_pooling: str = ""  # an evaluation-only variant row: the pooling its cells were scored with ("": their own)

    @property
    def n(self) -> int:
        return len({s for v in self.values.values() for s in v})

    def mean(self, col: str) -> float:
        v = list(self.values.get(col, {}).values())
        return float(np.mean(v)) if v else math.nan

    def std(self, col: str) -> float:
        v = list(self.values.get(col, {}).values())
        return float(np.std(v, ddof=1)) if len(v) > 1 else math.nan

    def count(self, col: str) -> int:
        return len(self.values.get(col, {}))

    def delta(self, col: str) -> float:
        return self.mean(col) - self.paper[col] if col in self.paper and self.values.get(col) else math.nan

    def repro_delta(self, col: str) -> float:
        return self.mean(col) - self.repro[col] if col in self.repro and self.values.get(col) else math.nan


@dataclass
class TTest:
    backbone: str
    treatment: str
    baseline: str
    column: str  # a column key, or "pooled"
    n: int
    p: float | None
    statistic: float | None
    note: str = ""  # why there is no p-value, or what was pooled

    def text(self) -> str:
        if self.p is None:
            return self.note
        return f"p = {_fmt_p(self.p)} (n = {self.n}{', ' + self.note if self.note else ''})"


@dataclass
class Table:
    name: str
    kind: str
    caption: str
    columns: list[Column]
    rows: list[Row]
    references: list[Row]
    ttests: list[TTest] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # gis_stats: the body rows
    sources: list[dict] = field(default_factory=list)  # the files it read (source_files)


def spec_rows(spec: dict) -> list[dict]:
    """Row dicts from a table spec without a config (tests, ad-hoc use): seeds None = every seed found.

    The workflow passes ``aoe.workflow.table_rows(...)`` dicts instead, with seeds resolved.
    """
    from aoe.workflow import row_entries

    out = []
    for e in row_entries(spec):
        out.append(
            {
                "backbone": e["backbone"],
                "objective": e["objective"],
                "trainsets": e["trainsets"],
                "seeds": list(e["seeds"]) if "seeds" in e else None,
                "reruns": int(e.get("reruns", 1)),
                "label": e.get("label"),
                "section": e.get("section", ""),
                "variant": e.get("variant", NO_TRAINSET),
                "eval_pooling": e.get("eval_pooling") or "",
            }
        )
    return out


def row_paper_refs(spec: dict, rows: list[dict], key: str = "paper") -> list[str | None]:
    """The ``key`` reference (``paper`` or ``reproduction``) of each row: its own (explicit rows,
    same order), else the table's mapping ``{backbone: {objective: ref}}``."""
    explicit = spec.get("rows") or []
    mapping = spec.get(key) or {}
    refs = []
    for i, row in enumerate(rows):
        ref = None
        if i < len(explicit) and explicit[i].get("objective") == row["objective"] and explicit[i].get("backbone") == row["backbone"]:
            ref = explicit[i].get(key)
        if ref is None:
            ref = (mapping.get(row["backbone"]) or {}).get(row["objective"])
        refs.append(ref)
    return refs


def _spec_refs(spec: dict, key: str) -> list[str]:
    """Every ``key`` reference a table spec names: its mapping's and its explicit rows'."""
    refs = [ref for by_obj in (spec.get(key) or {}).values() for ref in by_obj.values()]
    return refs + [r[key] for r in spec.get("rows") or [] if r.get(key)]


def _spec_paper_of(spec: dict) -> dict[str, tuple[str, str]]:
    """Paper reference -> the (backbone, objective) of ours it stands for, from the table's ``paper``
    mapping and its explicit rows' ``paper`` keys (the rows of a preset may be on other backbones)."""
    out = {ref: (backbone, objective) for backbone, by_obj in (spec.get("paper") or {}).items() for objective, ref in by_obj.items()}
    for r in spec.get("rows") or []:
        if r.get("paper"):
            out.setdefault(r["paper"], (r.get("backbone", ""), r.get("objective", "")))
    return out


def _paper_group(ref: str, numbers_file: str | Path | None) -> str:
    """The group a paper row is printed under (AoE Table 1: the backbone, e.g. LLaMA2-7B), as the
    entry's ``group_labels`` names it; '' for a row of a flat table."""
    parts = ref.split("/")
    entry = load_paper_numbers(numbers_file).get(parts[0])
    if not isinstance(entry, dict) or len(parts) < 3:
        return ""
    group = parts[1]
    nested = (entry.get("groups") or {}).get(group)
    if not isinstance(nested, dict):
        nested = (entry.get("rows") or {}).get(group)
        if not isinstance(nested, dict) or not any(isinstance(v, dict) for v in nested.values()):
            return ""  # a row key holding "/" (a hub id), not a group
    return str((entry.get("group_labels") or {}).get(group, group))


def _tell_apart(table: Table, numbers_file: str | Path | None) -> None:
    """Paper rows of one table with the same label (AoE Table 1's "SBERT ⋆" under LLaMA2-7B and under
    LLaMA2-13B) get their group in the label, so no two different paper rows read alike."""
    lines = [(r, "paper_label", r.paper_ref) for r in table.rows if r.paper_ref]
    lines += [(r, "repro_label", r.repro_ref) for r in table.rows if r.repro_ref]
    lines += [(r, "label", r.paper_ref) for r in table.references]
    refs_of: dict[str, set[str]] = {}
    for row, attr, ref in lines:
        refs_of.setdefault(getattr(row, attr), set()).add(ref)
    for row, attr, ref in lines:
        label = getattr(row, attr)
        group = _paper_group(ref, numbers_file) if len(refs_of[label]) > 1 else ""
        if group:
            name, paren, source = label.partition(" (paper: ")
            setattr(row, attr, f"{name} ({group}){paren}{source}")
            if row.reference:
                row.paper_label = row.label


def row_label(row: dict) -> str:
    if row.get("label"):
        return row["label"]
    name = OBJECTIVE_LABELS.get(row["objective"], row["objective"])
    if row["objective"] == PRETRAINED and row.get("variant", NO_TRAINSET) != NO_TRAINSET:
        return f"{name} ({row['variant']})"
    if row.get("eval_pooling"):
        return f"{name} (evaluated {row['eval_pooling']})"
    return name


def build_table(
    results: pd.DataFrame,
    spec: dict,
    kind: str | None = None,
    references: list[str] | None = None,
    numbers_file: str | Path | None = None,
    rows: list[dict] | None = None,
    name: str = "table",
) -> Table:
    """A table of a kind from the long results: one Row per row spec (mean/std/n per column),
    the paper's numbers on matched rows, the other references, and the t-tests.

    ``rows``: TableRow dicts (``aoe.workflow.table_rows``); default :func:`spec_rows`.
    ``references``: extra reference rows (default the spec's ``paper_reference``).
    ``numbers_file`` replaces the packaged paper_numbers.yaml.
    """
    kind = kind or spec["kind"]
    per_trainset = table_kind(kind).column_per_trainset
    if "column" not in results.columns and "task" in results.columns:  # load_sts_results' shape
        results = results.rename(columns={"task": "column", "spearman": "value"})
    if "rerun" not in results.columns:  # a frame built by hand: every value its seed's first training
        results = results.assign(rerun=0)
    columns = kind_columns(kind, spec, results)
    col_keys = [c.key for c in columns]
    rows = rows if rows is not None else spec_rows(spec)
    refs = row_paper_refs(spec, rows)
    repro_refs = row_paper_refs(spec, rows, "reproduction")
    table = Table(name, kind, spec.get("caption", ""), columns, [], [])
    for row_spec, ref, repro_ref in zip(rows, refs, repro_refs):
        row = Row(
            label=row_label(row_spec),
            backbone=row_spec["backbone"],
            objective=row_spec["objective"],
            trainsets=list(row_spec.get("trainsets") or []),
            seeds=list(row_spec["seeds"]) if row_spec.get("seeds") is not None else None,
            section=row_spec.get("section") or "",
            paper_ref=ref,
            reruns=int(row_spec.get("reruns") or 1),
            repro_ref=repro_ref,
            variant=row_spec.get("variant") or NO_TRAINSET,
            eval_pooling=row_spec.get("eval_pooling") or "",
        )
        pre = row.objective == PRETRAINED
        sel = results[(results.backbone == row.backbone) & (results.objective == row.objective)]
        if pre:
            sel = sel[sel.trainset == row.variant]
        elif row.trainsets:
            sel = sel[sel.trainset.isin(row.trainsets)]
        if row.seeds is not None:
            sel = sel[sel.seed.isin(row.seeds)]
        sel = sel[sel.rerun < row.reruns]
        if "eval_pooling" in sel.columns:  # a frame built by hand has only the cells' own evaluations
            sel = sel[sel.eval_pooling.astype(object).fillna("") == row.eval_pooling]
        elif row.eval_pooling:
            sel = sel.iloc[:0]
        for col in col_keys:
            if per_trainset and col != "avg":
                cs = sel[sel.column == col]
                if not pre:
                    cs = cs[cs.trainset == col]
            else:
                cs = sel[sel.column == col]
            row.values[col] = {run_name(int(s), int(r)): float(v) for s, r, v in zip(cs.seed, cs.rerun, cs.value)}
        if per_trainset and "avg" in col_keys:
            # the per-seed average over the dataset columns, where a seed has all of them
            data_cols = [c for c in col_keys if c != "avg"]
            seeds = set.intersection(*(set(row.values[c]) for c in data_cols)) if data_cols else set()
            row.values["avg"] = {s: float(np.mean([row.values[c][s] for c in data_cols])) for s in sorted(seeds, key=parse_run)}
        for col in col_keys:
            if not row.values[col]:
                where = f"{row.backbone}/{row.objective}/{'none' if pre else ','.join(row.trainsets)}"
                msg = f"{where}{f' [{row.label}]' if row_spec.get('label') else ''} {col}"
                table.missing.append(msg)
                log.warning("missing result: %s (printed as –)", msg)
        if ref:
            row.paper_label, row.paper, row.paper_std = paper_reference(ref, numbers_file, col_keys)
            row.paper_backbone, row.paper_objective = row.backbone, row.objective
        if repro_ref:
            row.repro_label, row.repro, _ = paper_reference(repro_ref, numbers_file, col_keys)
        table.rows.append(row)
    used = {ref for r in table.rows for ref in (r.paper_ref, r.repro_ref) if ref}
    extra = list(references if references is not None else spec.get("paper_reference", []))
    # mapping entries whose row is not in this table (e.g. a preset with other backbones)
    extra += _spec_refs(spec, "paper") + _spec_refs(spec, "reproduction")
    paper_of = _spec_paper_of(spec)
    seen = set()
    for ref in extra:
        if ref in used or ref in seen:
            continue
        seen.add(ref)
        label, values, stds = paper_reference(ref, numbers_file, col_keys)
        paper_backbone, paper_objective = paper_of.get(ref, ("", ""))
        table.references.append(
            Row(label=label, backbone="", objective="paper", trainsets=[], seeds=None, paper_ref=ref,
                paper_label=label, paper=values, paper_std=stds, reference=True,
                paper_backbone=paper_backbone, paper_objective=paper_objective)
        )
    _tell_apart(table, numbers_file)
    table.ttests = ttests(table, spec)
    if table.missing:
        log.warning("%s: %d missing cell(s) printed as –: %s", name, len(table.missing), "; ".join(table.missing))
    return table


# ---------------------------------------------------------------------------
# Paired t-tests.


def _pairs(t: Row, b: Row, col: str) -> tuple[list[float], list[float], list[int]]:
    tv, bv = t.values.get(col, {}), b.values.get(col, {})
    if b.objective == PRETRAINED and len(bv) == 1:
        # the backbone as downloaded does not depend on the seed: its one value pairs with every seed
        only = next(iter(bv.values()))
        bv = {s: only for s in tv}
    seeds = sorted(set(tv) & set(bv), key=parse_run)
    return [tv[s] for s in seeds], [bv[s] for s in seeds], seeds


def ttests(table: Table, spec: dict) -> list[TTest]:
    """Treatment row vs every other objective's row of the same backbone: per column over matched
    seeds, and pooled over (seed, dataset column) pairs when there are several dataset columns.
    The treatment is the table's ``ttest.treatment``, else per backbone the first of
    :data:`TREATMENTS` among its rows."""
    if not table_kind(table.kind).ttests:
        return []
    setting = spec.get("ttest") or {}
    if setting.get("enabled", True) is False:
        return []
    out = []
    by_backbone: dict[str, list[Row]] = {}
    for r in table.rows:
        by_backbone.setdefault(r.backbone, []).append(r)
    data_cols = [c.key for c in table.columns if not c.summary]
    for backbone, rows in by_backbone.items():
        # per backbone: a table can hold AnglE-BERT (angle_arxiv) beside AnglE-LLaMA (the aoe cell)
        objectives = {r.objective for r in rows}
        treatment = setting.get("treatment") or next((t for t in TREATMENTS if t in objectives), None)
        # the first row of the treatment (ablations repeat it in other sections, or on a seed subset)
        treat = next((r for r in rows if r.objective == treatment), None)
        if treat is None:
            continue
        done = set()
        for base in rows:
            if base.objective == treatment or (base.objective, base.label) in done:
                continue
            done.add((base.objective, base.label))
            for col in [c.key for c in table.columns]:
                a, b, seeds = _pairs(treat, base, col)
                if not a and not b:
                    continue
                p, t, note = paired_ttest(a, b)
                out.append(TTest(backbone, treat.label, base.label, col, len(seeds), p, t, note))
            if len(data_cols) > 1:
                a_all, b_all, n_seeds, n_cols = [], [], set(), 0
                for col in data_cols:
                    a, b, seeds = _pairs(treat, base, col)
                    if seeds:
                        n_cols += 1
                    a_all += a
                    b_all += b
                    n_seeds.update(seeds)
                if a_all:
                    p, t, note = paired_ttest(a_all, b_all)
                    if p is not None:
                        note = f"{n_cols} dataset{'s' if n_cols != 1 else ''} x {len(n_seeds)} seed{'s' if len(n_seeds) != 1 else ''}"
                    elif len(a_all) < 2:
                        note = f"n/a ({len(a_all)} pair)"
                    out.append(TTest(backbone, treat.label, base.label, "pooled", len(a_all), p, t, note))
    return out


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


# ---------------------------------------------------------------------------
# GIS statistics (AoE ACL 2024 Table 7; the AnglE arXiv versions print the same numbers).


def build_gis_table(stats: dict, spec: dict, name: str = "table_gis_stats", numbers_file: str | Path | None = None) -> Table:
    """Split sizes (positive / negative / total) and the share of texts over the token threshold,
    from results/analysis/gis/stats.json, each split followed by the paper's numbers where the
    spec's ``paper`` mapping names them (``{GIS: {split: '<table key>/<row>'}}``)."""
    threshold = stats.get("long_threshold", 512)
    columns = [
        Column("positive", "positive"),
        Column("negative", "negative"),
        Column("total", "total"),
        Column("long_share", f"texts > {threshold} tokens (%)"),
    ]
    refs = (spec.get("paper") or {}).get("GIS") or {}
    rows = []
    for split, counts in (stats.get("table7") or {}).items():
        share = (stats.get("long_text_share") or {}).get(split)
        row = Row(label=split, backbone="GIS", objective="stats", trainsets=[], seeds=None, paper_ref=refs.get(split))
        for col in ("positive", "negative", "total"):
            row.values[col] = {0: float(counts[col])} if counts.get(col) is not None else {}
        row.values["long_share"] = {0: 100 * float(share)} if share is not None else {}
        if row.paper_ref:
            row.paper_label, row.paper, row.paper_std = paper_reference(row.paper_ref, numbers_file, [c.key for c in columns])
        rows.append(row)
    table = Table(name, "gis_stats", spec.get("caption", ""), columns, rows, [])
    table.notes.append(f"Token lengths: {stats.get('tokenizer', 'unknown tokenizer')}; one seed-free measurement of the published dataset.")
    if any(r.paper for r in rows):
        # the paper's share is over 512 tokens of an unnamed tokenizer: a Δ there is only as good as that match
        table.notes.append("'paper' lines: the paper's split sizes and share of long texts; the paper does not name its tokenizer.")
    missing_refs = sorted(set(refs) - {r.label for r in rows})
    if missing_refs:
        table.notes.append("Paper splits with no split of ours: " + ", ".join(missing_refs) + ".")
    for row in rows:
        for col in ("positive", "negative", "total", "long_share"):
            if not row.values[col]:
                table.missing.append(f"GIS {row.label} {col}")
                log.warning("missing result: GIS %s %s (printed as –)", row.label, col)
    return table


# ---------------------------------------------------------------------------
# Rendering.


def _digits(table: Table, col: str) -> int:
    return table_kind(table.kind).digits(col)


def _num_text(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


# characters of labels and notes that pdflatex needs spelled out (no newunicodechar needed)
_LATEX_CHARS = {"–": "--", "—": "---", "†": "\\textdagger{}", "‡": "\\textdaggerdbl{}", "⋆": "$\\star$",
                "♢": "$\\diamondsuit$", "±": "$\\pm$", "Δ": "$\\Delta$", "−": "$-$", "×": "$\\times$", "≥": "$\\geq$",
                "≤": "$\\leq$", "ρ": "$\\rho$", "§": "\\S{}"}


def _escape(text: str) -> str:
    text = str(text).replace("\\", "\\textbackslash{}")
    text = re.sub(r"([_%&#$])", r"\\\1", text)
    text = text.replace("~", "\\textasciitilde{}").replace("^", "\\textasciicircum{}")
    for char, tex in _LATEX_CHARS.items():
        text = text.replace(char, tex)
    return text


def _best(table: Table, group: list[Row], col: str) -> float | None:
    k = table_kind(table.kind)
    if len(group) < 2 or col in k.no_bold or not k.seeded:
        return None
    means = [r.mean(col) for r in group if not math.isnan(r.mean(col))]
    if len(means) < 2:
        return None
    return min(means) if col in k.lower_is_better else max(means)


def _groups(table: Table) -> list[tuple[str, list[Row]]]:
    """Rows grouped by backbone (bold within a backbone); ablations: by backbone, sections kept in order."""
    groups: dict[str, list[Row]] = {}
    for r in table.rows:
        groups.setdefault(r.backbone, []).append(r)
    return list(groups.items())


def _row_name(table: Table, row: Row, latex: bool) -> str:
    esc = _escape if latex else (lambda s: s)
    k = table_kind(table.kind)
    if not k.seeded:
        return esc(row.label)
    seeds = f"n={row.n}"
    if row.objective == PRETRAINED:
        train = ""
    elif k.column_per_trainset:
        train = ", in-domain"
    else:
        train = f", {','.join(row.trainsets)}" if row.trainsets else ""
    return f"{esc(row.backbone)} {esc(row.label)}{esc(train)} ({seeds})"


def _cell_text(table: Table, row: Row, col: str, bold: bool, latex: bool) -> str:
    mean = row.mean(col)
    if math.isnan(mean):
        return "–"
    d = _digits(table, col)
    pm = " $\\pm$ " if latex else " ± "
    std = row.std(col)
    text = _num_text(mean, d) if math.isnan(std) else f"{_num_text(mean, d)}{pm}{_num_text(std, d)}"
    if bold:
        return f"\\textbf{{{text}}}" if latex else f"**{text}**"
    return text


def paper_digits(value: float, digits: int) -> int:
    """Decimals to print a paper's number with: the table's, or more where the paper printed more
    (61.646, 14.35 s), so a paper number is never shown rounded."""
    text = repr(float(value))
    decimals = 0 if "e" in text or text.endswith(".0") else len(text.split(".")[1])
    return max(digits, min(decimals, 4))


def _paper_text(table: Table, values: dict, stds: dict, col: str, latex: bool) -> str:
    if col not in values:
        return "–"
    d = _digits(table, col)
    pm = " $\\pm$ " if latex else " ± "
    text = _num_text(values[col], paper_digits(values[col], d))
    return text + (f"{pm}{_num_text(stds[col], paper_digits(stds[col], d))}" if col in stds else "")


def _delta_text(table: Table, row: Row, col: str, latex: bool, delta_of=None) -> str:
    delta = (delta_of or row.delta)(col)
    if math.isnan(delta):
        return "–"
    text = f"{delta:+.{_digits(table, col)}f}"
    return f"${text}$" if latex else text


def _body(table: Table, latex: bool) -> list[tuple[str, list[str], str]]:
    """Body lines (kind, cells incl. the row name, style) with 'rule' separators between backbones."""
    out: list[tuple[str, list[str], str]] = []
    cols = [c.key for c in table.columns]
    for gi, (backbone, group) in enumerate(_groups(table)):
        if gi:
            out.append(("rule", [], ""))
        best = {c: _best(table, group, c) for c in cols}
        section = None
        for row in group:
            if row.section and row.section != section:
                section = row.section
                out.append(("section", [_escape(section) if latex else section], ""))
            cells = [_cell_text(table, row, c, best[c] is not None and row.mean(c) == best[c], latex) for c in cols]
            out.append(("row", [_row_name(table, row, latex), *cells], ""))
            if row.paper:
                src = row.paper_label
                out.append(("paper", [("\\quad " + _escape(src)) if latex else f"  {src}",
                                      *[_paper_text(table, row.paper, row.paper_std, c, latex) for c in cols]], "paper"))
                out.append(("delta", ["\\quad $\\Delta$ (ours $-$ paper)" if latex else "  Δ (ours − paper)",
                                      *[_delta_text(table, row, c, latex) for c in cols]], "delta"))
            if row.repro:
                out.append(("paper", [("\\quad " + _escape(row.repro_label)) if latex else f"  {row.repro_label}",
                                      *[_paper_text(table, row.repro, {}, c, latex) for c in cols]], "paper"))
                out.append(("delta", ["\\quad $\\Delta$ (ours $-$ reproduction)" if latex else "  Δ (ours − reproduction)",
                                      *[_delta_text(table, row, c, latex, row.repro_delta) for c in cols]], "delta"))
    if table.references:
        out.append(("rule", [], ""))
        for ref in table.references:
            name = f"\\textit{{{_escape(ref.label)}}}" if latex else f"*{ref.label}*"
            out.append(("ref", [name, *[_paper_text(table, ref.paper, ref.paper_std, c, latex) for c in cols]], ""))
    return out


def and_join(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def no_delta_reason(ours: list[str], paper: list[str]) -> str:
    """Why a table with rows of ours and rows of the paper compares none: the backbones of each side
    (``paper``: the backbone of ours each paper row stands for, '' for a model we do not train)."""
    ours = list(dict.fromkeys(b for b in ours if b))
    paper = list(dict.fromkeys(b for b in paper if b))
    if not paper:
        why = "The paper's rows here are models we do not train"
    elif not set(paper) & set(ours):
        why = f"The paper's rows are on {and_join(paper)}; ours are on {and_join(ours)}"
    else:
        why = f"The paper's rows on {and_join([b for b in paper if b in ours])} are other objectives than ours"
    return f"{why}: no row of ours is one of the paper's, so no Δ."


def _notes(table: Table, latex: bool) -> list[str]:
    k = table_kind(table.kind)
    notes = list(table.notes)
    compared = any(r.paper for r in table.rows)
    # Δ is defined only where a Δ line is printed: a table whose rows have no paper row (a preset on
    # another backbone) says why instead
    delta = "Δ = ours − paper (the line under the paper's); " if compared else ""
    if k.seeded:
        notes.insert(0, "Our rows: mean ± sample std over the seeds that exist (n = seed count); bold: best per backbone; "
                     + ("'paper' lines: the paper's number (± its std where printed); " if compared else "")
                     + delta
                     + ("italic rows: the paper's rows that are no row of ours (context only); " if table.references else "")
                     + "–: no result.")
        if table.rows and not compared and table.references:
            notes.insert(1, no_delta_reason([r.backbone for r in table.rows], [r.paper_backbone for r in table.references]))
    elif compared:
        notes.insert(0, delta.rstrip("; ") + ".")
    notes.extend(k.notes)
    if any(r.repro for r in table.rows):
        notes.append("'independent reproduction' lines: the reproduction report's number (its own code and recipe, "
                     "aoe/resources/paper_numbers.yaml reproduction_report) and Δ = ours − reproduction.")
    if not any(r.paper for r in table.rows) and not table.references and k.seeded:
        notes.append("No paper numbers for this table (none configured; paper_numbers.yaml lists what was not found in a readable source): no reference rows, no Δ.")
    if table.ttests:
        by_pair: dict[tuple[str, str, str], list[TTest]] = {}
        for t in table.ttests:
            by_pair.setdefault((t.backbone, t.treatment, t.baseline), []).append(t)
        headers = {c.key: c.header for c in table.columns} | {"pooled": "pooled"}
        parts = []
        for (backbone, treat, base), tests in by_pair.items():
            cells = "; ".join(f"{headers.get(t.column, t.column)} {t.text()}" for t in tests)
            parts.append(f"{backbone}: {treat} vs {base}: {cells}")
        notes.append("Paired t-test (scipy.stats.ttest_rel over matched seeds; 'pooled': over every (seed, dataset) pair; "
                     "the paper claims p < 0.05): " + " | ".join(parts) + ".")
    if table.missing:
        notes.append(f"Missing ({len(table.missing)}): " + "; ".join(table.missing) + ".")
    if latex:
        return [_escape(n) for n in notes]
    return notes


def to_latex(table: Table, caption: str | None = None, label: str | None = None) -> str:
    """A standalone-compilable LaTeX document holding the booktabs table and its notes."""
    cols = table.columns
    caption = table.caption if caption is None else caption
    label = label or table.name
    width = len(cols) + 1
    lines = [
        "\\documentclass{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{booktabs}",
        "\\usepackage[margin=1cm,landscape]{geometry}",
        "\\pagestyle{empty}",
        "\\begin{document}",
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        f"\\begin{{tabular}}{{l{'c' * len(cols)}}}",
        "\\toprule",
        "Model & " + " & ".join(_escape(c.header) for c in cols) + " \\\\",
        "\\midrule",
    ]
    for kind, cells, _ in _body(table, latex=True):
        if kind == "rule":
            lines.append("\\midrule")
        elif kind == "section":
            lines.append(f"\\multicolumn{{{width}}}{{l}}{{\\textit{{{cells[0]}}}}} \\\\")
        else:
            lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    notes = _notes(table, latex=True)
    if notes:
        lines.append("\\par\\smallskip")
        lines.append("\\parbox{0.95\\linewidth}{\\footnotesize " + " \\\\ ".join(notes) + "}")
    lines += [
        f"\\caption{{{_escape(caption)}}}",
        f"\\label{{tab:{label}}}",  # a name, not text: escaping its underscores breaks LaTeX's .aux file
        "\\end{table}",
        "\\end{document}",
        "",
    ]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(table: Table, caption: str | None = None) -> str:
    """The Markdown twin: the same rows, cells and notes as the LaTeX table."""
    caption = table.caption if caption is None else caption
    cols = table.columns
    lines = [f"### {table.name}", ""]
    if caption:
        lines += [caption, ""]
    lines += ["| Model | " + " | ".join(c.header for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for kind, cells, _ in _body(table, latex=False):
        if kind == "rule":
            continue
        if kind == "section":
            lines.append(f"| *{_md_cell(cells[0])}* |" + " |" * len(cols))
        else:
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    lines.append("")
    for note in _notes(table, latex=False):
        lines.append(f"- {note}")
    return "\n".join(lines).rstrip() + "\n"


def to_frame(table: Table) -> pd.DataFrame:
    """The CSV twin: one line per row (ours, then reference rows); per column mean, std, n, paper, paper_std, delta."""
    records = []
    for row in [*table.rows, *table.references]:
        rec: dict[str, Any] = {
            "section": row.section,
            "label": row.label,
            "backbone": row.backbone,
            "objective": row.objective,
            "trainset": row.variant if row.objective == PRETRAINED else ",".join(row.trainsets),
            "reference": row.reference,
            "n": math.nan if row.reference else row.n,
            "paper_ref": row.paper_ref or "",
        }
        for c in table.columns:
            k = c.key
            if row.reference:
                rec[f"{k}_mean"], rec[f"{k}_std"], rec[f"{k}_n"] = row.paper.get(k, math.nan), row.paper_std.get(k, math.nan), math.nan
            else:
                rec[f"{k}_mean"], rec[f"{k}_std"], rec[f"{k}_n"] = row.mean(k), row.std(k), row.count(k)
            rec[f"{k}_paper"] = row.paper.get(k, math.nan)
            rec[f"{k}_paper_std"] = row.paper_std.get(k, math.nan)
            rec[f"{k}_delta"] = math.nan if row.reference else row.delta(k)
            rec[f"{k}_reproduction"] = row.repro.get(k, math.nan)
            rec[f"{k}_reproduction_delta"] = math.nan if row.reference else row.repro_delta(k)
        records.append(rec)
    frame = pd.DataFrame(records)
    # no empty Δ columns: a table without a paper (reproduction) row under ours has nothing to subtract
    keys = [c.key for c in table.columns]
    drop = [f"{k}_delta" for k in keys] if not any(r.paper for r in table.rows) else []
    if not any(r.repro for r in table.rows):
        drop += [f"{k}_{suffix}" for k in keys for suffix in ("reproduction", "reproduction_delta")]
    return frame.drop(columns=[c for c in drop if c in frame.columns])


def to_json(table: Table) -> dict:
    """Everything the summary report needs: columns, rows (values per seed, paper, Δ), t-tests, notes."""
    rows = []
    for row in [*table.rows, *table.references]:
        rows.append(
            {
                "label": row.label,
                "section": row.section,
                "backbone": row.backbone,
                "objective": row.objective,
                "trainsets": row.trainsets,
                "eval_pooling": row.eval_pooling,  # "": the cells' own evaluation; else an evaluation-only variant row
                "reference": row.reference,
                "paper_backbone": row.paper_backbone,
                "paper_objective": row.paper_objective,
                "n": None if row.reference else row.n,
                "values": {c: {str(s): v for s, v in vals.items()} for c, vals in row.values.items()},
                "mean": {c.key: row.mean(c.key) for c in table.columns} if not row.reference else {},
                "std": {c.key: row.std(c.key) for c in table.columns} if not row.reference else {},
                "count": {c.key: row.count(c.key) for c in table.columns} if not row.reference else {},
                "paper_ref": row.paper_ref,
                "paper_label": row.paper_label,
                "paper": row.paper,
                "paper_std": row.paper_std,
                "delta": {c.key: row.delta(c.key) for c in table.columns} if not row.reference else {},
                "reproduction_ref": row.repro_ref,
                "reproduction_label": row.repro_label,
                "reproduction": row.repro,
                "reproduction_delta": {c.key: row.repro_delta(c.key) for c in table.columns if c.key in row.repro},
            }
        )
    return json_safe(
        {
            "name": table.name,
            "kind": table.kind,
            "caption": table.caption,
            "columns": [{"key": c.key, "header": c.header, "summary": c.summary} for c in table.columns],
            "rows": rows,
            "ttests": [t.__dict__ | {"text": t.text()} for t in table.ttests],
            "missing": table.missing,
            "notes": _notes(table, latex=False),
            "sources": table.sources,
        }
    )


def source_files(paths: list[str | Path]) -> list[dict]:
    """Each file a table read, in input order: its path as given, its sha256 and, for an evaluation
    result, the cell it scored (``model.cell``: backbone, objective, trainset, seed, eval_pooling), so
    that a row's number leads to its file in one hop (and the file to its model's aoe_config.json by
    ``model.aoe_config_sha256``). A model folder (train-time tables) stands for its aoe_config.json."""
    out = []
    for path in map(Path, paths):
        file = path / "aoe_config.json" if path.is_dir() else path
        entry: dict[str, Any] = {"path": str(file), "sha256": sha256_file(file)}
        if file.suffix == ".json":
            record = json.loads(file.read_text())
            cell = record.get("model", {}).get("cell") if isinstance(record.get("model"), dict) else record.get("cell")
            if isinstance(cell, dict):
                entry["cell"] = cell
        out.append(entry)
    return out


def render_table(name: str, spec: dict, inputs: list[str | Path], rows: list[dict] | None = None,
                 numbers_file: str | Path | None = None) -> Table:
    """The table a rule renders: its kind's loader on the inputs, then :func:`build_table` (or the GIS
    table), with the files it read (:func:`source_files`)."""
    kind = spec["kind"]
    if table_kind(kind).inputs == "gis_stats":
        stats = json.loads(Path(inputs[0]).read_text())
        table = build_gis_table(stats, spec, name, numbers_file)
    else:
        results = load_results(kind, inputs)
        table = build_table(results, spec, kind, numbers_file=numbers_file, rows=rows, name=name)
    table.sources = source_files(inputs)
    return table


def write_table(table: Table, tex: str | Path, csv_path: str | Path, md: str | Path, json_path: str | Path | None = None) -> None:
    Path(tex).write_text(to_latex(table))
    to_frame(table).to_csv(csv_path, index=False)
    Path(md).write_text(to_markdown(table))
    if json_path:
        Path(json_path).write_text(json.dumps(to_json(table), indent=2, ensure_ascii=False) + "\n")



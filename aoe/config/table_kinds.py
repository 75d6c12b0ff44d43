"""Table kinds: what a table's columns are, which result files its cells read and how one file becomes
values. One entry per kind in :data:`KINDS`; a new table kind is a new entry here (and its name in
the config schema's ``tables.*.kind`` enum, which a test compares with this registry).

Used by the workflow (:func:`aoe.config.workflow.table_inputs`: the files a table reads), by
:mod:`aoe.results.load` (loading), :mod:`aoe.results.tables` (building), :mod:`aoe.results.render` (rendering)
and by :mod:`aoe.publish.report`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from aoe.data.sts import STS_TASKS
from aoe.data.transfer import TRANSFER_TASKS
from aoe.util.jsonio import finite_or_none

__all__ = ["KINDS", "Column", "MTEB_CATEGORIES", "MTEB_HEADERS", "STS_HEADERS", "TRAINSET_HEADERS", "TableKind", "table_kind"]

MTEB_CATEGORIES = ["classification", "clustering", "pair_classification", "reranking", "retrieval", "sts", "summarization"]
MTEB_HEADERS = {
    "classification": "Class.",
    "clustering": "Clust.",
    "pair_classification": "PairClass.",
    "reranking": "Rerank.",
    "retrieval": "Retr.",
    "sts": "STS",
    "summarization": "Summ.",
}
TRAINSET_HEADERS = {"stsb": "STS-B", "gis": "GIS", "mrpc": "MRPC", "qqp": "QQP", "qnli": "QNLI", "nli": "NLI", "sickr": "SICK-R"}
STS_HEADERS = ["STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R"]


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    # the "avg" of a table: a summary of the dataset columns, not a dataset of its own
    summary: bool = False


Reader = Callable[[dict, Path], "dict[str, float | None]"]


@dataclass(frozen=True)
class TableKind:
    """One kind of table.

    ``suite``: the evaluation suite whose ``results/eval/{cell}/{suite}.json`` the cells read (None:
    the table reads something else, see ``inputs``). ``columns(spec, found)``: the columns, ``found``
    being the column keys present in the loaded results. ``read(result, path)``: one result file's
    values by column key (None: not measured, printed "–"). ``digits``: decimals per column.
    """

    name: str
    source: str  # the papers' table(s) it renders
    suite: str | None
    columns: Callable[[dict, "set[str]"], list[Column]]
    read: Reader | None = None
    # indomain: a column per train set, each cell's value from its own train set's file
    column_per_trainset: bool = False
    # results/... files the table reads instead of eval results (train_time, gis_stats)
    inputs: str = "eval"
    digits: Callable[[str], int] = lambda col: 2
    lower_is_better: frozenset[str] = frozenset()
    no_bold: frozenset[str] = frozenset()
    # rows are seeded trainings of (backbone, objective): mean ± std, bold, t-tests (gis_stats: one measurement)
    seeded: bool = True
    ttests: bool = True
    notes: tuple[str, ...] = field(default=())
    # indomain: one file's values under each gold of its by_gold ({gold: {column: value}}), which a row's
    # eval_gold reads (the file's own values are its headline gold's)
    read_gold: Callable[[dict, Path], "dict[str, dict[str, float | None]]"] | None = None
    # an objective comparison: its rows are judged by tables.<name>.comparison (aoe.results.studies.judge_comparison)
    # in place of the treatment-vs-baseline t-tests, and its caption names every setting their resolved recipes
    # differ in (aoe.config.measures.row_settings)
    compares_rows: bool = False


def _avg(cols: list[Column], header: str = "Avg.") -> list[Column]:
    return cols + [Column("avg", header, True)]


def _read_sts(result: dict, path: Path) -> dict:
    out = {t: finite_or_none((result["tasks"].get(t) or {}).get("spearman")) for t in STS_TASKS}
    out["avg"] = finite_or_none(result.get("avg"))
    return out


def _read_transfer(result: dict, path: Path) -> dict:
    out = {t: finite_or_none((result["tasks"].get(t) or {}).get("acc")) for t in TRANSFER_TASKS}
    out["avg"] = finite_or_none(result.get("avg"))
    return out


def _read_nli(result: dict, path: Path) -> dict:
    summary = result.get("summary") or {}
    out = {"MultiNLI": finite_or_none(summary.get("MultiNLI")), "SNLI": finite_or_none(summary.get("SNLI"))}
    out["avg"] = (out["MultiNLI"] + out["SNLI"]) / 2 if None not in (out["MultiNLI"], out["SNLI"]) else None
    return out


def _read_mteb(result: dict, path: Path) -> dict:
    out = {c: finite_or_none(v) for c, v in (result.get("categories") or {}).items()}
    out["avg"] = finite_or_none(result.get("avg"))
    return out


def _read_flickr(result: dict, path: Path) -> dict:
    out = {"strict_accuracy": finite_or_none(result.get("strict_accuracy"))}
    for k, v in (result.get("recall") or {}).items():
        out[f"R{k}" if k.startswith("@") else k] = finite_or_none(v)
    return out


def _read_indomain(result: dict, path: Path) -> dict:
    evalset = result.get("evalset") or re.fullmatch(r"indomain_(.+)\.json", path.name).group(1)
    return {evalset: finite_or_none(result.get("spearman"))}


def _read_indomain_gold(result: dict, path: Path) -> dict:
    """{gold: {evalset: Spearman}} of an in-domain file's ``by_gold`` ({} in a file written before it had one)."""
    evalset = next(iter(_read_indomain(result, path)))
    return {g: {evalset: finite_or_none((v or {}).get("spearman"))} for g, v in (result.get("by_gold") or {}).items()}


def _indomain_columns(spec: dict, found: set[str]) -> list[Column]:
    ts = list(spec.get("trainsets") or [spec["trainset"]])
    ts += [t for t in spec.get("paper_columns") or [] if t not in ts]  # the paper's, where this configuration trains none
    cols = [Column(t, TRAINSET_HEADERS.get(t, t)) for t in ts]
    return _avg(cols) if len(ts) > 1 else cols


def _evaluated_sts_columns(spec: dict, found: set[str]) -> list[Column]:
    """The STS tasks the rows were evaluated on (all seven where none is found yet) and, over all seven, their avg: an
    objective comparison tests each column, so a task the configuration does not evaluate is no column of "–" (its c
    would count it), and neither is the avg of a subset (the evaluation writes the seven tasks' avg only,
    aoe.evaluate.sts: presets/objectives-vs-cosent.yaml scores two)."""
    tasks = [(t, h) for t, h in zip(STS_TASKS, STS_HEADERS) if t in found] or list(zip(STS_TASKS, STS_HEADERS))
    columns = [Column(t, h) for t, h in tasks]
    return _avg(columns) if len(tasks) == len(STS_TASKS) else columns


def _mteb_columns(spec: dict, found: set[str]) -> list[Column]:
    cats = [c for c in MTEB_CATEGORIES if c in found] + sorted(found - set(MTEB_CATEGORIES) - {"avg"})
    return _avg([Column(c, MTEB_HEADERS.get(c, c)) for c in cats])


_TRAIN_TIME_COLUMNS = [
    Column("sec_per_epoch", "s / epoch"),
    Column("train_seconds", "train loop (s)"),
    Column("job_seconds", "job (s)"),
    Column("epochs", "epochs trained"),
]
_GIS_COUNTS = ("positive", "negative", "total")

KINDS: dict[str, TableKind] = {k.name: k for k in (
    TableKind("sts7", "AoE Table 1: 7 STS tasks + avg", "sts",
              lambda spec, found: _avg([Column(t, h) for t, h in zip(STS_TASKS, STS_HEADERS)]), _read_sts),
    TableKind("stsb", "STS-B test only", "sts", lambda spec, found: [Column("STSB", "STS-B test")], _read_sts),
    TableKind("ablation", "AoE Table 4: the 7-task STS avg per row, rows in sections (AnglE's ablation is kind indomain)",
              "sts", lambda spec, found: [Column("avg", "Avg. STS", True)], _read_sts),
    TableKind("indomain", "AoE Table 2 / AnglE Table 2: a column per train set, scored on its own eval split",
              "indomain", _indomain_columns, _read_indomain, column_per_trainset=True, read_gold=_read_indomain_gold),
    TableKind("transfer", "AoE Table 3: SentEval transfer tasks", "transfer",
              lambda spec, found: _avg([Column(t, t) for t in TRANSFER_TASKS]), _read_transfer),
    TableKind("nli_probe", "AoE Table 5", "nli_probe",
              lambda spec, found: _avg([Column("MultiNLI", "MultiNLI"), Column("SNLI", "SNLI")]), _read_nli),
    TableKind("mteb", "AoE §5 MTEB: per category + average", "mteb", _mteb_columns, _read_mteb),
    TableKind("flickr30k", "AnglE §4.5: strict accuracy", "flickr30k",
              lambda spec, found: [Column("strict_accuracy", "Strict acc."), Column("R@1", "R@1"),
                                   Column("R@4", "R@4"), Column("R@10", "R@10")], _read_flickr),
    TableKind("train_time", "AoE Appendix D: the training jobs' benchmark files", None,
              lambda spec, found: list(_TRAIN_TIME_COLUMNS), inputs="train_time",
              digits=lambda col: 3 if col == "epochs" else 1,
              lower_is_better=frozenset({"sec_per_epoch", "train_seconds", "job_seconds"}), no_bold=frozenset({"epochs"}),
              ttests=False,
              notes=("s / epoch = training-loop seconds (aoe_config.json summary) / epochs trained, epochs trained = "
                     "examples seen (steps x batch size) / train-set rows; job (s) = the Snakemake benchmark's wall "
                     "time of the whole training job.",)),
    TableKind("gis_stats", "AoE Table 7 (= arXiv-b/c Table 1): results/analysis/gis/stats.json", None,
              lambda spec, found: [], inputs="gis_stats", digits=lambda col: 0 if col in _GIS_COUNTS else 2,
              seeded=False, ttests=False),
    TableKind("objective_comparison", "AoE Table 1's order of two objectives (CoSENT, AoE) tested on our rows: the STS tasks "
              "evaluated + avg, a verdict per column", "sts", _evaluated_sts_columns, _read_sts, ttests=False, compares_rows=True),
)}


def table_kind(name: str) -> TableKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown table kind {name!r}; known: {', '.join(KINDS)}") from None

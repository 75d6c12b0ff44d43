"""Tables of both papers from result files: the table model and how a table is built. Tables never train or embed.

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
Δ only where a Δ line is printed; a table with no row of the paper's says why. A t-test
compares the treatment row (AoE / AnglE) with every other row of its backbone per column, over
seeds (paired where they match, else Welch's), none over reruns of one seed or a row not trained
(:data:`aoe.results.stats.TTEST_RULE`); the p-values go in a note under the table. Beside every Δ,
the gap a different seed alone makes (:meth:`Row.bound`, :data:`aoe.results.stats.FLAG_RULE`). A result that does not exist is printed as "–" and logged, never 0.

This module holds the model (:class:`Row`, :class:`TTest`, :class:`Table`), the paper's numbers
and how a table is built from the long results; :func:`render_table` loads and builds. Loading the
result files: :mod:`aoe.results.load`; LaTeX, Markdown, CSV and JSON and writing them: :mod:`aoe.results.render`.

Kinds (columns, the files a table reads, how one file becomes values): :data:`aoe.config.table_kinds.KINDS`.
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

from aoe.config.hparams import schema_default
from aoe.config.table_kinds import Column, table_kind
from aoe.config.cells import NO_TRAINSET, PRETRAINED, RELEASED, parse_run, run_name
from aoe.config.rows import OBJECTIVE_LABELS, row_label
from aoe.data.io import sha256_file
from aoe.evaluate.sts import TASKS
from aoe.results.likeness import FIELDS, Measure, UnlikeNumbers, differences, like_for_like, named_text
from aoe.results.load import load_results
from aoe.results.stats import Bound, compare_runs, delta_bound, p_text, paper_seeds_of
from aoe.results.studies import COMPARISON_RULE, STUDY_RULE, ComparedRow, StudyRow, StudyVerdict, judge_comparison, judge_study

__all__ = [
    "OBJECTIVE_LABELS",
    "Row",
    "TTest",
    "Table",
    "TTestPair",
    "build_gis_table",
    "build_table",
    "comparison_verdict",
    "draws_seed",
    "kind_columns",
    "load_paper_numbers",
    "paper_measure",
    "paper_side",
    "paper_reference",
    "render_table",
    "row_label",
    "row_paper_refs",
    "source_files",
    "spec_rows",
    "study_verdict",
    "treatment_row",
    "ttest_pairs",
    "ttests",
]

log = logging.getLogger(__name__)

# treatment objectives of the t-test, in order of preference (a table's `ttest.treatment` overrides)
TREATMENTS = ("aoe", "angle_arxiv")


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def kind_columns(kind: str, spec: dict, results: pd.DataFrame | None = None) -> list[Column]:
    """The columns of a table kind (mteb: the categories found in the results, in MTEB's order)."""
    found = set(results.column) if results is not None and not results.empty else set()
    return table_kind(kind).columns(spec, found)


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


def paper_measure(ref: str, numbers_file: str | Path | None = None) -> dict:
    """What a paper number was measured under, where paper_numbers.yaml says (its entry's ``measured``: ``"*"`` for
    every row, else the row's path after the entry key, e.g. ``AoE`` or ``table2/AoE-BERT (reproduction)``). Each field
    a string, but ``recipe``: the settings the source states, ``{train set: {setting: value}}``, which
    :func:`paper_side` lays over the row's own recipe (a source never states every setting of ours)."""
    parts = ref.split("/")
    entry = load_paper_numbers(numbers_file).get(parts[0])
    measured = (entry.get("measured") or {}) if isinstance(entry, dict) else {}
    out = {**(measured.get("*") or {}), **(measured.get("/".join(parts[1:])) or {})}
    unknown = set(out) - set(FIELDS)
    if unknown:
        raise KeyError(f"paper_numbers.yaml {parts[0]}.measured: unknown field(s) {', '.join(sorted(unknown))}; "
                       f"the fields are {', '.join(FIELDS)}")
    recipe = out.get("recipe")
    if recipe is not None and not (isinstance(recipe, dict) and all(isinstance(v, dict) for v in recipe.values())):
        raise KeyError(f"paper_numbers.yaml {parts[0]}.measured[{'/'.join(parts[1:])!r}].recipe: give the settings the "
                       "source states as {train set: {setting: value}} (aoe.config.measures.RECIPE_KEYS)")
    return {k: (v if k == "recipe" else str(v)) for k, v in out.items()}


def paper_side(ours: Measure, ref: str, numbers_file: str | Path | None = None) -> Measure:
    """The measure of paper number ``ref`` as set against a row of ours measured ``ours``: what paper_numbers.yaml
    records (:func:`paper_measure`), else what the row claims by setting itself against that number (its own field).
    A recorded recipe states some settings: the row's recipe with those replaced, so the gate names exactly the
    stated settings the row does not train (a row not trained by us, as downloaded or released, differs whole)."""
    recorded = paper_measure(ref, numbers_file)
    stated = recorded.pop("recipe", None)
    fields = {**ours.as_dict(), **recorded}
    if stated is not None:
        try:
            own = json.loads(ours.recipe)
        except ValueError:
            own = None
        if not isinstance(own, dict):
            own = {}
        for trainset, settings in stated.items():
            own[trainset] = {**(own.get(trainset) or {}), **settings}
        fields["recipe"] = json.dumps(own, sort_keys=True, default=str)
    return Measure.of(fields)


def _gate_paper(table: "Table", row: "Row", ref: str, numbers_file: str | Path | None) -> None:
    """Refuse a Δ between a row of ours and a paper number measured otherwise (:func:`aoe.results.likeness.like_for_like`):
    the paper side is :func:`paper_side`. A row built without its measure (a table by hand) is not gated."""
    if row.measure == Measure():
        return
    like_for_like(row.measure, paper_side(row.measure, ref, numbers_file), table.compare_across,
                  f"tables.{table.name}: {row.label} vs paper {ref}")


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
    # a reference row's group line, printed once above the rows sharing it: the paper's group (its backbone) and
    # the document, or the document alone (the independent reproduction report's rows sit under their own)
    heading: str = ""
    # the (backbone, objective) of ours a paper row stands for (the table's ``paper`` mapping or the row's
    # own key), also on reference rows: what a preset on another backbone compares by objective
    paper_backbone: str = ""
    paper_objective: str = ""
    repro_ref: str | None = None  # the independent reproduction's row, a second line under ours
    repro_label: str = ""
    repro: dict[str, float] = field(default_factory=dict)
    variant: str = NO_TRAINSET  # a pretrained row: its evaluation.pretrained_variants key ("none": the backbone's own)
    eval_pooling: str = ""  # an evaluation-only variant row: the pooling its cells were scored with ("": their own)
    eval_gold: str = ""  # an in-domain variant row: the gold its cells' files are read against ("": their own)
    # what its numbers are measured under (aoe.config.measures.row_measure): every t-test checks it (aoe.results.likeness)
    measure: Measure = field(default_factory=Measure)
    # an objective comparison's row: every resolved setting of its training (aoe.config.measures.row_settings); "": not recorded
    settings: str = ""

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

    def bound(self, col: str, seeded: bool = True) -> Bound | None:
        """The seed-spread bound beside this row's Δ in ``col`` (:func:`aoe.results.stats.delta_bound`); None for a row
        that draws no seed (:func:`draws_seed`) or without runs. ``seeded``: the table kind's (GIS split sizes are not)."""
        return delta_bound(self.values.get(col, {}), draws_seed(seeded, self.objective), paper_seeds_of(self.paper_ref))

    def repro_bound(self, col: str, seeded: bool = True) -> Bound | None:
        """The same bound beside Δ = ours − reproduction: the report's number is one run of its recipe (m = 1)."""
        return delta_bound(self.values.get(col, {}), draws_seed(seeded, self.objective), 1)


def draws_seed(seeded: bool, objective: str) -> bool:
    """Whether a row's numbers are draws of a seed: a trained row of a seeded table kind; a model as downloaded or a
    published checkpoint scores the same on any stack, and split sizes are no draw at all."""
    return seeded and objective not in (PRETRAINED, RELEASED)


@dataclass
class TTest:
    backbone: str
    treatment: str
    baseline: str
    column: str  # a column key
    n: int  # the treatment's runs (paired: the matched seeds)
    p: float | None
    statistic: float | None
    note: str = ""  # why there is no p-value
    test: str = ""  # aoe.results.stats.PAIRED or WELCH; '' where no test applies
    n_baseline: int = 0  # the baseline's runs (paired: the matched seeds again)
    named: str = ""  # the differences of measurement the table names for this pair (aoe.results.likeness.named_text)
    diff: float | None = None  # mean treatment − mean baseline (over the matched seeds where paired): which row is higher
    detectable: float | None = None  # the smallest gap the test's seeds could detect (aoe.results.stats.detectable_gap)

    def text(self) -> str:
        return p_text(self.test, self.p, self.n, self.n_baseline, self.note)


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
    study: dict | None = None  # a study table's verdict on the paper's claim (aoe.results.studies.judge_study)
    # {field: why}: the differences of measurement a comparison of its rows may have (tables.<name>.compare_across)
    compare_across: dict = field(default_factory=dict)


def spec_rows(spec: dict) -> list[dict]:
    """Row dicts from a table spec without a config (tests, ad-hoc use): seeds None = every seed found.

    The workflow passes ``aoe.config.workflow.table_rows(...)`` dicts instead, with seeds resolved.
    """
    from aoe.config.rows import row_entries

    out = []
    for e in row_entries(spec):
        out.append(
            {
                "backbone": e["backbone"],
                "objective": e["objective"],
                "trainsets": e["trainsets"],
                "seeds": list(e["seeds"]) if "seeds" in e else None,
                "reruns": int(e.get("reruns", schema_default("runs", "*", "reruns"))),
                "label": e.get("label"),
                "section": e.get("section", schema_default("tables", "*", "rows", "*", "section")),
                "variant": e.get("variant", NO_TRAINSET),
                "eval_pooling": e.get("eval_pooling") or "",
                "eval_gold": e.get("eval_gold") or "",
                # no config here: what the rows are measured under is not recorded (aoe.config.measures.measured_rows is)
                "measure": e.get("measure"),
                "settings": e.get("settings"),
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


def _paper_group_position(ref: str, numbers_file: str | Path | None) -> tuple[int, int, int]:
    """(the paper table, the group, the row) positions of a reference row, in the order the numbers file holds them
    (the paper's); a row the file does not list in order (a single number) goes after its table's rows."""
    numbers = load_paper_numbers(numbers_file)
    parts = ref.split("/")
    entry = numbers.get(parts[0])
    tables = list(numbers)
    container = (entry.get("groups") or entry.get("rows") or {}) if isinstance(entry, dict) else {}
    groups = list(container)
    grouped = len(parts) > 2 and parts[1] in groups and isinstance(container[parts[1]], dict)
    names = list(container[parts[1]]) if grouped else groups
    name = parts[2] if grouped else "/".join(parts[1:])
    return (tables.index(parts[0]) if parts[0] in numbers else len(tables),
            groups.index(parts[1]) if grouped else len(groups),
            names.index(name) if name in names else len(names))


def _reference_heading(ref: str, group: str, numbers_file: str | Path | None) -> str:
    """The line a reference row is printed under: the paper's group and its source ("the paper's BERT-base rows
    (Li & Li, AoE, ACL 2024, Table 1)"), or the entry's own ``heading`` (the independent reproduction report,
    which is not the paper), else its source ("Li & Li, AoE, ACL 2024, Table 2")."""
    entry = load_paper_numbers(numbers_file).get(ref.split("/")[0]) or {}
    source = entry.get("short") or str(entry.get("source", ref.split("/")[0])).split(":")[0]
    if entry.get("heading"):
        return str(entry["heading"])
    return f"the paper's {group} rows ({source})" if group else source


def _labels_groups(ref: str, numbers_file: str | Path | None) -> bool:
    """Whether the paper entry ``ref`` points into names the groups it prints its rows under (AoE Table 1's backbones)."""
    entry = load_paper_numbers(numbers_file).get(ref.split("/")[0])
    return isinstance(entry, dict) and bool(entry.get("group_labels"))


def paper_marks(refs: list[str], numbers_file: str | Path | None = None) -> list[str]:
    """The paper's explanations of its row marks (†, ⋆) for the tables ``refs`` point into: each entry's
    notes that begin "Marks:", with the table they explain."""
    numbers, out = load_paper_numbers(numbers_file), []
    for key in dict.fromkeys(r.split("/")[0] for r in refs if r):
        entry = numbers.get(key)
        if not isinstance(entry, dict):
            continue
        source = entry.get("short") or str(entry.get("source", key)).split(":")[0]
        out += [f"{source}: {n.removeprefix('Marks:').strip()}" for n in entry.get("notes") or [] if str(n).startswith("Marks:")]
    return out


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


def build_table(
    results: pd.DataFrame,
    spec: dict,
    kind: str | None = None,
    references: list[str] | None = None,
    numbers_file: str | Path | None = None,
    rows: list[dict] | None = None,
    name: str = "table",
    paper_rows: list[dict] | None = None,
) -> Table:
    """A table of a kind from the long results: one Row per row spec (mean/std/n per column),
    the paper's numbers on matched rows, the other references, and the t-tests.

    ``rows``: TableRow dicts (``aoe.config.workflow.table_rows``); default :func:`spec_rows`.
    ``references``: extra reference rows (default the spec's ``paper_reference``).
    ``numbers_file`` replaces the packaged paper_numbers.yaml.
    ``paper_rows``: the paper grid's rows of the paper for this table (:func:`aoe.config.workflow.grid_paper_rows`),
    ``{ref, backbone, objective}``: each one no row of ours takes is a reference row, so a preset whose ``rows:``
    replace the grid's still shows every paper row of the table.
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
    table = Table(name, kind, spec.get("caption", schema_default("tables", "*", "caption")), columns, [], [],
                  compare_across=dict(spec.get("compare_across") or {}))
    # the paper's columns no row of this configuration trains on (spec paper_columns): shown, not missing
    trained_sets = set(spec.get("trainsets") or [spec.get("trainset")])
    not_run = {t for t in spec.get("paper_columns") or [] if t not in trained_sets}
    if not_run:
        not_run.add("avg")
        table.notes.append(f"{', '.join(c.header for c in columns if c.key in not_run and c.key != 'avg')}: the paper's column, "
                           "no model of this configuration trains on it (–); the average of ours needs every column.")
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
            eval_gold=row_spec.get("eval_gold") or "",
            measure=Measure.of(row_spec.get("measure")),
            settings=row_spec.get("settings") or "",
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
        if "eval_gold" in sel.columns:  # an in-domain file's other golds (by_gold) are rows of their own
            sel = sel[sel.eval_gold.astype(object).fillna("") == row.eval_gold]
        elif row.eval_gold:
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
            if not row.values[col] and not (per_trainset and col in not_run):
                where = f"{row.backbone}/{row.objective}/{'none' if pre else ','.join(row.trainsets)}"
                msg = f"{where}{f' [{row.label}]' if row_spec.get('label') else ''} {col}"
                table.missing.append(msg)
                log.warning("missing result: %s (printed as –)", msg)
        if ref:
            _gate_paper(table, row, ref, numbers_file)
            row.paper_label, row.paper, row.paper_std = paper_reference(ref, numbers_file, col_keys)
            row.paper_backbone, row.paper_objective = row.backbone, row.objective
        if repro_ref:
            _gate_paper(table, row, repro_ref, numbers_file)
            row.repro_label, row.repro, _ = paper_reference(repro_ref, numbers_file, col_keys)
        table.rows.append(row)
    used = {ref for r in table.rows for ref in (r.paper_ref, r.repro_ref) if ref}
    extra = list(references if references is not None else spec.get("paper_reference", []))
    # mapping entries whose row is not in this table (e.g. a preset with other backbones)
    extra += _spec_refs(spec, "paper") + _spec_refs(spec, "reproduction")
    paper_of = _spec_paper_of(spec)
    for grid_row in paper_rows or []:
        extra.append(grid_row["ref"])
        paper_of.setdefault(grid_row["ref"], (grid_row.get("backbone") or "", grid_row.get("objective") or ""))
    seen = set()
    for ref in extra:
        if ref in used or ref in seen:
            continue
        seen.add(ref)
        label, values, stds = paper_reference(ref, numbers_file, col_keys)
        paper_backbone, paper_objective = paper_of.get(ref, ("", ""))
        # the group the paper prints the row under (its backbone): the rows are shown so grouped
        group = _paper_group(ref, numbers_file) if _labels_groups(ref, numbers_file) else ""
        table.references.append(
            Row(label=label, backbone="", objective="paper", trainsets=[], seeds=None, paper_ref=ref,
                section=group, heading=_reference_heading(ref, group, numbers_file),
                paper_label=label, paper=values, paper_std=stds, reference=True,
                paper_backbone=paper_backbone, paper_objective=paper_objective)
        )
    # a reference row measured under another protocol than ours (paper_numbers.yaml `measured`): why it has no Δ
    ours_protocols = list(dict.fromkeys(r.measure.protocol for r in table.rows if r.measure.protocol))
    for ref_row in table.references:
        theirs = paper_measure(ref_row.paper_ref, numbers_file).get("protocol")
        if theirs and ours_protocols and theirs not in ours_protocols:
            table.notes.append(f"{ref_row.label}: measured under {theirs}; ours under {', '.join(ours_protocols)}: "
                               "no row of ours is measured its way, so no Δ.")
    # the reference rows in the order the numbers file holds them (the paper's order of tables, groups and rows),
    # whichever list named them (paper_reference, a `paper` entry no row of ours takes, the grid's rows), so each
    # heading is printed once
    table.references.sort(key=lambda r: _paper_group_position(r.paper_ref, numbers_file))
    _tell_apart(table, numbers_file)
    marks = paper_marks([r.paper_ref for r in [*table.rows, *table.references]], numbers_file)
    if marks:
        table.notes.append("The paper's marks: " + "; ".join(marks))
    table.ttests = ttests(table, spec)
    if spec.get("study"):
        table.study = study_verdict(table, spec["study"]).as_dict()
        table.notes.append(f"{table.study['text']} Rule: {STUDY_RULE}.")
    if table_kind(kind).compares_rows:
        comparison_verdict(table, spec)
    if table.missing:
        log.warning("%s: %d missing cell(s) printed as –: %s", name, len(table.missing), "; ".join(table.missing))
    return table


def study_verdict(table: Table, study: dict) -> StudyVerdict:
    """The verdict on a study table's claim (``tables.<name>.study``) from its rows of ours, in one column:
    the study's ``column``, else the table's last (its summary: Avg. STS, or STS-B test). Its comparisons are t-tests
    between the rows, so the rows pass the gate first: a difference of measurement the table does not name
    (``compare_across``: the study's own subject, the batch or the pooling) raises
    :class:`aoe.results.likeness.UnlikeNumbers`, naming it and the fix."""
    col = study.get("column") or table.columns[-1].key
    for row in table.rows[1:]:
        like_for_like(table.rows[0].measure, row.measure, table.compare_across, f"tables.{table.name} (study): {table.rows[0].label} vs {row.label}")
    rows = [StudyRow(r.label, r.values.get(col, {})) for r in table.rows]
    return judge_study(rows, study, table_kind(table.kind).digits(col))


def _settings_differences(a: Row, b: Row) -> str:
    """Every resolved setting two rows' trainings differ in (:func:`aoe.results.likeness.differences` of their
    :attr:`Row.settings`), ``graded_labels "int" vs "score", ...``; "none" where they are one recipe."""
    if not a.settings or not b.settings:
        return "not recorded (a table built without its configuration)"
    return differences(Measure(recipe=a.settings), Measure(recipe=b.settings)).get("recipe") or "none"


def comparison_verdict(table: Table, spec: dict) -> StudyVerdict:
    """An objective comparison (``tables.<name>.comparison``, table kind ``objective_comparison``): its rows pass the
    gate (:func:`aoe.results.likeness.like_for_like`: measured alike, or as ``compare_across`` names), the caption gets
    every setting each pair of its rows differs in, and the table its verdict (:func:`aoe.results.studies.judge_comparison`)
    as a note and as ``table.study`` (with the rule, the paper's order and the rows' differences, which REPORT.md
    prints)."""
    comparison = spec.get("comparison")
    if not comparison:
        raise ValueError(f"tables.{table.name}: kind {table.kind} judges its rows by a comparison: give tables.{table.name}.comparison "
                         "(claim, source, higher, lower; separates optional), e.g. presets/objectives-vs-cosent.yaml")

    def row_of(key: str) -> Row | None:
        objective = comparison.get(key)
        if objective is None:
            return None
        found = [r for r in table.rows if r.objective == objective]
        if len(found) != 1:
            raise ValueError(f"tables.{table.name}.comparison.{key}: {objective!r} must be the objective of one row of the table "
                             f"(its rows' objectives: {', '.join(r.objective for r in table.rows)})")
        return found[0]

    higher, lower, separates = row_of("higher"), row_of("lower"), row_of("separates")
    compared = [r for r in (higher, separates, lower) if r is not None]
    pairs = list(zip(compared, compared[1:])) + ([(higher, lower)] if separates is not None else [])
    diffs = {}
    for a, b in pairs:
        like_for_like(a.measure, b.measure, table.compare_across, f"tables.{table.name} (comparison): {a.label} vs {b.label}")
        diffs[(a.label, b.label)] = _settings_differences(a, b)
    table.caption = (f"{table.caption} The rows' trainings differ in (every setting of their resolved recipes, the seed "
                     "aside): " + "; ".join(f"{a} vs {b}: {d}" for (a, b), d in diffs.items()) + ".").strip()
    digits = table_kind(table.kind).digits
    verdict = judge_comparison(
        ComparedRow(higher.label, higher.values), ComparedRow(lower.label, lower.values),
        [(c.key, c.header) for c in table.columns], comparison, digits,
        ComparedRow(separates.label, separates.values) if separates is not None else None, diffs)
    table.study = {**verdict.as_dict(), "title": "Objective comparison", "rule": COMPARISON_RULE,
                   "paper_order": [higher.label, lower.label], "source": comparison["source"],
                   "differences": [{"rows": [a, b], "settings": d} for (a, b), d in diffs.items()]}
    table.notes.append(f"{verdict.text} Rule: {COMPARISON_RULE}.")
    return verdict


# ---------------------------------------------------------------------------
# t-tests (aoe.results.stats.TTEST_RULE).


@dataclass(frozen=True)
class TTestPair:
    """Two rows of ours a table's t-test sets against each other: the treatment row chosen for the baseline,
    the differences of measurement the table names for them (printed beside each p), or why none is tested."""

    backbone: str
    treatment: Row
    baseline: Row
    named: dict = field(default_factory=dict)
    refused: str = ""  # "no test: ..." where no treatment row is measured as the baseline is


def treatment_row(rows: list[Row], treatment: str | None = None) -> Row | None:
    """The treatment of one backbone's rows: the row of ours set against the paper's AoE / AnglE (a trained row of
    ``treatment``, else of :data:`TREATMENTS`, with a paper line), else the first row of the first of those objectives
    among them (a table with no paper row, a preset)."""
    objectives = [treatment] if treatment else list(TREATMENTS)
    trained = [r for r in rows if r.objective in objectives]
    for objective in objectives:
        paper = next((r for r in trained if r.objective == objective and r.paper_ref), None)
        if paper is not None:
            return paper
    for objective in objectives:
        first = next((r for r in trained if r.objective == objective), None)
        if first is not None:
            return first
    return None


def ttest_pairs(rows: list[Row], spec: dict, name: str = "table") -> list[TTestPair]:
    """Per backbone, each baseline row (another objective than the treatment's) with the treatment row measured as it
    is (:mod:`aoe.results.likeness`): of the treatment (:func:`treatment_row`) and its variant rows (an in-domain row's
    other gold: its eval_gold row; another scoring pooling: its eval_pooling row) the one with the fewest differences,
    those the table names in ``compare_across`` allowed and printed beside each p; only where none of them is, another
    row of :data:`TREATMENTS` so measured (AoE's 2024 recipe beside the ablations that vary it); where no row is, the
    pair is refused, the difference named."""
    setting = spec.get("ttest") or {}
    allowed = spec.get("compare_across") or {}
    by_backbone: dict[str, list[Row]] = {}
    for r in rows:
        by_backbone.setdefault(r.backbone, []).append(r)
    out = []
    for backbone, group in by_backbone.items():
        primary = treatment_row(group, setting.get("treatment"))
        if primary is None:
            continue
        # first the treatment and its variant rows, then (only where none is measured as the baseline is) the other
        # treatment objective's rows: AoE's 2024 recipe beside the ablations that vary it
        tiers = [[primary, *(r for r in group if r is not primary and r.objective == primary.objective)],
                 [r for r in group if r.objective in TREATMENTS and r.objective != primary.objective]]
        done = set()
        for base in group:
            if base.objective == primary.objective or (base.objective, base.label) in done:
                continue
            done.add((base.objective, base.label))
            best, refusal = None, ""
            if base.objective in (PRETRAINED, RELEASED):
                # not trained: no seed to test over (compare_runs says so), so no measurement to match either
                out.append(TTestPair(backbone, primary, base))
                continue
            for candidates in tiers:
                for cand in candidates:
                    if cand.objective == base.objective:
                        continue
                    try:
                        named = like_for_like(cand.measure, base.measure, allowed, f"tables.{name}: {cand.label} vs {base.label}")
                    except UnlikeNumbers as err:
                        refusal = refusal or str(err)
                        continue
                    if best is None or len(named) < len(best[1]):
                        best = (cand, named)
                if best is not None:
                    break
            if best is None:
                why = refusal.split("measured otherwise ", 1)[-1].split("): ", 1)[0].lstrip("(")
                out.append(TTestPair(backbone, primary, base, refused=f"no test: measured otherwise ({why})"))
            else:
                out.append(TTestPair(backbone, best[0], base, best[1]))
    return out


def ttests(table: Table, spec: dict) -> list[TTest]:
    """Each pair of :func:`ttest_pairs` per column, by the test :func:`aoe.results.stats.compare_runs` allows for the
    two rows' runs; a pair measured otherwise is one line saying how. The treatment is the row set against the paper's
    AoE (``ttest.treatment``'s objective, else the first of :data:`TREATMENTS` with a paper line), per backbone.

    No test pooled over datasets: seven datasets scored by one model are not seven independent samples
    (a seed that trains well scores well on all of them), and a pooled p hid that STS12 got worse. The
    Avg. column's test, over each seed's average across the datasets, is the across-datasets test whose
    samples are independent."""
    if not table_kind(table.kind).ttests:
        return []
    setting = spec.get("ttest") or {}
    if setting.get("enabled", schema_default("tables", "*", "ttest", "enabled")) is False:
        return []
    out = []
    for pair in ttest_pairs(table.rows, spec, table.name):
        treat, base = pair.treatment, pair.baseline
        for col in [c.key for c in table.columns]:
            a, b = treat.values.get(col, {}), base.values.get(col, {})
            if not a or not b:  # a missing row is in the table's Missing note already
                continue
            if pair.refused:
                out.append(TTest(pair.backbone, treat.label, base.label, col, 0, None, None, pair.refused))
                continue
            c = compare_runs(a, b, treat.label, base.label, trained_b=base.objective not in (PRETRAINED, RELEASED))
            out.append(TTest(pair.backbone, treat.label, base.label, col, c.n_a, c.p, c.statistic, c.note, c.test, c.n_b,
                             named_text(pair.named), c.diff, c.detectable))
    return out


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
    table = Table(name, "gis_stats", spec.get("caption", schema_default("tables", "*", "caption")), columns, rows, [])
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
# A rule's table: its files loaded (aoe.results.load), then built.


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
                 numbers_file: str | Path | None = None, differences: list[str] | None = None,
                 selections: list[dict] | None = None, held_out: list[dict] | None = None,
                 protocol: str = "", paper_rows: list[dict] | None = None) -> Table:
    """The table a rule renders: its kind's loader on the inputs, then :func:`build_table` (or the GIS
    table), with the files it read (:func:`source_files`); ``differences``
    (:func:`aoe.config.workflow.protocol_differences`): a first note naming each way its rows are trained otherwise
    than the paper's; ``selections`` (:func:`aoe.config.workflow.scored_split_selections`): the rows whose models
    were chosen on a split the table scores, marked and named in a note; ``held_out`` (the same with
    ``held_out=True``): the rows chosen on a split the table does not score, named in a note; ``protocol``
    (:func:`aoe.config.workflow.training_summary`): what this configuration ran for the rows, after the caption;
    ``paper_rows`` (:func:`aoe.config.workflow.grid_paper_rows`): the paper's rows of the table, each shown."""
    kind = spec["kind"]
    if table_kind(kind).inputs == "gis_stats":
        stats = json.loads(Path(inputs[0]).read_text())
        table = build_gis_table(stats, spec, name, numbers_file)
    else:
        results = load_results(kind, inputs)
        table = build_table(results, spec, kind, numbers_file=numbers_file, rows=rows, name=name, paper_rows=paper_rows)
    table.sources = source_files(inputs)
    if protocol:
        table.caption = f"{table.caption} {protocol}".strip()
    if differences:
        table.notes.insert(0, "Not the paper's protocol, so a Δ measures the protocol too: " + "; ".join(differences) + ".")
    if selections:
        mark_scored_split_selections(table, selections)
    if held_out:
        note_held_out_selections(table, held_out)
    return table


def note_held_out_selections(table: Table, selections: list[dict]) -> None:
    """Say which rows of ours had their checkpoint chosen on a held-out split (select_checkpoint: best; e.g. SimCSE's
    recipe on STS-B dev): their numbers stay held-out estimates, so no mark, but the choice is part of their recipe."""
    named = [f"{row.backbone} {row.label} on {sel['split']}" for sel in selections for row in table.rows
             if not row.reference and (row.backbone, row.objective) == (sel["backbone"], sel["objective"])
             and sorted(row.trainsets) == sorted(sel["trainsets"])]
    if named:
        table.notes.append("Chosen on a held-out split: the checkpoint was the one with the best Spearman on a split "
                           "this table does not score (select_checkpoint: best), as its recipe chooses: " + "; ".join(named) + ".")


def mark_scored_split_selections(table: Table, selections: list[dict]) -> None:
    """Mark each row of ours that :func:`aoe.config.workflow.scored_split_selections` names (its label, so REPORT.md's
    lines carry it too) and say in a note where it was chosen: such a number is not a held-out estimate."""
    from aoe.config.checkpoint_selection import SCORED_SPLIT_MARK

    named = []
    for sel in selections:
        for row in table.rows:
            if (row.reference or (row.backbone, row.objective) != (sel["backbone"], sel["objective"])
                    or sorted(row.trainsets) != sorted(sel["trainsets"])):
                continue
            if not row.label.endswith(SCORED_SPLIT_MARK):
                row.label = f"{row.label} {SCORED_SPLIT_MARK}"
            named.append(f"{row.backbone} {row.label.removesuffix(' ' + SCORED_SPLIT_MARK)} on {sel['split']}")
    if named:
        table.notes.insert(0, f"{SCORED_SPLIT_MARK}: the checkpoint was chosen on a split this table scores (select_checkpoint: best), "
                              "as the official code chose for NLI-STS and QQP / QNLI, so the number is not a held-out estimate: "
                              + "; ".join(named) + ".")

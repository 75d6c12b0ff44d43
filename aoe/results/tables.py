"""Tables of both papers from result files: how a table is built. Tables never train or embed.

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
the gap a different seed alone makes (:meth:`aoe.results.table_model.Row.bound`, :data:`aoe.results.stats.FLAG_RULE`). A result that does not exist is printed as "–" and logged, never 0.

This module builds a table from the long results (:func:`build_table`, the GIS statistics: :func:`build_gis_table`)
and :func:`render_table` loads and builds the table a rule renders. The parts it puts together, each in its own module:
the model (:mod:`aoe.results.table_model`), the paper's numbers (:mod:`aoe.results.paper_numbers`), the t-tests
(:mod:`aoe.results.ttests`), a study's or an objective comparison's verdict (:mod:`aoe.results.verdicts`). Loading the
result files: :mod:`aoe.results.load`; LaTeX, Markdown, CSV and JSON and writing them: :mod:`aoe.results.render`.

Kinds (columns, the files a table reads, how one file becomes values): :data:`aoe.config.table_kinds.KINDS`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from aoe.config.hparams import schema_default
from aoe.config.table_kinds import Column, table_kind
from aoe.config.cells import NO_TRAINSET, PRETRAINED, parse_run, run_name
from aoe.config.rows import row_label
from aoe.data.io import sha256_file
from aoe.results.likeness import Measure, like_for_like
from aoe.results.load import load_results
from aoe.results.paper_numbers import (
    labels_groups,
    paper_group,
    paper_group_position,
    paper_marks,
    paper_measure,
    paper_reference,
    paper_side,
    reference_heading,
)
from aoe.results.studies import STUDY_RULE
from aoe.results.table_model import Row, Table
from aoe.results.ttests import ttests
from aoe.results.verdicts import comparison_verdict, study_verdict

__all__ = [
    "build_gis_table",
    "build_table",
    "kind_columns",
    "render_table",
    "row_paper_refs",
    "source_files",
    "spec_rows",
]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------
# Building a table.


def kind_columns(kind: str, spec: dict, results: pd.DataFrame | None = None) -> list[Column]:
    """The columns of a table kind (mteb: the categories found in the results, in MTEB's order)."""
    found = set(results.column) if results is not None and not results.empty else set()
    return table_kind(kind).columns(spec, found)


def _gate_paper(table: Table, row: Row, ref: str, numbers_file: str | Path | None) -> None:
    """Refuse a Δ between a row of ours and a paper number measured otherwise (:func:`aoe.results.likeness.like_for_like`):
    the paper side is :func:`aoe.results.paper_numbers.paper_side`. A row built without its measure (a table by hand) is not gated."""
    if row.measure == Measure():
        return
    like_for_like(row.measure, paper_side(row.measure, ref, numbers_file), table.compare_across,
                  f"tables.{table.name}: {row.label} vs paper {ref}")


def spec_rows(spec: dict) -> list[dict]:
    """Row dicts from a table spec without a config (tests, ad-hoc use): seeds None = every seed found.

    The workflow passes ``aoe.config.rows.table_rows(...)`` dicts instead, with seeds resolved.
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
        group = paper_group(ref, numbers_file) if len(refs_of[label]) > 1 else ""
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

    ``rows``: TableRow dicts (``aoe.config.rows.table_rows``); default :func:`spec_rows`.
    ``references``: extra reference rows (default the spec's ``paper_reference``).
    ``numbers_file`` replaces the packaged paper_numbers.yaml.
    ``paper_rows``: the paper grid's rows of the paper for this table (:func:`aoe.config.rows.grid_paper_rows`),
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
        group = paper_group(ref, numbers_file) if labels_groups(ref, numbers_file) else ""
        table.references.append(
            Row(label=label, backbone="", objective="paper", trainsets=[], seeds=None, paper_ref=ref,
                section=group, heading=reference_heading(ref, group, numbers_file),
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
    table.references.sort(key=lambda r: paper_group_position(r.paper_ref, numbers_file))
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
    (:func:`aoe.config.captions.protocol_differences`): a first note naming each way its rows are trained otherwise
    than the paper's; ``selections`` (:func:`aoe.config.checkpoint_selection.scored_split_selections`): the rows whose models
    were chosen on a split the table scores, marked and named in a note; ``held_out`` (the same with
    ``held_out=True``): the rows chosen on a split the table does not score, named in a note; ``protocol``
    (:func:`aoe.config.captions.training_summary`): what this configuration ran for the rows, after the caption;
    ``paper_rows`` (:func:`aoe.config.rows.grid_paper_rows`): the paper's rows of the table, each shown."""
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
    """Mark each row of ours that :func:`aoe.config.checkpoint_selection.scored_split_selections` names (its label, so REPORT.md's
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


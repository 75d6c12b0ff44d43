"""results/REPORT.md: every reproduced number next to the paper's, from the tables' JSON twins.

One section per table (``aoe.results.render.to_json`` output): our rows as the table prints them (mean ± std,
what the runs are: seeds or reruns of one seed); then only the numbers the paper prints for a row of ours, each
with the paper's number, Δ = ours − paper and beside it the gap a different seed alone makes, ⚠ outside it
(:data:`aoe.results.stats.FLAG_RULE`, the one sentence the header, the tables and the HTML captions quote); where
none of our rows is one of the paper's, why (a preset on another backbone), and no paper column at all; each
trained row's gain over its backbone as downloaded, and the order of a backbone's objectives beside the paper's
order of the same objectives (what a run on another backbone can still check); then the table's paper rows
with no counterpart among ours, one line each in the table's columns, so every paper number a table
shows is in the report; the t-tests over seeds (:data:`aoe.results.stats.TTEST_RULE`). Each row links to its
cell's recipe in results/RECIPE.md (``aoe.config.hparams.recipe_anchor``). The header
records the config files (preset) and the git commit that produced the numbers; each table names the
config files that define or override it.
The gains the papers claim in their prose (:mod:`aoe.publish.claims`) and the numbers they quote
(:mod:`aoe.publish.quoted`) follow; figures' JSON numbers (results/figures/*.json) are listed when present. What each
table's rows compare besides the paper (gains, orderings) is :mod:`aoe.publish.gains`; the HTML pages of Snakemake's
report, :mod:`aoe.publish.pages`. Reads files only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from aoe.config.hparams import YAML_LOADER, recipe_anchor
from aoe.config.table_kinds import table_kind
from aoe.config.cells import PRETRAINED, RELEASED
from aoe.config.checkpoint_selection import SCORED_SPLIT_MARK
from aoe.plan.ledger import md_cell
from aoe.publish.cells import fmt, has_result, ours_rows, paper_cell
from aoe.publish.claims import claims_section
from aoe.publish.gains import gain_lines, ordering_lines
from aoe.publish.quoted import quoted_section
from aoe.results.render import and_join, no_delta_reason
from aoe.results.stats import (ALPHA, FLAG, FLAG_RULE, FLAG_TEST, NOT_TESTED, SPREAD_PAPER, SPREAD_RERUNS, TTEST_RULE, delta_bound,
                               delta_text, flag_of, paper_seeds_of, seed_means)
from aoe.results.studies import STUDY_RULE
from aoe.results.table_model import draws_seed
from aoe.util.jsonio import finite_or_none

__all__ = ["build_report", "figure_section", "git_commit", "table_section", "table_sources"]


def _cell_trainset(row: dict, key: str) -> str | None:
    """The train set of a row's cell under column ``key``: the row's only one, else (in-domain tables,
    one column per train set) the column's; None for an average over several, pretrained, released
    (a published checkpoint: no recipe of ours), paper or GIS rows."""
    trainsets = row.get("trainsets") or []
    if row.get("reference") or row.get("objective") in (None, "", PRETRAINED, RELEASED) or not row.get("backbone"):
        return None
    if len(trainsets) == 1:
        return trainsets[0]
    return key if key in trainsets else None


def git_commit(repo: str | Path) -> str:
    """The repository's HEAD commit (with '+dirty' when tracked files changed), or 'unknown'
    (:func:`aoe.util.provenance.git_commit`, which a model's versions.json records too)."""
    from aoe.util.provenance import git_commit as commit

    return commit(repo) or "unknown"


def table_sources(configfiles: list[str | Path]) -> dict[str, list[str]]:
    """Table name -> the config files that set it (in the order given: later ones override earlier)."""
    out: dict[str, list[str]] = {}
    for path in configfiles:
        try:
            data = yaml.load(Path(path).read_text(), Loader=YAML_LOADER) or {}
        except (OSError, yaml.YAMLError):
            continue
        for name in (data.get("tables") or {}):
            out.setdefault(name, []).append(str(path))
    return out


# a table's counts: numbers of ours, compared with the paper (Δ), flagged, compared but without a bound (not trained),
# compared with a bound from the paper's seed spread for want of two seeds of ours, paper numbers listed, lines set
# against the paper (with or without a result of ours yet); and what else the rows compare: gain lines over the
# backbone as downloaded, orderings, t-tests with a p
_COUNTS = ("ours", "compared", "flagged", "not_tested", "paper_spread", "paper", "against", "gains", "orderings", "tests")


def _runs_text(values: dict, trained: bool, seeded: bool = True) -> str:
    """What a row's numbers are draws of: "2 seeds", "5 reruns of seed 42", "1 run"; a model not trained: "no seed";
    a table kind that draws nothing (GIS split sizes): "1 measurement"."""
    if not seeded:
        return "1 measurement"
    if not trained:
        return "no seed"
    runs = [r for r, v in values.items() if finite_or_none(v) is not None]
    means = seed_means(values)
    if len(means) >= 2:
        return f"{len(means)} seeds" + (f" ({len(runs)} runs)" if len(runs) != len(means) else "")
    if len(runs) > 1:
        return f"{len(runs)} {SPREAD_RERUNS.replace('one seed', f'seed {next(iter(means))}')}"
    return "1 run" if runs else "–"


def _row_name(row: dict, kind) -> str:
    label = f"{row['backbone']} {row['label']}" if kind.seeded else row["label"]
    return f"{row['section']}: {label}" if row.get("section") else label


def _linked(row: dict, key: str, label: str) -> str:
    """A row's cell, linked to its cell's recipe in RECIPE.md where it has one (a trained row, one train set)."""
    row_cell = md_cell(label)
    trainset = _cell_trainset(row, key)
    if not trainset:
        return row_cell
    text = row_cell.replace("[", "\\[").replace("]", "\\]")
    return f"[{text}](RECIPE.md#{recipe_anchor(row['backbone'], row['objective'], trainset)})"


def table_section(table: dict, sources: list[str] | None = None) -> tuple[str, dict[str, int]]:
    """The Markdown section of one table and its counts (:data:`_COUNTS`): our rows as the table prints them, then
    only the numbers that have the paper's beside them (Δ with its seed-spread bound), and what else the table's rows
    can be compared with (the gain over the backbone as downloaded, the order of the objectives, the t-tests)."""
    name = table["name"]
    lines = [f"## {name}", ""]
    if table.get("caption"):
        lines += [f"{table['caption']}", ""]
    lines.append(f"- Kind: `{table['kind']}`; config: {', '.join(f'`{s}`' for s in sources) if sources else 'defaults'}.")
    # a row chosen on a split the table scores carries the mark in its label: its line here says why
    lines += [f"- {note}" for note in table.get("notes", []) if note.startswith(f"{SCORED_SPLIT_MARK}: ")]
    headers = {c["key"]: c["header"] for c in table["columns"]}
    counts = dict.fromkeys(_COUNTS, 0)
    kind = table_kind(table["kind"])  # decimals per column as in the table itself (GIS split sizes: none)
    ours_body, compared_body = [], []
    for row in ours_rows(table):
        trained = draws_seed(kind.seeded, row.get("objective"))
        label = _row_name(row, kind)
        # one recipe for the whole row: its name links to it; an in-domain row (a train set a column): each cell to its own
        whole = len(row.get("trainsets") or []) == 1 and _cell_trainset(row, table["columns"][0]["key"]) is not None
        cells, linked, runs = [], [], None
        for col in table["columns"]:
            key = col["key"]
            digits = kind.digits(key)
            mean, std = finite_or_none(row["mean"].get(key)), finite_or_none(row["std"].get(key))
            values = (row.get("values") or {}).get(key) or {}
            counts["ours"] += mean is not None
            cells.append(fmt(mean, digits) + (f" ± {fmt(std, digits)}" if std is not None else ""))
            linked.append(cells[-1] if whole or mean is None or not _cell_trainset(row, key) else _linked(row, key, cells[-1]))
            if mean is not None and runs is None:
                runs = _runs_text(values, trained, kind.seeded)
            paper = finite_or_none((row.get("paper") or {}).get(key))
            if paper is None:
                continue
            counts["paper"] += 1
            delta = finite_or_none(row["delta"].get(key))
            bound = delta_bound(values, trained, paper_seeds_of(row.get("paper_ref"))) if delta is not None else None
            sigma_text = "–"
            counts["against"] += 1
            if delta is not None:
                counts["compared"] += 1
                counts["flagged"] += flag_of(delta, bound) == FLAG
                counts["not_tested"] += bound is None
                counts["paper_spread"] += bound is not None and bound.fallback
                if bound is not None:
                    sigma_text = f"{fmt(bound.sigma, digits)} ({bound.source})"
                else:
                    sigma_text = NOT_TESTED if kind.seeded else "one measurement: no draw"
            compared_body.append(
                f"| {_linked(row, key, label)} | {md_cell(headers.get(key, key))} | {cells[-1] if mean is not None else '–'} | "
                f"{_runs_text(values, trained, kind.seeded) if mean is not None else '–'} | "
                f"{paper_cell(paper, finite_or_none((row.get('paper_std') or {}).get(key)), digits)} | "
                f"{delta_text(delta, bound, digits)} | {sigma_text} |"
            )
        if any(c != "–" for c in cells):
            name = _linked(row, table["columns"][0]["key"], label) if whole else md_cell(label)
            ours_body.append((name, runs or "–", linked))
    # the columns with a number of ours (a preset that trains no GIS model has no GIS column here; the table has it)
    shown = [i for i in range(len(table["columns"])) if any(cells[i] != "–" for _, _, cells in ours_body)]
    if ours_body:
        lines += ["", "| Row | Runs | " + " | ".join(md_cell(table["columns"][i]["header"]) for i in shown) + " |",
                  "|---" * (len(shown) + 2) + "|",
                  *(f"| {name} | {runs} | " + " | ".join(cells[i] for i in shown) + " |" for name, runs, cells in ours_body)]
    else:
        lines += ["", "No result of ours yet."]
    if compared_body:
        lines += [
            "",
            "Against the paper (Δ (±b) by the header's rule: (±b) from our seeds, [±b] from AoE Table 4's σ; ⚠ outside it):",
            "",
            "| Row | Column | Ours (mean ± std) | Runs | Paper (± std) | Δ | Seed σ (from) |",
            "|---|---|---|---|---|---|---|",
            *compared_body,
        ]
    repro_body = []
    for row in ours_rows(table):
        trained = draws_seed(kind.seeded, row.get("objective"))
        for col in table["columns"]:
            key = col["key"]
            repro = finite_or_none((row.get("reproduction") or {}).get(key))
            if repro is None:
                continue
            counts["paper"] += 1
            digits = kind.digits(key)
            mean, std = finite_or_none(row["mean"].get(key)), finite_or_none(row["std"].get(key))
            delta = finite_or_none((row.get("reproduction_delta") or {}).get(key))
            values = (row.get("values") or {}).get(key) or {}
            bound = delta_bound(values, trained, 1) if delta is not None else None
            repro_body.append(
                f"| {md_cell(row['backbone'] + ' ' + row['label'])} | {md_cell(headers.get(key, key))} | "
                f"{fmt(mean, digits) + (f' ± {fmt(std, digits)}' if std is not None else '')} | "
                f"{paper_cell(repro, None, digits)} | {delta_text(delta, bound, digits)} | {md_cell(row['reproduction_label'])} |"
            )
    if repro_body:
        lines += [
            "",
            "Our rows beside the independent reproduction report (its own code and recipe, one run of it: m = 1):",
            "",
            "| Row | Column | Ours (mean ± std) | Reproduction | Δ | Source |",
            "|---|---|---|---|---|---|",
            *repro_body,
        ]
    why = _why_no_delta(table, counts)
    if why:
        lines += ["", why[1]]
    if kind.seeded:
        gains, orderings = gain_lines(table, kind), ordering_lines(table, kind)
        counts["gains"], counts["orderings"] = bool(gains), bool(orderings)
        lines += gains + orderings
    counts["tests"] = sum(t.get("p") is not None for t in table.get("ttests", []))
    if table.get("study"):  # a study table or an objective comparison: whether our rows support the paper's claim (aoe.results.studies)
        study = table["study"]
        lines += ["", f"**{study.get('title', 'Study')}, {study['status']}.** {md_cell(study['text'])} Rule: {study.get('rule', STUDY_RULE)}."]
    # one line per paper row, in the table's columns, as the table itself prints them
    ref_body = []
    for r in (r for r in table["rows"] if r.get("reference")):
        cells = []
        for col in table["columns"]:
            key = col["key"]
            paper = finite_or_none((r.get("paper") or {}).get(key))
            counts["paper"] += paper is not None
            cells.append(paper_cell(paper, finite_or_none((r.get("paper_std") or {}).get(key)), kind.digits(key)))
        if any(c != "–" for c in cells):
            ref_body.append(f"| {md_cell(r['label'])} | " + " | ".join(cells) + " |")
    if ref_body:
        lines += [
            "",
            "Paper rows with no counterpart among ours (context only):",
            "",
            "| Paper row | " + " | ".join(md_cell(c["header"]) for c in table["columns"]) + " |",
            "|---" * (len(table["columns"]) + 1) + "|",
            *ref_body,
        ]
    lines += _ttest_lines(table, headers)
    if table.get("missing"):
        lines += ["", f"Missing cells ({len(table['missing'])}, printed as –): " + "; ".join(md_cell(m) for m in table["missing"]) + "."]
    lines.append("")
    return "\n".join(lines), counts


def _ttest_lines(table: dict, headers: dict[str, str]) -> list[str]:
    """The table's t-tests (:data:`TTEST_RULE`), one line per pair of rows and column; a pair no column can test
    (a row not trained, one seed, reruns of one seed) is one line saying why."""
    by_pair: dict[tuple[str, str, str], list[dict]] = {}
    for t in table.get("ttests", []):
        by_pair.setdefault((t["backbone"], t["treatment"], t["baseline"]), []).append(t)
    if by_pair and all(t.get("p") is None for tests in by_pair.values() for t in tests):
        # no pair of rows could be tested (the CPU demo: one trained row against the backbone as downloaded): why, once
        reasons = list(dict.fromkeys(t["text"].removeprefix("no test: ") for tests in by_pair.values() for t in tests))
        return ["", f"No t-test between this table's rows: {md_cell('; '.join(reasons))}."]
    out = []
    for (backbone, treat, base), tests in by_pair.items():
        # the differences of measurement the table names for the pair (tables.<name>.compare_across), said once
        named = next((t["named"] for t in tests if t.get("named")), "")
        if named:
            out.append(f"- {md_cell(backbone)}: {md_cell(treat)} vs {md_cell(base)}: {md_cell(named)}")
        if all(t.get("p") is None for t in tests) and len({t["text"] for t in tests}) == 1:
            out.append(f"- {md_cell(backbone)}: {md_cell(treat)} vs {md_cell(base)}: {md_cell(tests[0]['text'])} (every column)")
            continue
        # a pair is tested in each of its c columns: a column's gap is called at ALPHA/c (Bonferroni), so that reading the
        # pair's columns one by one is no more often a false alarm than ALPHA (issue 70: seven columns at 1 degree of
        # freedom printed "(p < 0.05)" each)
        c = sum(t.get("p") is not None for t in tests)
        level = f"{ALPHA:g}/{c}" if c > 1 else f"{ALPHA:g}"
        for t in tests:
            sig = ""
            if t.get("p") is not None:
                detectable = finite_or_none(t.get("detectable"))
                sig = (f" (p < {level})" if t["p"] < ALPHA / max(c, 1) else
                       f" (not significant at {level}" + (f"; detectable: {detectable:.2f}" if detectable is not None else "") + ")")
            diff = finite_or_none(t.get("diff"))
            if diff is not None and t.get("p") is not None:
                sig += f"; {md_cell(treat)} − {md_cell(base)} = {diff:+.2f}, {md_cell(treat if diff > 0 else base)} higher"
            out.append(f"- {md_cell(backbone)}: {md_cell(treat)} vs {md_cell(base)}, {md_cell(headers.get(t['column'], t['column']))}: "
                       f"{md_cell(t['text'])}{sig}")
    return ["", f"{TTEST_RULE}; a column's p is called at {ALPHA:g}/c, Bonferroni over the c columns its pair is tested in, "
                f"and beside it the difference and the row that is higher:", "", *out] if out else []


def _why_no_delta(table: dict, counts: dict[str, int]) -> tuple[str, str] | None:
    """(kind, sentence) where a table of ours compares nothing with the paper: ``none`` (no paper rows
    at all), ``missing`` (our rows with a paper row have no result), ``backbone`` (the paper's rows are on
    other backbones than ours: a preset with another model) or ``objective``; None where it compares."""
    if counts["compared"] or not table_kind(table["kind"]).seeded:
        return None
    ours = ours_rows(table)
    if not any(r.get("paper") for r in table["rows"]):
        return "none", "No paper numbers matched to our rows (see aoe/resources/paper_numbers.yaml, `missing`)."
    if not counts["ours"]:
        return None  # "No result of ours yet." says it
    matched = [r for r in ours if r.get("paper")]
    if matched:
        names = ", ".join(md_cell(f"{r['backbone']} {r['label']}") for r in matched)
        return "missing", f"Our rows with a paper row ({names}) have no result in its columns yet, so no Δ."
    backbones = [r["backbone"] for r in ours if has_result(r)]
    paper = [r.get("paper_backbone") or "" for r in table["rows"] if r.get("reference")]
    kind = "backbone" if any(paper) and not set(paper) & set(backbones) else "objective"
    return kind, no_delta_reason(backbones, paper)


def _scalars(obj: Any, prefix: str = "", depth: int = 0, out: list | None = None, limit: int = 40) -> list[tuple[str, Any]]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(obj, dict):
        if depth >= 4:
            return out
        for k, v in obj.items():
            _scalars(v, f"{prefix}.{k}" if prefix else str(k), depth + 1, out, limit)
    elif isinstance(obj, bool) or obj is None:
        pass
    elif isinstance(obj, (int, float)):
        out.append((prefix, obj))
    return out


def figure_section(figure_files: list[str | Path] | None) -> str:
    """The numbers of the figures' JSON files (scalars up to 4 levels deep; lists skipped)."""
    files = sorted(Path(f) for f in figure_files or [])
    if not files:
        return ""
    lines = ["## Figures (numbers from their JSON files)", ""]
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            lines.append(f"- `{path.name}`: unreadable ({err.__class__.__name__})")
            continue
        scalars = _scalars(data)
        lines.append(f"### {path.stem}")
        lines.append("")
        if not scalars:
            lines.append("(no scalar numbers)")
        for key, value in scalars:
            lines.append(f"- `{key}`: {value:.4g}" if isinstance(value, float) else f"- `{key}`: {value}")
        lines.append("")
    return "\n".join(lines)


def _names_config(configfiles: list[str]) -> dict:
    """The config sections that name models (backbones, trainsets), later files overriding earlier ones by entry."""
    out: dict = {"backbones": {}, "trainsets": {}}
    for path in configfiles:
        try:
            cfg = yaml.load(Path(path).read_text(), Loader=YAML_LOADER) or {}
        except (OSError, yaml.YAMLError):
            continue
        for section in out:
            for name, spec in (cfg.get(section) or {}).items():
                out[section][name] = {**out[section].get(name, {}), **(spec or {})}
    return out


def build_report(
    table_files: list[str | Path],
    configfiles: list[str | Path] | None = None,
    commit: str | None = None,
    figure_files: list[str | Path] | None = None,
    analysis_files: list[str | Path] | None = None,
) -> str:
    """The whole REPORT.md text."""
    configfiles = [str(c) for c in configfiles or []]
    sources = table_sources(configfiles)
    tables = [json.loads(Path(p).read_text()) for p in table_files]
    sections, total = [], dict.fromkeys(_COUNTS, 0)
    flagged_rows = []
    whys = []
    for t in tables:
        text, counts = table_section(t, sources.get(t["name"]))
        sections.append(text)
        for k in total:
            total[k] += counts[k]
        if counts["flagged"]:
            flagged_rows.append(f"{t['name']} ({counts['flagged']})")
        if counts["ours"] and not counts["compared"]:
            whys.append((_why_no_delta(t, counts) or ("", ""))[0])
    claims = claims_section(tables)
    lines = ["# Reproduction report: AoE (ACL 2024) and AnglE (arXiv 2309.12871)", ""]
    ours_text = ("Ours: mean ± sample std over our runs (Runs: how many seeds, or reruns of one seed, AoE Table 4's "
                 "fixed-seed protocol); –: no result (never 0).")
    if total["against"] or claims:
        lines += [f"Every number this run made, and beside each of ours that is a row the paper prints, the paper's. {ours_text} "
                  f"{FLAG_RULE}.", ""]
    else:
        # nothing to set against the paper (a preset on another backbone): say why once, and what the run can be compared
        # with, instead of a column of "–" per number and a bare "compared with the paper: 0"
        if whys and all(w == "backbone" for w in whys):
            ours = [r["backbone"] for t in tables for r in ours_rows(t) if has_result(r)]
            why = f"no row the paper prints uses {and_join(list(dict.fromkeys(ours)))}"
        else:
            why = "no row of ours is one the paper prints (each table says why)"
        can = [what for what, n in (("each trained row against its backbone as downloaded (the gain)", total["gains"]),
                                    ("the order of its objectives beside the paper's order of the same objectives", total["orderings"]),
                                    ("t-tests between its rows over seeds", total["tests"])) if n]
        lines += [f"Every number this run made. None is set against the paper's: {why}, so no Δ."
                  + (f" What it can be compared with: {and_join(can)}." if can else "") + f" {ours_text}", ""]
    lines += [
        f"- Config files (later ones override earlier, i.e. the preset): {', '.join(f'`{c}`' for c in configfiles) or 'unknown'}",
        f"- Git commit: `{commit or 'unknown'}`",
    ]
    if total["compared"]:
        lines.append(
            f"- Tables: {len(tables)}; numbers of ours: {total['ours']}; set against the paper: {total['compared']}, of which "
            f"flagged {FLAG} ({FLAG_TEST}): {total['flagged']}{' (' + ', '.join(flagged_rows) + ')' if flagged_rows else ''}, "
            f"bounded by {SPREAD_PAPER}'s σ for want of two seeds of ours ([±b]): {total['paper_spread']}, "
            f"without a bound (a row not trained, or a measurement no seed draws): {total['not_tested']}; "
            f"paper numbers listed: {total['paper']}."
        )
    else:
        lines.append(f"- Tables: {len(tables)}; numbers of ours: {total['ours']}; the paper's numbers listed for context: {total['paper']}.")
    lines.append("")
    lines += sections
    if claims:
        lines.append(claims)
    quoted = quoted_section([*(analysis_files or []), *(figure_files or [])], config=_names_config(configfiles))
    if quoted:
        lines.append(quoted)
    figures = figure_section(figure_files)
    if figures:
        lines.append(figures)
    return "\n".join(lines).rstrip() + "\n"


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
The gains the papers claim in their prose between two of their rows are set beside the same
difference of our rows (:data:`CLAIMS`). Figures' JSON numbers (results/figures/*.json) are listed when
present. Reads files only.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from aoe.config.hparams import recipe_anchor
from aoe.config.table_kinds import table_kind
from aoe.config.workflow import SCORED_SPLIT_MARK
from aoe.config.workflow import PRETRAINED, RELEASED
from aoe.plan.ledger import md_cell
from aoe.results.likeness import Measure, UnlikeNumbers, like_for_like, named_text
from aoe.results.render import and_join, no_delta_reason, paper_digits
from aoe.results.stats import (ALPHA, FLAG, FLAG_RULE, FLAG_TEST, NOT_TESTED, SPREAD_PAPER, SPREAD_RERUNS, TTEST_RULE, delta_bound,
                               delta_text, flag_of, gain_bound, paper_seeds_of, seed_means)
from aoe.results.studies import STUDY_RULE
from aoe.results.tables import OBJECTIVE_LABELS, draws_seed, paper_reference
from aoe.util.jsonio import finite_or_none

__all__ = ["CLAIMS", "build_report", "claims_section", "figure_section", "git_commit", "table_section", "table_sources"]

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
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        for name in (data.get("tables") or {}):
            out.setdefault(name, []).append(str(path))
    return out


def _fmt(x: float | None, digits: int = 2) -> str:
    x = finite_or_none(x)
    return "–" if x is None else f"{x:.{digits}f}"


def _fmt_paper(x: float | None, digits: int = 2) -> str:
    """A paper's number with at least as many decimals as the paper printed (61.646 stays 61.646)."""
    x = finite_or_none(x)
    return "–" if x is None else f"{x:.{paper_digits(x, digits)}f}"


def _paper_cell(value: float | None, std: float | None, digits: int) -> str:
    return "–" if finite_or_none(value) is None else _fmt_paper(value, digits) + (f" ± {_fmt_paper(std, digits)}" if finite_or_none(std) is not None else "")


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
    for row in _ours(table):
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
            cells.append(_fmt(mean, digits) + (f" ± {_fmt(std, digits)}" if std is not None else ""))
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
                    sigma_text = f"{_fmt(bound.sigma, digits)} ({bound.source})"
                else:
                    sigma_text = NOT_TESTED if kind.seeded else "one measurement: no draw"
            compared_body.append(
                f"| {_linked(row, key, label)} | {md_cell(headers.get(key, key))} | {cells[-1] if mean is not None else '–'} | "
                f"{_runs_text(values, trained, kind.seeded) if mean is not None else '–'} | "
                f"{_paper_cell(paper, finite_or_none((row.get('paper_std') or {}).get(key)), digits)} | "
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
    for row in _ours(table):
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
                f"{_fmt(mean, digits) + (f' ± {_fmt(std, digits)}' if std is not None else '')} | "
                f"{_paper_cell(repro, None, digits)} | {delta_text(delta, bound, digits)} | {md_cell(row['reproduction_label'])} |"
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
        gains, orderings = _gain_lines(table, kind), _ordering_lines(table, kind)
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
            cells.append(_paper_cell(paper, finite_or_none((r.get("paper_std") or {}).get(key)), kind.digits(key)))
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


def _ours(table: dict) -> list[dict]:
    return [r for r in table["rows"] if not r.get("reference")]


def _has_result(row: dict) -> bool:
    return any(finite_or_none(v) is not None for v in (row.get("mean") or {}).values())


def _why_no_delta(table: dict, counts: dict[str, int]) -> tuple[str, str] | None:
    """(kind, sentence) where a table of ours compares nothing with the paper: ``none`` (no paper rows
    at all), ``missing`` (our rows with a paper row have no result), ``backbone`` (the paper's rows are on
    other backbones than ours: a preset with another model) or ``objective``; None where it compares."""
    if counts["compared"] or not table_kind(table["kind"]).seeded:
        return None
    ours = _ours(table)
    if not any(r.get("paper") for r in table["rows"]):
        return "none", "No paper numbers matched to our rows (see aoe/resources/paper_numbers.yaml, `missing`)."
    if not counts["ours"]:
        return None  # "No result of ours yet." says it
    matched = [r for r in ours if r.get("paper")]
    if matched:
        names = ", ".join(md_cell(f"{r['backbone']} {r['label']}") for r in matched)
        return "missing", f"Our rows with a paper row ({names}) have no result in its columns yet, so no Δ."
    backbones = [r["backbone"] for r in ours if _has_result(r)]
    paper = [r.get("paper_backbone") or "" for r in table["rows"] if r.get("reference")]
    kind = "backbone" if any(paper) and not set(paper) & set(backbones) else "objective"
    return kind, no_delta_reason(backbones, paper)


def _summary_key(table: dict) -> str | None:
    """The column an ordering of rows goes by: the table's summary (Avg.), else its only column."""
    summary = [c["key"] for c in table["columns"] if c.get("summary")]
    if summary:
        return summary[0]
    return table["columns"][0]["key"] if len(table["columns"]) == 1 else None


def _paper_values(table: dict) -> dict[tuple[str, str], dict]:
    """(backbone, objective) of ours -> the paper's row for it, from our rows' paper lines and the
    reference rows the table's ``paper`` mapping names (those on a backbone this table does not train)."""
    out: dict[tuple[str, str], dict] = {}
    for r in table["rows"]:
        if r.get("paper") and r.get("paper_backbone") and not r.get("section"):
            out.setdefault((r["paper_backbone"], r["paper_objective"]), r["paper"])
    return out


def _gain_lines(table: dict, kind) -> list[str]:
    """Each trained row's gain over its backbone as downloaded, per column: the comparison that holds
    on any backbone (a CPU preset's MiniLM has no paper row), beside the paper's own gain where the
    paper prints the backbone as downloaded too."""
    headers = [c["header"] for c in table["columns"]]
    keys = [c["key"] for c in table["columns"]]
    ours = [r for r in _ours(table) if not r.get("section")]
    paper = _paper_values(table)
    body = []

    def diff(a: dict, b: dict, key: str) -> str:
        x, y = finite_or_none(a.get(key)), finite_or_none(b.get(key))
        return "–" if x is None or y is None else f"{x - y:+.{kind.digits(key)}f}"

    # a gain is what training changed: the recipe differs by definition, every other difference of measurement is refused
    # (an int-gold row minus the backbone scored against the float gold) unless the table names it (aoe.results.likeness)
    allowed = {**(table.get("compare_across") or {}), "recipe": "a gain over the backbone as downloaded is what training changed"}
    named_lines, refused_lines = [], []
    for backbone in dict.fromkeys(r["backbone"] for r in ours):
        rows = [r for r in ours if r["backbone"] == backbone]
        # each evaluation of the backbone as downloaded is a base of its own (its own pooling, the pooling the run
        # trains: issue 70), and each gain names the one it is against; a trained row gains over every base measured
        # as it is (or otherwise only as the table names), and one alike with none says so (issue 69)
        bases = [r for r in rows if r["objective"] == PRETRAINED and _has_result(r)]
        for r in rows:
            if not bases or r["objective"] in (PRETRAINED, RELEASED) or not _has_result(r):
                continue
            alike, why = [], ""
            for base in bases:
                name = f"{backbone}: {r['label']} − {base['label']}"
                try:
                    alike.append((name, base, like_for_like(_measure(r), _measure(base), allowed, f"tables.{table['name']}: {name}")))
                except UnlikeNumbers as err:
                    why = why or err.difference
            if not alike:
                name = f"{backbone}: {r['label']} − {bases[0]['label']}"
                refused_lines.append(f"- {md_cell(name)}: no gain, measured otherwise ({md_cell(why)})")
            for name, base, named in alike:
                body.append(f"| {md_cell(name)} | " + " | ".join(diff(r["mean"], base["mean"], k) for k in keys) + " |")
                named.pop("recipe", None)
                if named:
                    named_lines.append(f"- {md_cell(name)}: {md_cell(named_text(named))}")
    # the paper's gain, where it prints a backbone as downloaded and a trained row of ours on it
    objectives = {r["objective"]: r["label"] for r in ours if r["objective"] not in (PRETRAINED, RELEASED)}
    for (p_backbone, objective), base in paper.items():
        if objective != PRETRAINED:
            continue
        for obj, label in objectives.items():
            if (p_backbone, obj) in paper:
                name = f"paper, {p_backbone}: {label} − {OBJECTIVE_LABELS[PRETRAINED]}"
                body.append(f"| {md_cell(name)} | " + " | ".join(diff(paper[(p_backbone, obj)], base, k) for k in keys) + " |")
    if not body:
        return ["", "Gain over the backbone as downloaded: none measured alike:", "", *refused_lines] if refused_lines else []
    # only the columns with a gain (a column no model of ours trains on has none)
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in body]
    shown = [i for i in range(len(keys)) if any(r[i + 1] != "–" for r in rows)]
    headers = [headers[i] for i in shown]
    keys = [keys[i] for i in shown]
    body = [f"| {r[0]} | " + " | ".join(r[i + 1] for i in shown) + " |" for r in rows]
    return [
        "",
        "Gain over the backbone as downloaded (mean of ours − the same backbone as downloaded, which draws no seed, so the "
        "gain spreads as the trained row's seeds do (its ± above); the check that holds on any backbone: does training beat "
        "the model it started from):",
        "",
        "| Gain | " + " | ".join(md_cell(h) for h in headers) + " |",
        "|---" * (len(keys) + 1) + "|",
        *body,
        *([""] + named_lines + refused_lines if named_lines or refused_lines else []),
    ]


def _measure(row: dict) -> Measure:
    return Measure.of(row.get("measure"))


def _order(items: list[tuple[str, float]], lower_is_better: bool) -> list[tuple[str, float]]:
    return sorted(items, key=lambda item: item[1], reverse=not lower_is_better)


def _ordering_lines(table: dict, kind) -> list[str]:
    """Where a backbone (or an ablation's section) has several trained rows: their order by the summary
    column beside the paper's order of the same objectives, on the same backbone where the paper has it,
    else on each backbone of the paper's that holds two or more of them (AoE > SimCSE > SBERT on
    BERT-base): a preset on another backbone is checked for the paper's ordering, not its numbers."""
    key = _summary_key(table)
    if key is None:
        return []
    header = next(c["header"] for c in table["columns"] if c["key"] == key)
    lower = key in kind.lower_is_better
    digits = kind.digits(key)
    paper = _paper_values(table)
    paper_backbones = list(dict.fromkeys(b for b, _ in paper))
    groups: dict[tuple[str, str], dict[str, dict]] = {}
    for r in _ours(table):
        if r["objective"] != RELEASED and finite_or_none(r["mean"].get(key)) is not None:
            # one row per objective: an ablation's seed rows (one objective on other seeds) order nothing
            groups.setdefault((r["backbone"], r.get("section") or ""), {}).setdefault(r["objective"], r)
    out = []
    for (backbone, section), by_objective in groups.items():
        rows = {r["label"]: r for r in by_objective.values()}
        ours = _order([(label, r["mean"][key]) for label, r in rows.items()], lower)
        orders = []
        candidates = [backbone] + ([b for b in paper_backbones if b != backbone] if not section else [])
        for p_backbone in candidates:
            values = []
            for label, r in rows.items():
                # an ablation's row has its own paper row; elsewhere the paper's row of the same objective
                own = r.get("paper") if p_backbone == backbone and r.get("paper_backbone") == backbone else None
                value = finite_or_none((own or paper.get((p_backbone, r["objective"])) or {}).get(key))
                if value is not None:
                    values.append((label, value))
            if len(values) >= 2:
                orders.append((p_backbone, _order(values, lower)))
                if p_backbone == backbone:
                    break  # the paper's own rows of this backbone: the comparison that needs no other
        trained = [label for label, r in rows.items() if r["objective"] != PRETRAINED]
        if len(ours) < 2 or (len(trained) < 2 and not orders):
            continue
        sign = " < " if lower else " > "
        text = sign.join(f"{md_cell(label)} {_fmt(v, digits)}" for label, v in ours)
        parts = []
        for p_backbone, order in orders:
            common = [label for label, _ in order]
            same = [label for label, _ in ours if label in common] == common
            parts.append(f"the paper on {p_backbone}: " + sign.join(f"{md_cell(label)} {_fmt_paper(v, digits)}" for label, v in order)
                         + (" (the same order)" if same else " (**another order**)"))
        claimed = [label for label in (table.get("study") or {}).get("paper_order") or [] if label in rows]
        if not parts and len(claimed) >= 2:
            # an objective comparison: the paper's order is its claim (its rows are on another backbone or recipe)
            same = [label for label, _ in ours if label in claimed] == claimed
            parts = [f"the paper's claim ({md_cell(table['study']['source'])}): " + sign.join(md_cell(label) for label in claimed)
                     + (" (the same order)" if same else " (**another order**)")]
        if not parts:
            parts = ["the paper orders fewer than two of these on one backbone"]
        out.append(f"- {md_cell(backbone)}{f' ({md_cell(section)})' if section else ''}: ours {text}; " + "; ".join(parts) + ".")
    if not out:
        return []
    return ["", f"Ordering by {md_cell(header)} ({'lower' if lower else 'higher'} is better), ours beside the paper's of the same rows:", "", *out]


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


@dataclass(frozen=True)
class Quoted:
    """A number the paper quotes in its prose, and where our analyses write the same quantity."""

    ref: str  # paper_numbers.yaml reference (column ``value``)
    label: str
    file: str  # fnmatch pattern of the result file(s)
    keys: tuple[str, ...]  # the value's path in that JSON
    scale: float = 1.0  # ours x scale is in the paper's unit (a share -> percent)
    # a ratio: (the denominator's paper_numbers.yaml reference, its path in the JSON); ours and the
    # paper's are both numerator / denominator, so the line is free of either side's scale
    per: tuple[str, tuple[str, ...]] | None = None
    # False: ours is on another scale than the paper's (another model's embeddings, another t-SNE run),
    # listed for what it is, with no Δ ("n/c": not comparable)
    comparable: bool = True


NOT_COMPARABLE = "n/c"
# AoE §5.3 / Fig. 3 (aoe-acl2024.txt l.250): "we draw lines between 5 sample text pairs and observe that the
# lengths of the lines, i.e., distances between text pairs, are larger for imaginary text embeddings
# [...] The real distance is 11.8, while the imaginary distance is 22.1": the lengths of the pair's lines
# in the t-SNE plots of Fig. 3a (real) and 3b (imaginary). Ours of that very definition (key tsne_*) has
# the scale of our t-SNE runs (settings, points, model), the paper's of its own; and even the ratio
# imaginary : real (the paper's 22.1 / 11.8 = 1.87) is one pair's in one t-SNE run of each plane, which
# another t-SNE seed moves from 0.03 to 5.4 (the CPU demo's model, ten seeds: bench/studies/results/fig3_tsne_stability.json),
# the pair's two points coinciding in every run: no Δ, on either side a
# draw of t-SNE, not a property of the model. The Euclidean distances of the halves in the embedding space
# (euclidean_*) are another definition, scaled by the model's norms: no Δ either.
_FIG3 = "*/figures/fig3_saturation_geometry.json"
_FIG3_REAL, _FIG3_IM = "acl2024_quoted/fig3_ukraine_real_distance", "acl2024_quoted/fig3_ukraine_imaginary_distance"
_FIG3_DEFS = {
    "tsne": "length of the pair's line in the t-SNE plots (the paper's definition, Fig. 3a/3b)",
    "euclidean": "Euclidean distance between the pair's halves in the embedding space (not the paper's definition)",
}


QUOTED: tuple[Quoted, ...] = (
    *(Quoted(f"acl2024_quoted/nli_pairs_above_{t}_percent", f"NLI pairs with cosine > {t} (%)",
             "*/analysis/saturation/*/*.json", ("all", "share_above", t), 100.0) for t in ("0.95", "0.8")),
    *(Quoted(f"acl2024_quoted/gis_{kind}_{n}gram_overlap", f"GIS {kind.replace('_', '-')} pairs: mean {n}-gram overlap",
             "*/analysis/gis/stats.json", ("fig8_ngram_overlap", str(n), kind, "mean_count"))
      for kind in ("non_duplicate", "duplicate") for n in (1, 2, 3)),
    *(Quoted(_FIG3_IM, f"Fig. 3 Ukraine pair: imaginary ÷ real distance, {_FIG3_DEFS[key]}; {why}",
             _FIG3, ("highlighted_pairs", "ukraine", f"{key}_im"), per=(_FIG3_REAL, ("highlighted_pairs", "ukraine", f"{key}_re")),
             comparable=False)
      for key, why in (("tsne", "one pair in one t-SNE run, which another t-SNE seed moves from 0.03 to 5.4 on the CPU demo's "
                                "model: not comparable"),
                       ("euclidean", "another definition than the paper's: not comparable"))),
    *(Quoted(f"acl2024_quoted/fig3_ukraine_{part}_distance",
             f"Fig. 3 Ukraine pair: {part} distance, {_FIG3_DEFS[key]}; absolute, on {scale}: not comparable",
             _FIG3, ("highlighted_pairs", "ukraine", f"{key}_{half}"), comparable=False)
      for key, scale in (("tsne", "our t-SNE run's scale"), ("euclidean", "our model's embedding scale"))
      for part, half in (("real", "re"), ("imaginary", "im"))),
)


def _dig(data: Any, keys: tuple[str, ...]) -> float | None:
    for k in keys:
        if not isinstance(data, dict) or k not in data:
            return None
        data = data[k]
    return finite_or_none(data)


def _model_name(data: Any, config: dict | None) -> str | None:
    """The model a result file measured, as the figures' titles name it (aoe.results.figures.display_label)."""
    from aoe.results.figures import display_label

    cell = (data.get("model") or {}).get("cell") if isinstance(data, dict) and isinstance(data.get("model"), dict) else None
    if not isinstance(cell, dict) or not cell.get("backbone"):
        return None
    return display_label(cell, config)


def quoted_section(files: list[str | Path] | None, numbers_file: str | Path | None = None, config: dict | None = None) -> str:
    """Ours beside each number the paper quotes in its prose (:data:`QUOTED`), one line per result file
    that measures it (e.g. one per backbone of the saturation analysis); Δ = ours − paper where the two
    are on one scale, ``n/c`` where not (:attr:`Quoted.comparable`); a ratio line (:attr:`Quoted.per`)
    divides ours and the paper's alike. ``config`` (backbones, trainsets) names the model a line measured."""
    lines = []
    data = {Path(f): json.loads(Path(f).read_text()) for f in files or []}  # each file once: several quantities read it
    for q in QUOTED:
        paths = sorted(p for p in data if fnmatch.fnmatch(str(p.resolve()), q.file))
        if not paths:
            continue
        label, values, _ = paper_reference(q.ref, numbers_file, ["value"])
        paper = values["value"]
        if q.per is not None:
            den_label, den, _ = paper_reference(q.per[0], numbers_file, ["value"])
            paper = paper / den["value"] if finite_or_none(paper) is not None and den["value"] else None
            label = f"{label} ÷ {den_label}"
        for path in paths:
            ours = _dig(data[path], q.keys)
            ours = None if ours is None else ours * q.scale
            if q.per is not None:
                den_ours = _dig(data[path], q.per[1])
                ours = ours / den_ours if ours is not None and den_ours else None
            if "analysis" in path.parts:
                where = "/".join(path.parts[path.parts.index("analysis") + 1:])
            else:
                where = "/".join(path.parts[path.parts.index("figures"):]) if "figures" in path.parts else path.name
            model = _model_name(data[path], config)
            where = f"`{where}`" + (f" ({md_cell(model)})" if model else "")
            delta = NOT_COMPARABLE if not q.comparable else "–" if ours is None or paper is None else f"{ours - paper:+.2f}"
            lines.append(f"| {md_cell(q.label)} | {where} | {_fmt(ours)} | {_fmt_paper(paper) if q.per is None else _fmt(paper)} | {delta} | {md_cell(label)} |")
    if not lines:
        return ""
    return "\n".join([
        "## Numbers the paper quotes in its prose", "",
        "One measurement each (no seeds, no flag); the sources' wording is in aoe/resources/paper_numbers.yaml (`acl2024_quoted`). "
        f"{NOT_COMPARABLE}: not the same quantity as the paper's, so no Δ: another scale (another model, another t-SNE run), "
        "another definition, or, for Fig. 3's ratio imaginary ÷ real, one pair in one t-SNE run on either side, which "
        "another t-SNE seed moves by two orders of magnitude (bench/studies/results/fig3_tsne_stability.json).", "",
        "| Quantity | Our file | Ours | Paper | Δ | Paper source |", "|---|---|---|---|---|---|", *lines, "",
    ])


@dataclass(frozen=True)
class Claim:
    """A gain a paper states in its prose: the difference of two of its rows in one column (printed with
    '%', in points), which the same two rows of one of our tables give too."""

    ref: str  # paper_numbers.yaml path of the claimed number (a text_claims entry)
    label: str
    table: str  # config.yaml tables.<name> holding both rows
    column: str  # the column key
    backbone: str
    objective: str  # the row that gains
    baseline: str  # the row it gains over
    source: str  # where the paper says it
    note: str = ""  # how our two rows differ from the paper's


CLAIMS: tuple[Claim, ...] = (
    # BERT-base: the paper's SimCSE is SimCSE's published number, so ours is the row at SimCSE's recipe (simcse_paper);
    # its AoE-BERT is the released arXiv AnglE-BERT under angle-emb 0.1.1 (issue #68), so ours is the arXiv-era cell
    *(Claim(f"acl2024_table1/text_claims/avg_improvement_over_SimCSE_percent/{group}", f"AoE − SimCSE, {name}, STS avg", "table1_sts", "avg",
            backbone, aoe, simcse, "ACL §5.1, aoe-acl2024.txt l.196", note)
      for group, backbone, name, aoe, simcse, note in (
          ("BERT-base", "bert-base-uncased", "BERT-base", "angle_arxiv", "simcse_paper",
           "the paper's AoE-BERT is the released arXiv AnglE-BERT under angle-emb 0.1.1, issue #68: ours is the arXiv-era cell"),
          ("LLaMA7B", "llama-2-7b", "LLaMA-2 7B", "aoe", "simcse_sup", ""),
          ("LLaMA13B", "llama-2-13b", "LLaMA-2 13B", "aoe", "simcse_sup", ""))),
    # the row ACL Table 2's AoE stands beside: the arXiv in-domain cell (angle_arxiv), whose run ACL prints (config.yaml table2_indomain)
    *(Claim(f"acl2024_table2/text_claims/AoE_improvement_percent/vs_{name}", f"AoE − {name}, in-domain avg (STS-B, GIS)", "table2_indomain", "avg",
            "bert-base-uncased", "angle_arxiv", baseline, "ACL §5.1, aoe-acl2024.txt l.198") for name, baseline in (("SBERT", "sbert"), ("SimCSE", "simcse_sup"))),
    Claim("angle_arxiv_transfer_sts_versions/text_claims/AnglE_BERT_over_SimCSE_BERT_percent", "AnglE-BERT − SimCSE-BERT, STS avg",
          "angle_transfer_sts", "avg", "bert-base-uncased", "angle_arxiv", "simcse_paper", "angle-arxiv-a.txt l.146, -b l.148, -c l.157",
          "the paper's AnglE-BERT is the released checkpoint's 82.37"),
    *(Claim(f"angle_arxiv_transfer_sts_versions/text_claims/AnglE_LLaMA_over_SimCSE_LLaMA_percent/{version}", "AnglE-LLaMA2-7B − SimCSE-LLaMA2-7B, STS avg",
            "angle_transfer_sts", "avg", "llama-2-7b", "aoe", "simcse_sup", source)
      for version, source in (("arxiv_a_and_c", "angle-arxiv-a.txt l.146, -c l.157"), ("arxiv_b", "angle-arxiv-b.txt l.148 (its own LLaMA rows)"))),
    Claim("angle_arxiv_table2_nontransfer/text_claims/AnglE_over_SBERT_absolute_gain", "AnglE − SBERT, non-transfer avg (5 datasets)",
          "angle_table2_nontransfer", "avg", "bert-base-uncased", "angle_arxiv", "sbert", "angle-arxiv-a.txt l.173, -b l.179, -c l.185"),
    Claim("angle_arxiv_table3_ablation/text_claims/ibn_without_ISP_detection_drop_percent", "only ibn − only ibn without ISP detection, STS-B",
          "angle_table3_ablation", "stsb", "bert-base-uncased", "only_ibn", "ibn_without_isp", "angle-arxiv-a.txt l.187, -b l.194, -c l.198",
          "the paper's 'drop' read in points below its only ibn row"),
)
# the prose numbers no pair of our rows gives (the reasons, with their sources: aoe/resources/paper_numbers.yaml notes)
NOT_CLAIMED = (
    "the t-test p-values (angle-arxiv-b.txt l.177 p = 3.71%, ACL Table 1's caption p < 5%): the papers do not say what the tests pair, "
    "our tables' t-tests are over seeds, paired where the seeds match, else Welch's",
    "AnglE-LLaMA's transfer-task gains of 4.34% and 4.48% over DiffCSE- and SimCSE-RoBERTa (angle-arxiv-a.txt l.230): published models the grid does not train",
    "ACL §5's MTEB comparison models (bge-large-en-v1.5 64.23 ...): not evaluated here; AoE's own 64.64 is table released_mteb's",
)


def _claim_rows(table: dict, backbone: str, objective: str) -> list[dict]:
    """The rows of ours of (backbone, objective): the row scored as trained first, then its evaluation-only variants
    (another scoring pooling or gold), which a claim takes where the other row is measured as they are."""
    rows = [r for r in table["rows"] if not r.get("reference") and r.get("backbone") == backbone and r.get("objective") == objective]
    return sorted(rows, key=lambda r: bool(r.get("eval_pooling") or r.get("eval_gold")))


def _claim_pair(table: dict, c: "Claim") -> tuple[dict, dict, dict, str] | None:
    """(gaining row, baseline row, the differences the table names, '') of the claim's rows measured alike (the fewest
    named differences, the rows scored as trained first), else (its first rows, {}, how they are measured otherwise);
    None where the table lacks either (a preset on another backbone)."""
    gaining, baseline = _claim_rows(table, c.backbone, c.objective), _claim_rows(table, c.backbone, c.baseline)
    if not gaining or not baseline:
        return None
    best, why = None, ""
    for a in gaining:
        for b in baseline:
            try:
                named = like_for_like(_measure(a), _measure(b), table.get("compare_across"), f"{c.ref}: {a['label']} − {b['label']}")
            except UnlikeNumbers as err:
                why = why or err.difference
                continue
            if best is None or len(named) < len(best[2]):
                best = (a, b, named)
    return (*best, "") if best else (gaining[0], baseline[0], {}, why)


def claims_section(tables: list[dict], numbers_file: str | Path | None = None) -> str:
    """Ours beside each gain a paper claims in its prose (:data:`CLAIMS`): the difference of the means of our
    two rows in the claim's table and column, Δ = ours − paper; one line per claim whose table is among
    ``tables`` ("–" where either row has no result yet); "" when none is."""
    by_name = {t["name"]: t for t in tables}
    lines = []
    for c in CLAIMS:
        table = by_name.get(c.table)
        if table is None:
            continue
        paper = paper_reference(c.ref, numbers_file, ["avg"])[1].get("avg")
        pair = _claim_pair(table, c)
        if pair is None:  # a preset's table without the claim's rows (another backbone): nothing to set beside it
            continue
        *rows, named, why = pair
        means = [finite_or_none(r.get("mean", {}).get(c.column)) for r in rows]
        digits = table_kind(table["kind"]).digits(c.column)
        if why:
            ours, delta = f"– (measured otherwise: {why})", "–"
        elif None in means:
            ours, delta = "–", "–"
        else:
            gain = means[0] - means[1]
            ours = f"{_fmt(means[0], digits)} − {_fmt(means[1], digits)} = {gain:+.{digits}f}"
            # the bound of a difference: both rows' seed spreads, the paper's two rows one draw each
            values = [(r.get("values") or {}).get(c.column) or {} for r in rows]
            bound = gain_bound(*values) if all(draws_seed(True, r["objective"]) for r in rows) else None
            delta = "–" if paper is None else delta_text(gain - paper, bound, digits)
        label = f"{c.label} ({c.note})" if c.note else c.label
        if not why:
            # which two rows, and what of their measurement differs as the table allows (issue 69)
            label += f" [ours: {rows[0]['label']} − {rows[1]['label']}" + (f"; {named_text(named)}" if named else "") + "]"
        lines.append(f"| {md_cell(label)} | `{c.table}` {md_cell(c.backbone)} | {ours} | {_fmt_paper(paper, digits)} | {delta} | {md_cell(c.source)} |")
    if not lines:
        return ""
    return "\n".join([
        "## Gains the papers claim in their prose", "",
        "Each claim is the difference of two of the paper's rows in one column, printed with '%' but in points; ours is the "
        "same difference of our two rows' means (each over its runs). Δ = ours − paper, with the header's bound for a "
        "difference: t·√(σa²(1 + 1/ka) + σb²(1 + 1/kb)), each row's seed σ as there, the rows taken as independent. Not "
        "compared, no pair of our rows gives them: " + "; ".join(NOT_CLAIMED) + ".", "",
        "| Claim | Our table, backbone | Ours | Paper | Δ | Paper source |", "|---|---|---|---|---|---|", *lines, "",
    ])


def _names_config(configfiles: list[str]) -> dict:
    """The config sections that name models (backbones, trainsets), later files overriding earlier ones by entry."""
    out: dict = {"backbones": {}, "trainsets": {}}
    for path in configfiles:
        try:
            cfg = yaml.safe_load(Path(path).read_text()) or {}
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
            ours = [r["backbone"] for t in tables for r in _ours(t) if _has_result(r)]
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


# --- Markdown pages as HTML, for Snakemake's report (`snakemake --report`) --------------------------
# The report shows a Markdown file as plain text with its whitespace collapsed (pipe tables become
# unreadable) and a LaTeX table as its source; an HTML file it shows rendered. Python-Markdown renders
# what this package writes (REPORT.md, RECIPE.md, the tables' .md twins, RUNTIMES): pipe tables, fenced
# code, raw HTML anchors (RECIPE.md's cells, which REPORT.md links to; headings get no id of
# their own, as a cell's heading slug would repeat its anchor).

_PAGE_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; font-size: 14px; line-height: 1.45;
       margin: 1.2em 2em; color: #1f2328; max-width: 1400px; }
h1 { font-size: 1.6em; border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h2 { font-size: 1.3em; margin-top: 1.6em; border-bottom: 1px solid #eaeef2; padding-bottom: .15em; }
h3 { font-size: 1.1em; margin-top: 1.3em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; overflow-wrap: break-word; }
.wide { overflow-x: auto; max-width: 100%; }
th { background: #f6f8fa; text-align: left; }
tr:nth-child(even) td { background: #fafbfc; }
td em { color: #57606a; }
code { background: #f3f4f6; padding: 0 .25em; border-radius: 3px; font-size: 90%; }
pre { background: #f6f8fa; padding: .6em; overflow: auto; }
.source { color: #57606a; font-size: 12px; margin-top: 2em; }
"""


def markdown_html(text: str) -> str:
    """The body HTML of a Markdown text; a link to a .md file of the results tree points at its .html
    page (the report holds the pages, not the Markdown)."""
    import re

    import markdown

    body = markdown.markdown(text, extensions=["tables", "fenced_code"], output_format="html")
    body = re.sub(r'href="([^"#:]+)\.md(#[^"]*)?"', r'href="\1.html\2"', body)
    # a table wider than the window scrolls sideways in its own box: nothing is cut at the right
    body = body.replace("<table>", '<div class="wide"><table>').replace("</table>", "</table></div>")
    return re.sub(r"(<t[dh](?:\s[^>]*)?>)(.*?)(</t[dh]>)", lambda m: m.group(1) + _break_points(m.group(2)) + m.group(3), body, flags=re.S)


def _break_points(cell: str) -> str:
    """A table cell's HTML with a line break allowed after each ``_ / . :`` before a letter in its text (not in its
    tags): a config key, file or code name (gradient_accumulation_steps, presets/cpu-demo.yaml) then wraps where it
    reads, and RECIPE's tables fit a 1,400 px window without cutting a word anywhere (issue 62)."""
    import re

    return "".join(part if part.startswith("<") else re.sub(r"([_/.:])(?=[A-Za-z])", r"\1<wbr>", part)
                   for part in re.split(r"(<[^>]+>)", cell))


def embedded_pages(report: str | Path) -> dict[str, str]:
    """The HTML pages a Snakemake report (``snakemake --report``) embeds as base64 ``data:`` URLs, keyed by the
    file each names at its foot (:func:`markdown_page`'s "Rendered from"), else ``page<i>``."""
    import base64
    import re

    pages = {}
    for blob in re.findall(r"data:text/html;(?:[\w-]+=[^;,\"]*;)*base64,([A-Za-z0-9+/=]+)", Path(report).read_text(errors="replace")):
        page = base64.b64decode(blob).decode(errors="replace")
        source = re.search(r"Rendered from <code>([^<]+)</code>", page)
        pages[source.group(1) if source else f"page{len(pages)}"] = page
    return pages


def summary_with_recipe(report: str, recipe: str) -> str:
    """REPORT.md with RECIPE.md after it, its links to RECIPE.md's anchors made links within the page.

    The Snakemake report holds each page as a ``data:`` URL, where a link to another page (RECIPE.html#...)
    leads nowhere; in one page every "recipe" link of the report's rows resolves (issue 54)."""
    import re

    linked = re.sub(r"\]\(RECIPE\.md#", "](#", report)
    return f"{linked.rstrip()}\n\n---\n\n{recipe.strip()}\n"


def markdown_page(text: str, title: str, source: str | None = None) -> str:
    """A standalone HTML page (inline style, no external files) rendering ``text``; ``source``: the file
    it was rendered from, named at the bottom."""
    import html

    foot = f'<p class="source">Rendered from <code>{html.escape(source)}</code>.</p>' if source else ""
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{_PAGE_STYLE}</style></head>\n<body>\n{markdown_html(text)}\n{foot}\n</body></html>\n"
    )


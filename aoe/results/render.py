"""Rendering a built :class:`aoe.results.table_model.Table`: a standalone LaTeX (booktabs) document, its Markdown,
CSV (:func:`to_frame`) and JSON (:func:`to_json`) twins with the same rows, cells and notes, and
:func:`write_table`, which writes all four files. Numbers are printed here: mean ± std, bold per
backbone, the paper's numbers with their printed decimals, Δ lines, "–" for a missing result.

Holds no loading (:mod:`aoe.results.load`) and no building (:mod:`aoe.results.tables`): nothing here reads a
result file or computes a mean that the Row does not.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from aoe.config.table_kinds import table_kind
from aoe.config.cells import PRETRAINED
from aoe.results.stats import FLAG_RULE, TTEST_RULE, delta_text, flag_of
from aoe.results.table_model import Row, Table, TTest
from aoe.util.jsonio import json_safe
from aoe.util.fsutil import atomic_file

__all__ = ["and_join", "no_delta_reason", "paper_digits", "to_frame", "to_json", "to_latex", "to_markdown", "write_table"]


def _digits(table: Table, col: str) -> int:
    return table_kind(table.kind).digits(col)


def _num_text(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


# characters of labels and notes that pdflatex needs spelled out (no newunicodechar needed)
_LATEX_CHARS = {"–": "--", "—": "---", "†": "\\textdagger{}", "‡": "\\textdaggerdbl{}", "⋆": "$\\star$",
                "♢": "$\\diamondsuit$", "±": "$\\pm$", "Δ": "$\\Delta$", "−": "$-$", "×": "$\\times$", "≥": "$\\geq$",
                "≤": "$\\leq$", "ρ": "$\\rho$", "§": "\\S{}", "σ": "$\\sigma$", "√": "$\\surd$", "·": "$\\cdot$",
                "⚠": "(!)", "τ": "$\\tau$", "α": "$\\alpha$", "“": "``", "”": "''", "’": "'"}


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


def _delta_text(table: Table, row: Row, col: str, latex: bool, repro: bool = False) -> str:
    """Δ with the seed-spread bound beside it (:func:`aoe.results.stats.delta_text`): ``-0.80 (±1.10)``."""
    delta = row.repro_delta(col) if repro else row.delta(col)
    bound = _bound(table, row, col, repro)
    text = delta_text(delta, bound, _digits(table, col))
    if not latex or text == "–":
        return text
    number, _, rest = text.partition(" ")
    if not rest:
        return f"${number}$"
    # the bound (and flag) under the number, smaller, so that a Δ cell is no wider than a mean ± std cell
    return f"\\begin{{tabular}}[t]{{@{{}}c@{{}}}}${number}$\\\\{{\\scriptsize {_escape(rest)}}}\\end{{tabular}}"


def _bound(table: Table, row: Row, col: str, repro: bool = False):
    seeded = table_kind(table.kind).seeded
    return row.repro_bound(col, seeded) if repro else row.bound(col, seeded)


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
                                      *[_delta_text(table, row, c, latex, repro=True) for c in cols]], "delta"))
    if table.references:
        out.append(("rule", [], ""))
        heading = None
        for ref in table.references:
            # each document's rows (the paper's by its groups) under one line naming it, printed once
            label = ref.label.partition(" (paper: ")[0] if ref.heading else ref.label
            if ref.heading and ref.heading != heading:
                heading = ref.heading
                out.append(("section", [_escape(heading) if latex else heading], ""))
            name = f"\\textit{{{_escape(label)}}}" if latex else f"*{label}*"
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
    if k.seeded:
        notes.insert(0, "Our rows: mean ± sample std over the seeds that exist (n = seed count); bold: best per backbone; "
                     + ("'paper' lines: the paper's number (± its std where printed), the Δ line under it; " if compared else "")
                     + ("italic rows: the paper's rows that are no row of ours (context only); " if table.references else "")
                     + "–: no result.")
        if compared:
            # the rule beside the numbers it bounds (aoe.results.stats: the one sentence every output quotes)
            notes.insert(1, f"{FLAG_RULE}.")
        if table.rows and not compared and table.references:
            notes.insert(1, no_delta_reason([r.backbone for r in table.rows], [r.paper_backbone for r in table.references]))
    elif compared:
        notes.insert(0, "Δ = ours − paper (the line under the paper's); no seed drawn, so no bound.")
    notes.extend(k.notes)
    if any(r.repro for r in table.rows):
        notes.append("'independent reproduction' lines: the reproduction report's number (its own code and recipe, "
                     "aoe/resources/paper_numbers.yaml reproduction_report) and Δ = ours − reproduction.")
    if not any(r.paper for r in table.rows) and not table.references and k.seeded:
        notes.append("No paper numbers for this table (none configured; paper_numbers.yaml lists what was not found in a readable source): no reference rows, no Δ.")
    if table.ttests and all(t.p is None for t in table.ttests):
        # no pair of rows could be tested (the CPU demo: a trained row against the backbone as downloaded): why, once
        reasons = dict.fromkeys(t.text().removeprefix("no test: ") for t in table.ttests)
        notes.append(f"No t-test between this table's rows: {'; '.join(reasons)}.")
    elif table.ttests:
        by_pair: dict[tuple[str, str, str], list[TTest]] = {}
        for t in table.ttests:
            by_pair.setdefault((t.backbone, t.treatment, t.baseline), []).append(t)
        headers = {c.key: c.header for c in table.columns}
        parts = []
        for (backbone, treat, base), tests in by_pair.items():
            if len(tests) > 1 and all(t.p is None for t in tests) and len({t.note for t in tests}) == 1:
                # one reason for every column (the backbone as downloaded is one run): said once
                cells = f"every column {tests[0].text()}"
            else:
                # each tested column with treatment − baseline first, so the line says which row is higher (issue 70)
                cells = "; ".join(f"{headers.get(t.column, t.column)} "
                                  + (f"{t.diff:+.{_digits(table, t.column)}f} ({t.text()})" if t.p is not None and t.diff is not None else t.text())
                                  for t in tests)
            # the differences of measurement the table names for the pair (tables.<name>.compare_across), said once
            named = next((t.named for t in tests if t.named), "")
            diffs = " (per column " + f"{treat} − {base})" if any(t.p is not None and t.diff is not None for t in tests) else ""
            parts.append(f"{backbone}: {treat} vs {base}{f' ({named})' if named else ''}{diffs}: {cells}")
        notes.append(TTEST_RULE + ": " + " | ".join(parts) + ".")
    if table.missing:
        notes.append(f"Missing ({len(table.missing)}): " + "; ".join(table.missing) + ".")
    if latex:
        return [_escape(n) for n in notes]
    return notes


def to_latex(table: Table, caption: str | None = None, label: str | None = None) -> str:
    """A standalone-compilable LaTeX document holding the booktabs table, its caption and notes, within the page.

    The rows are written once (``\\tablerows``): a longtable, so a table longer than a page goes on to the next
    (the paper grid's Table 1 is); at its natural width where that fits the text width, else with the row names
    wrapped in a first column narrowed by what the table is too wide (long row names beside many mean ± std
    columns: the demo's Table 1 ran 97pt off the page)."""
    cols = table.columns
    caption = table.caption if caption is None else caption
    label = label or table.name
    width = len(cols) + 1
    numbers = "c" * len(cols)
    rows, names = [], ["Model"]
    for kind, cells, _ in _body(table, latex=True):
        if kind == "rule":
            rows.append("\\midrule")
        elif kind == "section":
            rows.append(f"\\multicolumn{{{width}}}{{l}}{{\\textit{{{cells[0]}}}}} \\\\")
        else:
            rows.append(" & ".join(cells) + " \\\\")
            names.append(cells[0])
    lines = [
        "\\documentclass{article}",
        "\\usepackage[T1]{fontenc}",
        "\\usepackage{booktabs}",
        "\\usepackage{array}",
        "\\usepackage{longtable}",
        "\\usepackage[margin=1cm,landscape]{geometry}",
        "\\pagestyle{empty}",
        # the whole table in one chunk: its columns as wide on every page after one pdflatex run
        "\\setcounter{LTchunksize}{10000}",
        "\\newsavebox{\\rownames}",
        "\\newsavebox{\\naturaltable}",
        "\\newlength{\\namewidth}",
        # below: the table itself (\\def, not \\newcommand: documents' bodies may be set one after another)
        "\\begin{document}",
        "\\small",
        "\\def\\tablehead{\\toprule",
        "Model & " + " & ".join(_escape(c.header) for c in cols) + " \\\\",
        "\\midrule}",
        "\\def\\tablerows{",
        *rows,
        "\\bottomrule}",
        # the first column: as wide as its longest row name, less what the whole table is wider than the text
        "\\sbox{\\rownames}{\\begin{tabular}{l}" + " \\\\ ".join(names) + "\\end{tabular}}",
        f"\\sbox{{\\naturaltable}}{{\\begin{{tabular}}{{l{numbers}}}\\tablehead\\tablerows\\end{{tabular}}}}",
        "\\setlength{\\namewidth}{\\dimexpr\\wd\\rownames-2\\tabcolsep\\relax}",
        "\\ifdim\\wd\\naturaltable>\\linewidth\\addtolength{\\namewidth}{\\dimexpr\\linewidth-\\wd\\naturaltable\\relax}\\fi",
        # the caption as wide as the table
        "\\setlength{\\LTcapwidth}{\\dimexpr\\ifdim\\wd\\naturaltable>\\linewidth\\linewidth\\else\\wd\\naturaltable\\fi-2\\tabcolsep\\relax}",
        f"\\begin{{longtable}}{{>{{\\raggedright\\arraybackslash}}p{{\\namewidth}}{numbers}}}",
        # the head as the first rows, not an \\endhead: one pdflatex run sets it in the body's columns
        "\\tablehead",
        "\\tablerows",
        f"\\caption{{{_escape(caption)}}}\\label{{tab:{label}}} \\\\",  # a label is a name: escaping breaks the .aux
        "\\end{longtable}",
    ]
    notes = _notes(table, latex=True)
    if notes:
        # \sloppy: a long file name or reference in a note breaks its line rather than the margin
        lines.append("\\begin{center}\\parbox{0.95\\linewidth}{\\footnotesize\\sloppy " + " \\par ".join(notes) + "}\\end{center}")
    lines += ["\\end{document}", ""]
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
            bound = None if row.reference or k not in row.paper else _bound(table, row, k)
            # the seed-spread bound beside Δ and what it came from (aoe.results.stats.FLAG_RULE)
            rec[f"{k}_bound"] = math.nan if bound is None else bound.half
            rec[f"{k}_bound_from"] = "" if bound is None else bound.source
            rec[f"{k}_reproduction"] = row.repro.get(k, math.nan)
            rec[f"{k}_reproduction_delta"] = math.nan if row.reference else row.repro_delta(k)
            bound = None if row.reference or k not in row.repro else _bound(table, row, k, repro=True)
            rec[f"{k}_reproduction_bound"] = math.nan if bound is None else bound.half
        records.append(rec)
    frame = pd.DataFrame(records)
    # no empty Δ columns: a table without a paper (reproduction) row under ours has nothing to subtract
    keys = [c.key for c in table.columns]
    drop = [f"{k}_{suffix}" for k in keys for suffix in ("delta", "bound", "bound_from")] if not any(r.paper for r in table.rows) else []
    if not any(r.repro for r in table.rows):
        drop += [f"{k}_{suffix}" for k in keys for suffix in ("reproduction", "reproduction_delta", "reproduction_bound")]
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
                "eval_gold": row.eval_gold,  # "": the in-domain files' own gold; else a variant row read against this one
                # what its numbers are measured under: REPORT.md's gains and claims check it (aoe.results.likeness)
                "measure": None if row.reference else row.measure.as_dict(),
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
                # beside each Δ: the seed-spread bound, the σ it came from, and its flag (aoe.results.stats.FLAG_RULE)
                **_bounds_json(table, row, row.paper, False, ""),
                "reproduction_ref": row.repro_ref,
                "reproduction_label": row.repro_label,
                "reproduction": row.repro,
                "reproduction_delta": {c.key: row.repro_delta(c.key) for c in table.columns if c.key in row.repro},
                **_bounds_json(table, row, row.repro, True, "reproduction_"),
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
            # the differences of measurement its config allows a comparison of its rows (tables.<name>.compare_across)
            "compare_across": table.compare_across,
            "missing": table.missing,
            "notes": _notes(table, latex=False),
            "sources": table.sources,
            "study": table.study,
        }
    )


def _bounds_json(table: Table, row: Row, against: dict, repro: bool, prefix: str) -> dict:
    """``{prefix}bound`` / ``bound_from`` / ``sigma`` / ``flag`` per column with a Δ (none on a reference row)."""
    out: dict[str, dict] = {f"{prefix}{key}": {} for key in ("bound", "bound_from", "sigma", "flag")}
    if row.reference:
        return out
    for c in table.columns:
        if c.key not in against:
            continue
        bound = _bound(table, row, c.key, repro)
        delta = row.repro_delta(c.key) if repro else row.delta(c.key)
        out[f"{prefix}bound"][c.key] = None if bound is None else bound.half
        out[f"{prefix}bound_from"][c.key] = None if bound is None else bound.source
        out[f"{prefix}sigma"][c.key] = None if bound is None else bound.sigma
        out[f"{prefix}flag"][c.key] = flag_of(delta, bound)
    return out


def write_table(table: Table, tex: str | Path, csv_path: str | Path, md: str | Path, json_path: str | Path | None = None) -> None:
    """The table's twins: LaTeX, CSV, Markdown and, where ``json_path`` is given, JSON."""
    # through atomic_file: a full disk leaves no table cut short and names the file it could not write
    texts = {tex: to_latex(table), csv_path: to_frame(table).to_csv(index=False), md: to_markdown(table)}
    if json_path:
        texts[json_path] = json.dumps(to_json(table), indent=2, ensure_ascii=False) + "\n"
    for path, text in texts.items():
        with atomic_file(path) as fh:
            fh.write(text)

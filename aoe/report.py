"""results/REPORT.md: every reproduced number next to the paper's, from the tables' JSON twins.

One section per table (``aoe.tables.to_json`` output): for each of our rows and each
column, our mean ± std and seed count, the paper's number ± its std, Δ = ours − paper,
and a flag ``⚠`` where |Δ| > 2 × the paper's std (``no std reported`` where the paper
prints none); then the table's paper rows with no counterpart among ours, number by number,
so every paper number a table shows is in the report. The header records the config files
(preset) and the git commit that produced the numbers; each table names the config files that
define or override it.
Figures' JSON numbers (results/figures/*.json) are listed when present. Reads files only.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from aoe.jsonio import finite_or_none

__all__ = ["FLAG", "NO_STD", "build_report", "figure_section", "flag", "git_commit", "table_section", "table_sources"]

FLAG = "⚠"
NO_STD = "no std reported"
FLAG_SIGMAS = 2.0



def flag(delta: float | None, paper_std: float | None) -> str:
    """``⚠`` where |Δ| > 2 × the paper's std; ``no std reported`` without a paper std; '' otherwise (or without Δ)."""
    delta, paper_std = finite_or_none(delta), finite_or_none(paper_std)
    if delta is None:
        return ""
    if paper_std is None:
        return NO_STD
    return FLAG if abs(delta) > FLAG_SIGMAS * paper_std else ""


def git_commit(repo: str | Path) -> str:
    """The repository's HEAD commit (with '+dirty' when tracked files changed), or 'unknown'."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20, check=False)
        if head.returncode:
            return "unknown"
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=20, check=False
        )
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


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
    if x is None:
        return "–"
    text = repr(float(x))
    decimals = 0 if "e" in text or text.endswith(".0") else len(text.split(".")[1])
    return f"{x:.{max(digits, min(decimals, 4))}f}"


def _paper_cell(value: float | None, std: float | None, digits: int) -> str:
    return "–" if finite_or_none(value) is None else _fmt_paper(value, digits) + (f" ± {_fmt_paper(std, digits)}" if finite_or_none(std) is not None else "")


# counts print without decimals (GIS split sizes), like the table itself
_COUNT_COLUMNS = {("gis_stats", "positive"), ("gis_stats", "negative"), ("gis_stats", "total")}


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_section(table: dict, sources: list[str] | None = None) -> tuple[str, dict[str, int]]:
    """The Markdown section of one table and its counts (compared cells, flagged, no std, paper numbers listed)."""
    name = table["name"]
    lines = [f"## {name}", ""]
    if table.get("caption"):
        lines += [f"{table['caption']}", ""]
    lines.append(f"- Kind: `{table['kind']}`; config: {', '.join(f'`{s}`' for s in sources) if sources else 'defaults'}.")
    headers = {c["key"]: c["header"] for c in table["columns"]}
    counts = {"compared": 0, "flagged": 0, "no_std": 0, "ours": 0, "paper": 0}
    body = []
    for row in table["rows"]:
        if row.get("reference"):
            continue
        label = row["label"] if table["kind"] == "gis_stats" else f"{row['backbone']} {row['label']}"
        if row.get("section"):
            label = f"{row['section']}: {label}"
        for col in table["columns"]:
            key = col["key"]
            mean = finite_or_none(row["mean"].get(key))
            paper = finite_or_none((row.get("paper") or {}).get(key))
            if mean is None and paper is None:
                continue
            counts["ours"] += mean is not None
            counts["paper"] += paper is not None
            digits = 0 if (table["kind"], key) in _COUNT_COLUMNS else 2
            std = finite_or_none(row["std"].get(key))
            n = row["count"].get(key, 0)
            p_std = finite_or_none((row.get("paper_std") or {}).get(key))
            delta = finite_or_none(row["delta"].get(key))
            f = flag(delta, p_std)
            if delta is not None:
                counts["compared"] += 1
                counts["flagged"] += f == FLAG
                counts["no_std"] += f == NO_STD
            ours = _fmt(mean, digits) + (f" ± {_fmt(std, digits)}" if std is not None else "")
            paper_text = _paper_cell(paper, p_std, digits)
            body.append(
                f"| {_md(label)} | {_md(headers.get(key, key))} | {ours} | {n} | {paper_text} | "
                f"{'–' if delta is None else f'{delta:+.{digits}f}'} | {f} |"
            )
    if body:
        lines += [
            "",
            "| Row | Column | Ours (mean ± std) | Seeds | Paper (± std) | Δ | Flag |",
            "|---|---|---|---|---|---|---|",
            *body,
        ]
    else:
        lines += ["", "No result of ours yet."]
    refs = [r for r in table["rows"] if r.get("reference")]
    ref_body = []
    for r in refs:
        for col in table["columns"]:
            key = col["key"]
            paper = finite_or_none((r.get("paper") or {}).get(key))
            if paper is None:
                continue
            counts["paper"] += 1
            p_std = finite_or_none((r.get("paper_std") or {}).get(key))
            digits = 0 if (table["kind"], key) in _COUNT_COLUMNS else 2
            ref_body.append(f"| {_md(r['label'])} | {_md(headers.get(key, key))} | {_paper_cell(paper, p_std, digits)} |")
    if ref_body:
        lines += [
            "",
            "Paper rows with no counterpart among ours (context only):",
            "",
            "| Paper row | Column | Paper (± std) |",
            "|---|---|---|",
            *ref_body,
        ]
    sources_of_paper = sorted({r["paper_label"] for r in table["rows"] if r.get("paper") and not r.get("reference")})
    if not sources_of_paper and table["kind"] != "gis_stats":
        lines += ["", "No paper numbers matched to our rows (see aoe/resources/paper_numbers.yaml, `missing`)."]
    tests = [t for t in table.get("ttests", [])]
    if tests:
        lines += ["", "Paired t-tests (scipy.stats.ttest_rel, matched seeds):", ""]
        for t in tests:
            col = "pooled over datasets" if t["column"] == "pooled" else headers.get(t["column"], t["column"])
            sig = ""
            if t.get("p") is not None:
                sig = " (p < 0.05)" if t["p"] < 0.05 else " (not significant at 5%)"
            lines.append(f"- {_md(t['backbone'])}: {_md(t['treatment'])} vs {_md(t['baseline'])}, {_md(col)}: {_md(t['text'])}{sig}")
    if table.get("missing"):
        lines += ["", f"Missing cells ({len(table['missing'])}, printed as –): " + "; ".join(_md(m) for m in table["missing"]) + "."]
    lines.append("")
    return "\n".join(lines), counts


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


def build_report(
    table_files: list[str | Path],
    configfiles: list[str | Path] | None = None,
    commit: str | None = None,
    figure_files: list[str | Path] | None = None,
) -> str:
    """The whole REPORT.md text."""
    configfiles = [str(c) for c in configfiles or []]
    sources = table_sources(configfiles)
    tables = [json.loads(Path(p).read_text()) for p in table_files]
    sections, total = [], {"compared": 0, "flagged": 0, "no_std": 0, "ours": 0, "paper": 0}
    flagged_rows = []
    for t in tables:
        text, counts = table_section(t, sources.get(t["name"]))
        sections.append(text)
        for k in total:
            total[k] += counts[k]
        if counts["flagged"]:
            flagged_rows.append(f"{t['name']} ({counts['flagged']})")
    lines = [
        "# Reproduction report: AoE (ACL 2024) and AnglE (arXiv 2309.12871)",
        "",
        (
            "Every number we reproduced next to the paper's. Ours: mean ± sample std over the seeds that exist (Seeds = count). "
            f"Δ = ours − paper. Flag {FLAG}: |Δ| > {FLAG_SIGMAS:g} × the paper's std; '{NO_STD}': the paper prints no std for that number. "
            "–: no result (never 0)."
        ),
        "",
        f"- Config files (later ones override earlier, i.e. the preset): {', '.join(f'`{c}`' for c in configfiles) or 'unknown'}",
        f"- Git commit: `{commit or 'unknown'}`",
        (
            f"- Tables: {len(tables)}; numbers of ours: {total['ours']}; compared with the paper: {total['compared']}; "
            f"flagged {FLAG}: {total['flagged']}{' (' + ', '.join(flagged_rows) + ')' if flagged_rows else ''}; "
            f"without a paper std: {total['no_std']}; paper numbers listed: {total['paper']}."
        ),
        "",
    ]
    lines += sections
    figures = figure_section(figure_files)
    if figures:
        lines.append(figures)
    return "\n".join(lines).rstrip() + "\n"

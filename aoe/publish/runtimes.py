"""results/RUNTIMES.tsv and .html: every job's runtime, read from its Snakemake benchmark file.

Each rule with a ``benchmark:`` directive writes ``results/benchmarks/<rule dir>/<wildcards>.tsv``
(Snakemake's columns: ``s``, ``h:m:s``, ``max_rss`` in MB, ..., ``cpu_time``; one line per repeat).
:func:`benchmark_rows` reads every such file under a run's benchmarks folder into one row per job
(the rule directory, the wildcard path, the mean wall seconds over repeats, the largest max RSS and
the mean CPU seconds); :func:`runtime_tsv` and :func:`runtime_markdown` render them, the Markdown with
a total per rule first. Reads files only.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

__all__ = ["COLUMNS", "benchmark_rows", "read_benchmark", "runtime_markdown", "runtime_tsv"]

COLUMNS = ("rule", "wildcards", "seconds", "max_rss_mb", "cpu_seconds", "repeats")


def _number(value: str | None) -> float:
    """A benchmark cell as a float; Snakemake writes ``NA`` (or nothing) where it measured nothing."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _mean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def read_benchmark(path: str | Path) -> dict:
    """One benchmark TSV -> ``{"seconds", "max_rss_mb", "cpu_seconds", "repeats"}`` (mean over repeats;
    max RSS: the largest). Raises ValueError for a file without Snakemake's ``s`` column or without rows."""
    with open(path, newline="") as f:
        lines = list(csv.DictReader(f, delimiter="\t"))
    if not lines or "s" not in lines[0]:
        raise ValueError(f"{path}: not a Snakemake benchmark file (no 's' column or no rows)")
    rss = [v for v in (_number(line.get("max_rss")) for line in lines) if not math.isnan(v)]
    return {
        "seconds": _mean([_number(line["s"]) for line in lines]),
        "max_rss_mb": max(rss) if rss else math.nan,
        "cpu_seconds": _mean([_number(line.get("cpu_time")) for line in lines]),
        "repeats": len(lines),
    }


def benchmark_rows(root: str | Path) -> list[dict]:
    """Every ``*.tsv`` under ``root`` (a run's results/benchmarks), one row per job, sorted by rule and
    wildcards. ``rule`` is the first folder below ``root`` (the rule's benchmark folder, e.g.
    ``train``), ``wildcards`` the rest of the path without ``.tsv``. An empty or missing root: no rows."""
    root = Path(root)
    rows = []
    for path in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        rel = path.relative_to(root).with_suffix("")
        rule, wildcards = (rel.parts[0], "/".join(rel.parts[1:])) if len(rel.parts) > 1 else (rel.parts[0], "")
        rows.append({"rule": rule, "wildcards": wildcards, **read_benchmark(path)})
    return sorted(rows, key=lambda r: (r["rule"], r["wildcards"]))


def _fmt(value: float, digits: int = 1) -> str:
    return "NA" if isinstance(value, float) and math.isnan(value) else f"{value:.{digits}f}"


def runtime_tsv(rows: list[dict]) -> str:
    """The rows as a tab-separated table with header :data:`COLUMNS` (NA where nothing was measured)."""
    out = ["\t".join(COLUMNS)]
    for r in rows:
        out.append("\t".join([r["rule"], r["wildcards"], _fmt(r["seconds"], 2), _fmt(r["max_rss_mb"], 2), _fmt(r["cpu_seconds"], 2), str(r["repeats"])]))
    return "\n".join(out) + "\n"


def _hms(seconds: float) -> str:
    if math.isnan(seconds):
        return "NA"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def runtime_markdown(rows: list[dict], title: str = "Job runtimes", root: str = "results/benchmarks") -> str:
    """A Markdown page: the run's total, one line per rule (jobs, total and slowest wall time, peak
    RSS), then one line per job, slowest first; ``root``: the benchmark folder read, as the page names it."""
    total = sum(r["seconds"] for r in rows if not math.isnan(r["seconds"]))
    lines = [
        f"# {title}",
        "",
        f"Wall time of every job that has a Snakemake `benchmark:` file ({len(rows)} jobs, "
        f"{_hms(total)} h:m:s in all when run one after another); max RSS: the job's peak resident memory (MB). "
        f"Read from `{root}/<rule>/<wildcards>.tsv` (this configuration's tree); the same numbers are in `RUNTIMES.tsv`.",
        "",
        "## Per rule",
        "",
        "| rule | jobs | total (s) | slowest job (s) | peak max RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_rule[r["rule"]].append(r)
    for rule, jobs in sorted(by_rule.items(), key=lambda kv: -sum(j["seconds"] for j in kv[1] if not math.isnan(j["seconds"]))):
        secs = [j["seconds"] for j in jobs if not math.isnan(j["seconds"])]
        rss = [j["max_rss_mb"] for j in jobs if not math.isnan(j["max_rss_mb"])]
        peak = max(rss) if rss else math.nan
        lines.append(f"| `{rule}` | {len(jobs)} | {_fmt(sum(secs))} | {_fmt(max(secs) if secs else math.nan)} | {_fmt(peak, 0)} |")
    lines += ["", "## Per job", "", "| rule | wildcards | wall (s) | h:m:s | max RSS (MB) | CPU (s) |", "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -(0 if math.isnan(r["seconds"]) else r["seconds"])):
        lines.append(
            f"| `{r['rule']}` | `{r['wildcards'] or '–'}` | {_fmt(r['seconds'])} | {_hms(r['seconds'])} | "
            f"{_fmt(r['max_rss_mb'], 0)} | {_fmt(r['cpu_seconds'])} |"
        )
    if not rows:
        lines += ["", "No benchmark files: no benchmarked job has run in this results tree."]
    return "\n".join(lines) + "\n"

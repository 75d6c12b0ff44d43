"""How long `snakemake -n all` takes to plan the paper's full grid (issue 6 target: < 5 s).

    .venv/bin/python bench/speed/dag_plan.py [--repeats 5] [--out bench/speed/results/dag_plan.json]

Runs the real command line in a scratch folder (a copy of the workflow, no results/), so
nothing on disk short-cuts the planning, and prints a table of wall and CPU seconds.
The planner's work grows with the number of jobs, which is reported beside the time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402
from tests.workflow_utils import copy_workflow, job_counts, mirror_path  # noqa: E402


def plan_once(work: Path, env: dict, target: str) -> tuple[float, float, dict[str, int]]:
    """(wall s, CPU s of the child, job counts) of one `snakemake -n <target>`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", target, "--quiet", "rules"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"snakemake -n {target} failed:\n{out.stdout[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, job_counts(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--targets", nargs="+", default=["all", "table2"])
    parser.add_argument("--out", default=str(C.committed(__file__, "dag_plan.json")))
    args = parser.parse_args()

    mirror = mirror_path()
    env = {**os.environ, "AOE_DATA_MIRROR": str(mirror) if mirror else ""}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = copy_workflow(Path(tmp) / "wf")
        plan_once(work, env, "all")  # warm the file cache and Python's bytecode cache
        for target in args.targets:
            walls, cpus, counts = [], [], {}
            for _ in range(args.repeats):
                wall, cpu, counts = plan_once(work, env, target)
                walls.append(wall)
                cpus.append(cpu)
            rows.append(
                {
                    "target": target,
                    "jobs": sum(counts.values()),
                    "jobs_by_rule": counts,
                    "wall_s_median": statistics.median(walls),
                    "wall_s_all": walls,
                    "cpu_s_median": statistics.median(cpus),
                }
            )
    print(f"{'target':<10} {'jobs':>6} {'wall s (median)':>16} {'cpu s (median)':>15}")
    for r in rows:
        print(f"{r['target']:<10} {r['jobs']:>6} {r['wall_s_median']:>16.2f} {r['cpu_s_median']:>15.2f}")
    record = {
        "command": "snakemake -n <target> --quiet rules (config.yaml: the paper's full grid)",
        "repeats": args.repeats,
        "mirror": bool(mirror),
        "results": rows,
        "load_at_end": C.load(),
    }
    print(f"written {C.write_json('dag_plan', record, args.out)}")


if __name__ == "__main__":
    main()

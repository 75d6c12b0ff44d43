"""What a job pays before its work: the CPU-seconds of a fresh interpreter importing what each rule's script
imports at its top (its ``import`` lines, after Snakemake's own ``snakemake.script``), and of the libraries a
full fine-tune's train job loads on its way (the engine, accelerate, the model class, the schedule, the
sentence-transformers files written at its end), with and without the last.

    .venv/bin/python bench/speed/job_startup.py [--repeats 3] [--compare ../older-checkout] [--out PATH]

On the CPU demo and the CI preset most jobs are small (a download, a table), so this is most of their cost:
the CI preset's run starts 124 job processes. Each measurement is a fresh process (the parent's
``RUSAGE_CHILDREN`` before and after: interpreter start included), the scripts in turn, repeated; the median
is printed. What a script imports inside its functions is not counted. JSON:
``bench/speed/results/job_startup.json``.
"""

from __future__ import annotations

import argparse
import ast
import resource
import subprocess
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
from _common import REPO, print_table, summarize, write_json  # noqa: E402

# a full fine-tune's train job: the engine, then (in train()) accelerate, the model and the schedule
# (get_linear_schedule_with_warmup), then (in _save) the sentence-transformers files, which import transformers'
# Trainer utilities and through them peft and bitsandbytes (as transformers.optimization does)
FULL_FINETUNE = ["aoe.training.train", "accelerate", "transformers.models.bert.modeling_bert", "transformers.optimization"]
ST_FILES = "aoe.model.interop"


def script_imports(path: Path) -> list[str]:
    """The modules a rule's script imports at its top level, in order."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return list(dict.fromkeys(names))


def child_cpu(modules: list[str], repo: Path) -> float:
    """CPU-seconds (user + system) of a fresh interpreter importing ``modules`` from the checkout ``repo``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = "".join(f"import {m}\n" for m in modules)
    subprocess.run([sys.executable, "-c", code], cwd=repo, check=True, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin",
                                                                            "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cases_of(repo: Path) -> dict[str, list[str]]:
    """What each case imports in the checkout ``repo``."""
    cases = {f"workflow_scripts/{p.name}": ["snakemake.script", *script_imports(p)] for p in sorted((repo / "workflow_scripts").glob("*.py"))}
    cases["a full fine-tune's train job: engine, accelerate, BERT, schedule, sentence-transformers files"] = [*FULL_FINETUNE, ST_FILES]
    cases["the same without the sentence-transformers files"] = FULL_FINETUNE
    cases["interpreter alone"] = []
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", default=None, help="another checkout (a git worktree of an older commit): each case "
                        "is measured there too, alternately with this one, under this checkout's Python environment")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "job_startup.json"))
    args = parser.parse_args(argv)

    repos = {"here": REPO, **({"compared": Path(args.compare).resolve()} if args.compare else {})}
    cases = {label: cases_of(repo) for label, repo in repos.items()}
    names = [n for n in cases["here"] if all(n in c for c in cases.values())]
    runs: dict[str, dict[str, list[float]]] = {label: {n: [] for n in names} for label in repos}
    for _ in range(args.repeats):  # the cases in turn, each checkout's right after the other's: a busy moment hits both
        for name in names:
            for label, repo in repos.items():
                runs[label][name].append(round(child_cpu(cases[label][name], repo), 3))
    stats = {label: {n: summarize(v) for n, v in by_case.items()} for label, by_case in runs.items()}
    here = stats["here"]
    header = ["what", "median", "min", "max", *(["compared", "Δ"] if args.compare else []), "imports here"]
    rows = []
    for name in sorted(names, key=lambda n: -here[n]["median"]):
        row = [name, round(here[name]["median"], 2), round(here[name]["min"], 2), round(here[name]["max"], 2)]
        if args.compare:
            other = stats["compared"][name]["median"]
            row += [round(other, 2), f"{here[name]['median'] - other:+.2f}"]
        rows.append(row + [", ".join(m for m in cases["here"][name] if m.startswith(("aoe", "transformers", "accelerate")))[:60]])
    print_table(f"CPU-seconds to start a job ({args.repeats} fresh processes each; median, min, max"
                + (f"; compared: {repos['compared']}" if args.compare else "") + ")", header, rows)
    record = {"command": " ".join(["bench/speed/job_startup.py", *(argv if argv is not None else sys.argv[1:])]),
              "cases": {n: {"modules": cases["here"][n], **here[n]} for n in names}}
    if args.compare:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repos["compared"], capture_output=True, text=True).stdout.strip()
        record["compared"] = {"checkout": str(repos["compared"]), "commit": head or None,
                              "cases": {n: {"modules": cases["compared"][n], **stats["compared"][n]} for n in names}}
    path = write_json("job_startup", record, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

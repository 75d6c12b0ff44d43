"""GPU-hours of a Snakemake target on a cluster, per backbone, from the paper's training speed and from ours measured on H200/H100 GPUs.

    .venv/bin/python bench/gpu/cluster_cost.py [TARGET ...] [--configfile PRESET ...] [--engine-over-bare 0.95] [--out bench/out/cluster_cost.json]

TARGET (default ``all``) and the presets are what ``snakemake -n --forceall TARGET --configfile
PRESET ...`` is given: the cells costed are the ``train_model`` and ``evaluate_sts`` jobs of that
dry run, so "what will ``table2`` cost" is ``bench/gpu/cluster_cost.py table2``, counted from scratch
(outputs already on disk are costed too). No GPU is timed here. The per-GPU training speed comes from the AoE paper's Appendix D (one
STS-B train epoch, 5,749 pairs, on one RTX 3090 Ti: AoE-BERT-base 14.94 s, AoE-LLaMA-7B
1027.18 s; aoe/resources/paper_numbers.yaml ``acl2024_training_time``), the work from the
grid (``config.yaml``: every trained cell's train set, epochs or max_steps, batch and
max_length, expanded as the workflow expands it). The train-set sizes and the paper's speeds are
aoe/plan/cost.py's, which also sizes ``runtime: auto`` and ends a SLURM dry run with its trainings' cost
(docs/cluster.md, "Time limits"). Assumptions, all in the JSON:

* a training example costs in proportion to its texts (pairs 2, triplets 3) and to the train
  set's ``max_length`` relative to 64 (batches are padded to their longest text, up to
  max_length; this over-estimates sets of short texts, which rarely reach it);
* LLaMA-2 13B trains at 7B's speed x 6.74/13.0 (parameter ratio; the paper gives no 13B time);
  BERT-sized backbones not in Appendix D (MiniLM-L6, Gemma 3 270M) are costed as BERT-base
  (an upper bound for both);
* a multi-GPU job scales perfectly (GPU-hours = the one-GPU time);
* evaluation: the 7-task STS protocol (26,289 distinct texts, deduplicated) per evaluated
  model, a forward pass costing a third of a training text's forward+backward; transfer,
  MTEB and the figures are not counted (MTEB alone can exceed the STS cost several times);
* ``--engine-over-bare``: this engine's measured speed relative to a bare training loop
  (bench/speed/train_limit.py); the paper's times are taken as bare-loop speed and divided by it;
* the H200 and H100 columns: the same work at this engine's measured speed per GPU process for the
  backbone's grid cell (LLaMA-2 7B/13B: 160 pairs a process at max_length 45, bench/gpu/results/llama_cells.json;
  BERT-base: its AoE NLI cell in fp32 at max_length 128, bench/gpu/results/gpu_check.json), scaled by texts and
  max_length as above; backbones no GPU run measured get none.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # bench/, after the group folders: _common (bench/_moved.py)
import _common as C  # noqa: E402

from aoe.config.recipes import N_TEXTS  # noqa: E402
from aoe.config.errors import ConfigError  # noqa: E402
from aoe.config.cells import Cell  # noqa: E402
from aoe.config.cell_settings import train_params  # noqa: E402
from aoe.plan import cost  # noqa: E402
from aoe.plan.check import load_config  # noqa: E402
from aoe.plan.cost import TRAIN_ROWS, per_gpu_pairs_per_s  # noqa: E402
from tests.workflow_utils import SNAKEMAKE, dry_run_jobs  # noqa: E402

STS7_DISTINCT_TEXTS = 26289  # bench/speed/embed_throughput.py on the mirror


def train_rows(trainset: str, fmt: str) -> tuple[int, str]:
    """(rows, source) of a train set in the format a cell trains on (aoe.plan.cost, which the plan's cost reads too)."""
    try:
        return cost.train_rows(trainset, fmt)
    except cost.CostError as err:
        raise SystemExit(f"bench/gpu/cluster_cost.py: {err}; add it there") from None


GPU_RUNS = C.committed(__file__, "llama_cells.json")
GPU_CHECK = C.committed(__file__, "gpu_check.json")


def measured_speeds() -> dict[str, dict[str, tuple[float, int, str]]]:
    """{gpu: {backbone: (pairs/s per GPU process, the cell's max_length, source)}} of the committed GPU runs:
    the LLaMA-2 cells (bench/gpu/results/llama_cells.json: the H100 runs and the H200 measurements it records)
    and BERT-base's AoE NLI cell in fp32, the grid's precision (bench/gpu/results/gpu_check.json, H200)."""
    import json

    runs = json.loads(GPU_RUNS.read_text())
    shapes = runs["cuda"]["llama"]
    h100 = {b: (shapes[t]["summary"]["pairs_per_s"], shapes[t]["params"]["max_length"], f"{GPU_RUNS.name} {t}")
            for b, t in (("llama-2-7b", "7b-fp32"), ("llama-2-13b", "13b-fp32"))}
    h200_llama = runs["h200_2026_11_27_before_no_cache"]
    h200 = {b: (h200_llama[f]["pairs_per_s"], shapes["7b-fp32"]["params"]["max_length"], f"{GPU_RUNS.name} h200 {f}")
            for b, f in (("llama-2-7b", "llama-2-7b-shape-qlora.json"), ("llama-2-13b", "llama-2-13b-shape-qlora.json"))}
    check = json.loads(GPU_CHECK.read_text())
    bert = check["bert_base_nli"]["aoe-no"]
    h200["bert-base-uncased"] = (bert["examples_per_s"], check["raw"]["cuda"]["bert_nli"]["aoe-no"]["params"]["max_length"],
                                 f"{GPU_CHECK.name} bert_base_nli aoe-no")
    return {"H100": h100, "H200": h200}


def planned_cells(targets: list[str], configfiles: list[str]) -> tuple[list[Cell], list[Cell]]:
    """(trained cells, STS-evaluated cells) of the targets' dry run, every job counted (--forceall)."""
    cmd = [*SNAKEMAKE, "-n", "--forceall", *targets]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    out = subprocess.run(cmd, cwd=C.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench/gpu/cluster_cost.py: {' '.join(cmd[2:])} does not plan:\n{out.stdout[-3000:]}")
    cells = {"train_model": [], "evaluate_sts": []}
    for job in dry_run_jobs(out.stdout):
        if job["rule"] in cells:
            w = job["wildcards"]
            cells[job["rule"]].append(Cell.from_wildcards(w))
    return cells["train_model"], cells["evaluate_sts"]


def disk_gb(config: dict, backbone: str, trainings: int, evaluations: int) -> dict:
    """Disk the backbone's share of a target writes (GB, computed from aoe.config.memory.ARCHS, not measured): the
    backbone as downloaded (results/backbones/, once), each trained model (a full fine-tuning: its float32
    weights; LoRA/QLoRA: the float32 adapters), and each STS evaluation's embedding cache (26,289 texts x the
    hidden size, float32). The checkpoints a training keeps while it runs (weights and AdamW's two moments) go
    when it ends (its .ckpt/final holds hard links to the model's files)."""
    from aoe.config.memory import ARCHS, GB, _lora_params

    if backbone not in ARCHS:
        return {"disk_backbone_gb": None, "disk_models_gb": None, "disk_embeddings_gb": None}
    a = ARCHS[backbone]
    full = config["backbones"][backbone].get("finetune", "full") == "full"
    model = a.params() * 4 if full else _lora_params(a, 32) * 4
    return {"disk_backbone_gb": a.checkpoint_gb(), "disk_models_gb": trainings * model / GB,
            "disk_embeddings_gb": evaluations * STS7_DISTINCT_TEXTS * a.hidden * 4 / GB}


def estimate(config: dict, trained: list[Cell], evaluated: list[Cell], engine_over_bare: float) -> dict:
    from aoe.results.paper_numbers import load_paper_numbers

    paper = load_paper_numbers(None)["acl2024_training_time"]["rows"]
    measured = measured_speeds()
    per_backbone: dict[str, dict] = defaultdict(lambda: {"trainings": 0, "train_gpu_h": 0.0, "evaluations": 0, "eval_gpu_h": 0.0,
                                                         **{f"{g}_gpu_h": 0.0 for g in measured}})
    for cell in trained:
        p = train_params(config, cell.backbone, cell.objective, cell.trainset, cell.seed)
        n_rows = train_rows(cell.trainset, p["format"])[0]
        if p["max_steps"] > 0:
            examples = p["max_steps"] * p["batch_size"]
        else:
            examples = p["epochs"] * n_rows
        texts = N_TEXTS[p["format"]]
        speed, _ = per_gpu_pairs_per_s(cell.backbone, paper)
        cost = examples * (texts / 2) * (p["max_length"] / 64) / speed / engine_over_bare
        entry = per_backbone[cell.backbone]
        entry["trainings"] += 1
        entry["train_gpu_h"] += cost / 3600
        for gpu, speeds in measured.items():
            if cell.backbone in speeds:
                # this engine's own speed on that GPU for the backbone's grid cell, scaled by texts and max_length as above
                m_speed, m_length, _ = speeds[cell.backbone]
                entry[f"{gpu}_gpu_h"] += examples * (texts / 2) * (p["max_length"] / m_length) / m_speed / 3600
    for cell in evaluated:
        speed, _ = per_gpu_pairs_per_s(cell.backbone, paper)
        # a forward of one text ~ 1/3 of a training text's forward+backward; a training pair is 2 texts
        texts_per_s = speed * 2 * 3
        entry = per_backbone[cell.backbone]
        entry["evaluations"] += 1
        entry["eval_gpu_h"] += STS7_DISTINCT_TEXTS / texts_per_s / 3600
        for gpu, speeds in measured.items():
            if cell.backbone in speeds:
                entry[f"{gpu}_gpu_h"] += STS7_DISTINCT_TEXTS / (speeds[cell.backbone][0] * 2 * 3) / 3600
    out = {}
    for backbone, entry in sorted(per_backbone.items()):
        entry.update(disk_gb(config, backbone, entry["trainings"], entry["evaluations"]))
        speed, source = per_gpu_pairs_per_s(backbone, paper)
        res = config["backbones"][backbone]["resources"]
        out[backbone] = {
            **entry,
            "total_gpu_h": entry["train_gpu_h"] + entry["eval_gpu_h"],
            "pairs_per_s_per_gpu_at_64": speed,
            "speed_source": source,
            "gpus_per_training_job": res["gpus"],
            "measured": {gpu: {"pairs_per_s_per_gpu": speeds[backbone][0], "at_max_length": speeds[backbone][1],
                               "source": speeds[backbone][2]} for gpu, speeds in measured.items() if backbone in speeds},
        }
        for gpu, speeds in measured.items():
            if backbone not in speeds:
                out[backbone][f"{gpu}_gpu_h"] = None  # no run of this backbone on that GPU
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*", default=["all"], help="Snakemake targets (rules or files), as given to snakemake")
    ap.add_argument("--configfile", nargs="*", default=[], help="presets merged over config.yaml, as snakemake --configfile")
    ap.add_argument("--engine-over-bare", type=float, default=1.0, help="engine pairs/s / bare loop pairs/s (bench/speed/train_limit.py)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    try:
        config = load_config(C.REPO, args.configfile)
    except ConfigError as err:
        raise SystemExit(f"bench/gpu/cluster_cost.py: config: {err}") from None
    trained, evaluated = planned_cells(args.targets, args.configfile)
    per_backbone = estimate(config, trained, evaluated, args.engine_over_bare)
    total = sum(v["total_gpu_h"] for v in per_backbone.values())
    record = {
        "command": "python bench/gpu/cluster_cost.py " + " ".join(sys.argv[1:]),
        "targets": args.targets,
        "configfiles": args.configfile,
        "gpu": "RTX 3090 Ti (the paper's Appendix D GPU)",
        "engine_over_bare": args.engine_over_bare,
        "train_rows": {k: ({f: {"rows": r, "source": src} for f, (r, src) in v.items()} if isinstance(v, dict) else {"rows": v[0], "source": v[1]})
                       for k, v in TRAIN_ROWS.items()},
        "per_backbone": per_backbone,
        "total_gpu_h": total,
        "assumptions": __doc__.split("Assumptions, all in the JSON:", 1)[1].strip(),
    }
    path = C.write_json("cluster_cost", record, args.out)
    C.print_table(
        f"GPU-hours of `{' '.join(args.targets)}` (RTX 3090 Ti equivalents, Appendix D speeds, engine/bare {args.engine_over_bare:.2f})",
        ["backbone", "trainings", "train GPU-h", "evaluations", "STS eval GPU-h", "total GPU-h", "H200 GPU-h", "H100 GPU-h",
         "GPUs/job", "pairs/s/GPU"],
        [[b, v["trainings"], f"{v['train_gpu_h']:.2f}", v["evaluations"], f"{v['eval_gpu_h']:.2f}", f"{v['total_gpu_h']:.2f}",
          "-" if v["H200_gpu_h"] is None else f"{v['H200_gpu_h']:.2f}", "-" if v["H100_gpu_h"] is None else f"{v['H100_gpu_h']:.2f}",
          v["gpus_per_training_job"], round(v["pairs_per_s_per_gpu_at_64"], 2)] for b, v in per_backbone.items()],
    )
    print("  H200 / H100 GPU-h: the same work at this engine's measured speed on that GPU, where a run measured the backbone "
          "(bench/gpu/results/llama_cells.json, bench/gpu/results/gpu_check.json; - where none did)")
    print(f"  total: {total:.2f} GPU-hours")
    C.print_table("Disk (GB, computed: aoe.config.memory.ARCHS): backbone as downloaded, trained models, STS embedding caches",
                  ["backbone", "backbone", "models", "STS embeddings"],
                  [[b, *("-" if v[k] is None else f"{v[k]:.1f}" for k in ("disk_backbone_gb", "disk_models_gb", "disk_embeddings_gb"))]
                   for b, v in per_backbone.items()])
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The training engine on a real GPU: a MiniLM-L6 cell against its CPU run, and the BERT-base NLI cell's speed and memory.

    # here (CPU): the bundle the GPU machine needs (it reaches no network and has no data mirror)
    .venv/bin/python bench/gpu/gpu_check.py prepare --bundle .gpu
    # on the GPU machine (python3 with torch+CUDA; `datasets` carried as wheels), then here on the CPU
    python3 bench/gpu/gpu_check.py run --bundle .gpu --device cuda --out $OUT/cuda.json
    .venv/bin/python bench/gpu/gpu_check.py run --bundle .gpu --device cpu --parts minilm --out bench/out/gpu_check_cpu.json
    # both into bench/gpu/results/gpu_check.json, with the table
    .venv/bin/python bench/gpu/gpu_check.py report CUDA_JSON bench/out/gpu_check_cpu.json

No test runs on a GPU (CI has none), so this is where the CUDA path of ``aoe.training.train.train`` and of the
STS evaluation is exercised. Everything goes through the pipeline's own code (``aoe.training.train.train``
with the ``TrainConfig`` that ``aoe.config.cell_settings.train_params`` resolves from config.yaml and a preset,
``aoe.model.tokens.build_token_cache``, ``aoe.evaluate.run.run_sts_evaluation``).

Part ``minilm``: the CPU demo's MiniLM-L6 AoE cell (presets/cpu-demo.yaml, seed 1, 200 steps of 32
STS-B train pairs), trained and scored on STS-B test (all 1,379 pairs) on each device. The bundle
carries the weights rounded to float16 (the machine takes at most 64 MiB) and both devices train
from the same float32 copy of them, so the two runs start from identical weights and see identical
batches; they differ only in the kernels' arithmetic.

Part ``bert-nli``: a BERT-base-shaped encoder (``BertConfig()``'s defaults are bert-base-uncased's
shape; random weights, since speed and memory do not depend on their values) trained with the grid's
``aoe`` and ``angle_arxiv`` NLI cells (config.yaml: 2,048 pairs a step in micro-batches of 128,
and 50; max_length 128; fp32) for ``--nli-steps`` optimizer steps on SNLI test pairs or triplets, the
cell's format (the mirror has no NLI train split; SNLI test's texts are SNLI's length distribution, which is most of
AllNLI), and again under each other ``--precisions`` value (bf16, fp16). Reported: examples per second after
the first step (the median of the later logged steps), the peak GPU memory, and the GPU-hours of
the cell's 10 epochs over bench/gpu/cluster_cost.py's NLI row count at that speed, beside the speed and
GPU-hours cluster_cost assumes (the paper's RTX 3090 Ti time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "bench"))  # after bench/gpu/, for _common only: bench/_moved.py
RESULT = Path(__file__).resolve().parent / "results" / "gpu_check.json"
# where the runs write their models; AOE_GPU_CHECK_WORK moves it, so two runs on one machine (a test beside another
# checkout's) never share a folder
WORK_ROOT = Path(os.environ.get("AOE_GPU_CHECK_WORK", "/tmp/aoe-gpu-check"))
MINILM, BERT = "minilm-l6", "bert-base-uncased"
NLI_CELLS = ("aoe", "angle_arxiv")
# optimizer steps timed per NLI cell: 8 x 2,048 and 200 x 50 examples
NLI_STEPS = "aoe=8,angle_arxiv=200"
PARTS = ("minilm", "bert-nli", "llama")
LLAMA_CELLS = ("llama-2-7b", "llama-2-13b")
# Part ``llama``: the grid's llama-2-* / aoe / nli cells on random weights of the published shapes
# (aoe.config.memory.ARCHS), one micro-batch a process: the cell's global batch over its resources.gpus processes.
# "7b-8": the 7B shape with 8 of its 32 layers (a third point for the memory model's per-layer terms);
# "tiny": a 2-layer shape for the CPU (the fast lane runs it, tests/test_bench_gpu_check.py)
LLAMA_SHAPES = {
    "7b-8": ("llama-2-7b", {"num_hidden_layers": 8}),
    "7b": ("llama-2-7b", {}),
    "13b": ("llama-2-13b", {}),
    "tiny": ("llama-2-7b", {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                            "num_key_value_heads": 4}),
}
LLAMA_STEPS = 12


# --------------------------------------------------------------------------- prepare (here)


def prepare(bundle: Path, mirror: str, parts: list[str] = PARTS) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    import _common as C

    from aoe.config.cell_settings import train_params
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.nli import nli_formats, read_nli_csv
    from aoe.data.prepare import prepare_sts_table
    from aoe.data.sts import sts_files
    from aoe.model.backbones import materialize_backbone
    from aoe.plan.check import load_config

    shutil.rmtree(bundle, ignore_errors=True)
    (bundle / "tables").mkdir(parents=True)
    downstream = resolve_downstream_root(mirror)
    if downstream is None:
        raise SystemExit("no data mirror: set AOE_DATA_MIRROR or --mirror")
    for split in ("train", "test"):
        prepare_sts_table("stsb", split, {rel: downstream / rel for rel in sts_files("stsb", split)},
                          bundle / "tables" / f"stsb-{split}.parquet", bundle / "tables" / f"stsb-{split}.manifest.json")
    snli = Path(mirror) / "nli" / "snli_1.0_test.csv"
    for fmt, table in nli_formats(read_nli_csv(snli)).items():
        table.to_parquet(bundle / "tables" / f"snli-test-{fmt}.parquet")

    demo = load_config(REPO, [REPO / "presets" / "cpu-demo.yaml"])
    grid = load_config(REPO, [])
    work = REPO / "bench" / "out" / "work" / "gpu_check" / MINILM
    shutil.rmtree(work, ignore_errors=True)
    provenance = materialize_backbone(MINILM, demo["backbones"][MINILM], work)
    record = {"parts": parts, "minilm_provenance": provenance, "snli_from": str(snli), "prepared_at_commit": C.git_commit(), "train": {}}
    if {"minilm", "bert-nli"} & set(parts):
        out = bundle / MINILM
        shutil.copytree(work, out, ignore=shutil.ignore_patterns("*.safetensors"))
        weights = load_file(str(work / "model.safetensors"))
        save_file({k: v.to(torch.float16).contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
        record["minilm_weights"] = "rounded to float16 for transport; both devices train from the same float32 copy of them"
        record["train"] = {MINILM: train_params(demo, MINILM, "aoe", "stsb", 1),
                           **{f"{BERT}/{o}": train_params(grid, BERT, o, "nli", 42) for o in NLI_CELLS}}
    if "llama" in parts:
        # the LLaMA shapes get MiniLM's tokenizer (no LLaMA tokenizer is offline; speed and memory depend on
        # the token counts, which the cell's max_length caps in training)
        (bundle / "tokenizer").mkdir()
        for f in work.iterdir():
            if f.name.startswith(("tokenizer", "vocab", "special_tokens")):
                shutil.copy2(f, bundle / "tokenizer" / f.name)
        record["llama"] = {name: {"train": train_params(grid, name, "aoe", "nli", 42),
                                  "eval_text": grid["backbones"][name].get("eval_text", "raw"),
                                  "eval": {k: grid["evaluation"]["sts"][k] for k in ("batch_size", "max_length")},
                                  "processes": grid["backbones"][name]["resources"]["gpus"]}
                           for name in LLAMA_CELLS}
    (bundle / "bundle.json").write_text(json.dumps(record, indent=2, default=str))
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    print(f"wrote {bundle} ({size / 2**20:.1f} MiB)")


# --------------------------------------------------------------------------- run (on each device)


def fp32_copy(src: Path, dst: Path) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    if not (dst / "model.safetensors").is_file():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors"), dirs_exist_ok=True)
        save_file({k: v.to(torch.float32).contiguous() for k, v in load_file(str(src / "model.safetensors")).items()},
                  str(dst / "model.safetensors"))
    return dst


def bert_base_random(tokenizer_from: Path, dst: Path) -> Path:
    import torch
    from transformers import BertConfig, BertModel

    if not (dst / "config.json").is_file():
        torch.manual_seed(0)
        BertModel(BertConfig()).save_pretrained(dst)
        for f in tokenizer_from.iterdir():
            if f.name.startswith(("tokenizer", "vocab", "special_tokens")):
                shutil.copy2(f, dst / f.name)
    return dst


def train_one(table: Path, backbone: Path, out: Path, params: dict, tag: str) -> dict:
    import torch

    from aoe.model.tokens import build_token_cache
    from aoe.training.train import TrainConfig, train

    cfg = TrainConfig(**params)
    cache = out.parent / f"tokens-{table.stem}-{backbone.name}-{cfg.max_length}"
    if not (cache / "cache.json").is_file():
        build_token_cache(table, backbone, cfg.max_length, cache)
    for d in (out, out.with_name(out.name + ".ckpt")):
        shutil.rmtree(d, ignore_errors=True)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    summary = train(cache, table, backbone, out, cfg, extra_record={"cell": {"bench": "gpu_check", "run": tag}})
    wall = time.perf_counter() - start
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    steps = [x for x in lines if "loss" in x and "step" in x]
    rec = {"summary": summary, "wall_seconds": round(wall, 2), "losses": {x["step"]: x["loss"] for x in steps}}
    # the first logged interval carries CUDA's start-up (kernels, allocator, autotuning): the median of the others
    later = sorted(x["pairs_per_s"] for x in steps[1:] if "pairs_per_s" in x)
    rec["steady_pairs_per_s"] = later[len(later) // 2] if later else None
    if torch.cuda.is_available():
        rec["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return rec


def run(bundle: Path, device: str, parts: list[str], out_json: Path, nli_steps: dict[str, int], precisions: list[str],
        llama_shapes: list[str] = ("7b-8", "7b", "13b"), llama_steps: int = LLAMA_STEPS, llama_variants: list[str] = ()) -> None:
    import torch

    from aoe.evaluate.run import run_sts_evaluation
    from aoe.util.provenance import library_versions

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    if device == "cpu":
        # accelerate picks the GPU whenever there is one
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # inherited by the parts' child processes
    meta = json.loads((bundle / "bundle.json").read_text())
    work = WORK_ROOT / device
    work.mkdir(parents=True, exist_ok=True)
    minilm = fp32_copy(bundle / MINILM, work / "backbone-minilm-fp32") if {"minilm", "bert-nli"} & set(parts) else None
    result: dict = {"device": device, "parts": parts, "versions": {k: library_versions().get(k) for k in ("torch", "transformers", "accelerate", "python")},
                    "cuda_device": torch.cuda.get_device_name(0) if device == "cuda" else None,
                    "cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads()}
    if "minilm" in parts:
        tables = bundle / "tables"
        params = meta["train"][MINILM]
        rec = train_one(tables / "stsb-train.parquet", minilm, work / "minilm-aoe", params, f"minilm-{device}")
        sts = run_sts_evaluation(work / "minilm-aoe", [str(tables / "stsb-test.parquet")], [str(tables / "stsb-test.manifest.json")],
                                 work / "minilm-aoe-sts.json", device=device, tasks=["STSB"], cache_root=work / "embcache")
        rec["stsb_test_spearman"] = sts["tasks"]["STSB"]["spearman"]
        rec["eval_seconds"] = sts.get("wall_seconds")
        result["minilm"] = rec
        print(f"minilm on {device}: {rec['summary']['steps']} steps, {rec['summary']['pairs_per_s']:.1f} pairs/s, "
              f"STS-B test {rec['stsb_test_spearman']:.2f}", flush=True)
    if "bert-nli" in parts:
        bert = bert_base_random(minilm, work / "backbone-bert-base-random")
        result["bert_nli"] = {}
        for cell, steps in nli_steps.items():
            for precision in precisions:
                tag = f"{cell}-{precision}"
                # accelerate's state is one per process and keeps its first mixed_precision: a process per run
                one = work / f"bert-{tag}.json"
                subprocess.run([sys.executable, __file__, "_one", "--bundle", str(bundle), "--backbone", str(bert),
                                "--cell", cell, "--steps", str(steps), "--precision", precision, "--out", str(one)], check=True)
                rec = json.loads(one.read_text())
                result["bert_nli"][tag] = rec
                print(f"bert-base {tag}: {rec['steady_pairs_per_s']:.1f} examples/s, "
                      f"peak {rec.get('peak_gpu_memory_gib', float('nan')):.1f} GiB", flush=True)
    if "llama" in parts:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        result["llama"] = run_llama(bundle, device, llama_shapes, llama_steps, llama_variants, work, out_json.with_suffix(".partial.json"))
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=2, default=str))
    print(f"wrote {out_json}")


def one_nli_run(bundle: Path, backbone: Path, cell: str, steps: int, precision: str, out: Path) -> None:
    meta = json.loads((bundle / "bundle.json").read_text())
    params = {**meta["train"][f"{BERT}/{cell}"], "max_steps": steps, "mixed_precision": precision,
              "log_every": 1, "checkpoint_every": 0, "init": None}
    tag = f"{cell}-{precision}"
    # the table in the format the cell trains on (aoe.config.recipes.resolve_format, as the workflow resolves it)
    rec = train_one(bundle / "tables" / f"snli-test-{params['format']}.parquet", backbone, out.parent / f"bert-{tag}", params, tag)
    out.write_text(json.dumps({"params": params, **rec}, indent=2, default=str))


def profile_nli(bundle: Path, precision: str, steps: int, out: Path) -> None:
    """torch.profiler over ``steps`` optimizer steps of the BERT-base AoE NLI cell (model loading included)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    work = WORK_ROOT / "cuda"
    work.mkdir(parents=True, exist_ok=True)
    bert = bert_base_random(fp32_copy(bundle / MINILM, work / "backbone-minilm-fp32"), work / "backbone-bert-base-random")
    meta = json.loads((bundle / "bundle.json").read_text())
    params = {**meta["train"][f"{BERT}/aoe"], "max_steps": steps, "mixed_precision": precision, "log_every": 1,
              "checkpoint_every": 0, "init": None}
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        rec = train_one(bundle / "tables" / f"snli-test-{params['format']}.parquet", bert, work / f"prof-{precision}", params, f"profile-{precision}")
    cuda = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    text = "\n".join([f"{precision} {steps} steps: {rec['summary']['pairs_per_s']:.1f} pairs/s",
                      prof.key_averages().table(sort_by=cuda, row_limit=18, max_name_column_width=60),
                      prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60)])
    out.write_text(text)
    print(text)


def parse_profile(text: str) -> dict:
    """Totals and the attention rows of a profile_nli table (torch.profiler's text layout)."""
    import re

    totals = {k: v for k, v in re.findall(r"Self (CPU|CUDA) time total: (\S+)", text)}
    rows = {}
    for line in text.splitlines():
        cols = line.split()
        if cols and "attention" in cols[0] and cols[0] not in rows:
            # Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, Self CUDA, Self CUDA %, CUDA total, CUDA avg, calls
            rows[cols[0]] = {"cpu_total": cols[4], "cpu_avg": cols[5], "self_cuda": cols[6] if len(cols) > 10 else None, "calls": cols[-1]}
    return {"first_line": text.splitlines()[0], "self_time_total": totals, "attention_ops": rows}


# --------------------------------------------------------------------------- part llama (on each device)


def _gpu_memory(torch) -> dict:
    """Peaks since the last reset, and what the process holds on the GPU outside torch's allocator now."""
    if not torch.cuda.is_available():
        return {}
    free, total = torch.cuda.mem_get_info()
    return {"peak_allocated_gb": torch.cuda.max_memory_allocated() / 1e9, "peak_reserved_gb": torch.cuda.max_memory_reserved() / 1e9,
            "outside_allocator_gb": (total - free - torch.cuda.memory_reserved()) / 1e9}


def llama_backbone(shape: str, tokenizer: Path, dst: Path, device: str) -> Path:
    """Random weights (seed 0, bf16) of ``shape`` saved with MiniLM's tokenizer; built on ``device``."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    from aoe.config.memory import ARCHS

    if (dst / "config.json").is_file():  # the shape's second training (another compute dtype)
        return dst
    name, override = LLAMA_SHAPES[shape]
    a = ARCHS[name]
    vocab = sum(1 for _ in (tokenizer / "vocab.txt").open(encoding="utf-8"))
    config = LlamaConfig(**{"hidden_size": a.hidden, "intermediate_size": a.intermediate, "num_hidden_layers": a.layers,
                            "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "max_position_embeddings": 4096,
                            # the published 32,000 ids hold MiniLM's 30,522; the tiny shape takes the tokenizer's own
                            "vocab_size": vocab if shape == "tiny" else a.vocab, "pad_token_id": 0, **override})
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16: 13B in float32 would take 52 GB
    try:
        with torch.device(device):
            model = LlamaModel(config)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(dst)
    for f in tokenizer.iterdir():
        shutil.copy2(f, dst / f.name)
    del model
    return dst


def llama_train(bundle: Path, shape: str, device: str, work: Path, steps: int, compute_dtype: str, out: Path) -> None:
    """One process: build the shape, train the cell ``steps`` steps through aoe.training.train.train, measure the GPU."""
    import dataclasses

    import torch

    from aoe.config.memory import ARCHS, qlora_gpu_estimate
    from aoe.training.train import TrainConfig, train

    name, override = LLAMA_SHAPES[shape]
    meta = json.loads((bundle / "bundle.json").read_text())["llama"][name]
    start = time.perf_counter()
    backbone = llama_backbone(shape, bundle / "tokenizer", work / f"backbone-{shape}", device)
    built = time.perf_counter() - start
    if device == "cuda":
        torch.cuda.empty_cache()
    params = {**meta["train"], "batch_size": meta["train"]["batch_size"] // meta["processes"], "max_steps": steps,
              "log_every": 2, "checkpoint_every": 10_000, "qlora_compute_dtype": compute_dtype, "init": None}
    if shape == "tiny":  # the CPU: a few pairs, and the dtype a CPU's autocast has
        params.update(batch_size=8, mixed_precision="no")
    table = bundle / "tables" / f"snli-test-{params['format']}.parquet"
    from aoe.model.tokens import build_token_cache

    cache = work / f"tokens-{shape}"
    build_token_cache(table, backbone, params["max_length"], cache, prompt=params["prompt"])
    model_out = work / f"model-{shape}-{compute_dtype}"
    for d in (model_out, model_out.with_name(model_out.name + ".ckpt")):
        shutil.rmtree(d, ignore_errors=True)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    summary = train(cache, table, backbone, model_out, TrainConfig(**params), extra_record={"cell": {"bench": "gpu_check", "shape": shape}})
    wall = time.perf_counter() - start
    memory = _gpu_memory(torch)
    lines = [json.loads(x) for x in (model_out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    speeds = [x["pairs_per_s"] for x in lines if "pairs_per_s" in x]
    a = ARCHS[name]
    cfg = json.loads((backbone / "config.json").read_text())
    a = dataclasses.replace(a, hidden=cfg["hidden_size"], intermediate=cfg["intermediate_size"], layers=cfg["num_hidden_layers"],
                            heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
                            head_dim=cfg["hidden_size"] // cfg["num_attention_heads"], vocab=cfg["vocab_size"])
    tokens = params["batch_size"] * 2 * params["max_length"]
    out.write_text(json.dumps({
        "shape": shape, "backbone": name, "layers": a.layers, "device": device, "compute_dtype": compute_dtype,
        "build_and_save_s": round(built, 1), "train_wall_s": round(wall, 1), "summary": summary,
        "pairs_per_s_logged": speeds, "params": params, **memory,
        "estimate": qlora_gpu_estimate(name, a, tokens, r=params["lora"]["r"]),
        "model_dir": str(model_out), "arch": dataclasses.asdict(a),
    }, indent=2, default=str))


def llama_eval(bundle: Path, model_dir: Path, device: str, kv_cache: bool, out: Path) -> None:
    """One process: the STS-B test evaluation of a trained adapter (aoe.evaluate.run.run_sts_evaluation, as the
    evaluate rule runs it), the GPU's peak while the model loads and while it embeds; ``kv_cache``: with the
    decoder's key/value cache, as before aoe.model.encoder.no_cache."""

    import torch

    import aoe.model.encoder
    from aoe.config.memory import Arch, eval_gpu_estimate
    from aoe.evaluate.run import run_sts_evaluation

    train_rec = json.loads((model_dir.parent / f"{model_dir.name}.train.json").read_text())
    meta = json.loads((bundle / "bundle.json").read_text())["llama"][train_rec["backbone"]]
    if kv_cache:
        aoe.model.encoder.no_cache = lambda model: {}
    seen = {"batch_tokens": 0}
    real_pad, real_init = aoe.model.encoder.pad_ids, aoe.model.encoder.Encoder.__init__

    def pad_and_count(ids, tokenizer):
        enc = real_pad(ids, tokenizer)
        seen["batch_tokens"] = max(seen["batch_tokens"], enc["input_ids"].numel())
        return enc

    def init_and_measure(self, *a, **kw):
        real_init(self, *a, **kw)
        seen["load"] = _gpu_memory(torch)
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    aoe.model.encoder.pad_ids, aoe.model.encoder.Encoder.__init__ = pad_and_count, init_and_measure
    tables = bundle / "tables"
    # the tiny shape runs on a CPU (tests/test_bench_gpu_check.py): 200 seeded pairs show the same code path and the
    # key/value cache's equal numbers; a real shape embeds all 1,379, as the grid's evaluation does
    caps = {"max_pairs": 200, "uncapped_tasks": []} if train_rec["shape"] == "tiny" else {}
    start = time.perf_counter()
    sts = run_sts_evaluation(model_dir, [str(tables / "stsb-test.parquet")], [str(tables / "stsb-test.manifest.json")],
                             out.with_suffix(".sts.json"), device=device, tasks=["STSB"], batch_size=meta["eval"]["batch_size"],
                             max_length=meta["eval"]["max_length"], eval_text=meta["eval_text"], **caps)
    wall = time.perf_counter() - start
    a = Arch(**train_rec["arch"])
    base_dtype = train_rec["params"]["eval_base_dtype"] or "fp32"
    out.write_text(json.dumps({
        "shape": train_rec["shape"], "kv_cache": kv_cache, "wall_s": round(wall, 1), "stsb_spearman_random_weights": sts["tasks"]["STSB"]["spearman"],
        "batch_tokens_max": seen["batch_tokens"], "load": seen.get("load", {}), "embed": _gpu_memory(torch),
        "estimate": eval_gpu_estimate(train_rec["backbone"], a, seen["batch_tokens"], r=train_rec["params"]["lora"]["r"],
                                      base_dtype=base_dtype, kv_cache=kv_cache),
    }, indent=2, default=str))


def run_llama(bundle: Path, device: str, shapes: list[str], steps: int, variants: list[str], work: Path,
              partial: Path | None = None) -> dict:
    """Each shape's training, then its evaluation, each in a process of its own (its own peaks, the GPU freed
    between); ``variants``: also train with ``compute=bf16`` and evaluate with ``kv_cache`` (the cache
    aoe.model.encoder.no_cache leaves out), on the first shape. ``partial``: rewritten after each shape, so a run cut
    short by a time limit keeps the shapes it finished."""
    result = {}
    for i, shape in enumerate(shapes):
        computes = ["fp32"] + (["bf16"] if "compute=bf16" in variants and i == 0 else [])
        for compute in computes:
            tag = f"{shape}-{compute}"
            rec_path = work / f"model-{tag}.train.json"
            subprocess.run([sys.executable, __file__, "_llama_train", "--bundle", str(bundle), "--shape", shape, "--device", device,
                            "--steps", str(steps), "--compute", compute, "--out", str(rec_path)], check=True)
            rec = json.loads(rec_path.read_text())
            rec["eval"] = {}
            if compute == "fp32":
                for kv in [False] + ([True] if "kv_cache" in variants and i == 0 else []):
                    ev = work / f"eval-{tag}-{'kv' if kv else 'nokv'}.json"
                    subprocess.run([sys.executable, __file__, "_llama_eval", "--bundle", str(bundle), "--model", rec["model_dir"],
                                    "--device", device, *(["--kv-cache"] if kv else []), "--out", str(ev)], check=True)
                    rec["eval"]["kv_cache" if kv else "default"] = json.loads(ev.read_text())
            result[tag] = rec
            shutil.rmtree(rec["model_dir"], ignore_errors=True)
            t, e = rec, rec["estimate"]
            print(f"llama {tag}: {t['summary']['pairs_per_s']:.1f} pairs/s, peak allocated "
                  f"{t.get('peak_allocated_gb', float('nan')):.2f} GB (model {e['allocated_gb']:.2f}), reserved "
                  f"{t.get('peak_reserved_gb', float('nan')):.2f} GB (model {e['reserved_gb']:.2f})"
                  + "".join(f"; eval {k} {v['embed'].get('peak_allocated_gb', float('nan')):.2f} GB (model {v['estimate']['allocated_gb']:.2f})"
                            for k, v in rec["eval"].items()), flush=True)
        # the next shape's weights need the disk (13B in bf16: 26 GB)
        shutil.rmtree(work / f"backbone-{shape}", ignore_errors=True)
        if partial is not None:
            partial.write_text(json.dumps({"llama": result, "finished": False}, indent=2, default=str))
    return result


# --------------------------------------------------------------------------- report (here)


def _nli_rows(gpu: dict, est_speed: float) -> tuple[dict, list]:
    import cluster_cost
    from aoe.config.recipes import N_TEXTS

    rows, nli = [], {}
    for tag, r in gpu.get("bert_nli", {}).items():
        p, speed = r["params"], r["steady_pairs_per_s"]
        # cluster_cost.estimate's speed for this cell: its max_length-64 pair speed, scaled by texts and max_length
        assumed = est_speed / ((N_TEXTS[p["format"]] / 2) * (p["max_length"] / 64))
        examples = p["epochs"] * cluster_cost.TRAIN_ROWS["nli"][0]
        nli[tag] = {"format": p["format"], "examples_per_s": speed, "peak_gpu_memory_gib": r.get("peak_gpu_memory_gib"),
                    "cluster_cost_examples_per_s": assumed, "examples_one_run": examples,
                    "gpu_hours_one_run": examples / speed / 3600, "cluster_cost_gpu_hours_one_run": examples / assumed / 3600,
                    "steps": r["summary"]["steps"], "train_seconds": r["summary"].get("train_seconds")}
        rows.append([tag, p["format"], p["batch_size"], p["gradient_accumulation_steps"], f"{speed:.0f}", f"{assumed:.0f}",
                     f"{r.get('peak_gpu_memory_gib', 0):.1f}", f"{examples / speed / 3600:.2f}", f"{examples / assumed / 3600:.2f}"])
    return nli, rows


def report(cuda_json: Path, cpu_json: Path, out: Path, profiles: list[str], nli_json: Path | None = None) -> None:
    """``nli_json``: a later ``run --parts bert-nli`` whose NLI cells replace ``cuda_json``'s, which stay as the
    run before it (``bert_base_nli_before``): how the 2026-11-26 H200 runs measured ``avoid_cudnn_attention``."""
    import _common as C
    import cluster_cost

    gpu, cpu = json.loads(cuda_json.read_text()), json.loads(cpu_json.read_text())
    before = None
    if nli_json is not None:
        later = json.loads(nli_json.read_text())
        before, gpu = gpu, {**gpu, "bert_nli": later["bert_nli"]}
    g, c = gpu["minilm"], cpu["minilm"]
    common = sorted(set(g["losses"]) & set(c["losses"]), key=int)
    from aoe.results.paper_numbers import load_paper_numbers

    est_speed, est_source = cluster_cost.per_gpu_pairs_per_s(BERT, load_paper_numbers(None)["acl2024_training_time"]["rows"])
    nli, rows = _nli_rows(gpu, est_speed)
    record = {
        "command": "python bench/gpu/gpu_check.py report " + " ".join(sys.argv[2:]),
        "gpu": gpu["cuda_device"], "versions": {"gpu": gpu["versions"], "cpu": cpu["versions"]},
        "minilm": {
            "cuda": {"stsb_test_spearman": g["stsb_test_spearman"], "pairs_per_s": g["summary"]["pairs_per_s"], "steps": g["summary"]["steps"]},
            "cpu": {"stsb_test_spearman": c["stsb_test_spearman"], "pairs_per_s": c["summary"]["pairs_per_s"], "steps": c["summary"]["steps"]},
            "spearman_cuda_minus_cpu": g["stsb_test_spearman"] - c["stsb_test_spearman"],
            "logged_losses_compared": len(common),
            "max_abs_loss_diff": max((abs(g["losses"][s] - c["losses"][s]) for s in common), default=None),
            # same weights, same batches, same seed; dropout masks come from CUDA's generator on the GPU and
            # the CPU's here, so the trajectories are two draws of the same run, not one run twice
            "note": "dropout masks differ between devices (CUDA's and the CPU's generators), so losses are not expected to be equal",
            "first_loss": {"cuda": g["losses"].get(common[0]) if common else None, "cpu": c["losses"].get(common[0]) if common else None},
        },
        "bert_base_nli": nli,
        **({"bert_base_nli_before": {
            "note": "the same cells in the first run, before aoe.model.encoder.avoid_cudnn_attention (commit 97274cd): "
                    "bf16 autocast sent attention to cuDNN, which planned each new input shape",
            "cells": _nli_rows(before, est_speed)[0]}} if before is not None else {}),
        "cluster_cost_estimate": {"pairs_per_s_per_gpu_at_64": est_speed, "source": est_source,
                                  "note": "bench/gpu/cluster_cost.py's BERT-base speed at max_length 64 (the paper's RTX 3090 Ti STS-B epoch); it scales it by the train set's max_length/64"},
        "profiles_note": "torch.profiler around aoe.training.train.train of the BERT-base AoE NLI cell, model loading included "
                         "(the profile subcommand; the committed ones: fp32 3 optimizer steps, bf16 1 step, on the GPU named above)",
        "profiles": {tag: {**parse_profile(Path(path).read_text()), "text": Path(path).read_text()}
                     for tag, path in (x.split("=", 1) for x in profiles)},
        "raw": {"cuda": before if before is not None else gpu, "cpu": cpu,
                **({"cuda_nli": json.loads(nli_json.read_text())} if nli_json is not None else {})},
    }
    path = C.write_json("gpu_check", record, str(out))
    m = record["minilm"]
    C.print_table(f"MiniLM-L6 demo cell (200 steps): {gpu['cuda_device']} vs CPU",
                  ["device", "STS-B test", "pairs/s"],
                  [["cuda", f"{m['cuda']['stsb_test_spearman']:.2f}", f"{m['cuda']['pairs_per_s']:.0f}"],
                   ["cpu", f"{m['cpu']['stsb_test_spearman']:.2f}", f"{m['cpu']['pairs_per_s']:.0f}"]])
    print(f"  logged losses: max |cuda - cpu| {m['max_abs_loss_diff']} over {m['logged_losses_compared']} logged steps")
    C.print_table(f"BERT-base NLI cells on {gpu['cuda_device']} (random weights, SNLI test; GPU-h for cluster_cost's "
                  f"{cluster_cost.TRAIN_ROWS['nli'][0]:,} rows x epochs)",
                  ["cell-precision", "format", "batch", "grad accum", "examples/s", "cluster_cost assumes", "peak GiB",
                   "GPU-h per run", "cluster_cost GPU-h"], rows)
    print(f"wrote {path}")


def _collect_shapes(folder: Path) -> dict:
    """The records a part-llama run leaves in its work folder (model-TAG.train.json, eval-TAG-{nokv,kv}.json),
    as run_llama returns them: for a run cut short before it wrote its JSON."""
    out = {}
    for train_json in sorted(folder.glob("model-*.train.json")):
        rec = json.loads(train_json.read_text())
        tag = train_json.name[len("model-"):-len(".train.json")]
        rec["eval"] = {("kv_cache" if kind == "kv" else "default"): json.loads((folder / f"eval-{tag}-{kind}.json").read_text())
                       for kind in ("nokv", "kv") if (folder / f"eval-{tag}-{kind}.json").is_file()}
        out[tag] = rec
    return out


def report_llama(runs: list[Path], shape_dirs: list[Path], with_cache: list[Path], fast_lane: Path | None, out: Path) -> None:
    """bench/gpu/results/llama_cells.json: part llama's records (later runs' shapes replace earlier ones'), the
    training runs with the key/value cache (before aoe.model.encoder.no_cache), the H200 measurements of
    ../shared/measurements/gpu-2026-11-27 beside them, and the fast lane's JUnit summary."""
    import xml.etree.ElementTree as ET

    import _common as C

    shapes, meta = {}, {}
    for d in shape_dirs:
        shapes.update(_collect_shapes(d))
    for r in runs:
        rec = json.loads(r.read_text())
        shapes.update(rec["llama"])
        meta = meta or {k: rec[k] for k in ("versions", "cuda_device", "torch_threads") if k in rec}
    from aoe.config.memory import Arch, eval_gpu_estimate, qlora_gpu_estimate

    for r in shapes.values():  # the model as it stands now, at each run's own shape and token counts
        a, p = Arch(**r["arch"]), r["params"]
        r["estimate"] = qlora_gpu_estimate(r["backbone"], a, p["batch_size"] * 2 * p["max_length"], r=p["lora"]["r"])
        for ev in r["eval"].values():
            ev["estimate"] = eval_gpu_estimate(r["backbone"], a, ev["batch_tokens_max"], r=p["lora"]["r"],
                                               base_dtype=p["eval_base_dtype"] or "fp32", kv_cache=ev["kv_cache"])
    h200 = {}
    shared = REPO.parent / "shared" / "measurements" / "gpu-2026-11-27"
    for f in sorted(shared.glob("llama-2-*-qlora.json")):
        m = json.loads(f.read_text())
        h200[f.name] = {"layers": m["layers"], "peak_allocated_gb": m["peak_allocated_gib"] * 2**30 / 1e9,
                        "peak_reserved_gb": m["peak_reserved_gib"] * 2**30 / 1e9, "pairs_per_s": m["summary"]["pairs_per_s"],
                        "eval_peak_allocated_gb": m["eval_peak_allocated_gib"] * 2**30 / 1e9}
    before = [json.loads(p.read_text()) for p in with_cache]
    record = {
        "command": "python bench/gpu/gpu_check.py report-llama " + " ".join(sys.argv[2:]),
        "gpu": meta.get("cuda_device"), "versions": meta.get("versions"),
        "method": "the grid's llama-2-* / aoe / nli cell (aoe.config.cell_settings.train_params; 160 pairs a process = 640 over 4 GPUs, "
                  "max_length 45) through aoe.training.train.train on random weights of the published shapes, 12 steps on SNLI "
                  "test pairs; then aoe.evaluate.run.run_sts_evaluation of the adapter on STS-B test (fp16 base), each in a "
                  "process of its own; peaks: torch.cuda.max_memory_allocated / max_memory_reserved",
        "estimates": "aoe.config.memory as of this report, at each run's shape and token counts",
        "cuda": {"llama": shapes},
        "training_with_key_value_cache": {
            "note": "the same cell before aoe.model.encoder.no_cache (the decoder's default use_cache), same GPU and session",
            "runs": [{k: r.get(k) for k in ("shape", "layers", "peak_allocated_gb", "peak_reserved_gb", "outside_allocator_gb")}
                     | {"pairs_per_s": r["summary"]["pairs_per_s"]} for r in before]},
        "h200_2026_11_27_before_no_cache": h200,
    }
    if fast_lane is not None:
        root = ET.parse(fast_lane).getroot()
        counts = {k: sum(int(s.get(k, 0)) for s in root.iter("testsuite")) for k in ("tests", "failures", "errors", "skipped")}
        failed = [{"test": f"{c.get('classname')}::{c.get('name')}", "message": (c.find("failure") if c.find("failure") is not None
                   else c.find("error")).get("message", "")[:300]}
                  for c in root.iter("testcase") if c.find("failure") is not None or c.find("error") is not None]
        record["fast_lane"] = {**counts, "failed": failed}
    path = C.write_json("llama_cells", record, str(out))
    rows = []
    for tag, r in shapes.items():
        e = r["estimate"]
        rows.append([tag, f"{r['peak_allocated_gb']:.2f}", f"{e['allocated_gb']:.2f}", f"{r['peak_reserved_gb']:.2f}",
                     f"{e['reserved_gb']:.2f}", f"{r['summary']['pairs_per_s']:.1f}"]
                    + [(lambda v: f"{max(v['load']['peak_allocated_gb'], v['embed']['peak_allocated_gb']):.2f} / "
                                  f"{v['estimate']['allocated_gb']:.2f}")(r["eval"][k]) if k in r["eval"] else "-"
                       for k in ("default", "kv_cache")])
    C.print_table(f"LLaMA-2 cells on {record['gpu']}: measured / aoe.config.memory (GB)",
                  ["shape-compute", "train allocated", "model", "reserved", "model", "pairs/s", "eval", "eval with kv cache"], rows)
    for b in record["training_with_key_value_cache"]["runs"]:
        print(f"  before aoe.model.encoder.no_cache, {b['shape']}: training allocated {b['peak_allocated_gb']:.2f} GB, reserved "
              f"{b['peak_reserved_gb']:.2f} GB, {b['pairs_per_s']:.1f} pairs/s")
    print(f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--bundle", default=".gpu")
    p.add_argument("--mirror", default=None)
    p.add_argument("--parts", default=",".join(PARTS), help="what the bundle serves (llama alone needs no MiniLM weights)")
    r = sub.add_parser("run")
    r.add_argument("--bundle", default=".gpu")
    r.add_argument("--device", choices=["cuda", "cpu"], required=True)
    r.add_argument("--parts", default="minilm,bert-nli")
    r.add_argument("--out", required=True)
    r.add_argument("--precisions", default="no,bf16,fp16", help="mixed_precision values of the BERT-base NLI runs")
    r.add_argument("--nli-steps", default=NLI_STEPS, help="CELL=STEPS,...: the NLI cells trained and their optimizer steps")
    r.add_argument("--llama-shapes", default="7b-8,7b,13b", help=f"part llama: shapes among {sorted(LLAMA_SHAPES)}")
    r.add_argument("--llama-steps", type=int, default=LLAMA_STEPS)
    r.add_argument("--llama-variants", default="",
                   help="part llama, first shape only: compute=bf16 (a second training), kv_cache (a second evaluation), "
                        "comma-separated (about a minute more on an H100); default none")
    lt = sub.add_parser("_llama_train", help="part llama: one shape's training (run's child process)")
    for a in ("--bundle", "--shape", "--device", "--compute", "--out"):
        lt.add_argument(a, required=True)
    lt.add_argument("--steps", type=int, required=True)
    le = sub.add_parser("_llama_eval", help="part llama: one trained shape's evaluation (run's child process)")
    for a in ("--bundle", "--model", "--device", "--out"):
        le.add_argument(a, required=True)
    le.add_argument("--kv-cache", action="store_true")
    one = sub.add_parser("_one", help="one BERT-base NLI run (run's child process)")
    for a in ("--bundle", "--backbone", "--cell", "--precision", "--out"):
        one.add_argument(a, required=True)
    one.add_argument("--steps", type=int, required=True)
    rep = sub.add_parser("report")
    rep.add_argument("cuda_json")
    rep.add_argument("cpu_json")
    rep.add_argument("--out", default=str(RESULT))
    rep.add_argument("--profile", action="append", default=[], help="PRECISION=PATH of a profile subcommand's output")
    rep.add_argument("--nli-json", default=None, help="a later `run --parts bert-nli` output whose NLI cells replace CUDA_JSON's")
    rl = sub.add_parser("report-llama", help="bench/gpu/results/llama_cells.json from part llama's outputs")
    rl.add_argument("runs", nargs="*", type=Path, help="run JSONs (their shapes replace those of --shapes-dir)")
    rl.add_argument("--shapes-dir", action="append", default=[], type=Path, help="a run's work folder, for a run cut short")
    rl.add_argument("--with-cache", action="append", default=[], type=Path, help="_llama_train records with the cache on")
    rl.add_argument("--fast-lane", type=Path, help="the fast lane's JUnit XML (bench/gpu/gpu_fast_lane.sh)")
    rl.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "llama_cells.json")
    prof = sub.add_parser("profile", help="torch.profiler over the BERT-base AoE NLI cell")
    prof.add_argument("--bundle", default=".gpu")
    prof.add_argument("--precision", choices=["no", "bf16", "fp16"], required=True)
    prof.add_argument("--steps", type=int, default=1)
    prof.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "prepare":
        import _common as C

        prepare(Path(args.bundle), args.mirror or C.default_mirror(), [x.strip() for x in args.parts.split(",") if x.strip()])
    elif args.cmd == "run":
        steps = dict(x.split("=") for x in args.nli_steps.split(",") if x.strip())
        if set(steps) - set(NLI_CELLS):
            raise SystemExit(f"--nli-steps: cells among {NLI_CELLS}, got {args.nli_steps!r}")
        shapes = [x.strip() for x in args.llama_shapes.split(",") if x.strip()]
        if set(shapes) - set(LLAMA_SHAPES):
            raise SystemExit(f"--llama-shapes: shapes among {sorted(LLAMA_SHAPES)}, got {args.llama_shapes!r}")
        run(Path(args.bundle), args.device, [x.strip() for x in args.parts.split(",") if x.strip()], Path(args.out),
            {k: int(v) for k, v in steps.items()}, [x.strip() for x in args.precisions.split(",") if x.strip()],
            shapes, args.llama_steps, [x.strip() for x in args.llama_variants.split(",") if x.strip()])
    elif args.cmd == "report-llama":
        report_llama(args.runs, args.shapes_dir, args.with_cache, args.fast_lane, args.out)
    elif args.cmd == "_llama_train":
        llama_train(Path(args.bundle), args.shape, args.device, Path(args.out).parent, args.steps, args.compute, Path(args.out))
    elif args.cmd == "_llama_eval":
        llama_eval(Path(args.bundle), Path(args.model), args.device, args.kv_cache, Path(args.out))
    elif args.cmd == "profile":
        profile_nli(Path(args.bundle), args.precision, args.steps, Path(args.out))
    elif args.cmd == "_one":
        one_nli_run(Path(args.bundle), Path(args.backbone), args.cell, args.steps, args.precision, Path(args.out))
    else:
        report(Path(args.cuda_json), Path(args.cpu_json), Path(args.out), args.profile,
               Path(args.nli_json) if args.nli_json else None)


if __name__ == "__main__":
    main()

"""aoe.memory's GPU model against the GPU runs it was built from, and its terms one by one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from aoe.memory import (ALLOCATOR_RESERVE, ARCHS, CARD_USABLE, CUDA_CONTEXT_GB, DTYPE_BYTES, GB, GPU_CARDS_GB, eval_gpu_estimate,
                        qlora_gpu_estimate)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "measurements" / "gpu-2026-11-27"
# the grid's LLaMA cells: 160 pairs a process (640 over 4 GPUs) x 2 texts x 45 tokens
TOKENS = 160 * 2 * 45


def _arch(backbone: str, layers: int):
    return dataclasses.replace(ARCHS[backbone], layers=layers)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the measurements folder {SHARED} is not beside the repository")
@pytest.mark.parametrize("name", ["llama-2-7b-shape-8-layers-qlora.json", "llama-2-7b-shape-qlora.json", "llama-2-13b-shape-qlora.json"])
def test_training_peak_within_10_percent_of_the_h200_measurements(name):
    """The three shapes of ../shared/measurements/gpu-2026-11-27 (one H200, the cells through aoe.train.train at
    060a9dc): peak allocated and reserved."""
    m = json.loads((SHARED / name).read_text())
    backbone = m["estimate_same_layers"]["backbone"]
    e = qlora_gpu_estimate(backbone, _arch(backbone, m["layers"]), TOKENS, compute_dtype=m["params"]["qlora_compute_dtype"])
    allocated = m["peak_allocated_gib"] * 2**30 / GB
    reserved = m["peak_reserved_gib"] * 2**30 / GB
    assert e["allocated_gb"] == pytest.approx(allocated, rel=0.10)
    assert e["reserved_gb"] == pytest.approx(reserved, rel=0.10)


def _gpu_runs() -> list[dict]:
    path = REPO / "bench" / "results" / "gpu" / "llama_cells.json"
    if not path.is_file():
        return []
    return [dict(tag=tag, **rec) for tag, rec in json.loads(path.read_text())["cuda"]["llama"].items()]


@pytest.mark.parametrize("run", _gpu_runs(), ids=lambda r: r["tag"])
def test_training_and_evaluation_within_10_percent_of_the_committed_gpu_run(run):
    """bench/results/gpu/llama_cells.json (bench/gpu_check.py --parts llama): each shape's training peak, and its
    evaluation's peak with and without the key/value cache, against the model at the run's own token counts."""
    a = _arch(run["backbone"], run["layers"])
    e = qlora_gpu_estimate(run["backbone"], a, TOKENS, compute_dtype=run["compute_dtype"])
    assert e["allocated_gb"] == pytest.approx(run["peak_allocated_gb"], rel=0.10)
    assert e["reserved_gb"] == pytest.approx(run["peak_reserved_gb"], rel=0.10)
    for variant, ev in run["eval"].items():
        est = eval_gpu_estimate(run["backbone"], a, ev["batch_tokens_max"], kv_cache=ev["kv_cache"])
        measured = max(ev["load"]["peak_allocated_gb"], ev["embed"]["peak_allocated_gb"])
        assert est["allocated_gb"] == pytest.approx(measured, rel=0.10), variant


def test_the_compute_dtype_changes_only_the_dequantized_weight():
    a = ARCHS["llama-2-7b"]
    fp32, bf16 = (qlora_gpu_estimate("llama-2-7b", a, TOKENS, compute_dtype=c) for c in ("fp32", "bf16"))
    largest = max(i * o for i, o in a.linear_shapes())
    assert (fp32["allocated_gb"] - bf16["allocated_gb"]) * GB == pytest.approx(largest * (DTYPE_BYTES["fp32"] - DTYPE_BYTES["bf16"]))
    with pytest.raises(ValueError, match="compute_dtype must be one of"):
        qlora_gpu_estimate("llama-2-7b", a, TOKENS, compute_dtype="int8")


def test_reserved_and_on_gpu_follow_the_allocated_and_the_cards():
    for name in ("llama-2-7b", "llama-2-13b"):
        e = qlora_gpu_estimate(name, ARCHS[name], TOKENS)
        assert e["reserved_gb"] == pytest.approx(e["allocated_gb"] * ALLOCATOR_RESERVE)
        assert e["on_gpu_gb"] == pytest.approx(e["reserved_gb"] + CUDA_CONTEXT_GB)
        assert [e[f"fits_{c}gb"] for c in GPU_CARDS_GB] == [e["on_gpu_gb"] * GB <= CARD_USABLE * c * 2**30 for c in GPU_CARDS_GB]
    # what docs/llm.md says: a 7B process trains on a 24 GB card, a 13B one needs a 40 GB card
    seven, thirteen = (qlora_gpu_estimate(n, ARCHS[n], TOKENS) for n in ("llama-2-7b", "llama-2-13b"))
    assert (seven["fits_24gb"], thirteen["fits_24gb"], thirteen["fits_40gb"]) == (True, False, True)


def test_the_evaluation_counts_the_fp16_base_without_the_output_matrix_and_the_cache_by_layer():
    a = ARCHS["llama-2-7b"]
    e = eval_gpu_estimate("llama-2-7b", a, 1000)
    assert e["base_gb"] * GB == (a.params() - a.vocab * a.hidden) * 2 and e["kv_cache_gb"] == 0
    kv = eval_gpu_estimate("llama-2-7b", a, 1000, kv_cache=True)
    assert kv["kv_cache_gb"] * GB == 2 * a.layers * 1000 * a.kv_heads * a.head_dim * 2
    with pytest.raises(ValueError, match="base_dtype must be one of"):
        eval_gpu_estimate("llama-2-7b", a, 1000, base_dtype="nf4")

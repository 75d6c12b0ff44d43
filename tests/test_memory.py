"""aoe.config.memory's GPU model against the GPU runs it was built from, and its terms one by one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from aoe.config.memory import (ARCHS, CARD_USABLE, CUDA_CONTEXT_GB, GB, GPU_CARDS_GB, RESERVE_PER_KEPT, RESERVE_RECOMPUTED_LAYERS,
                        eval_gpu_estimate, qlora_gpu_estimate)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "measurements" / "gpu-2026-11-27"
# the grid's LLaMA cells: 160 pairs a process (640 over 4 GPUs) x 2 texts x 45 tokens
TOKENS = 160 * 2 * 45


def _arch(backbone: str, layers: int):
    return dataclasses.replace(ARCHS[backbone], layers=layers)


RUNS = REPO / "bench" / "gpu" / "results" / "llama_cells.json"


def _gpu_runs() -> list[dict]:
    return [dict(tag=tag, **rec) for tag, rec in json.loads(RUNS.read_text())["cuda"]["llama"].items()]


def test_the_committed_gpu_runs_cover_the_three_shapes_and_both_evaluations():
    tags = {r["tag"] for r in _gpu_runs()}
    assert {"7b-8-fp32", "7b-fp32", "13b-fp32"} <= tags
    assert {"default", "kv_cache"} <= set(next(r for r in _gpu_runs() if r["tag"] == "7b-8-fp32")["eval"])


@pytest.mark.parametrize("run", _gpu_runs(), ids=lambda r: r["tag"])
def test_training_and_evaluation_within_10_percent_of_the_committed_gpu_run(run):
    """bench/gpu/results/llama_cells.json (bench/gpu/gpu_check.py --parts llama, one H100): each shape's training peak
    (allocated and reserved), and its evaluation's peak with and without the key/value cache, against the model
    at the run's own token counts."""
    a = _arch(run["backbone"], run["layers"])
    e = qlora_gpu_estimate(run["backbone"], a, TOKENS)
    assert e["allocated_gb"] == pytest.approx(run["peak_allocated_gb"], rel=0.10)
    assert e["reserved_gb"] == pytest.approx(run["peak_reserved_gb"], rel=0.10)
    assert CUDA_CONTEXT_GB == pytest.approx(run["outside_allocator_gb"], rel=0.10)
    for variant, ev in run["eval"].items():
        est = eval_gpu_estimate(run["backbone"], a, ev["batch_tokens_max"], kv_cache=ev["kv_cache"])
        measured = max(ev["load"]["peak_allocated_gb"], ev["embed"]["peak_allocated_gb"])
        assert est["allocated_gb"] == pytest.approx(measured, rel=0.10), variant


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the measurements folder {SHARED} is not beside the repository")
def test_the_h100_run_with_the_cache_repeats_the_h200_measurement():
    """The H200 measurements (../shared/measurements/gpu-2026-11-27) ran before aoe.model.encoder.no_cache. The same
    cell with the cache on, on the H100 of the committed runs, allocates what the H200 did (to 0.1%): the
    allocations do not depend on the GPU, and the drop to the committed runs is the cache's."""
    h200 = json.loads((SHARED / "llama-2-7b-shape-8-layers-qlora.json").read_text())
    before = json.loads(RUNS.read_text())["training_with_key_value_cache"]["runs"]
    (run,) = [r for r in before if r["shape"] == "7b-8"]
    assert run["peak_allocated_gb"] == pytest.approx(h200["peak_allocated_gib"] * 2**30 / GB, rel=1e-3)
    assert run["peak_reserved_gb"] == pytest.approx(h200["peak_reserved_gib"] * 2**30 / GB, rel=1e-3)
    (now,) = [r for r in _gpu_runs() if r["tag"] == "7b-8-fp32"]
    assert now["peak_allocated_gb"] < 0.9 * run["peak_allocated_gb"]


def test_reserved_and_on_gpu_add_the_allocators_blocks_and_the_context():
    for name in ("llama-2-7b", "llama-2-13b"):
        e = qlora_gpu_estimate(name, ARCHS[name], TOKENS)
        slack = RESERVE_RECOMPUTED_LAYERS * e["recomputed_layer_gb"] + RESERVE_PER_KEPT * e["checkpointed_activations_gb"]
        assert e["reserved_gb"] == pytest.approx(e["allocated_gb"] + slack)
        assert e["on_gpu_gb"] == pytest.approx(e["reserved_gb"] + CUDA_CONTEXT_GB)
        assert [e[f"fits_{c}gb"] for c in GPU_CARDS_GB] == [e["on_gpu_gb"] * GB <= CARD_USABLE * c * 2**30 for c in GPU_CARDS_GB]
    # what docs/llm.md and docs/cluster.md say: a process of either trains on a 24 GB card at 160 pairs
    seven, thirteen = (qlora_gpu_estimate(n, ARCHS[n], TOKENS) for n in ("llama-2-7b", "llama-2-13b"))
    assert (seven["fits_24gb"], thirteen["fits_24gb"]) == (True, True)
    # the evaluation's fp16 13B base does not fit one
    assert not eval_gpu_estimate("llama-2-13b", ARCHS["llama-2-13b"], 3648)["fits_24gb"]


def test_the_evaluation_counts_the_fp16_base_without_the_output_matrix_and_the_cache_by_layer():
    a = ARCHS["llama-2-7b"]
    e = eval_gpu_estimate("llama-2-7b", a, 1000)
    assert e["base_gb"] * GB == (a.params() - a.vocab * a.hidden) * 2 and e["kv_cache_gb"] == 0
    kv = eval_gpu_estimate("llama-2-7b", a, 1000, kv_cache=True)
    assert kv["kv_cache_gb"] * GB == 2 * a.layers * 1000 * a.kv_heads * a.head_dim * 2
    with pytest.raises(ValueError, match="base_dtype must be one of"):
        eval_gpu_estimate("llama-2-7b", a, 1000, base_dtype="nf4")


def test_the_docs_card_tables_print_what_the_model_computes():
    """docs/cluster.md's and docs/llm.md's memory numbers are aoe.config.memory's (bench/gpu/llm_memory.py prints them)."""
    llm, cluster = ((REPO / "docs" / f).read_text() for f in ("llm.md", "cluster.md"))
    for name in ("llama-2-7b", "llama-2-13b"):
        a = ARCHS[name]
        t = qlora_gpu_estimate(name, a, TOKENS)
        sts, full = (eval_gpu_estimate(name, a, n) for n in (3648, 64 * 512))
        assert f"| {t['on_gpu_gb']:.1f} GB |" in cluster and f"| {t['on_gpu_gb']:.1f} GB |" in llm
        assert f"| {sts['on_gpu_gb']:.1f} GB; {full['on_gpu_gb']:.1f} GB |" in cluster
        assert f"| {t['allocated_gb']:.1f} GB (" in llm  # beside the measured peak
        for e in (sts, full):
            assert f"| {e['forward_gb']:.2f} GB | {e['allocated_gb']:.1f} GB" in llm


# ---- memory requests on retry: a job killed for its memory asks for more the next time


def test_a_retry_asks_for_more_memory_than_the_attempt_before():
    from aoe.config.memory import RETRY_MEMORY_FACTOR, grows_on_retry, memory_for_attempt

    assert RETRY_MEMORY_FACTOR > 1  # the same request would be killed again at the same point
    assert [memory_for_attempt(3000, k) for k in (1, 2, 3)] == [3000, 4500, 6750]
    # a rule's mem_mb as the rules declare it: a function of the wildcards, or a number; Snakemake passes the
    # attempt to a resource function by the parameter's name
    per_backbone = grows_on_retry(lambda wildcards: {"bert": 16000}[wildcards.backbone])
    wc = type("Wildcards", (), {"backbone": "bert"})()
    assert [per_backbone(wc, attempt=k) for k in (1, 2)] == [16000, 24000]
    assert grows_on_retry(8000)(wc, attempt=2) == 12000
    import inspect

    assert "attempt" in inspect.signature(per_backbone).parameters


def test_every_rule_memory_request_grows_on_retry():
    # a mem_mb written as a plain number or a wildcards-only function in a rule is the same request on every
    # retry: the scheduler's OOM kill comes back at the same point (the sweep's S2 on the CI cluster)
    import re

    from tests.workflow_utils import REPO

    fixed = []
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for number, line in enumerate(smk.read_text().splitlines(), start=1):
            m = re.match(r"\s+mem_mb=(.*)", line)
            if m and not re.match(r"(grows_on_retry|eval_resources|train_resources)\(", m[1]):
                fixed.append(f"{smk.name}:{number}: {line.strip()}")
    assert not fixed, "\n".join(fixed)

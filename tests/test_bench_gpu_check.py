"""bench/gpu/gpu_check.py's part llama in its CPU mode: a tiny LLaMA shape through the same code the GPU run takes
(prepare the bundle, train the grid's LLaMA cell in a process of its own, evaluate it with and without the
key/value cache), so the script that spends the GPU machine's minutes has run before it gets there."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from tests.workflow_utils import MIRROR, NO_MIRROR, REPO

pytestmark = pytest.mark.skipif(MIRROR is None, reason=NO_MIRROR)


def test_the_llama_part_runs_a_tiny_shape_on_the_cpu(tmp_path):
    # its own work folder: the script's default /tmp/aoe-gpu-check is shared by every checkout on the machine
    env = {**os.environ, "AOE_DATA_MIRROR": str(MIRROR), "OMP_NUM_THREADS": "1", "AOE_GPU_CHECK_WORK": str(tmp_path / "work")}
    bundle, out = tmp_path / "bundle", tmp_path / "cpu.json"
    script = str(REPO / "bench" / "gpu" / "gpu_check.py")
    subprocess.run([sys.executable, script, "prepare", "--bundle", str(bundle), "--parts", "llama"], cwd=REPO, env=env, check=True,
                   capture_output=True, timeout=300)
    assert not (bundle / "minilm-l6").exists()  # part llama carries no MiniLM weights
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["llama"]["llama-2-7b"]["train"]["qlora_compute_dtype"] == "fp32" and meta["llama"]["llama-2-7b"]["processes"] == 4
    proc = subprocess.run([sys.executable, script, "run", "--bundle", str(bundle), "--device", "cpu", "--parts", "llama",
                           "--llama-shapes", "tiny", "--llama-steps", "2", "--llama-variants", "kv_cache", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(out.read_text())["llama"]["tiny-fp32"]
    assert run["summary"]["steps"] == 2 and run["layers"] == 2 and run["compute_dtype"] == "fp32"
    assert run["params"]["finetune"] == "qlora" and run["estimate"]["tokens_per_micro_batch"] == 8 * 2 * run["params"]["max_length"]
    plain, cached = run["eval"]["default"], run["eval"]["kv_cache"]
    assert (plain["kv_cache"], cached["kv_cache"]) == (False, True)
    # the same batches and the same embeddings: the cache changes memory, not the numbers
    assert plain["batch_tokens_max"] == cached["batch_tokens_max"] > 0
    assert math.isfinite(plain["stsb_spearman_random_weights"])
    assert plain["stsb_spearman_random_weights"] == pytest.approx(cached["stsb_spearman_random_weights"], abs=1e-9)
    assert plain["estimate"]["kv_cache_gb"] == 0 < cached["estimate"]["kv_cache_gb"]
    assert "llama tiny-fp32:" in proc.stdout

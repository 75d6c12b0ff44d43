"""bench/speed/train_vs_official.py's GPU mode and what travels for it (bench/gpu/gpu_official.sh, bench/gpu/gpu_carry.py --for official),
checked on the CPU before the GPU machine's minutes are spent: the refusals, the official side's wheels, the script,
and what issue 63's run reads and decides without the official package (the settings as the grid resolves them,
the shapes built from a config, the goal)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from tests.workflow_utils import REPO

sys.path[:0] = [str(REPO / "bench" / "speed"), str(REPO / "bench" / "gpu")]
import gpu_carry  # noqa: E402
import train_vs_official as T  # noqa: E402

SCRIPT = str(REPO / "bench" / "speed" / "train_vs_official.py")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA runs --device cuda for real")
def test_device_cuda_without_a_gpu_is_refused_before_any_work(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--device", "cuda", "--out", str(tmp_path / "x.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "--device cuda: torch sees no CUDA device here" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_tables_folder_without_the_split_names_the_file_and_who_writes_it(tmp_path):
    proc = subprocess.run([sys.executable, SCRIPT, "--tables", str(tmp_path), "--official-python", sys.executable,
                           "--out", str(tmp_path / "x.json")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"--tables {tmp_path}: no stsb-train.parquet there (bench/gpu/gpu_check.py prepare writes it)" in proc.stderr


def test_official_wheels_are_its_venvs_versions_of_what_the_image_lacks_or_angle_emb_pins():
    freeze = ["accelerate==1.15.0", "angle-emb", "@", "file:///tmp/x/angle_emb-0.6.1-py3-none-any.whl", "boltons==26.2.0",
              "numpy==2.4.6", "torch==2.13.0+cpu", "transformers==5.3.0", "tokenizers==0.22.2", "huggingface-hub==1.33.0",
              "nvidia-cublas==13.1", "scipy==1.17.1", "datasets==5.2.0", "Bitsandbytes==0.49.2"]
    assert gpu_carry.select_official(freeze) == [
        "accelerate==1.15.0", "bitsandbytes==0.49.2", "boltons==26.2.0", "datasets==5.2.0", "huggingface-hub==1.33.0",
        "tokenizers==0.22.2", "transformers==5.3.0", "angle-emb==0.6.1"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_official_script_parses_and_asks_for_its_inputs(tmp_path):
    script = REPO / "bench" / "gpu" / "gpu_official.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    proc = subprocess.run(["bash", str(script)], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "the folder of carried wheels" in proc.stderr
    # without wheels it runs this environment as it is, and then it needs the official interpreter
    env = {k: v for k, v in os.environ.items() if k != "OFFICIAL_PYTHON"} | {"OUT": str(tmp_path)}
    proc = subprocess.run(["bash", str(script), "-", ".gpu"], cwd=REPO, capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode != 0 and "WHEELS - needs OFFICIAL_PYTHON" in proc.stderr


def test_the_device_run_times_minilm_and_bert_base_at_the_grid_cells():
    """gpu_official.sh's default runs are the script's GPU_RUNS: MiniLM at the bench setting, bert-base at the three cells."""
    text = (REPO / "bench" / "gpu" / "gpu_official.sh").read_text()
    assert re.search(r"^runs=\$\{RUNS:-" + re.escape(T.GPU_RUNS) + r"\}$", text, re.M)
    assert T.parse_runs(T.GPU_RUNS) == [("minilm", "bench"), ("bert-base", "nli-aoe"), ("bert-base", "stsb-aoe"),
                                        ("bert-base", "stsb-angle_arxiv")]
    steps = re.search(r"^steps=\$\{STEPS:-(.+)\}$", text, re.M).group(1)
    assert T.parse_steps(steps, ["bench", "nli-aoe", "stsb-aoe", "stsb-angle_arxiv"]) == {
        "bench": 40, "nli-aoe": 3, "stsb-aoe": 40, "stsb-angle_arxiv": 40}


def test_runs_and_steps_are_checked_with_the_names_they_take():
    with pytest.raises(SystemExit, match="'bert-large:nli-aoe' is not SHAPE:SETTING"):
        T.parse_runs("minilm:bench,bert-large:nli-aoe")
    with pytest.raises(SystemExit, match="twice"):
        T.parse_runs("minilm:bench,minilm:bench")
    assert T.parse_steps("40,nli-aoe=3", ["bench", "nli-aoe"]) == {"bench": 40, "nli-aoe": 3}
    with pytest.raises(SystemExit, match="no step count for bench"):
        T.parse_steps("nli-aoe=3", ["bench", "nli-aoe"])
    with pytest.raises(SystemExit, match="'nli=3' is neither"):
        T.parse_steps("40,nli=3", ["bench"])
    assert [T.log_every(n) for n in (3, 19, 20, 50)] == [1, 1, 10, 10]


def test_cell_settings_are_read_from_the_resolved_cell_not_written_here():
    """Whatever train_params resolves (here unusual values) is what both trainers get; bench is the script's own."""
    calls = []

    def params_of(objective, trainset):
        calls.append((objective, trainset))
        return {"batch_size": 96, "gradient_accumulation_steps": 3, "max_length": 77, "mixed_precision": "bf16",
                "length_buckets": 2, "score_range": [0, 5], "format": "pairs"}

    s = T.resolve_settings(["bench", "stsb-aoe"], params_of)
    assert calls == [("aoe", "stsb")]
    assert s["bench"] | {} == {**T.BENCH, "name": "bench", "micro_batch": 32}
    got = s["stsb-aoe"]
    assert (got["batch_size"], got["gradient_accumulation_steps"], got["micro_batch"], got["max_length"],
            got["mixed_precision"], got["length_buckets"], got["score_range"]) == (96, 3, 32, 77, "bf16", 2, [0.0, 5.0])
    assert got["source"] == "aoe.config.cell_settings.train_params(config.yaml, 'bert-base-uncased', 'aoe', 'stsb', 42)"
    assert T.describe(got) == "batch 96 (3 x 32), max_length 77, bf16"


def test_batch_cap_keeps_the_accumulation_and_bad_cells_stop_at_planning():
    def nli(objective, trainset, **kw):
        return {"batch_size": 2048, "gradient_accumulation_steps": 16, "max_length": 128, "mixed_precision": "no",
                "length_buckets": 4, "score_range": [0, 1], "format": "pairs", **kw}

    s = T.resolve_settings(["nli-aoe"], nli, batch_cap=64)["nli-aoe"]
    assert (s["batch_size"], s["micro_batch"], s["batch_size_resolved"]) == (64, 4, 2048)
    assert T.describe(s) == "batch 64 (16 x 4) (capped from 2048), max_length 128, fp32"
    with pytest.raises(SystemExit, match="a cap below 16 leaves them empty"):
        T.resolve_settings(["nli-aoe"], nli, batch_cap=8)
    with pytest.raises(SystemExit, match="format 'triplets'"):
        T.resolve_settings(["nli-aoe"], lambda o, t: nli(o, t, format="triplets"))
    with pytest.raises(SystemExit, match="fp16 needs --device cuda"):
        T.resolve_settings(["nli-aoe"], lambda o, t: nli(o, t, mixed_precision="fp16"), device="cpu")
    assert T.resolve_settings(["nli-aoe"], lambda o, t: nli(o, t, mixed_precision="fp16"), device="cuda")["nli-aoe"]


def test_bert_base_is_the_published_shape():
    """bert-base-uncased's config.json values, which transformers keeps as BertConfig()'s defaults. (Building a shape
    imports BERT's modeling code, seconds of CPU: the CPU proof of gpu_official.sh builds one, bench/gpu/sessions.md.)"""
    from transformers import BertConfig

    assert {k: getattr(BertConfig(), k) for k in T.BERT_BASE} == T.BERT_BASE
    assert {k for k, v in T.SHAPES["bert-base-tiny"].items() if v != T.BERT_BASE[k]} == {
        "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}  # the vocabulary and positions stay


def _item(key, shape, setting, sha="a", table="t.parquet", batch=32):
    return {"key": key, "shape": shape, "setting": setting, "table": table, "steps": 50, "length_buckets": 4,
            "engine_inputs_sha256": sha,
            "setting_resolved": {"batch_size": batch, "gradient_accumulation_steps": 1, "mixed_precision": "no"}}


def test_settings_that_train_the_same_batches_are_timed_once():
    items = [_item("bert-base:stsb-aoe", "bert-base", "stsb-aoe"),
             _item("bert-base:stsb-angle_arxiv", "bert-base", "stsb-angle_arxiv"),  # max_length 512: same padded inputs
             _item("minilm:stsb-aoe", "minilm", "stsb-aoe"),                        # another shape
             _item("bert-base:other", "bert-base", "other", sha="b")]               # other inputs
    timed = T.mark_same(items)
    assert [x["key"] for x in timed] == ["bert-base:stsb-aoe", "minilm:stsb-aoe", "bert-base:other"]
    assert [x["same_as"] for x in items] == [None, "bert-base:stsb-aoe", None, None]


def test_goal_is_each_shapes_lowest_median_ratio():
    results = [{"shape": "minilm", "setting": "bench", "engine_over_official_median": 2.01},
               {"shape": "bert-base", "setting": "nli-aoe", "engine_over_official_median": 1.32},
               {"shape": "bert-base", "setting": "stsb-aoe", "engine_over_official_median": 1.9},
               {"shape": "bert-base", "setting": "x", "engine_over_official_median": None}]
    goal = T.evaluate_goal(results, 1.5, repeats=3)
    assert goal["per_shape"]["minilm"]["met"] and not goal["per_shape"]["bert-base"]["met"]
    assert goal["per_shape"]["bert-base"]["lowest_setting"] == "nli-aoe" and not goal["met"] and goal["conclusive"]
    lines = T.goal_lines(goal, "cuda (NVIDIA H200)", 3)
    assert lines[2] == "  bert-base: 1.32x (nli-aoe 1.32x, stsb-aoe 1.90x): NOT met"
    assert lines[-1] == "  on every shape: NOT met"
    one = T.evaluate_goal(results[:1], 1.5, repeats=1)
    assert one["met"] and not one["conclusive"]
    assert T.goal_lines(one, "cpu", 1)[-1] == "  on every shape: met (not conclusive: 1 repeat, the goal asks 3)"

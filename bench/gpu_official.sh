#!/usr/bin/env bash
# The engine against the official trainer (angle-emb 0.6.1) on the GPU machine (bench/README.md, "GPU"), from the
# repository root there, with what travelled from here:
#   .venv/bin/python bench/gpu_check.py prepare --bundle .gpu --parts llama   # STS-B train/test tables (2.3 MiB)
#   .venv/bin/python bench/gpu_carry.py wheels --for official --out .whl       # ours + .whl/official (55 MiB)
#   bash bench/gpu_official.sh .whl .gpu                                      # there (device run, carry .whl .gpu)
# Our wheels go over the image's Python (its torch is the CUDA build); angle-emb's go into a folder of their own,
# the official worker's only PYTHONPATH entry, so each side imports its own transformers. MiniLM travels without
# its weights: random ones of its shape (speed and memory only; no STS-B score is measured there).
# Writes train_vs_official_cuda.json and the printed table (train_vs_official_cuda.txt) into $OUT.
set -uo pipefail
wheels=${1:?the folder of carried wheels}
bundle=${2:?the bundle of bench/gpu_check.py prepare}
out=${OUT:-bench/out/gpu_official}
site=${AOE_GPU_SITE:-/tmp/aoe-site}
angle_site=${AOE_GPU_ANGLE_SITE:-/tmp/angle-site}
steps=${STEPS:-200}
repeats=${REPEATS:-3}
mkdir -p "$out"
pip=(python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade)
"${pip[@]}" --target "$site" "$wheels"/*.whl || exit 1
"${pip[@]}" --target "$angle_site" "$wheels"/official/*.whl || exit 1
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
python3 bench/gpu_carry.py standin-minilm | tee "$out/train_vs_official_cuda.txt"
python3 bench/train_vs_official.py --device cuda --tables "$bundle/tables" --official-python python3 \
    --official-site "$angle_site" --eval none --steps "$steps" --repeats "$repeats" --threads 8 \
    --out "$out/train_vs_official_cuda.json" 2>&1 | grep -v '^Saving the dataset' | tee -a "$out/train_vs_official_cuda.txt"
exit "${PIPESTATUS[0]}"

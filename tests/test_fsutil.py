"""atomic_dir's partial folders: removed on error, on SIGTERM (with exit_on_sigterm), and by the next run after a SIGKILL.

The kills are real: a child process is stopped inside ``atomic_dir`` by a signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from aoe.util.fsutil import atomic_dir, atomic_file, exit_on_sigterm, remove_stale_temporaries
from tests.workflow_utils import REPO

# A job that stops inside atomic_dir, after writing part of its output, until it is killed.
CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from aoe.util.fsutil import atomic_dir
if {handler!r}:
    from aoe.util.fsutil import exit_on_sigterm
    exit_on_sigterm()
with atomic_dir({out!r}) as tmp:
    (tmp / "part").write_text("half written")
    Path({ready!r}).write_text("inside")
    time.sleep(120)
"""


def _hidden(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the child exited ({proc.returncode}) before it was ready: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the child was not ready within {timeout} s")
        time.sleep(0.05)


def _start_child(tmp_path: Path, handler: bool) -> tuple[subprocess.Popen, Path, Path]:
    out, ready = tmp_path / "results" / "train", tmp_path / "ready"
    code = CHILD.format(repo=str(REPO), handler=handler, out=str(out), ready=str(ready))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    return proc, out, ready


def test_a_sigterm_removes_the_partial_folder_with_exit_on_sigterm(tmp_path):
    proc, out, _ = _start_child(tmp_path, handler=True)
    assert len(_hidden(out.parent, "train")) == 1  # the partial folder exists while the job runs
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated by SIGTERM; removing partial outputs" in err
    assert "Traceback" not in err
    assert list(out.parent.iterdir()) == []  # no partial folder, no output


def test_a_second_sigterm_kills_at_once(tmp_path):
    calls = []
    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert exit_on_sigterm() is True
        assert exit_on_sigterm() is True  # a second call keeps the handler
        with pytest.raises(SystemExit) as exc:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs between bytecodes, here
        calls.append(exc.value.code)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the next one is not delayed by cleanups
    finally:
        signal.signal(signal.SIGTERM, before)
    assert calls == [143]


def test_exit_on_sigterm_leaves_another_handler_and_other_threads_alone():
    def mine(signum, frame):
        pass

    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, mine)
        assert exit_on_sigterm() is False
        assert signal.getsignal(signal.SIGTERM) is mine
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        result = []
        thread = threading.Thread(target=lambda: result.append(exit_on_sigterm()))
        thread.start()
        thread.join()
        assert result == [False] and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


FORKED = """
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from aoe.util.fsutil import atomic_dir, exit_on_sigterm
exit_on_sigterm()
with atomic_dir({out!r}) as tmp:
    pid = os.fork()
    if pid == 0:  # a worker process forked inside the folder's lifetime, as a data loader's
        Path({ready!r}).write_text("inside")
        time.sleep(120)
        os._exit(0)
    while not Path({ready!r}).exists():
        time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)
    _, status = os.waitpid(pid, 0)
    print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exit", tmp.is_dir())
    (tmp / "done").write_text("complete")
"""


def test_a_forked_child_does_not_run_its_parents_cleanups(tmp_path):
    out = tmp_path / "results" / "train"
    code = FORKED.format(repo=str(REPO), out=str(out), ready=str(tmp_path / "ready"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(int(signal.SIGTERM)), "True"]  # killed by the signal; the folder still there
    assert sorted(p.name for p in out.parent.iterdir()) == ["train"] and (out / "done").is_file()


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM without the handler"])
def test_the_next_run_removes_what_a_killed_run_left(tmp_path, sig):
    proc, out, ready = _start_child(tmp_path, handler=False)
    proc.send_signal(signal.SIGKILL if sig == "SIGKILL" else signal.SIGTERM)
    proc.communicate(timeout=60)
    (left,) = _hidden(out.parent, "train")  # nothing ran the cleanup
    assert (out.parent / left / "part").is_file() and not out.exists()
    with atomic_dir(out) as tmp:
        assert _hidden(out.parent, "train") == [tmp.name]  # removed when the next run starts
        (tmp / "done").write_text("complete")
    assert sorted(p.name for p in out.parent.iterdir()) == ["train"]
    assert sorted(p.name for p in out.iterdir()) == ["done"]


def test_only_atomic_dirs_own_temporary_names_are_removed(tmp_path):
    out = tmp_path / "train"
    stale = [".train.abcd_123", ".train.zz9zz9zz"]
    kept_dirs = [
        ".train.abcd1234.x",  # longer than mkdtemp's 8 characters
        ".train.abc",  # shorter
        ".train.ABCD1234",  # mkdtemp never uses capitals
        ".other.abcd1234",  # another output's
        ".train2.abcd1234",
        "train.ckpt",  # training checkpoints (aoe.training.train.checkpoint_dir)
        "train.abcd1234",  # not hidden
    ]
    for name in stale + kept_dirs:
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    (tmp_path / ".train.parquet1.tmp").write_text("x")  # aoe.data.io's temporary files
    (tmp_path / ".train.file1234").write_text("x")  # a file, not atomic_dir's folder
    (tmp_path / "target").mkdir()
    (tmp_path / ".train.link1234").symlink_to(tmp_path / "target")
    removed = remove_stale_temporaries(out)
    assert sorted(p.name for p in removed) == sorted(stale)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*kept_dirs, ".train.parquet1.tmp", ".train.file1234", "target", ".train.link1234"]
    )
    assert (tmp_path / "target").is_dir()
    assert remove_stale_temporaries(tmp_path / "absent" / "train") == []


def test_an_error_inside_removes_the_temporary_and_keeps_the_old_output(tmp_path):
    out = tmp_path / "train"
    out.mkdir()
    (out / "old").write_text("previous result")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_dir(out) as tmp:
            (tmp / "part").write_text("x")
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]
    assert (out / "old").read_text() == "previous result"


# --- atomic_file: every single-file result of the package is written through it ---


def test_atomic_file_replaces_the_file_only_when_the_block_ends(tmp_path):
    out = tmp_path / "sub" / "result.json"
    with atomic_file(out) as fh:
        fh.write("new")
        assert not out.exists()  # a reader meanwhile sees nothing, not a half-written file
        (hidden,) = out.parent.iterdir()
        assert hidden.name.startswith(".result.json.") and hidden.name.endswith(".tmp")
    assert out.read_text() == "new" and [p.name for p in out.parent.iterdir()] == ["result.json"]


def test_atomic_file_error_keeps_the_old_file_and_leaves_nothing_hidden(tmp_path):
    out = tmp_path / "table.parquet"
    out.write_bytes(b"previous")
    with pytest.raises(OSError, match="disk full"):
        with atomic_file(out, "wb", fsync=True) as fh:
            fh.write(b"part")
            raise OSError("disk full")
    assert out.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["table.parquet"]


def test_atomic_file_refuses_an_append_or_read_mode(tmp_path):
    with pytest.raises(ValueError, match="mode 'w' or 'wb'"):
        with atomic_file(tmp_path / "x", "a"):
            pass
    assert list(tmp_path.iterdir()) == []


def test_a_sigterm_during_an_atomic_file_write_leaves_the_old_file_and_no_partial(tmp_path):
    out, ready = tmp_path / "emb.npz", tmp_path / "ready"
    out.write_bytes(b"previous")
    code = f"""
import sys, time
from pathlib import Path
sys.path.insert(0, {str(REPO)!r})
from aoe.util.fsutil import atomic_file, exit_on_sigterm
exit_on_sigterm()
with atomic_file({str(out)!r}, "wb") as fh:
    fh.write(b"part")
    Path({str(ready)!r}).write_text("inside")
    time.sleep(120)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["emb.npz", "ready"]


# The tokenize job script, run as Snakemake runs it (a `snakemake` object in its globals), made to
# stop inside atomic_dir once the cache is written and before it is renamed into place.
TOKENIZE_JOB = """
import runpy, sys, time
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, {repo!r})
import datasets
save = datasets.Dataset.save_to_disk
def slow_save(self, path, *args, **kwargs):
    save(self, path, *args, **kwargs)
    Path({ready!r}).write_text("inside")
    time.sleep(120)
datasets.Dataset.save_to_disk = slow_save
snakemake = SimpleNamespace(
    scriptdir={scripts!r}, log=[{log!r}], output=[{out!r}], wildcards=SimpleNamespace(max_len="12"),
    input=SimpleNamespace(table={table!r}, backbone={backbone!r}), params=SimpleNamespace(prompt=None),
)
runpy.run_path({script!r}, init_globals={{"snakemake": snakemake}}, run_name="__main__")
"""


@pytest.mark.slow
def test_a_cancelled_tokenize_job_leaves_no_partial_cache(tmp_path, tiny_bert):
    table = tmp_path / "train.parquet"
    pd.DataFrame({"sentence1": ["a cat", "a dog"], "sentence2": ["a pet", "a pet"], "score": [1.0, 2.0]}).to_parquet(table)
    out, ready, log = tmp_path / "tokens" / "tiny", tmp_path / "ready", tmp_path / "tokenize.log"
    code = TOKENIZE_JOB.format(
        repo=str(REPO), ready=str(ready), scripts=str(REPO / "workflow_scripts"), log=str(log), out=str(out),
        table=str(table), backbone=str(tiny_bert), script=str(REPO / "workflow_scripts" / "tokenize.py"),
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    assert len(_hidden(out.parent, "tiny")) == 1
    proc.send_signal(signal.SIGTERM)  # what Snakemake and SLURM's scancel send
    proc.communicate(timeout=60)
    assert proc.returncode == 143, log.read_text()
    assert list(out.parent.iterdir()) == [], log.read_text()
    assert "terminated by SIGTERM; removing partial outputs" in log.read_text()


# --- files written to a temporary name: the mode open() gives, not tempfile's 0600 ---


@pytest.fixture
def group_umask():
    old = os.umask(0o002)  # a project folder shared with a group
    yield
    os.umask(old)


def test_results_written_atomically_get_the_umask_mode_not_0600(tmp_path, group_umask):
    # eval JSONs, prepared tables and their manifests, the embedding cache: tempfile makes
    # files 0600, so a group member's table or report job failed on them with PermissionError
    import numpy as np
    import pandas as pd

    from aoe.data.io import write_parquet_atomic
    from aoe.evaluate.embcache import EmbeddingCache
    from aoe.util.jsonio import write_json_atomic

    written = [
        write_json_atomic({"a": 1}, tmp_path / "sts.json"),
        write_parquet_atomic(pd.DataFrame({"x": [1]}), tmp_path / "test.parquet"),
    ]
    cache = EmbeddingCache(tmp_path / "emb", "k", {"files": {}}, lambda texts: np.zeros((len(texts), 2), dtype=np.float32))
    cache.encode(["a", "b"])
    written += list((tmp_path / "emb" / "k").iterdir())
    assert len(written) == 4
    for path in written:
        assert oct(path.stat().st_mode & 0o777) == oct(0o664), path


def test_a_folder_written_by_atomic_dir_has_no_private_files(tmp_path, group_umask):
    # a trained model's model.safetensors came out 0600 (safetensors' own file mode), so a group
    # member's evaluation of a shared results/models folder failed with PermissionError
    import torch
    from safetensors.torch import save_file

    out = tmp_path / "seed1"
    with atomic_dir(out) as tmp:
        save_file({"w": torch.zeros(2)}, str(tmp / "model.safetensors"))
        (tmp / "sub").mkdir()
        (tmp / "sub" / "config.json").write_text("{}")
    assert oct((out / "model.safetensors").stat().st_mode & 0o777) == oct(0o664)
    assert oct((out / "sub" / "config.json").stat().st_mode & 0o777) == oct(0o664)


@pytest.mark.parametrize("mask", [0o002, 0o022, 0o077])
def test_a_folder_written_by_atomic_dir_gets_the_umask_mode(tmp_path, mask):
    # atomic_dir's folder was 0755 whatever the umask: in a group-shared tree (umask 002) another member's
    # rerun of the job (a token cache, a model) could not remove the files in it to replace it
    old = os.umask(mask)
    try:
        with atomic_dir(tmp_path / "cache") as tmp:
            (tmp / "cache.json").write_text("{}")
    finally:
        os.umask(old)
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == oct(0o777 & ~mask)


# --- atomic_file's temporaries left by a SIGKILL: removed by the next write once their writer is gone ---

# A job stopped inside atomic_file, part of its file written, until it is killed.
FILE_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from aoe.util.fsutil import atomic_file
with atomic_file({out!r}, "wb") as fh:
    fh.write(b"half written")
    fh.flush()
    Path({ready!r}).write_text("inside")
    time.sleep(120)
"""

# The embedding cache's write of a text set, stopped half-way through np.savez until it is killed.
CACHE_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
import numpy as np
from aoe.evaluate import embcache

def savez(fh, **arrays):
    fh.write(b"PK half a zip")
    fh.flush()
    Path({ready!r}).write_text("inside")
    time.sleep(120)

embcache.np.savez = savez
cache = embcache.EmbeddingCache({root!r}, "model", {{}}, lambda texts: np.ones((len(texts), 4)))
cache.encode(["a", "b"])
"""


def _killed_inside(tmp_path: Path, template: str, name: str, **fields) -> tuple[subprocess.Popen, Path]:
    ready = tmp_path / f"ready-{name}"
    code = template.format(repo=str(REPO), ready=str(ready), **fields)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stderr=subprocess.PIPE, text=True)
    _wait_for(ready, proc)
    return proc, ready


def test_a_sigkilled_write_leaves_a_temporary_the_next_write_removes_but_not_a_live_writers(tmp_path):
    out = tmp_path / "results" / "sts.json"
    live, _ = _killed_inside(tmp_path, FILE_CHILD, "live", out=str(out))  # a concurrent job, still writing
    try:
        (writing,) = _hidden(out.parent, "sts.json")
        killed, _ = _killed_inside(tmp_path, FILE_CHILD, "killed", out=str(out))
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        (left,) = set(_hidden(out.parent, "sts.json")) - {writing}
        assert f"-{killed.pid}." in left and f"-{live.pid}." in writing  # the writer is in the name
        with atomic_file(out) as fh:
            fh.write("complete")
        assert _hidden(out.parent, "sts.json") == [writing]  # the dead writer's removed, the live one's kept
        assert out.read_text() == "complete"
    finally:
        live.kill()
        live.wait(timeout=60)


def test_a_sigkilled_embedding_cache_write_is_removed_by_the_next_cache_on_the_folder(tmp_path):
    import numpy as np

    from aoe.evaluate.embcache import EmbeddingCache

    root = tmp_path / "embeddings"
    proc, _ = _killed_inside(tmp_path, CACHE_CHILD, "cache", root=str(root))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert [p.name.endswith(".tmp") for p in (root / "model").iterdir() if p.name.startswith(".")] == [True]
    EmbeddingCache(root, "model", {}, lambda texts: np.ones((len(texts), 4)))  # another evaluation of the model, another text set
    assert sorted(p.name for p in (root / "model").iterdir()) == ["model.json"]


def test_a_temporary_whose_writer_cannot_be_asked_is_removed_only_when_old(tmp_path):
    from aoe.util import fsutil

    other_host = tmp_path / ".t.parquet.nodeb-17-x-12345.abcdefgh.tmp"  # another node's job, maybe writing now
    unnamed = tmp_path / ".t.parquet.abcdefgh.tmp"  # named before temporaries carried their writer
    other_file = tmp_path / ".u.parquet.nodeb-12345.abcdefgh.tmp"  # another file's
    for path in (other_host, unnamed, other_file):
        path.write_bytes(b"x")
    assert fsutil.remove_orphaned_files(tmp_path, "t.parquet") == []
    old = time.time() - fsutil.ORPHAN_AGE_S - 60
    for path in (other_host, unnamed, other_file):
        os.utime(path, (old, old))
    assert sorted(fsutil.remove_orphaned_files(tmp_path, "t.parquet")) == sorted([other_host, unnamed])
    assert other_file.exists()

"""A full disk (or a spent quota) at each writer of the pipeline: one error that names the path being written,
its filesystem's free space, what was kept and the fix, instead of a bare ``OSError: [Errno 28] No space left
on device`` (or safetensors' ``SafetensorError``) that names none of them (issue 53, sweep rows D1-D5).

The tmpfs tests mount a real small filesystem (root only): the errno comes from the kernel, not from a stand-in.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from aoe.util.fsutil import DiskFullError, atomic_dir, atomic_file, naming_full_disk
from tests.test_download import FAST, ScriptedServer, server  # noqa: F401  (server: the fixture)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs: a real filesystem that fills."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_full_disk_inside_atomic_file_names_the_file_free_space_what_was_kept_and_the_fix(tmp_path):
    out = tmp_path / "eval" / "sts.json"
    out.parent.mkdir()
    out.write_text("the earlier result\n")
    with pytest.raises(DiskFullError) as err:
        with atomic_file(out) as fh:
            fh.write("{")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what a write() on a full disk raises
    msg = str(err.value)
    assert err.value.errno == errno.ENOSPC
    assert msg.startswith(f"{out}: no space left on the device while writing it (the filesystem at ")
    assert " free of " in msg and "kept: nothing partial of it" in msg
    assert "point the configuration's results: at a folder on another disk" in msg
    assert out.read_text() == "the earlier result\n" and _hidden(out.parent) == []


def test_a_spent_quota_is_named_as_such(tmp_path):
    with pytest.raises(DiskFullError, match=r": the user's disk quota is spent while writing it") as err:
        with atomic_dir(tmp_path / "model") as tmp:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(tmp / "model.safetensors"))
    assert err.value.errno == errno.EDQUOT and _hidden(tmp_path) == []


def test_other_errors_pass_unchanged(tmp_path):
    with pytest.raises(PermissionError):
        with naming_full_disk(tmp_path / "x"):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_a_model_save_on_a_full_tmpfs_names_the_model_folder_not_a_bare_safetensor_error(small_tmpfs):
    # safetensors raises its own SafetensorError ("... No space left on device (os error 28)"), not an OSError
    import torch
    from safetensors.torch import save_file

    model = small_tmpfs / "models" / "seed1"
    with pytest.raises(DiskFullError) as err:
        with atomic_dir(model) as tmp:
            save_file({"w": torch.zeros(512, 512)}, str(tmp / "model.safetensors"))  # 1 MiB on 256 KiB
    msg = str(err.value)
    assert msg.startswith(f"{model}: no space left on the device while writing it (the filesystem at {small_tmpfs}: ")
    assert "free of 256.0 KiB" in msg and "SafetensorError" in msg
    assert not model.exists() and _hidden(model.parent) == []


def test_a_result_on_a_full_tmpfs_names_the_file(small_tmpfs):
    from aoe.util.jsonio import write_json_atomic

    (small_tmpfs / "filler").write_bytes(b"\0" * (252 * 1024))  # leaves less than the result needs
    out = small_tmpfs / "eval" / "sts.json"
    with pytest.raises(DiskFullError, match=rf"^{out}: no space left on the device while writing it \(the filesystem at {small_tmpfs}: "):
        write_json_atomic({"texts": ["x" * 100_000]}, out)
    assert not out.exists() and _hidden(out.parent) == []


def test_a_table_on_a_full_tmpfs_leaves_no_table_cut_short(small_tmpfs, monkeypatch):
    from aoe.results import render

    # the renderers are not under test: a table whose Markdown is larger than the free space
    for fn in ("to_latex", "to_markdown"):
        monkeypatch.setattr(render, fn, lambda table: "| x |\n" * 60_000)
    monkeypatch.setattr(render, "to_frame", lambda table: __import__("pandas").DataFrame({"x": [1]}))
    d = small_tmpfs / "tables"
    d.mkdir()
    with pytest.raises(DiskFullError, match=rf"^{d / 't.tex'}: no space left"):
        render.write_table(None, d / "t.tex", d / "t.csv", d / "t.md")
    assert sorted(p.name for p in d.iterdir()) == []  # the old write_text left t.tex cut short at the disk's end


def test_a_download_on_a_full_tmpfs_names_the_file_and_keeps_the_part_to_resume(server, small_tmpfs):  # noqa: F811
    from aoe.data.download import download_file

    server.files["/big.bin"] = os.urandom(400_000)
    dest = small_tmpfs / "downloads" / "big.bin"
    with pytest.raises(DiskFullError) as err:
        download_file(server.url("/big.bin"), dest, **FAST)
    msg = str(err.value)
    assert msg.startswith(f"{dest}: no space left on the device while writing it (the filesystem at {small_tmpfs}: ")
    assert f"kept: the bytes fetched so far in {dest}.part, which a rerun resumes" in msg
    assert not dest.exists()


def test_a_step_checkpoint_on_a_full_tmpfs_is_removed_and_named(small_tmpfs):
    # the sweep's D3: accelerate's save_state writes the model with safetensors, whose SafetensorError the old
    # handler (OSError, RuntimeError) let through bare, naming no folder
    import torch
    from safetensors.torch import save_file

    from aoe.training.checkpoints import save_checkpoint

    class Accelerator:
        is_main_process = True

        def wait_for_everyone(self):
            pass

        def save_state(self, folder):
            Path(folder).mkdir(parents=True)
            save_file({"w": torch.zeros(512, 512)}, str(Path(folder) / "model.safetensors"))

    root = small_tmpfs / "seed1.ckpt"
    with pytest.raises(DiskFullError) as err:
        save_checkpoint(Accelerator(), root, {"id": 1}, {"step": 20}, [])
    msg = str(err.value)
    assert msg.startswith(f"{root / 'step20'}: no space left on the device while writing it (the filesystem at {small_tmpfs}: ")
    assert "kept: nothing of this checkpoint (its partial folder is removed; the earlier ones stay)" in msg
    assert "or checkpoint less often (trainsets.<name>.train.checkpoint_every; 0: never), and rerun" in msg
    assert list(root.iterdir()) == []


def _job_on_a_full_disk(small_tmpfs, body: str):
    import sys
    import textwrap

    (small_tmpfs / "filler").write_bytes(b"\0" * (256 * 1024 - 4096))
    log = small_tmpfs / "logs" / "table.log"
    code = textwrap.dedent(f"""
        from aoe.util.joblog import start_log
        start_log({str(log)!r})
        print("x" * 8192)  # the job's progress lines fill the disk's last page
    """) + textwrap.dedent(body)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    return log, p


def test_a_jobs_error_that_its_full_log_cannot_take_reaches_snakemakes_stderr(small_tmpfs):
    # the sweep's D5: on a full results disk the job's log (aoe.util.joblog.start_log) could not take the
    # traceback either; the job ended with exit status 120, an empty log, and no reason anywhere
    log, p = _job_on_a_full_disk(small_tmpfs, 'raise SystemError("the table could not be written")\n')
    assert p.returncode == 1
    assert p.stderr.startswith(f"(the log {log} cannot be written: No space left on device; what the job logs from here on is lost, "
                               "and its error, if any, follows here)\n")
    assert "SystemError: the table could not be written" in p.stderr


def test_a_job_that_wrote_its_outputs_is_not_failed_by_its_full_log(small_tmpfs):
    # the interpreter's last flush of a log line on a full disk ended a finished table job with status 120, and
    # Snakemake removed the tables it had written
    log, p = _job_on_a_full_disk(small_tmpfs, 'import logging, sys\nlogging.basicConfig(stream=sys.stderr)\nlogging.warning("done")\n')
    assert p.returncode == 0, p.stderr
    assert "cannot be written: No space left on device" in p.stderr

"""Files and folders that appear complete or not at all."""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

__all__ = ["DiskFullError", "naming_full_disk", "atomic_file", "atomic_dir", "remove_stale_temporaries", "remove_orphaned_files", "exit_on_sigterm", "as_created"]

# tempfile.mkdtemp's random part: 8 characters of tempfile._RandomNameSequence.characters
_MKDTEMP_SUFFIX = "[a-z0-9_]{8}"


def _writer_host() -> str:
    """This host's name, and its pid namespace where /proc tells it: containers that share a folder and a hostname
    but not their processes must not take each other's live writers for dead ones."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0]) or "host"
    try:
        namespace = re.sub(r"[^0-9]", "", os.readlink("/proc/self/ns/pid"))
    except OSError:
        namespace = ""
    return f"{host}-{namespace}" if namespace else host


# atomic_file's temporaries carry their writer, .name.<host>-<pid>.XXXXXXXX.tmp, so that a later run can tell
# one whose writer died (SIGKILL, out of memory) from one a concurrent job is writing right now
_HOST = _writer_host()
_WRITER = r"(?:(?P<host>[A-Za-z0-9-]+)-(?P<pid>[0-9]+)\.)?"  # absent in the names of versions before the pid
# a temporary whose writer cannot be asked (another node's, or one named before the pid) is left alone this long:
# every atomic_file write goes from open to rename in seconds, so one untouched for an hour has no writer
ORPHAN_AGE_S = 3600.0


class DiskFullError(OSError):
    """A write that found no room: the disk full, or the user's quota spent (errno ENOSPC or EDQUOT).

    Its message names the path being written, the free space of the filesystem it is on, what was
    kept and the fix: the bare ``OSError: [Errno 28] No space left on device`` a library raises names
    none of them, and safetensors' ``SafetensorError`` not even the errno.
    """

    def __str__(self) -> str:  # the message alone: OSError's "[Errno 28] " prefix would hide the path it starts with
        return self.strerror


# how libraries written in Rust or C++ (safetensors, tokenizers, pyarrow) report the errno in their own exception types
_FULL_IN_TEXT = re.compile(rf"\(os error ({errno.ENOSPC}|{errno.EDQUOT})\)|No space left on device|Disk quota exceeded")


def _full_errno(exc: BaseException) -> int | None:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return exc.errno
    match = _FULL_IN_TEXT.search(str(exc))
    if match is None:
        return None
    return errno.EDQUOT if match[1] == str(errno.EDQUOT) or "quota" in match[0] else errno.ENOSPC


def _size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return ""  # unreachable


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def _free_space(path: Path) -> str:
    """``the filesystem at /mnt: 64.0 KiB free of 12.0 MiB``, of the nearest folder of ``path`` that exists."""
    folder = path
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return "its filesystem's free space unknown"
    return f"the filesystem at {_mount_point(folder)}: {_size(usage.free)} free of {_size(usage.total)}"


@contextmanager
def naming_full_disk(path: str | os.PathLike, kept: str = "nothing partial of it: the temporary is removed",
                     also: str | None = None) -> Iterator[None]:
    """Turn a full disk or a spent quota met inside the block (an ``OSError`` ENOSPC or EDQUOT, or a library's
    exception that carries the errno in its text) into one :class:`DiskFullError` that names ``path`` (the
    output being written), its filesystem's free space, what was ``kept`` and the fix (``also``: a further way out,
    as a clause: ``checkpoint less often (...)``).

    Every writer of the pipeline's outputs goes through it (:func:`atomic_file`, :func:`atomic_dir`, the
    download's resumable ``.part``): the job fails either way, but the message says where and what to do.
    """
    path = Path(path)
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        code = _full_errno(exc)
        if code is None:
            raise
        why = "the user's disk quota is spent" if code == errno.EDQUOT else "no space left on the device"
        raise DiskFullError(
            code,
            f"{path}: {why} while writing it ({_free_space(path.parent)}; {type(exc).__name__}: {exc}); kept: {kept}; "
            "free space on that disk, or point the configuration's results: at a folder on another disk"
            f"{', or ' + also if also else ''}, and rerun",
        ) from exc


def _temporary_pattern(out_dir: Path) -> re.Pattern:
    return re.compile(re.escape(f".{out_dir.name}.") + _MKDTEMP_SUFFIX)


def remove_stale_temporaries(out_dir: str | os.PathLike) -> list[Path]:
    """Remove the hidden ``.name.XXXXXXXX`` folders that earlier runs of :func:`atomic_dir` left beside ``out_dir``; return them.

    A run killed by SIGKILL (or an out-of-memory kill, or a node lost) never reaches
    ``atomic_dir``'s cleanup, and its partial folder would stay beside the output for
    good. Only the exact names ``atomic_dir`` makes for this output are touched, and
    only folders (not links): :func:`atomic_file`'s ``.name.<host>-<pid>.XXXXXXXX.tmp`` files
    (:func:`remove_orphaned_files`'s) or another output's ``.other.*`` folders stay. Safe because one output is written by one job at a time
    (Snakemake never runs two jobs on the same output).
    """
    out_dir = Path(out_dir)
    if not out_dir.parent.is_dir():
        return []
    pattern = _temporary_pattern(out_dir)
    removed = []
    for sibling in out_dir.parent.iterdir():
        if pattern.fullmatch(sibling.name) and sibling.is_dir() and not sibling.is_symlink():
            shutil.rmtree(sibling, ignore_errors=True)  # another user's leftover we cannot delete must not fail the job
            removed.append(sibling)
    return removed


def _writer_alive(host: str | None, pid: str | None) -> bool | None:
    """Whether the process that named a temporary file still runs; None where this process cannot tell."""
    if host != _HOST or pid is None:
        return None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def remove_orphaned_files(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Remove the hidden temporaries of :func:`atomic_file` in ``folder`` whose writer is gone; return them.

    ``name``: only the temporaries of the file ``folder/name`` (else those of every file). A
    write killed by SIGKILL never reaches atomic_file's cleanup, and its ``.name.<host>-<pid>.XXXXXXXX.tmp``
    would stay for good (an embedding cache file of a whole text set: megabytes to gigabytes). One is
    an orphan when its writer ran on this host and its pid is gone, or, where that cannot be asked
    (another host's, or a name without a pid), when nothing has touched it for :data:`ORPHAN_AGE_S`:
    a concurrent job's file being written is never removed. A pid reused since is taken as the writer:
    the file stays until a later run.
    """
    folder = Path(folder)
    # lazy: a greedy name would swallow the writer's part and leave the file to the age rule
    base = re.escape(f".{name}.") if name is not None else r"\..+?\."
    pattern = re.compile(base + _WRITER + _MKDTEMP_SUFFIX + r"\.tmp")
    removed = []
    try:
        siblings = list(folder.iterdir())
    except FileNotFoundError:
        return []
    now = time.time()
    for sibling in siblings:
        match = pattern.fullmatch(sibling.name)
        if match is None:
            continue
        alive = _writer_alive(match["host"], match["pid"])
        try:
            if alive is None:
                stat = sibling.lstat()
                alive = now - stat.st_mtime < ORPHAN_AGE_S
            if alive or not sibling.is_file() or sibling.is_symlink():
                continue
            sibling.unlink()
        except OSError:  # gone meanwhile (its writer renamed it), or another user's we cannot delete: not this job's failure
            continue
        removed.append(sibling)
    return removed


@contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8", fsync: bool = False) -> Iterator[IO]:
    """Open a hidden temporary file beside ``path`` (``.name.<host>-<pid>.XXXXXXXX.tmp``, in ``mode``: "w" or "wb");
    when the block ends without error it is moved over ``path``, else removed.

    A reader never sees a half-written ``path``: a job killed mid-write leaves the previous file or
    none (os.replace is atomic within one filesystem, hence the same folder). Under SIGKILL the
    hidden file stays until the next write of ``path`` removes it (:func:`remove_orphaned_files`);
    under SIGTERM it is removed if the process turned SIGTERM into an exception
    (:func:`exit_on_sigterm`). The file gets the mode ``open()`` gives (:func:`as_created`), not
    tempfile's 0600. ``fsync``: flush it to the disk before the move (a table a later job reads
    after a node crash).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes a whole new file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    # outside the try: the partial file is removed first, so the message's free space is what a rerun finds
    with naming_full_disk(path, "nothing partial of it (the temporary is removed; an earlier file at that path stays as it was)"):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_orphaned_files(path.parent, path.name)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp")
        try:
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
                yield fh
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            as_created(tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)  # gone after the move; after an error, the partial file


@contextmanager
def atomic_dir(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside ``out_dir``; on success it replaces ``out_dir``, on error it is removed.

    A job killed half-way leaves only a hidden ``.name.*`` folder, never a
    complete-looking output; the next run for the same output removes it
    (:func:`remove_stale_temporaries`). Under SIGTERM the cleanup runs only if the
    process turned SIGTERM into an exception (:func:`exit_on_sigterm`).
    """
    out_dir = Path(out_dir)
    with naming_full_disk(out_dir, "nothing partial of it (the temporary folder is removed; an earlier folder at that path stays as it was)"):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(out_dir)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        # mkdtemp makes it private; results are shared with other users' jobs, and in a group-shared tree (umask 002)
        # with the group's: a fixed 0755 kept another member's rerun of this job from replacing the folder
        tmp.chmod(0o777 & ~_umask())
        try:
            yield tmp
            # files libraries made private (safetensors writes model.safetensors 0600, as tempfile
            # does) get the mode open() gives, like the folder: other users' jobs read them
            for path in tmp.rglob("*"):
                if path.is_file() and not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600:
                    as_created(path)
            if out_dir.exists():
                shutil.rmtree(out_dir)
            os.replace(tmp, out_dir)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)


def _umask() -> int:
    # /proc/self/status says it without changing it: os.umask can only be read by setting it,
    # which would give files another thread creates meanwhile the wrong mode
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_created(path: str | os.PathLike) -> None:
    """Give a file that ``tempfile`` made (always mode 0600) the mode ``open()`` would have: 0666 less the umask.

    A result written to a temporary name and renamed otherwise stays private to its
    owner: in a results folder shared with a group (umask 002, a setgid project
    folder) the other members' jobs and reports fail on it with PermissionError.
    """
    os.chmod(path, 0o666 & ~_umask())


_installed_in: int | None = None  # the pid of the process that called exit_on_sigterm


def _raise_system_exit(signum, frame) -> None:
    # a second SIGTERM (cleanup taking too long for whoever sent it) then kills at once
    signal.signal(signum, signal.SIG_DFL)
    if os.getpid() != _installed_in:
        # a forked child (a data loader worker) inherits the handler but not the folders:
        # it must not run its parent's cleanups, so it dies as it would have by default
        os.kill(os.getpid(), signum)
        return
    try:
        print(f"terminated by {signal.Signals(signum).name}; removing partial outputs", file=sys.stderr, flush=True)
    except RuntimeError:  # the signal arrived inside a write to stderr (reentrant call): exit all the same
        pass
    raise SystemExit(128 + signum)  # the shell's exit status for a signal death: 143


def exit_on_sigterm() -> bool:
    """Make SIGTERM raise ``SystemExit(143)`` so that ``finally`` blocks (atomic_dir's cleanup) run; True if installed.

    Python's default SIGTERM action ends the process at once, without unwinding: a job
    that Snakemake or SLURM (scancel, time limit) terminates would leave its temporary
    folders behind. Installed only from the main thread, and only over the default
    action, so a handler that a library (accelerate, torch.distributed) set stays in place.
    """
    global _installed_in
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is not signal.SIG_DFL and current is not _raise_system_exit:  # ours, maybe inherited by a fork
        return False
    _installed_in = os.getpid()
    signal.signal(signal.SIGTERM, _raise_system_exit)
    return True

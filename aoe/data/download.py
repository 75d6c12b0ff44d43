"""Fetching the SentEval data from upstream when no local mirror is configured.

Downloads are written so that an interrupted run never leaves something that
looks finished: bytes stream into ``<dest>.part`` and only a complete,
checksum-verified file is renamed to ``dest``; the archive is extracted into a
temporary directory that is renamed into place only once it is known to hold
the expected layout. Flaky networks are handled by retrying with exponential
backoff and resuming the ``.part`` file with an HTTP Range request.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

import requests

from aoe.data.io import DataError, sha256_file

# SimCSE's packaging of SentEval's data/downstream tree (what its evaluation uses);
# its members sit at the archive root (STS/, SICK/, ...).
SENTEVAL_ARCHIVE_URL = (
    "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
)

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "AOE_OFFLINE")
_CHUNK_BYTES = 1 << 16
# Client errors that are transient by definition (timeout, rate limit); other 4xx are final.
_RETRYABLE_4XX = frozenset({408, 429})
# How deep below the archive root SentEval's downstream folder may sit
# (``STS`` at the root, ``downstream/STS``, ``SentEval/data/downstream/STS``).
_MAX_DOWNSTREAM_DEPTH = 4


class _TransientError(Exception):
    """An attempt failed in a way another attempt may not (5xx, dropped connection, ...)."""


def _offline_var() -> str | None:
    """Name of the environment variable that disables downloads, if one is set."""
    for name in _OFFLINE_VARS:
        if os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}:
            return name
    return None


def _attempt(url: str, part: Path, timeout: float) -> None:
    """One GET of ``url`` into ``part``, resuming from its current size when the server allows."""
    offset = part.stat().st_size if part.exists() else 0
    # identity: a Range offset counts bytes of the stored representation, so a
    # transparently decompressed body could not be resumed correctly.
    headers = {"Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with requests.get(url, headers=headers, stream=True, timeout=timeout) as response:
            status = response.status_code
            if status == 416:
                # The partial file does not fit the remote one (changed upstream,
                # or already complete); start again from nothing.
                part.unlink(missing_ok=True)
                raise _TransientError("HTTP 416 for the resume range; restarting from scratch")
            if status >= 500 or status in _RETRYABLE_4XX:
                raise _TransientError(f"HTTP {status} {response.reason}")
            if status >= 400:
                raise DataError(f"download of {url} failed: HTTP {status} {response.reason}")
            if offset and status == 206:
                content_range = response.headers.get("Content-Range", "")
                if not content_range.startswith(f"bytes {offset}-"):
                    part.unlink(missing_ok=True)
                    raise _TransientError(
                        f"server resumed at an unexpected range {content_range!r}; restarting"
                    )
                mode, written = "ab", offset
            else:
                # The server ignored the Range header and sends the whole body.
                mode, written = "wb", 0
            length = response.headers.get("Content-Length")
            expected_total = written + int(length) if length is not None else None
            with open(part, mode) as fh:
                for chunk in response.iter_content(_CHUNK_BYTES):
                    fh.write(chunk)
                    written += len(chunk)
            if expected_total is not None and written != expected_total:
                raise _TransientError(f"connection closed after {written} of {expected_total} bytes")
    except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
        # ChunkedEncodingError is how requests reports a body cut short mid-stream.
        raise _TransientError(f"{type(exc).__name__}: {exc}") from exc


def download_file(
    url: str,
    dest: Path,
    *,
    sha256: str | None = None,
    retries: int = 5,
    timeout: float = 60,
    backoff: float = 1.0,
) -> Path:
    """Download ``url`` to ``dest`` robustly and return ``dest``.

    Streams into ``<dest>.part`` and renames it to ``dest`` when complete, so
    ``dest`` existing means a finished download; an existing ``dest`` is
    therefore returned as is (after re-checking ``sha256`` when given; a
    mismatching one is downloaded again). Connection errors, timeouts, dropped
    connections, 5xx, 408 and 429 are retried up to ``retries`` times, sleeping
    ``backoff * 2**k`` seconds before retry ``k``; each retry resumes the
    ``.part`` file with an HTTP Range request and restarts if the server
    ignores it. Other 4xx statuses fail at once. With ``sha256`` the finished
    file is verified and, on mismatch, deleted before DataError is raised.
    ``timeout`` applies to connecting and to each read. Raises DataError when
    downloads are disabled by ``HF_HUB_OFFLINE=1`` or ``AOE_OFFLINE=1``.
    """
    dest = Path(dest)
    if dest.is_file() and (sha256 is None or sha256_file(dest) == sha256.lower()):
        return dest
    offline = _offline_var()
    if offline:
        raise DataError(f"downloads are disabled ({offline} is set); cannot fetch {url} to {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    while True:
        try:
            _attempt(url, part, timeout)
            break
        except _TransientError as exc:
            if attempt >= retries:
                raise DataError(f"download of {url} failed after {attempt + 1} attempts: {exc}") from exc
            time.sleep(backoff * 2**attempt)
            attempt += 1
    if sha256 is not None:
        got = sha256_file(part)
        if got != sha256.lower():
            part.unlink()
            raise DataError(f"{dest}: sha256 mismatch for {url}: expected {sha256.lower()}, got {got}")
    os.replace(part, dest)
    return dest


def _check_members(archive: Path, members: list[tarfile.TarInfo]) -> None:
    """Reject members that could write outside the extraction directory."""
    for member in members:
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts:
            raise DataError(f"{archive}: unsafe member path {member.name!r}; refusing to extract")
        if not (member.isfile() or member.isdir()):
            # SentEval's archive holds only files and folders; links or devices
            # would only be a way to reach outside the extraction directory.
            raise DataError(f"{archive}: member {member.name!r} is not a regular file or directory")


def _find_downstream(root: Path) -> Path | None:
    """Shallowest folder under ``root`` that contains an ``STS`` folder (SentEval's downstream)."""
    level = [root]
    for _ in range(_MAX_DOWNSTREAM_DEPTH + 1):
        for folder in level:
            if (folder / "STS").is_dir():
                return folder
        level = sorted(child for folder in level for child in folder.iterdir() if child.is_dir())
    return None


def _archive_name(url: str) -> str:
    name = PurePosixPath(urlparse(url).path).name
    if not name:
        raise DataError(f"cannot derive an archive file name from {url}")
    return name


def fetch_senteval_archive(url: str, cache_dir: Path, *, sha256: str | None = None) -> Path:
    """Download and unpack SentEval's data archive into ``cache_dir``; return its ``downstream`` folder.

    The archive is kept as ``cache_dir/<name>`` and unpacked into
    ``cache_dir/<name>.d``; when that folder already exists nothing is
    downloaded, so the cache also works offline. Members with absolute paths,
    ``..`` components, links or device entries make the whole archive be
    rejected. Extraction happens in a temporary sibling folder that is renamed
    into place only after the ``downstream`` folder (the one holding ``STS/``:
    the archive root itself for SimCSE's tar, or a ``downstream`` or
    ``SentEval/data/downstream`` folder in repackaged ones) is found in it. ``sha256`` optionally pins the archive.
    """
    cache_dir = Path(cache_dir)
    name = _archive_name(url)
    extracted = cache_dir / f"{name}.d"
    if extracted.is_dir():
        downstream = _find_downstream(extracted)
        if downstream is None:
            raise DataError(
                f"{extracted} holds no SentEval downstream folder (no STS/ inside); delete it to refetch"
            )
        return downstream
    offline = _offline_var()
    if offline:
        raise DataError(
            f"no data mirror was given and downloads are disabled ({offline} is set); "
            f"set the data mirror or unset {offline} to fetch {url}"
        )
    archive = download_file(url, cache_dir / name, sha256=sha256)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}.extract-"))
    try:
        try:
            with tarfile.open(archive) as tar:
                members = tar.getmembers()
                _check_members(archive, members)
                tar.extractall(staging, members=members, filter="data")
        except (tarfile.TarError, EOFError) as exc:
            raise DataError(f"{archive}: cannot extract ({exc}); delete it to download again") from exc
        staged_downstream = _find_downstream(staging)
        if staged_downstream is None:
            raise DataError(f"{archive} holds no SentEval downstream folder (no STS/ inside)")
        inner = staged_downstream.relative_to(staging)
        try:
            staging.rename(extracted)
        except OSError:
            # A concurrent fetch finished first; its result is equivalent, keep it.
            if not extracted.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return extracted / inner

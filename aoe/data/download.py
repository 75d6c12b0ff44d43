"""Laying the published data files into the workflow's downloads folder: from the mirror or upstream.

Downloads are written so that an interrupted run never leaves something that
looks finished: bytes stream into ``<dest>.part`` and only a complete,
checksum-verified file is renamed to ``dest``. Flaky networks are handled by
retrying with exponential backoff and resuming the ``.part`` file with an HTTP
Range request.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from aoe.data.io import DataError, sha256_file
from aoe.data.mirror import check_published, mirror_file, mirror_sources
from aoe.util.fsutil import atomic_file, naming_full_disk

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "AOE_OFFLINE")
_CHUNK_BYTES = 1 << 16
# Client errors that are transient by definition (timeout, rate limit); other 4xx are final.
_RETRYABLE_4XX = frozenset({408, 429})


class _TransientError(Exception):
    """An attempt failed in a way another attempt may not (5xx, dropped connection, ...)."""


def offline_var() -> str | None:
    """Name of the environment variable that disables downloads, if one is set."""
    for name in _OFFLINE_VARS:
        if os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}:
            return name
    return None


def _attempt(url: str, part: Path, timeout: float) -> None:
    """One GET of ``url`` into ``part``, resuming from its current size when the server allows."""
    # imported here: a download job served by the mirror (every CI and demo run) never needs it, and its
    # import was a third of such a job's start (its script's imports 0.184 CPU-s with it, 0.126 without; 60 such
    # jobs in the CI preset's run)
    import requests

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
    offline = offline_var()
    if offline:
        raise DataError(f"downloads are disabled ({offline} is set); cannot fetch {url} to {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    attempt = 0
    while True:
        try:
            # the .part stays on a full disk (it is not a result: nothing reads it until it is whole), so a rerun resumes
            with naming_full_disk(dest, f"the bytes fetched so far in {part}, which a rerun resumes"):
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


def _downloaded_elsewhere(relpath: str, dest: Path, sha256: str | None) -> Path | None:
    """The same published file downloaded into a results tree beside this one (issue 71: a tree of one's own does not
    download again), checked as a download is: its sha256, or the published record; None where no tree has it."""
    from aoe.util.othertrees import in_other_trees

    for other in in_other_trees(dest, "downloads"):
        try:
            if sha256 is not None:
                if sha256_file(other) == sha256.lower():
                    return other
            elif relpath in mirror_sources():
                check_published(other, relpath)
                return other
        except (OSError, DataError):
            continue
    return None


def fetch_published(relpath: str, dest: Path, *, url: str, sha256: str | None, mirror: str | os.PathLike | None) -> str:
    """Lay the published file ``relpath`` (mirror-relative) at ``dest``; return where it came from.

    Copied from the data mirror in effect (``mirror``: config ``data.mirror``, else
    ``$AOE_DATA_MIRROR``) when it holds the file, else downloaded from ``url``. Both are checked
    against ``sha256``, so ``dest`` holds the same bytes either way: the workflow reads every
    published file from one folder and its plan does not change with where the files came from.
    A mirror copy that is not the published file is an error naming it, never a silent download.
    """
    dest = Path(dest)
    found = mirror_file(relpath, mirror)
    if found is None:
        found = _downloaded_elsewhere(relpath, dest, sha256)
        if found is None:
            download_file(url, dest, sha256=sha256)
            return f"downloaded from {url}"
        with open(found, "rb") as src, atomic_file(dest, "wb", fsync=True) as out:
            shutil.copyfileobj(src, out)
        return f"copied from another results tree's download: {found}"
    if relpath in mirror_sources():
        check_published(found, relpath)
    elif sha256 is not None and (got := sha256_file(found)) != sha256.lower():
        raise DataError(f"{found}: sha256 {got} is not the expected {sha256.lower()} of {relpath}; restore the mirror's file")
    # a copy, not a link: Snakemake may touch its outputs, and a mirror is often someone else's read-only folder
    with open(found, "rb") as src, atomic_file(dest, "wb", fsync=True) as out:
        shutil.copyfileobj(src, out)
    return f"copied from the data mirror: {found}"

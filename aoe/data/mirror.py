"""The data mirror: where its files sit, which bytes they must be, and where each was published.

A file the pipeline reads can come from a full data mirror, a bare SentEval ``downstream``
folder or a download from its recorded public source (:func:`aoe.data.download.fetch_published`).
Only a full mirror carries a MANIFEST.tsv, and a manifest that sits beside the files it vouches
for is edited as easily as they are; so the package ships the sha256 of every published file it
reads, with the public source each was taken from (``aoe/resources/mirror_sources.tsv``,
:data:`TABLE`), and every reader checks its files against that table (:func:`check_published`)
wherever they were found. ``python -m aoe.data.published MIRROR`` regenerates the table
(:mod:`aoe.data.published`, which knows every reader's files).

This module holds what every reader and the download share: the table, the raw URL of a file's
source, the mirror setting (config ``data.mirror``, else ``$AOE_DATA_MIRROR``) and SentEval's
folder inside a mirror, and the MANIFEST.tsv check. It imports only :mod:`aoe.data.io`.
"""

from __future__ import annotations

import csv
import functools
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from aoe.data.io import DataError, read_text, sha256_file, text_lines

__all__ = [
    "DOWNSTREAM_SUBDIR",
    "TABLE",
    "mirror_sources",
    "check_published",
    "upstream_url",
    "find_downstream",
    "resolve_downstream_root",
    "mirror_file",
    "verify_manifest",
]

# Where SentEval's downstream tree sits inside the data mirror (see its README).
DOWNSTREAM_SUBDIR = "senteval/downstream"

TABLE = "mirror_sources.tsv"


@functools.cache
def mirror_sources() -> dict[str, dict[str, str]]:
    """Mirror-relative path -> {sha256, source} of every published file the pipeline reads."""
    text = resources.files("aoe.resources").joinpath(TABLE).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {r["path"]: {"sha256": r["sha256"], "source": r["source"]} for r in csv.DictReader(lines, delimiter="\t")}


def check_published(path: str | os.PathLike[str], relpath: str) -> dict[str, str]:
    """The sha256 and source of ``path``, a copy of the published file ``relpath``.

    Raises DataError, in one line naming the file, both sha256 and the fix, when its bytes
    are not the published ones, whichever folder it was found in.
    """
    pinned = mirror_sources().get(relpath)
    if pinned is None:
        raise DataError(f"{relpath}: no published sha256 recorded for it in aoe/resources/{TABLE}")
    found = sha256_file(path)
    if found != pinned["sha256"]:
        raise DataError(
            f"{path}: sha256 {found} is not the published {pinned['sha256']} of {relpath} "
            f"(from {pinned['source']}); restore the published file (a downloaded copy: delete it to fetch "
            "it again) or point AOE_DATA_MIRROR (config data.mirror) at an intact copy of the mirror"
        )
    return {"sha256": found, "source": pinned["source"]}


def upstream_url(relpath: str) -> str:
    """The raw GitHub URL of a mirror file's recorded source (owner/repo@commit:path)."""
    src = mirror_sources().get(relpath)
    if src is None:
        raise DataError(f"{relpath}: no recorded upstream source (aoe/resources/{TABLE})")
    repo, rest = src["source"].split("@", 1)
    commit, path = rest.split(":", 1)
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


def find_downstream(path: str | os.PathLike[str], dirs: Iterable[str]) -> Path | None:
    """SentEval's downstream folder at ``path``: ``path/senteval/downstream`` (a mirror root) or
    ``path`` itself, whichever holds one of the folders ``dirs`` first; None when neither does."""
    path = Path(path)
    dirs = tuple(dirs)
    for candidate in (path / DOWNSTREAM_SUBDIR, path):
        if any((candidate / d).is_dir() for d in dirs):
            return candidate
    return None


def _mirror_setting(mirror: str | os.PathLike[str] | None) -> tuple[str, str, str]:
    """(value, how to name the setting it came from, how to drop it) of the mirror in effect."""
    chosen = os.fspath(mirror) if mirror is not None else ""
    if chosen:
        return chosen, f"config data.mirror: {chosen}", "set data.mirror to null"
    chosen = os.environ.get("AOE_DATA_MIRROR", "")
    return chosen, f"AOE_DATA_MIRROR={chosen}", "unset AOE_DATA_MIRROR"


def resolve_downstream_root(mirror: str | os.PathLike[str] | None) -> Path | None:
    """Find SentEval's downstream folder from a mirror setting.

    Uses ``mirror`` (config ``data.mirror``) if given (an empty string counts as
    not given, which is how an unset config value usually arrives), else
    ``$AOE_DATA_MIRROR``, else returns None (meaning: download instead). The path
    may be the mirror root (holding ``README.md``, ``MANIFEST.tsv``,
    ``senteval/...``), in which case ``<mirror>/senteval/downstream`` is returned,
    or a ``downstream`` folder itself. Raises DataError, naming the setting the
    path came from, its value, what a mirror is and the fix, if the path does not
    exist or has neither layout.
    """
    chosen, named, drop = _mirror_setting(mirror)
    if not chosen:
        return None
    path = Path(chosen).expanduser().absolute()
    if str(path) != chosen:
        named += f" ({path})"
    valid = f"a data mirror is a folder holding {DOWNSTREAM_SUBDIR}/STS/ (the mirror root) or STS/ (SentEval's downstream folder)"
    fix = f"{drop} to download the data, or point it at such a folder"
    if not path.exists():
        raise DataError(f"{named} does not exist; {valid}; {fix}")
    found = find_downstream(path, ("STS",))
    if found is None:
        raise DataError(f"{named} is neither a data mirror nor SentEval's downstream folder; {valid}; {fix}")
    return found


def mirror_file(relpath: str, mirror: str | os.PathLike[str] | None) -> Path | None:
    """Where the data mirror in effect (``mirror``: config ``data.mirror``, else ``$AOE_DATA_MIRROR``)
    holds the published file ``relpath`` (relative to a mirror root), or None.

    A bare SentEval ``downstream`` folder holds only the ``senteval/downstream/`` files; a full
    mirror (one with its MANIFEST.tsv) holds the others too.
    """
    downstream = resolve_downstream_root(mirror)
    if downstream is None:
        return None
    prefix = f"{DOWNSTREAM_SUBDIR}/"
    if relpath.startswith(prefix):
        path = downstream / relpath.removeprefix(prefix)
    else:
        root = downstream.parent.parent
        if not (root / "MANIFEST.tsv").is_file():
            return None
        path = root / relpath
    return path if path.is_file() else None


def _read_manifest(manifest: Path) -> dict[str, tuple[str, str]]:
    """Parse MANIFEST.tsv into {path: (sha256, source)}."""
    lines = text_lines(read_text(manifest, "UTF-8"))
    header = ["path", "lines", "bytes", "sha256", "source"]
    if not lines or lines[0].split("\t") != header:
        raise DataError(f"{manifest}:1: expected header {' '.join(header)!r}")
    entries: dict[str, tuple[str, str]] = {}
    for index, text in enumerate(lines[1:], start=2):
        fields = text.split("\t")
        if len(fields) != len(header):
            raise DataError(
                f"{manifest}:{index}: expected {len(header)} tab-separated fields, got {len(fields)}"
            )
        entries[fields[0]] = (fields[3], fields[4])
    return entries


def verify_manifest(
    mirror_root: str | os.PathLike[str], relpaths: list[str]
) -> dict[str, dict[str, str | None]]:
    """Check mirror files against ``<mirror_root>/MANIFEST.tsv`` and return their provenance.

    This is how the package's table of published sha256 is regenerated from an
    intact mirror (:func:`aoe.data.published.write_table`); the pipeline checks
    the files it reads against that table, whatever folder they are in.

    ``relpaths`` are relative to the mirror root (e.g.
    ``senteval/downstream/STS/STSBenchmark/sts-test.csv``). When the manifest
    exists, each file must be listed in it and match its sha256; otherwise
    DataError names the file. Without a manifest the hashes are computed and
    ``source`` is None, so callers still record exactly which bytes they used.
    Returns ``{relpath: {"sha256": ..., "source": ...}}``.
    """
    root = Path(mirror_root)
    manifest = root / "MANIFEST.tsv"
    entries = _read_manifest(manifest) if manifest.is_file() else None
    provenance: dict[str, dict[str, str | None]] = {}
    for rel in relpaths:
        path = root / rel
        if entries is not None and rel not in entries:
            raise DataError(f"{path} is not listed in {manifest}")
        if not path.is_file():
            raise DataError(f"{path} does not exist")
        got = sha256_file(path)
        source: str | None = None
        if entries is not None:
            expected, source = entries[rel]
            if got != expected:
                raise DataError(f"{path}: sha256 {got} does not match {manifest} (expected {expected})")
        provenance[rel] = {"sha256": got, "source": source}
    return provenance

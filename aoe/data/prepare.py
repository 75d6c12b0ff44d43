"""Prepared tables: a dataset split read from SentEval's layout, written with its provenance."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from aoe.data.io import DataError, sha256_file, write_parquet_atomic
from aoe.data.sts import DOWNSTREAM_SUBDIR, read_sts, sts_files, verify_manifest

__all__ = ["prepare_sts_table"]


def _provenance(downstream: Path, dataset: str, split: str) -> dict:
    """Source files with sha256 (checked against the mirror's MANIFEST.tsv when there is one)."""
    rel = sts_files(dataset, split)
    mirror = downstream.parent.parent
    if downstream == mirror / DOWNSTREAM_SUBDIR and (mirror / "MANIFEST.tsv").is_file():
        files = verify_manifest(mirror, [f"{DOWNSTREAM_SUBDIR}/{r}" for r in rel])
    else:
        files = {r: {"sha256": sha256_file(downstream / r), "source": None} for r in rel}
    return {"root": str(downstream), "files": files}


def prepare_sts_table(
    dataset: str,
    split: str,
    downstream: str | None,
    table_out: str | os.PathLike,
    manifest_out: str | os.PathLike,
    source_record: str | os.PathLike | None = None,
) -> dict:
    """Read ``dataset``/``split``, write the parquet table and its manifest; return the manifest.

    ``downstream`` is SentEval's downstream folder of a mirror; when None,
    ``source_record`` (written by the download rule) says where the archive was unpacked.
    """
    origin: dict = {"kind": "mirror"}
    if downstream is None:
        if source_record is None:
            raise DataError(f"{dataset}/{split}: neither a mirror nor a downloaded archive was given")
        record = json.loads(Path(source_record).read_text())
        downstream = record["downstream"]
        origin = {"kind": "download", **record}
    root = Path(downstream)
    df = read_sts(root, dataset, split)
    manifest = {
        "dataset": dataset,
        "split": split,
        "rows": len(df),
        "rows_per_subset": {k: int(v) for k, v in df["subset"].value_counts(sort=False).items()},
        "origin": origin,
        "source": _provenance(root, dataset, split),
    }
    write_parquet_atomic(df, table_out)
    manifest["table_sha256"] = sha256_file(table_out)
    manifest_out = Path(manifest_out)
    with tempfile.NamedTemporaryFile("w", dir=manifest_out.parent, suffix=".tmp", delete=False) as tmp:
        json.dump(manifest, tmp, indent=2)
        tmp.write("\n")
    os.replace(tmp.name, manifest_out)
    return manifest

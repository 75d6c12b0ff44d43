"""Prepared tables: a dataset split read from SentEval's layout, written with its provenance."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from aoe.data.io import sha256_file, write_parquet_atomic
from aoe.fsutil import as_created
from aoe.data.published import check_published
from aoe.data.sts import DOWNSTREAM_SUBDIR, read_sts, sts_files

__all__ = ["prepare_sts_table"]


def prepare_sts_table(
    dataset: str,
    split: str,
    files: Mapping[str, str | os.PathLike],
    table_out: str | os.PathLike,
    manifest_out: str | os.PathLike,
) -> dict:
    """Read ``dataset``/``split``, write the parquet table and its manifest; return the manifest.

    ``files`` maps each of :func:`~aoe.data.sts.sts_files` to where it was found: a
    full mirror, a bare SentEval downstream folder, or a copy downloaded from the
    file's recorded source. Each must be the published file (its sha256, whichever
    folder it is in); DataError names the first that is not.
    """
    df = read_sts(files, dataset, split)
    source = {
        rel: {"path": str(files[rel]), **check_published(files[rel], f"{DOWNSTREAM_SUBDIR}/{rel}")}
        for rel in sts_files(dataset, split)
    }
    manifest = {
        "dataset": dataset,
        "split": split,
        "rows": len(df),
        "rows_per_subset": {k: int(v) for k, v in df["subset"].value_counts(sort=False).items()},
        "source": {"files": source},
    }
    write_parquet_atomic(df, table_out)
    manifest["table_sha256"] = sha256_file(table_out)
    manifest_out = Path(manifest_out)
    with tempfile.NamedTemporaryFile("w", dir=manifest_out.parent, suffix=".tmp", delete=False) as tmp:
        json.dump(manifest, tmp, indent=2)
        tmp.write("\n")
    as_created(tmp.name)  # not tempfile's 0600: results are read by other users' jobs
    os.replace(tmp.name, manifest_out)
    return manifest

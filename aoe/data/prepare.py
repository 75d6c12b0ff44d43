"""Prepared tables: a dataset split read from where :mod:`aoe.data.catalog` says, written with its provenance.

:func:`prepare_sts_table` reads an STS split from SentEval's layout (rule prepare_sts);
:func:`prepare_pairset` reads any other dataset's split from the mirror layout, a download or a
hub snapshot (rules prepare_nli, prepare_pairs). Each checks every table against its contract
(:mod:`aoe.data.contracts`, the published row count included) and writes it with a manifest naming
the sha256 and source of every file read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from aoe.data.catalog import source, table_paths
from aoe.data.contracts import check_table
from aoe.data.flickr import read_flickr30k
from aoe.data.glue import hub_pairs, read_mrpc, read_qnli_csv
from aoe.data.hub import read_hub_split
from aoe.data.io import DataError, sha256_file, write_parquet_atomic
from aoe.data.mirror import DOWNSTREAM_SUBDIR, check_published
from aoe.data.nli import NLI_MIRROR_FILES, nli_formats, read_allnli, read_nli_csv
from aoe.data.sts import read_sts, sts_files
from aoe.util.jsonio import write_json_atomic

__all__ = ["prepare_sts_table", "prepare_pairset"]


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
    source_files = {
        rel: {"path": str(files[rel]), **check_published(files[rel], f"{DOWNSTREAM_SUBDIR}/{rel}")}
        for rel in sts_files(dataset, split)
    }
    check_table(df, table_out, written=True)
    manifest = {
        "dataset": dataset,
        "split": split,
        "rows": len(df),
        "rows_per_subset": {k: int(v) for k, v in df["subset"].value_counts(sort=False).items()},
        "source": {"files": source_files},
    }
    write_parquet_atomic(df, table_out)
    manifest["table_sha256"] = sha256_file(table_out)
    write_json_atomic(manifest, manifest_out)
    return manifest


def _file_provenance(root: Path, relpaths: tuple[str, ...], kind: str) -> dict:
    """sha256 and source of every input file, each checked against its published sha256."""
    files = {}
    for rel in relpaths:
        path = root / rel
        if not path.is_file():
            where = "the mirror" if kind == "mirror" else "the download folder"
            raise DataError(f"{path}: missing from {where} (needed by {rel})")
        # AllNLI is not published in the mirror: config data.allnli_sha256 pins it at download
        files[rel] = check_published(path, rel) if kind == "mirror" else {"sha256": sha256_file(path), "source": None}
    return files


def prepare_pairset(dataset: str, split: str, root: str | os.PathLike, out_dir: str | os.PathLike = "results/data") -> dict:
    """Read one split and write its table(s) and ``{split}.manifest.json`` under ``out_dir/dataset``.

    ``root`` is the mirror-layout folder (mirror or downloads) for ``mirror`` and
    ``download`` sources, or the hub snapshot folder for ``hub`` sources.
    """
    src = source(dataset, split)
    root = Path(root)
    origin: dict
    if src.kind == "hub":
        rows, files = read_hub_split(root, src.extra["hub_split"])
        record = json.loads((root / "source.json").read_text())
        origin = {"kind": "hub", "repo_id": record["repo_id"], "commit": record["commit"], "files": {f: record["files"][f] for f in files}}
        tables = {"pairs": hub_pairs(dataset, split, rows, f"{record['repo_id']}@{record['commit']}:{','.join(files)}")}
    else:
        origin = {"kind": src.kind, "root": str(root), "files": _file_provenance(root, src.files, src.kind)}
        path = root / src.files[0]
        if dataset == "allnli":
            tables = nli_formats(read_allnli(path, split))
        elif dataset in NLI_MIRROR_FILES:
            tables = nli_formats(read_nli_csv(path, src.rows))
        elif dataset == "mrpc":
            tables = {"pairs": read_mrpc(path, src.rows)}
        elif dataset == "qnli_v1":
            tables = {"pairs": read_qnli_csv(path, src.rows)}
        elif dataset == "flickr30k":
            tables = {"captions": read_flickr30k(path, src.rows)}
        else:  # a SOURCES entry without a reader is a programming error, caught by the tests
            raise DataError(f"no reader for dataset {dataset!r}")
    out_dir = Path(out_dir)
    paths = table_paths(dataset, split, str(out_dir))
    manifest = {"dataset": dataset, "split": split, "origin": origin, "tables": {}}
    for fmt, df in tables.items():
        check_table(df, paths[fmt], written=True)
        write_parquet_atomic(df, paths[fmt])
        manifest["tables"][fmt] = {
            "path": paths[fmt],
            "rows": len(df),
            "sha256": sha256_file(paths[fmt]),
            **({"dropped_empty": df.attrs["dropped_empty"]} if "dropped_empty" in df.attrs else {}),
            **({"positives": int((df["score"] == 1).sum())} if fmt == "pairs" and "score" in df else {}),
        }
    write_json_atomic(manifest, out_dir / dataset / f"{split}.manifest.json")
    return manifest

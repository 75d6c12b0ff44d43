"""Datasets from the Hugging Face hub, pinned to a commit, read split by split.

A snapshot is fetched once by a local rule (compute nodes are often offline) into a
folder that appears atomically with ``source.json`` (repo, requested revision, the
commit it resolved to, and the sha256 of every file), so a prepared table can always
say which bytes it came from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from aoe.data.download import offline_var
from aoe.data.io import DataError, sha256_file
from aoe.util.fsutil import atomic_dir

__all__ = ["fetch_hub_dataset", "read_hub_split", "DATA_SUFFIXES"]

DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv", ".tsv")


def fetch_hub_dataset(repo_id: str, revision: str, out_dir: str | Path, subdir: str | None = None) -> dict:
    """Download the data files of dataset ``repo_id`` (only ``subdir`` when given) into ``out_dir``.

    The revision is resolved to a commit first so every file comes from one commit.
    Returns the record written to ``out_dir/source.json``.
    """
    offline = offline_var()
    if offline:
        raise DataError(f"downloads are disabled ({offline} is set); cannot fetch dataset {repo_id}@{revision}")
    from huggingface_hub import HfApi, snapshot_download

    prefix = f"{subdir.strip('/')}/" if subdir else ""
    patterns = [f"{prefix}*{s}" for s in DATA_SUFFIXES] + [f"{prefix}**/*{s}" for s in DATA_SUFFIXES]
    with atomic_dir(out_dir) as tmp:
        try:
            commit = HfApi().dataset_info(repo_id, revision=revision).sha
            snapshot_download(repo_id, repo_type="dataset", revision=commit, local_dir=tmp, allow_patterns=patterns)
        except Exception as exc:  # the hub's errors are many classes; all mean "cannot fetch"
            raise DataError(
                f"dataset {repo_id}@{revision}: cannot fetch from the Hugging Face hub ({type(exc).__name__}: {exc})"
            ) from exc
        import shutil

        shutil.rmtree(tmp / ".cache", ignore_errors=True)  # hub bookkeeping, not data
        files = sorted(p for p in tmp.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
        if not files:
            raise DataError(f"dataset {repo_id}@{commit}: no data files under {prefix or 'the repository root'}")
        record = {
            "source": "huggingface",
            "repo_id": repo_id,
            "revision": revision,
            "commit": commit,
            "subdir": subdir,
            "files": {str(p.relative_to(tmp)): sha256_file(p) for p in files},
        }
        (tmp / "source.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _split_files(root: Path, split: str) -> list[Path]:
    # a split's files are named after it: train-00000-of-00001.parquet, valid.jsonl, test.csv
    pattern = re.compile(rf"(^|[/_.-]){re.escape(split)}([-_.]|$)")
    return sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES and p.name != "source.json"
        and pattern.search(p.relative_to(root).as_posix())
    )


def _read(path: Path) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix in (".jsonl", ".json"):
            try:
                return pd.read_json(path, lines=True)
            except ValueError:
                return pd.read_json(path)
        return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", keep_default_na=False)
    except Exception as exc:  # pandas/pyarrow raise many classes for a corrupt file
        raise DataError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from exc


def read_hub_split(snapshot: str | Path, split: str) -> tuple[pd.DataFrame, list[str]]:
    """All rows of ``split`` in a snapshot (its files concatenated in name order), and those files."""
    root = Path(snapshot)
    record = root / "source.json"
    if not record.is_file():
        raise DataError(f"{root}: not a finished hub snapshot (no source.json)")
    files = _split_files(root, split)
    if not files:
        raise DataError(f"{root}: no data file for split {split!r} (files: {sorted(json.loads(record.read_text())['files'])})")
    df = pd.concat([_read(p) for p in files], ignore_index=True)
    return df, [p.relative_to(root).as_posix() for p in files]

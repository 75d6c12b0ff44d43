"""Every non-STS dataset of the paper as prepared tables: where each comes from and how it is read.

A dataset is read either from files laid out like the data mirror (the mirror itself,
or the same files downloaded from their public sources into ``results/downloads/files``
and checked against the published sha256, aoe.data.published), from a single downloaded file (AllNLI), or
from a Hugging Face hub snapshot pinned to a commit. ``SOURCES`` says which, per
dataset and split, so the Snakemake rules can declare exact inputs.

Tables (``results/data/{dataset}/{split}.parquet`` for ``pairs``, and
``{split}.{format}.parquet`` for the other formats) have ``sentence1, sentence2[,
sentence3], score`` columns; Flickr30k has ``image, caption_index, caption``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from aoe.data.glue import HUB_PAIR_SETS, MRPC_FILES, QNLI_MIRROR_FILES, hub_pairs, read_mrpc, read_qnli_csv
from aoe.data.hub import read_hub_split
from aoe.data.io import DataError, sha256_file, write_parquet_atomic
from aoe.data.nli import NLI_MIRROR_FILES, nli_formats, read_allnli, read_nli_csv
from aoe.data.published import TABLE, check_published, mirror_sources
from aoe.jsonio import write_json_atomic

__all__ = [
    "SOURCES",
    "Source",
    "PAIRSET_DATASETS",
    "mirror_sources",
    "pair_tables",
    "pair_table_problem",
    "upstream_url",
    "table_paths",
    "prepare_pairset",
    "read_flickr30k",
    "FLICKR_FILES",
]

# split -> (mirror-relative file, captions); 5 consecutive captions per image (Karpathy split)
FLICKR_FILES = {"test": ("flickr30k/test_caps.txt", 5000), "dev": ("flickr30k/dev_caps.txt", 5070)}
CAPTIONS_PER_IMAGE = 5
ALLNLI_FILE = "sbert/AllNLI.tsv.gz"


@dataclass(frozen=True)
class Source:
    """Where one split of a dataset is read from.

    kind: ``mirror`` (``files`` relative to a mirror-layout root), ``download``
    (``files`` relative to results/downloads/files, fetched from a configured URL),
    or ``hub`` (a snapshot of ``repo`` under results/downloads/hub/{dataset}).
    """

    kind: str
    files: tuple[str, ...] = ()
    rows: int | None = None
    formats: tuple[str, ...] = ("pairs",)
    extra: dict = field(default_factory=dict)


_NLI_FORMATS = ("pairs", "triplets", "nli3")

SOURCES: dict[str, dict[str, Source]] = {
    # NLI training data of the paper: SNLI + MultiNLI train, as the official recipe downloads it
    "allnli": {"train": Source("download", (ALLNLI_FILE,), None, _NLI_FORMATS)},
    # mirrored NLI sets: CPU-preset training data (SNLI dev) and NLI-probe data (SNLI test, MNLI dev)
    **{
        ds: {split: Source("mirror", (f,), n, _NLI_FORMATS) for split, (f, n) in splits.items()}
        for ds, splits in NLI_MIRROR_FILES.items()
    },
    "mrpc": {split: Source("mirror", (f,), n) for split, (f, n) in MRPC_FILES.items()},
    "qnli_v1": {split: Source("mirror", (f,), n) for split, (f, n) in QNLI_MIRROR_FILES.items()},
    **{
        ds: {split: Source("hub", (), n, extra={"hub_split": hs}) for split, (hs, n) in spec["splits"].items()}
        for ds, spec in HUB_PAIR_SETS.items()
    },
    "flickr30k": {split: Source("mirror", (f,), n, ("captions",)) for split, (f, n) in FLICKR_FILES.items()},
}

PAIRSET_DATASETS = tuple(SOURCES)


def upstream_url(relpath: str) -> str:
    """The raw GitHub URL of a mirror file's recorded source (owner/repo@commit:path)."""
    src = mirror_sources().get(relpath)
    if src is None:
        raise DataError(f"{relpath}: no recorded upstream source (aoe/resources/{TABLE})")
    repo, rest = src["source"].split("@", 1)
    commit, path = rest.split(":", 1)
    from urllib.parse import quote

    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


def source(dataset: str, split: str) -> Source:
    if dataset not in SOURCES:
        raise DataError(f"unknown dataset {dataset!r}; known: {', '.join(SOURCES)}")
    if split not in SOURCES[dataset]:
        raise DataError(f"dataset {dataset!r} has no split {split!r}; it has {', '.join(SOURCES[dataset])}")
    return SOURCES[dataset][split]


def pair_tables() -> dict[str, tuple[str, ...]]:
    """Dataset -> splits of every prepared table of sentence pairs (the STS sets and the pair sets)."""
    from aoe.data.sts import SPLITS as STS_SPLITS

    pairs = {ds: tuple(s for s, src in splits.items() if "pairs" in src.formats) for ds, splits in SOURCES.items()}
    return {**STS_SPLITS, **{ds: splits for ds, splits in pairs.items() if splits}}


def dataset_splits(config: dict | None = None) -> dict[str, tuple[str, ...]]:
    """Dataset -> splits of every prepared table (results/data/<dataset>/<split>.*): the STS sets,
    the pair sets and the ones the LLM-supervised rules generate (one per generator of ``config``)."""
    from aoe.data.sts import SPLITS as STS_SPLITS
    from aoe.llm_supervised import generated_splits

    return {**STS_SPLITS, **{ds: tuple(splits) for ds, splits in SOURCES.items()}, **generated_splits(config)}


def pair_table_problem(dataset: str, split: str) -> str | None:
    """Why ``dataset``/``split`` names no pair table (a config error message: valid values and the fix), or None."""
    tables = pair_tables()
    if split in tables.get(dataset, ()):
        return None
    valid = "; ".join(f"{ds} ({', '.join(splits)})" for ds, splits in tables.items())
    if dataset in tables:
        return f"dataset {dataset!r} has no split {split!r}; its splits: {', '.join(tables[dataset])}; set split to one of them"
    # a dataset and split written as one name, e.g. snli_dev
    joined = [(ds, s) for ds, splits in tables.items() for s in splits if dataset in (f"{ds}_{s}", f"{ds}-{s}", f"{ds}/{s}")]
    fix = f"set dataset: {joined[0][0]} and split: {joined[0][1]}" if joined else "set dataset to one of them and split to one of its splits"
    return f"dataset {dataset!r} is not a pair dataset; valid: {valid}; {fix}"


def table_paths(dataset: str, split: str, root: str = "results/data") -> dict[str, str]:
    """format -> prepared table path of one split."""
    src = source(dataset, split)
    return {
        fmt: f"{root}/{dataset}/{split}.parquet" if fmt in ("pairs", "captions") else f"{root}/{dataset}/{split}.{fmt}.parquet"
        for fmt in src.formats
    }


def read_flickr30k(path: str | os.PathLike, expected_rows: int | None = None) -> pd.DataFrame:
    """Karpathy-split captions: line i is caption i % 5 of image i // 5."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: Flickr30k captions not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            raise DataError(f"{path}, line {i}: empty caption")
    if len(lines) % CAPTIONS_PER_IMAGE:
        raise DataError(f"{path}: {len(lines)} captions, not a multiple of {CAPTIONS_PER_IMAGE}")
    if expected_rows is not None and len(lines) != expected_rows:
        raise DataError(f"{path}: {len(lines)} captions, expected {expected_rows}")
    n = len(lines)
    return pd.DataFrame(
        {"image": [i // CAPTIONS_PER_IMAGE for i in range(n)], "caption_index": [i % CAPTIONS_PER_IMAGE for i in range(n)], "caption": lines}
    )


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

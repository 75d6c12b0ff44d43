"""Every prepared table of the paper's datasets: where each split comes from, and its path.

A dataset is read either from files laid out like the data mirror (the mirror itself,
or the same files downloaded from their public sources into ``results/downloads/files``
and checked against the published sha256, :func:`aoe.data.mirror.check_published`), from a
single downloaded file (AllNLI), or from a Hugging Face hub snapshot pinned to a commit.
:data:`SOURCES` says which, per dataset and split, so the Snakemake rules can declare exact
inputs; :func:`aoe.data.prepare.prepare_pairset` reads a split into its tables.

Tables (``results/data/{dataset}/{split}.parquet`` for ``pairs``, and
``{split}.{format}.parquet`` for the other formats) have ``sentence1, sentence2[,
sentence3], score`` columns; Flickr30k has ``image, caption_index, caption``. The STS sets
(:mod:`aoe.data.sts`) and the tables the workflow generates (:mod:`aoe.data.generated`) are
prepared tables too: :func:`dataset_splits` lists them all.

Rules import this module while planning: it imports the readers' constants only (no hub or
download code).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aoe.data.flickr import FLICKR_FILES
from aoe.data.generated import generated_splits
from aoe.data.glue import HUB_PAIR_SETS, MRPC_FILES, QNLI_MIRROR_FILES
from aoe.data.io import DataError
from aoe.data.nli import NLI_MIRROR_FILES
from aoe.data.sts import SPLITS as STS_SPLITS

__all__ = [
    "ALLNLI_FILE",
    "SOURCES",
    "Source",
    "PAIRSET_DATASETS",
    "source",
    "pair_tables",
    "dataset_splits",
    "pair_table_problem",
    "table_paths",
]

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


def source(dataset: str, split: str) -> Source:
    if dataset not in SOURCES:
        raise DataError(f"unknown dataset {dataset!r}; known: {', '.join(SOURCES)}")
    if split not in SOURCES[dataset]:
        raise DataError(f"dataset {dataset!r} has no split {split!r}; it has {', '.join(SOURCES[dataset])}")
    return SOURCES[dataset][split]


def pair_tables() -> dict[str, tuple[str, ...]]:
    """Dataset -> splits of every prepared table of sentence pairs (the STS sets and the pair sets)."""
    pairs = {ds: tuple(s for s, src in splits.items() if "pairs" in src.formats) for ds, splits in SOURCES.items()}
    return {**STS_SPLITS, **{ds: splits for ds, splits in pairs.items() if splits}}


def dataset_splits(config: dict | None = None) -> dict[str, tuple[str, ...]]:
    """Dataset -> splits of every prepared table (results/data/<dataset>/<split>.*): the STS sets,
    the pair sets and the ones the LLM-supervised rules generate (one per generator of ``config``)."""
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

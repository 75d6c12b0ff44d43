"""GitHub Issue Similarity (GIS): collecting the paper's duplicate-issue dataset from the GitHub REST API.

``python -m aoe.gis --repo OWNER/NAME --out DIR`` (see ``aoe.gis.__main__``) or
:func:`collect` write ``DIR/pairs.jsonl`` and ``DIR/stats.json``;
``python -m aoe.gis.stats PAIRS.jsonl`` or :func:`compute_stats` describe any
pairs table (Table 7, Figures 7-9).

May import: ``aoe.util``, ``aoe.data``.
"""

from __future__ import annotations

import importlib
from typing import Any

from aoe.gis.client import (
    GISError,
    GitHubClient,
    MalformedResponse,
    NotFound,
    OfflineError,
    RequestFailed,
    TokenRejected,
)
from aoe.gis.collect import collect, load_repo_list
from aoe.gis.harvest import RepositoryNotFound
from aoe.gis.pairs import PAPER_SPLIT_SIZES, SPLITS, build_pairs
from aoe.gis.references import find_duplicate_references

# Imported on first use, so that ``python -m aoe.gis.stats`` does not find its own
# module already imported by this package (runpy warns about that).
_STATS_EXPORTS = ("compute_stats", "load_pairs", "plot_all", "rows_from_splits")

__all__ = [
    "PAPER_SPLIT_SIZES",
    "SPLITS",
    "GISError",
    "GitHubClient",
    "MalformedResponse",
    "NotFound",
    "OfflineError",
    "RepositoryNotFound",
    "RequestFailed",
    "TokenRejected",
    "build_pairs",
    "collect",
    "compute_stats",
    "find_duplicate_references",
    "load_pairs",
    "load_repo_list",
    "plot_all",
    "rows_from_splits",
]


def __getattr__(name: str) -> Any:
    if name in _STATS_EXPORTS:
        return getattr(importlib.import_module("aoe.gis.stats"), name)
    raise AttributeError(f"module 'aoe.gis' has no attribute {name!r}")

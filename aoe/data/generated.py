"""The prepared tables that the workflow generates instead of reading a published source.

The LLM-supervised rules (:mod:`aoe.llm_supervised`, AnglE arXiv 2309.12871 §4.5) write
``results/data/<name>/train.parquet`` like any prepared table: one pair table per configured
generator (``stsb_llm``, ``stsb_llm_<name>``) and the self pairs (``stsb_self``). Their names
live here, with the data catalog (:func:`aoe.data.catalog.dataset_splits`) that lists them,
so that no data module imports a feature package; :mod:`aoe.llm_supervised` re-exports them.

Import-light (no pandas): the workflow reads :func:`generated_splits` while it plans.
"""

from __future__ import annotations

import re

__all__ = ["GENERATED_SPLITS", "LLM_DATASET", "LLM_DATASET_PATTERN", "SELF_DATASET", "SPLIT", "generated_splits", "generators"]

LLM_DATASET = "stsb_llm"  # (text, LLM's similar sentence) 1, (text, LLM's dissimilar sentence) 0
SELF_DATASET = "stsb_self"  # (text, text) 1: SimCSE's unsupervised setting, dropout as the only noise
SPLIT = "train"
# each generator writes its own pair table (llm_supervised.generators): stsb_llm, stsb_llm_<name>;
# the schema spells it twice (generators' names, train sets' datasets), tests/test_schema.py holds them equal
LLM_DATASET_PATTERN = r"stsb_llm(_[a-z0-9]+)*"

# dataset -> its splits when no config is at hand (the default generator's table and the self pairs)
GENERATED_SPLITS: dict[str, tuple[str, ...]] = {LLM_DATASET: (SPLIT,), SELF_DATASET: (SPLIT,)}


def generators(config: dict | None) -> dict[str, dict]:
    """Pair-table name -> its generator entry (``backbone``, ``env``, ``generation`` overrides)."""
    if not config or "llm_supervised" not in config:
        return {}
    return dict(config["llm_supervised"].get("generators") or {})


def generated_splits(config: dict | None = None) -> dict[str, tuple[str, ...]]:
    """Dataset -> splits of the tables the LLM-supervised rules write: one per configured generator,
    and the self pairs; without a config, :data:`GENERATED_SPLITS`."""
    if config is None:
        return dict(GENERATED_SPLITS)
    names = [n for n in generators(config) if re.fullmatch(LLM_DATASET_PATTERN, n)]
    return {**{n: (SPLIT,) for n in names}, SELF_DATASET: (SPLIT,)}

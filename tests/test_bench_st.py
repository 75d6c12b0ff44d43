"""bench/speed/train_vs_sentence_transformers.py feeds SentenceTransformerTrainer our engine's batches, in order, and
compares the same loss definitions (on 50 random pairs and a tiny BERT: seconds)."""

from __future__ import annotations

import argparse
import importlib.util
import sys

import pandas as pd
import pytest

from tests.train_utils import random_pairs_table
from tests.workflow_utils import REPO

# find_spec, not importorskip: importing sentence_transformers at collection cost every xdist worker ~7 CPU-s, the one
# that never runs this file too (the script imports it where it uses it)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None, reason="sentence_transformers not installed")
sys.path.insert(0, str(REPO / "bench" / "speed"))
import train_vs_sentence_transformers as T  # noqa: E402


def test_st_batches_are_the_engine_batches_and_the_losses_agree(tmp_path, tiny_bert):
    from aoe.losses import get_objective
    from aoe.model.tokens import build_token_cache

    table = random_pairs_table(tmp_path / "pairs.parquet", seed=3, n=50)
    # 3 steps of 32 over 50 pairs: one full batch per epoch, each from its own seeded permutation
    args = argparse.Namespace(steps=3, seed=1, backbone=str(tiny_bert))
    cfg = T._config(args, "cosent")
    build_token_cache(table, tiny_bert, cfg.max_length, tmp_path / "tokens")
    df = pd.read_parquet(table)
    order = T._batch_order(len(df), args.steps, cfg.seed, cfg.batch_size)
    assert [len(b) for b in order] == [32, 32, 32] and order[0] != order[1]
    objective = get_objective(cfg.objective, cfg.objective_overrides, format=cfg.format)
    rows = T.st_rows(df, order, objective, cfg.score_range)
    assert rows["sentence1"] == [df["sentence1"].iat[i] for b in order for i in b]
    ours = T.ours_batches_sha(tmp_path / "tokens", table, tiny_bert, cfg.max_length, order, objective, cfg.score_range)
    trainer, _, _ = T._st_trainer(args, "cosent", rows, tmp_path / "st")
    theirs, n, sizes = T.st_batches_sha(trainer)
    assert (n, sizes) == (3, [32]) and theirs == ours
    # another order gives another hash (the check can fail)
    swapped = T.st_rows(df, [order[1], order[0], order[2]], objective, cfg.score_range)
    trainer, _, _ = T._st_trainer(args, "cosent", swapped, tmp_path / "st2")
    assert T.st_batches_sha(trainer)[0] != ours

    checked = T.loss_check(args, df, order)
    assert set(checked) == {"cosent", "angle"}
    assert all(c["max_abs_diff"] < 1e-9 for c in checked.values()), checked

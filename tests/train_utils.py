"""Helpers shared by the training tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pytest

import aoe.training.train


def killed_after_checkpoint(run: Callable[[], object], out: Path, at: int, monkeypatch) -> None:
    """Call ``run`` (a training into ``out``) until the checkpoint of step ``at`` is written, then die as
    a preempted job: the checkpoint stays, the model folder is never written."""
    real = aoe.training.train._save_checkpoint

    def save_then_die(accelerator, root, identity, state, metrics_lines):
        saved = real(accelerator, root, identity, state, metrics_lines)
        if state["step"] == at:
            raise KeyboardInterrupt("preempted")
        return saved

    with monkeypatch.context() as m:
        m.setattr(aoe.training.train, "_save_checkpoint", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            run()
    assert not out.exists()


WORDS = "apple river stone cloud quick lazy bright small green heavy old new red blue".split()


def random_pairs_table(path: Path, seed: int, n: int) -> Path:
    """``n`` scored pairs of short texts drawn from 50 phrases of :data:`WORDS` (seeded), written as a pair table."""
    rng = np.random.default_rng(seed)
    pool = [" ".join(rng.choice(WORDS, size=rng.integers(2, 8))) for _ in range(50)]
    rows = [(pool[rng.integers(50)], pool[rng.integers(50)], float(rng.integers(0, 6))) for _ in range(n)]
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score"]).to_parquet(path, index=False)
    return path

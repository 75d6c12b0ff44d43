"""Helpers shared by the training tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

import aoe.train


def killed_after_checkpoint(run: Callable[[], object], out: Path, at: int, monkeypatch) -> None:
    """Call ``run`` (a training into ``out``) until the checkpoint of step ``at`` is written, then die as
    a preempted job: the checkpoint stays, the model folder is never written."""
    real = aoe.train._save_checkpoint

    def save_then_die(accelerator, root, identity, state, metrics_lines):
        saved = real(accelerator, root, identity, state, metrics_lines)
        if state["step"] == at:
            raise KeyboardInterrupt("preempted")
        return saved

    with monkeypatch.context() as m:
        m.setattr(aoe.train, "_save_checkpoint", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            run()
    assert not out.exists()

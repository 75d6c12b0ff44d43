"""Trained models whose code is not the tree's: named at every planning, with the command that retrains them.

Snakemake's code trigger sees a rule's own script, not the package code it runs, so an edited loss plans
"Nothing to be done" (issue 70). Each model records the fingerprint of the code that trained it
(``aoe_config.json`` ``code``, :mod:`aoe.training.fingerprint`); planning compares it with the tree's. It names
them rather than rerunning them (our choice): a module's digest also changes for an edit that moves no weight
(a reworded error message, an import moved), and on the paper grid a retraining costs GPU-hours, so the user
reads which modules changed and decides; a forced rerun then trains (the fingerprint is part of the run's
identity: :func:`aoe.training.checkpoints.run_identity`), never restores the old weights.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from aoe.config.cells import Cell, results_path
from aoe.training.fingerprint import code_fingerprint

__all__ = ["CodeChange", "models_of_other_code", "code_change_message", "SHOWN"]

# model folders the message's command lists by name; past these, --forcerun train_model
SHOWN = 10


@dataclass(frozen=True)
class CodeChange:
    """A trained model folder and the modules whose code differs from the tree's (``()``: none recorded)."""

    folder: str
    modules: tuple[str, ...]

    @property
    def unrecorded(self) -> bool:
        return not self.modules


def models_of_other_code(config: dict, cells: list[Cell], root: str | Path = ".", now: dict | None = None) -> list[CodeChange]:
    """The trained models of ``cells`` whose recorded code fingerprint differs from ``now`` (default: the tree's,
    :func:`aoe.training.fingerprint.code_fingerprint`), or that record none (trained before it was recorded)."""
    out = []
    for cell in cells:
        folder = results_path(config, f"results/models/{cell.path}")
        record = Path(root) / folder / "aoe_config.json"
        if not cell.trained or not record.is_file():
            continue
        try:
            saved = json.loads(record.read_text()).get("code") or {}
        except (OSError, ValueError):
            continue  # an unreadable record is the model's problem, found when it is loaded
        now = now or code_fingerprint()  # only where a model exists: a fresh tree plans without reading the code
        if saved.get("sha256") == now["sha256"]:
            continue
        was = saved.get("modules") or {}
        changed = sorted(m for m in set(was) | set(now["modules"]) if was.get(m) != now["modules"].get(m)) if was else []
        out.append(CodeChange(folder, tuple(changed)))
    return out


def code_change_message(changes: list[CodeChange], configfiles: list[str], overrides: bool = False) -> str:
    """What planning says of ``changes``: how many, which modules, and the command that retrains them
    (``configfiles``: the run's --configfile files, so the command plans the same configuration)."""
    changed = [c for c in changes if not c.unrecorded]
    unrecorded = [c for c in changes if c.unrecorded]
    modules = sorted({m for c in changed for m in c.modules})
    lines = []
    if changed:
        lines.append(f"{len(changed)} trained model(s) were trained by other code than this tree's "
                     f"({', '.join(modules)} changed since; comments and docstrings do not count): "
                     + ", ".join(c.folder for c in changed[:SHOWN]) + (f", … ({len(changed)} in all)" if len(changed) > SHOWN else ""))
    if unrecorded:
        lines.append(f"{len(unrecorded)} trained model(s) record no code fingerprint (trained before it was recorded), so whether "
                     "their code is this tree's cannot be told: " + ", ".join(c.folder for c in unrecorded[:SHOWN])
                     + (f", … ({len(unrecorded)} in all)" if len(unrecorded) > SHOWN else ""))
    folders = [c.folder for c in changed + unrecorded]
    config = f" --configfile {' '.join(shlex.quote(f) for f in configfiles)}" if configfiles else ""
    again = " (and the same --config values)" if overrides else ""
    if len(folders) <= SHOWN:
        command = f"snakemake --forcerun {' '.join(shlex.quote(f) for f in folders)}{config}"
    else:
        # every train job: those of the tree's code restore their kept final model in seconds (same identity)
        command = f"snakemake --forcerun train_model{config}"
    lines.append("Snakemake does not rerun a training for a change of package code (its code trigger sees the rule's script "
                 f"only); to retrain them with this tree's code: {command}{again}, with the --cores or --profile of the run. A forced training never restores the kept "
                 "model of other code (docs/outputs.md#what-a-change-reruns)")
    return "\n".join(lines)

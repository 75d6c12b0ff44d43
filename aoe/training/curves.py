"""A training's curves: each metrics.jsonl line as TensorBoard scalars, written while it trains (accelerate's tracker),
replayed for a resumed run at the times its killed job logged them, and drawn again for a model laid out from its
kept ``final/`` (:mod:`aoe.training.train` calls it; docs/training.md "Training curves").

Training curves. Every metrics line is also logged through accelerate's TensorBoard tracker
(local event files, no service): while the job runs they grow in ``seed{seed}.ckpt/tensorboard/``
(``tensorboard --logdir results/models`` shows running jobs live), and the finished model folder
takes them as ``tensorboard/``. metrics.jsonl is the source of truth and the event files mirror it
line for line: a run resumed from a checkpoint rewrites them from the checkpoint's metrics (each
step keeps the wall-clock time it was first logged at) and continues, so the steps a killed job
logged after its last checkpoint, which the resumed run trains again, appear once. The checkpoint
folder's ``final`` copy holds no event files (TensorBoard would list every run twice); a model laid
out again from it gets its curves rewritten from its metrics.jsonl, at that moment's wall-clock time.
A run that fails (a non-finite loss, a bad setting) leaves its curves in ``seed{seed}.ckpt/tensorboard/``
for a look, unless it failed before its first metrics line.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from pathlib import Path

__all__ = ["CURVES_DIR", "Curves", "curve_scalars"]


# the event files' folder: <model>/tensorboard/; while the job trains, <model>.ckpt/tensorboard/
CURVES_DIR = "tensorboard"


# keys of a metrics line shown under train/ (every other number of a training line is the loss or a part of it)
_TRAIN_TAGS = ("epoch", "lr", "grad_norm", "pairs_per_s")


def curve_scalars(record: dict) -> dict[str, float]:
    """The TensorBoard scalars (tag -> value) of one metrics.jsonl line, logged at its ``step``.

    A training line: ``loss/total`` (the objective's loss), ``loss/<part>`` (each part as logged,
    e.g. ``loss/angle``, ``loss/contrastive``), ``train/lr``, ``train/grad_norm`` (before clipping),
    ``train/pairs_per_s`` and ``train/epoch``. A ``select_checkpoint: best`` line (an epoch end):
    ``select/spearman`` (x100 on select_split; left out where undefined) and ``select/seconds``.
    Strings, booleans and nulls are not curves.
    """
    if "select_split" in record:
        tagged = {"select/spearman": record.get("select_spearman"), "select/seconds": record.get("select_seconds")}
    else:
        tagged = {
            ("loss/total" if k == "loss" else f"train/{k}" if k in _TRAIN_TAGS else f"loss/{k}"): v
            for k, v in record.items()
            if k not in ("step", "steps_averaged")  # how many steps a mean covers: the line's, not a curve
        }
    return {k: float(v) for k, v in tagged.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _event_walltimes(folder: Path) -> dict[int, float]:
    """step -> wall-clock time of the first value logged at that step, from the event files under ``folder``
    (those of a killed job; read with tensorboard's own loader; what a file cut by the kill holds is kept)."""
    if not folder.is_dir():
        return {}
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out: dict[int, float] = {}
    for path in sorted(folder.rglob("*tfevents*")):
        try:
            for event in EventFileLoader(str(path)).Load():
                if event.HasField("summary"):
                    out.setdefault(int(event.step), float(event.wall_time))
        except Exception:  # noqa: BLE001 - a damaged file only costs the original times of its steps
            continue
    return out


class Curves:
    """Training curves: accelerate's TensorBoard tracker fed every metrics line once, in order.

    The event files mirror metrics.jsonl, the source of truth: they are written from scratch when a
    run starts, a resumed run first logs its checkpoint's lines again (at the wall-clock times the
    killed job logged them, where its files say), then the loop's new lines as they are written.
    """

    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.logged = 0  # metrics lines logged so far
        self.walltimes: dict[int, float] = {}  # a resumed run's replayed steps: when they were first logged

    @classmethod
    @contextlib.contextmanager
    def opened(cls, accelerator, root: Path, metrics_lines: list[str]):
        """The tracker writing ``root/tensorboard/`` anew, ``metrics_lines`` (a resumed run's) logged first;
        the writer is closed on leaving, also on an error or a kill turned into an exception.

        (accelerate's ``end_training`` would also close it, but it destroys the process group that
        the model's saving still waits on; the process group ends with the process.)"""
        curves = cls(accelerator)
        if accelerator.is_main_process and accelerator.log_with:
            folder = root / CURVES_DIR
            # the steps a killed job logged after its last checkpoint are trained again: never twice in the curves
            curves.walltimes = _event_walltimes(folder)
            shutil.rmtree(folder, ignore_errors=True)
        accelerator.init_trackers(CURVES_DIR)  # <project_dir>/tensorboard/events.out.tfevents.*
        try:
            curves.push(metrics_lines)
            curves.walltimes = {}  # the lines to come are logged now
            yield curves
        finally:
            for tracker in accelerator.trackers:
                tracker.finish()
            accelerator.trackers.clear()
            if accelerator.is_main_process and accelerator.log_with and not curves.logged:
                # failed before its first metrics line: no empty curves (nor a checkpoint folder made for them) stay;
                # a run that fails later keeps its curves here for a look (the next run rewrites them)
                shutil.rmtree(root / CURVES_DIR, ignore_errors=True)
                with contextlib.suppress(OSError):
                    root.rmdir()  # only if empty

    def push(self, metrics_lines: list[str]) -> None:
        """Log the lines not logged yet (the main process only)."""
        if self.accelerator.is_main_process and self.accelerator.trackers:
            for line in metrics_lines[self.logged :]:
                record = json.loads(line)
                values = curve_scalars(record)
                # one wall-clock time for every tag of a step, so a replay restores each tag's time exactly
                wall = self.walltimes.get(record["step"]) or time.time()
                if values:
                    self.accelerator.log(values, step=record["step"], log_kwargs={"tensorboard": {"walltime": wall}})
        self.logged = len(metrics_lines)

    @staticmethod
    def move_into(root: Path, model_dir: Path) -> None:
        """The finished run's event files from the checkpoint folder into the model folder."""
        if (root / CURVES_DIR).is_dir():
            shutil.move(str(root / CURVES_DIR), str(model_dir / CURVES_DIR))

    @staticmethod
    def rewrite(model_dir: Path) -> None:
        """A model folder laid out again from ``final/``: its curves from its metrics.jsonl. torch's SummaryWriter
        (what accelerate's tracker wraps) directly: no Accelerator is built on this path, and one process writes."""
        from torch.utils.tensorboard import SummaryWriter

        folder, metrics = model_dir / CURVES_DIR, model_dir / "metrics.jsonl"
        shutil.rmtree(folder, ignore_errors=True)
        if not metrics.is_file():
            return
        writer = SummaryWriter(str(folder))
        try:
            for line in metrics.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    for tag, value in curve_scalars(record).items():
                        writer.add_scalar(tag, value, global_step=record["step"])
        finally:
            writer.close()

"""The grid's models: a cell (backbone, objective, train set, seed and rerun), its folder in the
configuration's own results tree, and the cells the config's ``runs`` train (with each seed's trainings).

Import-light on purpose (no torch): the Snakefile imports it at DAG-build time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from aoe.config.hparams import schema_default

__all__ = [
    "results_path",
    "Cell",
    "parse_run",
    "run_name",
    "PRETRAINED",
    "RELEASED",
    "run_cells",
    "NO_TRAINSET",
    "trained_runs",
]

PRETRAINED = "pretrained"  # objective of a backbone evaluated as downloaded
# objective of a published checkpoint evaluated as downloaded (config released.checkpoints: its key is
# the cell's train set, so results/eval/<backbone>/released/<key>/seed0 holds its evaluations)
RELEASED = "released"
NO_TRAINSET = "none"  # the third folder of a backbone scored with its own embedding (a pretrained variant names its own)
PRETRAINED_SEED = 0  # a model evaluated as downloaded trains nothing: one seed folder, seed0


def results_path(config: dict, path: str) -> str:
    """``path``, written ``results/...``, in the configuration's own results tree (config ``results``:
    ``results`` for the paper grid, ``results/<preset>`` for each preset), so that configurations
    never write into each other's tree and a report never links to another one's ledger."""
    rel = path.removeprefix("results/") if path != "results" else ""
    return f"{config['results']}/{rel}" if rel else config["results"]


RERUN = "-rerun"  # seed42-rerun2: the third training of seed 42


@dataclass(frozen=True, order=True)
class Cell:
    """One model: results/models/{backbone}/{objective}/{trainset}/seed{seed}[-rerun{k}].

    ``rerun`` k > 0 trains the same cell again with the same seed (ACL Table 4's "fixed random
    seed = 42" row: the spread of repeated runs, which only nondeterministic kernels make
    nonzero); rerun 0 is the cell itself.
    """

    backbone: str
    objective: str
    trainset: str
    seed: int
    rerun: int = 0

    @property
    def run(self) -> str:
        """The last part of the path without its ``seed`` prefix: "42", or "42-rerun2"."""
        return run_name(self.seed, self.rerun)

    @property
    def path(self) -> str:
        return f"{self.backbone}/{self.objective}/{self.trainset}/seed{self.run}"

    @property
    def trained(self) -> bool:
        """Trained by this workflow (not a backbone or a published checkpoint as downloaded)."""
        return self.objective not in (PRETRAINED, RELEASED)

    @classmethod
    def from_wildcards(cls, w) -> Cell:
        """The cell of a job's wildcards (``seed`` is the run: "42" or "42-rerun2")."""
        return cls(w["backbone"], w["objective"], w["trainset"], *parse_run(w["seed"]))


def run_name(seed: int, rerun: int = 0) -> str:
    """The name of one training of a seed: "42", or "42-rerun2" (:func:`parse_run` reads it back)."""
    return f"{seed}{RERUN}{rerun}" if rerun else str(seed)


def parse_run(run: str | int) -> tuple[int, int]:
    """(seed, rerun) of a run name: "42" -> (42, 0), "42-rerun2" -> (42, 2)."""
    seed, _, rerun = str(run).partition(RERUN)
    return int(seed), int(rerun or 0)


def run_cells(config: dict) -> list[Cell]:
    """Every trained model of the grid."""
    return list(_run_cells(_runs_key(config, default_rows=False)))


@functools.lru_cache(maxsize=8)
def _run_cells(runs: tuple) -> tuple[Cell, ...]:
    # input functions ask for the grid once per job: planning the paper grid calls this ~300 times
    return tuple(sorted({Cell(b, obj, t, seed, k) for b, t, objectives, seeds, reruns in runs
                         for obj in objectives for seed in seeds for k in range(reruns)}))


def _runs_key(config: dict, default_rows: bool) -> tuple:
    """The runs as run_cells reads them; ``default_rows``: without the entries marked ``named_rows_only`` (trained for
    the table rows that name their seeds and reruns, AoE Table 4's random-seed rows), which no other row takes."""
    default = schema_default("runs", "*", "reruns")
    return tuple((r["backbone"], r["trainset"], tuple(r["objectives"]), tuple(r["seeds"]), int(r.get("reruns", default)))
                 for r in config["runs"] if not (default_rows and r.get("named_rows_only")))


@functools.lru_cache(maxsize=16)
def _trained_index(runs: tuple) -> dict[tuple[str, str, str], dict[int, int]]:
    """(backbone, objective, trainset) -> {seed: trainings of it} (table_rows asks once per row and seed)."""
    index: dict[tuple[str, str, str], dict[int, set[int]]] = {}
    for c in _run_cells(runs):
        index.setdefault((c.backbone, c.objective, c.trainset), {}).setdefault(c.seed, set()).add(c.rerun)
    return {k: {seed: len(r) for seed, r in v.items()} for k, v in index.items()}


def trained_runs(config: dict, default_rows: bool = False) -> dict[tuple[str, str, str], dict[int, int]]:
    """(backbone, objective, trainset) -> {seed: trainings of it} of the runs (``default_rows``: as
    :func:`_runs_key`). Shared and cached: read it, never change it."""
    return _trained_index(_runs_key(config, default_rows))


def _trained_seeds(config: dict, backbone: str, objective: str, trainset: str) -> tuple[int, ...]:
    """The seeds the runs train a cell with."""
    return tuple(sorted(trained_runs(config).get((backbone, objective, trainset), {})))


def _trained_reruns(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> int:
    """How many trainings of one seed the runs make (0: none)."""
    return trained_runs(config).get((backbone, objective, trainset), {}).get(seed, 0)

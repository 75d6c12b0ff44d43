"""Config logic of the Snakemake workflow, kept out of the .smk files so it is unit-tested.

Import-light on purpose (no torch): the Snakefile imports it at DAG-build time.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ConfigError",
    "Cell",
    "PRETRAINED",
    "check_config",
    "run_cells",
    "eval_cells",
    "table_cells",
    "enabled_tables",
    "train_params",
    "start_log",
]

PRETRAINED = "pretrained"  # objective of a backbone evaluated as downloaded
NO_TRAINSET = "none"
PRETRAINED_SEED = 0


class ConfigError(ValueError):
    """A config value that is valid for the schema but inconsistent with the rest of the config."""


@dataclass(frozen=True, order=True)
class Cell:
    """One model: results/models/{backbone}/{objective}/{trainset}/seed{seed}."""

    backbone: str
    objective: str
    trainset: str
    seed: int

    @property
    def path(self) -> str:
        return f"{self.backbone}/{self.objective}/{self.trainset}/seed{self.seed}"

    @property
    def trained(self) -> bool:
        return self.objective != PRETRAINED


def check_config(config: dict) -> None:
    """Cross-key checks the JSON schema cannot express; raise ConfigError naming the key."""
    backbones, trainsets, objectives = config["backbones"], config["trainsets"], config["objectives"]
    from aoe.losses.objectives import OBJECTIVES, resolve_format

    for i, run in enumerate(config["runs"]):
        where = f"runs[{i}]"
        if run["backbone"] not in backbones:
            raise ConfigError(f"{where}.backbone: unknown backbone {run['backbone']!r}; known: {sorted(backbones)}")
        if run["trainset"] not in trainsets:
            raise ConfigError(f"{where}.trainset: unknown train set {run['trainset']!r}; known: {sorted(trainsets)}")
        for obj in run["objectives"]:
            if obj == PRETRAINED:
                raise ConfigError(f"{where}.objectives: {PRETRAINED!r} is not trained; tables add it by include_pretrained")
            if obj not in objectives and obj not in OBJECTIVES:
                raise ConfigError(
                    f"{where}.objectives: unknown objective {obj!r}; known: {sorted(set(objectives) | set(OBJECTIVES))}"
                )
            try:
                resolve_format(obj, trainsets[run["trainset"]].get("formats", ["pairs"]), objectives.get(obj))
            except ValueError as err:
                raise ConfigError(f"{where}: {err} (trainsets.{run['trainset']}.formats)") from None
    for name, spec in backbones.items():
        sources = [k for k in ("hf_id", "package", "path") if k in spec]
        if len(sources) != 1:
            raise ConfigError(f"backbones.{name}: give exactly one of hf_id, package, path (got {sources or 'none'})")
    from aoe.data.pairsets import SOURCES
    from aoe.data.sts import SPLITS as STS_SPLITS

    for name, spec in trainsets.items():
        splits = STS_SPLITS.get(spec["dataset"]) or SOURCES.get(spec["dataset"], {})
        if spec["split"] not in splits:
            raise ConfigError(
                f"trainsets.{name}: dataset {spec['dataset']!r} has no split {spec['split']!r}; it has {sorted(splits)}"
            )
        available = SOURCES[spec["dataset"]][spec["split"]].formats if spec["dataset"] in SOURCES else ("pairs",)
        extra = sorted(set(spec.get("formats", ["pairs"])) - set(available))
        if extra:
            raise ConfigError(f"trainsets.{name}.formats: {spec['dataset']} provides {list(available)}, not {extra}")
        lo, hi = spec["score_range"]
        if not hi > lo:
            raise ConfigError(f"trainsets.{name}.score_range: must be increasing, got {spec['score_range']}")
    sat = config.get("analysis", {}).get("saturation", {})
    for b in sat.get("backbones", []):
        if b not in backbones:
            raise ConfigError(f"analysis.saturation.backbones: unknown backbone {b!r}; known: {sorted(backbones)}")
    if sat.get("backbones"):
        splits = STS_SPLITS.get(sat["dataset"]) or SOURCES.get(sat["dataset"], {})
        if sat["split"] not in splits:
            raise ConfigError(f"analysis.saturation: dataset {sat['dataset']!r} has no split {sat['split']!r}")
    trained = {(c.backbone, c.objective, c.trainset) for c in run_cells(config)}
    for name, table in enabled_tables(config).items():
        for b in table["backbones"]:
            if b not in backbones:
                raise ConfigError(f"tables.{name}.backbones: unknown backbone {b!r}")
            for obj in table["objectives"]:
                if (b, obj, table["trainset"]) not in trained:
                    raise ConfigError(
                        f"tables.{name}: no run trains backbone {b!r} with objective {obj!r} on {table['trainset']!r}; "
                        "add it to runs or remove it from the table"
                    )


def enabled_tables(config: dict) -> dict[str, dict]:
    """The tables the default target builds."""
    return {name: spec for name, spec in config["tables"].items() if spec.get("enabled", True)}


def run_cells(config: dict) -> list[Cell]:
    """Every trained model of the grid."""
    cells = {
        Cell(run["backbone"], obj, run["trainset"], seed)
        for run in config["runs"]
        for obj in run["objectives"]
        for seed in run["seeds"]
    }
    return sorted(cells)


def pretrained_cell(backbone: str) -> Cell:
    return Cell(backbone, PRETRAINED, NO_TRAINSET, PRETRAINED_SEED)


def table_cells(config: dict, table: str) -> list[Cell]:
    """The models a table shows: its trained cells (all configured seeds) and the pretrained rows."""
    spec = config["tables"][table]
    cells = [
        c
        for c in run_cells(config)
        if c.backbone in spec["backbones"] and c.objective in spec["objectives"] and c.trainset == spec["trainset"]
    ]
    if spec.get("include_pretrained", True):
        cells += [pretrained_cell(b) for b in spec["backbones"]]
    return cells


def eval_cells(config: dict) -> list[Cell]:
    """Every model that gets evaluated: all trained cells plus each used backbone as downloaded."""
    cells = set(run_cells(config))
    for table in enabled_tables(config):
        cells.update(table_cells(config, table))
    return sorted(cells)


def train_params(config: dict, backbone: str, objective: str, trainset: str, seed: int) -> dict:
    """Resolved keyword arguments of aoe.train.TrainConfig for one cell."""
    ts = config["trainsets"][trainset]
    params = {**ts.get("train", {}), **config["backbones"][backbone].get("train_overrides", {})}
    overrides = {
        **config["objectives"].get(objective, {}),
        **ts.get("objective_overrides", {}),
        **ts.get("objective_settings", {}).get(objective, {}),
    }
    from aoe.losses.objectives import resolve_format

    return {
        **params,
        "objective": objective,
        "format": resolve_format(objective, ts.get("formats", ["pairs"]), config["objectives"].get(objective)),
        "objective_overrides": overrides,
        "pooling": config["backbones"][backbone].get("pooling", "cls"),
        "seed": int(seed),
        "score_range": list(ts["score_range"]),
    }


def start_log(log_path: str | os.PathLike) -> None:
    """Send this process's stdout and stderr (C-level output included) to a rule's log file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w", buffering=1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log

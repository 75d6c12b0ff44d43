"""A cluster plan that states its cost (issue 71): what a SLURM run will reserve, before it is submitted.

``snakemake --profile slurm -n table1`` listed 217 jobs and 65 trainings and no GPU-hours; the cost took a bench
script that only docs/cluster.md names, and the requests (each training's ``gpus x runtime``, from config.yaml's
``backbones.<b>.resources``) came to about 4,460 GPU-hours against 1,346 estimated, with ``retries: 2`` on top. The
profile's partition and account placeholders, left unedited, drew no word.

Under a SLURM profile (``--profile`` naming one whose ``executor`` is ``slurm``, or ``--executor slurm``):

* :func:`placeholder_line`: one line at planning when the profile sets no partition and no account (its EDIT
  lines): every job then goes to the cluster's default partition, charged to the account ``sacct`` guesses;
* :class:`PlanCost`, a filter on Snakemake's logger: it reads each planned training's resources from the dry run's
  job records and, where Snakemake says "This was a dry-run", states the trainings' requested GPU-hours per
  backbone (``gpus x runtime``), what ``retries`` can add, and their estimated GPU-hours at a measured speed
  (:mod:`aoe.plan.cost`), so that a request far above its estimate shows before the run.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from pathlib import Path
from typing import Callable, Sequence

import yaml

__all__ = ["PlanCost", "placeholder_line", "slurm_profile", "slurm_retries"]

_DRY_RUN = "This was a dry-run"


def _option(argv: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _profile_dir(name: str) -> Path | None:
    """A profile as Snakemake finds it: a folder, else one under the user's or the system's snakemake folders."""
    candidates = [Path(name)]
    if not os.path.isabs(name):
        home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        candidates += [home / "snakemake" / name, Path("/etc/xdg/snakemake") / name]
    return next((c for c in candidates if (c / "config.yaml").is_file()), None)


def slurm_profile(argv: Sequence[str], env: dict | None = None) -> tuple[Path | None, dict] | None:
    """(the profile folder, its settings) of a run submitted to SLURM; (None, {}) for ``--executor slurm`` without a
    profile; None for any other run (local, or a profile of another executor)."""
    env = os.environ if env is None else env
    name = _option(argv, "--profile") or env.get("SNAKEMAKE_PROFILE")
    folder = _profile_dir(name) if name else None
    settings: dict = {}
    if folder is not None:
        try:
            settings = yaml.safe_load((folder / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            settings = {}
    executor = _option(argv, "--executor") or _option(argv, "-e") or settings.get("executor")
    return (folder, settings) if executor == "slurm" else None


def slurm_retries(argv: Sequence[str], settings: dict) -> int:
    """How often Snakemake resubmits a failed job: --retries on the command line, else the profile's."""
    given = _option(argv, "--retries")
    return int(given if given is not None else settings.get("retries") or 0)


def placeholder_line(folder: Path | None, settings: dict, config: dict) -> str | None:
    """One line where the profile leaves the partition and the account to the cluster (its EDIT lines); None where it
    sets them, or the config names each backbone's partition and the profile a partition config."""
    resources = settings.get("default-resources") or {}
    if isinstance(resources, list):  # the command-line form: ["slurm_partition=gpu", ...]
        resources = dict(r.split("=", 1) for r in resources if "=" in r)
    partition = bool(resources.get("slurm_partition") or settings.get("slurm-partition-config")
                     or all((b.get("resources") or {}).get("partition") for b in config.get("backbones", {}).values()))
    account = bool(resources.get("slurm_account"))
    if partition and account:
        return None
    where = f"{folder}/config.yaml" if folder is not None else "the command line"
    unset = " and ".join(n for n, ok in (("no partition", partition), ("no account", account)) if not ok)
    return (f"{where} sets {unset} (the EDIT lines under default-resources): jobs go to the cluster's default "
            "partition and are charged to the account sacct guesses; set slurm_partition and slurm_account there, "
            "or slurm-partition-config (docs/cluster.md)")


class PlanCost(logging.Filter):
    """Collects the planned trainings of a dry run and states their cost where Snakemake ends it (see the module).

    ``estimate(wildcards) -> (GPU-hours, where the speed comes from) | None``: a training's estimated GPU-hours."""

    def __init__(self, retries: int, estimate: Callable[[dict], tuple[float, str] | None] | None = None):
        super().__init__()
        self.retries, self.estimate = retries, estimate
        self.trainings: list[tuple[dict, float, float]] = []  # (wildcards, GPUs, runtime in minutes)
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "rule_name", None) == "train_model" and str(getattr(record, "event", "")).lower().endswith("job_info"):
            resources = getattr(record, "resources", None)
            gpus, runtime = _resource(resources, "gpu"), _resource(resources, "runtime")
            if gpus is not None and runtime is not None:
                self.trainings.append((dict(getattr(record, "wildcards", None) or {}), gpus, runtime))
        elif not self.said and self.trainings and str(record.msg or "").startswith(_DRY_RUN):
            self.said = True
            record.msg, record.args = "\n".join(self.lines()) + "\n" + str(record.msg), ()
        return True

    def lines(self) -> list[str]:
        """The cost of the collected trainings, per backbone and in all."""
        per: dict[str, dict] = defaultdict(lambda: {"n": 0, "requested": 0.0, "estimated": 0.0, "unestimated": 0, "how": set()})
        for wildcards, gpus, runtime in self.trainings:
            row = per[str(wildcards.get("backbone"))]
            row["n"] += 1
            row["requested"] += gpus * runtime / 60
            found = self.estimate(wildcards) if self.estimate is not None else None
            if found is None:
                row["unestimated"] += 1
            else:
                row["estimated"] += found[0]
                row["how"].add(found[1])
        n = sum(r["n"] for r in per.values())
        requested = sum(r["requested"] for r in per.values())
        lines = [f"Cluster plan: {n} training{'s' if n != 1 else ''} request {requested:,.0f} GPU-hours (gpus x runtime, "
                 f"config.yaml backbones.<b>.resources); with retries: {self.retries} a training that fails may take "
                 f"up to {self.retries + 1}x its request"]
        for backbone, r in sorted(per.items()):
            est = f"estimated {r['estimated']:,.1f} ({'; '.join(sorted(r['how']))})" if r["n"] > r["unestimated"] else "no estimate"
            if r["unestimated"] and r["n"] > r["unestimated"]:
                est += f", {r['unestimated']} without one"
            lines.append(f"  {backbone}: {r['n']} training{'s' if r['n'] != 1 else ''}, requested {r['requested']:,.1f} GPU-h, {est}")
        return lines


def _resource(resources, name: str) -> float | None:
    try:
        value = resources[name] if hasattr(resources, "__getitem__") else getattr(resources, name)
    except (KeyError, AttributeError, TypeError):
        value = getattr(resources, name, None)
    return float(value) if isinstance(value, (int, float)) else None

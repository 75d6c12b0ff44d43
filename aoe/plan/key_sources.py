"""Where a config key was set: the config file Snakemake merged its value from, or ``--config``; and the key's
path as every message writes it (``trainsets.stsb.train.batch_size``, ``runs[0]``).

Each one-line config error names the key and the place to fix it: the schema's (:mod:`aoe.plan.schema_check`), the
cross-key checks' that name a file (:mod:`aoe.plan.table_checks`, :mod:`aoe.plan.cell_checks`), a target that
cannot be built (:mod:`aoe.plan.targets`), a results tree's config (:mod:`aoe.plan.trees`). Finding that place is one
job apart from what is checked: Snakemake lists its config files in another order than it merges them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import yaml

from aoe.config.hparams import NOT_SET, lookup, read_yaml

__all__ = ["COMMAND_LINE", "config_sources", "key_path", "key_source", "set_in", "source_text"]


def key_path(path: Iterable) -> str:
    """A config path as the messages write it: its keys joined by dots, list positions as ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# what key_source returns for a value given on the command line (snakemake --config key=value)
COMMAND_LINE = "--config"


def config_sources(workflow) -> tuple[list[str], dict]:
    """A running workflow's config files in the order Snakemake merged them (the last wins), and its
    --config values: what the messages name (:func:`key_source`).

    Snakemake lists the --configfile files first in ``workflow.configfiles`` and the Snakefile's
    ``configfile: "config.yaml"`` after them, but merges config.yaml first, then the --configfile
    files, then --config: a bad value a preset sets over config.yaml's was reported "(in config.yaml)".
    """
    given = {Path(f).resolve() for f in workflow.overwrite_configfiles or ()}
    files = sorted(workflow.configfiles, key=lambda f: Path(f).resolve() in given)  # stable: config.yaml first
    command_line = getattr(getattr(workflow, "config_settings", None), "config", None)  # Snakemake >= 8
    return [str(f) for f in files], dict(command_line or {})


def key_source(path: tuple, configfiles: Iterable[str | Path], overrides: dict | None = None) -> str | None:
    """Where the value at ``path`` was set: :data:`COMMAND_LINE` when ``overrides`` (the --config
    values, merged over every file) set it, else the last of ``configfiles`` (in merge order,
    :func:`config_sources`) whose YAML sets it, relative to the working directory when below it;
    None if none does."""
    if overrides and lookup(overrides, path) is not NOT_SET:
        return COMMAND_LINE
    found = None
    for file in configfiles:
        try:
            node = read_yaml(file)  # parsed once while unchanged: config.yaml takes ~0.1 s, read for each message
        except (OSError, yaml.YAMLError):
            continue
        if lookup(node, path) is not NOT_SET:
            found = Path(file)
    if found is None:
        return None
    try:  # as the user typed it on the command line, relative to the workflow folder
        return str(found.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:  # elsewhere: absolute (Snakemake makes "../x.yaml" "/work/wf/../x.yaml"), without the ".."
        return os.path.normpath(found.absolute())


def source_text(path: tuple, configfiles: list, overrides: dict | None) -> str:
    """"in <file>", "from --config" or "" (set nowhere): where the value at ``path`` was set."""
    source = key_source(path, configfiles, overrides)
    if source is None:
        return ""
    return f"from {source}" if source == COMMAND_LINE else f"in {source}"


def set_in(path: tuple, configfiles: list, overrides: dict | None) -> str:
    """" (in <file>)", " (from --config)" or "": the same, as a message's parenthesis."""
    source = source_text(path, configfiles, overrides)
    return f" ({source})" if source else ""

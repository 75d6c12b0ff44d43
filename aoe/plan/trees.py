"""Which configuration file a results tree belongs to, and the refusal of another file naming it (issue 62).

Each configuration writes into the tree its ``results`` key names. ``cp presets/cpu-demo.yaml my.yaml`` with a new
learning rate names ``results/cpu-demo`` too: without a record, its run retrained the demo's models in place and
``--report`` reported the demo's results as my.yaml's. So the tree belongs to the file that names it, the
*owner*: the last of the run's config files that sets ``results`` (config.yaml for the paper grid), or --config
where the command line sets it. A run writes ``<tree>/configuration.json`` as it starts (the Snakefile's
``onstart``): the owner, every file and --config value of the run, and its resolved settings.

:func:`explain_tree` refuses, before Snakemake plans, a run whose owner is another file than the tree's, unless
its resolved settings are the recorded ones (a copy that changes nothing writes nothing new). The owner itself may
change its settings: an edited preset, a file layered after it that sets no ``results`` (the tests' tiny-backbone
overlay), --config values; the record follows them. A tree written before records existed is presumed its
recipe.json's run's (the configfiles it lists), else the repository preset whose ``results`` names it, else it is
adopted by the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

from aoe.plan.check import COMMAND_LINE, ConfigError, key_source, load_config
from aoe.plan.targets import preset_trees
from aoe.util.jsonio import write_json_atomic

__all__ = ["RECORD", "explain_tree", "first_difference", "read_record", "record_tree", "settings_of", "tree_owner"]

RECORD = "configuration.json"
# what a run writes into its tree that another configuration's run would overwrite or report as its own
OUTPUTS = ("models", "eval", "embeddings", "tables", "figures", "cards", "REPORT.md", "RECIPE.md", "recipe.json")
# keys that change no output: where the data mirror is (the plan is the same with or without it)
_NOT_SETTINGS = (("data", "mirror"),)


def tree_owner(configfiles: Iterable[str | Path], overrides: dict | None = None) -> str:
    """The file that names the tree, as the user typed it (relative to the working folder where below it):
    the last of ``configfiles`` (in merge order) whose YAML sets ``results``, or :data:`COMMAND_LINE`."""
    return key_source(("results",), list(configfiles), overrides) or "config.yaml"


def settings_of(config: dict) -> dict:
    """The resolved settings a tree is made from: the checked config, defaults filled in, less what changes no
    output (:data:`_NOT_SETTINGS`), as JSON reads it back."""
    settings = json.loads(json.dumps(config, sort_keys=True, default=str))
    for *parents, key in _NOT_SETTINGS:
        node = settings
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key, None)
    return settings


def read_record(root: str | Path) -> dict | None:
    """``<root>/configuration.json``, None where there is none (or it cannot be read: as if none)."""
    try:
        record = json.loads((Path(root) / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("file"), str) else None


def _has_outputs(root: str | Path) -> bool:
    return any((Path(root) / name).exists() for name in OUTPUTS)


def _same_file(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def record_tree(config: dict, configfiles: Iterable[str | Path], overrides: dict | None = None) -> Path | None:
    """Write the tree's record for a run that starts writing into it; the path, or None where it is kept as is:
    another file's record stays (that file, with the same settings, passed :func:`explain_tree`)."""
    root = Path(config["results"])
    owner, record = tree_owner(configfiles, overrides), read_record(root)
    if record is not None and not _same_file(record["file"], owner) and _has_outputs(root):
        return None
    files = [os.path.relpath(f) for f in configfiles]
    return write_json_atomic(
        {"file": owner, "configfiles": files, "config": overrides or {}, "settings": settings_of(config)}, root / RECORD
    )


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def first_difference(here: Any, there: Any, path: tuple = ()) -> tuple[tuple, Any, Any, int] | None:
    """(the first key path, in sorted order, where two settings differ, its value in each, how many values differ);
    None where they are equal. A key one side lacks counts as its value ``None`` there."""
    if isinstance(here, dict) and isinstance(there, dict):
        first, count = None, 0
        for key in sorted(set(here) | set(there), key=str):
            diff = first_difference(here.get(key), there.get(key), (*path, key))
            if diff is not None:
                first = first or diff
                count += diff[3]
        return (*first[:3], count) if first else None
    return None if here == there else (path, here, there, 1)


def _presumed(root: str, repo: Path) -> tuple[str, list[str], str] | None:
    """(owner, the run's config files, how that is known) of a tree without a record: what its recipe.json lists
    (written by the run's `all` or `recipe`), else the repository preset whose ``results`` names it; None where
    neither says."""
    try:
        files = json.loads((Path(root) / "recipe.json").read_text()).get("configfiles")
    except (OSError, ValueError, AttributeError):
        files = None
    if isinstance(files, list) and files and all(isinstance(f, str) and Path(f).is_file() for f in files):
        return tree_owner(files), files, f"presumed from its recipe.json; no {RECORD} yet"
    preset = preset_trees(repo / "presets").get(root)
    if preset is not None:
        return preset, ["config.yaml", preset], f"presumed: its results: names it; no {RECORD} yet"
    if root == "results":
        return "config.yaml", ["config.yaml"], f"presumed: the paper grid's; no {RECORD} yet"
    return None


def _own_tree(owner: str) -> str:
    stem = "NAME" if owner == COMMAND_LINE else Path(owner).stem
    return f"results/{stem}"


def explain_tree(
    config: dict, configfiles: Iterable[str | Path], overrides: dict | None = None, repo: str | Path = "."
) -> str | None:
    """One line on why this run may not write into (or report from) the tree its ``results`` names: another
    file's tree, with other settings; None where it may (its own tree, a new one, or the same settings)."""
    configfiles = list(configfiles)
    root = os.path.normpath(config["results"])
    if not _has_outputs(root):
        return None  # nothing there to overwrite or to report: the run makes it its own
    owner = tree_owner(configfiles, overrides)
    record = read_record(root)
    presumed = _presumed(root, Path(repo)) if record is None else None
    if record is None and presumed is None:
        return None  # a tree from before the records that nothing names: adopted
    theirs = record["file"] if record is not None else presumed[0]
    if _same_file(theirs, owner):
        return None  # its own tree: an edited file, an overlay, --config values change its settings
    if record is not None:
        there, how = record.get("settings"), f"recorded in {root}/{RECORD}"
        what = f"{root}/{RECORD} records none"
    else:
        _, files, how = presumed
        what = f"{theirs} no longer loads"
        try:
            there = settings_of(load_config(repo, [f for f in files if os.path.normpath(f) != "config.yaml"]))
        except (ConfigError, OSError, yaml.YAMLError):
            there = None  # settings that no longer load are not the same settings
    diff = first_difference(settings_of(config), there) if there is not None else None
    if there is not None and diff is None:
        return None  # the same settings under another name: nothing would change
    if diff is not None:
        path, ours, theirs_value, count = diff
        what = (f"{count} value{'s differ' if count > 1 else ' differs'}; first: {'.'.join(map(str, path))} is "
                   f"{_show(ours)} in this run, {_show(theirs_value)} in the tree")
    if owner == COMMAND_LINE:
        named, fix = "--config results=...", f"give it its own tree (--config results={_own_tree(owner)})"
    else:
        named, fix = owner, f"give {owner} its own results: (e.g. results: {_own_tree(owner)})"
    return f"{root}/ is the tree of {theirs} ({how}); {named} names it too, with other settings ({what}): {fix}"

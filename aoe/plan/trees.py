"""Which configuration a results tree belongs to, and the refusal of another naming it (issues 62, 71).

Each configuration writes into the tree its ``results`` key names. ``cp presets/cpu-demo.yaml my.yaml`` with a new
learning rate names ``results/cpu-demo`` too: without a record, its run retrained the demo's models in place and
``--report`` reported the demo's results as my.yaml's. An overlay layered on the preset (``--configfile
presets/cpu-demo.yaml mine.yaml``) names it as well: its rows went into the demo's tables, and README command 1 then
rewrote those tables and REPORT.md without them, while ``--report`` packaged the overlay's tables with the demo's
curves. So the tree belongs to the whole list of configuration files that made it, the *owner* (config.yaml for
the paper grid; in merge order). A run writes ``<tree>/configuration.json`` as it starts (the Snakefile's
``onstart``): the list, the file that names the tree (the last one that sets ``results``, or --config), the --config
values, and the resolved settings.

:func:`explain_tree` refuses, before Snakemake plans (a table, a report, a dry run alike), a run of another list of
files, unless its resolved settings are the recorded ones (a copy that changes nothing writes nothing new). The
owner's files may change their settings (an edited preset), and --config values may (the record follows them). The
fix it names is a tree of the run's own; trained models it shares with another tree are taken from there by
identity, not trained again (:mod:`aoe.training.train`, ``reuse``). A tree written before records existed is
presumed its recipe.json's run's (the configfiles it lists), else the repository preset whose ``results`` names
it, else it is adopted by the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

from aoe.config.errors import ConfigError
from aoe.plan.check import load_config
from aoe.plan.key_sources import COMMAND_LINE, key_source
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


# the paper grid's config.yaml, which every run merges first (the Snakefile's configfile)
_GRID = Path(__file__).resolve().parents[2] / "config.yaml"


def _own_files(files: Iterable[str | Path]) -> tuple[str, ...]:
    """The list that owns a tree, as compared: the files in merge order, each as typed (normalised), less the grid's
    config.yaml (every run merges it first; a test names it by its absolute path)."""
    def grid(f) -> bool:
        return os.path.normpath(str(f)) == "config.yaml" or Path(f).resolve() == _GRID

    # as the record writes them (relative to the working folder): Snakemake hands a run's files over absolute
    return tuple(os.path.relpath(str(f)) for f in files if not grid(f))


def _shown(files: Iterable[str]) -> str:
    return " + ".join(files) or "config.yaml"


def _has_outputs(root: str | Path) -> bool:
    return any((Path(root) / name).exists() for name in OUTPUTS)


def record_tree(config: dict, configfiles: Iterable[str | Path], overrides: dict | None = None) -> Path | None:
    """Write the tree's record for a run that starts writing into it; the path, or None where it is kept as is:
    another file's record stays (that file, with the same settings, passed :func:`explain_tree`)."""
    root = Path(config["results"])
    configfiles = list(configfiles)
    owner, record = tree_owner(configfiles, overrides), read_record(root)
    if record is not None and _record_files(record) != _own_files(configfiles) and _has_outputs(root):
        return None
    files = [os.path.relpath(f) for f in configfiles]
    return write_json_atomic(
        {"file": owner, "configfiles": files, "config": overrides or {}, "settings": settings_of(config)}, root / RECORD
    )


def _record_files(record: dict) -> tuple[str, ...]:
    """The owning list a record names (a record from before issue 71 that lists none: its file's)."""
    files = record.get("configfiles")
    return _own_files(files) if isinstance(files, list) else _own_files([record["file"]])


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


def _presumed(root: str, repo: Path) -> tuple[list[str], str] | None:
    """(the run's config files, how that is known) of a tree without a record: what its recipe.json lists (written by
    the run's `all` or `recipe`), else the repository preset whose ``results`` names it; None where neither says."""
    try:
        files = json.loads((Path(root) / "recipe.json").read_text()).get("configfiles")
    except (OSError, ValueError, AttributeError):
        files = None
    if isinstance(files, list) and files and all(isinstance(f, str) and Path(f).is_file() for f in files):
        return files, f"presumed from its recipe.json; no {RECORD} yet"
    preset = preset_trees(repo / "presets").get(root)
    if preset is not None:
        return ["config.yaml", preset], f"presumed: its results: names it; no {RECORD} yet"
    if root == "results":
        return ["config.yaml"], f"presumed: the paper grid's; no {RECORD} yet"
    return None


def _fix(configfiles: list, overrides: dict | None) -> str:
    """A tree of the run's own: named in the file that names the tree, or the run's last (an overlay that sets no
    ``results``), or on the command line where that names it."""
    named = tree_owner(configfiles, overrides)
    if named == COMMAND_LINE:
        return "give it its own tree (--config results=results/NAME)"
    files = [os.path.relpath(f) for f in configfiles]
    edit = files[-1] if _own_files(files[-1:]) else named
    return f"give {edit} its own results: (e.g. results: results/{Path(edit).stem})"


def explain_tree(
    config: dict, configfiles: Iterable[str | Path], overrides: dict | None = None, repo: str | Path = "."
) -> str | None:
    """One line on why this run may not write into (or report from) the tree its ``results`` names: another list of
    files' tree, with other settings; None where it may (its own tree, a new one, or the same settings)."""
    configfiles = list(configfiles)
    root = os.path.normpath(config["results"])
    if not _has_outputs(root):
        return None  # nothing there to overwrite or to report: the run makes it its own
    record = read_record(root)
    presumed = _presumed(root, Path(repo)) if record is None else None
    if record is None and presumed is None:
        return None  # a tree from before the records that nothing names: adopted
    theirs = _record_files(record) if record is not None else _own_files(presumed[0])
    if theirs == _own_files(configfiles):
        return None  # its own tree: an edited file or --config values change its settings
    if record is not None:
        there, how = record.get("settings"), f"recorded in {root}/{RECORD}"
        what = f"{root}/{RECORD} records none"
    else:
        files, how = presumed
        what = f"{_shown(theirs)} no longer loads"
        try:
            there = settings_of(load_config(repo, [f for f in files if os.path.normpath(f) != "config.yaml"]))
        except (ConfigError, OSError, yaml.YAMLError):
            there = None  # settings that no longer load are not the same settings
    diff = first_difference(settings_of(config), there) if there is not None else None
    if there is not None and diff is None:
        return None  # the same settings under other names: nothing would change
    if diff is not None:
        path, ours, theirs_value, count = diff
        what = (f"{count} value{'s differ' if count > 1 else ' differs'}; first: {'.'.join(map(str, path))} is "
                f"{_show(ours)} in this run, {_show(theirs_value)} in the tree")
    ours = _shown(_own_files(configfiles)) + (" with --config results=..." if tree_owner(configfiles, overrides) == COMMAND_LINE else "")
    return (f"{root}/ is the tree of {_shown(theirs)} ({how}); this run's {ours} names it too, with other settings "
            f"({what}): {_fix(configfiles, overrides)}; the models it trains as {root}/ did are taken from there, not trained again")

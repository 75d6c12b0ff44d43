"""The papers' numbers (aoe/resources/paper_numbers.yaml, or a numbers file in its place) as a table reads them: a
reference row's values and stds (:func:`paper_reference`), what a number was measured under (:func:`paper_measure`,
:func:`paper_side`, which the gate :func:`aoe.results.likeness.like_for_like` reads), and how the paper prints its
rows: the group a row sits under, its place in the paper's order, the heading above it and the paper's marks.

Reads the numbers file only: no result of ours, no table (:mod:`aoe.results.tables` sets these beside our rows).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from aoe.config.hparams import YAML_LOADER
from aoe.evaluate.sts import TASKS
from aoe.results.likeness import FIELDS, Measure

__all__ = ["labels_groups", "load_paper_numbers", "paper_group", "paper_group_position", "paper_marks", "paper_measure",
           "paper_reference", "paper_side", "reference_heading"]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def load_paper_numbers(numbers_file: str | Path | None) -> dict:
    """The parsed numbers file; callers only read it (one parse per distinct text: a table looks up
    every row's reference in it)."""
    text = (
        Path(numbers_file).read_text()
        if numbers_file
        else resources.files("aoe.resources").joinpath("paper_numbers.yaml").read_text()
    )
    return _parse_numbers(text)


@functools.lru_cache(maxsize=8)
def _parse_numbers(text: str) -> dict:
    return yaml.load(text, Loader=YAML_LOADER)


def paper_reference(
    ref: str, numbers_file: str | Path | None = None, columns: list[str] | None = None
) -> tuple[str, dict[str, float], dict[str, float]]:
    """A reference row of paper_numbers.yaml: (label, {column: value}, {column: std}).

    ``ref`` is ``'<table key>/<row>'`` for tables with ``rows``, ``'<table key>/<group>/<row>'``
    for tables with ``groups`` (e.g. a backbone) or rows in sections, or a path to a single
    number (then the value of column ``avg``). The paper's column names are matched to
    ``columns`` (default: the STS tasks and avg) ignoring case and punctuation
    (``STS-B`` = ``STSB``); an entry's own ``std`` number is the std of its ``avg``.
    """
    numbers = load_paper_numbers(numbers_file)
    parts = ref.split("/")
    entry = numbers.get(parts[0])
    if not isinstance(entry, dict) or len(parts) < 2:
        raise KeyError(f"paper reference {ref!r} not found in paper_numbers.yaml")
    values: Any = None
    stds: Any = {}
    # a row key may itself hold "/" (a hub id: repo_nli_readme_released_checkpoints/SeanLee97/angle-...)
    for container, path in itertools.product(("rows", "groups", None), (parts[1:], ["/".join(parts[1:])])):
        node: Any = entry.get(container) if container else entry
        std_node: Any = entry.get("std", {}) if container else {}
        try:
            for p in path:
                node = node[p]
                std_node = std_node.get(p, {}) if isinstance(std_node, dict) else {}
        except (KeyError, TypeError):
            continue
        values, stds = node, std_node
        break
    if values is None or not isinstance(values, (dict, int, float)) or isinstance(values, bool):
        raise KeyError(f"paper reference {ref!r} not found in paper_numbers.yaml")
    if not isinstance(values, dict):
        values = {"avg": values}
    else:
        values = dict(values)
        if isinstance(values.get("std"), (int, float)):
            stds = {**(stds if isinstance(stds, dict) else {}), "avg": values.pop("std")}
    wanted = {_key(t): t for t in (columns if columns is not None else [*TASKS, "avg"])}

    def pick(d: dict) -> dict[str, float]:
        return {
            wanted[_key(k)]: float(v)
            for k, v in (d or {}).items()
            if _key(k) in wanted and isinstance(v, (int, float)) and not isinstance(v, bool)
        }

    source = entry.get("short") or entry.get("source", parts[0]).split(":")[0]
    return f"{parts[-1]} (paper: {source})", pick(values), pick(stds if isinstance(stds, dict) else {})


def paper_measure(ref: str, numbers_file: str | Path | None = None) -> dict:
    """What a paper number was measured under, where paper_numbers.yaml says (its entry's ``measured``: ``"*"`` for
    every row, else the row's path after the entry key, e.g. ``AoE`` or ``table2/AoE-BERT (reproduction)``). Each field
    a string, but ``recipe``: the settings the source states, ``{train set: {setting: value}}``, which
    :func:`paper_side` lays over the row's own recipe (a source never states every setting of ours)."""
    parts = ref.split("/")
    entry = load_paper_numbers(numbers_file).get(parts[0])
    measured = (entry.get("measured") or {}) if isinstance(entry, dict) else {}
    out = {**(measured.get("*") or {}), **(measured.get("/".join(parts[1:])) or {})}
    unknown = set(out) - set(FIELDS)
    if unknown:
        raise KeyError(f"paper_numbers.yaml {parts[0]}.measured: unknown field(s) {', '.join(sorted(unknown))}; "
                       f"the fields are {', '.join(FIELDS)}")
    recipe = out.get("recipe")
    if recipe is not None and not (isinstance(recipe, dict) and all(isinstance(v, dict) for v in recipe.values())):
        raise KeyError(f"paper_numbers.yaml {parts[0]}.measured[{'/'.join(parts[1:])!r}].recipe: give the settings the "
                       "source states as {train set: {setting: value}} (aoe.config.measures.RECIPE_KEYS)")
    return {k: (v if k == "recipe" else str(v)) for k, v in out.items()}


def paper_side(ours: Measure, ref: str, numbers_file: str | Path | None = None) -> Measure:
    """The measure of paper number ``ref`` as set against a row of ours measured ``ours``: what paper_numbers.yaml
    records (:func:`paper_measure`), else what the row claims by setting itself against that number (its own field).
    A recorded recipe states some settings: the row's recipe with those replaced, so the gate names exactly the
    stated settings the row does not train (a row not trained by us, as downloaded or released, differs whole)."""
    recorded = paper_measure(ref, numbers_file)
    stated = recorded.pop("recipe", None)
    fields = {**ours.as_dict(), **recorded}
    if stated is not None:
        try:
            own = json.loads(ours.recipe)
        except ValueError:
            own = None
        if not isinstance(own, dict):
            own = {}
        for trainset, settings in stated.items():
            own[trainset] = {**(own.get(trainset) or {}), **settings}
        fields["recipe"] = json.dumps(own, sort_keys=True, default=str)
    return Measure.of(fields)


def paper_group(ref: str, numbers_file: str | Path | None) -> str:
    """The group a paper row is printed under (AoE Table 1: the backbone, e.g. LLaMA2-7B), as the
    entry's ``group_labels`` names it; '' for a row of a flat table."""
    parts = ref.split("/")
    entry = load_paper_numbers(numbers_file).get(parts[0])
    if not isinstance(entry, dict) or len(parts) < 3:
        return ""
    group = parts[1]
    nested = (entry.get("groups") or {}).get(group)
    if not isinstance(nested, dict):
        nested = (entry.get("rows") or {}).get(group)
        if not isinstance(nested, dict) or not any(isinstance(v, dict) for v in nested.values()):
            return ""  # a row key holding "/" (a hub id), not a group
    return str((entry.get("group_labels") or {}).get(group, group))


def paper_group_position(ref: str, numbers_file: str | Path | None) -> tuple[int, int, int]:
    """(the paper table, the group, the row) positions of a reference row, in the order the numbers file holds them
    (the paper's); a row the file does not list in order (a single number) goes after its table's rows."""
    numbers = load_paper_numbers(numbers_file)
    parts = ref.split("/")
    entry = numbers.get(parts[0])
    tables = list(numbers)
    container = (entry.get("groups") or entry.get("rows") or {}) if isinstance(entry, dict) else {}
    groups = list(container)
    grouped = len(parts) > 2 and parts[1] in groups and isinstance(container[parts[1]], dict)
    names = list(container[parts[1]]) if grouped else groups
    name = parts[2] if grouped else "/".join(parts[1:])
    return (tables.index(parts[0]) if parts[0] in numbers else len(tables),
            groups.index(parts[1]) if grouped else len(groups),
            names.index(name) if name in names else len(names))


def reference_heading(ref: str, group: str, numbers_file: str | Path | None) -> str:
    """The line a reference row is printed under: the paper's group and its source ("the paper's BERT-base rows
    (Li & Li, AoE, ACL 2024, Table 1)"), or the entry's own ``heading`` (the independent reproduction report,
    which is not the paper), else its source ("Li & Li, AoE, ACL 2024, Table 2")."""
    entry = load_paper_numbers(numbers_file).get(ref.split("/")[0]) or {}
    source = entry.get("short") or str(entry.get("source", ref.split("/")[0])).split(":")[0]
    if entry.get("heading"):
        return str(entry["heading"])
    return f"the paper's {group} rows ({source})" if group else source


def labels_groups(ref: str, numbers_file: str | Path | None) -> bool:
    """Whether the paper entry ``ref`` points into names the groups it prints its rows under (AoE Table 1's backbones)."""
    entry = load_paper_numbers(numbers_file).get(ref.split("/")[0])
    return isinstance(entry, dict) and bool(entry.get("group_labels"))


def paper_marks(refs: list[str], numbers_file: str | Path | None = None) -> list[str]:
    """The paper's explanations of its row marks (†, ⋆) for the tables ``refs`` point into: each entry's
    notes that begin "Marks:", with the table they explain."""
    numbers, out = load_paper_numbers(numbers_file), []
    for key in dict.fromkeys(r.split("/")[0] for r in refs if r):
        entry = numbers.get(key)
        if not isinstance(entry, dict):
            continue
        source = entry.get("short") or str(entry.get("source", key)).split(":")[0]
        out += [f"{source}: {n.removeprefix('Marks:').strip()}" for n in entry.get("notes") or [] if str(n).startswith("Marks:")]
    return out

"""The same result in the results trees beside this one, and a copy of it made of hard links (issue 71).

Each configuration writes its own tree (``results/`` for the paper grid, ``results/<preset>/`` for a preset, a
user's ``results/my/``). A tree of one's own must not cost again what another tree made of the same inputs: the
stages that make something expensive (a training, a token cache) look here for the same path in the other trees
and take it where its recorded identity is theirs, as hard links.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["in_other_trees", "link_tree"]


def in_other_trees(path: str | os.PathLike, top: str) -> list[Path]:
    """``path`` (``<tree>/<top>/...``) as it would be in each other results tree that has it: the folder that holds
    ``<tree>`` (the paper grid's ``results/``), and each folder in that one or in ``<tree>`` (``results/<preset>/``);
    [] for a path with no ``<top>`` folder in it."""
    path = Path(path)
    if top not in path.parts[:-1]:
        return []
    at = len(path.parts) - 1 - path.parts[::-1].index(top)  # the last <top>: a tree may sit in a folder named so
    tree = Path(*path.parts[:at]) if at else Path(".")
    rest = Path(*path.parts[at:])
    seen, found = {tree.resolve()}, []
    for root in (tree.parent, *_folders(tree.parent), *_folders(tree)):
        if root.resolve() in seen:
            continue
        seen.add(root.resolve())
        if (root / rest).exists():
            found.append(root / rest)
    return found


def _folders(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def link_tree(src: str | os.PathLike, dst: str | os.PathLike, ignore=None) -> None:
    """``dst`` (new, or a folder to fill) as a copy of ``src`` made of hard links (a copy where the file system has
    none); ``ignore``: as shutil.copytree's."""

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link, ignore=ignore, dirs_exist_ok=True)

"""The package's layout holds: each part of ``aoe`` imports only the parts its docstring's "May import:"
line names, and no modules import each other in a circle (docs/architecture.md).

Every import is read, a function's own included: a lazy import is an edge all the same.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.workflow_utils import REPO

PACKAGE = REPO / "aoe"


def _module(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = REPO) -> dict[str, Path]:
    return {_module(p, root): p for p in sorted((root / "aoe").rglob("*.py"))}


MODULES = modules()


def _imports(path: Path, known: dict[str, Path] = MODULES) -> set[str]:
    """The modules of ``aoe`` that ``path`` imports (``from aoe.x import y`` counts aoe.x.y when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {name for name in names if name in known}
    return found - {"aoe"}


GRAPH = {module: _imports(path) for module, path in MODULES.items()}


def _part(module: str, root: Path = REPO) -> str | None:
    """The part (subpackage) of ``aoe`` a module belongs to; None for a module at the top of aoe/."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (root / "aoe" / parts[1]).is_dir()) else None


def parts_of(root: Path = REPO) -> list[str]:
    """The parts of a checkout's aoe/ (its subpackages but the data folder ``resources``)."""
    return sorted(p.name for p in (root / "aoe").iterdir() if (p / "__init__.py").is_file() and p.name != "resources")


PARTS = parts_of()


def _may_import(part: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((PACKAGE / part / "__init__.py").read_text())) or ""
    line = next((line for line in doc.splitlines() if line.startswith("May import:")), None)
    assert line is not None, f"aoe/{part}/__init__.py: its docstring has no 'May import:' line"
    return set(re.findall(r"``aoe\.(\w+)``", line))


def test_every_module_belongs_to_a_part():
    loose = [m for m in MODULES if _part(m) is None and m not in ("aoe", "aoe.__main__")]
    assert not loose, f"modules outside every part of aoe/ (put each in the part of its stage): {loose}"


@pytest.mark.parametrize("part", PARTS)
def test_a_part_imports_only_what_its_docstring_allows(part):
    allowed = _may_import(part) | {part}
    assert allowed - {part} <= set(PARTS), f"aoe/{part}: its 'May import:' line names parts that do not exist: {allowed - set(PARTS)}"
    wrong = sorted(f"{m} -> {t}" for m in MODULES if _part(m) == part for t in GRAPH[m] if _part(t) not in allowed | {None})
    assert not wrong, f"aoe/{part} imports parts its docstring does not allow: {wrong}"


def test_the_allowed_imports_form_layers():
    # a part that may import another is never imported by it: the parts stack with no cycle
    allowed = {part: _may_import(part) for part in PARTS}
    both = sorted(f"{a} <-> {b}" for a in PARTS for b in allowed[a] if a in allowed.get(b, ()))
    assert not both, f"parts allowed to import each other: {both}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), and modules importing themselves."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_modules_import_each_other_in_a_circle():
    assert not _cycles(GRAPH), f"import circles: {_cycles(GRAPH)}"


def test_the_circle_finder_finds_a_circle():
    graph = defaultdict(set, {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert _cycles(graph) == [["a", "b", "c"]]


def summary(root: Path = REPO) -> str:
    """The layout in words: modules, parts, import edges between modules and between parts, circles."""
    known = modules(root)
    graph = {m: _imports(p, known) for m, p in known.items()}
    top = sorted(m for m in known if _part(m, root) is None and m not in ("aoe", "aoe.__main__"))
    parts = parts_of(root)
    part_of = {m: _part(m, root) or m for m in known}  # a module at the top stands for itself
    between = defaultdict(int)
    for m, targets in graph.items():
        for t in targets:
            if part_of[m] != part_of[t]:
                between[part_of[m], part_of[t]] += 1
    lines = [f"{len(known)} modules; {len(top)} at the top of aoe/ beside {len(parts)} parts; "
             f"{sum(map(len, graph.values()))} imports between modules; circles: {_cycles(graph) or 'none'}",
             f"top-level modules: {', '.join(m.removeprefix('aoe.') for m in top) or 'none'}"]
    for part in parts:
        uses = sorted({b for (a, b), n in between.items() if a == part})
        lines.append(f"aoe/{part}/ ({sum(1 for m in known if part_of[m] == part)} modules) imports: {', '.join(uses) or 'nothing'}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tests.test_architecture [ROOT]: the layout of a checkout, in words
    import sys

    print(summary(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO))

"""How REPORT.md reads a table's JSON twin (aoe.results.render.to_json) and prints its numbers: the rows of ours,
whether a row has a result, and a number of ours or of a paper's as a cell. Shared by the report's sections
(:mod:`aoe.publish.report`, :mod:`aoe.publish.gains`, :mod:`aoe.publish.claims`, :mod:`aoe.publish.quoted`)."""

from __future__ import annotations

from aoe.results.likeness import Measure
from aoe.results.render import paper_digits
from aoe.util.jsonio import finite_or_none

__all__ = ["fmt", "fmt_paper", "has_result", "ours_rows", "paper_cell", "row_measure"]


def fmt(x: float | None, digits: int = 2) -> str:
    x = finite_or_none(x)
    return "–" if x is None else f"{x:.{digits}f}"


def fmt_paper(x: float | None, digits: int = 2) -> str:
    """A paper's number with at least as many decimals as the paper printed (61.646 stays 61.646)."""
    x = finite_or_none(x)
    return "–" if x is None else f"{x:.{paper_digits(x, digits)}f}"


def paper_cell(value: float | None, std: float | None, digits: int) -> str:
    return "–" if finite_or_none(value) is None else fmt_paper(value, digits) + (f" ± {fmt_paper(std, digits)}" if finite_or_none(std) is not None else "")


def ours_rows(table: dict) -> list[dict]:
    return [r for r in table["rows"] if not r.get("reference")]


def has_result(row: dict) -> bool:
    return any(finite_or_none(v) is not None for v in (row.get("mean") or {}).values())


def row_measure(row: dict) -> Measure:
    """What a row's numbers were measured under (its ``measure`` entry, :mod:`aoe.results.likeness`)."""
    return Measure.of(row.get("measure"))

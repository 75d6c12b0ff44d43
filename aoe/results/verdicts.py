"""A built table's verdict on a paper's claim about its rows: a study table's (``tables.<name>.study``,
:func:`study_verdict`) and an objective comparison's (table kind ``objective_comparison``, :func:`comparison_verdict`).
Both pass the table's rows through the gate first (:func:`aoe.results.likeness.like_for_like`), then let
:mod:`aoe.results.studies` judge their runs; the verdict becomes a note of the table and a line of REPORT.md.
"""

from __future__ import annotations

from aoe.config.table_kinds import table_kind
from aoe.results.likeness import Measure, differences, like_for_like
from aoe.results.studies import COMPARISON_RULE, ComparedRow, StudyRow, StudyVerdict, judge_comparison, judge_study
from aoe.results.table_model import Row, Table

__all__ = ["comparison_verdict", "study_verdict"]


def study_verdict(table: Table, study: dict) -> StudyVerdict:
    """The verdict on a study table's claim (``tables.<name>.study``) from its rows of ours, in one column:
    the study's ``column``, else the table's last (its summary: Avg. STS, or STS-B test). Its comparisons are t-tests
    between the rows, so the rows pass the gate first: a difference of measurement the table does not name
    (``compare_across``: the study's own subject, the batch or the pooling) raises
    :class:`aoe.results.likeness.UnlikeNumbers`, naming it and the fix."""
    col = study.get("column") or table.columns[-1].key
    for row in table.rows[1:]:
        like_for_like(table.rows[0].measure, row.measure, table.compare_across, f"tables.{table.name} (study): {table.rows[0].label} vs {row.label}")
    rows = [StudyRow(r.label, r.values.get(col, {})) for r in table.rows]
    return judge_study(rows, study, table_kind(table.kind).digits(col))


def _settings_differences(a: Row, b: Row) -> str:
    """Every resolved setting two rows' trainings differ in (:func:`aoe.results.likeness.differences` of their
    :attr:`Row.settings`), ``graded_labels "int" vs "score", ...``; "none" where they are one recipe."""
    if not a.settings or not b.settings:
        return "not recorded (a table built without its configuration)"
    return differences(Measure(recipe=a.settings), Measure(recipe=b.settings)).get("recipe") or "none"


def comparison_verdict(table: Table, spec: dict) -> StudyVerdict:
    """An objective comparison (``tables.<name>.comparison``, table kind ``objective_comparison``): its rows pass the
    gate (:func:`aoe.results.likeness.like_for_like`: measured alike, or as ``compare_across`` names), the caption gets
    every setting each pair of its rows differs in, and the table its verdict (:func:`aoe.results.studies.judge_comparison`)
    as a note and as ``table.study`` (with the rule, the paper's order and the rows' differences, which REPORT.md
    prints)."""
    comparison = spec.get("comparison")
    if not comparison:
        raise ValueError(f"tables.{table.name}: kind {table.kind} judges its rows by a comparison: give tables.{table.name}.comparison "
                         "(claim, source, higher, lower; separates optional), e.g. presets/objectives-vs-cosent.yaml")

    def row_of(key: str) -> Row | None:
        objective = comparison.get(key)
        if objective is None:
            return None
        found = [r for r in table.rows if r.objective == objective]
        if len(found) != 1:
            raise ValueError(f"tables.{table.name}.comparison.{key}: {objective!r} must be the objective of one row of the table "
                             f"(its rows' objectives: {', '.join(r.objective for r in table.rows)})")
        return found[0]

    higher, lower, separates = row_of("higher"), row_of("lower"), row_of("separates")
    compared = [r for r in (higher, separates, lower) if r is not None]
    pairs = list(zip(compared, compared[1:])) + ([(higher, lower)] if separates is not None else [])
    diffs = {}
    for a, b in pairs:
        like_for_like(a.measure, b.measure, table.compare_across, f"tables.{table.name} (comparison): {a.label} vs {b.label}")
        diffs[(a.label, b.label)] = _settings_differences(a, b)
    table.caption = (f"{table.caption} The rows' trainings differ in (every setting of their resolved recipes, the seed "
                     "aside): " + "; ".join(f"{a} vs {b}: {d}" for (a, b), d in diffs.items()) + ".").strip()
    digits = table_kind(table.kind).digits
    verdict = judge_comparison(
        ComparedRow(higher.label, higher.values), ComparedRow(lower.label, lower.values),
        [(c.key, c.header) for c in table.columns], comparison, digits,
        ComparedRow(separates.label, separates.values) if separates is not None else None, diffs)
    table.study = {**verdict.as_dict(), "title": "Objective comparison", "rule": COMPARISON_RULE,
                   "paper_order": [higher.label, lower.label], "source": comparison["source"],
                   "differences": [{"rows": [a, b], "settings": d} for (a, b), d in diffs.items()]}
    table.notes.append(f"{verdict.text} Rule: {COMPARISON_RULE}.")
    return verdict

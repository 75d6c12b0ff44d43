"""The papers' own studies as tables: whether our rows support the claim a paper makes about a study it
ran and printed no numbers for (the w1/w2 weight search, AnglE's τ search, its batch sizes, AoE's
fourth pooling).

A study table (``tables.<name>.study``) quotes the claim, names its source and one of two tests:
``best`` (the row the paper chose beats every other row) or ``increasing`` (each row, in the table's
order, beats the one before). :func:`judge_study` reads the rows' runs and says ``supported``,
``not supported`` or ``inconclusive`` with the numbers, by :data:`STUDY_RULE`; the verdict is a note
of the table and a line of REPORT.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aoe.results.stats import ALPHA, PAIRED, POWER, WELCH, Comparison, compare_runs
from aoe.util.jsonio import finite_or_none

__all__ = ["BEST", "INCONCLUSIVE", "INCREASING", "NOT_SUPPORTED", "NO_RESULT", "STUDY_RULE", "STUDY_TESTS", "SUPPORTED",
           "StudyRow", "StudyVerdict", "judge_study"]

SUPPORTED = "supported"
NOT_SUPPORTED = "not supported"
INCONCLUSIVE = "inconclusive"
NO_RESULT = "no result yet"
BEST = "best"
INCREASING = "increasing"
STUDY_TESTS = (BEST, INCREASING)
# Why a test and not a σ threshold: a gap larger than one seed σ happens by chance about a quarter of the time
# between two draws of one recipe (z = 1/√2 per row), and the CPU preset's "not supported" for pooling rested on
# a Welch p ≈ 0.15. The test is the tables' (aoe.results.stats.compare_runs): over seeds, paired by seed where the
# rows share their seeds (every study row of the grid and of presets/studies-cpu.yaml does), since a seed fixes the
# data order and initialisation both trainings share (Dodge et al. 2020, arXiv:2002.06305, find those two the main
# sources of a fine-tuning's seed variance), and a paired test is valid whatever the correlation that makes, where
# Welch's assumes the rows independent. "supported" needs every comparison of the claim at p < ALPHA (an
# intersection-union test: its level is ALPHA as it stands); "not supported" one comparison against the claim at
# p < ALPHA/c, Bonferroni over the claim's c comparisons, so neither verdict is a false alarm more than 5% of the time.
STUDY_RULE = (
    f"each comparison the claim makes is a two-sided t-test between two of our rows over different seeds ({PAIRED} by seed "
    f"where they share seeds, else {WELCH}'s; reruns of one seed are never samples); supported: every comparison goes the "
    f"claim's way at p < {ALPHA:g}; not supported: one goes against it at p < {ALPHA:g}/c (Bonferroni over the claim's c "
    f"comparisons); else inconclusive, with the smallest gap each comparison's seeds could detect (α = {ALPHA:g} two-sided, "
    f"power {POWER:g}, from their observed spread)"
)


@dataclass(frozen=True)
class StudyRow:
    label: str
    values: dict  # run name ("42", "43", "42-rerun1", ...) -> value

    @property
    def mean(self) -> float | None:
        v = [x for x in self.values.values() if finite_or_none(x) is not None]
        return float(np.mean(v)) if v else None


@dataclass(frozen=True)
class StudyVerdict:
    status: str
    text: str  # the table note: the claim, its source, the verdict and the numbers

    def as_dict(self) -> dict:
        return {"status": self.status, "text": self.text}


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def _compare(a: StudyRow, b: StudyRow, digits: int, c: int) -> tuple[int, Comparison, str]:
    """+1 where a beats b at p < ALPHA, -1 where b beats a at p < ALPHA / c, 0 otherwise; the test and its sentence."""
    test = compare_runs(a.values, b.values, a.label, b.label)
    gap = a.mean - b.mean
    sign = 0
    if test.p is not None and test.diff is not None:
        if test.diff > 0 and test.p < ALPHA:
            sign = 1
        elif test.diff < 0 and test.p < ALPHA / c:
            sign = -1
    parts = [test.text()]
    if sign == 0 and test.detectable is not None:
        parts.append(f"detectable: {_fmt(test.detectable, digits)}")
    return sign, test, f"{a.label} − {b.label} = {gap:+.{digits}f} ({'; '.join(parts)})"


def judge_study(rows: list[StudyRow], study: dict, digits: int = 2) -> StudyVerdict:
    """The verdict on ``study`` (a ``tables.<name>.study`` entry: claim, source, test, best) from the
    study's ``rows`` in the table's order, one column's runs each."""
    claim = f"Paper's claim ({study['source']}): \u201c{study['claim']}\u201d"
    test = study["test"]
    if test not in STUDY_TESTS:
        raise ValueError(f"study test {test!r}: one of {', '.join(STUDY_TESTS)}")
    have = [r for r in rows if r.mean is not None]
    means = "; ".join(f"{r.label} {_fmt(r.mean, digits)} ({len(r.values)} run{'s' * (len(r.values) != 1)})" for r in have)
    if test == BEST:
        best = [r for r in rows if r.label == study["best"]]
        if len(best) != 1:  # a preset's own rows (aoe.plan.check refuses it where the study table is built)
            return StudyVerdict(NO_RESULT, f"{claim}. Ours: {NO_RESULT}: the paper's choice {study['best']!r} is not one row's label "
                                           f"({', '.join(r.label for r in rows)}).")
        if best[0].mean is None or len(have) < 2:
            return StudyVerdict(NO_RESULT, f"{claim}. Ours: {NO_RESULT} ({len(have)} of {len(rows)} rows have one).")
        pairs = [(best[0], r) for r in have if r is not best[0]]
        what = f"{study['best']} above every other row"
    else:
        if len(have) < len(rows) or len(rows) < 2:
            return StudyVerdict(NO_RESULT, f"{claim}. Ours: {NO_RESULT} ({len(have)} of {len(rows)} rows have one).")
        pairs = [(b, a) for a, b in zip(rows, rows[1:])]
        what = "each row above the one before"
    judged = [_compare(a, b, digits, len(pairs)) for a, b in pairs]
    signs = [s for s, _, _ in judged]
    if all(s > 0 for s in signs):
        status, shown = SUPPORTED, [t for _, _, t in judged]
    elif any(s < 0 for s in signs):
        status, shown = NOT_SUPPORTED, [t for s, _, t in judged if s < 0]
    else:
        status, shown = INCONCLUSIVE, [t for _, _, t in judged]
    head = status
    if status == INCONCLUSIVE:
        untested = sum(t.p is None for _, t, _ in judged)
        gaps = [t.detectable for s, t, _ in judged if s == 0 and t.detectable is not None]
        why = []
        if gaps:
            why.append(f"these seeds detect a gap of {_fmt(min(gaps), digits)}"
                       + (f" to {_fmt(max(gaps), digits)}" if max(gaps) > min(gaps) + 10**-digits else "")
                       + f" at α = {ALPHA:g}, power {POWER:g}")
        if untested:
            why.append(f"{untested} of {len(judged)} comparisons have no test")
        head += f" ({'; '.join(why)})" if why else ""
    return StudyVerdict(status, f"{claim}. Ours ({what}?): {head}: {'; '.join(shown)}. Means: {means}.")

"""The papers' own studies as tables: whether our rows support the claim a paper makes about a study it
ran and printed no numbers for (the w1/w2 weight search, AnglE's τ search, its batch sizes, AoE's
fourth pooling); and an objective comparison (table kind ``objective_comparison``, :func:`judge_comparison`):
whether one objective's row beats another's as a paper's table orders them, column by column, and, where a third
row trains the first's objective on the second's labels, which of the two made the gap.

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

__all__ = ["BEST", "COMPARISON_RULE", "INCONCLUSIVE", "INCREASING", "NOT_SUPPORTED", "NO_RESULT", "STUDY_RULE", "STUDY_TESTS",
           "SUPPORTED", "ComparedRow", "StudyRow", "StudyVerdict", "judge_comparison", "judge_study"]

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


# ---------------------------------------------------------------------------
# An objective comparison (issue 70): the paper's order of two objectives, tested column by column, and the row that
# tells the objective from the labels.

# Why per column with a correction: an STS table is read column by column (ACL Table 1 prints seven sets and their
# average), so a claim about two rows is c claims, one per column; a gap called at p < ALPHA in any of c columns is a
# false alarm far more often than ALPHA (1 − 0.95^8 ≈ 34% for eight independent columns). The claim itself is the
# study rule's: "supported" needs every column the claim's way at p < ALPHA (intersection-union: level ALPHA as it
# stands), "not supported" one column against it at p < ALPHA/c. A gap between two rows is named, with its
# direction, only where a column passes p < ALPHA/c (Bonferroni), else the gap each column's seeds could detect.
COMPARISON_RULE = (
    f"per column, a two-sided t-test between two of our rows over different seeds ({PAIRED} by seed where they share "
    f"seeds, else {WELCH}'s); the claim is supported where the higher row is above in every column at p < {ALPHA:g}, not "
    f"supported where it is below in one column at p < {ALPHA:g}/c (Bonferroni over the c columns tested), else "
    f"inconclusive; a gap between two rows is called only in a column at p < {ALPHA:g}/c, with the row that is higher; "
    f"elsewhere the smallest gap the column's seeds could detect (α = {ALPHA:g} two-sided, power {POWER:g}, from their "
    "observed spread)"
)


@dataclass(frozen=True)
class ComparedRow:
    """One row of an objective comparison: its label and its runs per column ({column key: {run name: value}})."""

    label: str
    values: dict


@dataclass(frozen=True)
class _Column:
    key: str
    header: str
    diff: float | None
    test: Comparison
    called: int  # +1: a higher at p < ALPHA / c, -1: b higher at p < ALPHA / c, 0: neither


def _pair(a: ComparedRow, b: ComparedRow, columns: list[tuple[str, str]]) -> list[_Column]:
    """Each column both rows have runs in, tested (the tables' compare_runs), with its call at ALPHA / c."""
    tested = []
    for key, header in columns:
        va, vb = a.values.get(key) or {}, b.values.get(key) or {}
        if StudyRow(a.label, va).mean is None or StudyRow(b.label, vb).mean is None:
            continue
        tested.append((key, header, StudyRow(a.label, va).mean - StudyRow(b.label, vb).mean, compare_runs(va, vb, a.label, b.label)))
    c = max(len(tested), 1)
    out = []
    for key, header, diff, test in tested:
        called = 0
        if test.p is not None and test.p < ALPHA / c and test.diff:
            called = 1 if test.diff > 0 else -1
        out.append(_Column(key, header, diff, test, called))
    return out


def _pair_text(a: ComparedRow, b: ComparedRow, cols: list[_Column], digits, differences: str) -> str:
    """``AoE − CoSENT (graded_labels "int" vs "score"): STS12 -1.20 (p = …; detectable: 0.90), …; called at p <
    0.05/8: CoSENT higher in STS12, Avg.``."""
    parts = []
    for col in cols:
        inner = [col.test.text()]
        if col.called == 0 and col.test.detectable is not None:
            inner.append(f"detectable: {_fmt(col.test.detectable, digits(col.key))}")
        parts.append(f"{col.header} {col.diff:+.{digits(col.key)}f} ({'; '.join(i for i in inner if i)})")
    c = len(cols)
    up = [col.header for col in cols if col.called > 0]
    down = [col.header for col in cols if col.called < 0]
    calls = [f"{a.label} higher in {', '.join(up)}"] if up else []
    calls += [f"{b.label} higher in {', '.join(down)}"] if down else []
    higher = sum(col.diff > 0 for col in cols)
    head = f"{a.label} − {b.label}" + (f" ({differences})" if differences else "")
    tail = (f", called at p < {ALPHA:g}/{c}: " + ("; ".join(calls) if calls else "none")) if cols else ""
    return (f"{head}: {'; '.join(parts) or 'no column with runs of both'} ({a.label} higher in {higher} of {c} "
            f"column{'s' * (c != 1)}{tail})")


def _effect(cols: list[_Column]) -> int:
    """+1 / -1 where every called column says one row is higher, 0 where none is called (or the calls disagree)."""
    calls = {col.called for col in cols if col.called}
    return calls.pop() if len(calls) == 1 else 0


def judge_comparison(higher: ComparedRow, lower: ComparedRow, columns: list[tuple[str, str]], comparison: dict,
                     digits=lambda key: 2, separates: ComparedRow | None = None,
                     differences: dict[tuple[str, str], str] | None = None) -> StudyVerdict:
    """The verdict on ``comparison`` (a ``tables.<name>.comparison`` entry: claim, source), that ``higher`` beats
    ``lower``, over ``columns`` ([(key, header)]) by :data:`COMPARISON_RULE`. ``separates``: the row that trains the
    higher row's objective on the lower row's labels; then the text says whether the gap is the labels' (higher −
    separates) or the objective's (separates − lower). ``differences``: {(label a, label b): every recipe difference of
    the pair}, named beside its gaps."""
    differences = differences or {}
    claim = f"Paper's claim ({comparison['source']}): \u201c{comparison['claim']}\u201d"
    what = f"{higher.label} above {lower.label} in every column"
    main = _pair(higher, lower, columns)
    if not main or any(col.test.p is None for col in main):
        why = "; ".join(dict.fromkeys(col.test.note for col in main if col.test.p is None)) or "no column with runs of both rows"
        return StudyVerdict(NO_RESULT, f"{claim}. Ours ({what}?): {NO_RESULT} ({why}).")
    if all(col.test.diff > 0 and col.test.p < ALPHA for col in main):
        status = SUPPORTED
    elif any(col.called < 0 for col in main):
        status = NOT_SUPPORTED
    else:
        status = INCONCLUSIVE
    head = status
    if status == INCONCLUSIVE:
        gaps = [col.test.detectable for col in main if col.called == 0 and col.test.detectable is not None]
        if gaps:
            d = digits(main[-1].key)
            head += (f" (these seeds detect a gap of {_fmt(min(gaps), d)}"
                     + (f" to {_fmt(max(gaps), d)}" if max(gaps) > min(gaps) + 10**-d else "") + f" at α = {ALPHA:g}, power {POWER:g})")
    text = f"{claim}. Ours ({what}?): {head}: {_pair_text(higher, lower, main, digits, differences.get((higher.label, lower.label), ''))}."
    if separates is not None:
        labels = _pair(higher, separates, columns)
        objective = _pair(separates, lower, columns)
        parts = [_pair_text(higher, separates, labels, digits, differences.get((higher.label, separates.label), "")),
                 _pair_text(separates, lower, objective, digits, differences.get((separates.label, lower.label), ""))]
        made = []
        for name, cols, a, b in (("the labels and batches", labels, higher, separates), ("the objective", objective, separates, lower)):
            sign = _effect(cols)
            if sign:
                made.append(f"{name} ({a.label if sign > 0 else b.label} higher)")
        gap = _effect(main)
        if gap == 0:
            which = "no gap between the two rows to attribute at these seeds"
        elif made:
            which = "the gap is " + " and ".join(made)
        else:
            which = "neither part of the gap is called on its own at these seeds"
        text += f" Which made it ({separates.label}: the higher row's objective on the lower row's labels): {which}: {'; '.join(parts)}."
    # the rows' means in the summary column (the avg), where the table has one with a result
    key, header = columns[-1]
    summary = [(r.label, StudyRow(r.label, r.values.get(key) or {}).mean) for r in (higher, separates, lower) if r is not None]
    means = "; ".join(f"{label} {_fmt(mean, digits(key))}" for label, mean in summary if mean is not None)
    return StudyVerdict(status, f"{text} Means ({header}): {means}." if key == "avg" and means else text)

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

from aoe.results.stats import PAPER_SEED_STD, SPREAD_PAPER, seed_spread
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
# Why the seed spread and not a t-test: the grid's rows are five reruns of seed 42, whose ± is GPU noise
# (AoE Table 4: ±0.10) and would call any 0.2-point gap real, while another seed moves a row by ±1.42
# (l.225); and two seeds (the CPU preset) give a t-test no power. A gap counts where it exceeds what
# another seed gives either row, the σ of the report's flag (aoe.results.stats.seed_spread).
STUDY_RULE = (
    "a gap between two rows counts where it exceeds the larger of their seed σ (the std of each row's per-seed means where it "
    f"has 2 seeds or more, else AoE Table 4's ±{PAPER_SEED_STD} over different seeds); supported: every comparison the claim "
    "makes goes its way by more than that; not supported: one goes the other way by more than that; else inconclusive "
    "(within the seed spread)"
)


@dataclass(frozen=True)
class StudyRow:
    label: str
    values: dict  # run name ("42", "42-rerun1", ...) -> value

    @property
    def mean(self) -> float | None:
        v = [x for x in self.values.values() if finite_or_none(x) is not None]
        return float(np.mean(v)) if v else None

    @property
    def sigma(self) -> tuple[float, str]:
        sigma, _, _, source = seed_spread(self.values)
        return sigma, source


@dataclass(frozen=True)
class StudyVerdict:
    status: str
    text: str  # the table note: the claim, its source, the verdict and the numbers

    def as_dict(self) -> dict:
        return {"status": self.status, "text": self.text}


def _fmt(x: float, digits: int) -> str:
    return f"{x:.{digits}f}"


def _compare(a: StudyRow, b: StudyRow, digits: int) -> tuple[int, str]:
    """+1 where a beats b beyond the seed spread, -1 where b beats a so, 0 within it; and the sentence."""
    gap = a.mean - b.mean
    (sa, src_a), (sb, src_b) = a.sigma, b.sigma
    spread = max(sa, sb)
    src = SPREAD_PAPER if SPREAD_PAPER in (src_a, src_b) and spread == PAPER_SEED_STD else "ours"
    sign = 1 if gap > spread else -1 if -gap > spread else 0
    return sign, f"{a.label} − {b.label} = {gap:+.{digits}f} (σ {_fmt(spread, digits)}, {src})"


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
        pairs = [_compare(best[0], r, digits) for r in have if r is not best[0]]
        what = f"{study['best']} above every other row"
    else:
        if len(have) < len(rows) or len(rows) < 2:
            return StudyVerdict(NO_RESULT, f"{claim}. Ours: {NO_RESULT} ({len(have)} of {len(rows)} rows have one).")
        pairs = [_compare(b, a, digits) for a, b in zip(rows, rows[1:])]
        what = "each row above the one before"
    signs = [s for s, _ in pairs]
    if all(s > 0 for s in signs):
        status = SUPPORTED
    elif any(s < 0 for s in signs):
        status = NOT_SUPPORTED
    else:
        status = INCONCLUSIVE + " (within the seed spread)"
    against = [t for s, t in pairs if s < 0]
    shown = against if status == NOT_SUPPORTED else [t for _, t in pairs]
    return StudyVerdict(status.split(" (")[0], f"{claim}. Ours ({what}?): {status}: {'; '.join(shown)}. Means: {means}.")

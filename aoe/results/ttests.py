"""The t-tests of a table (:data:`aoe.results.stats.TTEST_RULE`): which row of ours is set against which (per backbone,
the treatment row, AoE's or AnglE's, against every baseline row measured as it is, :func:`ttest_pairs`) and the test
of each pair per column (:func:`ttests`), whose p-values go in a note under the table.

The test itself (paired or Welch's, over seeds, never over reruns of one seed): :func:`aoe.results.stats.compare_runs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aoe.config.hparams import schema_default
from aoe.config.table_kinds import table_kind
from aoe.config.cells import PRETRAINED, RELEASED
from aoe.results.likeness import UnlikeNumbers, like_for_like, named_text
from aoe.results.stats import compare_runs
from aoe.results.table_model import Row, Table, TTest

__all__ = ["TREATMENTS", "TTestPair", "treatment_row", "ttest_pairs", "ttests"]

# treatment objectives of the t-test, in order of preference (a table's `ttest.treatment` overrides)
TREATMENTS = ("aoe", "angle_arxiv")


@dataclass(frozen=True)
class TTestPair:
    """Two rows of ours a table's t-test sets against each other: the treatment row chosen for the baseline,
    the differences of measurement the table names for them (printed beside each p), or why none is tested."""

    backbone: str
    treatment: Row
    baseline: Row
    named: dict = field(default_factory=dict)
    refused: str = ""  # "no test: ..." where no treatment row is measured as the baseline is


def treatment_row(rows: list[Row], treatment: str | None = None) -> Row | None:
    """The treatment of one backbone's rows: the row of ours set against the paper's AoE / AnglE (a trained row of
    ``treatment``, else of :data:`TREATMENTS`, with a paper line), else the first row of the first of those objectives
    among them (a table with no paper row, a preset)."""
    objectives = [treatment] if treatment else list(TREATMENTS)
    trained = [r for r in rows if r.objective in objectives]
    for objective in objectives:
        paper = next((r for r in trained if r.objective == objective and r.paper_ref), None)
        if paper is not None:
            return paper
    for objective in objectives:
        first = next((r for r in trained if r.objective == objective), None)
        if first is not None:
            return first
    return None


def ttest_pairs(rows: list[Row], spec: dict, name: str = "table") -> list[TTestPair]:
    """Per backbone, each baseline row (another objective than the treatment's) with the treatment row measured as it
    is (:mod:`aoe.results.likeness`): of the treatment (:func:`treatment_row`) and its variant rows (an in-domain row's
    other gold: its eval_gold row; another scoring pooling: its eval_pooling row) the one with the fewest differences,
    those the table names in ``compare_across`` allowed and printed beside each p; only where none of them is, another
    row of :data:`TREATMENTS` so measured (AoE's 2024 recipe beside the ablations that vary it); where no row is, the
    pair is refused, the difference named."""
    setting = spec.get("ttest") or {}
    allowed = spec.get("compare_across") or {}
    by_backbone: dict[str, list[Row]] = {}
    for r in rows:
        by_backbone.setdefault(r.backbone, []).append(r)
    out = []
    for backbone, group in by_backbone.items():
        primary = treatment_row(group, setting.get("treatment"))
        if primary is None:
            continue
        # first the treatment and its variant rows, then (only where none is measured as the baseline is) the other
        # treatment objective's rows: AoE's 2024 recipe beside the ablations that vary it
        tiers = [[primary, *(r for r in group if r is not primary and r.objective == primary.objective)],
                 [r for r in group if r.objective in TREATMENTS and r.objective != primary.objective]]
        done = set()
        for base in group:
            if base.objective == primary.objective or (base.objective, base.label) in done:
                continue
            done.add((base.objective, base.label))
            best, refusal = None, ""
            if base.objective in (PRETRAINED, RELEASED):
                # not trained: no seed to test over (compare_runs says so), so no measurement to match either
                out.append(TTestPair(backbone, primary, base))
                continue
            for candidates in tiers:
                for cand in candidates:
                    if cand.objective == base.objective:
                        continue
                    try:
                        named = like_for_like(cand.measure, base.measure, allowed, f"tables.{name}: {cand.label} vs {base.label}")
                    except UnlikeNumbers as err:
                        refusal = refusal or str(err)
                        continue
                    if best is None or len(named) < len(best[1]):
                        best = (cand, named)
                if best is not None:
                    break
            if best is None:
                why = refusal.split("measured otherwise ", 1)[-1].split("): ", 1)[0].lstrip("(")
                out.append(TTestPair(backbone, primary, base, refused=f"no test: measured otherwise ({why})"))
            else:
                out.append(TTestPair(backbone, best[0], base, best[1]))
    return out


def ttests(table: Table, spec: dict) -> list[TTest]:
    """Each pair of :func:`ttest_pairs` per column, by the test :func:`aoe.results.stats.compare_runs` allows for the
    two rows' runs; a pair measured otherwise is one line saying how. The treatment is the row set against the paper's
    AoE (``ttest.treatment``'s objective, else the first of :data:`TREATMENTS` with a paper line), per backbone.

    No test pooled over datasets: seven datasets scored by one model are not seven independent samples
    (a seed that trains well scores well on all of them), and a pooled p hid that STS12 got worse. The
    Avg. column's test, over each seed's average across the datasets, is the across-datasets test whose
    samples are independent."""
    if not table_kind(table.kind).ttests:
        return []
    setting = spec.get("ttest") or {}
    if setting.get("enabled", schema_default("tables", "*", "ttest", "enabled")) is False:
        return []
    out = []
    for pair in ttest_pairs(table.rows, spec, table.name):
        treat, base = pair.treatment, pair.baseline
        for col in [c.key for c in table.columns]:
            a, b = treat.values.get(col, {}), base.values.get(col, {})
            if not a or not b:  # a missing row is in the table's Missing note already
                continue
            if pair.refused:
                out.append(TTest(pair.backbone, treat.label, base.label, col, 0, None, None, pair.refused))
                continue
            c = compare_runs(a, b, treat.label, base.label, trained_b=base.objective not in (PRETRAINED, RELEASED))
            out.append(TTest(pair.backbone, treat.label, base.label, col, c.n_a, c.p, c.statistic, c.note, c.test, c.n_b,
                             named_text(pair.named), c.diff, c.detectable))
    return out

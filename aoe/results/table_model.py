"""What a built table is: its rows, of ours and the paper's (:class:`Row`), the t-tests between rows (:class:`TTest`)
and the table with its notes (:class:`Table`). A Row computes its own mean, std, Δ and seed-spread bound from its
runs, so that every twin of a table and REPORT.md print the same number.

Building a table: :mod:`aoe.results.tables`; printing it: :mod:`aoe.results.render`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from aoe.config.table_kinds import Column
from aoe.config.cells import NO_TRAINSET, PRETRAINED, RELEASED
from aoe.results.likeness import Measure
from aoe.results.stats import Bound, delta_bound, p_text, paper_seeds_of

__all__ = ["Row", "TTest", "Table", "draws_seed"]


@dataclass
class Row:
    label: str
    backbone: str
    objective: str
    trainsets: list[str]
    seeds: list[int] | None  # None: every seed found
    section: str = ""
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # column -> run (run_name) -> value
    reruns: int = 1  # trainings per seed: rerun 0 .. reruns-1
    paper_ref: str | None = None
    paper_label: str = ""
    paper: dict[str, float] = field(default_factory=dict)
    paper_std: dict[str, float] = field(default_factory=dict)
    reference: bool = False  # a paper row with no counterpart among ours
    # a reference row's group line, printed once above the rows sharing it: the paper's group (its backbone) and
    # the document, or the document alone (the independent reproduction report's rows sit under their own)
    heading: str = ""
    # the (backbone, objective) of ours a paper row stands for (the table's ``paper`` mapping or the row's
    # own key), also on reference rows: what a preset on another backbone compares by objective
    paper_backbone: str = ""
    paper_objective: str = ""
    repro_ref: str | None = None  # the independent reproduction's row, a second line under ours
    repro_label: str = ""
    repro: dict[str, float] = field(default_factory=dict)
    variant: str = NO_TRAINSET  # a pretrained row: its evaluation.pretrained_variants key ("none": the backbone's own)
    eval_pooling: str = ""  # an evaluation-only variant row: the pooling its cells were scored with ("": their own)
    eval_gold: str = ""  # an in-domain variant row: the gold its cells' files are read against ("": their own)
    # what its numbers are measured under (aoe.config.measures.row_measure): every t-test checks it (aoe.results.likeness)
    measure: Measure = field(default_factory=Measure)
    # an objective comparison's row: every resolved setting of its training (aoe.config.measures.row_settings); "": not recorded
    settings: str = ""

    @property
    def n(self) -> int:
        return len({s for v in self.values.values() for s in v})

    def mean(self, col: str) -> float:
        v = list(self.values.get(col, {}).values())
        return float(np.mean(v)) if v else math.nan

    def std(self, col: str) -> float:
        v = list(self.values.get(col, {}).values())
        return float(np.std(v, ddof=1)) if len(v) > 1 else math.nan

    def count(self, col: str) -> int:
        return len(self.values.get(col, {}))

    def delta(self, col: str) -> float:
        return self.mean(col) - self.paper[col] if col in self.paper and self.values.get(col) else math.nan

    def repro_delta(self, col: str) -> float:
        return self.mean(col) - self.repro[col] if col in self.repro and self.values.get(col) else math.nan

    def bound(self, col: str, seeded: bool = True) -> Bound | None:
        """The seed-spread bound beside this row's Δ in ``col`` (:func:`aoe.results.stats.delta_bound`); None for a row
        that draws no seed (:func:`draws_seed`) or without runs. ``seeded``: the table kind's (GIS split sizes are not)."""
        return delta_bound(self.values.get(col, {}), draws_seed(seeded, self.objective), paper_seeds_of(self.paper_ref))

    def repro_bound(self, col: str, seeded: bool = True) -> Bound | None:
        """The same bound beside Δ = ours − reproduction: the report's number is one run of its recipe (m = 1)."""
        return delta_bound(self.values.get(col, {}), draws_seed(seeded, self.objective), 1)


def draws_seed(seeded: bool, objective: str) -> bool:
    """Whether a row's numbers are draws of a seed: a trained row of a seeded table kind; a model as downloaded or a
    published checkpoint scores the same on any stack, and split sizes are no draw at all."""
    return seeded and objective not in (PRETRAINED, RELEASED)


@dataclass
class TTest:
    backbone: str
    treatment: str
    baseline: str
    column: str  # a column key
    n: int  # the treatment's runs (paired: the matched seeds)
    p: float | None
    statistic: float | None
    note: str = ""  # why there is no p-value
    test: str = ""  # aoe.results.stats.PAIRED or WELCH; '' where no test applies
    n_baseline: int = 0  # the baseline's runs (paired: the matched seeds again)
    named: str = ""  # the differences of measurement the table names for this pair (aoe.results.likeness.named_text)
    diff: float | None = None  # mean treatment − mean baseline (over the matched seeds where paired): which row is higher
    detectable: float | None = None  # the smallest gap the test's seeds could detect (aoe.results.stats.detectable_gap)

    def text(self) -> str:
        return p_text(self.test, self.p, self.n, self.n_baseline, self.note)


@dataclass
class Table:
    name: str
    kind: str
    caption: str
    columns: list[Column]
    rows: list[Row]
    references: list[Row]
    ttests: list[TTest] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # gis_stats: the body rows
    sources: list[dict] = field(default_factory=list)  # the files it read (source_files)
    study: dict | None = None  # a study table's verdict on the paper's claim (aoe.results.studies.judge_study)
    # {field: why}: the differences of measurement a comparison of its rows may have (tables.<name>.compare_across)
    compare_across: dict = field(default_factory=dict)

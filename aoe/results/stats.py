"""The statistics behind every ⚠ and p-value the tables and the report print.

Two questions, two tests. The report's flag (:data:`FLAG_RULE`, :func:`flag`): is our mean of a cell
consistent with the paper's number, given both sides' run-to-run spread? The tables' paired t-test
(:func:`paired_ttest`): is the treatment row (AoE / AnglE) better than another row of its backbone
over matched seeds? Both read only numbers, so both are tested here and nowhere else.
"""

from __future__ import annotations

import math

import numpy as np

from aoe.util.jsonio import finite_or_none

__all__ = ["FLAG", "FLAG_RULE", "FLAG_TEST", "ONE_SEED", "PAPER_RUNS", "SPREAD_RERUNS", "SPREAD_SEEDS", "flag", "flag_bound",
           "flag_of", "paired_ttest", "spread_of"]

FLAG = "⚠"
ONE_SEED = "one seed: no test"  # n < 2: no spread of ours to test against
FLAG_TEST = "95% interval"
PAPER_RUNS = 5  # AoE §4 (aoe-acl2024.txt l.162): every number the mean of five runs
# Why two tests. A paper's number is the mean of five runs with seed 42 (AoE §4, l.162 and l.182), its
# ± the spread of those reruns (GPU nondeterminism, ±0.04-0.15), while different seeds spread far more
# (AoE Table 4: ±0.10 fixed vs ±1.42 different seeds). Where ours follow that protocol (reruns of one
# seed, the grid), the two means are compared, each with its own run-to-run spread: a flag says the
# means differ beyond run-to-run noise, which a different software stack drawing seed 42 differently
# also does (up to the seed spread; AoE Table 4's different-seeds row measures ours). Where ours are
# different seeds (the CPU presets, presets/seeds-42-46.yaml), the paper's number is compared with where
# ONE run drawn from our seeds would fall, widened by the paper's run-to-run std.
SPREAD_RERUNS = "reruns of one seed"
SPREAD_SEEDS = "different seeds"
FLAG_RULE = (
    f"{FLAG} where |Δ| > Bound; over {SPREAD_RERUNS} (the paper's protocol), the two means: Bound = t(0.975, n−1) · √(s²/n + s_p²/{PAPER_RUNS}); "
    f"over {SPREAD_SEEDS}, one run's prediction interval: Bound = t(0.975, n−1) · √(s²·(1 + 1/n) + s_p²); "
    "s = our sample std over our n runs, s_p = the paper's std (0 where it prints none); "
    f"'{ONE_SEED}' where n < 2"
)


def spread_of(runs) -> str:
    """:data:`SPREAD_RERUNS` when the runs (names "42", "42-rerun1", ...) are trainings of one seed, else
    :data:`SPREAD_SEEDS`."""
    from aoe.config.workflow import parse_run

    seeds = {parse_run(r)[0] for r in runs}
    return SPREAD_RERUNS if len(seeds) == 1 and len(list(runs)) > 1 else SPREAD_SEEDS


def flag_bound(std: float | None, n: int, paper_std: float | None, spread: str = SPREAD_SEEDS) -> float | None:
    """Half-width of the 95% interval of :data:`FLAG_RULE` for our n runs of the given spread, with the
    paper's std; None with fewer than 2 runs (no spread)."""
    std = finite_or_none(std)
    if n < 2 or std is None:
        return None
    from scipy import stats  # here, not at the top: planning imports this module (through aoe.results.tables), and scipy.stats takes ~1 s

    paper_std = finite_or_none(paper_std) or 0.0
    t = float(stats.t.ppf(0.975, n - 1))
    if spread == SPREAD_RERUNS:
        return t * math.sqrt(std**2 / n + paper_std**2 / PAPER_RUNS)
    return t * math.sqrt(std**2 * (1 + 1 / n) + paper_std**2)


def flag(delta: float | None, std: float | None, n: int, paper_std: float | None, spread: str = SPREAD_SEEDS) -> str:
    """:data:`FLAG_RULE`: ``⚠`` where |Δ| > :func:`flag_bound`; :data:`ONE_SEED` with fewer than 2 runs
    (never a flag on the paper's fixed-seed std alone); '' otherwise or without Δ."""
    return flag_of(finite_or_none(delta), flag_bound(std, n, paper_std, spread))


def flag_of(delta: float | None, bound: float | None) -> str:
    if delta is None:
        return ""
    if bound is None:
        return ONE_SEED
    return FLAG if abs(delta) > bound else ""


def paired_ttest(a: list[float], b: list[float]) -> tuple[float | None, float | None, str]:
    """scipy.stats.ttest_rel(a, b): (p, t, note); p None when it is undefined (fewer than 2 pairs, constant differences)."""
    from scipy import stats

    n = len(a)
    if n < 2:
        return None, None, f"n/a ({n} seed{'s' if n != 1 else ''})"
    diff = np.asarray(a, float) - np.asarray(b, float)
    if np.allclose(diff, diff[0], rtol=0, atol=1e-12):
        return None, None, "n/a (identical differences)" if diff[0] else "n/a (no difference)"
    res = stats.ttest_rel(a, b)
    return float(res.pvalue), float(res.statistic), ""

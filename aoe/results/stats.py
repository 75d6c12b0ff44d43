"""The statistics behind every Δ bound, ⚠, p-value and study verdict the tables and the report print.

Three questions, one module, each answered in one sentence that every output quotes from here:

- :data:`FLAG_RULE` (:func:`delta_bound`, :func:`delta_text`): how large a gap between our mean and the paper's number a
  different seed alone makes; printed beside every Δ as ``Δ (±b)``, ⚠ where Δ is outside it.
- :data:`TTEST_RULE` (:func:`compare_runs`): is one of our rows better than another, by a t-test over different seeds
  (never over reruns of one seed, which measure GPU noise only).
- :data:`STUDY_RULE` (:mod:`aoe.results.studies`): does a paper's claim about its own study hold for our rows: a test
  at :data:`ALPHA` across seeds, else "inconclusive" with the smallest gap the seeds could detect (:func:`detectable_gap`).

All read numbers only ({run name: value}, run names "42", "42-rerun1", ...), so all are tested here and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aoe.util.jsonio import finite_or_none

__all__ = ["ALPHA", "Bound", "Comparison", "FLAG", "FLAG_RULE", "FLAG_TEST", "NOT_TESTED", "PAIRED", "PAPER_SEEDS", "PAPER_SEED_RUNS",
           "PAPER_SEED_STD", "POWER", "SPREAD_OURS", "SPREAD_PAPER", "SPREAD_RERUNS", "SPREAD_SEEDS", "TTEST_RULE", "WELCH",
           "bound_text", "compare_runs", "delta_bound", "delta_text", "detectable_gap", "flag", "flag_bound", "flag_of", "gain_bound",
           "paired_ttest", "paper_seeds_of", "p_text", "seed_means", "seed_spread", "spread_of", "welch_ttest"]

FLAG = "⚠"
NOT_TESTED = "not trained: no seed"  # a model as downloaded (or a published checkpoint) draws no seed
FLAG_TEST = "seed-spread bound"
# The seed spread the papers print: AoE Table 4, "different random seeds 82.45 ± 1.42" (aoe-acl2024.txt l.225;
# paper_numbers.yaml acl2024_table4_ablation random_seed.different_random_seeds), AoE-BERT's average
# Spearman over the seven STS sets, five runs (every number is the mean of five, l.162). The same table's
# "fixed random seed=42 82.43 ± 0.10" (l.224) is rerun noise: no seed's spread.
PAPER_SEED_STD = 1.42
PAPER_SEED_RUNS = 5
# The one paper number that is a mean over different seeds (the same Table 4 row, five seeds): the others
# are seed 42's (§4, l.182), one draw each.
PAPER_SEEDS = {"acl2024_table4_ablation/random_seed/different_random_seeds": PAPER_SEED_RUNS}
SPREAD_RERUNS = "reruns of one seed"
SPREAD_SEEDS = "different seeds"
SPREAD_OURS = "our seeds"
SPREAD_PAPER = "AoE Table 4"
ALPHA = 0.05  # every test here: two-sided at 5%, the level both papers claim (ACL Table 1's caption: p < 5%)
POWER = 0.80  # the power at which detectable_gap sizes the smallest gap a comparison's seeds could detect (Cohen's convention)
PAIRED = "paired"
WELCH = "Welch"

# Why the bound. Each paper number is seed 42's on the authors' hardware (AoE §4, l.182), averaged over five
# reruns that differ by GPU nondeterminism only (±0.10). Another GPU or library stack draws seed 42 elsewhere,
# anywhere within the spread of different seeds (±1.42), so to a reproduction the paper's number is ONE draw of
# the recipe: variance σ² (Table 4's different-seeds row, the mean of m = 5 draws: σ²/5). Ours is the mean over
# our k different seeds, σ²/k (reruns of one seed are one draw, k = 1). Under "same recipe", Δ has variance
# σ²·(1/m + 1/k): a 95% prediction interval for the paper's draw from our seeds, with σ our seeds' std (Student's
# t with k−1 degrees of freedom). Without two seeds of ours σ is AoE Table 4's (its five seeds, t(0.975, 4)):
# printed in brackets, since then the bound is the paper's spread, 5.58 points at k = 1, wider than most gaps
# either paper claims. The paper side's σ² never shrinks, so no number of seeds flags a gap below 1.96·σ.
FLAG_RULE = (
    "Δ = ours − paper, and beside it the gap a different seed alone makes: (±b), b = t(0.975, k−1)·σ·√(1/m + 1/k), a 95% "
    "prediction bound from the std σ of our k ≥ 2 seeds' means, m the seeds the paper's number averages (1: seed 42; 5 for "
    f"AoE Table 4's different-seeds row); [±b] in brackets where we have fewer than 2 seeds: σ is then {SPREAD_PAPER}'s "
    f"±{PAPER_SEED_STD} over its {PAPER_SEED_RUNS} seeds (t(0.975, {PAPER_SEED_RUNS - 1}), k = 1), the paper's spread, not ours; "
    f"{FLAG} where |Δ| > b; a row not trained (as downloaded, a published checkpoint) draws no seed, so its Δ has no bound"
)
TTEST_RULE = (
    f"p: a two-sided t-test between two of our rows over different seeds, each seed one value (its reruns averaged: "
    f"reruns of one seed differ by GPU noise only, so they are never samples), {PAIRED} by seed (scipy.stats.ttest_rel) "
    f"where both rows ran the same 2 seeds or more (a seed fixes the data order and initialisation both rows share), "
    f"else {WELCH}'s (scipy.stats.ttest_ind, equal_var=False) where each ran 2 or more; no test where a row has fewer "
    "than 2 seeds or is not trained; per column, the Avg. column's over each seed's average"
)


def paper_seeds_of(ref: str | None) -> int:
    """m of :data:`FLAG_RULE` for a paper reference: the different seeds its number averages (1: one seed's draw)."""
    return PAPER_SEEDS.get(ref or "", 1)


def spread_of(runs) -> str:
    """:data:`SPREAD_RERUNS` when the runs (names "42", "42-rerun1", ...) are trainings of one seed, else
    :data:`SPREAD_SEEDS`."""
    from aoe.config.cells import parse_run

    runs = list(runs)
    seeds = {parse_run(r)[0] for r in runs}
    return SPREAD_RERUNS if len(seeds) == 1 and len(runs) > 1 else SPREAD_SEEDS


def seed_means(values: dict) -> dict[int, float]:
    """{seed: the mean of its runs' finite values}: one value per seed, reruns averaged."""
    from aoe.config.cells import parse_run

    by_seed: dict[int, list[float]] = {}
    for run, v in values.items():
        v = finite_or_none(v)
        if v is not None:
            by_seed.setdefault(parse_run(run)[0], []).append(v)
    return {s: float(np.mean(v)) for s, v in sorted(by_seed.items())}


def seed_spread(values: dict) -> tuple[float, int, int, str]:
    """(σ, degrees of freedom, k, source) of :data:`FLAG_RULE` for one cell's runs ({run name: value}):
    σ = the sample std of the per-seed means over our k ≥ 2 different seeds, k−1 degrees of freedom
    (:data:`SPREAD_OURS`), else :data:`PAPER_SEED_STD` with the paper's five runs' 4
    (:data:`SPREAD_PAPER`). Reruns of a seed count once, by their mean."""
    means = list(seed_means(values).values())
    k = len(means)
    if k >= 2:
        return float(np.std(means, ddof=1)), k - 1, k, SPREAD_OURS
    return PAPER_SEED_STD, PAPER_SEED_RUNS - 1, max(k, 1), SPREAD_PAPER


@dataclass(frozen=True)
class Bound:
    """The half-width of :data:`FLAG_RULE`'s interval and what it was computed from."""

    half: float
    sigma: float
    df: int
    k: int
    source: str  # SPREAD_OURS, or SPREAD_PAPER where we have fewer than 2 seeds

    @property
    def fallback(self) -> bool:
        return self.source == SPREAD_PAPER


def _t(df: float) -> float:
    from scipy import stats  # here, not at the top: planning imports this module (through aoe.results.table_model), and scipy.stats takes ~1 s

    return float(stats.t.ppf(1 - ALPHA / 2, df))


def delta_bound(values: dict, trained: bool = True, paper_seeds: int = 1) -> Bound | None:
    """:data:`FLAG_RULE`'s bound q·σ·√(1/m + 1/k) for one cell's runs, m = ``paper_seeds`` (:func:`paper_seeds_of`);
    None for a row not trained (no seed to draw: a model as downloaded scores the same on any stack) or without runs."""
    if not trained or not seed_means(values):
        return None
    sigma, df, k, source = seed_spread(values)
    return Bound(_t(df) * sigma * math.sqrt(1 / paper_seeds + 1 / k), sigma, df, k, source)


def gain_bound(a: dict, b: dict) -> Bound | None:
    """The bound of :data:`FLAG_RULE` for a difference of two rows (ours: mean a − mean b; the paper's: one draw of
    each), treating the rows as independent: b = t(0.975, min df)·√(σa²(1 + 1/ka) + σb²(1 + 1/kb)); a fallback
    where either row has fewer than 2 seeds. None where either row has no run."""
    if not seed_means(a) or not seed_means(b):
        return None
    (sa, dfa, ka, src_a), (sb, dfb, kb, src_b) = seed_spread(a), seed_spread(b)
    sigma = math.sqrt(sa**2 * (1 + 1 / ka) + sb**2 * (1 + 1 / kb))
    source = SPREAD_PAPER if SPREAD_PAPER in (src_a, src_b) else SPREAD_OURS
    return Bound(_t(min(dfa, dfb)) * sigma, sigma, min(dfa, dfb), min(ka, kb), source)


def flag_bound(values: dict, trained: bool = True, paper_seeds: int = 1) -> float | None:
    """The half-width of :func:`delta_bound` (None where it has none)."""
    bound = delta_bound(values, trained, paper_seeds)
    return None if bound is None else bound.half


def flag(delta: float | None, values: dict, trained: bool = True, paper_seeds: int = 1) -> str:
    """:data:`FLAG_RULE`: ``⚠`` where |Δ| > :func:`flag_bound`; :data:`NOT_TESTED` for a row not trained;
    '' otherwise or without Δ."""
    return flag_of(finite_or_none(delta), delta_bound(values, trained, paper_seeds))


def flag_of(delta: float | None, bound: Bound | float | None) -> str:
    delta = finite_or_none(delta)
    if delta is None:
        return ""
    if bound is None:
        return NOT_TESTED
    half = bound.half if isinstance(bound, Bound) else bound
    return FLAG if abs(delta) > half else ""


def bound_text(bound: Bound | None, digits: int) -> str:
    """``(±1.10)`` from our seeds, ``[±5.58]`` from AoE Table 4's σ (fewer than 2 seeds of ours), '' without a bound."""
    if bound is None:
        return ""
    text = f"±{bound.half:.{digits}f}"
    return f"[{text}]" if bound.fallback else f"({text})"


def delta_text(delta: float | None, bound: Bound | None, digits: int) -> str:
    """A Δ as every output prints it: ``-0.80 (±1.10)``, ``-6.10 [±5.58] ⚠``; the Δ alone for a row not trained;
    '–' without a Δ."""
    delta = finite_or_none(delta)
    if delta is None:
        return "–"
    text = f"{delta:+.{digits}f}"
    if bound is not None:
        text += f" {bound_text(bound, digits)}" + (f" {FLAG}" if flag_of(delta, bound) == FLAG else "")
    return text


# ---------------------------------------------------------------------------
# t-tests between our rows, over seeds.


@dataclass(frozen=True)
class Comparison:
    """Two rows of ours compared by :data:`TTEST_RULE`: the test ('' where none applies, ``note`` saying why), p, t,
    the seeds on each side, diff = mean a − mean b (over the matched seeds where paired), and the smallest gap the
    test could detect at :data:`ALPHA` and :data:`POWER` from the seeds' observed spread (:func:`detectable_gap`)."""

    test: str
    p: float | None
    statistic: float | None
    n_a: int
    n_b: int
    note: str = ""
    diff: float | None = None
    detectable: float | None = None

    def text(self) -> str:
        return p_text(self.test, self.p, self.n_a, self.n_b, self.note)


def p_text(test: str, p: float | None, n_a: int, n_b: int, note: str = "") -> str:
    """A p-value naming its test and seeds: ``p = 0.031 (paired, 5 seeds)``, ``p = 0.21 (Welch, 5 vs 3 seeds)``;
    the note where there is no p."""
    if p is None:
        return note
    shown = f"{p:.2g}" if p < 0.001 else f"{p:.3f}"
    return f"p = {shown} ({test}, {n_a} seeds)" if test == PAIRED else f"p = {shown} ({test}, {n_a} vs {n_b} seeds)"


def _power(ncp: float, df: float) -> float:
    from scipy import stats

    crit = _t(df)
    # the far tail (a gap of the wrong sign called significant) is below 1e-7 once ncp > 1; scipy's nct returns NaN
    # for some of those underflowing values
    lower = float(stats.nct.cdf(-crit, df, ncp))
    return float(stats.nct.sf(crit, df, ncp)) + (lower if math.isfinite(lower) else 0.0)


def detectable_gap(se: float, df: float) -> float | None:
    """The smallest true gap a two-sided t-test at :data:`ALPHA` with standard error ``se`` and ``df`` degrees of
    freedom detects with probability :data:`POWER` (noncentral t); None where it is undefined (no spread, df < 1)."""
    from scipy.optimize import brentq

    if not (se > 0 and df >= 1 and math.isfinite(se) and math.isfinite(df)):
        return None
    hi = 1.0
    while _power(hi, df) < POWER:
        hi *= 2
    return float(brentq(lambda ncp: _power(ncp, df) - POWER, 0.0, hi, xtol=1e-6)) * se


def paired_ttest(a: list[float], b: list[float]) -> tuple[float | None, float | None, str]:
    """scipy.stats.ttest_rel(a, b): (p, t, note); p None when it is undefined (fewer than 2 pairs, constant differences)."""
    from scipy import stats

    n = len(a)
    if n < 2:
        return None, None, f"no test: {n} seed{'s' if n != 1 else ''}"
    diff = np.asarray(a, float) - np.asarray(b, float)
    if np.allclose(diff, diff[0], rtol=0, atol=1e-12):
        return None, None, "no test: the same difference on every seed" if diff[0] else "no test: no difference"
    res = stats.ttest_rel(a, b)
    return float(res.pvalue), float(res.statistic), ""


def welch_ttest(a: list[float], b: list[float]) -> tuple[float | None, float | None, str]:
    """scipy.stats.ttest_ind(a, b, equal_var=False): (p, t, note); p None with fewer than 2 values on a side
    or no spread on either (the statistic is then undefined)."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return None, None, f"no test: {min(len(a), len(b))} seed"
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return None, None, "no test: no spread"
    res = stats.ttest_ind(a, b, equal_var=False)
    return float(res.pvalue), float(res.statistic), ""


def _untestable(values: dict, means: dict[int, float], name: str, trained: bool) -> str:
    """Why one row's runs allow no test ('' where they do)."""
    if not trained:
        return f"no test: {name} is not trained (no seed)"
    if not means:
        return f"no test: no run of {name}"
    if len(means) < 2:
        runs = sum(finite_or_none(v) is not None for v in values.values())
        (seed,) = means
        if runs > 1:
            return f"no test: {name} is {runs} reruns of seed {seed} (GPU noise, no seed's spread)"
        return f"no test: one seed of {name}"
    return ""


def compare_runs(a: dict, b: dict, name_a: str = "a", name_b: str = "b", trained_a: bool = True, trained_b: bool = True) -> Comparison:
    """The t-test :data:`TTEST_RULE` allows for two rows' runs of one column ({run name: value} each).

    Each seed is one value (its reruns' mean). Paired over the seeds both rows ran where there are 2 or more: a
    seed's trainings of two objectives share its data order and initialisation, which pairing removes, and a paired
    test holds whatever the correlation that sharing makes, where Welch's assumes none. Else Welch's over each row's
    seeds. A row of one seed, or of reruns of one seed, gets no test: its runs differ by GPU noise, which would make
    any gap look real."""
    ma, mb = seed_means(a), seed_means(b)
    for values, means, name, trained in ((a, ma, name_a, trained_a), (b, mb, name_b, trained_b)):
        why = _untestable(values, means, name, trained)
        if why:
            return Comparison("", None, None, len(ma), len(mb), why)
    matched = sorted(set(ma) & set(mb))
    if len(matched) >= 2:
        xa, xb = [ma[s] for s in matched], [mb[s] for s in matched]
        p, t, note = paired_ttest(xa, xb)
        d = np.asarray(xa) - np.asarray(xb)
        se = float(np.std(d, ddof=1) / math.sqrt(len(d)))
        return Comparison(PAIRED, p, t, len(matched), len(matched), note, float(d.mean()),
                          None if p is None else detectable_gap(se, len(d) - 1))
    xa, xb = list(ma.values()), list(mb.values())
    p, t, note = welch_ttest(xa, xb)
    va, vb = np.var(xa, ddof=1) / len(xa), np.var(xb, ddof=1) / len(xb)
    se = math.sqrt(va + vb)
    # Welch-Satterthwaite degrees of freedom
    df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1)) if va + vb > 0 else float("nan")
    return Comparison(WELCH, p, t, len(xa), len(xb), note, float(np.mean(xa) - np.mean(xb)), None if p is None else detectable_gap(se, df))

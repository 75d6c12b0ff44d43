"""AoE Fig. 4 (cosine density per gold-rating group), Fig. 5 (gold density) and a distance to gold.

The paper shows, for AoE, SimCSE and SBERT, the density of the cosine similarities of
STS-B test pairs per gold-rating group (0-1, ..., 4-5), and argues from the pictures
that AoE's similarities are distributed more like the gold scores (Fig. 5). This module
draws both and turns the claim into numbers, per model:

``distance_to_gold`` (headline; scale-free): both the model's cosines and the gold
scores are rank-normalised over all pairs, r(x) = (average rank - 1/2) / N in (0, 1),
so any monotone rescaling of the cosine (a range crowded near 1, say) changes nothing.
For each gold group g, the 1-Wasserstein distance between the rank-normalised cosines
of g's pairs and the rank-normalised gold scores of g's pairs; the distance is their
mean weighted by group size. It is 0 when every group occupies the same quantile band
of the model's similarities as of the gold scores, and grows as groups mix or swap.

``w1_raw`` (scale-dependent, the figures' literal comparison): the 1-Wasserstein
distance between the raw cosines and the gold scores mapped linearly onto [0, 1]
(score range of the dataset); a model whose cosines crowd near 1 is far from gold here
even if it ranks pairs well.
"""

from __future__ import annotations

import numpy as np

__all__ = ["group_index", "group_labels", "rank_normalise", "distance_to_gold", "plot_similarity_density", "plot_gold_density"]


def group_index(scores: np.ndarray, edges: list[float]) -> np.ndarray:
    """Group of each gold score: [e0, e1), [e1, e2), ..., [e_{k-1}, e_k] (last closed); -1 outside."""
    scores = np.asarray(scores, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    idx = np.searchsorted(edges, scores, side="right") - 1
    idx[scores == edges[-1]] = len(edges) - 2
    idx[(scores < edges[0]) | (scores > edges[-1])] = -1
    return idx


def group_labels(edges: list[float]) -> list[str]:
    return [f"{a:g}–{b:g}" for a, b in zip(edges, edges[1:])]


def rank_normalise(x: np.ndarray) -> np.ndarray:
    """(average rank - 1/2) / N: ties share a value, the result lies in (0, 1)."""
    from scipy.stats import rankdata

    x = np.asarray(x, dtype=np.float64)
    return (rankdata(x, method="average") - 0.5) / len(x)


def distance_to_gold(cos: np.ndarray, gold: np.ndarray, edges: list[float], score_range: tuple[float, float]) -> dict:
    """``distance_to_gold`` (rank-normalised, per gold group), ``w1_raw`` and per-group details (module docstring)."""
    from scipy.stats import wasserstein_distance

    cos, gold = np.asarray(cos, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    groups = group_index(gold, edges)
    rc, rg = rank_normalise(cos), rank_normalise(gold)
    per_group, total, weight = {}, 0.0, 0
    for g, label in enumerate(group_labels(edges)):
        sel = groups == g
        n = int(sel.sum())
        if n == 0:
            per_group[label] = {"n": 0, "w1_rank": None, "cos_mean": None, "cos_std": None}
            continue
        w = float(wasserstein_distance(rc[sel], rg[sel]))
        per_group[label] = {"n": n, "w1_rank": w, "cos_mean": float(cos[sel].mean()), "cos_std": float(cos[sel].std())}
        total += n * w
        weight += n
    lo, hi = score_range
    return {
        "distance_to_gold": total / weight if weight else None,
        "w1_raw": float(wasserstein_distance(cos, (gold - lo) / (hi - lo))),
        "pairs": int(cos.size),
        "groups": per_group,
    }


def _kde_line(ax, values, grid, bw, lo=None, hi=None, **style):
    """A KDE of ``values`` on the domain [lo, hi] (reflected at its edges, aoe.results.figures.style.bounded_kde)."""
    from aoe.results.figures.style import bounded_kde

    values = np.asarray(values, dtype=np.float64)
    if values.size >= 2 and np.ptp(values) > 0:
        ax.plot(grid, bounded_kde(values, grid, bw, lo, hi), **style)
    elif values.size:
        ax.axvline(values[0], **{k: v for k, v in style.items() if k != "label"}, label=style.get("label"))


def plot_similarity_density(models: list[dict], edges: list[float], pdf, png=None, *, kde_bandwidth="scott") -> list:
    """Fig. 4: one panel per model (dicts with label, optional title, cos, gold, distance), a KDE per gold group.

    Panels share both axes (the paper's Fig. 4 compares their shapes); densities live on the cosine's
    domain [-1, 1] (bounded KDE, never drawn past cosine 1)."""
    import textwrap

    from aoe.results.figures.style import kde_grid, literal, new_figure, save_figure, series_style, style_context

    labels = group_labels(edges)
    all_cos = np.concatenate([np.asarray(m["cos"], dtype=np.float64) for m in models])
    grid = kde_grid(all_cos, -1.0, 1.0, n=400, bw_method=kde_bandwidth)
    with style_context():
        fig, axes = new_figure(ncols=len(models), width=2.4 * len(models) + 0.4, height=2.6, sharex=True, sharey=True)
        for ax, m in zip(axes[0], models):
            groups = group_index(m["gold"], edges)
            for g, label in enumerate(labels):
                st = series_style(g)
                _kde_line(ax, np.asarray(m["cos"])[groups == g], grid, kde_bandwidth, -1.0, 1.0, color=st["color"], linestyle=st["linestyle"], label=f"gold {label}")
            d = m["distance"]
            name = textwrap.fill(literal(m.get("title") or m["label"]), 34)  # panels side by side: titles wrap, never run into each other
            ax.set_title(f"{name}\ndistance to gold {d['distance_to_gold']:.3f} (raw W1 {d['w1_raw']:.3f})")
            ax.set_xlabel("cosine similarity")
            ax.set_xlim(grid[0], grid[-1])
        axes[0, 0].set_ylim(bottom=0)
        axes[0, 0].set_ylabel("density")
        axes[0, 0].legend(loc="upper left")
        return save_figure(fig, pdf, png)


def plot_gold_density(gold: np.ndarray, edges: list[float], pdf, png=None, *, kde_bandwidth="scott", title: str = "") -> list:
    """Fig. 5: histogram of the gold scores per rating group (hatched) with their KDE."""
    from aoe.results.figures.style import HATCHES, literal, new_figure, save_figure, style_context

    gold = np.asarray(gold, dtype=np.float64)
    with style_context():
        fig, axes = new_figure()
        ax = axes[0, 0]
        ax.hist(gold, bins=np.linspace(edges[0], edges[-1], 4 * (len(edges) - 1) + 1), density=True, color="0.85", edgecolor="0.3", linewidth=0.4, hatch=HATCHES[1], label="histogram")
        grid = np.linspace(edges[0], edges[-1], 400)
        _kde_line(ax, gold, grid, kde_bandwidth, edges[0], edges[-1], color="0.0", linestyle="-", label="KDE")
        for e in edges:
            ax.axvline(e, color="0.5", linestyle=":", linewidth=0.6)
        ax.set_xlabel("gold similarity score")
        ax.set_ylabel("density")
        ax.set_title(literal(title) if title else f"gold scores ({gold.size} pairs)")
        ax.set_ylim(0, ax.get_ylim()[1] * 1.2)  # room for the legend above the bars
        ax.legend(loc="upper center", ncol=2)
        return save_figure(fig, pdf, png)

"""Gradient magnitude of the cosine vs the angle objective against a pair's cosine (AoE §1, §3).

The paper argues that cos(u, v) saturates: near cos = 1 its gradient vanishes, so
CoSENT-style training on cosine learns little from highly similar pairs, while the
angle score keeps a gradient there. It never shows it. This module measures it on
real embeddings.

Definition (per pair, our choice, documented in the figure's caption). Both
objectives are the same CoSENT ranking loss over a score s (aoe.losses.angle):

    L = log(1 + sum_{y_i > y_j} exp(tau (s_j - s_i)))

so for the pair i, dL/du_i = (dL/ds_i) * ds_i/du_i. The first factor is a softmax
weight times tau that depends on the batch, not on which score is used, in the same
way for both objectives. The objective-specific part is the score's gradient, scaled
as the loss scales it:

    g_cos(i)   = tau * || d cos(u_i, v_i) / d u_i ||          (CoSENT on cosine)
    g_angle(i) = tau * || d angle_score(u_i, v_i) / d u_i ||  (angle objective, AoE Eq. 2-3)

with u_i, v_i the embeddings of the pair's two sentences, computed by autograd
through the very functions the losses use. For cosine, ||d cos / d u|| = sin(theta) / ||u||
(-> 0 as cos -> 1). The angle score's imaginary part adds a term of size ~1 / ||u||
that does not vanish at cos = 1. Both scale as 1 / ||u||, so their ratio is free of
the embeddings' norm.
"""

from __future__ import annotations

import numpy as np

__all__ = ["score_gradient_norms", "bin_stats", "gradient_summary", "plot_gradients"]


def score_gradient_norms(u: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair: cosine, ||d cos/du|| and ||d angle_score/du|| (unscaled, tau = 1), in float64.

    Rows are independent, so the gradient of the summed scores gives every row's
    gradient at once.
    """
    import torch

    from aoe.losses.angle import angle_scores

    u_t = torch.as_tensor(np.asarray(u, dtype=np.float64))
    v_t = torch.as_tensor(np.asarray(v, dtype=np.float64))
    out = {}
    for name, fn in (
        ("cos", lambda a, b: (a * b).sum(dim=1) / (a.norm(dim=1) * b.norm(dim=1))),
        ("angle", angle_scores),
    ):
        x = u_t.clone().requires_grad_(True)
        s = fn(x, v_t)
        (grad,) = torch.autograd.grad(s.sum(), x)
        out[f"score_{name}"] = s.detach().numpy()
        out[f"grad_{name}"] = grad.norm(dim=1).numpy()
    out["cos"] = out.pop("score_cos")
    return out


def bin_stats(cos: np.ndarray, values: np.ndarray, edges: np.ndarray) -> list[dict]:
    """Per bin [lo, hi) of ``cos`` (the last bin closed): count, median, 25th and 75th percentile of ``values``."""
    cos, values = np.asarray(cos, dtype=np.float64), np.asarray(values, dtype=np.float64)
    idx = np.searchsorted(edges, cos, side="right") - 1
    idx[cos == edges[-1]] = len(edges) - 2
    out = []
    for b in range(len(edges) - 1):
        sel = values[idx == b]
        row = {"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(sel.size)}
        if sel.size:
            q25, med, q75 = np.quantile(sel, [0.25, 0.5, 0.75])
            row.update(median=float(med), q25=float(q25), q75=float(q75))
        else:
            row.update(median=None, q25=None, q75=None)
        out.append(row)
    return out


def gradient_summary(data: dict, bins: int, bin_range: tuple[float, float], tau: float, saturation_threshold: float) -> dict:
    """The numbers behind the figure: per-bin stats of tau * gradient norm for both objectives."""
    cos = np.asarray(data["cos"], dtype=np.float64)
    edges = np.linspace(bin_range[0], bin_range[1], bins + 1)
    inside = (cos >= edges[0]) & (cos <= edges[-1])
    result = {
        "definition": "tau * ||d score(u, v) / d u|| per pair, score = cos(u, v) (CoSENT) or angle_scores(u, v) (angle objective)",
        "tau": tau,
        "pairs": int(cos.size),
        "pairs_outside_range": int((~inside).sum()),
        "bin_edges": edges.tolist(),
        "objectives": {},
    }
    for name in ("cos", "angle"):
        g = tau * np.asarray(data[f"grad_{name}"], dtype=np.float64)
        sat = cos > saturation_threshold
        result["objectives"][name] = {
            "bins": bin_stats(cos[inside], g[inside], edges),
            "saturation_zone": {
                "threshold": saturation_threshold,
                "pairs": int(sat.sum()),
                "median": float(np.median(g[sat])) if sat.any() else None,
            },
            "outside_saturation_zone_median": float(np.median(g[~sat])) if (~sat).any() else None,
        }
    za, zc = result["objectives"]["angle"]["saturation_zone"]["median"], result["objectives"]["cos"]["saturation_zone"]["median"]
    result["saturation_zone_ratio_angle_over_cos"] = za / zc if za is not None and zc else None
    return result


def plot_gradients(summary: dict, pdf, png=None, *, min_pairs_per_bin: int = 5, title: str = "") -> list:
    """Median and IQR of the gradient magnitude per cosine bin, both objectives, log scale."""
    from aoe.results.figures.style import literal, new_figure, plain_log_ticks, save_figure, series_style, style_context

    labels = {"cos": "cosine (CoSENT)", "angle": "angle (AoE)"}
    with style_context():
        fig, axes = new_figure(height=2.8)
        ax = axes[0, 0]
        for i, name in enumerate(("cos", "angle")):
            st = series_style(i)
            rows = [r for r in summary["objectives"][name]["bins"] if r["n"] > 0]
            x = np.array([(r["lo"] + r["hi"]) / 2 for r in rows])
            med = np.array([r["median"] for r in rows])
            ax.plot(x, med, color=st["color"], linestyle=st["linestyle"], marker=st["marker"], label=f"{labels[name]}: median")
            full = [r["n"] >= min_pairs_per_bin for r in rows]
            if any(full):
                xs = x[full]
                lo = np.array([r["q25"] for r, f in zip(rows, full) if f])
                hi = np.array([r["q75"] for r, f in zip(rows, full) if f])
                ax.fill_between(xs, lo, hi, facecolor="none" if i else "0.85", edgecolor=st["color"], hatch=st["hatch"] or None, linewidth=0.0, alpha=0.9, label=f"{labels[name]}: IQR")
        thr = summary["objectives"]["cos"]["saturation_zone"]["threshold"]
        ax.axvline(thr, color="0.3", linestyle=":", linewidth=0.8)
        # above the frame: the label never crosses the curves
        ax.text(thr, 1.01, f"cos > {thr:g}", transform=ax.get_xaxis_transform(), va="bottom", ha="center", fontsize=6)
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)  # 0.2, 0.5, 1 rather than "2 × 10⁻¹", "10⁰"
        ax.set_xlabel("cosine similarity of the pair")
        ax.set_ylabel(r"$\tau\,\|\partial s / \partial u\|$")
        ax.legend(loc="lower left")
        if title:
            ax.set_title(literal(title), pad=10)
        return save_figure(fig, pdf, png)

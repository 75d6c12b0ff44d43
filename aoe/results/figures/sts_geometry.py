"""AoE Fig. 3 and Fig. 10: real vs imaginary halves of STS pairs, t-SNE and pair-distance KDE.

An embedding X of size 2d is read as a complex vector (as the angle objective reads
it, aoe.losses.angle.angle_scores): real half ``X[:d]``, imaginary half ``X[d:]``.

Saturation zone (Fig. 3; the paper's "weighted similarity > 0.95"): the pairs whose
cosine similarity of the *whole* 2d embeddings under the model is strictly above the
threshold (0.95), i.e. where cos(u, v) and hence CoSENT's gradient saturates (AoE §1).
The cosine is the one the STS evaluation uses (aoe.evaluate.sts.cosine_rows).
Fig. 10 draws the same for every pair of the test set.

Highlighted pairs (config ``highlight_pairs``, AoE §5.3's "Ukraine ..." example): found in
the table by their sentences (case and spacing ignored), always t-SNE-embedded and drawn
first among the sample pairs, in the zone or not; their distances are reported in the
t-SNE planes (the length of the pair's line in Fig. 3a/3b: what the paper's 11.8 / 22.1 measure,
"the lengths of the lines, i.e., distances between text pairs") and in the embedding space.
Absolute lengths depend on the model and the t-SNE run; REPORT.md compares the ratio imaginary : real.

Drawn for a reader: sentences as written (a "$" is not math), legends outside the data, the
sample pairs' numbers moved apart where they would overlap, densities bounded at distance 0.

Panels: t-SNE of the real halves and of the imaginary halves of both sentences of every
selected pair (one t-SNE each, settings from config, deterministic given them), sample
pairs joined by lines and numbered, their sentences printed below; and a KDE of the
distances between the two sentences' real halves and between their imaginary halves,
with their averages AVG_re and AVG_im.
"""

from __future__ import annotations

import numpy as np

from aoe.config.hparams import schema_default

__all__ = [
    "split_halves",
    "saturation_mask",
    "select_pairs",
    "half_distances",
    "tsne_coords",
    "sample_pair_indices",
    "find_pairs",
    "highlighted_pairs",
    "geometry_stats",
    "compute_geometry",
    "plot_geometry",
]


def split_halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(real, imaginary) halves of (N, 2d) embeddings: ``x[:, :d]`` and ``x[:, d:]``."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] % 2:
        raise ValueError(f"split_halves expects (N, 2d) embeddings with an even size, got {x.shape}")
    d = x.shape[1] // 2
    return x[:, :d], x[:, d:]


def saturation_mask(cos: np.ndarray, threshold: float) -> np.ndarray:
    """Pairs in the saturation zone: whole-embedding cosine strictly above ``threshold``."""
    return np.asarray(cos) > threshold


def select_pairs(cos: np.ndarray, zone: str, threshold: float, max_pairs: int | None = None, seed: int = 0) -> np.ndarray:
    """Sorted pair indices of ``zone``: "saturation" (cos > threshold) or "all"; a seeded subset of either when capped."""
    if zone == "saturation":
        idx = np.flatnonzero(saturation_mask(cos, threshold))
    elif zone == "all":
        idx = np.arange(len(cos))
    else:
        raise ValueError(f"unknown zone {zone!r} (saturation, all)")
    if max_pairs is not None and idx.size > max_pairs:
        idx = np.sort(np.random.default_rng(seed).choice(idx, size=max_pairs, replace=False))
    return idx


def half_distances(u: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair, Euclidean and cosine distances between the real halves and between the imaginary halves."""
    u_re, u_im = split_halves(np.asarray(u, dtype=np.float64))
    v_re, v_im = split_halves(np.asarray(v, dtype=np.float64))
    out = {}
    for name, a, b in (("re", u_re, v_re), ("im", u_im, v_im)):
        out[f"euclidean_{name}"] = np.linalg.norm(a - b, axis=1)
        denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"cosine_{name}"] = 1.0 - np.nan_to_num((a * b).sum(axis=1) / denom)
    return out


def tsne_coords(points: np.ndarray, tsne: dict) -> tuple[np.ndarray, dict]:
    """2-D t-SNE of ``points`` with the config's settings; (coordinates, settings used).

    Perplexity is capped at (n - 1) / 3 (scikit-learn needs perplexity < n); fewer than
    5 points are placed by PCA instead (recorded as the method). Deterministic given
    the points and the settings (fixed random_state, single-threaded neighbours).
    """
    points = np.asarray(points, dtype=np.float64)
    n = len(points)
    if n == 0:
        return np.zeros((0, 2)), {"method": "none"}
    if n < 5:
        centred = points - points.mean(axis=0)
        if n == 1 or not np.any(centred):
            return np.zeros((n, 2)), {"method": "pca"}
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ vt[:2].T
        return np.pad(xy, ((0, 0), (0, 2 - xy.shape[1]))), {"method": "pca"}
    from sklearn.manifold import TSNE

    tsne = {key: tsne.get(key, schema_default("figures", "sts_geometry", "tsne", key))
            for key in ("perplexity", "seed", "init", "max_iter", "learning_rate", "metric")}
    perplexity = float(min(tsne["perplexity"], (n - 1) / 3))
    settings = {
        "method": "tsne",
        "perplexity": perplexity,
        "random_state": int(tsne["seed"]),
        "init": tsne["init"],
        "max_iter": int(tsne["max_iter"]),
        "learning_rate": tsne["learning_rate"],
        "metric": tsne["metric"],
    }
    model = TSNE(
        n_components=2,
        perplexity=perplexity,
        random_state=settings["random_state"],
        init=settings["init"],
        max_iter=settings["max_iter"],
        learning_rate=settings["learning_rate"],
        metric=settings["metric"],
        n_jobs=1,
    )
    return model.fit_transform(points), settings


def sample_pair_indices(n_selected: int, k: int, seed: int) -> np.ndarray:
    """Positions (into the selection) of the k sample pairs, seeded, sorted."""
    k = min(k, n_selected)
    if k <= 0:
        return np.zeros(0, dtype=int)
    return np.sort(np.random.default_rng(seed).choice(n_selected, size=k, replace=False))


def _norm(text) -> str:
    return " ".join(str(text).split()).casefold()


def find_pairs(data: dict, pairs: dict | None, where: str = "figures.sts_geometry.highlight_pairs") -> dict[str, int]:
    """Row of each named (sentence1, sentence2) pair in ``data``, either order, case and spacing ignored.

    A pair missing from the table is an error naming its key: the highlighted pairs are
    quoted from the paper, so a miss means a different test set or a typo, not "no pair".
    """
    index: dict[tuple[str, str], int] = {}
    for i, (a, b) in enumerate(zip(data["sentence1"], data["sentence2"])):
        index.setdefault((_norm(a), _norm(b)), i)
        index.setdefault((_norm(b), _norm(a)), i)
    rows = {}
    for name, (a, b) in (pairs or {}).items():
        row = index.get((_norm(a), _norm(b)))
        if row is None:
            dataset = (data.get("meta") or {}).get("data", {}).get("dataset", "the figure's")
            raise ValueError(
                f"{where}.{name}: the pair {a!r} / {b!r} is not in {dataset} test ({len(data['sentence1'])} pairs); "
                "correct its sentences or remove the entry"
            )
        rows[name] = row
    return rows


def highlighted_pairs(data: dict, geo: dict, threshold: float) -> dict[str, dict]:
    """Per highlighted pair: sentences, gold, cosine, whether it is in the saturation zone, its
    half distances in the embedding space and between its two points in each t-SNE plane."""
    idx = np.asarray(geo["idx"])
    n = idx.size
    out = {}
    for name, pos in zip(geo.get("highlight_names", []), geo.get("highlight_pos", [])):
        row = int(idx[pos])
        dist = half_distances(data["u"][[row]], data["v"][[row]])
        re_xy, im_xy = np.asarray(geo["re_xy"]), np.asarray(geo["im_xy"])
        out[str(name)] = {
            "sentence1": str(data["sentence1"][row]),
            "sentence2": str(data["sentence2"][row]),
            "gold": float(data["score"][row]),
            "cos": float(data["cos"][row]),
            "in_saturation_zone": bool(data["cos"][row] > threshold),
            **{k: float(v[0]) for k, v in dist.items()},
            "tsne_re": float(np.linalg.norm(re_xy[pos] - re_xy[n + pos])),
            "tsne_im": float(np.linalg.norm(im_xy[pos] - im_xy[n + pos])),
        }
    return out


def geometry_stats(data: dict, idx: np.ndarray, distance: str) -> dict:
    """AVG_re / AVG_im (mean pair distance of the halves, configured distance) and more, over ``idx``."""
    dist = half_distances(data["u"][idx], data["v"][idx])
    out = {"pairs": int(idx.size), "distance": distance}
    if idx.size:
        out["AVG_re"] = float(dist[f"{distance}_re"].mean())
        out["AVG_im"] = float(dist[f"{distance}_im"].mean())
        for kind in ("euclidean", "cosine"):
            re, im = dist[f"{kind}_re"], dist[f"{kind}_im"]
            out[kind] = {
                "mean_re": float(re.mean()),
                "mean_im": float(im.mean()),
                "median_re": float(np.median(re)),
                "median_im": float(np.median(im)),
                "share_im_above_re": float((im > re).mean()),
            }
        out["cos"] = {"min": float(data["cos"][idx].min()), "mean": float(data["cos"][idx].mean())}
        out["gold"] = {"mean": float(data["score"][idx].mean())}
    else:
        out["AVG_re"] = out["AVG_im"] = None
    return out


def compute_geometry(data: dict, zone: str, cfg: dict) -> dict[str, np.ndarray | dict]:
    """Selection, t-SNE coordinates of both halves and sample pairs (the tsne .npz contents).

    ``cfg`` is config figures.sts_geometry. Points are ordered [sentence1 of every
    selected pair, then sentence2 of every selected pair]. The highlighted pairs join the
    selection wherever their cosine lies and open the sample (``highlight_pos``: their
    positions in the selection); seeded draws fill the sample up to ``sample_pairs``.
    """
    seed = cfg.get("sample_seed", schema_default("figures", "sts_geometry", "sample_seed"))
    cap = cfg.get("max_pairs_all") if zone == "all" else cfg.get("max_pairs_zone")
    idx = select_pairs(data["cos"], zone, cfg["saturation_threshold"], cap, seed)
    rows = find_pairs(data, cfg.get("highlight_pairs"))
    idx = np.union1d(idx, np.array(sorted(rows.values()), dtype=int)).astype(int)
    u_re, u_im = split_halves(data["u"][idx])
    v_re, v_im = split_halves(data["v"][idx])
    re_xy, used = tsne_coords(np.concatenate([u_re, v_re]), cfg["tsne"])
    im_xy, _ = tsne_coords(np.concatenate([u_im, v_im]), cfg["tsne"])
    pos = np.array([int(np.searchsorted(idx, r)) for r in rows.values()], dtype=int)
    rest = np.setdiff1d(np.arange(idx.size), pos)
    drawn = rest[sample_pair_indices(rest.size, cfg["sample_pairs"] - pos.size, seed)]
    return {
        "idx": idx,
        "re_xy": re_xy,
        "im_xy": im_xy,
        "sample": np.concatenate([pos, drawn]).astype(int),
        "highlight_names": np.array(list(rows), dtype=str),
        "highlight_pos": pos,
        "settings": used,
    }


# points above a pair's midpoint its number takes (6.5 pt bold digit, its box and the 1.5 pt lift)
LABEL_ROOM_PT = 12.0


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def plot_geometry(
    data: dict, geo: dict, stats: dict, pdf, png=None, *, title: str = "", kde_bandwidth="scott", max_label_chars: int = 60, kde_idx=None
) -> list:
    """Three panels (t-SNE real, t-SNE imaginary, distance KDE) and the sample pairs' sentences below.

    ``kde_idx``: the pairs of the KDE panel (default: those t-SNE embeds; Fig. 10 passes every pair
    when t-SNE embeds a subset), the pairs ``stats`` was computed over.
    """
    from aoe.results.figures.style import HEIGHT, WIDTH, bounded_kde, kde_grid, literal, save_figure, series_style, spread_labels, style_context

    idx, sample = np.asarray(geo["idx"]), np.asarray(geo["sample"])
    n = idx.size
    n_lines = len(sample)
    with style_context():
        from matplotlib.figure import Figure

        text_height = 0.12 * n_lines + 0.05
        fig = Figure(figsize=(WIDTH * 2.1, HEIGHT + 0.35 + text_height), layout="constrained")
        grid = fig.add_gridspec(2, 3, height_ratios=[HEIGHT + 0.35, text_height])
        axes = [fig.add_subplot(grid[0, i]) for i in range(3)]
        for ax, key, name in ((axes[0], "re_xy", "real part"), (axes[1], "im_xy", "imaginary part")):
            xy = np.asarray(geo[key])
            ax.set_title(f"t-SNE of the {name}")
            ax.set_xticks([])
            ax.set_yticks([])
            if n == 0:
                ax.text(0.5, 0.5, "no pairs", ha="center", va="center", transform=ax.transAxes)
                continue
            ax.scatter(xy[:n, 0], xy[:n, 1], s=4, c="0.65", marker="o", linewidths=0, label="sentence 1")
            ax.scatter(xy[n:, 0], xy[n:, 1], s=5, c="0.35", marker="^", linewidths=0, label="sentence 2")
            mids = []
            for j in sample:
                a, b = xy[j], xy[n + j]
                ax.plot([a[0], b[0]], [a[1], b[1]], color="black", linestyle="-", linewidth=0.9, marker="o", markersize=2.5)
                mids.append((a + b) / 2)
            if mids:
                # the pairs' numbers, moved apart where pairs lie close (Fig. 10: hundreds of points)
                mids = np.asarray(mids)
                bbox = ax.get_position()
                w_pt, h_pt = bbox.width * fig.get_figwidth() * 72, bbox.height * fig.get_figheight() * 72
                (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
                # room above the highest point for a number drawn above it (it met the panel's title, issue 54)
                y1 += (y1 - y0) * LABEL_ROOM_PT / max(h_pt - LABEL_ROOM_PT, 1.0)
                ax.set_xlim(x0, x1)
                ax.set_ylim(y0, y1)
                pts = np.column_stack([(mids[:, 0] - x0) / (x1 - x0) * w_pt, (mids[:, 1] - y0) / (y1 - y0) * h_pt])
                offsets = spread_labels(pts, 10.0)  # points: a 6.5 pt digit in its box
                # a number moved apart stays inside the axes, below the title
                offsets[:, 1] = np.minimum(offsets[:, 1], h_pt - LABEL_ROOM_PT - pts[:, 1])
                for k, (mid, off) in enumerate(zip(mids, offsets)):
                    moved = bool(np.any(off))
                    ax.annotate(
                        str(k + 1), mid, xytext=(off[0], off[1] + 1.5), textcoords="offset points", fontsize=6.5, fontweight="bold",
                        ha="center", va="bottom", annotation_clip=False,
                        bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
                        arrowprops={"arrowstyle": "-", "linewidth": 0.4, "color": "0.3"} if moved else None,
                    )
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, markerscale=2, borderaxespad=0.3, handletextpad=0.2)
        ax = axes[2]
        kde_idx = idx if kde_idx is None else np.asarray(kde_idx)
        dist = half_distances(data["u"][kde_idx], data["v"][kde_idx]) if kde_idx.size else {}
        kind = stats["distance"]
        hi = 2.0 if kind == "cosine" else None  # a distance is >= 0; a cosine distance also <= 2
        ax.set_title(f"{kind.capitalize()} distance within pairs")
        for i, (part, label) in enumerate((("re", "real"), ("im", "imaginary"))):
            st = series_style(i)
            avg = stats[f"AVG_{part}"]
            text = f"{label}: AVG$_{{{part}}}$ = {avg:.3g}" if avg is not None else label
            if kde_idx.size >= 2 and np.ptp(dist[f"{kind}_{part}"]) > 0:
                values = dist[f"{kind}_{part}"]
                grid_x = kde_grid(values, 0.0, hi, bw_method=kde_bandwidth)
                ax.plot(grid_x, bounded_kde(values, grid_x, kde_bandwidth, 0.0, hi), color=st["color"], linestyle=st["linestyle"], label=text)
            elif avg is not None:
                ax.plot([], [], color=st["color"], linestyle=st["linestyle"], label=text)
            if avg is not None:
                ax.axvline(avg, color=st["color"], linestyle=st["linestyle"], linewidth=0.8)
        ax.set_xlabel("distance")
        ax.set_ylabel("density")
        ax.set_ylim(bottom=0)
        if n:
            # below the axes: the legend never crosses the curves or the AVG lines
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, borderaxespad=0.0)
        text_ax = fig.add_subplot(grid[1, :])
        text_ax.axis("off")
        named = dict(zip((int(p) for p in geo.get("highlight_pos", [])), geo.get("highlight_names", [])))
        lines = [
            f"{k + 1}. {_short(data['sentence1'][idx[j]], max_label_chars)}  |  {_short(data['sentence2'][idx[j]], max_label_chars)}  "
            f"(gold {data['score'][idx[j]]:.2f}, cos {data['cos'][idx[j]]:.4f}"
            + (f"; highlighted: {named[int(j)]}" if int(j) in named else "")
            + ")"
            for k, j in enumerate(sample)
        ]
        # sentences as written: "$5 ... $25" is text, not math
        text_ax.text(0.0, 1.0, "\n".join(lines) if lines else "", ha="left", va="top", fontsize=6, transform=text_ax.transAxes, parse_math=False)
        fig.suptitle(literal(title) if title else f"{n} pairs")
        return save_figure(fig, pdf, png)

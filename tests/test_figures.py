"""The embedding figures (aoe.results.figures, rules/figures.smk): synthetic embeddings, then one Snakemake run."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import yaml

from aoe.config.hparams import YAML_LOADER
from aoe.plan.evaluation_checks import check_figures
from aoe.results.figures import figure_cells, figure_inputs, figure_results, unavailable_figures
from aoe.results.figures.gradients import bin_stats, gradient_summary, plot_gradients, score_gradient_norms
from aoe.results.figures.similarity import distance_to_gold, group_index, plot_gold_density, plot_similarity_density, rank_normalise
from aoe.results.figures.sts_geometry import (
    compute_geometry,
    find_pairs,
    geometry_stats,
    half_distances,
    highlighted_pairs,
    plot_geometry,
    saturation_mask,
    select_pairs,
    split_halves,
    tsne_coords,
)
from aoe.config.errors import ConfigError
from tests.workflow_utils import REPO

FIG_DEFAULTS = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)["figures"]


def _pairs(n=60, dim=16, seed=0):
    """Synthetic pair data: v = u + noise of growing size, so cosines spread from ~1 down."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, dim))
    noise = rng.normal(size=(n, dim)) * np.linspace(0.01, 2.0, n)[:, None]
    v = u + noise
    grads = score_gradient_norms(u, v)
    return {
        "u": u.astype(np.float32),
        "v": v.astype(np.float32),
        "cos": grads["cos"],
        "grad_cos": grads["grad_cos"],
        "grad_angle": grads["grad_angle"],
        "score": np.clip(5 * (grads["cos"] + 1) / 2, 0, 5),
        "sentence1": np.array([f"first sentence {i}" for i in range(n)]),
        "sentence2": np.array([f"second sentence {i}" for i in range(n)]),
        "meta": {},
    }


# -- halves, saturation, t-SNE ------------------------------------------------------------


def test_split_halves_and_distances():
    x = np.arange(12, dtype=float).reshape(2, 6)
    re, im = split_halves(x)
    assert re.tolist() == [[0, 1, 2], [6, 7, 8]] and im.tolist() == [[3, 4, 5], [9, 10, 11]]
    with pytest.raises(ValueError, match="even"):
        split_halves(np.zeros((2, 5)))
    u = np.array([[1.0, 0.0, 0.0, 1.0]])
    v = np.array([[1.0, 0.0, 1.0, 0.0]])
    d = half_distances(u, v)
    assert d["euclidean_re"][0] == 0 and d["euclidean_im"][0] == pytest.approx(np.sqrt(2))
    assert d["cosine_re"][0] == pytest.approx(0) and d["cosine_im"][0] == pytest.approx(1)


def test_saturation_selection_is_strict():
    cos = np.array([0.2, 0.95, 0.951, 0.99, 1.0])
    assert saturation_mask(cos, 0.95).tolist() == [False, False, True, True, True]
    assert select_pairs(cos, "saturation", 0.95).tolist() == [2, 3, 4]
    assert select_pairs(cos, "all", 0.95).tolist() == [0, 1, 2, 3, 4]
    capped = select_pairs(cos, "all", 0.95, max_pairs=3, seed=1)
    assert len(capped) == 3 and capped.tolist() == sorted(capped.tolist())
    assert capped.tolist() == select_pairs(cos, "all", 0.95, max_pairs=3, seed=1).tolist()
    # the zone capped too (figures.sts_geometry.max_pairs_zone): a seeded subset of its pairs only
    zone = select_pairs(cos, "saturation", 0.95, max_pairs=2, seed=1)
    assert len(zone) == 2 and set(zone.tolist()) <= {2, 3, 4}


def test_tsne_is_deterministic_given_config():
    points = np.random.default_rng(0).normal(size=(40, 8))
    cfg = {"perplexity": 30, "seed": 0, "init": "pca", "max_iter": 250}
    a, used = tsne_coords(points, cfg)
    b, _ = tsne_coords(points, dict(cfg))
    assert a.shape == (40, 2) and np.array_equal(a, b)
    assert used["perplexity"] == pytest.approx(13.0)  # capped at (n - 1) / 3
    c, _ = tsne_coords(points, {**cfg, "seed": 1, "init": "random"})
    assert not np.allclose(a, c)
    few, used = tsne_coords(points[:3], cfg)
    assert few.shape == (3, 2) and used["method"] == "pca"


@pytest.mark.slow
def test_geometry_stats_and_plot(tmp_path):
    data = _pairs()
    cfg = {
        **FIG_DEFAULTS["sts_geometry"],
        "saturation_threshold": 0.9,
        "tsne": {**FIG_DEFAULTS["sts_geometry"]["tsne"], "max_iter": 250},
        "highlight_pairs": {},
    }
    geo = compute_geometry(data, "saturation", cfg)
    assert set(geo["idx"].tolist()) == set(np.flatnonzero(data["cos"] > 0.9).tolist())
    assert len(geo["sample"]) == min(5, len(geo["idx"])) and geo["re_xy"].shape == (2 * len(geo["idx"]), 2)
    stats = geometry_stats(data, geo["idx"], "euclidean")
    d = half_distances(data["u"][geo["idx"]], data["v"][geo["idx"]])
    assert stats["AVG_re"] == pytest.approx(d["euclidean_re"].mean()) and stats["AVG_im"] == pytest.approx(d["euclidean_im"].mean())
    pdf, png = plot_geometry(data, geo, stats, tmp_path / "g.pdf", title="synthetic")
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    # max_pairs_zone: t-SNE embeds a seeded subset of the zone, the other zone's cap (max_pairs_all) aside
    capped = compute_geometry(data, "saturation", {**cfg, "max_pairs_zone": 3, "max_pairs_all": 1000})
    assert len(capped["idx"]) == 3 and set(capped["idx"].tolist()) <= set(geo["idx"].tolist()) < set(range(len(data["cos"])))
    # an empty saturation zone still draws
    empty = compute_geometry(data, "saturation", {**cfg, "saturation_threshold": 0.999999})
    stats = geometry_stats(data, empty["idx"], "euclidean")
    assert stats["pairs"] == 0 and stats["AVG_re"] is None
    assert all(p.stat().st_size > 0 for p in plot_geometry(data, empty, stats, tmp_path / "e.pdf"))


def test_highlighted_pair_is_always_drawn_and_measured(tmp_path):
    """config highlight_pairs (the paper's Ukraine example): found by its sentences whatever the case or
    order, embedded and drawn first even outside the zone, its distances measured; a missing pair names its key."""
    data = _pairs()
    out_of_zone = 50  # cos well below 0.9 (noise grows with the row)
    assert data["cos"][out_of_zone] < 0.9
    cfg = {
        **FIG_DEFAULTS["sts_geometry"],
        "saturation_threshold": 0.9,
        "tsne": {**FIG_DEFAULTS["sts_geometry"]["tsne"], "max_iter": 250},
        "highlight_pairs": {"example": ["SECOND  sentence 50", "first sentence 50"]},
    }
    assert find_pairs(data, cfg["highlight_pairs"]) == {"example": out_of_zone}
    geo = compute_geometry(data, "saturation", cfg)
    zone = np.flatnonzero(data["cos"] > 0.9)
    assert set(geo["idx"].tolist()) == {*zone.tolist(), out_of_zone}
    pos = int(np.searchsorted(geo["idx"], out_of_zone))
    assert geo["highlight_pos"].tolist() == [pos] and geo["sample"][0] == pos
    assert len(geo["sample"]) == 5 and len(set(geo["sample"].tolist())) == 5
    pairs = highlighted_pairs(data, geo, 0.9)["example"]
    d = half_distances(data["u"][[out_of_zone]], data["v"][[out_of_zone]])
    assert pairs["in_saturation_zone"] is False and pairs["euclidean_re"] == pytest.approx(d["euclidean_re"][0])
    n = geo["idx"].size
    assert pairs["tsne_im"] == pytest.approx(np.linalg.norm(geo["im_xy"][pos] - geo["im_xy"][n + pos]))
    # the zone's statistics stay the zone's
    assert geometry_stats(data, zone, "euclidean")["pairs"] == zone.size
    stats = geometry_stats(data, zone, "euclidean")
    assert all(p.stat().st_size > 1000 for p in plot_geometry(data, geo, stats, tmp_path / "h.pdf"))
    with pytest.raises(ValueError, match=r"figures\.sts_geometry\.highlight_pairs\.ukraine: the pair .* is not in .* test \(60 pairs\)"):
        find_pairs(data, FIG_DEFAULTS["sts_geometry"]["highlight_pairs"])


def test_paper_pair_is_in_the_mirrors_stsb_test(mirror):
    """The configured Ukraine pair is a row of the mirror's STS-B test (both the raw and SentEval's lowercased copy)."""
    pair = FIG_DEFAULTS["sts_geometry"]["highlight_pairs"]["ukraine"]
    for rel in ("stsbenchmark/sts-test.csv", "senteval/downstream/STS/STSBenchmark/sts-test.csv"):
        rows = [line.rstrip("\n").split("\t") for line in (mirror / rel).read_text(encoding="utf-8").splitlines()]
        table = {"sentence1": np.array([r[5] for r in rows]), "sentence2": np.array([r[6] for r in rows])}
        assert find_pairs(table, {"ukraine": pair}) == {"ukraine": 1316}, rel


# -- similarity densities and the distance to gold --------------------------------------


def test_gold_groups_and_rank_normalisation():
    assert group_index(np.array([0.0, 0.99, 1.0, 4.5, 5.0, 5.5]), [0, 1, 2, 3, 4, 5]).tolist() == [0, 0, 1, 4, 4, -1]
    assert rank_normalise(np.array([3.0, 1.0, 2.0, 2.0])).tolist() == [0.875, 0.125, 0.5, 0.5]


def test_distance_to_gold_sanity():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, size=500)
    same = distance_to_gold(gold / 5, gold, [0, 1, 2, 3, 4, 5], (0, 5))
    assert same["distance_to_gold"] == pytest.approx(0, abs=1e-12) and same["w1_raw"] == pytest.approx(0, abs=1e-12)
    # any monotone map of the similarity keeps the rank distance at 0; only the raw W1 moves
    squeezed = distance_to_gold(0.9 + 0.1 * (gold / 5) ** 3, gold, [0, 1, 2, 3, 4, 5], (0, 5))
    assert squeezed["distance_to_gold"] == pytest.approx(0, abs=1e-12) and squeezed["w1_raw"] > 0.3
    shifted = distance_to_gold(gold / 5 + 0.2, gold, [0, 1, 2, 3, 4, 5], (0, 5))
    assert shifted["w1_raw"] == pytest.approx(0.2)
    noisy = distance_to_gold(gold / 5 + rng.normal(0, 0.2, 500), gold, [0, 1, 2, 3, 4, 5], (0, 5))
    random = distance_to_gold(rng.uniform(size=500), gold, [0, 1, 2, 3, 4, 5], (0, 5))
    assert 0 < noisy["distance_to_gold"] < random["distance_to_gold"]
    assert sum(g["n"] for g in random["groups"].values()) == 500


def test_similarity_plots(tmp_path):
    data = _pairs()
    d = distance_to_gold(data["cos"], data["score"], [0, 1, 2, 3, 4, 5], (0, 5))
    models = [{"label": "a", "cos": data["cos"], "gold": data["score"], "distance": d}] * 2
    for path in plot_similarity_density(models, [0, 1, 2, 3, 4, 5], tmp_path / "f4.pdf") + plot_gold_density(data["score"], [0, 1, 2, 3, 4, 5], tmp_path / "f5.pdf"):
        assert path.stat().st_size > 1000


# -- gradients ----------------------------------------------------------------------------


def _fd_grad_norm(fn, u, v, eps=1e-6):
    g = np.zeros_like(u)
    for k in range(u.size):
        e = np.zeros_like(u)
        e[k] = eps
        g[k] = (fn(u + e, v) - fn(u - e, v)) / (2 * eps)
    return np.linalg.norm(g)


def _cos(u, v):
    return u @ v / (np.linalg.norm(u) * np.linalg.norm(v))


def _angle(u, v):
    d = len(u) // 2
    a, b, c, e = u[:d], u[d:], v[:d], v[d:]
    return abs((a * c + b * e).sum() + (b * c - a * e).sum()) / (np.linalg.norm(u) * np.linalg.norm(v))


def test_gradients_match_hand_and_finite_differences():
    rng = np.random.default_rng(0)
    u = rng.normal(size=(4, 6))
    v = u + rng.normal(size=(4, 6)) * np.array([0.01, 0.1, 0.5, 1.0])[:, None]
    g = score_gradient_norms(u, v)
    for i in range(4):
        cos = _cos(u[i], v[i])
        assert g["cos"][i] == pytest.approx(cos)
        # ||d cos / d u|| = sin(theta) / ||u||
        assert g["grad_cos"][i] == pytest.approx(np.sqrt(1 - cos**2) / np.linalg.norm(u[i]), rel=1e-6)
        assert g["grad_cos"][i] == pytest.approx(_fd_grad_norm(_cos, u[i], v[i]), rel=1e-5)
        assert g["grad_angle"][i] == pytest.approx(_fd_grad_norm(_angle, u[i], v[i]), rel=1e-5)


def test_cosine_gradient_vanishes_near_one_and_angle_does_not(tmp_path):
    rng = np.random.default_rng(1)
    u = rng.normal(size=(1, 8)).repeat(5, axis=0)
    v = u + rng.normal(size=(1, 8)) * np.array([1.0, 0.3, 0.1, 0.01, 0.001])[:, None]
    g = score_gradient_norms(u, v)
    assert np.all(np.diff(g["cos"]) > 0)  # cos rises to ~1
    assert np.all(np.diff(g["grad_cos"]) < 0) and g["grad_cos"][-1] < 1e-2 * g["grad_cos"][0]
    assert g["grad_angle"][-1] > 0.5 / np.linalg.norm(u[0])  # the imaginary part keeps ~1 / ||u||
    data = _pairs(n=200)
    summary = gradient_summary(data, 10, (0.0, 1.0), 20.0, 0.95)
    cos_bins = summary["objectives"]["cos"]["bins"]
    assert sum(b["n"] for b in cos_bins) + summary["pairs_outside_range"] == 200
    assert summary["saturation_zone_ratio_angle_over_cos"] > 1
    assert all(p.stat().st_size > 1000 for p in plot_gradients(summary, tmp_path / "g.pdf"))


def test_bin_stats_edges():
    rows = bin_stats(np.array([0.0, 0.49, 0.5, 1.0]), np.array([1.0, 3.0, 5.0, 7.0]), np.array([0.0, 0.5, 1.0]))
    assert [r["n"] for r in rows] == [2, 2] and rows[0]["median"] == 2.0 and rows[1]["median"] == 6.0


# -- config -------------------------------------------------------------------------------


def _config():
    cfg = yaml.load((REPO / "config.yaml").read_text(), Loader=YAML_LOADER)
    return cfg


def test_figure_cells_and_availability():
    cfg = _config()
    cfg["runs"] = [{"backbone": "minilm-l6", "trainset": "stsb", "objectives": ["aoe"], "seeds": [1]}]
    cfg["figures"] = copy.deepcopy(FIG_DEFAULTS)
    cfg["figures"]["sts_geometry"]["model"] = {"backbone": "minilm-l6", "objective": "aoe", "trainset": "stsb", "seed": 1}
    cfg["figures"]["similarity_density"].update(backbone="minilm-l6", trainset="stsb", seed=1, objectives=["aoe", "pretrained"])
    cfg["figures"]["gradients"]["model"] = {"backbone": "minilm-l6", "objective": "pretrained", "trainset": "whatever", "seed": 7}
    check_figures(cfg)
    cells = figure_cells(cfg)
    assert cells["fig_gradients"][0][1].path == "minilm-l6/pretrained/none/seed0"
    assert [c.path for _, c in cells["fig4"]] == ["minilm-l6/aoe/stsb/seed1", "minilm-l6/pretrained/none/seed0"]
    assert unavailable_figures(cfg) == {}
    assert len(figure_results(cfg)) == 14
    assert figure_inputs(cfg, "fig3")["tsne"].endswith("minilm-l6/aoe/stsb/seed1/stsb-test.tsne-saturation.npz")
    # a known model no run trains: the figure leaves the targets; asking for it names the key
    cfg["figures"]["similarity_density"]["seed"] = 2
    assert set(unavailable_figures(cfg)) == {"fig4"}
    assert not any("fig4" in f for f in figure_results(cfg))
    with pytest.raises(ConfigError, match=r"figures\.similarity_density\.objectives\[0\].*seed2"):
        figure_inputs(cfg, "fig4")
    # an unknown name is a config error at once
    cfg["figures"]["gradients"]["model"]["backbone"] = "bert-huge"
    with pytest.raises(ConfigError, match=r"figures\.gradients\.model: unknown backbone 'bert-huge'"):
        check_figures(cfg)
    cfg["build"] = {**cfg.get("build", {}), "figures": ["training_curves"]}  # no embedding figure built
    check_figures(cfg)
    assert figure_results(cfg) == []


def test_paper_grid_density_figure_has_the_angle_panel():
    """AnglE's density figure (angle-arxiv-a.txt Fig. 6, l.234-240) is AoE Fig. 4 with AnglE in AoE's place:
    the grid's fig4 reads the AnglE-BERT NLI cell beside AoE, SimCSE and SBERT, all four trained by runs."""
    cfg = _config()
    check_figures(cfg)
    assert [c.path for _, c in figure_cells(cfg)["fig4"]] == [
        f"bert-base-uncased/{o}/nli/seed42" for o in ("aoe", "angle_arxiv", "simcse_sup", "sbert")]
    assert "fig4" not in unavailable_figures(cfg)


# -- the rules, end to end ------------------------------------------------------------------



def test_figure_text_set_is_the_capped_evaluations():
    """figure_pairs embeds the STS evaluation's very text set (a cache hit), capped as the evaluation caps it."""
    from aoe.data.sts import STS_TASKS
    from aoe.evaluate.sts import capped_tables, unique_texts
    from aoe.results.figures import shares_eval_cache
    from aoe.results.figures.pairs import eval_text_set

    rng = np.random.default_rng(0)
    tables = {
        d: pd.DataFrame({"sentence1": [f"{d} a{i}" for i in range(20)], "sentence2": [f"{d} b{i}" for i in range(20)], "score": rng.uniform(0, 5, 20)})
        for d in STS_TASKS.values()
    }
    by_task = {t: tables[d] for t, d in STS_TASKS.items()}
    evaluated = unique_texts(capped_tables(by_task, 5, ["STSB"]).values())
    assert len(evaluated) == 2 * (6 * 5 + 20)
    assert eval_text_set(tables, None, "stsb", 5, ["STSB"]) == evaluated
    assert eval_text_set(tables, None, "stsb", None, []) == unique_texts(by_task.values())
    # the evaluation scores only some STS-B pairs: the figures embed STS-B's own texts, and do not wait for it
    assert eval_text_set(tables, None, "stsb", 5, []) == unique_texts([tables["stsb"]])
    config = {"evaluation": {"embedding_cache": "results/embeddings", "sts": {"max_pairs": 5, "uncapped_tasks": ["STSB"]}}, "figures": {"dataset": "stsb"}}
    assert shares_eval_cache(config, list(STS_TASKS.values()))
    config["evaluation"]["sts"]["uncapped_tasks"] = []
    assert not shares_eval_cache(config, list(STS_TASKS.values()))


# -- what a reader sees: literal text, legends, labels, bounded densities, shared scales, names --


def _captured(monkeypatch):
    """The Figure objects the plot functions save (aoe.results.figures.style.save_figure), drawn with Agg."""
    import aoe.results.figures.style as style

    figs, real = [], style.save_figure

    def capture(fig, pdf, png=None):
        figs.append(fig)
        return real(fig, pdf, png)

    monkeypatch.setattr(style, "save_figure", capture)
    return figs


def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from aoe.results.figures.style import style_context

    with style_context():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    return canvas.get_renderer()


def _geometry(data, threshold=0.9, **extra):
    cfg = {
        **FIG_DEFAULTS["sts_geometry"],
        "saturation_threshold": threshold,
        "tsne": {**FIG_DEFAULTS["sts_geometry"]["tsne"], "max_iter": 250},
        "highlight_pairs": {},
        **extra,
    }
    geo = compute_geometry(data, "saturation", cfg)
    return geo, geometry_stats(data, geo["idx"], "euclidean")


def test_dollar_in_a_figure_text_is_drawn_literally(tmp_path, monkeypatch):
    """55 STS-B test sentences hold a "$"; two in one line ("$5 ... $25") must not be typeset as math."""
    from matplotlib.text import Text

    figs = _captured(monkeypatch)
    data = _pairs()
    data["sentence1"], data["sentence2"] = data["sentence1"].astype("U80"), data["sentence2"].astype("U80")
    data["sentence1"][3] = "You can buy it on amazon for $5."
    data["sentence2"][3] = "You can buy it on ebay for $25 and up."
    geo, stats = _geometry(data, highlight_pairs={"dollar": [data["sentence1"][3], data["sentence2"][3]]})
    plot_geometry(data, geo, stats, tmp_path / "g.pdf", title="costs $5 or $25")
    d = distance_to_gold(data["cos"], data["score"], [0, 1, 2, 3, 4, 5], (0, 5))
    plot_similarity_density([{"label": "a $1 b $2", "cos": data["cos"], "gold": data["score"], "distance": d}], [0, 1, 2, 3, 4, 5], tmp_path / "f4.pdf")
    texts = [t for fig in figs for t in fig.findobj(Text) if "$" in t.get_text() and ("amazon" in t.get_text() or "$5" in t.get_text() or "$1" in t.get_text())]
    assert len(texts) >= 3  # the sentence lines, the suptitle, the panel title
    for t in texts:
        _, is_math = t._preprocess_math(t.get_text())
        assert not is_math, t.get_text()
        assert not t.get_usetex()


def test_legends_never_cross_the_data(tmp_path, monkeypatch):
    """The distance panel's legend (and the t-SNE panels') sit outside the axes: they cannot cross the AVG lines or points."""
    figs = _captured(monkeypatch)
    data = _pairs()
    geo, stats = _geometry(data)
    plot_geometry(data, geo, stats, tmp_path / "g.pdf")
    renderer = _drawn(figs[0])
    panels = [ax for ax in figs[0].axes if ax.get_legend() is not None]
    assert len(panels) == 3
    for ax in panels:
        legend, frame = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
        assert not legend.overlaps(frame), ax.get_title()


def test_sample_pair_numbers_never_overlap(tmp_path, monkeypatch):
    """Fig. 10: sample pairs that lie close in the t-SNE plane still get readable, separate numbers."""
    from matplotlib.text import Annotation, Text

    figs = _captured(monkeypatch)
    data = _pairs()
    geo, stats = _geometry(data)
    n = len(geo["idx"])
    for key in ("re_xy", "im_xy"):  # every sample pair at one spot
        xy = np.asarray(geo[key], dtype=float).copy()
        for j in geo["sample"]:
            xy[j], xy[n + j] = (0.0, 0.0), (0.1, 0.1)
        geo[key] = xy
    plot_geometry(data, geo, stats, tmp_path / "g.pdf")
    renderer = _drawn(figs[0])
    for ax in figs[0].axes[:2]:
        boxes = [Text.get_window_extent(a, renderer) for a in ax.findobj(Annotation)]  # the numbers, not their leader lines
        assert len(boxes) == len(geo["sample"])
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), ax.get_title()


def test_densities_stay_inside_their_domain(tmp_path, monkeypatch):
    """Bounded (reflected) KDE: a density integrates to 1 on its domain and is never drawn past it
    (cosine above 1, distance below 0, gold outside its range)."""
    from aoe.results.figures.style import bounded_kde

    rng = np.random.default_rng(0)
    near_one = 1 - rng.exponential(0.02, 500)
    grid = np.linspace(-1, 1, 4001)
    dens = bounded_kde(near_one, grid, "scott", -1.0, 1.0)
    assert np.trapezoid(dens, grid) == pytest.approx(1.0, abs=1e-3)
    assert bounded_kde(near_one, np.array([1.01]), "scott", -1.0, 1.0)[0] == 0

    figs = _captured(monkeypatch)
    data = _pairs()
    data["cos"] = np.clip(data["cos"], None, 0.999)  # piled up against 1, as a trained model's are
    d = distance_to_gold(data["cos"], data["score"], [0, 1, 2, 3, 4, 5], (0, 5))
    plot_similarity_density([{"label": "a", "cos": data["cos"], "gold": data["score"], "distance": d}], [0, 1, 2, 3, 4, 5], tmp_path / "f4.pdf")
    plot_gold_density(data["score"], [0, 1, 2, 3, 4, 5], tmp_path / "f5.pdf")
    data["v"] = data["u"] + 1e-3 * (data["v"] - data["u"])  # distances piled up against 0
    geo, stats = _geometry(data)
    plot_geometry(data, geo, stats, tmp_path / "g.pdf")
    f4, f5, g = figs
    curves = [line.get_xdata() for line in f4.axes[0].get_lines() if len(line.get_xdata()) > 2]
    assert curves and max(c.max() for c in curves) <= 1.0 and min(c.min() for c in curves) >= -1.0
    curves = [line.get_xdata() for line in f5.axes[0].get_lines() if len(line.get_xdata()) > 2]
    assert curves and all(c.min() >= 0 and c.max() <= 5 for c in curves)
    curves = [line.get_xdata() for line in g.axes[2].get_lines() if len(line.get_xdata()) > 2]
    assert len(curves) == 2 and all(c.min() >= 0 for c in curves)


def test_fig4_panels_share_one_scale(tmp_path, monkeypatch):
    figs = _captured(monkeypatch)
    data = _pairs()
    models = []
    for power in (1.0, 0.3):
        cos = np.sign(data["cos"]) * np.abs(data["cos"]) ** power
        models.append({"label": f"p{power}", "cos": cos, "gold": data["score"], "distance": distance_to_gold(cos, data["score"], [0, 1, 2, 3, 4, 5], (0, 5))})
    plot_similarity_density(models, [0, 1, 2, 3, 4, 5], tmp_path / "f4.pdf")
    a, b = figs[0].axes
    assert a.get_ylim() == b.get_ylim() and a.get_xlim() == b.get_xlim()


def test_gradient_axis_has_plain_tick_labels(tmp_path, monkeypatch):
    """No "4 × 10⁰": every labelled tick of the log axis is a plain number."""
    import re

    figs = _captured(monkeypatch)
    summary = gradient_summary(_pairs(n=200), 10, (0.0, 1.0), 20.0, 0.95)
    plot_gradients(summary, tmp_path / "g.pdf")
    _drawn(figs[0])
    ax = figs[0].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels(which="both") if t.get_text()]
    assert len(labels) >= 2
    assert all(re.fullmatch(r"\d+(\.\d+)?", s) for s in labels), labels


def test_titles_use_the_names_readers_know():
    """Figure titles name models as the tables and the hub do, from config (backbones' hub ids) and
    aoe.config.rows.OBJECTIVE_LABELS / aoe.config.table_kinds.TRAINSET_HEADERS, not by internal keys."""
    from aoe.results.figures import dataset_name, display_label

    cfg = _config()
    assert display_label({"backbone": "minilm-l6", "objective": "aoe", "trainset": "stsb", "seed": 1}, cfg) == (
        "all-MiniLM-L6-v2 + AoE, trained on STS-B train (seed 1)"
    )
    assert display_label({"backbone": "bert-base-uncased", "objective": "simcse_sup", "trainset": "nli", "seed": 42}, cfg) == (
        "bert-base-uncased + SimCSE (sup.), trained on NLI train (seed 42)"
    )
    assert display_label({"backbone": "llama-2-7b", "objective": "pretrained", "trainset": "none", "seed": 0}, cfg) == "Llama-2-7b-hf (as downloaded)"
    assert dataset_name("stsb", "test") == "STS-B test"


def test_fig3s_pair_numbers_stay_inside_their_panel(tmp_path, monkeypatch):
    """A sampled pair at the top of a t-SNE panel drew its number over the panel's title (issue 54, AoE Fig. 3's "5")."""
    import aoe.results.figures.style as style

    data = _pairs(n=12)
    idx = np.arange(8)
    rng = np.random.default_rng(0)
    xy = rng.normal(size=(16, 2))
    for j in (3, 7):  # two sampled pairs at the very top
        xy[j, 1] = xy[8 + j, 1] = xy[:, 1].max() + 0.5
    geo = {"idx": idx, "sample": np.array([0, 3, 5, 7]), "re_xy": xy, "im_xy": xy[::-1].copy()}
    stats = {"distance": "euclidean", "AVG_re": 1.0, "AVG_im": 0.8}
    drawn = {}
    real_save = style.save_figure

    def keep(fig, pdf, png=None):
        drawn["fig"] = fig
        return real_save(fig, pdf, png)

    monkeypatch.setattr(style, "save_figure", keep)
    plot_geometry(data, geo, stats, tmp_path / "g.pdf", title="Fig. 3")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = drawn["fig"]
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)  # the constrained layout, as savefig placed it
    for ax in fig.axes[:2]:
        top = ax.get_window_extent(renderer).y1
        labels = [t for t in ax.texts if t.get_text().isdigit()]
        assert len(labels) == 4
        assert all(t.get_window_extent(renderer).y1 <= top + 0.5 for t in labels), ax.get_title()

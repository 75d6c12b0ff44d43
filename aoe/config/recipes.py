"""The objectives' recipes and the data formats they need, without torch.

The Snakefile resolves every cell's format and weights when it builds the DAG
(:func:`resolve_format`); importing torch there would cost more than planning the
whole paper grid, so the registry lives here and :mod:`aoe.losses.objectives`
builds the losses from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "FORMATS", "N_TEXTS", "COMPONENTS", "OBJECTIVES", "RECIPE_SOURCES", "LossSettings", "source",
    "objective_spec", "objective_formats", "resolve_format",
]


def source(text: str) -> dict:
    """Dataclass field metadata naming where a default comes from (read by aoe.config.hparams' ledger)."""
    return {"source": text}

FORMATS = ("pairs", "triplets", "nli3")
N_TEXTS = {"pairs": 2, "triplets": 3, "nli3": 2}

# component -> (accepted formats, the paper equation it implements)
COMPONENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "angle": (("pairs",), "AoE Eq. 2-3 / AnglE Eq. 6-7: CoSENT ranking on the complex angle score"),
    "contrastive": (("pairs",), "AoE Eq. 4 (L_cl) / AnglE Eq. 2 (L_ibn): in-batch contrastive, identical-text detection"),
    "cosine": (("pairs",), "AnglE Eq. 1 (CoSENT): ranking on cos(u, v)"),
    "cosine_mse": (("pairs",), "SBERT CosineSimilarityLoss: regression of cos(u, v) on the label"),
    "softmax": (("nli3",), "SBERT SoftmaxLoss: classifier over [u; v; |u - v|] on 3-way NLI labels"),
    "simcse": (("triplets", "pairs"), "supervised SimCSE Eq. 5: InfoNCE with hard negatives"),
}

@dataclass(frozen=True)
class LossSettings:
    """An objective's settings; :class:`aoe.losses.objectives.Objective` adds the losses.

    The defaults are the values a recipe or config key does not set; each says where it comes from.
    Taus are scales (1 / temperature).
    """

    name: str
    format: str = "pairs"
    weights: dict[str, float] = field(default_factory=dict)
    angle_tau: float = field(default=20.0, metadata=source("AoE §4 'Implementation Details' (aoe-acl2024.txt l.182): temperature 0.05, i.e. scale 20"))
    cosine_tau: float = field(default=20.0, metadata=source("AnglE §4.2 (angle-arxiv-a.txt l.134): tau_cos = 0.05, i.e. scale 20"))
    contrastive_tau: float = field(default=20.0, metadata=source("AoE Eq. 4 and §4 'Implementation Details' (l.182): temperature 0.05, i.e. scale 20"))
    simcse_tau: float = field(default=20.0, metadata=source("supervised SimCSE (Gao et al. 2021 §4): temperature 0.05, i.e. scale 20"))
    contrastive_threshold: float = field(
        default=0.5, metadata=source("our choice, used under graded_labels 'score' only: on binary labels (NLI entailment 1 / contradiction 0) any threshold in (0, 1] is the same")
    )
    graded_labels: str = field(
        default="int",
        metadata=source("official angle-emb, every version: AngleDataTokenizer stores int(data['label']) (fcb6223:angle_emb/angle.py:254; 1c5515b:angle_emb/angle.py:558), and in_batch_negative_loss builds its targets from y_true.int() (fcb6223:angle_emb/angle.py:100-113)"),
    )  # int | score
    contrastive_reduction: str = field(
        default="all_rows",
        metadata=source("official in_batch_negative_loss, every version: per-text cross-entropy summed over its positives, .mean() over all 2B texts (fcb6223:angle_emb/angle.py:40-43,130; 1c5515b:angle_emb/angle.py:88-90,212)"),
    )  # all_rows | anchored
    identical_texts: str = field(
        default="filter",
        metadata=source("official angle-emb from 0.3.8 (347bbb6, 2024-02-29, first tagged v0.3.8) to the ACL code (1c5515b, first tagged v0.4.6): AngleDataCollator(filter_duplicate=True) drops every example with a text already in the micro-batch (1c5515b:angle_emb/angle.py:583,619-622,645-646; fit default :1428)"),
    )  # filter | positive | detect | ignore


# The official code changed how it treats identical texts in a batch: angle-emb 0.1.x-0.2.x (the
# arXiv AnglE papers' time) adds them as extra in-batch positives (the collator's similar_matrix);
# 0.3.0-0.3.7 do neither (5de5047, 2024-01-15, removed the similar matrix: `ignore`); from 0.3.8
# (347bbb6, 2024-02-29; the ACL AoE paper's code, 1c5515b) the collator drops the examples that repeat
# a text. The AnglE (arXiv) recipes and ablations take the first, AoE's the LossSettings defaults (the last).
PAPER_ERA = {"identical_texts": "positive"}
# Baselines are not angle-emb objectives: their own papers' labels (rescaled scores) and no duplicate handling.
BASELINE = {"graded_labels": "score", "identical_texts": "ignore"}

# Built-in recipes. ``weights`` applies to every format; ``by_format`` gives weights per
# format, in order of preference (SBERT: the NLI classifier, or STS regression on pairs).
OBJECTIVES: dict[str, dict] = {
    "aoe": {"weights": {"angle": 1.0, "contrastive": 1.0}},
    "angle_arxiv": {"weights": {"cosine": 1.0, "contrastive": 1.0, "angle": 1.0}, "angle_tau": 1.0, **PAPER_ERA},
    "cosent": {"weights": {"cosine": 1.0}, **BASELINE},
    # Ablations (AoE Table 4, AnglE Table 3)
    "only_angle": {"weights": {"angle": 1.0}},
    "angle_only_angle": {"weights": {"angle": 1.0}, "angle_tau": 1.0, **PAPER_ERA},
    "only_contrastive": {"weights": {"contrastive": 1.0}},
    "only_cosine": {"weights": {"cosine": 1.0}, **PAPER_ERA},
    "only_ibn": {"weights": {"contrastive": 1.0}, **PAPER_ERA},
    "wo_ibn": {"weights": {"cosine": 1.0, "angle": 1.0}, "angle_tau": 1.0, **PAPER_ERA},
    "wo_angle": {"weights": {"cosine": 1.0, "contrastive": 1.0}, **PAPER_ERA},
    "ibn_without_isp": {"weights": {"contrastive": 1.0}, **PAPER_ERA, "identical_texts": "ignore"},
    # Baselines trained in the same harness
    "sbert": {"by_format": {"nli3": {"softmax": 1.0}, "pairs": {"cosine_mse": 1.0}}, **BASELINE},
    "simcse_sup": {"weights": {"simcse": 1.0}, **BASELINE},
}

_PAPER_ERA_SOURCE = {
    "identical_texts": "official angle-emb 0.1.1 (the arXiv papers' time): AngleDataCollator's similar_matrix makes identical texts extra in-batch positives (fcb6223:angle_emb/angle.py:264,302-310,118-119)",
}
_BASELINE_SOURCES = {
    "graded_labels": "a baseline's own paper: the gold score rescaled to [0, 1], not angle-emb's int(label)",
    "identical_texts": "a baseline's own paper: no identical-text handling",
}

# Where each built-in recipe's values come from: {objective: {key: source}}.
RECIPE_SOURCES: dict[str, dict[str, str]] = {
    "aoe": {"weights": "AoE Eq. 5 (w1 L_angle + w2 L_cl); ACL §4 'Implementation Details' (l.182) grid-searched the weights and gives none: 1 and 1 are the reproduction report's in-domain values (reproduction-report-zh.txt l.122-123)"},
    "angle_arxiv": {
        "weights": "AnglE Eq. 8 (angle-arxiv-b.txt l.108: w1 L_cos + w2 L_ibn + w3 L_angle); the arXiv appendix grid-searched them (angle-arxiv-b.txt l.333): 1/1/1 are the official code's paper-era defaults (aoe/resources/official_recipes.yaml)",
        "angle_tau": "AnglE §4.2 (angle-arxiv-a.txt l.134): tau_angle = 1.0",
        **_PAPER_ERA_SOURCE,
    },
    "cosent": {"weights": "CoSENT (AnglE Eq. 1): the cosine ranking loss alone", **_BASELINE_SOURCES},
    "only_angle": {"weights": "AoE Table 4 'only angle objective': L_angle alone, at AoE's tau"},
    "angle_only_angle": {
        "weights": "AnglE ablation 'only angle' (angle-arxiv-b.txt l.203, Table 4): L_angle alone",
        "angle_tau": "AnglE §4.2 (angle-arxiv-a.txt l.134): tau_angle = 1.0, as angle_arxiv",
        **_PAPER_ERA_SOURCE,
    },
    "only_contrastive": {"weights": "AoE Table 4 'only contrastive objective': L_cl alone"},
    "only_cosine": {"weights": "AnglE ablation 'only cosine': L_cos alone", **_PAPER_ERA_SOURCE},
    "only_ibn": {"weights": "AnglE ablation 'only ibn': L_ibn alone", **_PAPER_ERA_SOURCE},
    "wo_ibn": {"weights": "AnglE ablation 'without ibn': L_cos + L_angle", "angle_tau": "AnglE §4.2: tau_angle = 1.0", **_PAPER_ERA_SOURCE},
    "wo_angle": {"weights": "AnglE ablation 'without angle': L_cos + L_ibn", **_PAPER_ERA_SOURCE},
    "ibn_without_isp": {
        "weights": "AnglE ablation text 'ibn w/o identical sentence pair detection'",
        "identical_texts": "the same ablation: identical texts count as negatives (the official collator with compute_similar_matrix=False, fcb6223:angle_emb/angle.py:264,302)",
    },
    "sbert": {"by_format": "SBERT (Reimers & Gurevych 2019): softmax classifier on NLI, cosine regression on STS pairs", **_BASELINE_SOURCES},
    "simcse_sup": {"weights": "supervised SimCSE (Gao et al. 2021 Eq. 5)", **_BASELINE_SOURCES},
}


def _component_formats(weights: dict[str, float]) -> tuple[str, ...]:
    fmts = [f for f in FORMATS if all(f in COMPONENTS[c][0] for c, w in weights.items() if w)]
    # keep each component's order of preference (simcse: triplets before pairs)
    first = next((c for c, w in weights.items() if w), None)
    return tuple(sorted(fmts, key=COMPONENTS[first][0].index)) if first else ()


def objective_spec(name: str, overrides: dict | None) -> dict:
    if name not in OBJECTIVES and not (overrides and ("weights" in overrides or "by_format" in overrides)):
        raise ValueError(f"unknown objective {name!r}; known: {sorted(OBJECTIVES)}")
    spec = {**OBJECTIVES.get(name, {}), **(overrides or {})}
    if "weights" in (overrides or {}):
        spec.pop("by_format", None)
    return spec


def objective_formats(name: str, overrides: dict | None = None) -> tuple[str, ...]:
    """The data formats objective ``name`` can train on, most preferred first."""
    spec = objective_spec(name, overrides)
    if "by_format" in spec:
        return tuple(f for f, w in spec["by_format"].items() if f in _component_formats(w))
    unknown = set(spec.get("weights", {})) - set(COMPONENTS)
    if unknown:
        raise ValueError(f"objective {name!r}: unknown loss component(s) {sorted(unknown)}; known: {sorted(COMPONENTS)}")
    return _component_formats(spec.get("weights", {}))


def resolve_format(name: str, available: list[str] | tuple[str, ...], overrides: dict | None = None) -> str:
    """The first format of the objective's preference that the train set provides; ValueError if none."""
    wanted = objective_formats(name, overrides)
    for fmt in wanted:
        if fmt in available:
            return fmt
    raise ValueError(f"objective {name!r} trains on {list(wanted) or 'no format'}, the train set provides {list(available)}")

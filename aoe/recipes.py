"""The objectives' recipes and the data formats they need, without torch.

The Snakefile resolves every cell's format and weights when it builds the DAG
(:func:`resolve_format`); importing torch there would cost more than planning the
whole paper grid, so the registry lives here and :mod:`aoe.losses.objectives`
builds the losses from it.
"""

from __future__ import annotations

__all__ = ["FORMATS", "N_TEXTS", "COMPONENTS", "OBJECTIVES", "objective_spec", "objective_formats", "resolve_format"]

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

# Built-in recipes. ``weights`` applies to every format; ``by_format`` gives weights per
# format, in order of preference (SBERT: the NLI classifier, or STS regression on pairs).
OBJECTIVES: dict[str, dict] = {
    "aoe": {"weights": {"angle": 1.0, "contrastive": 1.0}},
    "angle_arxiv": {"weights": {"cosine": 1.0, "contrastive": 1.0, "angle": 1.0}, "angle_tau": 1.0},
    "cosent": {"weights": {"cosine": 1.0}},
    # Ablations (AoE Table 4, AnglE Table 3)
    "only_angle": {"weights": {"angle": 1.0}},
    "only_contrastive": {"weights": {"contrastive": 1.0}},
    "only_cosine": {"weights": {"cosine": 1.0}},
    "only_ibn": {"weights": {"contrastive": 1.0}},
    "wo_ibn": {"weights": {"cosine": 1.0, "angle": 1.0}, "angle_tau": 1.0},
    "wo_angle": {"weights": {"cosine": 1.0, "contrastive": 1.0}},
    "ibn_without_isp": {"weights": {"contrastive": 1.0}, "detect_identical": False},
    # Baselines trained in the same harness
    "sbert": {"by_format": {"nli3": {"softmax": 1.0}, "pairs": {"cosine_mse": 1.0}}},
    "simcse_sup": {"weights": {"simcse": 1.0}},
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

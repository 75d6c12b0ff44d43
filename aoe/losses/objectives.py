"""Named training objectives composed from the loss functions.

An objective is a weighted sum of loss *components*, each a pure function of the
pair embeddings. ``config.yaml`` names objectives (``aoe``, ``angle_arxiv``, ...)
and gives their weights; this module turns such an entry into a callable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from aoe.losses.angle import angle_loss, cosent_ranking_loss
from aoe.losses.contrastive import contrastive_loss

__all__ = ["COMPONENTS", "OBJECTIVES", "Objective", "get_objective"]

# Component name -> the paper equation it implements.
COMPONENTS = {
    "angle": "AoE Eq. 2-3 / AnglE Eq. 6-7: CoSENT ranking on the complex angle score",
    "contrastive": "AoE Eq. 4 (L_cl) / AnglE Eq. 2 (L_ibn): in-batch contrastive with identical-text detection",
    "cosine": "AnglE Eq. 1 (CoSENT): ranking on cos(u, v)",
}

# Built-in recipes; config.yaml may override weights and scales.
OBJECTIVES: dict[str, dict] = {
    "aoe": {"weights": {"angle": 1.0, "contrastive": 1.0}},
    "angle_arxiv": {"weights": {"cosine": 1.0, "contrastive": 1.0, "angle": 1.0}, "angle_tau": 1.0},
    "cosent": {"weights": {"cosine": 1.0}},
    "only_angle": {"weights": {"angle": 1.0}},
    "only_contrastive": {"weights": {"contrastive": 1.0}},
}


@dataclass(frozen=True)
class Objective:
    """A weighted sum of loss components over paired embeddings.

    Attributes:
        name: the config name.
        weights: component -> weight (components with weight 0 are skipped).
        angle_tau, cosine_tau, contrastive_tau: scales (1 / temperature).
        contrastive_threshold: label at or above which a pair is a positive pair.
        detect_identical: identical-text detection in the contrastive component.
    """

    name: str
    weights: dict[str, float] = field(default_factory=dict)
    angle_tau: float = 20.0
    cosine_tau: float = 20.0
    contrastive_tau: float = 20.0
    contrastive_threshold: float = 0.5
    detect_identical: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"objective {self.name!r}: unknown loss component(s) {sorted(unknown)}; known: {sorted(COMPONENTS)}")
        if not any(w != 0 for w in self.weights.values()):
            raise ValueError(f"objective {self.name!r} has no component with a non-zero weight")

    def components(
        self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor, text_ids: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Each weighted component's unweighted value."""
        out: dict[str, torch.Tensor] = {}
        for name, weight in self.weights.items():
            if weight == 0:
                continue
            if name == "angle":
                out[name] = angle_loss(u, v, labels, tau=self.angle_tau)
            elif name == "cosine":
                out[name] = cosent_ranking_loss(F.cosine_similarity(u, v, dim=1), labels, tau=self.cosine_tau)
            else:
                out[name] = contrastive_loss(
                    u,
                    v,
                    labels,
                    tau=self.contrastive_tau,
                    text_ids=text_ids,
                    threshold=self.contrastive_threshold,
                    detect_identical=self.detect_identical,
                )
        return out

    def __call__(
        self, u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor, text_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Total loss and its unweighted components."""
        parts = self.components(u, v, labels, text_ids)
        total = sum(self.weights[k] * value for k, value in parts.items())
        return total, parts


def get_objective(name: str, overrides: dict | None = None) -> Objective:
    """The objective ``name``, its built-in recipe updated with ``overrides``."""
    if name not in OBJECTIVES and not (overrides and "weights" in overrides):
        raise ValueError(f"unknown objective {name!r}; known: {sorted(OBJECTIVES)}")
    spec = {**OBJECTIVES.get(name, {}), **(overrides or {})}
    return Objective(name=name, **spec)

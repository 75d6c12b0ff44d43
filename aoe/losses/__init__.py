"""Loss functions of AoE / AnglE as pure functions on embedding tensors.

One module per loss family; :mod:`aoe.losses.objectives` composes them into the
named training objectives of ``config.yaml``.

May import: ``aoe.util``, ``aoe.config``.
"""

from aoe.losses.angle import angle_loss, angle_scores, cosent_ranking_loss
from aoe.losses.contrastive import contrastive_loss, contrastive_targets, filter_duplicates
from aoe.losses.objectives import OBJECTIVES, Objective, get_objective, objective_formats, resolve_format

__all__ = [
    "angle_loss",
    "angle_scores",
    "cosent_ranking_loss",
    "contrastive_loss",
    "contrastive_targets",
    "filter_duplicates",
    "OBJECTIVES",
    "Objective",
    "get_objective",
    "objective_formats",
    "resolve_format",
]

"""Named training objectives composed from the loss functions, and the data format each needs.

An objective is a weighted sum of loss *components*. Each component accepts some
data formats:

* ``pairs``: (text1, text2, label in [0, 1]); STS scores normalised, NLI entailment 1 /
  contradiction 0 (neutral dropped);
* ``triplets``: (anchor, positive, hard negative), e.g. (premise, entailment, contradiction);
* ``nli3``: (premise, hypothesis, class 0 entailment / 1 neutral / 2 contradiction).

An objective's format is resolved against what a train set provides when the DAG is
built (:func:`resolve_format`), so a mismatch is a config error, not a crash in a GPU job.
``config.yaml`` names objectives and may override their weights and scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from aoe.config.recipes import COMPONENTS, FORMATS, N_TEXTS, OBJECTIVES, LossSettings, objective_formats, objective_spec, resolve_format
from aoe.losses.angle import angle_loss, cosent_ranking_loss
from aoe.losses.baselines import SoftmaxHead, cosine_mse_loss, sbert_softmax_loss, simcse_loss
from aoe.losses.contrastive import SETTINGS, check_setting, contrastive_loss, filter_duplicates

__all__ = ["FORMATS", "COMPONENTS", "OBJECTIVES", "Objective", "get_objective", "resolve_format", "objective_formats"]


@dataclass(frozen=True)
class Objective(LossSettings):
    """A weighted sum of loss components over the embeddings of a batch in one data format.

    Attributes (:class:`aoe.config.recipes.LossSettings`, where each default cites its source):
        name: the config name.
        format: pairs | triplets | nli3.
        weights: component -> weight (components with weight 0 are skipped).
        angle_tau, cosine_tau, contrastive_tau, simcse_tau: scales (1 / temperature).
        contrastive_threshold: label at or above which a pair is a positive pair
            (contrastive under graded_labels "score" and, on pairs, simcse anchors).
        graded_labels, contrastive_reduction, identical_texts: the official behaviour
            (int labels, mean over all 2B texts, duplicates filtered or extra positives)
            or ours, see :mod:`aoe.losses.contrastive`.
    """

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"objective {self.name!r}: unknown loss component(s) {sorted(unknown)}; known: {sorted(COMPONENTS)}")
        if not any(w != 0 for w in self.weights.values()):
            raise ValueError(f"objective {self.name!r} has no component with a non-zero weight")
        for key in SETTINGS:
            check_setting(key, getattr(self, key), where=f"objective {self.name!r}: ")
        bad = [c for c, w in self.weights.items() if w and self.format not in COMPONENTS[c][0]]
        if bad:
            raise ValueError(f"objective {self.name!r}: component(s) {bad} cannot train on {self.format!r} data")

    @property
    def n_texts(self) -> int:
        return N_TEXTS[self.format]

    def train_labels(self, scores: torch.Tensor, score_range: tuple[float, float]) -> torch.Tensor:
        """The labels the losses see, from a train set's raw pair scores (``pairs`` format).

        ``graded_labels`` "int": the raw score truncated to an integer, as the official code
        tokenises every label (``int(data['label'])``), so STS-B's 0-5 scores become 0..5 and
        binary sets stay 0/1. "score": the score rescaled to [0, 1] by ``score_range``.
        """
        if self.graded_labels == "int":
            return torch.trunc(scores.float())
        lo, hi = score_range
        return (scores.float() - lo) / (hi - lo)

    def label_problems(self, labels: torch.Tensor) -> dict[str, str]:
        """Weighted components that cannot learn from a train set's ``labels`` (as :meth:`train_labels`
        makes them; NLI classes for nli3), each with the reason: {component: why}. Empty: every one can.

        Ranking (angle, cosine) orders pairs by label, so it needs two distinct labels; the contrastive
        and SimCSE terms on pairs need a positive pair; the classifier two classes. With none of them a
        loss is 0 at every step, or constant, and the model is saved as it started.
        """
        finite = labels[torch.isfinite(labels)]
        distinct = [f"{x:g}" for x in torch.unique(finite).tolist()]
        shown = ", ".join(distinct[:3]) + (", ..." if len(distinct) > 3 else "")
        out = {}
        for name, weight in self.weights.items():
            if not weight:
                continue
            if name in ("angle", "cosine", "softmax") and len(distinct) < 2:
                out[name] = f"every label is {shown or 'missing'}: no two labels to order"
            elif name == "contrastive" and not bool((finite != 0).any() if self.graded_labels == "int" else (finite >= self.contrastive_threshold).any()):
                rule = "non-zero" if self.graded_labels == "int" else f">= contrastive_threshold {self.contrastive_threshold}"
                out[name] = f"no positive pair (label {rule}); labels seen: {shown}"
            elif name == "simcse" and self.format == "pairs" and not bool((finite >= self.contrastive_threshold).any()):
                out[name] = f"no pair labelled >= contrastive_threshold {self.contrastive_threshold} to anchor on; labels seen: {shown}"
        return out

    def make_head(self, hidden_size: int) -> torch.nn.Module | None:
        """Trainable parameters the objective adds beside the encoder (SBERT's classifier), or None."""
        return SoftmaxHead(hidden_size) if self.weights.get("softmax") else None

    def components(
        self,
        embs: tuple[torch.Tensor, ...],
        labels: torch.Tensor,
        text_ids: torch.Tensor | None = None,
        head: torch.nn.Module | None = None,
    ) -> dict[str, torch.Tensor]:
        """Each weighted component's unweighted value.

        Args:
            embs: ``n_texts`` tensors of shape (B, H): (u, v) or (anchor, positive, negative).
            labels: (B,) pair labels in [0, 1], or NLI classes.
            text_ids: (B, n_texts) identity of each text (equal = identical text).
            head: the module from :meth:`make_head`.
        """
        if len(embs) != self.n_texts:
            raise ValueError(f"objective {self.name!r} on {self.format} expects {self.n_texts} texts per example, got {len(embs)}")
        if self.identical_texts == "filter":
            if text_ids is None:
                raise ValueError(f"objective {self.name!r}: identical_texts 'filter' needs the texts' ids")
            keep = filter_duplicates(text_ids)
            if not keep.all():
                embs, labels, text_ids = tuple(e[keep] for e in embs), labels[keep], text_ids[keep]
            if not keep.any():
                zero = 0.0 * sum(e.sum() for e in embs)  # keeps the graph (and DDP's gradient hooks) alive
                return {name: zero for name, weight in self.weights.items() if weight}
        flat_ids = None if text_ids is None else text_ids[:, :2].T.reshape(-1)  # (2B,) u texts, then v texts
        u, v = embs[0], embs[1]
        out: dict[str, torch.Tensor] = {}
        for name, weight in self.weights.items():
            if weight == 0:
                continue
            if name == "angle":
                out[name] = angle_loss(u, v, labels, tau=self.angle_tau)
            elif name == "cosine":
                out[name] = cosent_ranking_loss(F.cosine_similarity(u, v, dim=1), labels, tau=self.cosine_tau)
            elif name == "contrastive":
                out[name] = contrastive_loss(
                    u, v, labels, tau=self.contrastive_tau, text_ids=flat_ids,
                    threshold=self.contrastive_threshold, identical_texts=self.identical_texts,
                    graded_labels=self.graded_labels, reduction=self.contrastive_reduction,
                )
            elif name == "cosine_mse":
                out[name] = cosine_mse_loss(u, v, labels)
            elif name == "softmax":
                if head is None:
                    raise ValueError("the softmax component needs the objective's head (Objective.make_head)")
                out[name] = sbert_softmax_loss(u, v, labels, head)
            elif name == "simcse":
                if self.format == "triplets":
                    out[name] = simcse_loss(u, v, embs[2], tau=self.simcse_tau)
                else:
                    out[name] = simcse_loss(u, v, None, tau=self.simcse_tau, anchor_mask=labels >= self.contrastive_threshold)
            else:  # a component named in COMPONENTS (aoe/config/recipes.py) without its branch here: docs/objective.md
                raise ValueError(f"loss component {name!r} has no branch in Objective.components (aoe/losses/objectives.py)")
        return out

    def __call__(self, embs, labels, text_ids=None, head=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Total loss and its unweighted components."""
        parts = self.components(embs, labels, text_ids, head)
        total = sum(self.weights[k] * value for k, value in parts.items())
        return total, parts


def get_objective(name: str, overrides: dict | None = None, format: str | None = None) -> Objective:
    """The objective ``name`` on ``format`` (default: its preferred one), its recipe updated with ``overrides``."""
    spec = objective_spec(name, overrides)
    fmt = format or objective_formats(name, overrides)[0]
    by_format = spec.pop("by_format", None)
    if by_format is not None:
        if fmt not in by_format:
            raise ValueError(f"objective {name!r} has no recipe for {fmt!r} data; it has {list(by_format)}")
        spec["weights"] = by_format[fmt]
    return Objective(name=name, format=fmt, **spec)

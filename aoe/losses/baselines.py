"""Baseline objectives trained in the same harness: SBERT and supervised SimCSE."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["SoftmaxHead", "sbert_softmax_loss", "cosine_mse_loss", "simcse_loss"]


class SoftmaxHead(nn.Module):
    """SBERT's NLI classifier: a linear layer over [u; v; |u - v|] (Reimers & Gurevych 2019, §3)."""

    def __init__(self, hidden_size: int, num_labels: int = 3):
        super().__init__()
        self.linear = nn.Linear(3 * hidden_size, num_labels)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([u, v, (u - v).abs()], dim=1))  # (B, num_labels)


def sbert_softmax_loss(u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor, head: SoftmaxHead) -> torch.Tensor:
    """SBERT SoftmaxLoss: cross-entropy of ``head([u; v; |u - v|])`` against 3-way NLI labels.

    Args:
        u, v: (B, H) premise and hypothesis embeddings.
        labels: (B,) integer classes (0 entailment, 1 neutral, 2 contradiction).
        head: the classifier; trained with the encoder and discarded afterwards, as in SBERT.
    """
    return F.cross_entropy(head(u, v), labels.long())


def cosine_mse_loss(u: torch.Tensor, v: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """SBERT CosineSimilarityLoss (the regression objective for STS): mean (cos(u_i, v_i) - y_i)^2, y in [0, 1]."""
    return F.mse_loss(F.cosine_similarity(u, v, dim=1), labels.to(u.dtype))


def simcse_loss(
    anchors: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor | None = None,
    tau: float = 20.0,
    anchor_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Supervised SimCSE (Gao et al. 2021, Eq. 5): InfoNCE from each anchor to its positive.

        l_i = -log( e^{tau cos(h_i, h_i+)} / sum_j (e^{tau cos(h_i, h_j+)} + e^{tau cos(h_i, h_j-)}) )

    Candidates are all positives of the batch and, with triplets, all hard negatives
    (the contradictions). One direction only (anchor -> candidates), as SimCSE.

    Args:
        anchors, positives: (B, H).
        negatives: (B, H) hard negatives, or None for pair-only data (in-batch negatives only).
        tau: scale (20 = SimCSE's temperature 0.05).
        anchor_mask: (B,) bool, rows that act as anchors (on graded pair data, the similar
            pairs); other rows serve as in-batch negatives only. None: every row.
    """
    a = F.normalize(anchors, dim=1)
    cands = positives if negatives is None else torch.cat([positives, negatives], dim=0)
    logits = tau * a @ F.normalize(cands, dim=1).T  # (B, B) or (B, 2B)
    target = torch.arange(a.shape[0], device=a.device)
    losses = F.cross_entropy(logits, target, reduction="none")
    if anchor_mask is not None:
        if not anchor_mask.any():
            return 0.0 * logits.sum()
        losses = losses[anchor_mask]
    return losses.mean()

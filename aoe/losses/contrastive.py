"""In-batch contrastive objective: AoE L_cl (ACL 2024, Eq. 4) / AnglE L_ibn (arXiv, Eq. 2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["contrastive_targets", "contrastive_loss"]


def contrastive_targets(
    labels: torch.Tensor,
    text_ids: torch.Tensor | None = None,
    threshold: float = 0.5,
    detect_identical: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positive and candidate masks of the 2B x 2B in-batch similarity matrix.

    Rows and columns index the 2B texts ``[u_0, ..., u_{B-1}, v_0, ..., v_{B-1}]``;
    the partner of text r is text ``(r + B) mod 2B``.

    Positives of row r:
      * its partner, when the pair is similar (``labels[pair] >= threshold``);
      * with ``detect_identical``, every other text identical to row r's text
        or (for a similar pair) to its partner's text. Identical texts are never
        candidates for a negative: leaving a copy of the anchor in the
        denominator would push a text away from itself.

    Args:
        labels: (B,) pair labels.
        text_ids: (2B,) integer identity of each text (equal id = identical text),
            in the same order as the rows. Required when ``detect_identical``.
        threshold: label at or above which a pair is a positive pair.
        detect_identical: the identical-sentence detection; off reproduces the
            paper's "ibn w/o ISP detection" ablation (duplicates become negatives).

    Returns:
        ``(positive, candidate)``: bool (2B, 2B) masks. ``candidate`` excludes the
        diagonal and, with detection, identical non-positive texts never occur
        because identical texts are positives.
    """
    n_pairs = labels.shape[0]
    n = 2 * n_pairs
    device = labels.device
    rows = torch.arange(n, device=device)
    partner = (rows + n_pairs) % n  # (2B,)
    similar = (labels >= threshold).repeat(2)  # (2B,) pair label of each row
    positive = torch.zeros(n, n, dtype=torch.bool, device=device)
    positive[rows[similar], partner[similar]] = True
    if detect_identical:
        if text_ids is None:
            raise ValueError("identical-sentence detection needs text_ids")
        if text_ids.shape != (n,):
            raise ValueError(f"text_ids must have shape ({n},), got {tuple(text_ids.shape)}")
        same = text_ids[:, None] == text_ids[None, :]  # [r, k]: text_r == text_k
        same_as_partner = same[partner]  # [r, k]: text_partner(r) == text_k
        positive |= same | (same_as_partner & similar[:, None])
    eye = torch.eye(n, dtype=torch.bool, device=device)
    positive &= ~eye
    return positive, ~eye


def contrastive_loss(
    u: torch.Tensor,
    v: torch.Tensor,
    labels: torch.Tensor,
    tau: float = 20.0,
    *,
    text_ids: torch.Tensor | None = None,
    threshold: float = 0.5,
    detect_identical: bool = True,
) -> torch.Tensor:
    """Supervised in-batch contrastive loss over all 2B texts.

    With c_rk = tau * cos(x_r, x_k) over the 2B texts x = [u; v], P(r) the positives
    and C(r) = {k != r} the candidates of row r (see :func:`contrastive_targets`):

        L = 1/|R| sum_{r in R} 1/|P(r)| sum_{p in P(r)} -log( exp(c_rp) / sum_{k in C(r)} exp(c_rk) )

    where R are the rows with at least one positive: a text from a dissimilar pair
    anchors nothing and serves only as a negative for other rows. With one positive
    per row this is the official ``in_batch_negative_loss`` (categorical cross-entropy
    on the masked similarity matrix); with several (identical texts), the target
    distribution is uniform over them, as in supervised contrastive learning.

    Args:
        u, v: (B, D) embeddings of the two texts of each pair.
        labels: (B,) pair labels (higher = more similar).
        tau: scale (1 / temperature; 20 = temperature 0.05 of AoE Eq. 4).
        text_ids, threshold, detect_identical: see :func:`contrastive_targets`.

    Returns:
        Scalar loss; 0 (with a gradient path) when no row has a positive.
    """
    if u.shape != v.shape or u.dim() != 2 or labels.shape != (u.shape[0],):
        raise ValueError(
            f"expected u, v of shape (B, D) and labels (B,), got {tuple(u.shape)}, {tuple(v.shape)}, {tuple(labels.shape)}"
        )
    x = F.normalize(torch.cat([u, v], dim=0), dim=1)  # (2B, D)
    logits = tau * (x @ x.T)  # (2B, 2B)
    positive, candidate = contrastive_targets(labels, text_ids, threshold, detect_identical)
    logits = logits.masked_fill(~candidate, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    n_pos = positive.sum(dim=1)
    anchored = n_pos > 0
    if not anchored.any():
        return logits.new_zeros(()) + 0.0 * x.sum()
    # where(...) rather than multiplication: -inf * 0 on the diagonal would be NaN.
    pos_log_prob = torch.where(positive, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    return -(pos_log_prob[anchored] / n_pos[anchored]).mean()

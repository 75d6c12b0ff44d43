"""In-batch contrastive objective: AoE L_cl (ACL 2024, Eq. 4) / AnglE L_ibn (arXiv, Eq. 2).

The paper's equation fixes the loss; its targets and normalisation are what the official
code ran (``in_batch_negative_loss`` of angle-emb), with our earlier choices kept as named
switches (``graded_labels``, ``identical_texts``, ``contrastive_reduction`` in
:class:`aoe.config.recipes.LossSettings`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["GRADED_LABELS", "IDENTICAL_TEXTS", "REDUCTIONS", "SETTINGS", "check_setting", "contrastive_targets", "contrastive_loss",
           "filter_duplicates"]

GRADED_LABELS = ("int", "score")
IDENTICAL_TEXTS = ("filter", "positive", "detect", "ignore")
REDUCTIONS = ("all_rows", "anchored")
# each LossSettings key of this module and its values
SETTINGS = {"graded_labels": GRADED_LABELS, "identical_texts": IDENTICAL_TEXTS, "contrastive_reduction": REDUCTIONS}


def check_setting(key: str, value: str, where: str = "") -> None:
    """ValueError (prefixed by ``where``) unless ``value`` is one of the values of ``key`` in SETTINGS."""
    if value not in SETTINGS[key]:
        raise ValueError(f"{where}{key} must be one of {SETTINGS[key]}, got {value!r}")


def _interleaved(n_pairs: int, device) -> torch.Tensor:
    """Each row's index in the official zigzag order [u_0, v_0, u_1, v_1, ...] (ours is [u; v])."""
    pair = torch.arange(n_pairs, device=device)
    return torch.cat([2 * pair, 2 * pair + 1])


def contrastive_targets(
    labels: torch.Tensor,
    text_ids: torch.Tensor | None = None,
    threshold: float = 0.5,
    identical_texts: str = "detect",
    graded_labels: str = "score",
) -> torch.Tensor:
    """Target weights of the 2B x 2B in-batch similarity matrix.

    Rows and columns index the 2B texts ``[u_0, ..., u_{B-1}, v_0, ..., v_{B-1}]``;
    the partner of text r is text ``(r + B) mod 2B``.

    Pair targets, by ``graded_labels``:
      * "int" (official): the rule of angle-emb's ``make_target_matrix`` on integer
        labels y, with texts numbered i in the official zigzag order and partner
        ``i ^ 1``: column k is a target of row r when ``y_r != 0``, ``y_k != 0`` and
        ``i_k * y_k == i_partner(r) * y_r``. On binary labels that is the partner of a
        similar pair; on graded labels (STS-B 0-5) every pair scoring >= 1 and, by the
        index product, a few unrelated texts (``i_k * y_k`` collisions) as well.
      * "score" (ours): the partner, when ``labels[pair] >= threshold``.

    Identical texts, by ``identical_texts``:
      * "positive" (official 0.1.x-0.2.x ``similar_matrix``): every other text identical
        to row r's adds 1 to the target weight, whatever the labels (weights can be 2);
      * "detect" (ours): every other text identical to row r's text or, for a row with
        a pair target, to its partner's text is a target (weights stay 0/1);
      * "ignore" and "filter" (duplicates removed before, :func:`filter_duplicates`): none.

    Args:
        labels: (B,) pair labels (integers under "int").
        text_ids: (2B,) integer identity of each text (equal id = equal token ids), in
            row order; needed by "positive" and "detect".

    Returns:
        (2B, 2B) float target weights, zero on the diagonal.
    """
    check_setting("identical_texts", identical_texts)
    check_setting("graded_labels", graded_labels)
    n_pairs = labels.shape[0]
    n = 2 * n_pairs
    device = labels.device
    rows = torch.arange(n, device=device)
    partner = (rows + n_pairs) % n  # (2B,)
    if graded_labels == "int":
        y = labels.int().repeat(2)  # (2B,) label of each row's pair; .int() truncates, as the official y_true.int()
        idx = _interleaved(n_pairs, device)
        col = torch.where(y != 0, idx * y, torch.full_like(y, -2))  # the official idxs_1
        row = torch.where(y != 0, (idx ^ 1) * y, torch.full_like(y, -1))  # the official idxs_2
        target = (row[:, None] == col[None, :]).to(torch.float32)
    else:
        target = torch.zeros(n, n, device=device)
        similar = (labels >= threshold).repeat(2)
        target[rows[similar], partner[similar]] = 1.0
    if identical_texts in ("positive", "detect"):
        if text_ids is None:
            raise ValueError(f"identical_texts {identical_texts!r} needs text_ids")
        if text_ids.shape != (n,):
            raise ValueError(f"text_ids must have shape ({n},), got {tuple(text_ids.shape)}")
        same = (text_ids[:, None] == text_ids[None, :]) & ~torch.eye(n, dtype=torch.bool, device=device)
        if identical_texts == "positive":
            target = target + same.to(target.dtype)
        else:
            has_pair_target = target[rows, partner] > 0
            same_as_partner = text_ids[partner][:, None] == text_ids[None, :]
            target = ((target > 0) | same | (same_as_partner & has_pair_target[:, None])).to(target.dtype)
    target.fill_diagonal_(0.0)
    return target


def filter_duplicates(text_ids: torch.Tensor) -> torch.Tensor:
    """Which examples official angle-emb >= 0.3.8 (347bbb6) keeps under ``filter_duplicate=True``.

    Its ``AngleDataCollator`` walks the examples in order with one set of texts seen so
    far: an example is dropped when any of its texts is already in the set. Texts enter
    the set as they are read, so a dropped example's earlier texts still count for the
    examples after it; reading stops at an example's first repeated text before its last.

    Args:
        text_ids: (B, K) identity of each example's K texts.

    Returns:
        (B,) bool, True for the examples kept.
    """
    seen: set[int] = set()
    keep = []
    for texts in text_ids.tolist():
        duplicate = False
        for t in texts[:-1]:
            if t in seen:
                duplicate = True
                break
            seen.add(t)
        if not duplicate:
            duplicate = texts[-1] in seen
            seen.add(texts[-1])
        keep.append(not duplicate)
    return torch.tensor(keep, dtype=torch.bool, device=text_ids.device)


def contrastive_loss(
    u: torch.Tensor,
    v: torch.Tensor,
    labels: torch.Tensor,
    tau: float = 20.0,
    *,
    text_ids: torch.Tensor | None = None,
    threshold: float = 0.5,
    identical_texts: str = "detect",
    graded_labels: str = "score",
    reduction: str = "all_rows",
) -> torch.Tensor:
    """Supervised in-batch contrastive loss over all 2B texts.

    With c_rk = tau * cos(x_r, x_k) over the 2B texts x = [u; v], t_rk the target weights
    of :func:`contrastive_targets` and the candidates of row r every text but itself,
    the cross-entropy of row r is

        l_r = - sum_k t_rk log( exp(c_rk) / sum_{k' != r} exp(c_rk') )

    ``reduction`` "all_rows" (the official ``categorical_crossentropy(...).mean()``):
    ``L = 1/2B sum_r l_r``, rows without a target counting 0. So the loss shrinks with the
    share of dissimilar pairs in the batch (on NLI, about half). "anchored" (ours before):
    ``L = mean over rows with a target of l_r / sum_k t_rk``.

    Args:
        u, v: (B, D) embeddings of the two texts of each pair.
        labels: (B,) pair labels (higher = more similar).
        tau: scale (1 / temperature; 20 = temperature 0.05 of AoE Eq. 4).
        text_ids, threshold, identical_texts, graded_labels: see :func:`contrastive_targets`.

    Returns:
        Scalar loss; 0 (with a gradient path) when no row has a target.
    """
    if u.shape != v.shape or u.dim() != 2 or labels.shape != (u.shape[0],):
        raise ValueError(
            f"expected u, v of shape (B, D) and labels (B,), got {tuple(u.shape)}, {tuple(v.shape)}, {tuple(labels.shape)}"
        )
    check_setting("contrastive_reduction", reduction)
    x = F.normalize(torch.cat([u, v], dim=0), dim=1)  # (2B, D)
    n = x.shape[0]
    logits = (tau * (x @ x.T)).masked_fill(torch.eye(n, dtype=torch.bool, device=x.device), float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    target = contrastive_targets(labels, text_ids, threshold, identical_texts, graded_labels).to(log_prob.dtype)
    # where(...) rather than multiplication: -inf * 0 on the diagonal would be NaN.
    row_loss = -torch.where(target > 0, target * log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    if reduction == "all_rows":
        return row_loss.mean()
    weight = target.sum(dim=1)
    anchored = weight > 0
    if not anchored.any():
        return logits.new_zeros(()) + 0.0 * x.sum()
    return (row_loss[anchored] / weight[anchored]).mean()

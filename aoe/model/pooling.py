"""Pooling: (hidden states, attention mask) -> one vector per text.

The masked poolings (:data:`POOLINGS`), and the official angle-emb arithmetic over padded batches
(:data:`OFFICIAL_POOLINGS`): evaluation variants of any model, and the training pooling of the
pooling-ablation cells whose papers' numbers it produced. Their names, import-light for planning:
:mod:`aoe.model.pooling_names`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from aoe.model.pooling_names import POOLER_POOLINGS

__all__ = [
    "POOLINGS",
    "OFFICIAL_POOLINGS",
    "OFFICIAL_POOLING_SOURCES",
    "EVAL_POOLINGS",
    "BATCH_DEPENDENT_POOLINGS",
    "NEEDS_FIRST_LAYER",
    "NEEDS_POOLER",
    "OfficialPooling",
    "pool",
]


def _cls(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return last[:, 0]


def _avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(last.dtype)  # (B, T, 1)
    return (last * m).sum(1) / m.sum(1).clamp(min=1.0)


def _max(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # padding must never win the max: -inf, not 0 (hidden states can be all negative)
    return last.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(dim=1).values


def _last(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # last non-padding token, for right- or left-padded batches alike
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    idx = (positions * mask.long()).argmax(dim=1)  # (B,)
    return last[torch.arange(last.shape[0], device=last.device), idx]


def _cls_avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (_cls(last, mask) + _avg(last, mask)) / 2


def _cls_last_avg(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # mean of the first ([CLS]) and the last non-padding token of the top layer
    return (_cls(last, mask) + _last(last, mask)) / 2


def _first_last_avg(last: torch.Tensor, mask: torch.Tensor, first: torch.Tensor | None = None) -> torch.Tensor:
    # SimCSE's "avg_first_last": mask-aware mean of (first layer + top layer) / 2, where the
    # first layer is hidden_states[1], the output of the first transformer block
    if first is None:
        raise ValueError("first_last_avg pooling needs the first layer's hidden states")
    return _avg((first + last) / 2, mask)


def _cls_mlp(last: torch.Tensor, mask: torch.Tensor, pooler_output: torch.Tensor | None = None) -> torch.Tensor:
    # SimCSE's `cls` pooler: an MLP (dense + tanh) over [CLS] (princeton-nlp/SimCSE simcse/models.py:19-33,
    # 155-161), kept at test time for supervised SimCSE (models.py:262-263, mlp_only_train off; README.md:197).
    # Its released checkpoints store that MLP as BERT's own pooler (simcse_to_huggingface.py:21-23), whose
    # output is tanh(W h_cls + b): the backbone computes it, this returns it.
    if pooler_output is None:
        raise ValueError("cls_mlp pooling needs the backbone's pooler output (BERT's dense + tanh over [CLS]); "
                         "this model returned none (a decoder, or a BERT loaded without its pooling layer)")
    return pooler_output


POOLINGS: dict[str, Callable[..., torch.Tensor]] = {
    "cls": _cls,
    "avg": _avg,
    "max": _max,
    "last": _last,
    "cls_avg": _cls_avg,
    "cls_last_avg": _cls_last_avg,
    "first_last_avg": _first_last_avg,
    "cls_mlp": _cls_mlp,
}
NEEDS_FIRST_LAYER = frozenset({"first_last_avg"})
NEEDS_POOLER = frozenset(POOLER_POOLINGS)


# ---------------------------------------------------------------------------
# The official angle-emb arithmetic over padded batches.
#
# The official releases pool a batch padded to its longest text without (0.1.1) or with a
# batch-wide (0.4.x) use of the mask, so an official embedding depends on the texts it was
# batched with. These replicas reproduce the numbers the papers' evaluations computed, given
# the same batches (aoe.model.encoder.Encoder.encode_batches, aoe.evaluate.senteval_batches). They are kept
# out of POOLINGS on purpose: a backbone, a released checkpoint and every cell but the pooling
# ablations' use a batch-independent, masked pooling. The pooling-ablation cells (AnglE Table 3,
# AoE Table 4's max) train with the official one because the papers' numbers came from it: one padded
# pass per micro-batch (length_buckets 1, aoe.plan.cell_checks.check_padded_pooling_buckets), scored in the
# official evaluation's batches (aoe.evaluate.run.scoring_pooling); they have no sentence-transformers export.
# 0.1.1's ``cls`` and 0.4.x's ``cls`` and ``last`` (attention_mask.sum - 1 under right
# padding, -1 under left) already equal the masked ``cls`` / ``last``: no replica needed.


def _avg_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.mean(last, dim=1)


def _cls_avg_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + torch.mean(last, dim=1)) / 2.0


def _max_padded(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.max(last, dim=1).values


def _last_position(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return last[:, -1]


def _avg_batchsum(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # the denominator is a scalar, every real token of the batch: each row's mean is scaled
    # by (its own length / the batch's total), so a row's vector depends on its neighbours
    return torch.sum(last * mask[:, :, None], dim=1) / torch.sum(mask)


def _cls_avg_batchsum(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + _avg_batchsum(last, mask)) / 2.0


def _max_zeroed(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # padding becomes 0, not -inf: it wins wherever a padded row's real values are all negative
    return torch.max(last * mask[:, :, None], dim=1).values


def _cls_max_zeroed(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (last[:, 0] + _max_zeroed(last, mask)) / 2.0


OFFICIAL_POOLINGS: dict[str, Callable[..., torch.Tensor]] = {
    "cls_avg_padded": _cls_avg_padded,
    "avg_padded": _avg_padded,
    "max_padded": _max_padded,
    "last_position": _last_position,
    "cls_avg_batchsum": _cls_avg_batchsum,
    "avg_batchsum": _avg_batchsum,
    "max_zeroed": _max_zeroed,
    "cls_max_zeroed": _cls_max_zeroed,
}


@dataclass(frozen=True)
class OfficialPooling:
    """Where an official pooling's arithmetic comes from, and the masked pooling it stands in for."""

    strategy: str  # the official pooling_strategy value
    release: str  # angle-emb version on PyPI
    commit: str  # SeanLee97/AnglE commit of that release
    file: str
    function: str
    masked: str | None  # the POOLINGS key it approximates (None: the official strategy has no masked form here)
    differs: str  # what the official arithmetic does that the masked pooling does not

    def source(self) -> str:
        return f"angle-emb {self.release} ({self.commit} {self.file} {self.function}, pooling_strategy={self.strategy!r})"

    def describe(self) -> str:
        """One line: ``official arithmetic of <masked> (<source>): <what differs>``."""
        return f"official arithmetic of {self.masked or self.strategy} ({self.source()}): {self.differs}"


_POOLER_011 = {"release": "0.1.1", "commit": "fcb6223", "file": "angle_emb/angle.py", "function": "Pooler.__call__"}
_GET_POOLING_04 = {"release": "0.4.6", "commit": "1c5515b", "file": "angle_emb/angle.py", "function": "get_pooling"}
OFFICIAL_POOLING_SOURCES: dict[str, OfficialPooling] = {
    "cls_avg_padded": OfficialPooling("cls_avg", **_POOLER_011, masked="cls_avg",
                                      differs="the mean runs over every position, padding included"),
    "avg_padded": OfficialPooling("avg", **_POOLER_011, masked="avg",
                                  differs="the mean runs over every position, padding included"),
    "max_padded": OfficialPooling("max", **_POOLER_011, masked="max",
                                  differs="the max runs over every position, padding's hidden states included"),
    "last_position": OfficialPooling("last", **_POOLER_011, masked="last",
                                     differs="the batch's last position, padding or not"),
    "cls_avg_batchsum": OfficialPooling("cls_avg", **_GET_POOLING_04, masked="cls_avg",
                                        differs="the masked sum is divided by the whole batch's token count"),
    "avg_batchsum": OfficialPooling("avg", **_GET_POOLING_04, masked="avg",
                                    differs="the masked sum is divided by the whole batch's token count"),
    "max_zeroed": OfficialPooling("max", **_GET_POOLING_04, masked="max",
                                  differs="padding is zeroed, not excluded, so 0 can win the max"),
    "cls_max_zeroed": OfficialPooling("cls_max", **_GET_POOLING_04, masked=None,
                                      differs="(cls + max) / 2 with padding zeroed, not excluded, so 0 can win the max"),
}
# every official replica depends on the batch: its width (0.1.1), its token count or whether it is padded (0.4.x)
BATCH_DEPENDENT_POOLINGS = frozenset(OFFICIAL_POOLINGS)
# what pool(), aoe.model.encoder.embed() and aoe.model.encoder.Encoder(eval_pooling=...) accept
EVAL_POOLINGS: dict[str, Callable[..., torch.Tensor]] = {**POOLINGS, **OFFICIAL_POOLINGS}


def pool(
    name: str, last_hidden: torch.Tensor, attention_mask: torch.Tensor, first_hidden: torch.Tensor | None = None,
    pooler_output: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool (B, T, H) hidden states into (B, H) with strategy ``name`` (a key of :data:`EVAL_POOLINGS`).

    ``first_hidden`` (the first transformer block's output) is used by
    ``first_last_avg`` only, ``pooler_output`` (the backbone's pooler over [CLS]) by ``cls_mlp`` only;
    :func:`aoe.model.encoder.embed` passes them when needed. The
    :data:`OFFICIAL_POOLINGS` replicas read the batch as given, padding included.
    """
    try:
        fn = EVAL_POOLINGS[name]
    except KeyError:
        raise ValueError(f"unknown pooling {name!r}; known: {sorted(EVAL_POOLINGS)}") from None
    if name in NEEDS_FIRST_LAYER:
        return fn(last_hidden, attention_mask, first_hidden)
    if name in NEEDS_POOLER:
        return fn(last_hidden, attention_mask, pooler_output)
    return fn(last_hidden, attention_mask)

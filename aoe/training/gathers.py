"""What the processes of a multi-GPU run share: the embeddings of the others (with or without their graph, SimCSE's
way), the loss scale that makes SimCSE's gradient, and a flag any process raised (a signal)."""

from __future__ import annotations

import torch

from aoe.config.hparams import TrainSettings


__all__ = ["agreed", "detached_loss_scale", "gather_detached", "gather_with_grad", "splice_local"]


def gather_with_grad(x: torch.Tensor, num_processes: int) -> torch.Tensor:
    if num_processes == 1:
        return x
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(x.contiguous()), dim=0)


def splice_local(parts: list[torch.Tensor], local: torch.Tensor, rank: int) -> torch.Tensor:
    """The gathered slices in process order with this process's own ``local`` in place of its copy: the
    others carry no gradient, ``local`` its graph (SimCSE simcse/models.py:186-192, ``z1_list[rank] = z1``)."""
    if not 0 <= rank < len(parts):
        raise ValueError(f"rank {rank} outside the {len(parts)} gathered slices")
    return torch.cat([local if i == rank else p.detach() for i, p in enumerate(parts)], dim=0)


def gather_detached(x: torch.Tensor, num_processes: int, rank: int) -> torch.Tensor:
    """SimCSE's all-gather (simcse/models.py:170-192): torch.distributed.all_gather, which records no
    gradient, then this process's own slice spliced back with its graph (:func:`splice_local`)."""
    if num_processes == 1:
        return x
    import torch.distributed as dist

    parts = [torch.zeros_like(x) for _ in range(num_processes)]
    dist.all_gather(parts, x.contiguous())
    return splice_local(parts, x, rank)


def detached_loss_scale(cfg: TrainSettings, num_processes: int) -> float:
    """The factor on the loss a process back-propagates under ``global_detached`` with ``detached_processes``
    P: its gradient reaches its own texts only and DDP averages the n processes, so the update is the
    whole loss's gradient / n; times n / P it is SimCSE's gradient / P (1 where n = P, or for any other pool)."""
    if cfg.in_batch_pool != "global_detached" or not cfg.detached_processes:
        return 1.0
    return num_processes / cfg.detached_processes


def agreed(accelerator, flag: bool) -> bool:
    """``flag`` on any process (each got its own SIGTERM, perhaps a step apart): every process stops at the same step."""
    if accelerator.num_processes == 1:
        return flag
    return bool(accelerator.reduce(torch.tensor([float(flag)], device=accelerator.device), "sum").item())

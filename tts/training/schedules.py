"""Learning-rate schedules (Hydra builds them as partials taking the optimizer)."""

from __future__ import annotations

import torch


def warmup_then_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, decay_start: int, decay_rate: float, decay_every: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up to the base lr, flat, then exponential decay by `decay_rate` per `decay_every` steps."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if step < decay_start:
            return 1.0
        return decay_rate ** ((step - decay_start) / decay_every)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

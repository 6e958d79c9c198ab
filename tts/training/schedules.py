"""Learning-rate schedules (Hydra builds them as partials taking the optimizer)."""

from __future__ import annotations

import torch


def warmup_then_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, decay_start: int, decay_rate: float, decay_every: int,
    offset: int = 0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up to the base lr, flat, then exponential decay by `decay_rate` per `decay_every` steps.

    `offset`: training steps already behind the weights (a run warm-started from an earlier one's weights,
    `init_from`, whose optimizer state is gone).  The decay then reads the total step, offset + step, so a
    chain of warm starts follows one schedule; the warm-up still runs over this run's first `warmup_steps`,
    ramping to the decayed rate, because Adam's moments start from zero again.
    """

    def decay(total: int) -> float:
        return 1.0 if total < decay_start else decay_rate ** ((total - decay_start) / decay_every)

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup_steps) * decay(offset + step)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

"""Decoder pre-net: a small MLP with dropout that stays on at inference (Tacotron 2, section 2.3).

Why dropout at inference: the pre-net bottleneck with dropout is the only source of variation in the
autoregressive feedback loop; Tacotron 2 keeps it on when synthesising because the decoder was trained
to read *noisy* summaries of its previous frame, and turning it off shifts the input distribution
(and tends to produce over-smoothed or stuck output).  `dropout_at_inference=False` makes eval mode
deterministic (tests, reproducible batched-vs-single comparisons).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Prenet(nn.Module):
    """x [..., in_dim] -> [..., dim]: `n_layers` x (Linear, ReLU, dropout)."""

    def __init__(
        self,
        in_dim: int,
        dim: int = 256,
        n_layers: int = 2,
        dropout: float = 0.5,
        dropout_at_inference: bool = True,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"prenet needs at least one layer, got {n_layers}")
        self.layers = nn.ModuleList(
            nn.Linear(in_dim if i == 0 else dim, dim, bias=False) for i in range(n_layers)
        )
        self.dropout = dropout
        self.dropout_at_inference = dropout_at_inference
        self.out_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Dropout is applied whenever training, and also in eval mode unless disabled explicitly.
        active = self.training or self.dropout_at_inference
        for layer in self.layers:
            x = F.dropout(F.relu(layer(x)), p=self.dropout, training=active)
        return x

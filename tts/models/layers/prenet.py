"""Decoder pre-net: a small MLP with dropout that stays on at inference (Tacotron 2, section 2.3).

Why dropout at inference: the pre-net bottleneck with dropout is the only source of variation in the
autoregressive feedback loop; Tacotron 2 keeps it on when synthesising because the decoder was trained
to read *noisy* summaries of its previous frame, and turning it off shifts the input distribution
(and tends to produce over-smoothed or stuck output).  `dropout_at_inference=False` makes eval mode
deterministic (tests, reproducible batched-vs-single comparisons).

Seeded items: `forward(x, generators)` draws item b's dropout masks from its own torch.Generator instead of
torch's global RNG, so that an item's noise does not depend on what else is in its batch (a batched decode
then equals each item alone at the same seed).  The masks of one position (all layers) are drawn together,
position after position, so that k positions at once draw what k calls of one position draw.
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def forward(self, x: torch.Tensor, generators: Sequence[torch.Generator] | None = None) -> torch.Tensor:
        """x [B, ..., in_dim]; generators: one per item (len B), or None for torch's global RNG."""
        # Dropout is applied whenever training, and also in eval mode unless disabled explicitly.
        active = (self.training or self.dropout_at_inference) and self.dropout > 0.0
        keep = self._item_masks(x, generators) if active and generators is not None else None
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x))
            if keep is not None:
                x = x * keep[..., i, :] / (1.0 - self.dropout)
            elif active:
                x = F.dropout(x, p=self.dropout, training=True)
        return x

    def skip(self, generators: Sequence[torch.Generator], positions: int, device: torch.device | str = "cpu") -> None:
        """Advance each item's generator past `positions` positions' masks, exactly as drawing them would
        (speculative decoding rewinds to a round's start and keeps only the positions it emitted)."""
        for g in generators:
            torch.rand((positions, len(self.layers), self.out_dim), generator=g, device=device)

    def _item_masks(self, x: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
        """-> keep [B, ..., n_layers, dim] (x's dtype, 0/1): item b's from generators[b], position-major."""
        if len(generators) != x.shape[0]:
            raise ValueError(f"{len(generators)} generators for a batch of {x.shape[0]}")
        shape = (*x.shape[1:-1], len(self.layers), self.out_dim)
        u = torch.stack([torch.rand(shape, generator=g, device=x.device) for g in generators])
        return (u >= self.dropout).to(x.dtype)

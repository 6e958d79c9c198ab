"""Location-sensitive attention (Chorowski et al. 2015, as used by Tacotron 2).

energy[b, l] = v^T tanh(W q_b + V m_{b,l} + U f_{b,l}),   f = conv([previous weights, cumulative weights])

The memory term V m is the same at every decoder step, so it is computed once per utterance
(`process_memory`) and passed back in; a decoder step then costs O(L) instead of re-projecting the
encoder output.  The location features let the attention know where it was and how much of the input it
has already consumed, which is what keeps it moving forward monotonically.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class AttentionOutput:
    context: torch.Tensor  # [B, E] weighted sum of the memory
    weights: torch.Tensor  # [B, L] attention distribution (0 on masked positions)


class LocationSensitiveAttention(nn.Module):
    def __init__(
        self,
        query_dim: int,
        memory_dim: int,
        attention_dim: int = 128,
        location_filters: int = 32,
        location_kernel_size: int = 31,
    ) -> None:
        super().__init__()
        if location_kernel_size % 2 != 1:
            raise ValueError(f"location_kernel_size must be odd, got {location_kernel_size}")
        self.query_layer = nn.Linear(query_dim, attention_dim, bias=False)
        self.memory_layer = nn.Linear(memory_dim, attention_dim, bias=False)
        self.location_conv = nn.Conv1d(
            2, location_filters, location_kernel_size, padding=location_kernel_size // 2, bias=False
        )
        self.location_layer = nn.Linear(location_filters, attention_dim, bias=False)
        # No bias on v: softmax is shift-invariant, so a bias would receive no gradient.
        self.v = nn.Linear(attention_dim, 1, bias=False)

    def process_memory(self, memory: torch.Tensor) -> torch.Tensor:
        """memory [B, L, E] -> processed memory [B, L, A]; compute once per utterance."""
        return self.memory_layer(memory)

    def forward(
        self,
        query: torch.Tensor,
        memory: torch.Tensor,
        processed_memory: torch.Tensor,
        previous_weights: torch.Tensor,
        cumulative_weights: torch.Tensor,
        mask: torch.Tensor,
    ) -> AttentionOutput:
        """query [B, Q], memory [B, L, E], processed_memory [B, L, A], previous/cumulative weights [B, L],
        mask [B, L] bool (True on real tokens)."""
        location = torch.stack([previous_weights, cumulative_weights], dim=1)  # [B, 2, L]
        location = self.location_layer(self.location_conv(location).transpose(1, 2))  # [B, L, A]
        query = self.query_layer(query).unsqueeze(1)  # [B, 1, A]
        energies = self.v(torch.tanh(query + processed_memory + location)).squeeze(-1)  # [B, L]
        # -inf gives exactly zero weight on padding, so a padded item attends exactly as it would alone.
        energies = energies.masked_fill(~mask, float("-inf"))
        weights = F.softmax(energies, dim=-1)  # [B, L]
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)  # [B, E]
        return AttentionOutput(context=context, weights=weights)

"""The padded training batch every acoustic model consumes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch


@dataclass
class Batch:
    """A padded batch, sorted by nothing in particular (models must use the lengths).

    Shapes: B items, L = max token length, T = max mel frames, M = n_mels.
    Padding: tokens with 0 (the pad symbol), mels with the log floor of the mel config (silence),
    pitch/energy/durations with 0.
    """

    ids: list[str]
    texts: list[str]
    tokens: torch.Tensor  # [B, L] long
    token_lengths: torch.Tensor  # [B] long
    mels: torch.Tensor  # [B, M, T] float, raw log-mel
    mel_lengths: torch.Tensor  # [B] long
    pitch: torch.Tensor | None = None  # [B, T] Hz, 0 where unvoiced/padded
    energy: torch.Tensor | None = None  # [B, T] frame energy (L2 norm of the STFT magnitude)
    durations: torch.Tensor | None = None  # [B, L] long frames per token; sums to mel_lengths

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device | str) -> "Batch":
        moved = {
            f.name: (v.to(device) if isinstance(v, torch.Tensor) else v)
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }
        return Batch(**moved)

    def token_mask(self) -> torch.Tensor:
        """[B, L] bool, True on real tokens."""
        return lengths_to_mask(self.token_lengths, self.tokens.shape[1])

    def mel_mask(self) -> torch.Tensor:
        """[B, T] bool, True on real frames."""
        return lengths_to_mask(self.mel_lengths, self.mels.shape[2])


def lengths_to_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """lengths [B] -> mask [B, max_len], True where position < length."""
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]

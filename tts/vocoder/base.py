"""The one vocoder interface shared by both acoustic paradigms."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tts.audio import MelConfig


def unit_log_mel(mel: torch.Tensor, mel_config: MelConfig) -> torch.Tensor:
    """Raw log-mel [B, M, T] in [log_floor, 0] -> [-1, 1] (float32), the frame-rate vocoders' network input.
    The scale is derived from the mel config, not learned: `unit_log_scale` maps any natural-log magnitude
    (e.g. an STFT's) onto the same scale."""
    return mel.float() / unit_log_scale(mel_config) + 1.0


def unit_log_scale(mel_config: MelConfig) -> float:
    """Half the log-mel range: log-values divided by it span [-2, 0] over [log_floor, 0]."""
    return -mel_config.log_floor / 2


@dataclass
class WaveOutput:
    wave: torch.Tensor  # [B, N] float in -1..1, zero after each item's length
    lengths: torch.Tensor  # [B] samples = mel_lengths * hop_length


class Vocoder(nn.Module):
    """(mel [B, n_mels, T] raw log-mel, mel_lengths [B]) -> WaveOutput.

    Subclasses set `mel_config` (what mels they accept) and implement `_generate(mel) -> [B, N]`.
    """

    def __init__(self, mel_config: MelConfig) -> None:
        super().__init__()
        self.mel_config = mel_config

    @property
    def sample_rate(self) -> int:
        return self.mel_config.sample_rate

    def check_mel_config(self, acoustic: MelConfig, what: str = "acoustic model") -> None:
        acoustic.check_compatible(self.mel_config, what, f"vocoder {type(self).__name__}")

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @torch.inference_mode()
    def forward(self, mel: torch.Tensor, mel_lengths: torch.Tensor | None = None) -> WaveOutput:
        """Each item is vocoded over its own length, alone: an item's audio does not depend on the batch
        it came in (padding would otherwise reach its last frames through convolutions, Griffin-Lim's
        shared iterations, or a filter's context), so seeded synthesis repeats whatever the batching."""
        if mel.dim() != 3 or mel.shape[1] != self.mel_config.n_mels:
            raise ValueError(f"expected mel [B, {self.mel_config.n_mels}, T], got {tuple(mel.shape)}")
        b, _, t = mel.shape
        if mel_lengths is None:
            mel_lengths = torch.full((b,), t, dtype=torch.long, device=mel.device)
        n = self.mel_config.n_samples(t)
        wave = mel.new_zeros(b, n, dtype=torch.float32)
        for i in range(b):
            frames = int(mel_lengths[i])
            if frames <= 0:
                continue
            item = self._generate(mel[i : i + 1, :, :frames])[0]  # [>= frames * hop]
            m = self.mel_config.n_samples(frames)
            item = item[:m] if item.shape[0] >= m else nn.functional.pad(item, (0, m - item.shape[0]))
            wave[i, :m] = item.float()
        return WaveOutput(wave=wave.clamp(-1, 1), lengths=mel_lengths * self.mel_config.hop_length)

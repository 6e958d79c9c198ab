"""Waveform losses shared by the vocoder trainers (no SpeechBrain import: the source-filter trainer
runs where SpeechBrain is not installed)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class MultiResolutionSTFTLoss(nn.Module):
    """Parallel WaveGAN's auxiliary loss (Yamamoto et al. 2020, eq. 1-4): at each (n_fft, hop, win)
    resolution, spectral convergence ||Y| - |Y_hat||_F / ||Y||_F plus L1 of log magnitudes, averaged
    over resolutions.  Waves [B, 1, N] -> scalar.

    Written here rather than taken from SpeechBrain: its `STFTLoss` calls `torch.stft` without
    `return_complex` (an error in torch 2.x) and without a window (rectangular).  Several resolutions
    constrain the fine time structure that one 80-band mel leaves free, which is what a generator
    trained without the discriminators (the warm-up) lacks most.
    """

    def __init__(
        self,
        fft_sizes: tuple[int, ...] = (1024, 2048, 512),
        hop_sizes: tuple[int, ...] = (120, 240, 50),
        win_lengths: tuple[int, ...] = (600, 1200, 240),
        log_floor: float = 1e-7,
    ) -> None:
        super().__init__()
        self.log_floor = log_floor  # magnitudes are clamped here before the log (silence)
        if not len(fft_sizes) == len(hop_sizes) == len(win_lengths):
            raise ValueError("fft_sizes, hop_sizes and win_lengths must have the same length")
        self.resolutions = list(zip(fft_sizes, hop_sizes, win_lengths))
        for i, win in enumerate(win_lengths):  # by position: two resolutions may share an n_fft
            self.register_buffer(f"window_{i}", torch.hann_window(win), persistent=False)

    def _magnitude(self, x: torch.Tensor, i: int) -> torch.Tensor:
        n_fft, hop, win = self.resolutions[i]
        spec = torch.stft(x, n_fft, hop, win, window=getattr(self, f"window_{i}"), return_complex=True)
        return spec.abs().clamp(min=self.log_floor)  # [B, n_fft/2+1, frames]; clamp: log of silence

    def forward(self, y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=y.device.type, enabled=False):
            y_hat, y = y_hat[:, 0].float(), y[:, 0].float()  # [B, N]
            total = y.new_zeros(())
            for i in range(len(self.resolutions)):
                mag_hat, mag = self._magnitude(y_hat, i), self._magnitude(y, i)
                convergence = torch.linalg.norm(mag - mag_hat) / torch.linalg.norm(mag)
                log_magnitude = nn.functional.l1_loss(mag_hat.log(), mag.log())
                total = total + convergence + log_magnitude
            return total / len(self.resolutions)


def anti_wrapped(x: torch.Tensor) -> torch.Tensor:
    """|x - 2 pi round(x / 2 pi)|: the distance of a phase difference to the nearest multiple of 2 pi, so that
    two angles one turn apart count as equal (Ai & Ling 2023, the anti-wrapping function: even, 2 pi-periodic,
    increasing on [0, pi])."""
    return (x - 2 * torch.pi * torch.round(x / (2 * torch.pi))).abs()


@dataclass
class PhaseLosses:
    """Anti-wrapped phase errors (APNet / neural speech phase prediction, Ai & Ling 2023), each a scalar
    mean over bins and frames: the phase itself, its derivative along frequency (group delay) and along time
    (instantaneous angular frequency).  A magnitude loss leaves the phase free; these pin it to the recording's."""

    instantaneous: torch.Tensor
    group_delay: torch.Tensor
    angular_frequency: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        return self.instantaneous + self.group_delay + self.angular_frequency


def phase_losses(phase_hat: torch.Tensor, phase: torch.Tensor) -> PhaseLosses:
    """Predicted and reference phases [B, F, T] (radians, any wrapping) -> PhaseLosses."""
    if phase_hat.shape != phase.shape:
        raise ValueError(f"phase shapes differ: {tuple(phase_hat.shape)} vs {tuple(phase.shape)}")
    error = phase_hat.float() - phase.float()
    return PhaseLosses(
        instantaneous=anti_wrapped(error).mean(),
        group_delay=anti_wrapped(torch.diff(error, dim=1)).mean(),  # diff of the errors = error of the diffs
        angular_frequency=anti_wrapped(torch.diff(error, dim=2)).mean(),
    )

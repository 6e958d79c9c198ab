"""Light discriminators for an optional adversarial stage of the source-filter vocoder.

HiFi-GAN's multi-period + multi-scale pair has ~70 M parameters and is ~96 % of a GAN step's CPU time
(conf/train_vocoder.yaml).  Here, as in UnivNet (Jang et al. 2021), a multi-resolution *spectrogram*
discriminator judges log-magnitude STFTs at three resolutions, and a narrow multi-period discriminator
(HiFi-GAN's periods 2, 3, 5, 7, 11 at a fraction of its channels) judges periodic waveform structure:
~1.3 M parameters in all.  Losses are least-squares (LSGAN, as HiFi-GAN) plus feature matching.

Each sub-discriminator maps a wave [B, N] to (score map, [feature maps]); `forward` returns lists over
sub-discriminators.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm


@dataclass
class Judgement:
    scores: list[torch.Tensor]  # one score map per sub-discriminator
    features: list[list[torch.Tensor]]  # its intermediate activations (feature matching)


def judge(convs: nn.ModuleList, out: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run a sub-discriminator's conv stack (leaky ReLU after each) -> (score map, every activation)."""
    features = []
    for conv in convs:
        x = nn.functional.leaky_relu(conv(x), 0.1)
        features.append(x)
    return out(x), features


class SpectrogramDiscriminator(nn.Module):
    """log |STFT| [B, 1, F, T] -> 2-D convs (strided along frequency)."""

    def __init__(self, n_fft: int, hop: int, channels: int) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        c = channels
        self.convs = nn.ModuleList([
            weight_norm(nn.Conv2d(1, c, (9, 3), padding=(4, 1))),
            weight_norm(nn.Conv2d(c, c, (9, 3), stride=(2, 1), padding=(4, 1))),
            weight_norm(nn.Conv2d(c, c, (9, 3), stride=(2, 1), padding=(4, 1))),
            weight_norm(nn.Conv2d(c, c, (9, 3), stride=(2, 1), padding=(4, 1))),
            weight_norm(nn.Conv2d(c, c, (3, 3), padding=(1, 1))),
        ])
        self.out = weight_norm(nn.Conv2d(c, 1, (3, 3), padding=(1, 1)))

    def forward(self, wave: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        spec = torch.stft(wave.float(), self.n_fft, self.hop, window=self.window, return_complex=True)
        return judge(self.convs, self.out, spec.abs().clamp_min(1e-5).log()[:, None])  # [B, 1, F, T] in


class PeriodDiscriminator(nn.Module):
    """wave [B, N] folded to [B, 1, N / p, p] -> 2-D convs along time, independent per phase."""

    def __init__(self, period: int, channels: Sequence[int]) -> None:
        super().__init__()
        self.period = period
        chans = [1, *channels]
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(a, b, (5, 1), stride=(3, 1) if i < len(channels) - 1 else (1, 1), padding=(2, 0)))
            for i, (a, b) in enumerate(zip(chans[:-1], chans[1:]))
        )
        self.out = weight_norm(nn.Conv2d(chans[-1], 1, (3, 1), padding=(1, 0)))

    def forward(self, wave: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        b, n = wave.shape
        pad = (-n) % self.period
        x = nn.functional.pad(wave, (0, pad), mode="reflect" if pad < n else "constant")
        return judge(self.convs, self.out, x.view(b, 1, -1, self.period))


class LightDiscriminator(nn.Module):
    """Multi-resolution spectrogram + narrow multi-period discriminators (module docstring)."""

    def __init__(
        self,
        fft_sizes: Sequence[int] = (512, 1024, 2048),
        spectrogram_channels: int = 32,
        periods: Sequence[int] = (2, 3, 5, 7, 11),
        period_channels: Sequence[int] = (16, 32, 64, 128),
    ) -> None:
        super().__init__()
        self.subs = nn.ModuleList(
            [SpectrogramDiscriminator(int(n), int(n) // 4, int(spectrogram_channels)) for n in fft_sizes]
            + [PeriodDiscriminator(int(p), [int(c) for c in period_channels]) for p in periods]
        )

    def forward(self, wave: torch.Tensor) -> Judgement:
        """wave [B, N] -> scores and features of every sub-discriminator."""
        scores, features = [], []
        for sub in self.subs:
            s, f = sub(wave)
            scores.append(s)
            features.append(f)
        return Judgement(scores, features)


def discriminator_loss(real: Judgement, fake: Judgement) -> torch.Tensor:
    """LSGAN: real -> 1, generated -> 0, summed over sub-discriminators."""
    return sum(((r - 1) ** 2).mean() + (f**2).mean() for r, f in zip(real.scores, fake.scores))


def generator_adversarial_loss(fake: Judgement) -> torch.Tensor:
    return sum(((f - 1) ** 2).mean() for f in fake.scores)


def feature_matching_loss(real: Judgement, fake: Judgement) -> torch.Tensor:
    """Mean L1 between the discriminators' activations on real (detached) and generated audio."""
    terms = [(r.detach() - f).abs().mean() for rs, fs in zip(real.features, fake.features) for r, f in zip(rs, fs)]
    return sum(terms) / len(terms)

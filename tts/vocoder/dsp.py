"""The torch side of the source-filter vocoder's DSP: F0 as classes over log-frequency bins, F0 filled
through unvoiced frames (training targets), the counter-based noise as a cached table, and the render of
tts.vocoder.render (THE DSP, written once for torch and numpy) bound to torch operations (`TORCH`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tts import noise as noise_hash
from tts.noise import NOISE_PERIOD
from tts.vocoder import render as _render
from tts.vocoder.render import ArrayOps, RenderInput, Synthesis  # noqa: F401 (the vocoder's types, defined torch-free)



# --- F0 as classes over log-frequency bins (CREPE-style) ----------------------------------------
@dataclass(frozen=True)
class F0Bins:
    """Bins of equal width in cents between f0_min and f0_max (centres; bin 0 at f0_min)."""

    f0_min: float
    f0_max: float
    cents_per_bin: float

    def __post_init__(self) -> None:
        if not 0 < self.f0_min < self.f0_max or self.cents_per_bin <= 0:
            raise ValueError(f"bad F0 bins: {self}")

    @property
    def n_bins(self) -> int:
        return int(math.ceil(1200.0 * math.log2(self.f0_max / self.f0_min) / self.cents_per_bin)) + 1

    def cents(self, f0_hz: torch.Tensor) -> torch.Tensor:
        """Hz -> cents above f0_min (any shape; f0 > 0)."""
        return 1200.0 * torch.log2(f0_hz / self.f0_min)

    def soft_targets(self, f0_hz: torch.Tensor, sigma_cents: float) -> torch.Tensor:
        """f0 [..., T] Hz (> 0) -> Gaussian-blurred class targets [..., n_bins, T] summing to 1."""
        centres = torch.arange(self.n_bins, device=f0_hz.device, dtype=torch.float32) * self.cents_per_bin
        c = self.cents(f0_hz.float().clamp(self.f0_min, self.f0_max))  # [..., T]
        logits = -0.5 * ((c.unsqueeze(-2) - centres[:, None]) / sigma_cents) ** 2  # [..., n_bins, T]
        return torch.softmax(logits, dim=-2)

    def decode(self, logits: torch.Tensor, neighbourhood: int = 4) -> torch.Tensor:
        """logits [B, n_bins, T] -> f0 [B, T] Hz: probability-weighted mean of the bins within
        `neighbourhood` of the most likely one (CREPE's local average: sub-bin resolution, and never
        the half-way average of two octave candidates that a global mean would give)."""
        probs = torch.softmax(logits.float(), dim=1)
        peak = probs.argmax(dim=1, keepdim=True)  # [B, 1, T]
        idx = torch.arange(self.n_bins, device=logits.device)[None, :, None]
        near = ((idx - peak).abs() <= neighbourhood).float()
        w = probs * near
        cents = (w * idx.float()).sum(1) / w.sum(1).clamp_min(1e-12) * self.cents_per_bin  # [B, T]
        return self.f0_min * torch.pow(2.0, cents / 1200.0)


def fill_unvoiced(f0: torch.Tensor, default_hz: float) -> torch.Tensor:
    """f0 [T] Hz with 0 = unvoiced -> [T] > 0: linear interpolation between voiced neighbours, edges
    held, `default_hz` if nothing is voiced.  The oscillator then runs on through unvoiced stretches
    (its phase stays continuous; voicing gates it), as the training target's frames expect."""
    f0 = f0.float()
    voiced = torch.nonzero(f0 > 0).flatten()
    if voiced.numel() == 0:
        return torch.full_like(f0, default_hz)
    if voiced.numel() == 1:
        return torch.full_like(f0, float(f0[voiced[0]]))
    t = torch.arange(f0.shape[0], dtype=torch.float32)
    idx = torch.searchsorted(voiced, torch.arange(f0.shape[0])).clamp(1, voiced.numel() - 1)
    left, right = voiced[idx - 1], voiced[idx]
    w = ((t - left.float()) / (right - left).float()).clamp(0, 1)
    filled = f0[left] * (1 - w) + f0[right] * w
    return torch.where(f0 > 0, f0, filled)


# --- sources ----------------------------------------------------------------------------------------
_noise_tables: dict[int, torch.Tensor] = {}


def _noise_table(seed: int) -> torch.Tensor:
    """[NOISE_PERIOD] float32: one period of tts.noise.s hashed noise, made once per seed."""
    table = _noise_tables.get(seed)
    if table is None:
        table = _noise_tables[seed] = torch.from_numpy(noise_hash.hash_noise(seed, 0, NOISE_PERIOD))
    return table


def hash_noise(seed: int, s0: int, s1: int, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """White noise for absolute samples [s0, s1): [batch, s1 - s0] float32, sample n always the same
    value (whatever the chunking, batch or run).  Every item of a batch gets the same sequence: an
    item's audio must not depend on its position in the batch."""
    idx = torch.remainder(torch.arange(s0, s1), NOISE_PERIOD)
    return _noise_table(seed)[idx].to(device).expand(batch, -1)


class TorchOps(ArrayOps):
    """tts.vocoder.render's operations in torch (autograd through the cepstra; any device)."""

    def no_grad(self):
        return torch.no_grad()

    def f32(self, x: torch.Tensor) -> torch.Tensor:
        return x.float()

    def f64(self, x: torch.Tensor) -> torch.Tensor:
        return x.double()

    def arange(self, start: int, stop: int, like: torch.Tensor) -> torch.Tensor:
        return torch.arange(start, stop, device=like.device)

    def ramp(self, hop: int, like: torch.Tensor) -> torch.Tensor:
        return torch.arange(hop, device=like.device, dtype=like.dtype) / hop

    def clip(self, x: torch.Tensor, low: float | None, high: float | None) -> torch.Tensor:
        return x.clamp(low, high)

    def cumsum(self, x: torch.Tensor, axis: int) -> torch.Tensor:
        return torch.cumsum(x, dim=axis)

    def stack(self, xs: list, axis: int) -> torch.Tensor:
        return torch.stack(xs, axis)

    def concat(self, xs: list, axis: int) -> torch.Tensor:
        return torch.cat(xs, axis)

    def frames(self, x: torch.Tensor, size: int, step: int) -> torch.Tensor:
        return x.unfold(-1, size, step)

    def rfft(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.fft.rfft(x, n=n, dim=-1)

    def irfft(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return torch.fft.irfft(x, n=n, dim=-1)

    def polar(self, magnitude: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
        # exp() of the complex log, several times cheaper on CPU as polar
        return torch.polar(magnitude, angle)

    def zeros(self, shape: tuple, like: torch.Tensor) -> torch.Tensor:
        return like.new_zeros(shape)

    def noise(self, seed: int, s0: int, s1: int, batch: int, like: torch.Tensor) -> torch.Tensor:
        return hash_noise(seed, s0, s1, batch, like.device)


TORCH = TorchOps()


def frame_to_samples(x: torch.Tensor, first_frame: int, n_frames_total: int | None, s0: int, s1: int,
                     hop: int) -> torch.Tensor:
    """tts.vocoder.render.frame_to_samples on torch tensors."""
    return _render.frame_to_samples(x, first_frame, n_frames_total, s0, s1, hop, TORCH)


def pulse_train(phase: torch.Tensor, f0: torch.Tensor, sample_rate: int, cutoff_hz: float) -> torch.Tensor:
    """tts.vocoder.render.pulse_train on torch tensors."""
    return _render.pulse_train(phase, f0, sample_rate, cutoff_hz, TORCH)


def render(inp: RenderInput, s0: int, s1: int, phase0: torch.Tensor, n_frames_total: int | None,
           syn: Synthesis, window: torch.Tensor, phase_at: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """tts.vocoder.render.render on torch tensors (see there): -> (wave [B, s1 - s0], phase at `phase_at`)."""
    return _render.render(inp, s0, s1, phase0, n_frames_total, syn, window, phase_at, TORCH)

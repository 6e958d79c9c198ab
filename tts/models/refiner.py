"""K-step mel refiner: shallow conditional flow matching from the coarse mel to the target mel.

Matcha-TTS (Mehta et al. 2024) trains an OT conditional flow from N(0, I) to the mel; DiffSinger's
shallow diffusion (Liu et al. 2022) starts its reverse process from the *coarse* mel of a simple
decoder instead of from pure noise.  Combining both, in normalised mel units (per-channel mean/std of
the owning model):

    x0 = coarse + sigma * eps,   eps ~ N(0, I)            (start: the coarse mel, blurred by noise)
    x1 = target
    x_t = (1 - t) * coarse + t * x1 + (1 - (1 - sigma_min) * t) * sigma * eps
    u   = d x_t / dt = x1 - coarse - (1 - sigma_min) * sigma * eps
    loss = masked MSE(v(x_t, t, cond), u),  t ~ U(0, 1)

sigma_min shrinks only the noise part (Matcha's sigma_min applied to the whole x0 would leave a
sigma_min * coarse bias at t = 1).  sigma (default 0.5 normalised units, i.e. half a per-channel
standard deviation; a coarse FastSpeech 2 mel is typically 0.3-0.6 std away from the target) sets
how far from the coarse mel the flow may wander: 0 makes it a deterministic residual corrector,
large values turn it into Matcha's full generative decoder that needs more steps.

Inference integrates K Euler steps from t = 0 to 1 (K = 0 returns the coarse mel untouched).
`temperature` scales the initial noise (Matcha uses 0.667).  Early stop: after each step, the RMS of
that step's update over the real frames (mean over the batch) is compared with a threshold; when it
falls below, the remaining interval is covered in one jump, x <- x + (1 - t) * v, reusing the velocity
just computed (OT paths are straight, so this is the flow's own estimate of the endpoint).  Note the
noise part alone contributes about sigma * temperature / K to every step's update, so thresholds
below that stop nothing unless the temperature is low.

Network: DiffSinger-style stack of residual dilated conv blocks (WaveNet gating, skip connections);
time enters every block by FiLM (scale, shift) from a sinusoidal embedding, the condition (the
decoder's hidden frames and the coarse mel) by a 1x1 projection.  No down-sampling, so any length
works and masking is exact; shallow enough for CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tts.noise import gaussian_table


def timestep_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """t [B] in [0, 1] -> sinusoidal features [B, dim] (t scaled by 1000 as in Matcha/DDPM, so the
    lowest frequencies still resolve 1/K steps)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / max(half - 1, 1))
    args = scale * t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)



def noise_table() -> torch.Tensor:
    """tts.noise's standard normal table as a tensor [GAUSSIAN_PERIOD] (shares the numpy array's memory)."""
    return torch.from_numpy(gaussian_table())


def gather_noise(table: torch.Tensor, offsets: torch.Tensor, n_mels: int, n_frames: int) -> torch.Tensor:
    """Start noise [B, n_mels, n_frames] of the items at table offsets [B] (int64, `item_noise_seed`): value
    (b, m, t) = table[(offsets[b] + t * n_mels + m) mod len(table)] (tts.noise's definition).  A pure function
    of (offset, frame, channel): an item's noise does not depend on its batch, padding or window.
    Scriptable: the exported acoustic graph draws its noise with it from the same table."""
    t = torch.arange(n_frames, dtype=torch.long, device=offsets.device)
    m = torch.arange(n_mels, dtype=torch.long, device=offsets.device)
    idx = torch.remainder(offsets[:, None, None] + t[None, None, :] * n_mels + m[None, :, None], table.shape[0])
    return table[idx]


def per_item_noise(shape: torch.Size, lengths: Sequence[int], seeds: Sequence[int] | None) -> torch.Tensor:
    """Standard normal noise [B, M, T] (CPU, float32): item k's first lengths[k] frames from the noise table
    at offset seeds[k] (`item_noise_seed`; None = 0..B-1), zeros after (`gather_noise`)."""
    b, n_mels, t = shape
    seeds = list(range(b)) if seeds is None else list(seeds)
    if len(seeds) != b or len(lengths) != b:
        raise ValueError(f"need one noise seed and one length per item: {len(seeds)} seeds, {len(lengths)} lengths, {b} items")
    eps = gather_noise(noise_table(), torch.tensor(seeds, dtype=torch.long), n_mels, t)
    return eps * (torch.arange(t)[None, :] < torch.tensor([int(n) for n in lengths])[:, None])[:, None, :]


class ResidualBlock(nn.Module):
    """Dilated conv + condition + time FiLM -> gated tanh/sigmoid -> (residual, skip), all [B, C, T]."""

    def __init__(self, channels: int, time_dim: int, kernel_size: int, dilation: int, dropout: float) -> None:
        super().__init__()
        self.conv = nn.Conv1d(channels, 2 * channels, kernel_size, padding=dilation * (kernel_size // 2), dilation=dilation)
        self.cond = nn.Conv1d(channels, 2 * channels, 1)
        self.film = nn.Linear(time_dim, 4 * channels)  # scale and shift for the 2C pre-activation
        self.out = nn.Conv1d(channels, 2 * channels, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, temb: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.conv(x * mask) + self.cond(cond)  # [B, 2C, T]
        scale, shift = self.film(temb)[:, :, None].chunk(2, dim=1)  # [B, 2C, 1] each
        h = h * (1.0 + scale) + shift
        gate, filt = h.chunk(2, dim=1)
        h = self.dropout(torch.sigmoid(gate) * torch.tanh(filt))
        residual, skip = self.out(h).chunk(2, dim=1)
        return (x + residual) * (mask / math.sqrt(2.0)), skip * mask


class VelocityNet(nn.Module):
    """v(x_t, t, cond): x_t [B, M, T], t [B], cond [B, C_cond, T], mask [B, 1, T] -> [B, M, T]."""

    def __init__(
        self,
        n_mels: int,
        cond_channels: int,
        channels: int,
        n_layers: int,
        kernel_size: int,
        dilation_cycle: int,
        time_dim: int,
        dropout: float,
    ) -> None:
        super().__init__()
        self.time_dim = time_dim
        self.time_mlp = nn.Sequential(nn.Linear(time_dim, time_dim), nn.SiLU(), nn.Linear(time_dim, time_dim), nn.SiLU())
        self.input = nn.Conv1d(n_mels, channels, 1)
        self.cond = nn.Conv1d(cond_channels, channels, 1)
        self.blocks = nn.ModuleList(
            ResidualBlock(channels, time_dim, kernel_size, 2 ** (i % dilation_cycle), dropout) for i in range(n_layers)
        )
        self.skip = nn.Conv1d(channels, channels, 1)
        self.output = nn.Conv1d(channels, n_mels, 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        temb = self.time_mlp(timestep_embedding(t, self.time_dim).to(x.dtype))  # [B, time_dim]
        c = self.cond(cond * mask)  # [B, C, T]
        h = F.silu(self.input(x * mask)) * mask
        skips = torch.zeros_like(h)
        for block in self.blocks:
            h, s = block(h, c, temb, mask)
            skips = skips + s
        h = F.silu(self.skip(skips / math.sqrt(len(self.blocks)))) * mask
        return self.output(h) * mask


@dataclass
class RefinerOutput:
    mels: torch.Tensor  # [B, M, T] refined mel, normalised units, zero on padded frames
    steps_taken: int  # network evaluations done (<= steps; fewer after an early stop)


class EulerLoop(nn.Module):
    """THE refiner's sampling loop, the one every decoding mode runs (parallel `FlowMatchingRefiner.sample`,
    the block-wise windows of tts.models.blockwise, and the exported acoustic graph, where it is scripted
    into one ONNX Loop: tts/export.py): K Euler steps of dx/dt = v(x, t) from t = 0 to 1,
    x_{i+1} = x_i + v(x_i, i / K) / K.

    net: the velocity network v(x [B, M, T], t [B], condition [B, C + M, T], mask [B, 1, T]).
    early_stop (None = off): after each step, the RMS of its update over the real elements (mean over the
    batch) is compared with it; below, the rest of the interval is covered in one jump x + (1 - t) v along
    the velocity just computed (OT paths are straight).  An attribute, not an argument: the exported loop
    is scripted with None, which removes the branch from its graph."""

    def __init__(self, net: nn.Module, early_stop: float | None = None) -> None:
        super().__init__()
        self.net = net
        self.early_stop = early_stop

    def forward(self, x: torch.Tensor, condition: torch.Tensor, m: torch.Tensor, steps: int) -> tuple[torch.Tensor, int]:
        """x [B, M, T] the start point, condition [B, C + M, T], m [B, 1, T] float -> (x at t = 1 times m,
        network evaluations done)."""
        dt = 1.0 / max(steps, 1)
        n_real = (m.sum(dim=(1, 2)) * x.shape[1]).clamp_min(1.0)  # [B] real elements per item
        for i in range(steps):
            t = torch.full([x.shape[0]], i * dt, dtype=x.dtype, device=x.device)
            v = self.net(x, t, condition, m)
            early_stop = self.early_stop
            if early_stop is not None:
                rms = float(((((dt * v) ** 2).sum(dim=(1, 2)) / n_real).sqrt()).mean())
                if rms < early_stop:
                    return (x + (1.0 - i * dt) * v) * m, i + 1
            x = x + dt * v
        return x * m, steps


def start_point(coarse: torch.Tensor, eps: torch.Tensor, m: torch.Tensor, temperature: float, sigma: float) -> torch.Tensor:
    """x0 = coarse + temperature * sigma * eps on the real frames: coarse, eps [B, M, T], m [B, 1, T]."""
    return (coarse + temperature * sigma * eps) * m


class FlowMatchingRefiner(nn.Module):
    """Shallow OT-CFM refiner; see the module docstring.  All mels are in normalised units.

    `n_mels` and `cond_channels` come from the owning model (it builds the refiner from a Hydra
    partial); the rest is configuration.
    """

    def __init__(
        self,
        n_mels: int,
        cond_channels: int,
        channels: int = 160,
        n_layers: int = 6,
        kernel_size: int = 3,
        dilation_cycle: int = 4,
        time_dim: int = 128,
        dropout: float = 0.0,
        sigma: float = 0.5,
        sigma_min: float = 1e-4,
    ) -> None:
        super().__init__()
        if sigma < 0 or not 0 <= sigma_min < 1:
            raise ValueError(f"need sigma >= 0 and 0 <= sigma_min < 1, got {sigma}, {sigma_min}")
        self.sigma = sigma
        self.sigma_min = sigma_min
        # the coarse mel is part of the condition: the network must know where the flow started
        self.net = VelocityNet(n_mels, cond_channels + n_mels, channels, n_layers, kernel_size, dilation_cycle, time_dim, dropout)

    def loss(
        self,
        target: torch.Tensor,
        coarse: torch.Tensor,
        cond: torch.Tensor,
        mask: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Masked flow-matching MSE.  target, coarse [B, M, T]; cond [B, C, T]; mask [B, T] bool."""
        m = mask[:, None, :].to(target.dtype)  # [B, 1, T]
        b = target.shape[0]
        t = torch.rand(b, device=target.device, dtype=target.dtype, generator=generator)
        eps = torch.randn(target.shape, device=target.device, dtype=target.dtype, generator=generator)
        tt = t[:, None, None]
        noise = self.sigma * eps
        x_t = (1.0 - tt) * coarse + tt * target + (1.0 - (1.0 - self.sigma_min) * tt) * noise
        u = target - coarse - (1.0 - self.sigma_min) * noise
        v = self.net(x_t * m, t, self.condition(coarse, cond, m), m)
        return (((v - u) ** 2) * m).sum() / (m.sum() * target.shape[1]).clamp_min(1.0)

    @torch.no_grad()
    def sample(
        self,
        coarse: torch.Tensor,
        cond: torch.Tensor,
        mask: torch.Tensor,
        steps: int,
        temperature: float = 1.0,
        early_stop: float | None = None,
        noise_seeds: Sequence[int] | None = None,
    ) -> RefinerOutput:
        """K Euler steps from x0 = coarse + temperature * sigma * eps.  coarse [B, M, T], mask [B, T].

        noise_seeds: one seed per item (see `item_noise_seed`); None = 0, 1, ..., B-1.  Each item's eps
        comes from its own generator over its own frames, so it does not depend on the batch.
        """
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        if steps == 0:
            return RefinerOutput(coarse, 0)
        m = mask[:, None, :].to(coarse.dtype)
        eps = per_item_noise(coarse.shape, mask.sum(dim=1).tolist(), noise_seeds).to(coarse.device, coarse.dtype)
        x, taken = self.loop(early_stop)(start_point(coarse, eps, m, temperature, self.sigma), self.condition(coarse, cond, m),
                                         m, steps)
        return RefinerOutput(x, taken)

    def condition(self, coarse: torch.Tensor, cond: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """The velocity network's condition: decoder hidden cond [B, C, T] and the masked coarse mel [B, M, T]
        (the network must know where the flow started) -> [B, C + M, T]."""
        return torch.cat([cond, coarse * m], dim=1)

    def loop(self, early_stop: float | None = None) -> EulerLoop:
        """The sampling loop over this refiner's network (made per call: registering it as a submodule
        would list the network's weights twice in the state dict)."""
        return EulerLoop(self.net, early_stop)

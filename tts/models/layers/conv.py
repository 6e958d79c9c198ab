"""Masked 1-D convolution blocks shared by the acoustic models, and the Tacotron 2 post-net.

Everything here takes channels-first tensors x [B, C, T] and an optional mask [B, 1, T] (bool, True on
real frames).  Why masking matters: padded frames hold arbitrary values (pad symbols, teacher-forced
garbage); a "same" convolution near the end of an item would read them, and plain BatchNorm would
fold them into its batch statistics, so the loss of real frames would depend on the padding.  With the
mask, padded positions are zeroed before each convolution and excluded from the BN statistics, making
every real output independent of what the padding contains.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.nn.functional import all_reduce as differentiable_all_reduce

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "none": nn.Identity}


class MaskedBatchNorm1d(nn.BatchNorm1d):
    """BatchNorm1d over [B, C, T] whose training statistics use only the masked-in positions.

    Eval mode (and training without a mask) is plain BatchNorm1d with running statistics.

    Under DDP (torch.distributed initialised, world size > 1) the training statistics are those of the
    global batch: the masked sums are all-reduced across ranks (differentiably, so gradients flow through
    the other ranks' statistics as in nn.SyncBatchNorm).  That is why the trainer must not convert this
    module with `sync_batchnorm` (SyncBatchNorm's forward takes no mask): conf/trainer/ddp.yaml keeps it off.
    Every rank must then call forward in step, which DDP training does.
    """

    def _global_sum(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over ranks when distributed (differentiable), else x itself."""
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return differentiable_all_reduce(x, op=dist.ReduceOp.SUM)
        return x

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is None or not self.training:
            return super().forward(x)
        m = mask.to(x.dtype)  # [B, 1, T]
        # one all-reduce for the count and the per-channel sums: [C + 1]
        sums = self._global_sum(torch.cat([(x * m).sum(dim=(0, 2)), m.sum()[None]]))
        n = sums[-1].clamp_min(1.0)
        mean = sums[:-1] / n  # [C]
        # two passes (mean, then centred squares): stabler than E[x^2] - mean^2
        var = self._global_sum((((x - mean[None, :, None]) ** 2) * m).sum(dim=(0, 2))) / n  # [C], biased, as BN uses
        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():
                self.num_batches_tracked += 1
                momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                unbiased = var * n / (n - 1).clamp_min(1.0)
                self.running_mean.lerp_(mean.detach(), momentum)
                self.running_var.lerp_(unbiased.detach(), momentum)
        y = (x - mean[None, :, None]) * torch.rsqrt(var[None, :, None] + self.eps)
        if self.affine:
            y = y * self.weight[None, :, None] + self.bias[None, :, None]
        return y


class ConvBlock(nn.Module):
    """Conv1d ("same" padding) -> masked BatchNorm -> activation -> dropout; [B, C_in, T] -> [B, C_out, T]."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 5,
        activation: str = "relu",
        dropout: float = 0.5,
        batch_norm: bool = True,
    ) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"kernel_size must be odd for 'same' padding, got {kernel_size}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=not batch_norm)
        self.norm = MaskedBatchNorm1d(out_channels) if batch_norm else None
        self.activation = _ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)
        # Xavier init with the gain of the following non-linearity (as NVIDIA's Tacotron 2 does).
        gain = nn.init.calculate_gain("linear" if activation == "none" else activation)
        nn.init.xavier_uniform_(self.conv.weight, gain=gain)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            x = x.masked_fill(~mask, 0.0)
        x = self.conv(x)
        if self.norm is not None:
            x = self.norm(x, mask)
        x = self.dropout(self.activation(x))
        if mask is not None:
            x = x.masked_fill(~mask, 0.0)
        return x


class ConvStack(nn.Module):
    """`n_layers` ConvBlocks; the last one may use a different activation (e.g. "none")."""

    def __init__(
        self,
        in_channels: int,
        channels: int,
        out_channels: int,
        n_layers: int,
        kernel_size: int = 5,
        activation: str = "relu",
        last_activation: str | None = None,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"need at least one conv layer, got {n_layers}")
        blocks = []
        for i in range(n_layers):
            last = i == n_layers - 1
            blocks.append(
                ConvBlock(
                    in_channels if i == 0 else channels,
                    out_channels if last else channels,
                    kernel_size,
                    activation=(last_activation or activation) if last else activation,
                    dropout=dropout,
                )
            )
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, mask)
        return x


class Postnet(nn.Module):
    """Tacotron 2 post-net: mel [B, M, T] -> residual [B, M, T] to add to the decoder's coarse mel.

    `n_layers` convs of `channels` with tanh, the last one linear back to M channels, all with
    BatchNorm and dropout (paper: 5 x 512, kernel 5, dropout 0.5).
    """

    def __init__(
        self, n_mels: int, channels: int = 512, n_layers: int = 5, kernel_size: int = 5, dropout: float = 0.5
    ) -> None:
        super().__init__()
        self.convs = ConvStack(
            n_mels, channels, n_mels, n_layers, kernel_size, activation="tanh", last_activation="none", dropout=dropout
        )

    def forward(self, mel: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.convs(mel, mask)


def pad_to_multiple(x: torch.Tensor, multiple: int, value: float = 0.0, dim: int = -1) -> torch.Tensor:
    """Right-pad `x` along `dim` so its size is a multiple of `multiple` (used for reduction factor r)."""
    size = x.shape[dim]
    extra = (-size) % multiple
    if extra == 0:
        return x
    dim = dim % x.dim()
    pad = [0, 0] * (x.dim() - 1 - dim) + [0, extra]
    return F.pad(x, pad, value=value)

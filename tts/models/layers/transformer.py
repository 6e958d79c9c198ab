"""Feed-forward Transformer (FFT) blocks of FastSpeech: masked self-attention + 1-D conv feed-forward.

All modules take x [B, T, D] (channels-last) and a mask [B, T] (bool, True on real positions).
Padding never influences real positions: attention masks padded keys, and the conv feed-forward
zeroes padded positions before each convolution (a "same" conv would otherwise read them), so an
item's outputs are the same alone or in a padded batch.  Padded outputs are set to zero.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_positions(n_positions: int, dim: int, device: torch.device | None = None) -> torch.Tensor:
    """Vaswani et al. (2017) table [n_positions, dim]: sin on even channels, cos on odd channels.

    Computed on the fly (cheap) rather than stored, so any length up to the frame guard works.
    """
    pos = torch.arange(n_positions, device=device, dtype=torch.float32)[:, None]  # [T, 1]
    inv_freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_positions, dim, device=device)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: dim // 2])
    return table


class MultiHeadSelfAttention(nn.Module):
    """Masked multi-head self-attention: x [B, T, D], mask [B, T] -> [B, T, D]."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)  # [B, H, T, Dh]
        # bool attn_mask: True = may attend; [B, 1, 1, T] masks padded keys for every query.  Padded
        # queries still see the real keys (no all-masked rows, hence no NaN) and are zeroed later.
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask[:, None, None, :], dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class ConvFeedForward(nn.Module):
    """FastSpeech's position-wise conv FFN: conv(k1) D->F, ReLU, dropout, conv(k2) F->D.

    The paper uses kernels (9, 1) with F = 1024; the masking before each conv keeps padding out.
    """

    def __init__(self, d_model: int, d_hidden: int, kernel_size: int = 9, kernel_size_out: int = 1, dropout: float = 0.1) -> None:
        super().__init__()
        for k in (kernel_size, kernel_size_out):
            if k % 2 != 1:
                raise ValueError(f"conv FFN kernel sizes must be odd ('same' padding), got {k}")
        self.conv1 = nn.Conv1d(d_model, d_hidden, kernel_size, padding=kernel_size // 2)
        self.conv2 = nn.Conv1d(d_hidden, d_model, kernel_size_out, padding=kernel_size_out // 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask[:, None, :].to(x.dtype)  # [B, 1, T]
        h = x.transpose(1, 2) * m  # [B, D, T]
        h = self.dropout(F.relu(self.conv1(h))) * m
        return self.conv2(h).transpose(1, 2)  # [B, T, D]


class FFTBlock(nn.Module):
    """Self-attention + conv FFN with residuals; post-norm (the FastSpeech paper) or pre-norm.

    Post-norm: x = LN(x + Drop(Att(x))); x = LN(x + Drop(FFN(x))).
    Pre-norm:  x = x + Drop(Att(LN(x))); x = x + Drop(FFN(LN(x))) -- trains more stably when deep
    or at high learning rates; the stack then ends with a final LayerNorm.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_hidden: int,
        kernel_size: int = 9,
        kernel_size_out: int = 1,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_norm: bool = False,
    ) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.attention = MultiHeadSelfAttention(d_model, n_heads, attention_dropout)
        self.ffn = ConvFeedForward(d_model, d_hidden, kernel_size, kernel_size_out, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask[:, :, None].to(x.dtype)  # [B, T, 1]
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.norm1(x), mask))
            x = x + self.dropout(self.ffn(self.norm2(x), mask))
        else:
            x = self.norm1(x + self.dropout(self.attention(x, mask)))
            x = self.norm2(x + self.dropout(self.ffn(x, mask)))
        return x * keep


class FFTStack(nn.Module):
    """Sinusoidal positions + `n_layers` FFT blocks: x [B, T, D], mask [B, T] -> [B, T, D].

    Used twice in FastSpeech 2: as the phoneme encoder (on token embeddings) and as the parallel mel
    decoder (on length-regulated frames).
    """

    def __init__(
        self,
        d_model: int,
        n_layers: int,
        n_heads: int,
        d_hidden: int,
        kernel_size: int = 9,
        kernel_size_out: int = 1,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_norm: bool = False,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"need at least one FFT block, got {n_layers}")
        self.d_model = d_model
        self.blocks = nn.ModuleList(
            FFTBlock(d_model, n_heads, d_hidden, kernel_size, kernel_size_out, dropout, attention_dropout, pre_norm)
            for _ in range(n_layers)
        )
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask[:, :, None].to(x.dtype)
        x = self.dropout(x + sinusoidal_positions(x.shape[1], self.d_model, x.device).to(x.dtype)) * keep
        for block in self.blocks:
            x = block(x, mask)
        if self.final_norm is not None:
            x = self.final_norm(x) * keep
        return x

"""Feed-forward Transformer (FFT) blocks of FastSpeech: masked self-attention + 1-D conv feed-forward.

All modules take x [B, T, D] (channels-last) and a mask [B, T] (bool, True on real positions).
Padding never influences real positions: attention masks padded keys, and the conv feed-forward
zeroes padded positions before each convolution (a "same" conv would otherwise read them), so an
item's outputs are the same alone or in a padded batch.  Padded outputs are set to zero.

Block mode (`layout`, a BlockLayout; tts/models/blockwise.py): frames are grouped in blocks of
`block_frames`; attention is block-causal with a bounded past (`block_causal_mask`) and the conv
feed-forward drops its taps that would read a later block, so that training on whole sequences computes
what block-by-block decoding computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_positions(n_positions: int, dim: int, device: torch.device | None = None, start: int = 0) -> torch.Tensor:
    """Vaswani et al. (2017) table [n_positions, dim] of positions start, start + 1, ...: sin on even
    channels, cos on odd channels.

    Computed on the fly (cheap) rather than stored, so any length up to the frame guard works.
    """
    pos = torch.arange(start, start + n_positions, device=device, dtype=torch.float32)[:, None]  # [T, 1]
    inv_freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n_positions, dim, device=device)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq[: dim // 2])
    return table


@dataclass(frozen=True)
class BlockLayout:
    """Frames [j*block_frames, (j+1)*block_frames) form block j; attention reaches `past_frames` frames
    before a block's start, never into a later block."""

    block_frames: int
    past_frames: int

    def __post_init__(self) -> None:
        if self.block_frames < 1:
            raise ValueError(f"block_frames must be >= 1, got {self.block_frames}")
        if self.past_frames < 0:
            raise ValueError(f"past_frames must be >= 0, got {self.past_frames}")


def block_causal_mask(n_frames: int, layout: BlockLayout, device: torch.device | None = None) -> torch.Tensor:
    """[T, T] bool, True where query frame q may attend key frame k: k in q's block or in the
    `past_frames` frames before that block's start."""
    t = torch.arange(n_frames, device=device)
    q_start = ((t // layout.block_frames) * layout.block_frames)[:, None]  # [T, 1] start of q's block
    k = t[None, :]
    return (k < q_start + layout.block_frames) & (k >= q_start - layout.past_frames)


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor, frame_mask: torch.Tensor | None = None) -> torch.Tensor:
        """frame_mask [T, T] bool (block mode): which key frames each query frame may see, besides padding."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)  # [B, H, T, Dh]
        # bool attn_mask: True = may attend; [B, 1, 1, T] masks padded keys for every query.  Padded
        # queries still see the real keys (no all-masked rows, hence no NaN) and are zeroed later.
        attn_mask = mask[:, None, None, :]
        if frame_mask is not None:
            # [B, 1, T, T]; every frame also sees itself, so a padded query whose window holds no real key
            # has no empty row (NaN); its output is zeroed later
            eye = torch.eye(t, dtype=torch.bool, device=x.device)
            attn_mask = (attn_mask & frame_mask[None, None]) | eye
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout if self.training else 0.0
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

    def forward(self, x: torch.Tensor, mask: torch.Tensor, block_frames: int | None = None) -> torch.Tensor:
        """block_frames: no output reads a frame of a later block (block mode)."""
        m = mask[:, None, :].to(x.dtype)  # [B, 1, T]
        h = x.transpose(1, 2) * m  # [B, D, T]
        h = self.dropout(F.relu(_block_conv(self.conv1, h, block_frames))) * m
        return _block_conv(self.conv2, h, block_frames).transpose(1, 2)  # [B, T, D]


def _block_conv(conv: nn.Conv1d, h: torch.Tensor, block_frames: int | None) -> torch.Tensor:
    """conv(h) over h [B, C, T]; with block_frames, minus the contribution of each future tap (offset o =
    1..k//2) at frames t whose t + o lies in a later block: what the conv computes when the frames after
    the block's end are zeros (the block-by-block decoder's right padding)."""
    y = conv(h)
    half = conv.kernel_size[0] // 2
    if block_frames is None or half == 0:
        return y
    t = h.shape[2]
    pos = torch.arange(t, device=h.device)
    for o in range(1, half + 1):
        crosses = (pos % block_frames) + o >= block_frames  # [T] frame t + o is in the next block
        shifted = F.pad(h[:, :, o:], (0, o))  # [B, C, T] h[t + o] (zeros past the end, already exact)
        tap = torch.einsum("oc,bct->bot", conv.weight[:, :, half + o], shifted)
        y = y - tap * crosses.to(h.dtype)
    return y


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

    def forward(self, x: torch.Tensor, mask: torch.Tensor, frame_mask: torch.Tensor | None = None,
                block_frames: int | None = None) -> torch.Tensor:
        keep = mask[:, :, None].to(x.dtype)  # [B, T, 1]
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.norm1(x), mask, frame_mask))
            x = x + self.dropout(self.ffn(self.norm2(x), mask, block_frames))
        else:
            x = self.norm1(x + self.dropout(self.attention(x, mask, frame_mask)))
            x = self.norm2(x + self.dropout(self.ffn(x, mask, block_frames)))
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

    def forward(self, x: torch.Tensor, mask: torch.Tensor, layout: BlockLayout | None = None) -> torch.Tensor:
        """layout: block mode (block-causal attention with a bounded past, no conv tap into a later block)."""
        keep = mask[:, :, None].to(x.dtype)
        x = self.dropout(x + sinusoidal_positions(x.shape[1], self.d_model, x.device).to(x.dtype)) * keep
        frame_mask = block_causal_mask(x.shape[1], layout, x.device) if layout is not None else None
        block_frames = layout.block_frames if layout is not None else None
        for block in self.blocks:
            x = block(x, mask, frame_mask, block_frames)
        if self.final_norm is not None:
            x = self.final_norm(x) * keep
        return x

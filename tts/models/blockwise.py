"""Semi-autoregressive block-wise decoding of the FastSpeech 2 decoder (issue 22).

The encoder, variance adaptor and length regulator stay parallel: the regulated frame sequence
frames [B, T, D] (and so the total length T) is known before the decoder runs.  The decoder then makes
it in blocks of `block_frames` frames: all frames of a block at once, the blocks in order.  Block j
covers frames [j*Bf, (j+1)*Bf) and

  * attends, at every layer, to its own block and to the `past_frames` frames before the block's
    start (keys/values of earlier blocks held in a cache of at most `past_frames` frames per layer, so
    the cache does not grow with the utterance);
  * runs the conv feed-forward with the real values of earlier frames on the left and zeros past the
    block's end on the right (the conv never reads a later block);
  * gets, added to its input frames, `BlockPrenet` of the last `prenet_frames` frames of the *generated*
    (normalised, coarse) mel before its start -- the previous block(s), as the AR decoder feeds back its
    last frames; zeros before frame 0 (the "go" frames).

Training (FastSpeech2.forward with block_sizes set) draws one block size per batch and runs the whole
sequence at once with the same constraints as masks (`block_causal_mask`, the conv's cross-block taps
removed: tts/models/layers/transformer.py) and the *ground-truth* mel in the prenet (teacher forcing);
`BlockDecoder` below is the inference side, block by block with the cache.  Both compute the same
function of the same inputs (tests/test_blockwise.py), so B is chosen at inference.  B >= T (one block)
is the parallel decoder with zero prenet input.  Anchors: Incremental FastPitch (Du et al. 2024),
the semi-autoregressive Transformer (Wang et al. 2018).

The refiner (a dilated conv stack, receptive field +-R frames per network evaluation) is kept in block
mode: `StreamingRefiner` refines a frame once the coarse mel is known K * R frames past it, over a
bounded window, which gives the same values as refining the whole coarse mel at once (its noise is drawn
for the whole, known length T up front, as `FlowMatchingRefiner.sample` draws it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tts.models.layers.transformer import BlockLayout, FFTStack, block_causal_mask, sinusoidal_positions
from tts.models.refiner import FlowMatchingRefiner, start_point

__all__ = [
    "BlockLayout",
    "BlockPrenet",
    "block_causal_mask",
    "prenet_context",
    "BlockDecoder",
    "DecodedBlock",
    "StreamingRefiner",
]


def prenet_context(mel: torch.Tensor, starts: torch.Tensor, n_context: int) -> torch.Tensor:
    """The `n_context` mel frames before each block start: mel [B, M, T] (normalised, zero on padding),
    starts [J] long -> [B, J, n_context * M] (frame-major; zeros before frame 0)."""
    b, m, _ = mel.shape
    padded = F.pad(mel, (n_context, 0))  # [B, M, n_context + T]; padded frame i = mel frame i - n_context
    idx = starts[:, None] + torch.arange(n_context, device=mel.device)[None, :]  # [J, n_context]
    ctx = padded[:, :, idx]  # [B, M, J, n_context]
    return ctx.permute(0, 2, 3, 1).reshape(b, starts.numel(), n_context * m)


class BlockPrenet(nn.Module):
    """Last `n_context` frames of the previous block(s)' mel -> an offset [D] added to every input frame of
    the block.  Linear-ReLU-dropout-Linear; the output layer starts at zero, so a parallel model warm-started
    into block mode begins exactly where it was.  Dropout (training only) keeps the decoder from leaning on
    the teacher-forced ground truth more than on its own frames (the generated mel is smoother)."""

    def __init__(self, n_mels: int, d_model: int, n_context: int, dropout: float = 0.5) -> None:
        super().__init__()
        if n_context < 1:
            raise ValueError(f"prenet context must be >= 1 frame, got {n_context}")
        self.n_context = n_context
        self.inp = nn.Linear(n_context * n_mels, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """context [B, J, n_context * M] -> [B, J, D]."""
        return self.out(self.dropout(F.relu(self.inp(context))))

    def teacher_forced(self, mel: torch.Tensor, n_frames: int, block_frames: int) -> torch.Tensor:
        """Training input offsets [B, T, D] from the target mel [B, M, T] (normalised, zero on padding)."""
        starts = torch.arange(0, n_frames, block_frames, device=mel.device)
        per_block = self(prenet_context(mel, starts, self.n_context))  # [B, J, D]
        return per_block.repeat_interleave(block_frames, dim=1)[:, :n_frames]


@dataclass
class DecodedBlock:
    """One block of decoder output, frames [start, start + n)."""

    start: int
    hidden: torch.Tensor  # [B, n, D] decoder output (the refiner's condition), zero on padding
    coarse: torch.Tensor  # [B, M, n] normalised coarse mel, zero on padding


@dataclass
class _LayerCache:
    k: torch.Tensor  # [B, H, P', Dh] keys of the last P' <= past_frames frames
    v: torch.Tensor  # [B, H, P', Dh]
    key_mask: torch.Tensor  # [B, P'] bool, True on real frames
    conv1: torch.Tensor  # [B, D, h1] last h1 = k1 // 2 inputs of the FFN's first conv (masked)
    conv2: torch.Tensor  # [B, F, h2] last h2 inputs of its second conv


class BlockDecoder:
    """Block-by-block decoding with a bounded key/value cache: `blocks(frames, frame_mask)` yields
    DecodedBlock in order.  Mirrors `FFTStack.forward(x, mask, layout)` + `mel_proj` exactly (eval mode).

    stack: the decoder FFTStack; mel_proj: Linear D -> M; prenet: BlockPrenet (None: no feedback, for a
    parallel checkpoint's weights).  `max_cache_frames` records the largest cache seen (the bound test)."""

    def __init__(self, stack: FFTStack, mel_proj: nn.Linear, prenet: BlockPrenet | None, layout: BlockLayout) -> None:
        self.stack = stack
        self.mel_proj = mel_proj
        self.prenet = prenet
        self.layout = layout
        self.max_cache_frames = 0
        self.max_cache_bytes = 0

    @torch.no_grad()
    def blocks(self, frames: torch.Tensor, frame_mask: torch.Tensor) -> Iterator[DecodedBlock]:
        """frames [B, T, D] regulated encoder frames, frame_mask [B, T] -> DecodedBlock per block."""
        if self.stack.training:
            raise RuntimeError("block decoding is an inference path: call .eval() first")
        b, t_total, d = frames.shape
        bf, past = self.layout.block_frames, self.layout.past_frames
        n_mels = self.mel_proj.out_features
        n_ctx = self.prenet.n_context if self.prenet is not None else 0
        prev_mel = frames.new_zeros(b, n_mels, n_ctx)  # [B, M, n_ctx] last generated frames (zeros = go)
        caches: list[_LayerCache | None] = [None] * len(self.stack.blocks)
        for start in range(0, t_total, bf):
            stop = min(start + bf, t_total)
            x = frames[:, start:stop]
            mask = frame_mask[:, start:stop]
            keep = mask[:, :, None].to(x.dtype)
            if self.prenet is not None:
                ctx = prev_mel.permute(0, 2, 1).reshape(b, 1, n_ctx * n_mels)  # frame-major, as prenet_context
                x = x + self.prenet(ctx)
            pos = sinusoidal_positions(stop - start, d, x.device, start=start).to(x.dtype)
            x = (x + pos) * keep
            for i, block in enumerate(self.stack.blocks):
                x, caches[i] = self._layer(block, x, mask, caches[i], past)
            if self.stack.final_norm is not None:
                x = self.stack.final_norm(x) * keep
            coarse = self.mel_proj(x).transpose(1, 2) * mask[:, None, :].to(x.dtype)  # [B, M, n]
            if n_ctx:
                prev_mel = torch.cat([prev_mel, coarse], dim=2)[:, :, -n_ctx:]
            self.max_cache_frames = max(self.max_cache_frames, max(c.k.shape[2] for c in caches if c is not None))
            self.max_cache_bytes = max(self.max_cache_bytes, sum(_cache_bytes(c) for c in caches if c is not None))
            yield DecodedBlock(start, x, coarse)

    def _layer(self, block: nn.Module, x: torch.Tensor, mask: torch.Tensor, cache: _LayerCache | None,
               past: int) -> tuple[torch.Tensor, _LayerCache]:
        """One FFTBlock on one block of frames x [B, n, D] with the cache of the earlier frames."""
        b, n, d = x.shape
        att = block.attention
        h = att.n_heads
        keep = mask[:, :, None].to(x.dtype)
        a_in = block.norm1(x) if block.pre_norm else x
        q, k, v = att.qkv(a_in).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)  # [B, H, n, Dh]
        if cache is not None:
            k_all, v_all = torch.cat([cache.k, k], 2), torch.cat([cache.v, v], 2)
            km = torch.cat([cache.key_mask, mask], 1)
        else:
            k_all, v_all, km = k, v, mask
        p = k_all.shape[2] - n
        # real keys only; a padded query also sees itself (no empty row -> no NaN; its output is zeroed)
        allowed = km[:, None, None, :].expand(b, 1, n, p + n).clone()
        allowed[:, 0, :, p:] |= torch.eye(n, dtype=torch.bool, device=x.device)
        y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=allowed)
        y = att.out(y.transpose(1, 2).reshape(b, n, d))
        if block.pre_norm:
            x = x + y
            f_in = block.norm2(x)
        else:
            x = block.norm1(x + y)
            f_in = x
        ffn = block.ffn
        m = mask[:, None, :].to(x.dtype)
        c1_in = f_in.transpose(1, 2) * m  # [B, D, n]
        hid, c1 = _causal_block_conv(ffn.conv1, c1_in, cache.conv1 if cache else None)
        hid = F.relu(hid) * m
        out, c2 = _causal_block_conv(ffn.conv2, hid, cache.conv2 if cache else None)
        out = out.transpose(1, 2)
        x = x + out if block.pre_norm else block.norm2(x + out)
        x = x * keep
        # keep the last `past` frames of keys/values: the next block may look back that far, no further
        new = _LayerCache(k_all[:, :, -past:] if past else k_all[:, :, :0], v_all[:, :, -past:] if past else v_all[:, :, :0],
                          km[:, -past:] if past else km[:, :0], c1, c2)
        return x, new


def _causal_block_conv(conv: nn.Conv1d, x: torch.Tensor, left: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """A 'same' conv over one block x [B, C, n]: real earlier frames on the left (`left` [B, C, h], None =
    zeros before frame 0), zeros after the block's end.  Returns (output [B, C_out, n], the new left
    context: the last h input frames)."""
    h = conv.kernel_size[0] // 2
    if h == 0:
        return conv(x), x[:, :, :0]
    if left is None:
        left = x.new_zeros(x.shape[0], x.shape[1], h)
    full = torch.cat([left, x], dim=2)  # [B, C, h + n]
    y = F.conv1d(F.pad(full, (0, h)), conv.weight, conv.bias)  # [B, C_out, n]
    return y, full[:, :, -h:]


def _cache_bytes(c: _LayerCache) -> int:
    return sum(t.numel() * t.element_size() for t in (c.k, c.v, c.key_mask, c.conv1, c.conv2))


class StreamingRefiner:
    """`FlowMatchingRefiner.sample` over a coarse mel that arrives block by block, with a bounded window.

    The velocity network sees +-R frames (R = `receptive_half_width`), so after K Euler steps a refined
    frame depends on the coarse mel, the condition and the noise within +-K*R frames.  A frame is emitted
    once the coarse mel is known K*R frames past it; the window run for it starts 2*K*R frames earlier
    (the first K*R frames of which are only context, their own outputs being wrong near the window's cut).
    Early stop is not supported here (a batch-wide decision over the whole utterance).

    noise: [B, M, T] the start noise for the whole utterance (`per_item_noise`, same as `sample`).
    min_chunk: frames refined per window at least (but the last): each window also runs over 2*K*R context
    frames, so tiny windows repeat most of the work (with B = 8 and K*R = 36, ten times over).  The network
    costs about the same on 80 frames as on 500 on a CPU (per-call overhead), so fewer, larger windows win."""

    def __init__(self, refiner: FlowMatchingRefiner, steps: int, temperature: float, noise: torch.Tensor,
                 frame_mask: torch.Tensor, min_chunk: int = 32) -> None:
        self.refiner = refiner
        self.steps = steps
        self.temperature = temperature
        self.noise = noise
        self.frame_mask = frame_mask  # [B, T]
        self.margin = steps * receptive_half_width(refiner)
        self.min_chunk = max(1, min_chunk)
        self.coarse: torch.Tensor | None = None  # [B, M, w] frames [self.first, self.received)
        self.cond: torch.Tensor | None = None  # [B, C, w]
        self.first = 0
        self.received = 0
        self.done = 0

    @torch.no_grad()
    def push(self, coarse: torch.Tensor, cond: torch.Tensor, final: bool = False) -> torch.Tensor:
        """coarse [B, M, n] normalised, cond [B, C, n] (the next frames) -> refined frames [B, M, n'] ready."""
        self.coarse = coarse if self.coarse is None else torch.cat([self.coarse, coarse], 2)
        self.cond = cond if self.cond is None else torch.cat([self.cond, cond], 2)
        self.received += coarse.shape[2]
        target = self.received if final else self.received - self.margin
        if target <= self.done or (not final and target - self.done < self.min_chunk):
            return coarse.new_zeros(coarse.shape[0], coarse.shape[1], 0)
        lo = max(self.first, self.done - self.margin)  # context on the left
        hi = self.received if final else min(self.received, target + self.margin)
        a, z = lo - self.first, hi - self.first
        mask = self.frame_mask[:, lo:hi]
        out = _refine_window(self.refiner, self.coarse[:, :, a:z], self.cond[:, :, a:z], mask,
                             self.noise[:, :, lo:hi], self.steps, self.temperature)
        ready = out[:, :, self.done - lo: target - lo]
        self.done = target
        drop = max(0, self.done - self.margin - self.first)  # frames no later window will read
        if drop:
            self.coarse, self.cond, self.first = self.coarse[:, :, drop:], self.cond[:, :, drop:], self.first + drop
        return ready


def _refine_window(refiner: FlowMatchingRefiner, coarse: torch.Tensor, cond: torch.Tensor, mask: torch.Tensor,
                   eps: torch.Tensor, steps: int, temperature: float) -> torch.Tensor:
    """`FlowMatchingRefiner.sample`'s start point and loop on a window with given noise eps [B, M, w]."""
    m = mask[:, None, :].to(coarse.dtype)
    x0 = start_point(coarse, eps.to(coarse.dtype), m, temperature, refiner.sigma)
    return refiner.loop()(x0, refiner.condition(coarse, cond, m), m, steps)[0]


def receptive_half_width(refiner: FlowMatchingRefiner) -> int:
    """Frames on each side one velocity evaluation reads (the dilated convs; 1x1 convs add none)."""
    return sum(blk.conv.dilation[0] * (blk.conv.kernel_size[0] // 2) for blk in refiner.net.blocks)


def n_blocks(n_frames: int, block_frames: int) -> int:
    return math.ceil(n_frames / block_frames)

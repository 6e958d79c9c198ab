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
`BlockDecoder` below is the inference side, block by block with the cache: `BlockStep` computes one block
from the previous block's `BlockState` (the cache as a tuple of tensors), the module tts/export.py traces into
the ONNX engine's block graph, so both engines run the same block maths.  Both compute the same
function of the same inputs (tests/test_blockwise.py), so B is chosen at inference.  B >= T (one block)
is the parallel decoder with zero prenet input.  Anchors: Incremental FastPitch (Du et al. 2024),
the semi-autoregressive Transformer (Wang et al. 2018).

The refiner (a dilated conv stack, receptive field +-R frames per network evaluation) is kept in block
mode: `StreamingRefiner` refines a frame once the coarse mel is known K * R frames past it, over a
bounded window, which gives the same values as refining the whole coarse mel at once (its noise is drawn
for the whole, known length T up front, as `FlowMatchingRefiner.sample` draws it).  Which window when is
tts.models.refine_windows (torch-free: the ONNX engine's streaming uses the same bookkeeping).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from tts.models.layers.transformer import BlockLayout, FFTStack, block_causal_mask, sinusoidal_positions
from tts.models.refine_windows import RefineWindows
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


class BlockState(NamedTuple):
    """What one block hands to the next (the bounded cache), stacked over the decoder's L layers; P' <= past_frames.

    prev_mel [B, M, C]: the last C = prenet context frames of generated normalised coarse mel (zeros = "go");
    keys, values [L, B, H, P', Dh]: attention keys/values of the last P' frames;
    key_mask [B, P']: True on real frames among them;
    conv1 [L, B, D, h1], conv2 [L, B, F, h2]: the last h = kernel // 2 inputs of each layer's two FFN convs
    (zeros before frame 0).  A tuple of tensors, so that the exported block graph takes and returns it
    (tts/export.py: inputs named by BLOCK_STATE, outputs "next_" + name)."""

    prev_mel: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    key_mask: torch.Tensor
    conv1: torch.Tensor
    conv2: torch.Tensor


BLOCK_STATE = BlockState._fields


class BlockStep(nn.Module):
    """ONE block of the block-wise decoder: frames [B, n, D] of frames [start, start + n), their mask [B, n],
    start [] long and the previous block's BlockState -> (hidden [B, n, D] (the refiner's condition), normalised
    coarse mel [B, M, n], both zero on padding, and the next BlockState).  Mirrors `FFTStack.forward(x, mask,
    layout)` + `mel_proj` exactly (eval mode).  `BlockDecoder` runs it in a Python loop; tts/export.py traces
    it into the ONNX block graph (the same module, so the same maths on both engines).

    Made per use (as `FlowMatchingRefiner.loop`): it holds the model's modules without registering itself."""

    def __init__(self, stack: FFTStack, mel_proj: nn.Linear, prenet: BlockPrenet | None, past_frames: int) -> None:
        super().__init__()
        self.stack, self.mel_proj, self.prenet, self.past = stack, mel_proj, prenet, past_frames
        self.n_context = prenet.n_context if prenet is not None else 0

    def initial_state(self, batch: int, like: torch.Tensor) -> BlockState:
        """The state before frame 0: no cached frames, zero conv contexts, zero ("go") prenet frames."""
        first = self.stack.blocks[0]
        n_layers, heads = len(self.stack.blocks), first.attention.n_heads
        d, f = first.ffn.conv1.in_channels, first.ffn.conv2.in_channels
        h1, h2 = first.ffn.conv1.kernel_size[0] // 2, first.ffn.conv2.kernel_size[0] // 2
        z = like.new_zeros
        return BlockState(z(batch, self.mel_proj.out_features, self.n_context), z(n_layers, batch, heads, 0, d // heads),
                          z(n_layers, batch, heads, 0, d // heads), z(batch, 0, dtype=torch.bool),
                          z(n_layers, batch, d, h1), z(n_layers, batch, f, h2))

    def forward(self, frames: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, prev_mel: torch.Tensor,
                keys: torch.Tensor, values: torch.Tensor, key_mask: torch.Tensor, conv1: torch.Tensor,
                conv2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, BlockState]:
        b, n, d = frames.shape
        keep = mask[:, :, None].to(frames.dtype)  # [B, n, 1]
        x = frames
        if self.prenet is not None:  # the last C generated frames, frame-major (as prenet_context)
            x = x + self.prenet(prev_mel.permute(0, 2, 1).reshape(b, 1, self.n_context * prev_mel.shape[1]))
        x = (x + sinusoidal_positions(n, d, x.device, start=start).to(x.dtype)) * keep  # start: a tensor
        # real keys only; a padded query sees its own key as well (no empty row -> no NaN; its output is zeroed)
        own = torch.arange(n, device=x.device)
        allowed = torch.cat([key_mask[:, None, None, :].expand(b, 1, n, key_mask.shape[1]),
                             mask[:, None, None, :] | (own[:, None] == own[None, :])[None, None]], dim=3)  # [B, 1, n, P' + n]
        new_keys, new_values, new_conv1, new_conv2 = [], [], [], []
        for i, block in enumerate(self.stack.blocks):
            x, k, v, c1, c2 = self._layer(block, x, mask, allowed, keys[i], values[i], conv1[i], conv2[i])
            new_keys.append(k)
            new_values.append(v)
            new_conv1.append(c1)
            new_conv2.append(c2)
        if self.stack.final_norm is not None:
            x = self.stack.final_norm(x) * keep
        coarse = self.mel_proj(x).transpose(1, 2) * mask[:, None, :].to(x.dtype)  # [B, M, n]
        # the next block may look back `past` frames, no further: the cache keeps that many
        state = BlockState(_last(torch.cat([prev_mel, coarse], dim=2), self.n_context),
                           _last(torch.stack(new_keys), self.past), _last(torch.stack(new_values), self.past),
                           _last(torch.cat([key_mask, mask], 1), self.past), torch.stack(new_conv1),
                           torch.stack(new_conv2))
        return x, coarse, state

    @staticmethod
    def _layer(block: nn.Module, x: torch.Tensor, mask: torch.Tensor, allowed: torch.Tensor, k_past: torch.Tensor,
               v_past: torch.Tensor, conv1_left: torch.Tensor, conv2_left: torch.Tensor):
        """One FFTBlock on one block of frames x [B, n, D] with one layer's cache (k_past, v_past [B, H, P', Dh],
        the convs' left contexts) -> (x, all keys and values [B, H, P' + n, Dh], the convs' next contexts)."""
        b, n, d = x.shape
        att = block.attention
        h = att.n_heads
        keep = mask[:, :, None].to(x.dtype)
        a_in = block.norm1(x) if block.pre_norm else x
        q, k, v = att.qkv(a_in).view(b, n, 3, h, d // h).permute(2, 0, 3, 1, 4)  # [B, H, n, Dh]
        k_all, v_all = torch.cat([k_past, k], 2), torch.cat([v_past, v], 2)
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
        hid, c1 = _causal_block_conv(ffn.conv1, f_in.transpose(1, 2) * m, conv1_left)  # [B, F, n]
        out, c2 = _causal_block_conv(ffn.conv2, F.relu(hid) * m, conv2_left)
        out = out.transpose(1, 2)
        x = x + out if block.pre_norm else block.norm2(x + out)
        return x * keep, k_all, v_all, c1, c2


def _last(x: torch.Tensor, n: int) -> torch.Tensor:
    """The last min(n, size) entries of x's frame axis (3 of a [L, B, H, P, Dh] key/value cache, else the last
    axis).  A negative slice, so that the traced block graph keeps it for any cache length (an ONNX Slice
    from -n clamps as Python does)."""
    axis = 3 if x.dim() == 5 else x.dim() - 1
    if n == 0:
        return x.narrow(axis, 0, 0)
    return x[(slice(None),) * axis + (slice(-n, None),)]


class BlockDecoder:
    """Block-by-block decoding with a bounded key/value cache: `blocks(frames, frame_mask)` yields
    DecodedBlock in order (a `BlockStep` per block, its state carried).

    stack: the decoder FFTStack; mel_proj: Linear D -> M; prenet: BlockPrenet (None: no feedback, for a
    parallel checkpoint's weights).  `max_cache_frames` records the largest cache seen (the bound test)."""

    def __init__(self, stack: FFTStack, mel_proj: nn.Linear, prenet: BlockPrenet | None, layout: BlockLayout) -> None:
        self.step = BlockStep(stack, mel_proj, prenet, layout.past_frames)
        self.layout = layout
        self.max_cache_frames = 0
        self.max_cache_bytes = 0

    @torch.no_grad()
    def blocks(self, frames: torch.Tensor, frame_mask: torch.Tensor) -> Iterator[DecodedBlock]:
        """frames [B, T, D] regulated encoder frames, frame_mask [B, T] -> DecodedBlock per block."""
        if self.step.stack.training:
            raise RuntimeError("block decoding is an inference path: call .eval() first")
        t_total, bf = frames.shape[1], self.layout.block_frames
        state = self.step.initial_state(frames.shape[0], frames)
        for start in range(0, t_total, bf):
            stop = min(start + bf, t_total)
            x, coarse, state = self.step(frames[:, start:stop], frame_mask[:, start:stop],
                                         torch.tensor(start, device=frames.device), *state)
            self.max_cache_frames = max(self.max_cache_frames, state.keys.shape[3])
            self.max_cache_bytes = max(self.max_cache_bytes, _cache_bytes(state))
            yield DecodedBlock(start, x, coarse)


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


def _cache_bytes(state: BlockState) -> int:
    """The cache's bytes (the prenet's C frames are not counted: they do not depend on the past)."""
    return sum(t.numel() * t.element_size() for t in state[1:])


class StreamingRefiner(RefineWindows):
    """`FlowMatchingRefiner.sample` over a coarse mel that arrives block by block, with a bounded window
    (tts.models.refine_windows: which windows, and which of their frames are final, equals refining the whole
    coarse mel at once).  Early stop is not supported here (a batch-wide decision over the whole utterance).

    noise: [B, M, T] the start noise for the whole utterance (`per_item_noise`, same as `sample`); frame_mask
    [B, T]; min_chunk: RefineWindows'."""

    def __init__(self, refiner: FlowMatchingRefiner, steps: int, temperature: float, noise: torch.Tensor,
                 frame_mask: torch.Tensor, min_chunk: int = 32) -> None:
        super().__init__(steps * receptive_half_width(refiner), min_chunk)
        self.refiner, self.steps, self.temperature = refiner, steps, temperature
        self.noise = noise
        self.frame_mask = frame_mask  # [B, T]

    @torch.no_grad()
    def push(self, coarse: torch.Tensor, cond: torch.Tensor, final: bool = False) -> torch.Tensor:
        """coarse [B, M, n] normalised, cond [B, C, n] (the next frames) -> refined frames [B, M, n'] ready."""
        return super().push(coarse, cond, final, self._window)

    def _window(self, coarse: torch.Tensor, cond: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        return _refine_window(self.refiner, coarse, cond, self.frame_mask[:, lo:hi], self.noise[:, :, lo:hi],
                              self.steps, self.temperature)


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

"""Transformer TTS-style autoregressive acoustic model (Li et al. 2019) with reduction factor r and a KV cache.

tokens [B, L] -> encoder: embedding, convs, BiLSTM (the Tacotron 2 encoder) + alpha_e * positions -> memory [B, L, D]
previous frames [B, S, M] (go frame, then the last frame of each earlier group of r)
              -> prenet (dropout kept on at inference) -> Linear -> + alpha_d * positions   [B, S, D]
              -> N pre-norm layers {causal self-attention, cross-attention to memory, Linear FFN} -> LayerNorm
              -> Linear to r frames [B, S, r, M] + r stop logits [B, S, r]
              -> the residual postnet -> raw log-mel [B, M, T]

Why the Tacotron 2 encoder rather than an FFT (self-attention) stack: the convolutions and the BiLSTM give
each token its neighbourhood and its place in the sentence without having to learn positions, which is what
the cross-attention needs to find a diagonal early; on a small CPU budget the attention-only encoder of the
paper (3 convs + 6 self-attention layers) learns its positions slowly, and the alignment is the part of
Transformer TTS that fails to train.  It is also the encoder of the converged Tacotron 2 here (same module,
same parameter names at d_model = its encoder_dim), so its weights can start this model.  The positions
with a learned scale (alpha, initialised to 1, as in the paper) are still added to both sides, so that
keys and queries of the cross-attention share a coordinate.

The alignment (failure detection, durations, guided attention) is the cross-attention of the LAST
`alignment_layers` decoder layers, first `alignment_heads` heads of each, averaged.  Guided attention on a few
designated heads (ESPnet's num_layers/num_heads_applied_guided_attn, 2 and 2 by default) is what makes
Transformer TTS align on a small budget; the other heads stay free.  The guided-attention loss is linear in
the alignment, so the loss on the average is the average of the per-head losses.

Decoding goes through `decode_chunk(cache, inputs [B, k, M])` (tts/models/layers/causal_transformer.py):
teacher forcing is one chunk of all S steps from an empty cache, a cached free-running step is a chunk of 1,
and k drafted steps can be verified in one chunk.  `infer(use_cache=False)` recomputes the whole prefix at
every step: the reference the cache is tested and timed against.

Per-item noise: `infer(noise_seeds=[...])` draws item b's prenet dropout masks from its own torch.Generator,
so that a batched decode equals each item decoded alone at the same seed (Tacotron 2 uses the global RNG).

Everything shared with Tacotron 2 (normaliser, loss, stop bookkeeping, step limits, failure analysis) is
`ARAcousticModel` (tts/models/autoregressive.py).  Constructor defaults are the paper's size (d_model 512,
6 decoder layers, 8 heads, FFN 2048, prenet 256, postnet 512, r = 1); conf/model/transformer_ar.yaml holds
the CPU-small size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import nn

from tts.data.batch import Batch, lengths_to_mask
from tts.models.autoregressive import ARAcousticModel, ARInferenceOutput, ARStep, StopTracker, _Normalised
from tts.models.layers.causal_transformer import CausalDecoderLayer, LayerCache
from tts.models.layers.conv import Postnet
from tts.models.layers.prenet import Prenet
from tts.models.layers.tacotron_encoder import TacotronEncoder
from tts.models.layers.transformer import sinusoidal_positions
from tts.models.speculative import Speculation, SpeculativeStats, SpeculativeStepper

__all__ = ["TransformerAR", "DecoderCache", "ChunkOutput", "TransformerARInferenceOutput"]


@dataclass
class DecoderCache:
    """What a decode carries from one chunk to the next (a chunk returns a new one; see causal_transformer)."""

    layers: list[LayerCache]  # one per decoder layer
    memory_mask: torch.Tensor  # [B, L] bool, True on real tokens
    generators: list[torch.Generator] | None  # item b's prenet dropout RNG, or None (torch's global RNG)

    @property
    def length(self) -> int:
        """Decoder positions (steps of r frames) held."""
        return self.layers[0].length

    def truncated(self, length: int) -> "DecoderCache":
        """The same cache holding only its first `length` positions (speculative decoding drops the rejected
        ones; the buffers are shared, nothing is copied)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of {self.length} positions to {length}")
        return DecoderCache([replace(layer, length=length) for layer in self.layers], self.memory_mask,
                            self.generators)

    def cache_bytes(self) -> int:
        """Bytes of the self-attention K/V of the positions held plus the memory's K/V, all layers: grows
        linearly with the decoded length (2 * layers * d_model * bytes per value * batch per step)."""
        return sum(layer.nbytes() for layer in self.layers)


@dataclass
class ChunkOutput:
    """k decoder positions (normalised mel space)."""

    frames: torch.Tensor  # [B, k, r, M]
    stop_logits: torch.Tensor  # [B, k, r]
    attention: torch.Tensor  # [B, k, L] the alignment heads' cross-attention, averaged
    cache: DecoderCache


@dataclass
class TransformerARInferenceOutput(ARInferenceOutput):
    """ARInferenceOutput plus the KV cache's size at the end of the decode (0 when decoded without a cache) and,
    for a speculative decode, its counts (rounds, drafts offered and accepted)."""

    cache_bytes: int = 0
    speculative: SpeculativeStats | None = None


def check_attention_window(window: tuple[int, int] | list[int] | None) -> tuple[int, int] | None:
    """(back, ahead) tokens around the alignment's furthest token, both >= 0 and ahead >= 1, or None.

    The inference-time attention constraint of ESPnet's Tacotron 2 (`use_att_constraint`, backward 1 and forward 3
    tokens by default) applied to every cross-attention of the Transformer decoder: a decode that would skip ahead
    or fall back to words already spoken cannot, since only the tokens near the place reached get any weight.  The
    place is the argmax of the alignment heads' average (as for durations and failure detection), kept monotone."""
    if window is None:
        return None
    if len(window) != 2 or not all(isinstance(w, int) and not isinstance(w, bool) for w in window):
        raise ValueError(f"attention_window must be two ints (back, ahead), got {window!r}")
    back, ahead = window
    if back < 0 or ahead < 1:
        raise ValueError(f"attention_window must be (back >= 0, ahead >= 1) tokens, got {window!r}")
    return back, ahead


class TransformerAR(ARAcousticModel):
    item_noise_seeds = True

    def __init__(
        self,
        n_symbols: int,
        n_mels: int,
        reduction_factor: int = 1,
        d_model: int = 512,
        # encoder (Tacotron 2's: embedding -> convs -> BiLSTM of d_model channels)
        embedding_dim: int = 512,
        encoder_n_convs: int = 3,
        encoder_kernel_size: int = 5,
        encoder_dropout: float = 0.5,
        # decoder
        prenet_dim: int = 256,
        prenet_layers: int = 2,
        prenet_dropout: float = 0.5,
        prenet_dropout_at_inference: bool = True,
        decoder_layers: int = 6,
        n_heads: int = 8,
        ffn_dim: int = 2048,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        alignment_layers: int = 2,
        alignment_heads: int = 2,
        # postnet
        postnet_channels: int = 512,
        postnet_layers: int = 5,
        postnet_kernel_size: int = 5,
        postnet_dropout: float = 0.5,
        # features
        mel_mean: float = -6.0,
        mel_std: float = 2.5,
        mel_pad_value: float = math.log(1e-5),
        padding_idx: int = 0,
        # loss
        l1_weight: float = 1.0,
        l2_weight: float = 1.0,
        stop_weight: float = 1.0,
        stop_pos_weight: float = 10.0,
        guided_attention_weight: float = 0.0,
        guided_attention_sigma: float = 0.2,
        guided_attention_half_life: int | None = None,
        # inference limits and failure detection
        max_frames_per_token: float = 15.0,
        max_extra_frames: int = 100,
        skip_threshold: int = 4,
        repeat_threshold: int = 2,
        coverage_threshold: float = 0.5,
        max_uncovered_fraction: float = 0.2,
        attention_window: tuple[int, int] | list[int] | None = None,
    ) -> None:
        super().__init__(
            n_mels, reduction_factor, mel_mean, mel_std, mel_pad_value, l1_weight, l2_weight, stop_weight,
            stop_pos_weight, guided_attention_weight, guided_attention_sigma, guided_attention_half_life,
            max_frames_per_token, max_extra_frames, skip_threshold, repeat_threshold, coverage_threshold,
            max_uncovered_fraction,
        )  # fmt: skip
        if not 1 <= alignment_layers <= decoder_layers:
            raise ValueError(f"alignment_layers must be in 1..decoder_layers={decoder_layers}, got {alignment_layers}")
        if not 1 <= alignment_heads <= n_heads:
            raise ValueError(f"alignment_heads must be in 1..n_heads={n_heads}, got {alignment_heads}")
        self.attention_window = check_attention_window(attention_window)
        self.d_model = d_model
        self.alignment_layers, self.alignment_heads = alignment_layers, alignment_heads
        self.encoder = TacotronEncoder(
            n_symbols, embedding_dim, d_model, encoder_n_convs, encoder_kernel_size, encoder_dropout, padding_idx
        )
        # the paper's scaled positional encodings: x + alpha * PE, alpha learned (initialised to 1)
        self.encoder_alpha = nn.Parameter(torch.ones(()))
        self.decoder_alpha = nn.Parameter(torch.ones(()))
        self.prenet = Prenet(n_mels, prenet_dim, prenet_layers, prenet_dropout, prenet_dropout_at_inference)
        self.prenet_projection = nn.Linear(prenet_dim, d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            CausalDecoderLayer(d_model, n_heads, ffn_dim, dropout, attention_dropout) for _ in range(decoder_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)
        self.frame_projection = nn.Linear(d_model, n_mels * reduction_factor)
        self.stop_projection = nn.Linear(d_model, reduction_factor)
        self.postnet = Postnet(n_mels, postnet_channels, postnet_layers, postnet_kernel_size, postnet_dropout)

    # --- encoder --------------------------------------------------------------------------------------
    def encode(self, tokens: torch.Tensor, token_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> memory [B, L, D] (zero on padded tokens), memory_mask [B, L] bool."""
        mask = lengths_to_mask(token_lengths, tokens.shape[1])
        memory = self.encoder(tokens, token_lengths)  # [B, L, D]
        positions = sinusoidal_positions(tokens.shape[1], self.d_model, tokens.device).to(memory.dtype)
        memory = self.dropout(memory + self.encoder_alpha * positions) * mask[:, :, None]
        return memory, mask

    # --- decoder --------------------------------------------------------------------------------------
    def start_cache(self, memory: torch.Tensor, memory_mask: torch.Tensor, noise_seeds: list[int] | None = None,
                    capacity: int = 64) -> DecoderCache:
        """An empty cache for a batch: the memory's cross-attention K/V of every layer (computed here, once),
        room for `capacity` positions (it grows beyond), and item b's prenet RNG seeded from noise_seeds[b]."""
        generators = None
        if noise_seeds is not None:
            if len(noise_seeds) != memory.shape[0]:
                raise ValueError(f"{len(noise_seeds)} noise seeds for a batch of {memory.shape[0]}")
            generators = [torch.Generator(device=memory.device).manual_seed(int(s)) for s in noise_seeds]
        return DecoderCache([layer.start(memory, capacity) for layer in self.layers], memory_mask, generators)

    def embed(self, inputs: torch.Tensor, start: int, generators: list[torch.Generator] | None) -> torch.Tensor:
        """inputs [B, k, M] (normalised previous frames of positions start..start+k-1) -> decoder input [B, k, D].
        The prenet's dropout masks are drawn here, once per position."""
        x = self.prenet_projection(self.prenet(inputs, generators))
        positions = sinusoidal_positions(inputs.shape[1], self.d_model, inputs.device, start=start).to(x.dtype)
        return self.dropout(x + self.decoder_alpha * positions)

    def run_layers(self, x: torch.Tensor, cache: DecoderCache) -> ChunkOutput:
        """Embedded chunk x [B, k, D] at positions cache.length.. -> outputs and the longer cache."""
        layer_caches, attentions = [], []
        for layer, layer_cache in zip(self.layers, cache.layers):
            out = layer(x, layer_cache, cache.memory_mask)
            x = out.x
            layer_caches.append(out.cache)
            attentions.append(out.attention[:, : self.alignment_heads])  # [B, h, k, L]
        x = self.final_norm(x)
        B, k, _ = x.shape
        # [B, k, L]: the alignment heads of the last alignment_layers layers, averaged
        attention = torch.cat(attentions[-self.alignment_layers :], dim=1).mean(dim=1)
        return ChunkOutput(
            frames=self.frame_projection(x).view(B, k, self.r, self.n_mels),
            stop_logits=self.stop_projection(x),
            attention=attention,
            cache=DecoderCache(layer_caches, cache.memory_mask, cache.generators),
        )

    def decode_chunk(self, cache: DecoderCache, inputs: torch.Tensor) -> ChunkOutput:
        """inputs [B, k, M]: the previous frame of each of k new positions (normalised) -> their r frames each,
        stop logits and alignment, causal inside the chunk; the given cache stays valid for its own positions."""
        return self.run_layers(self.embed(inputs, cache.length, cache.generators), cache)

    # --- teacher forcing -------------------------------------------------------------------------------
    def _teacher_forced(self, batch: Batch) -> _Normalised:
        memory, mask = self.encode(batch.tokens, batch.token_lengths)
        inputs = self._decoder_inputs(self._target(batch))  # [B, S, M]
        out = self.decode_chunk(self.start_cache(memory, mask, capacity=inputs.shape[1]), inputs)
        return self._normalised(out.frames, out.stop_logits, out.attention, batch.mel_lengths)

    # --- inference -------------------------------------------------------------------------------------
    def infer(
        self,
        tokens: torch.Tensor,
        token_lengths: torch.Tensor,
        max_decoder_steps: int | None = None,
        stop_threshold: float = 0.5,
        use_cache: bool = True,
        noise_seeds: list[int] | None = None,
        speculation: Speculation | None = None,
        attention_window: tuple[int, int] | list[int] | None = None,
    ) -> TransformerARInferenceOutput:
        """Batched free-running decode (stops and limits as Tacotron2.infer).  use_cache=False recomputes every
        layer over the whole prefix at each step (the reference); the prenet noise of a position is drawn once
        either way, so both give the same frames.  noise_seeds: one per item (None: torch's global RNG).
        speculation: decode speculatively (tts/models/speculative.py; cached; noise_seeds drawn from torch's
        global RNG when not given, since a round rewinds the items' generators).  attention_window (back, ahead):
        every cross-attention of a step sees only the tokens from `back` before to `ahead` after the furthest token
        the alignment has reached (None: the model's own `attention_window`, itself None for free attention)."""
        window = check_attention_window(attention_window) if attention_window is not None else self.attention_window
        B = tokens.shape[0]
        memory, mask = self.encode(tokens, token_lengths)
        stops = StopTracker(self.step_limits(token_lengths, max_decoder_steps), self.r, stop_threshold)
        if window is not None and (speculation is not None or not use_cache):
            raise ValueError("attention_window constrains plain cached decoding (use_cache=True, no speculation)")
        if speculation is not None:
            if not use_cache:
                raise ValueError("speculative decoding verifies drafts against the KV cache: use_cache must be True")
            if noise_seeds is None:
                noise_seeds = torch.randint(0, 2**62, (B,)).tolist()
            stepper = SpeculativeStepper(
                speculation, self.decode_chunk, self.start_cache(memory, mask, noise_seeds, int(stops.limits.max())),
                lambda generators, n: self.prenet.skip(generators, n, memory.device), lambda: ~stops.finished,
                tokens.shape[1])
            result = self._decode(stepper, stops, self.go_frame(B, memory), token_lengths)
            return TransformerARInferenceOutput(**vars(result), cache_bytes=stepper.cache.cache_bytes(),
                                                speculative=stepper.stats)
        cache = self.start_cache(memory, mask, noise_seeds, capacity=int(stops.limits.max()) if use_cache else 1)
        embedded: list[torch.Tensor] = []  # use_cache=False: every position's decoder input [B, 1, D] so far
        focus = torch.zeros(B, dtype=torch.long, device=tokens.device)  # [B] furthest token the alignment reached
        token_index = torch.arange(tokens.shape[1], device=tokens.device)  # [L]

        def step(s: int, frame: torch.Tensor) -> ARStep:
            nonlocal cache, focus
            if use_cache and window is not None:
                back, ahead = window
                near = (token_index >= (focus - back)[:, None]) & (token_index <= (focus + ahead)[:, None])  # [B, L]
                out = self.decode_chunk(replace(cache, memory_mask=mask & near), frame[:, None])
                cache = replace(out.cache, memory_mask=mask)
                focus = torch.maximum(focus, out.attention[:, -1].argmax(dim=-1))
            elif use_cache:
                out = self.decode_chunk(cache, frame[:, None])
                cache = out.cache
            else:
                embedded.append(self.embed(frame[:, None], s, cache.generators))
                out = self.run_layers(torch.cat(embedded, dim=1), self.start_cache(memory, mask, capacity=s + 1))
            return ARStep(out.frames[:, -1], out.stop_logits[:, -1], out.attention[:, -1])

        result = self._decode(step, stops, self.go_frame(B, memory), token_lengths)
        return TransformerARInferenceOutput(**vars(result), cache_bytes=cache.cache_bytes() if use_cache else 0)

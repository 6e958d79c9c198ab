"""Causal Transformer decoder layers with a key/value cache (the Transformer AR, tts/models/transformer_ar.py).

A decoder call processes a CHUNK of k new positions [P, P + k) given a cache of the P positions before it:
the self-attention's queries are the k new positions, its keys/values the cached P plus the k new ones, with
the causal mask applying inside the chunk (position P + i sees keys <= P + i).  So one code path serves
  - a cached free-running step (k = 1: each step computes only the new position),
  - teacher forcing (one chunk of all S positions from an empty cache),
  - verifying k drafted positions at once (speculative decoding).
The cross-attention's keys/values are projections of the encoder memory: computed once per utterance
(`CrossAttention.memory_kv`) and kept in the cache, never recomputed per step.

Cache storage: each layer's self-attention K/V live in buffers [B, H, capacity, Dh] that grow by doubling, so
a step costs O(1) amortised copying instead of an O(P) concatenation.  A chunk writes positions [P, P + k)
and returns a NEW `LayerCache` of length P + k over the same buffers: the old one stays valid for its own
P positions (what it never reads may be overwritten), so a caller can go back to an earlier cache (reject
drafted frames) without any copy.  Going back then forward again along two branches at once is not supported;
nor is backpropagating through several chunks (a later write would modify what an earlier chunk read):
training is one chunk from an empty cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from tts.models.layers.transformer import MultiHeadSelfAttention


@dataclass
class LayerCache:
    """One decoder layer's cache for a batch: the past self-attention K/V and the memory's K/V."""

    self_k: torch.Tensor  # [B, H, capacity, Dh], positions < length valid
    self_v: torch.Tensor  # [B, H, capacity, Dh]
    length: int  # positions held
    cross_k: torch.Tensor  # [B, H, L, Dh] projection of the encoder memory, computed once
    cross_v: torch.Tensor  # [B, H, L, Dh]

    def nbytes(self) -> int:
        """Bytes the held positions and the memory K/V take (the capacity beyond `length` is slack)."""
        per_position = self.self_k[:, :, :1].numel() * self.self_k.element_size()  # B x H x Dh values
        memory = (self.cross_k.numel() + self.cross_v.numel()) * self.cross_k.element_size()
        return 2 * per_position * self.length + memory


def _split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[B, T, D] -> [B, H, T, D / H]."""
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """[B, H, T, Dh] -> [B, T, H * Dh]."""
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)


class CachedCausalSelfAttention(MultiHeadSelfAttention):
    """Causal multi-head self-attention over a chunk: x [B, k, D] (positions P..P+k-1) + cache -> [B, k, D].
    The projections (qkv, out) are the FFT stack's self-attention's; the keys come from the cache too."""

    def forward(  # type: ignore[override]
self, x: torch.Tensor, cache: LayerCache) -> tuple[torch.Tensor, LayerCache]:
        B, k, D = x.shape
        q, key, value = (_split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # [B, H, k, Dh]
        cache = _append(cache, key, value)
        P = cache.length - k
        keys, values = cache.self_k[:, :, : cache.length], cache.self_v[:, :, : cache.length]  # [B, H, P + k, Dh]
        # [k, P + k] True = may attend: query P + i sees keys 0 .. P + i (the causal mask inside the chunk).
        causal = torch.arange(P + k, device=x.device)[None, :] <= torch.arange(P, P + k, device=x.device)[:, None]
        y = F.scaled_dot_product_attention(
            q, keys, values, attn_mask=causal, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(_merge_heads(y)), cache


def _append(cache: LayerCache, key: torch.Tensor, value: torch.Tensor) -> LayerCache:
    """Write the chunk's key/value [B, H, k, Dh] at positions [length, length + k); grow the buffers by doubling
    when they are full.  Returns the longer cache (the given one keeps its own length)."""
    end = cache.length + key.shape[2]
    self_k, self_v = cache.self_k, cache.self_v
    if end > self_k.shape[2]:
        capacity = max(end, 2 * self_k.shape[2])
        grown = [t.new_zeros(*t.shape[:2], capacity, t.shape[3]) for t in (self_k, self_v)]
        for new, old in zip(grown, (self_k, self_v)):
            new[:, :, : cache.length] = old[:, :, : cache.length]
        self_k, self_v = grown
    self_k[:, :, cache.length : end] = key
    self_v[:, :, cache.length : end] = value
    return replace(cache, self_k=self_k, self_v=self_v, length=end)


@dataclass
class CrossAttentionOutput:
    context: torch.Tensor  # [B, k, D]
    weights: torch.Tensor  # [B, H, k, L] attention of each head (0 on masked memory positions)


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions to the encoder memory, returning its weights (the alignment).

    Written out (not scaled_dot_product_attention) because the weights are needed: guided attention in
    training, failure detection and durations at inference."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} not divisible by n_heads {n_heads}")
        self.n_heads = n_heads
        self.query = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def memory_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """memory [B, L, D] -> keys, values [B, H, L, Dh]; once per utterance."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        return _split_heads(k, self.n_heads), _split_heads(v, self.n_heads)

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                memory_mask: torch.Tensor) -> CrossAttentionOutput:
        """x [B, k, D], keys/values [B, H, L, Dh], memory_mask [B, L] bool (True on real tokens)."""
        q = _split_heads(self.query(x), self.n_heads)  # [B, H, k, Dh]
        scores = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [B, H, k, L]
        # -inf gives exactly zero weight on padded tokens, so a padded item attends exactly as it would alone.
        weights = scores.masked_fill(~memory_mask[:, None, None, :], float("-inf")).softmax(dim=-1)
        y = F.dropout(weights, self.dropout, self.training) @ values  # [B, H, k, Dh]
        return CrossAttentionOutput(context=self.out(_merge_heads(y)), weights=weights)


class PositionwiseFeedForward(nn.Module):
    """Linear D->F, ReLU, dropout, Linear F->D on each position alone: a 'same' convolution here would read
    the frames after a position, which a causal decoder has not made yet."""

    def __init__(self, d_model: int, d_hidden: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


@dataclass
class DecoderLayerOutput:
    x: torch.Tensor  # [B, k, D]
    attention: torch.Tensor  # [B, H, k, L] cross-attention weights
    cache: LayerCache


class CausalDecoderLayer(nn.Module):
    """Pre-norm decoder layer: x + SelfAtt(LN x); x + CrossAtt(LN x, memory); x + FFN(LN x), dropout on each
    residual branch.  Pre-norm trains without the careful warm-up post-norm needs (Xiong et al. 2020)."""

    def __init__(self, d_model: int, n_heads: int, d_hidden: int, dropout: float = 0.1,
                 attention_dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attention = CachedCausalSelfAttention(d_model, n_heads, attention_dropout)
        self.cross_attention = CrossAttention(d_model, n_heads, attention_dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_hidden, dropout)
        self.norms = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def start(self, memory: torch.Tensor, capacity: int) -> LayerCache:
        """memory [B, L, D] -> an empty cache with room for `capacity` positions before it grows."""
        cross_k, cross_v = self.cross_attention.memory_kv(memory)
        B, H, _, Dh = cross_k.shape
        empty = cross_k.new_zeros(B, H, max(capacity, 1), Dh)
        return LayerCache(self_k=empty, self_v=empty.clone(), length=0, cross_k=cross_k, cross_v=cross_v)

    def forward(self, x: torch.Tensor, cache: LayerCache, memory_mask: torch.Tensor) -> DecoderLayerOutput:
        h, cache = self.self_attention(self.norms[0](x), cache)
        x = x + self.dropout(h)
        cross = self.cross_attention(self.norms[1](x), cache.cross_k, cache.cross_v, memory_mask)
        x = x + self.dropout(cross.context)
        x = x + self.dropout(self.ffn(self.norms[2](x)))
        return DecoderLayerOutput(x=x, attention=cross.weights, cache=cache)

"""Named outputs shared by all acoustic models (no long tuples)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LossOutput:
    """`total` is what the optimiser sees; `terms` are the detached parts, for logging.

    `images` carries optional tensors worth plotting (e.g. "alignment": [L, T] of the first item,
    "mel_pred": [M, T]); the trainer turns them into TensorBoard images.
    """

    total: torch.Tensor
    terms: dict[str, torch.Tensor] = field(default_factory=dict)
    images: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class MelOutput:
    """What every model's `infer()` returns at least: raw log-mel [B, M, T] and valid lengths [B]."""

    mels: torch.Tensor
    mel_lengths: torch.Tensor


@dataclass(frozen=True)
class InferenceSpec:
    """What a model declares about its inference (tts.runtime's engines read it; nothing is sniffed):
    the controls it takes (tts.runtime.controls names), whether block-wise decoding works, whether it is
    autoregressive, and its own default controls (from its config, e.g. the shipped NAR's K and temperature)."""

    controls: frozenset[str]
    block_mode: bool
    autoregressive: bool
    defaults: dict
    # infer() takes noise_seeds (one per item: an item's noise does not depend on its batch); the NAR always
    # does, an AR model where it says so (its engine otherwise seeds torch's global RNG around the call)
    item_noise_seeds: bool = True

"""The corpus's log-mel statistics installed into a model's normalisation buffers: one policy for every model.

Each acoustic model (Tacotron 2, FastSpeech 2, the Transformer AR, the unsupervised aligner) normalises the raw
log-mel per channel, (mel - mel_mean) / mel_std, with [M] buffers that travel in its state dict;
recipes.train fills them from data_prep's features/stats.json, stats["mel"]["mean"/"std"].
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

STD_FLOOR = 1e-2  # natural-log units: a near-constant channel (always at the log floor) must not be scaled ~1/0


def install_mel_statistics(mel: Mapping, mean: torch.Tensor, std: torch.Tensor) -> None:
    """Copy mel["mean"] / mel["std"] (1 or M values each; absent: the buffer keeps its value) into the [M]
    buffers `mean` / `std`.  A wrong channel count (another mel definition) or a non-finite value (statistics of a
    corpus without frames) is an error; std is floored at STD_FLOOR."""
    n_mels = mean.numel()
    for name, buf in (("mean", mean), ("std", std)):
        if mel.get(name) is None:
            continue
        value = torch.as_tensor(mel[name], dtype=torch.float32).flatten()
        if value.numel() == 1:
            value = value.expand(n_mels)
        if value.numel() != n_mels:
            raise ValueError(f"mel {name} statistics have {value.numel()} channels, the model has n_mels={n_mels}")
        if not torch.isfinite(value).all():
            raise ValueError(f"mel {name} statistics must be finite, got {value.tolist()}")
        buf.copy_(value.clamp_min(STD_FLOOR) if name == "std" else value)

"""HiFi-GAN vocoder: SpeechBrain's `HifiganGenerator` behind the project's `Vocoder` interface.

The generator maps a raw log-mel [B, n_mels, T] to a waveform [B, 1, T * prod(upsample_rates)]: each
transposed convolution has padding (k - u) // 2, so with even k - u it upsamples exactly by its stride
and output sample block [t*hop, (t+1)*hop) belongs to mel frame t.  The product of the upsample rates
must therefore equal the mel hop length; anything else would silently stretch or squash time, so it is
an error at construction.

Built from explicit typed arguments (conf/vocoder/hifigan_v1.yaml, hifigan_v3.yaml); `mel_config` is
passed by whoever builds it (recipe, checkpoint loader) and fixes `in_channels = n_mels`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from speechbrain.lobes.models.HifiGAN import HifiganGenerator
from torch import nn

from tts.audio import MelConfig
from tts.vocoder.base import Vocoder


class UpsamplingMismatchError(ValueError):
    """The generator's total upsampling differs from the mel hop length."""


def check_upsampling(upsample_rates: Sequence[int], upsample_kernel_sizes: Sequence[int], hop_length: int) -> None:
    """Raise a clear error unless the upsampling stack produces exactly hop_length samples per frame."""
    if len(upsample_rates) != len(upsample_kernel_sizes):
        raise ValueError(
            f"upsample_rates {list(upsample_rates)} and upsample_kernel_sizes {list(upsample_kernel_sizes)} "
            "must have the same length (one transposed convolution each)"
        )
    product = math.prod(upsample_rates)
    if product != hop_length:
        raise UpsamplingMismatchError(
            f"HiFi-GAN upsample_rates {list(upsample_rates)} multiply to {product}, but the mel config's "
            f"hop_length is {hop_length}: the generator must produce exactly hop_length samples per mel frame. "
            "Change upsample_rates (e.g. [8, 8, 2, 2] or [8, 8, 4] for hop 256) or use a matching mel config."
        )
    for u, k in zip(upsample_rates, upsample_kernel_sizes):
        # (k - u) odd would make the transposed conv output T*u - 1 samples: lengths drift per layer.
        if k < u or (k - u) % 2:
            raise ValueError(f"upsample kernel {k} with rate {u}: need kernel >= rate and (kernel - rate) even")


class HifiGanVocoder(Vocoder):
    """log-mel [B, M, T] -> wave [B, T * hop] with a HiFi-GAN generator (weight-normed while training)."""

    def __init__(
        self,
        mel_config: MelConfig,
        upsample_rates: Sequence[int],
        upsample_kernel_sizes: Sequence[int],
        upsample_initial_channel: int,
        resblock_type: str,
        resblock_kernel_sizes: Sequence[int],
        resblock_dilation_sizes: Sequence[Sequence[int]],
        inference_padding: int = 5,
    ) -> None:
        if not isinstance(mel_config, MelConfig):
            # e.g. a DictConfig: hydra's instantiate() converts a MelConfig *object* kwarg; pass the
            # node from tts.vocoder.registry.build_kwargs() instead.
            raise TypeError(f"mel_config must be a tts.audio.MelConfig, got {type(mel_config).__name__}")
        super().__init__(mel_config)
        # Plain Python values only (a Hydra ListConfig must never reach the module or its checkpoint).
        upsample_rates = [int(u) for u in upsample_rates]
        upsample_kernel_sizes = [int(k) for k in upsample_kernel_sizes]
        resblock_kernel_sizes = [int(k) for k in resblock_kernel_sizes]
        resblock_dilation_sizes = [[int(d) for d in ds] for ds in resblock_dilation_sizes]
        resblock_type = str(resblock_type)
        if resblock_type not in ("1", "2"):
            raise ValueError(f"resblock_type must be '1' or '2', got {resblock_type!r}")
        if len(resblock_kernel_sizes) != len(resblock_dilation_sizes):
            raise ValueError("resblock_kernel_sizes and resblock_dilation_sizes need one entry per MRF branch")
        if upsample_initial_channel % (2 ** len(upsample_rates)):
            raise ValueError(
                f"upsample_initial_channel {upsample_initial_channel} must be divisible by "
                f"2**{len(upsample_rates)} (channels halve at every upsampling layer)"
            )
        check_upsampling(upsample_rates, upsample_kernel_sizes, mel_config.hop_length)
        self.upsample_rates = upsample_rates
        # Frames of replicate padding added on each side at inference and cropped off afterwards: the
        # edge frames then see mel context instead of the convs' zero padding (SpeechBrain pads the same
        # way in `HifiganGenerator.inference` but keeps the extra audio; we crop it so that sample
        # t*hop still belongs to frame t).
        self.inference_padding = int(inference_padding)
        self.generator = HifiganGenerator(
            in_channels=mel_config.n_mels,
            out_channels=1,
            resblock_type=resblock_type,
            resblock_dilation_sizes=resblock_dilation_sizes,
            resblock_kernel_sizes=resblock_kernel_sizes,
            upsample_kernel_sizes=upsample_kernel_sizes,
            upsample_initial_channel=int(upsample_initial_channel),
            upsample_factors=upsample_rates,
            inference_padding=self.inference_padding,
        )
        self.weight_norm_removed = False

    def train_forward(self, mel: torch.Tensor) -> torch.Tensor:
        """Differentiable generator pass for training: mel [B, M, S] -> wave [B, 1, S * hop], no padding."""
        return self.generator(mel)

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        p = self.inference_padding
        hop = self.mel_config.hop_length
        t = mel.shape[-1]
        if p > 0:
            mel = nn.functional.pad(mel, (p, p), mode="replicate")  # [B, M, T + 2p]
        wave = self.generator(mel)[:, 0]  # [B, (T + 2p) * hop]
        return wave[:, p * hop : (p + t) * hop]  # [B, T * hop]

    def remove_weight_norm(self) -> "HifiGanVocoder":
        """Fold the weight-norm parametrisation into plain weights (faster inference; idempotent).

        Only for inference: afterwards the state_dict no longer matches a freshly built (training)
        generator, so do it after loading weights, never before saving a checkpoint.
        """
        if not self.weight_norm_removed:
            self.generator.remove_weight_norm()
            self.weight_norm_removed = True
        return self


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())

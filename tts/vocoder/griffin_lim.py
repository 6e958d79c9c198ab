"""Griffin-Lim baseline vocoder (torchaudio), reading the project's log-mel."""

from __future__ import annotations

import torch
import torchaudio

from tts.audio import MelConfig
from tts.vocoder.base import Vocoder


class GriffinLimVocoder(Vocoder):
    """log-mel -> linear magnitude by the filterbank's pseudo-inverse -> Griffin-Lim phase recovery."""

    def __init__(self, mel_config: MelConfig, n_iter: int = 32, momentum: float = 0.99, power: float = 1.0) -> None:
        super().__init__(mel_config)
        c = mel_config
        fb = torchaudio.functional.melscale_fbanks(
            c.n_fft // 2 + 1, c.f_min, c.f_max, c.n_mels, c.sample_rate, norm=c.norm, mel_scale=c.mel_scale
        )  # [F, M]
        # mel = fb^T @ mag  => mag ~= pinv(fb^T) @ mel; cheaper and deterministic vs InverseMelScale's SGD.
        self.register_buffer("inverse_fb", torch.linalg.pinv(fb.T), persistent=False)  # [F, M]
        # `power` > 1 sharpens the magnitude before phase recovery (a standard Tacotron trick that
        # reduces the buzzy smearing of the pseudo-inverse).
        self.power = power
        self.register_buffer("window", torch.hann_window(c.win_length), persistent=False)
        self.n_iter, self.momentum = n_iter, momentum

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        # The inverse STFT reflect-pads by n_fft // 2, so very short mels (an untrained model's
        # output, a one-word utterance) are padded with silence to n_fft // hop + 2 frames; the
        # interface trims the result back to frames * hop samples.
        min_frames = self.mel_config.n_fft // self.mel_config.hop_length + 2
        if mel.shape[-1] < min_frames:
            mel = torch.nn.functional.pad(mel, (0, min_frames - mel.shape[-1]), value=self.mel_config.log_floor)
        mag = torch.exp(mel.float())  # [B, M, T], magnitude mel (power 1)
        if self.mel_config.power != 1.0:
            mag = mag ** (1.0 / self.mel_config.power)
        linear = torch.clamp(self.inverse_fb @ mag, min=0.0) ** self.power  # [B, F, T]
        c = self.mel_config
        return torchaudio.functional.griffinlim(
            linear, self.window, c.n_fft, c.hop_length, c.win_length, power=1.0, n_iter=self.n_iter,
            momentum=self.momentum, rand_init=False,
            # T frames come from (T-1)*hop samples with center=True; the interface pads to T*hop.
            length=c.n_samples(mel.shape[-1] - 1),
        )

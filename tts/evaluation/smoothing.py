"""Over-smoothing measures: per-band global variance of the log-mel and spectral flatness.

A model trained with an L1/L2 loss on a one-to-many corpus learns the conditional mean: its spectra
are blurred over the renditions it has heard, so the log-mel varies less over time in every band than
real speech does (the global variance, GV, of Toda & Tokuda 2007; FastSpeech 2 section 3 and
DiffSinger discuss the same effect) and harmonics smear, which raises the spectral flatness.

For one utterance (mel of the wave by the project's one mel definition, tts.audio):
    gv_ratio_db    mean over the n_mels bands of 10 log10(var_t(syn band) / var_t(ref band)),
                   var_t over the frames; 0 = as much variation as the recording, < 0 = over-smoothed
    flatness       mean over frames of the spectral flatness of the linear STFT power,
                   exp(mean log P) / mean P, over bins from `f_min` to `f_max` of the mel config
Both are computed on the speech frames only (frame energy within 40 dB of the utterance's loudest),
so different amounts of leading/trailing silence do not count as variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from tts.audio import MelConfig, MelSpectrogram

SPEECH_FLOOR_DB = 40.0  # frames more than this below the loudest frame are silence
SILENCE_POWER = 1e-10  # a frame's summed STFT power at or below this is digital silence (-100 dB)


@dataclass(frozen=True)
class Smoothing:
    gv_db: np.ndarray  # [n_mels] 10 log10 of the per-band variance over speech frames
    flatness: float  # mean spectral flatness over speech frames, in (0, 1]


def _speech_frames(power: torch.Tensor) -> torch.Tensor:
    """power [bins, T] -> bool [T]: frames within SPEECH_FLOOR_DB of the loudest."""
    energy_db = 10 * torch.log10(power.sum(0).clamp_min(SILENCE_POWER))
    return (energy_db >= energy_db.max() - SPEECH_FLOOR_DB) & (energy_db > 10 * math.log10(SILENCE_POWER))


def measure(wave: np.ndarray, mel_fn: MelSpectrogram) -> Smoothing:
    """wave [N] float at mel_fn.config.sample_rate -> its GV and flatness."""
    config: MelConfig = mel_fn.config
    x = torch.as_tensor(np.asarray(wave, dtype=np.float32))
    with torch.no_grad():
        mel = mel_fn(x)  # [n_mels, T], natural-log magnitude
        power = mel_fn.magnitude(x).double() ** 2  # [n_fft // 2 + 1, T]
    keep = _speech_frames(power)
    if int(keep.sum()) < 2:
        raise ValueError("fewer than two speech frames")
    gv = mel[:, keep].double().var(dim=1, unbiased=False).clamp_min(1e-12)  # [n_mels]
    hz = torch.linspace(0, config.sample_rate / 2, power.shape[0], dtype=torch.float64)
    band = (hz >= config.f_min) & (hz <= config.f_max)
    p = power[band][:, keep].clamp_min(1e-20)  # [bins in band, T_speech]
    flat = torch.exp(torch.log(p).mean(0)) / p.mean(0)  # [T_speech]
    return Smoothing(gv_db=(10 * torch.log10(gv)).numpy(), flatness=float(flat.mean()))


def compare(syn: Smoothing, ref: Smoothing) -> dict[str, float]:
    """The per-utterance figures that recipes.evaluate reports."""
    return {"gv_ratio_db": float(np.mean(syn.gv_db - ref.gv_db)), "spectral_flatness": syn.flatness,
            "ref_spectral_flatness": ref.flatness}

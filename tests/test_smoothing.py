"""tts.evaluation.smoothing: the over-smoothing measures of the multimodality lab."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.evaluation import smoothing

WAV = sorted((Path(__file__).parent / "fixtures" / "slt20" / "wavs").glob("*.wav"))[0]


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    return load_wav(WAV, 22050).numpy()


def test_a_recording_against_itself_is_zero(clean):
    mel_fn = MelSpectrogram(MelConfig.default())
    m = smoothing.measure(clean, mel_fn)
    out = smoothing.compare(m, m)
    assert out["gv_ratio_db"] == 0.0 and 0 < m.flatness < 0.5


def test_a_blurred_spectrum_has_less_variance_and_is_flatter(clean):
    """Noise fills the valleys between harmonics and the quiet bands: flatter, less variation over time."""
    mel_fn = MelSpectrogram(MelConfig.default())
    noisy = clean + np.random.default_rng(0).normal(0, 0.02, clean.shape).astype(np.float32)
    ref, syn = smoothing.measure(clean, mel_fn), smoothing.measure(noisy, mel_fn)
    out = smoothing.compare(syn, ref)
    assert out["gv_ratio_db"] < -1.0
    assert out["spectral_flatness"] > 1.5 * out["ref_spectral_flatness"]


def test_silence_is_an_error():
    with pytest.raises(ValueError, match="speech frames"):
        smoothing.measure(np.zeros(600, dtype=np.float32), MelSpectrogram(MelConfig.default()))

"""The cached per-utterance features of a corpus: what DIR/features/ID.pt holds, how it is made, and
when a cached file is still valid (the product reads it: tts.data.dataset, tts.vocoder.data; the
extraction command over a whole corpus is data_prep.features).

DIR/features/ID.pt (torch.save dict):
    mel     float16 [n_mels, T]  tts.audio.MelSpectrogram(MelConfig.default()) of wavs/ID.wav
    pitch   float32 [T]          Hz, 0 = unvoiced; the corpus's pitch tracker (corpus_pitch_config)
    energy  float32 [T]          L2 norm over frequency of the linear STFT magnitude frame
    mel_config, pitch_config, n_samples, version   (what the cache is valid for)
with T = 1 + N // hop for N samples. All three share the mel framing (center=True): frame t is centred
on sample t * hop; the tracker's frame t is at t * frame_period ms = t * hop samples with frame_period =
hop / sr * 1000, so its contour lines up with the mel frames; it is trimmed/zero-padded to exactly T.

The pitch tracker is a property of the corpus (DIR/corpus.json "pitch_config"; absent: dio): dio is fast and
right on the Festival voices, but on Piper's joe (a male voice) it doubles and invents voicing: on 12 joe test
utterances dio (any search range) lies 820-880 cents RMS from harvest with 36-38 % of frames voiced
differently, where on slt the two agree to 84-92 cents (harvest costs ~0.2 s per second of audio, dio 0.01).

A cached file is reused only if its mel_config, pitch_config, version and n_samples match; otherwise
(stale mel definition, rebuilt wav, corrupt file) it is recomputed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts.audio import MelConfig, MelSpectrogram

FEATURE_VERSION = 1
# The default tracker: pyworld's dio with its own default search range.
PITCH_CONFIG: dict[str, Any] = {"method": "pyworld.dio+stonemask", "f0_floor": 71.0, "f0_ceil": 800.0}
# Harvest, for voices dio tracks badly (a floor under a male voice's creak).
HARVEST_PITCH_CONFIG: dict[str, Any] = {"method": "pyworld.harvest", "f0_floor": 50.0, "f0_ceil": 500.0}
PITCH_METHODS = (PITCH_CONFIG["method"], HARVEST_PITCH_CONFIG["method"])


def corpus_pitch_config(root: str | Path) -> dict[str, Any]:
    """The pitch tracker of the corpus in `root`: corpus.json's "pitch_config", else PITCH_CONFIG (dio)."""
    path = Path(root) / "corpus.json"
    config = json.loads(path.read_text()).get("pitch_config") if path.is_file() else None
    if config is None:
        return dict(PITCH_CONFIG)
    if not isinstance(config, dict) or config.get("method") not in PITCH_METHODS \
            or not 0 < config.get("f0_floor", 0) < config.get("f0_ceil", 0):
        raise ValueError(f"{path}: pitch_config must be {{method: one of {list(PITCH_METHODS)}, f0_floor, f0_ceil}} "
                         f"with 0 < f0_floor < f0_ceil, got {config!r}")
    return {"method": config["method"], "f0_floor": float(config["f0_floor"]), "f0_ceil": float(config["f0_ceil"])}


def frame_period_ms(config: MelConfig) -> float:
    return config.hop_length / config.sample_rate * 1000.0


def compute_pitch(wave: np.ndarray, config: MelConfig, n_frames: int,
                  pitch_config: dict[str, Any] = PITCH_CONFIG) -> np.ndarray:
    """wave float [N] -> f0 float32 [n_frames] in Hz (0 unvoiced), frame t at sample t * hop."""
    import pyworld  # here, not at import: reading cached pitch must not need the compiled extension

    x = np.ascontiguousarray(wave, dtype=np.float64)
    search = {"f0_floor": pitch_config["f0_floor"], "f0_ceil": pitch_config["f0_ceil"],
              "frame_period": frame_period_ms(config)}
    if pitch_config["method"] == HARVEST_PITCH_CONFIG["method"]:
        f0, _ = pyworld.harvest(x, config.sample_rate, **search)
    elif pitch_config["method"] == PITCH_CONFIG["method"]:
        f0, times = pyworld.dio(x, config.sample_rate, **search)
        f0 = pyworld.stonemask(x, f0, times, config.sample_rate)
    else:
        raise ValueError(f"unknown pitch method {pitch_config['method']!r}; known: {list(PITCH_METHODS)}")
    out = np.zeros(n_frames, dtype=np.float32)  # dio gives 1 + int(N / hop) frames, +-1 from rounding
    m = min(n_frames, len(f0))
    out[:m] = f0[:m]
    return out


def compute_features(wave: torch.Tensor, mel_fn: MelSpectrogram,
                     pitch_config: dict[str, Any] = PITCH_CONFIG) -> dict[str, Any]:
    """wave float32 [N] -> the dict stored in ID.pt."""
    config = mel_fn.config
    n_frames = config.n_frames(wave.numel())
    with torch.no_grad():
        mel = mel_fn(wave)  # [n_mels, T]
        energy = torch.linalg.vector_norm(mel_fn.magnitude(wave), dim=0)  # [n_fft//2+1, T] -> [T]
    pitch = torch.from_numpy(compute_pitch(wave.numpy(), config, n_frames, pitch_config))
    if mel.shape != (config.n_mels, n_frames) or energy.shape != (n_frames,):
        raise RuntimeError(f"frame count mismatch: mel {tuple(mel.shape)}, energy {tuple(energy.shape)}, "
                           f"expected T = {n_frames}")
    return {
        "mel": mel.to(torch.float16),
        "pitch": pitch,
        "energy": energy.float(),
        "mel_config": config.to_dict(),
        "pitch_config": dict(pitch_config),
        "n_samples": int(wave.numel()),
        "version": FEATURE_VERSION,
    }


def pitch_is_current(d: dict[str, Any], config: MelConfig, n_samples: int,
                     pitch_config: dict[str, Any] = PITCH_CONFIG) -> bool:
    """A cached file's pitch was made the current way for this audio and frame grid (what a reader of the
    pitch alone needs, e.g. the source-filter vocoder's data; a pitch-only file qualifies)."""
    pitch = d.get("pitch")
    return (
        d.get("version") == FEATURE_VERSION
        and d.get("mel_config") == config.to_dict()
        and d.get("pitch_config") == pitch_config
        and d.get("n_samples") == n_samples
        and isinstance(pitch, torch.Tensor) and pitch.shape == (config.n_frames(n_samples),)
    )


def is_current(d: dict[str, Any], config: MelConfig, n_samples: int,
               pitch_config: dict[str, Any] = PITCH_CONFIG) -> bool:
    return pitch_is_current(d, config, n_samples, pitch_config) and all(k in d for k in ("mel", "energy"))

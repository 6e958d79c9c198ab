"""The source-filter vocoder's DSP render in numpy, for the ONNX engine (whole utterances): the twin of
tts.vocoder.dsp.render, which the torch vocoder trains and streams with.  Kept operation for operation
equal to it (tests/test_onnx.py holds the two engines' waves together); the one piece of model maths still
written twice, until the render runs inside the vocoder's exported graph (ONNX has no complex tensors:
the torch render's complex filter spectra must first be written as real and imaginary parts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tts.noise import hash_noise

TWO_PI = 2.0 * math.pi


def frame_to_samples(x: np.ndarray, n_frames_total: int, s0: int, s1: int, hop: int) -> np.ndarray:
    """== frame_to_samples with first_frame 0: linear interpolation of frame values x [B, F, ...] to
    samples [s0, s1) (frame t at sample t * hop; frames outside [0, T) hold the edge value)."""
    t0 = s0 // hop
    t1 = (s1 - 1) // hop + 1
    frames = np.clip(np.arange(t0, t1 + 1), 0, n_frames_total - 1)
    v = x[:, frames]
    rest = x.shape[2:]
    ramp = (np.arange(hop, dtype=x.dtype) / x.dtype.type(hop)).reshape(hop, *([1] * len(rest)))
    per_frame = v[:, :-1, None] + (v[:, 1:] - v[:, :-1])[:, :, None] * ramp
    flat = per_frame.reshape(x.shape[0], -1, *rest)
    return flat[:, s0 - t0 * hop : s1 - t0 * hop]


def pulse_train(phase: np.ndarray, f0: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """== dsp.pulse_train: band-limited pulse train in closed form (float64 phase in, float32 out)."""
    k = np.maximum(np.floor(cutoff_hz / np.maximum(f0, 1.0)), 1).astype(np.float32)
    phase = (np.remainder(phase + math.pi, TWO_PI) - math.pi).astype(np.float32)
    half = np.sin(phase / np.float32(2))
    small = np.abs(half) < 1e-6
    ratio = np.sin((k + np.float32(0.5)) * phase) / (np.float32(2) * np.where(small, np.float32(1), half))
    return np.where(small, k, ratio - np.float32(0.5))


def _log_response(cepstrum: np.ndarray, n_fft: int) -> np.ndarray:
    return np.fft.rfft(cepstrum.astype(np.float32), n=n_fft, axis=-1)


def _polar(magnitude: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """== torch.polar in complex64: magnitude * (cos + i sin), five times faster than exp(1j * angle) here."""
    out = np.empty(magnitude.shape, np.complex64)
    out.real = magnitude * np.cos(angle)
    out.imag = magnitude * np.sin(angle)
    return out


def render_whole(f0: np.ndarray, voiced: np.ndarray, harmonic_cep: np.ndarray, noise_cep: np.ndarray,
                 dsp: dict[str, Any], window: np.ndarray) -> np.ndarray:
    """== dsp.render(s0=0, s1=T * hop, phase0=0, n_frames_total=T) for one utterance: f0, voiced [B, T],
    cepstra [B, T, L] -> wave [B, T * hop] float32 (unclamped)."""
    h, w_len, hop, sr = dsp["frame_hop"], dsp["window"], dsp["hop_length"], dsp["sample_rate"]
    n_frames = f0.shape[1]
    margin = w_len - h
    s0, s1 = 0, n_frames * hop
    e0, e1 = s0 - margin, s1 + margin
    b = f0.shape[0]
    f0_s = frame_to_samples(f0.astype(np.float64), n_frames, e0, e1, hop)  # [B, E]
    voiced_s = frame_to_samples(voiced.astype(np.float32), n_frames, e0, e1, hop)
    increments = TWO_PI * f0_s / sr
    phase = np.cumsum(increments, axis=1) - increments  # phase0 = 0 at e0
    phase = np.remainder(phase, TWO_PI)
    n = np.arange(e0, e1)
    inside = ((n >= 0) & (n < n_frames * hop)).astype(np.float32)
    harmonic = pulse_train(phase, f0_s, dsp["cutoff_hz"]) * voiced_s * inside
    noise = hash_noise(int(dsp["seed"]), e0, e1)[None, :] * inside
    noise = np.broadcast_to(noise, harmonic.shape)
    j0 = (e0 + w_len // 2) // h
    src = np.stack([harmonic, noise], 1).astype(np.float32)  # [B, 2, E]
    frames_h = np.lib.stride_tricks.sliding_window_view(src, w_len, axis=-1)[..., ::h, :]  # [B, 2, J, W]
    n_j = frames_h.shape[2]
    spectra = np.fft.rfft(frames_h * window, axis=-1)
    ratio = hop // h
    resp_h_log = _log_response(frame_to_samples(harmonic_cep.astype(np.float32), n_frames, j0, j0 + n_j, ratio), w_len)
    resp_h = _polar(np.exp(resp_h_log.real), resp_h_log.imag)  # torch.polar(exp(re), im)
    resp_n = np.exp(_log_response(frame_to_samples(noise_cep.astype(np.float32), n_frames, j0, j0 + n_j, ratio),
                                  w_len).real)
    filtered = spectra[:, 0] * resp_h + spectra[:, 1] * resp_n
    frames = (np.fft.irfft(filtered, n=w_len, axis=-1) * window).astype(np.float32)  # [B, J, W]
    q = w_len // h
    blocks = frames.reshape(b, n_j, q, h)
    wave = np.zeros((b, n_j + q - 1, h), dtype=np.float32)
    for k in range(q):
        wave[:, k : k + n_j] += blocks[:, :, k]
    wave = wave.reshape(b, -1) * np.float32(h / float((window.astype(np.float32) ** 2).sum()))
    start = s0 - e0
    return wave[:, start : start + (s1 - s0)]


def hann_window(n: int) -> np.ndarray:
    """== torch.hann_window(n) (periodic)."""
    return (0.5 - 0.5 * np.cos(TWO_PI * np.arange(n) / n)).astype(np.float32)

"""Programme loudness after ITU-R BS.1770-4 (mono): K-weighting, 400 ms blocks with 75 % overlap, an
absolute gate at -70 LKFS and a relative gate 10 LU below the ungated mean; plain RMS as the alternative.

The K-weighting filter (a high shelf of about +4 dB above 1.5 kHz, then a 38 Hz high-pass) is given by
the standard as biquad coefficients at 48 kHz; for other rates they are derived from the analogue
prototype by the bilinear transform, as libebur128 does (its constants reproduce the standard's 48 kHz
table to 1e-8, which tests/test_listening.py checks). Written out here rather than taken from pyloudnorm
to keep the app's dependencies at numpy + scipy.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import lfilter

ABSOLUTE_GATE = -70.0
RELATIVE_GATE = -10.0


def k_weighting(sample_rate: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """((b, a) of the high shelf, (b, a) of the high-pass) at `sample_rate`."""
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / sample_rate)
    vh = 10 ** (gain_db / 20)
    vb = vh ** 0.4996667741545416
    a0 = 1 + k / q + k * k
    shelf_b = np.array([(vh + vb * k / q + k * k) / a0, 2 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0])
    shelf_a = np.array([1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0])
    f0, q = 38.13547087602444, 0.5003270373238773
    k = math.tan(math.pi * f0 / sample_rate)
    a0 = 1 + k / q + k * k
    hp_b = np.array([1.0, -2.0, 1.0])
    hp_a = np.array([1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0])
    return (shelf_b, shelf_a), (hp_b, hp_a)


def _blocks(power: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mean power of the 400 ms gating blocks (hop 100 ms); the whole signal when shorter than a block."""
    block, hop = int(round(0.4 * sample_rate)), int(round(0.1 * sample_rate))
    if len(power) < block:
        return np.array([power.mean()]) if len(power) else np.zeros(1)
    csum = np.concatenate([[0.0], np.cumsum(power)])
    starts = np.arange(0, len(power) - block + 1, hop)
    return (csum[starts + block] - csum[starts]) / block


def _gated_db(block_power: np.ndarray, offset_db: float) -> float:
    eps = 1e-20
    level = offset_db + 10 * np.log10(block_power + eps)
    kept = block_power[level > ABSOLUTE_GATE]
    if kept.size == 0:
        return -math.inf
    relative = offset_db + 10 * math.log10(kept.mean() + eps) + RELATIVE_GATE
    kept = kept[offset_db + 10 * np.log10(kept + eps) > relative]
    return float(offset_db + 10 * math.log10(kept.mean() + eps))


def bs1770_lkfs(x: np.ndarray, sample_rate: int) -> float:
    """Integrated loudness (LKFS = LUFS) of a mono float signal in [-1, 1]; -inf for silence."""
    (b1, a1), (b2, a2) = k_weighting(sample_rate)
    y = lfilter(b2, a2, lfilter(b1, a1, np.asarray(x, dtype=np.float64)))
    return _gated_db(_blocks(y * y, sample_rate), -0.691)


def rms_db(x: np.ndarray, sample_rate: int) -> float:
    """Plain RMS level in dBFS over the whole signal (pauses pull it down); -inf for silence."""
    ms = float(np.mean(np.square(x))) if len(x) else 0.0
    return -math.inf if ms <= 0 else 10 * math.log10(ms)


LOUDNESS = {"bs1770": bs1770_lkfs, "rms": rms_db}

"""The source-filter vocoder's white noise, defined once and torch-free (numpy only): used by the torch
vocoder (tts/vocoder/dsp.py, which caches a whole period as a table) and by the ONNX runtime
(tts/onnx_runtime.py, which hashes only the samples it needs: a cold start without a 2**20 table)."""

from __future__ import annotations

import math

import numpy as np

NOISE_PERIOD = 1 << 20  # samples (47.6 s at 22 050 Hz): far too long to hear the noise repeat
_M32 = 0xFFFFFFFF
_SEED_MIX = 0x9E3779B1  # 2**32 / golden ratio: seeds far apart in the hash's input
_ROUNDS = (0x45D9F3B, 0x119DE1F3)  # two multiply-xorshift rounds: a well-mixed 32-bit integer hash


def hash_noise(seed: int, s0: int, s1: int) -> np.ndarray:
    """White noise for absolute samples [s0, s1) (negative allowed): [s1 - s0] float32, uniform with unit
    variance; sample n is a counter hash of (n mod NOISE_PERIOD, seed), so the same in every run, chunking
    and batch.  int64 arithmetic that never overflows (a product is < 2**32 * 2**29)."""
    x = (np.remainder(np.arange(s0, s1, dtype=np.int64), NOISE_PERIOD) + (seed * _SEED_MIX & _M32)) & _M32
    for mult in _ROUNDS:
        x = ((x >> 16) ^ x) & _M32
        x = (x * mult) & _M32
    x = ((x >> 16) ^ x) & _M32
    return ((x.astype(np.float64) / 2.0**32 - 0.5) * math.sqrt(12.0)).astype(np.float32)

"""Seeded noise, defined once and torch-free (numpy only), so that every engine draws the same values
without a port of any library's random generator:

- `hash_noise`: the source-filter vocoder's white excitation noise (tts/vocoder/dsp.py caches a whole
  period as a table; the ONNX engine hashes only the samples it needs).
- `gaussian_table` + `item_noise_seed`: the flow-matching refiner's start noise.  Item b of a run seeded
  with `seed` reads the standard normal table from offset item_noise_seed(seed, index_b)
  (tts.models.refiner.gather_noise, which the exported acoustic graph runs too): a pure function of (seed,
  item index, frame, channel), so the same item gets the same noise in any batch, padding, window
  (streaming) or engine.

Both are counter-based hashes (two multiply-xorshift rounds of a 32-bit integer), so sample n is the same
value in every run, chunking and batch.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

NOISE_PERIOD = 1 << 20  # samples (47.6 s at 22 050 Hz): far too long to hear the noise repeat
# The refiner's table: one item reads n_mels * frames consecutive values, 80 * 4000 (the NAR's max_frames
# guard) = 320 000 < 2**20, so no item ever reads a value twice.
GAUSSIAN_PERIOD = 1 << 20
_M32 = 0xFFFFFFFF
_SEED_MIX = 0x9E3779B1  # 2**32 / golden ratio: seeds far apart in the hash's input
_ROUNDS = (0x45D9F3B, 0x119DE1F3)  # two multiply-xorshift rounds: a well-mixed 32-bit integer hash
# the two uniform streams of the Box-Muller transform (any two seeds the vocoder does not use by default)
_GAUSSIAN_STREAMS = (0x6A09E667, 0xBB67AE85)


def _hash32(seed: int, s0: int, s1: int) -> np.ndarray:
    """[s1 - s0] int64 in [0, 2**32): the hash of (n mod NOISE_PERIOD, seed) for n in [s0, s1).  int64
    arithmetic that never overflows (a product is < 2**32 * 2**29)."""
    x = (np.remainder(np.arange(s0, s1, dtype=np.int64), NOISE_PERIOD) + (seed * _SEED_MIX & _M32)) & _M32
    for mult in _ROUNDS:
        x = ((x >> 16) ^ x) & _M32
        x = (x * mult) & _M32
    return ((x >> 16) ^ x) & _M32


def hash_noise(seed: int, s0: int, s1: int) -> np.ndarray:
    """White noise for absolute samples [s0, s1) (negative allowed): [s1 - s0] float32, uniform with unit
    variance; sample n is a counter hash of (n mod NOISE_PERIOD, seed)."""
    x = _hash32(seed, s0, s1)
    return ((x.astype(np.float64) / 2.0**32 - 0.5) * math.sqrt(12.0)).astype(np.float32)


_tables: dict[int, np.ndarray] = {}


def gaussian_table(period: int = GAUSSIAN_PERIOD) -> np.ndarray:
    """[period] float32 standard normal values (Box-Muller on two hashed uniform streams), made once."""
    table = _tables.get(period)
    if table is None:
        u1 = (_hash32(_GAUSSIAN_STREAMS[0], 0, period).astype(np.float64) + 1.0) / 2.0**32  # (0, 1]: log finite
        u2 = _hash32(_GAUSSIAN_STREAMS[1], 0, period).astype(np.float64) / 2.0**32
        table = _tables[period] = (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)).astype(np.float32)
    return table


def item_noise_seed(seed: int, index: int) -> int:
    """The refiner-noise offset of item `index` (its position in its own sentence stream, not in a batch)
    of a synthesis run seeded with `seed`: a blake2b hash of "seed:index" to 32 bits."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and item index must be >= 0, got {seed}, {index}")
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=4).digest(), "little")

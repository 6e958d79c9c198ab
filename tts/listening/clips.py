"""Clip processing: what makes every clip of a test look the same from its bytes, and what a rater's
browser must have received to prove a download.

Build time (`prepare`): mono, one sample rate for the whole test (polyphase resampling), leading and
trailing silence trimmed (frames quieter than both -65 dBFS and 45 dB under the loudest frame), loudness
normalised (BS.1770 by default), then padded to one fixed lead and, per sentence, to one common length for
every system (`pad`): a file's size names the sentence group, never the system. Stored as float32, never
served as is.

Serve time (`render_wav`): each rater gets each clip of each page as fresh bytes: the stored float audio
plus TPDF dither (+-1 LSB) drawn from a per-(rater, page, slot) seed, quantised to 16-bit PCM behind a
canonical 44-byte header. Two raters, two pages or two builds never see the same bytes, so hashes link
nothing, and every sample's low bits are unpredictable without the whole download: `proof` (32
bits, position-weighted byte sum over the full body as received) is the listening evidence a client sends with its answer.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from math import gcd

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

from .loudness import LOUDNESS

PEAK_LIMIT_DB = -1.0
FRAME_S = 0.01
SILENCE_FLOOR_DB = -65.0
SILENCE_BELOW_PEAK_DB = 45.0


def load_mono(path) -> tuple[np.ndarray, int]:
    x, sr = sf.read(str(path), dtype="float64", always_2d=True)
    return x.mean(axis=1), int(sr)


def resample(x: np.ndarray, sr: int, target: int) -> np.ndarray:
    if sr == target:
        return x
    g = gcd(sr, target)
    return resample_poly(x, target // g, sr // g)


def trim_silence(x: np.ndarray, sr: int) -> np.ndarray:
    """The part between the first and last frame of 10 ms that is not silence (see the module doc);
    the whole signal when every frame is silent."""
    hop = max(1, int(FRAME_S * sr))
    n = len(x) // hop
    if n == 0:
        return x
    frames = x[: n * hop].reshape(n, hop)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-20)
    loud = np.flatnonzero(level > max(SILENCE_FLOOR_DB, level.max() - SILENCE_BELOW_PEAK_DB))
    if loud.size == 0:
        return x
    return x[loud[0] * hop: min(len(x), (loud[-1] + 1) * hop)]


@dataclass(frozen=True)
class Level:
    level_db: float | None  # measured before the gain
    gain_db: float
    peak_limited: bool


def gain_for(x: np.ndarray, sr: int, method: str, target_db: float) -> Level:
    """The gain that brings x to target_db, lowered where the peak would pass PEAK_LIMIT_DB."""
    level = LOUDNESS[method](x, sr)
    gain_db = 0.0 if not math.isfinite(level) else target_db - level
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    limited = False
    if peak > 0 and 20 * math.log10(peak) + gain_db > PEAK_LIMIT_DB:
        gain_db, limited = PEAK_LIMIT_DB - 20 * math.log10(peak), True
    return Level(round(level, 2) if math.isfinite(level) else None, round(gain_db, 3), limited)


def common_target(speech: list[np.ndarray], sr: int, method: str, target_db: float, max_drop_db: float = 6.0) -> float:
    """target_db, lowered (by at most max_drop_db) until no clip needs peak limiting: a system whose clips
    are peakier must not come out quieter than the others. Clips still over after that are limited."""
    headroom = []
    for x in speech:
        level = LOUDNESS[method](x, sr)
        peak = float(np.max(np.abs(x))) if len(x) else 0.0
        if math.isfinite(level) and peak > 0:
            headroom.append(PEAK_LIMIT_DB - 20 * math.log10(peak) + level)  # highest target without limiting
    return max(target_db - max_drop_db, min([target_db, *headroom]))


def pad(x: np.ndarray, lead: int, total: int) -> np.ndarray:
    """`lead` zeros, x, then zeros up to `total` samples."""
    out = np.zeros(max(total, lead + len(x)))
    out[lead: lead + len(x)] = x
    return out


def write_float(path, x: np.ndarray, sr: int) -> None:
    sf.write(str(path), x.astype(np.float32), sr, subtype="FLOAT")


def wav_header(n_samples: int, sr: int) -> bytes:
    """Canonical 44-byte RIFF header of mono 16-bit PCM: the same layout for every clip of a test."""
    data = 2 * n_samples
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVE" + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sr, 2 * sr, 2, 16)
            + b"data" + struct.pack("<I", data))


def render_wav(x: np.ndarray, sr: int, seed: bytes) -> bytes:
    """16-bit WAV bytes of float x with TPDF dither drawn from `seed` (see the module doc)."""
    rng = np.random.default_rng(np.frombuffer(seed[:32].ljust(32, b"\0"), dtype=np.uint32))
    dither = rng.random(len(x)) - rng.random(len(x))  # triangular on (-1, 1) LSB
    q = np.clip(np.round(x * 32767.0 + dither), -32768, 32767).astype("<i2")
    return wav_header(len(x), sr) + q.tobytes()


def proof(data: bytes) -> str:
    """sum over bytes of (position + 1) * byte, mod 2^32, as 8 hex digits: the page's script computes the
    same (PROOF_JS in app.py). Not a cryptographic hash, and it need not be: the dithered low bits of every
    sample are unpredictable, so the sum cannot be produced without receiving every byte."""
    arr = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    total = int((arr * np.arange(1, len(arr) + 1, dtype=np.uint64)).sum()) % 2**32  # < 2^64 for clips < 250 MB
    return f"{total:08x}"

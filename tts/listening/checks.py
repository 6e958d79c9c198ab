"""Attention checks that can only be answered by listening.

A/B checks (`degrade`): the page is a real A/B pair of the test (the rater's own draw of pair and sentence,
made from the build's secret, among pairs the rater has not heard yet), one side of which is audibly
damaged within its speech (the padding stays silent): white noise at -5..0 dB SNR, 50 % dropouts, or
3-bit quantisation with sample-and-hold. The expected answer is the undamaged side. Both
clips have the length of that sentence's group (as every clip of it), the damaged one is loudness-
normalised again (noise would raise its level), both are dithered per rater like every clip: size,
header, level, wording and position say nothing. Which pair, which side, which damage and its strength
are drawn per rater, at serve time, from (secret, rater, item): another session cannot compare notes.

MOS checks (`spoken_prompt`): a spoken request for one score, made at build time with espeak-ng, in a
wording, voice, speed and pitch drawn per build, processed like every clip (trimmed, loudness-
normalised, padded to the length of a real sentence group that it fits: drawn again, faster, when it
fits none). Without espeak-ng, N beeps ask for score N (weaker: a script can count beeps; `build` says so).
"""

from __future__ import annotations

import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .clips import load_mono, resample

DAMAGE = ("noise", "dropouts", "crush")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
TEMPLATES = (
    "Answer {n}.",
    "Choose {n}, please.",
    "Select {n} here.",
    "Please answer {n} on this page.",
    "For this recording, choose {n}.",
    "To show that you are listening, select {n}.",
    "This one is a check. Pick the score {n}, please.",
    "Ignore the quality here and give it a {n}.",
    "Whatever you think of this voice, answer {n}.",
)
VOICES = ("en-us", "en-gb", "en-us+f2", "en-us+f4", "en-gb+m3", "en-us+m4", "en-gb-x-rp", "en-029")


def degrade(x: np.ndarray, sr: int, kind: str, rng: np.random.Generator, span: tuple[int, int] | None = None) -> np.ndarray:
    """An audibly damaged copy of x (same length), damaged only within `span` (the speech: the padding
    stays as silent as every clip's); strength drawn from rng."""
    start, end = span or (0, len(x))
    end = max(start + 1, min(end, len(x)))
    out = x.copy()
    out[start:end] = _damage(x[start:end], sr, kind, rng)
    return out


def _damage(x: np.ndarray, sr: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "noise":
        voiced = np.abs(x) > 1e-4
        speech_rms = float(np.sqrt(np.mean(x[voiced] ** 2))) if voiced.any() else 0.05
        snr_db = rng.uniform(-5.0, 0.0)
        return x + rng.standard_normal(len(x)) * speech_rms * 10 ** (-snr_db / 20)
    if kind == "dropouts":  # on/off every 120-240 ms, 50 % duty, random phase
        period = int(sr * rng.uniform(0.12, 0.24))
        phase = int(rng.integers(period))
        gate = ((np.arange(len(x)) + phase) % period) < period // 2
        return x * gate
    if kind == "crush":  # 3-bit levels, held for 4-8 samples: harsh distortion and aliasing
        hold = int(rng.integers(4, 9))
        held = np.repeat(x[::hold], hold)[: len(x)]
        peak = float(np.max(np.abs(held))) or 1.0
        return np.round(held / peak * 3.5) / 3.5 * peak
    raise ValueError(f"unknown damage {kind!r}")


def spoken_prompt(score: int, rng: random.Random, sample_rate: int, hurry: int = 0) -> tuple[np.ndarray, dict]:
    """A spoken request for `score` (wording, voice, speed and pitch from rng) at sample_rate, and what
    was drawn; N beeps without espeak-ng. `hurry` k speeds it up by 10 k words a minute, up to 230 (still
    easy to follow); the build retries with a higher k until the prompt fits the sentence length it drew."""
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        t = np.arange(int(0.15 * sample_rate)) / sample_rate
        freq = rng.uniform(600, 1000)
        beep = 0.3 * np.sin(2 * np.pi * freq * t) * np.hanning(len(t))
        gap = np.zeros(int(rng.uniform(0.2, 0.35) * sample_rate))
        return np.concatenate([np.concatenate([beep, gap]) for _ in range(score)]), {"kind": "beeps"}
    text = rng.choice(TEMPLATES).format(n=NUMBER_WORDS[score])
    voice, speed, pitch = rng.choice(VOICES), min(230, rng.randint(135, 175) + 10 * hurry), rng.randint(30, 70)
    with tempfile.TemporaryDirectory() as td:
        raw = Path(td) / "prompt.wav"
        subprocess.run([espeak, "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(raw), text],
                       check=True, capture_output=True, timeout=60)
        x, sr = load_mono(raw)
    return resample(x, sr, sample_rate), {"kind": "spoken", "voice": voice, "speed": speed, "pitch": pitch}

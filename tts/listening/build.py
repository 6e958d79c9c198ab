"""Build a listening test from audio folders: TESTDIR/test.json + loudness-normalised TESTDIR/audio/.

Input is one folder per system, each holding ``ID.wav`` for the same held-out sentence IDs (one of the
systems may be the ground-truth recordings). Synthesising those folders with the project's models is a
separate step: this builder only takes audio folders.

Loudness normalisation (``--loudness``):
  * ``gated`` (default): a BS.1770-like gated loudness *without* the K-weighting filter — mean square
    over 400 ms blocks with 75 % overlap, blocks below -70 dBFS dropped (absolute gate), then blocks more
    than 10 dB below the mean of the remaining ones dropped (relative gate); the gain brings that gated
    level to ``--target-db`` (dBFS, default -23). Silences and pauses therefore do not pull the level.
  * ``rms``: plain RMS over the whole file to ``--target-db``.
  Afterwards the peak is limited to -1 dBFS by lowering the gain (recorded per file in test.json), so
  no file clips. Output: mono 16-bit PCM WAV at each input's own sample rate.

Audio file names are opaque tokens (sha256 of seed, system and sentence), so neither the URL nor the
file name tells a rater which system they hear. Side and order are randomised per rater at serve time
from ``seed`` (stored in test.json).

Attention checks are MOS-style pages whose audio asks the rater to select a given score, spoken with
``espeak-ng -w`` (fallback when espeak-ng is missing: N short beeps, and the page asks for the number
of beeps). Raters who fail them are excluded by the report.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

TEST_VERSION = 1
PEAK_LIMIT = 10 ** (-1 / 20)  # -1 dBFS
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def gated_loudness_db(x: np.ndarray, sr: int) -> float:
    """BS.1770-style gated level (dBFS, no K-weighting) of a mono float signal."""
    block, hop = int(round(0.4 * sr)), int(round(0.1 * sr))
    if len(x) < block:
        ms = np.array([np.mean(x**2)])
    else:
        starts = range(0, len(x) - block + 1, hop)
        ms = np.array([np.mean(x[s : s + block] ** 2) for s in starts])
    eps = 1e-12
    lev = 10 * np.log10(ms + eps)
    ms = ms[lev > -70]
    if ms.size == 0:
        return -math.inf
    rel = 10 * np.log10(ms.mean() + eps) - 10
    kept = ms[10 * np.log10(ms + eps) > rel]
    return float(10 * np.log10(kept.mean() + eps))


def rms_db(x: np.ndarray, sr: int) -> float:
    ms = float(np.mean(x**2)) if len(x) else 0.0
    return -math.inf if ms <= 0 else 10 * math.log10(ms)


LOUDNESS = {"gated": gated_loudness_db, "rms": rms_db}


def normalise_file(src: Path, dst: Path, method: str = "gated", target_db: float = -23.0) -> dict:
    x, sr = sf.read(str(src), dtype="float64", always_2d=True)
    x = x.mean(axis=1)
    level = LOUDNESS[method](x, sr)
    gain_db = 0.0 if not math.isfinite(level) else target_db - level
    gain = 10 ** (gain_db / 20)
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    limited = False
    if peak * gain > PEAK_LIMIT:
        gain, limited = PEAK_LIMIT / peak, True
        gain_db = 20 * math.log10(gain)
    dst.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(dst), np.clip(x * gain, -1, 1), sr, subtype="PCM_16")
    return {"level_db": round(level, 2) if math.isfinite(level) else None, "gain_db": round(gain_db, 2),
            "peak_limited": limited, "sample_rate": sr, "duration_s": round(len(x) / sr, 3)}


def audio_token(seed: int, *parts: str) -> str:
    return hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).hexdigest()[:16]


def make_attention_audio(path: Path, score: int, sr: int = 22050) -> str:
    """Write the prompt audio for an attention check; returns the on-screen hint kind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    espeak = shutil.which("espeak-ng")
    if espeak:
        with tempfile.TemporaryDirectory() as td:
            raw = Path(td) / "raw.wav"
            text = f"This is an attention check. Please select {NUMBER_WORDS[score]}."
            subprocess.run([espeak, "-s", "150", "-w", str(raw), text], check=True, capture_output=True)
            normalise_file(raw, path)
        return "speech"
    # Fallback: `score` beeps of 150 ms at 880 Hz, 250 ms apart.
    t = np.arange(int(0.15 * sr)) / sr
    beep = 0.3 * np.sin(2 * np.pi * 880 * t) * np.hanning(len(t))
    gap = np.zeros(int(0.25 * sr))
    x = np.concatenate([np.zeros(int(0.2 * sr))] + [np.concatenate([beep, gap]) for _ in range(score)])
    sf.write(str(path), x, sr, subtype="PCM_16")
    return "beeps"


def parse_systems(specs: list[str]) -> dict[str, Path]:
    systems: dict[str, Path] = {}
    for spec in specs:
        name, sep, d = spec.partition("=")
        if not sep or not name or not d:
            raise ValueError(f"--systems expects NAME=DIR, got {spec!r}")
        if not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"system name {name!r}: use letters, digits, _ - .")
        if name in systems:
            raise ValueError(f"system {name!r} given twice")
        if not Path(d).is_dir():
            raise ValueError(f"system {name!r}: {d} is not a folder")
        systems[name] = Path(d)
    return systems


def build_test(systems: dict[str, Path], out: Path, n: int = 20, mos: bool = False, seed: int = 0,
               ground_truth: list[str] | None = None, attention_checks: int = 2,
               loudness: str = "gated", target_db: float = -23.0, title: str = "Listening test") -> dict:
    """Write out/test.json and out/audio/*.wav; returns the test dict."""
    if loudness not in LOUDNESS:
        raise ValueError(f"loudness must be one of {sorted(LOUDNESS)}")
    ground_truth = list(ground_truth or [])
    for g in ground_truth:
        if g not in systems:
            raise ValueError(f"--ground-truth {g!r} is not one of the systems")
    ids_per = {name: {p.stem for p in d.glob("*.wav")} for name, d in systems.items()}
    common = sorted(set.intersection(*ids_per.values()))
    if not common:
        raise ValueError("the systems' folders have no ID.wav in common")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(common, min(n, len(common)))) if n < len(common) else common
    out = Path(out)
    audio_dir = out / "audio"
    if audio_dir.exists():
        shutil.rmtree(audio_dir)
    audio_dir.mkdir(parents=True)

    audio: dict[str, dict] = {}
    token_of: dict[tuple[str, str], str] = {}
    for name, d in systems.items():
        for sid in chosen:
            tok = audio_token(seed, name, sid)
            info = normalise_file(d / f"{sid}.wav", audio_dir / f"{tok}.wav", loudness, target_db)
            audio[tok] = {"file": f"{tok}.wav", "system": name, "sentence": sid, **info}
            token_of[(name, sid)] = tok

    items: list[dict] = []
    names = list(systems)
    for a, b in itertools.combinations(names, 2):
        for sid in chosen:
            items.append({"id": f"ab-{len(items):04d}", "type": "ab", "sentence": sid, "systems": [a, b],
                          "audio": [token_of[(a, sid)], token_of[(b, sid)]]})
    if mos:
        for name in names:
            for sid in chosen:
                items.append({"id": f"mos-{len(items):04d}", "type": "mos", "sentence": sid, "system": name,
                              "ground_truth": name in ground_truth, "audio": [token_of[(name, sid)]]})
    for k in range(attention_checks):
        expected = rng.randint(1, 5)
        tok = audio_token(seed, "attention", str(k))
        hint = make_attention_audio(audio_dir / f"{tok}.wav", expected)
        audio[tok] = {"file": f"{tok}.wav", "system": None, "sentence": None, "attention": True}
        items.append({"id": f"att-{k:04d}", "type": "mos", "attention": True, "expected": expected,
                      "hint": hint, "audio": [tok]})

    test = {"version": TEST_VERSION, "title": title, "seed": seed, "created": time.time(),
            "systems": names, "ground_truth": ground_truth, "sentences": chosen,
            "normalisation": {"method": loudness, "target_db": target_db, "peak_limit_db": -1.0},
            "sources": {k: str(v) for k, v in systems.items()}, "audio": audio, "items": items}
    (out / "test.json").write_text(json.dumps(test, indent=1))
    return test


def load_test(test_dir: Path) -> dict:
    test = json.loads((Path(test_dir) / "test.json").read_text())
    if test.get("version") != TEST_VERSION:
        raise ValueError(f"{test_dir}/test.json: unsupported version {test.get('version')}")
    return test

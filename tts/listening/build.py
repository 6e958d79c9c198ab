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

Blinding: every build draws a secret (``secret``, 256 bits, never served) and a ``test_id``. Audio
tokens and item ids are fresh random hex strings, unrelated to system, sentence or seed, so two builds
of the same inputs and seed share no id, and ids are not numbered in blocks. Files are written in a
shuffled order (their write times do not group by system). Side and order are randomised per rater at
serve time from (secret, rater id), so they cannot be predicted from the public seed either.

Attention checks, ``attention_checks`` per part, look like real items (same id form, same payload):
  * A/B: one sample says "please choose this sample", the other "please do not choose this sample";
    the side of the first is the per-rater side draw.
  * MOS: five items, one asking for each score 1..5; each rater gets a random subset.
Spoken with ``espeak-ng -w`` (fallback when espeak-ng is missing: N beeps asks for score N; on A/B
pages the sample to choose beeps and the other is silent; the consent page explains both).

Rebuilding: a folder that holds results (``*.sqlite*``) is refused unless ``force``, which first moves
test.json, the results and the invite codes to ``archive/<time>-<old test id>/``. Each build writes its
audio to ``audio/<test_id>/``, so a server still running on the old test.json keeps serving its audio.
"""

from __future__ import annotations

import hashlib
import secrets
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

TEST_VERSION = 2
RESULT_GLOBS = ("*.sqlite", "*.sqlite-wal", "*.sqlite-shm", "*.db")
ATTENTION_YES, ATTENTION_NO = "attention-yes", "attention-no"  # internal system labels of A/B checks
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


def new_id() -> str:
    """A fresh random id for an audio file or an item: 64 bits, unrelated to anything else in the test."""
    return secrets.token_hex(8)


def make_attention_audio(path: Path, text: str, beeps: int, rate_wpm: int = 150, sr: int = 22050) -> dict:
    """Write the prompt audio for an attention check (spoken `text`, or `beeps` beeps without espeak-ng;
    0 beeps is one second of silence); returns normalise_file's info (duration and levels)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    espeak = shutil.which("espeak-ng")
    with tempfile.TemporaryDirectory() as td:
        raw = Path(td) / "raw.wav"
        if espeak:
            subprocess.run([espeak, "-s", str(rate_wpm), "-w", str(raw), text], check=True, capture_output=True)
        else:  # `beeps` beeps of 150 ms at 880 Hz, 250 ms apart
            t = np.arange(int(0.15 * sr)) / sr
            beep = 0.3 * np.sin(2 * np.pi * 880 * t) * np.hanning(len(t))
            gap = np.zeros(int(0.25 * sr))
            x = np.concatenate([np.zeros(int(0.2 * sr))] + [np.concatenate([beep, gap]) for _ in range(beeps)]
                               + [np.zeros(sr)])
            sf.write(str(raw), x, sr, subtype="PCM_16")
        return normalise_file(raw, path)


def results_in(out: Path) -> list[Path]:
    """Result files (SQLite databases) in a test folder."""
    return sorted(p for g in RESULT_GLOBS for p in Path(out).glob(g))


def archive_previous(out: Path) -> Path:
    """Move test.json, result files and invite codes of the previous build to out/archive/<time>-<test id>/."""
    old_id = "unknown"
    if (out / "test.json").is_file():
        old_id = json.loads((out / "test.json").read_text()).get("test_id", "unknown")
    dest = out / "archive" / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{old_id}"
    dest.mkdir(parents=True, exist_ok=False)
    for p in results_in(out) + [out / "test.json", out / "invite_codes.txt"]:
        if p.exists():
            shutil.move(str(p), str(dest / p.name))
    return dest


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
               loudness: str = "gated", target_db: float = -23.0, title: str = "Listening test",
               force: bool = False, invite_codes: int = 0) -> dict:
    """Write out/test.json and out/audio/<test_id>/*.wav (and out/invite_codes.txt); returns the test dict.
    `seed` picks the sentences only; everything a rater could see is drawn from a fresh secret."""
    if loudness not in LOUDNESS:
        raise ValueError(f"loudness must be one of {sorted(LOUDNESS)}")
    ground_truth = list(ground_truth or [])
    for g in ground_truth:
        if g not in systems:
            raise ValueError(f"--ground-truth {g!r} is not one of the systems")
    out = Path(out)
    held = results_in(out)
    if held and not force:
        raise ValueError(f"{out} holds results ({', '.join(p.name for p in held)}): rebuilding would mix them "
                         "with another test; use --force to archive them first, or build into a new folder")
    ids_per = {name: {p.stem for p in d.glob("*.wav")} for name, d in systems.items()}
    common = sorted(set.intersection(*ids_per.values()))
    if not common:
        raise ValueError("the systems' folders have no ID.wav in common")
    rng = random.Random(seed)
    chosen = sorted(rng.sample(common, min(n, len(common)))) if n < len(common) else common
    if held or (out / "test.json").exists():
        archive_previous(out)
    test_id = secrets.token_hex(8)
    audio_sub = f"audio/{test_id}"
    audio_dir = out / audio_sub
    audio_dir.mkdir(parents=True)

    audio: dict[str, dict] = {}
    token_of: dict[tuple[str, str], str] = {}
    # Shuffled (by the OS's randomness, not the seed) so file order and write times say nothing.
    jobs = [(name, sid) for name in systems for sid in chosen]
    random.SystemRandom().shuffle(jobs)
    for name, sid in jobs:
        tok = new_id()
        info = normalise_file(systems[name] / f"{sid}.wav", audio_dir / f"{tok}.wav", loudness, target_db)
        audio[tok] = {"file": f"{tok}.wav", "system": name, "sentence": sid, **info}
        token_of[(name, sid)] = tok

    items: list[dict] = []
    names = list(systems)
    for a, b in itertools.combinations(names, 2):
        for sid in chosen:
            items.append({"id": new_id(), "type": "ab", "sentence": sid, "systems": [a, b],
                          "audio": [token_of[(a, sid)], token_of[(b, sid)]]})
    if mos:
        for name in names:
            for sid in chosen:
                items.append({"id": new_id(), "type": "mos", "sentence": sid, "system": name,
                              "ground_truth": name in ground_truth, "audio": [token_of[(name, sid)]]})

    def prompt(text: str, beeps: int, rate_wpm: int) -> str:
        tok = new_id()
        info = make_attention_audio(audio_dir / f"{tok}.wav", text, beeps, rate_wpm)
        audio[tok] = {"file": f"{tok}.wav", "system": None, "sentence": None, "attention": True, **info}
        return tok

    for k in range(attention_checks):  # A/B checks; the speaking rate differs so no two files are identical
        yes = prompt("Attention check. Please choose this sample.", 3, 140 + 7 * k)
        no = prompt("Attention check. Please do not choose this sample.", 0, 140 + 7 * k)
        items.append({"id": new_id(), "type": "ab", "attention": True, "systems": [ATTENTION_YES, ATTENTION_NO],
                      "expected": ATTENTION_YES, "audio": [yes, no]})
    if mos and attention_checks:  # one MOS check per score; each rater gets `attention_checks` of them
        for score in range(1, 6):
            tok = prompt(f"This is an attention check. Please select {NUMBER_WORDS[score]}.", score, 150)
            items.append({"id": new_id(), "type": "mos", "attention": True, "expected": score, "audio": [tok]})
    random.SystemRandom().shuffle(items)  # test.json order says nothing either

    codes = [secrets.token_urlsafe(9) for _ in range(invite_codes)]
    if codes:
        (out / "invite_codes.txt").write_text("\n".join(codes) + "\n")
    test = {"version": TEST_VERSION, "test_id": test_id, "secret": secrets.token_hex(32), "title": title,
            "seed": seed, "created": time.time(), "systems": names, "ground_truth": ground_truth,
            "sentences": chosen, "attention_per_part": attention_checks, "audio_dir": audio_sub,
            "invite_hashes": sorted(hash_invite(c) for c in codes),
            "normalisation": {"method": loudness, "target_db": target_db, "peak_limit_db": -1.0},
            "sources": {k: str(v) for k, v in systems.items()}, "audio": audio, "items": items}
    tmp = out / "test.json.tmp"
    tmp.write_text(json.dumps(test, indent=1))
    tmp.replace(out / "test.json")  # atomic: a reader never sees half a test.json
    return test


def hash_invite(code: str) -> str:
    """Invite codes are stored hashed in test.json (the plain codes only in invite_codes.txt)."""
    return hashlib.sha256(code.strip().encode()).hexdigest()


def load_test(test_dir: Path) -> dict:
    test = json.loads((Path(test_dir) / "test.json").read_text())
    if test.get("version") != TEST_VERSION:
        raise ValueError(f"{test_dir}/test.json: unsupported version {test.get('version')}")
    return test

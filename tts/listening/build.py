"""Build a listening test from audio folders: TESTDIR/test.json + normalised TESTDIR/audio/<test id>/.

Input is one folder per system, each holding ``ID.wav`` for the same held-out sentence IDs (one of the
systems may be the ground-truth recordings). Synthesising those folders is a separate step
(recipes.listening_test --synth): this builder only takes audio folders.

Normalisation (every clip, so that bytes cannot tell a system; tts/listening/clips.py):
  * one sample rate for the test: ``sample_rate`` or else the lowest of the inputs' (no system's extra
    bandwidth stands out), polyphase resampling;
  * leading and trailing silence trimmed, then ``padding_s`` of silence before and after the speech;
    every system's clip of a sentence padded at the end to the sentence's longest: one length per sentence;
  * loudness to ``target_db``: BS.1770-4 integrated loudness (``bs1770``, LKFS, default) or plain RMS
    (``rms``); the target is lowered for every clip (at most 6 dB) until none needs peak limiting at -1 dBFS,
    clips that still would are gain-limited (recorded per clip);
  * stored as float32; served per rater as dithered 16-bit PCM (clips.render_wav), so no two raters, pages
    or builds receive the same bytes.

Blinding: every build draws a secret (``secret``, 256 bits, never served) and a ``test_id``. Audio tokens
and item ids are fresh random hex strings; files are written in a shuffled order. Side, order, check
placement and check material are drawn per rater at serve time from (secret, rater id): layout.py.

Attention checks (checks.py), ``attention_checks`` per part: A/B checks are items without audio of their
own (each rater gets a damaged copy of one of the test's real pairs); MOS checks are spoken requests for
a score, four per score in wordings and voices drawn per build, of which each rater gets
``attention_checks`` with different scores.

Rebuilding: a folder that holds results (any SQLite file, whatever its name) is refused unless ``force``,
which first moves test.json, the results and the invite codes to ``archive/<time>-<old test id>/``. Each
build writes its audio to ``audio/<test_id>/``, so a server still running on the old test.json keeps
serving its audio.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import secrets
import shutil
import time
from pathlib import Path

import numpy as np

from . import checks
from .clips import common_target, gain_for, load_mono, pad, resample, trim_silence, write_float
from .loudness import LOUDNESS

TEST_VERSION = 3
RESULT_GLOBS = ("*.sqlite*", "*.db", "*.db-*", "*.sqlite3*")
SQLITE_MAGIC = b"SQLite format 3\0"
ATTENTION_YES, ATTENTION_NO = "attention-yes", "attention-no"  # labels of an A/B check's clean / damaged side
PROMPT_VARIANTS = 4  # spoken MOS checks per score (each rater gets one of them, for a few scores)
PROMPT_TRIES = 12


def new_id() -> str:
    """A fresh random id for an audio file or an item: 64 bits, unrelated to anything else in the test."""
    return secrets.token_hex(8)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def results_in(out: Path) -> list[Path]:
    """Result files in a test folder: by name (SQLite, its -wal/-shm, .db) or by content (any file that
    starts with SQLite's magic, whatever it is called)."""
    out = Path(out)
    if not out.is_dir():
        return []
    named = {p for g in RESULT_GLOBS for p in out.glob(g) if p.is_file()}
    named |= {p for p in out.iterdir() if p.is_file() and _is_sqlite(p)}
    return sorted(named)


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
               ground_truth: list[str] | None = None, attention_checks: int = 3,
               loudness: str = "bs1770", target_db: float = -23.0, title: str = "Listening test",
               force: bool = False, invite_codes: int = 0, sample_rate: int | None = None,
               padding_s: float = 0.25) -> dict:
    """Write out/test.json and out/audio/<test_id>/*.wav (and out/invite_codes.txt); returns the test dict.
    `seed` picks the sentences only; everything a rater could see is drawn from a fresh secret."""
    if loudness not in LOUDNESS:
        raise ValueError(f"loudness must be one of {sorted(LOUDNESS)}")
    if sample_rate is not None and not 8000 <= sample_rate <= 96000:
        raise ValueError("--sample-rate must be within 8000..96000")
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

    raw = {(name, sid): load_mono(systems[name] / f"{sid}.wav") for name in systems for sid in chosen}
    input_rates = {name: sorted({raw[(name, sid)][1] for sid in chosen}) for name in systems}
    sr = sample_rate or min(r for rates in input_rates.values() for r in rates)
    speech = {key: trim_silence(resample(x, r, sr), sr) for key, (x, r) in raw.items()}
    target = common_target(list(speech.values()), sr, loudness, target_db)
    lead = int(round(padding_s * sr))
    length = {sid: 2 * lead + max(len(speech[(name, sid)]) for name in systems) for sid in chosen}

    if held or (out / "test.json").exists():
        archive_previous(out)
    test_id = secrets.token_hex(8)
    audio_sub = f"audio/{test_id}"
    audio_dir = out / audio_sub
    audio_dir.mkdir(parents=True)
    audio: dict[str, dict] = {}

    def store(x: np.ndarray, total: int, entry: dict) -> str:
        tok = new_id()
        level = gain_for(x, sr, loudness, target)
        write_float(audio_dir / f"{tok}.wav", pad(x * 10 ** (level.gain_db / 20), lead, total), sr)
        audio[tok] = {"file": f"{tok}.wav", **entry, "duration_s": round(max(total, 2 * lead + len(x)) / sr, 4),
                      "speech_s": round(len(x) / sr, 4), "level_db": level.level_db, "gain_db": level.gain_db,
                      "peak_limited": level.peak_limited}
        return tok

    token_of: dict[tuple[str, str], str] = {}
    jobs = list(speech)
    random.SystemRandom().shuffle(jobs)  # the OS's randomness, not the seed: file order says nothing
    for name, sid in jobs:
        token_of[(name, sid)] = store(speech[(name, sid)], length[sid], {"system": name, "sentence": sid})

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
    for _ in range(attention_checks):  # audio drawn per rater at serve time (layout.page_sources)
        items.append({"id": new_id(), "type": "ab", "attention": True, "check": "damaged", "expected": ATTENTION_YES,
                      "systems": [ATTENTION_YES, ATTENTION_NO], "audio": []})
    prompt_kinds, too_long = set(), 0
    if mos and attention_checks:
        build_rng = random.Random(secrets.randbits(64))
        lengths = sorted(set(length.values()))
        for score in range(1, 6):
            for _ in range(PROMPT_VARIANTS):
                # a real sentence group's length, drawn first (then the check's size is a real clip's size,
                # at no particular length); redrawn shorter and faster until the prompt fits it
                goal = build_rng.choice(lengths)
                for hurry in range(PROMPT_TRIES):
                    x, drawn = checks.spoken_prompt(score, build_rng, sr, hurry)
                    x = trim_silence(x, sr)
                    if 2 * lead + len(x) <= goal:
                        break
                prompt_kinds.add(drawn["kind"])
                fits = [L for L in lengths if L >= 2 * lead + len(x)]
                total = goal if goal in fits else (build_rng.choice(fits) if fits else 2 * lead + len(x))
                too_long += not fits
                tok = store(x, total, {"system": None, "sentence": None, "attention": True})
                items.append({"id": new_id(), "type": "mos", "attention": True, "expected": score, "audio": [tok]})
    random.SystemRandom().shuffle(items)  # test.json order says nothing either

    codes = [secrets.token_urlsafe(9) for _ in range(invite_codes)]
    if codes:
        (out / "invite_codes.txt").write_text("\n".join(codes) + "\n")
    test = {"version": TEST_VERSION, "test_id": test_id, "secret": secrets.token_hex(32), "title": title,
            "seed": seed, "created": time.time(), "systems": names, "ground_truth": ground_truth,
            "sentences": chosen, "attention_per_part": attention_checks, "audio_dir": audio_sub,
            "invite_hashes": sorted(hash_invite(c) for c in codes),
            "normalisation": {"sample_rate": sr, "input_sample_rates": input_rates, "loudness": loudness,
                              "target_db": target_db, "applied_target_db": round(target, 3),
                              "peak_limit_db": -1.0, "padding_s": padding_s,
                              "peak_limited_clips": sum(a["peak_limited"] for a in audio.values()),
                              "trim": "frames under -65 dBFS and 45 dB below the loudest frame",
                              "length": "one per sentence (every system padded to the longest)",
                              "encoding": "16-bit PCM, TPDF dither drawn per rater, page and slot",
                              "mos_checks": sorted(prompt_kinds),
                              # spoken checks longer than every sentence: their size tells them (build warns)
                              "mos_checks_longer_than_sentences": too_long},
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

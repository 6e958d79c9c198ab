"""Word timestamps from the acoustic model's durations, and their files (json, SubRip, WebVTT).

A duration-predicting NAR knows how many mel frames each token gets (MelBatch.durations; the AR's come from
its attention), and the vocoder makes exactly hop_length samples a frame, so a word's place in the audio is
exact, not estimated: its phones' frames, summed.  The frontend says which tokens make which word
(`TextFrontend.encode_words`: the id range of each word's phones).

Time convention: frame f is samples [f * hop, (f + 1) * hop) of the part's wave, so a word of phones
[start, end) lies in [sum(d[:start]), sum(d[:end])) * hop / sample_rate seconds: a word's length is its
durations' sum exactly, words never overlap, and pauses (the tokens between words) lie between them.

Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class WordTiming:
    """One spoken word: its text (as spoken: "three" of "3"), start and end in seconds from the start of the
    audio, and its phones."""

    word: str
    start_s: float
    end_s: float
    phones: tuple[str, ...]

    def shifted(self, seconds: float) -> WordTiming:
        return WordTiming(self.word, self.start_s + seconds, self.end_s + seconds, self.phones)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["phones"] = list(self.phones)
        return d


def part_words(words: Sequence, symbols: Sequence[str], durations: np.ndarray, seconds_per_frame: float) -> list[WordTiming]:
    """The words of one part: `words` (WordSpan: text, [start, end) token ids), the part's `symbols` (decoded ids),
    `durations` [L] frames per token -> WordTiming each, times from the part's first sample."""
    if len(durations) != len(symbols):
        raise ValueError(f"{len(durations)} token durations for {len(symbols)} tokens")
    edges = np.concatenate([[0], np.cumsum(np.asarray(durations, dtype=np.int64))])  # [L + 1] frames
    return [WordTiming(w.text, float(edges[w.start]) * seconds_per_frame, float(edges[w.end]) * seconds_per_frame,
                       tuple(symbols[w.start:w.end])) for w in words]


# --- files -----------------------------------------------------------------------------------------------
TIMESTAMP_FORMATS = (".json", ".srt", ".vtt")


def _clock(seconds: float, decimal: str) -> str:
    ms = int(round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{decimal}{ms:03d}"


def to_json(words: Sequence[WordTiming], sample_rate: int, seconds: float) -> str:
    return json.dumps({"sample_rate": sample_rate, "seconds": round(seconds, 6),
                       "words": [w.to_dict() for w in words]}, indent=1)


def to_srt(words: Sequence[WordTiming]) -> str:
    """One cue a word (karaoke-style subtitles)."""
    return "".join(f"{k}\n{_clock(w.start_s, ',')} --> {_clock(w.end_s, ',')}\n{w.word}\n\n"
                   for k, w in enumerate(words, start=1))


def to_vtt(words: Sequence[WordTiming]) -> str:
    return "WEBVTT\n\n" + "".join(f"{_clock(w.start_s, '.')} --> {_clock(w.end_s, '.')}\n{w.word}\n\n" for w in words)


def timestamp_text(path: Path, words: Sequence[WordTiming], sample_rate: int, seconds: float) -> str:
    """The file's text, its format chosen by the extension (TIMESTAMP_FORMATS; ValueError otherwise)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        return to_json(words, sample_rate, seconds)
    if suffix == ".srt":
        return to_srt(words)
    if suffix == ".vtt":
        return to_vtt(words)
    raise ValueError(f"--timestamps {path}: the extension must be one of {', '.join(TIMESTAMP_FORMATS)}")

"""Hidden per-utterance prosody for the varied corpus (data_prep.festival_corpus --prosody-variation).

Festival renders one text to byte-identical audio, so a corpus built from it has no one-to-many
mapping. Here each rendition of a text gets a drawn prosody that no model is told about:

- speaking rate: hts_engine's `-r` for the whole sentence (measured: 0.8 stretches a 3.13 s sentence to
  3.93 s, 1.2 gives 2.62 s); Festival's HTS voice takes its engine options once per utterance, so
  there is no per-phrase rate here;
- F0 level: sox's `pitch` effect in cents after synthesis (the HTS voice ignores `-fm` and
  `Duration_Stretch` for F0, measured); it moves F0 and keeps the duration;
- pauses: extra silence inserted in the middle of Festival's own phrase-internal pauses (commas etc.),
  each with probability `pause_prob`, of a length drawn from `pause_range_s`.

The draw depends only on (seed, utterance ID), not on build order, jobs or other utterances, so a
rebuild reproduces it. What was drawn and applied goes to DIR/prosody/ID.json, a side file that the
datasets never open (tests/test_varied_corpus.py checks that).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

# One pause draw per phrase-internal pause of a sentence; sentences have at most a few tens of them.
MAX_PAUSE_DRAWS = 64
PROSODY_DIR = "prosody"


@dataclass(frozen=True)
class ProsodyRanges:
    """Where the hidden prosody is drawn from. Rates are drawn log-uniformly (0.8 and 1.25 equally far
    from 1), pitch uniformly in cents."""

    rate_range: tuple[float, float] = (0.8, 1.25)
    pitch_range_cents: tuple[float, float] = (-250.0, 250.0)
    pause_prob: float = 0.5
    pause_range_s: tuple[float, float] = (0.05, 0.35)

    def __post_init__(self) -> None:
        lo, hi = self.rate_range
        if not 0.2 <= lo <= hi <= 5.0:
            raise ValueError(f"rate range {self.rate_range} must lie in [0.2, 5] with low <= high")
        plo, phi = self.pitch_range_cents
        if not -1200.0 <= plo <= phi <= 1200.0:
            raise ValueError(f"pitch range {self.pitch_range_cents} must lie in [-1200, 1200] cents")
        if not 0.0 <= self.pause_prob <= 1.0:
            raise ValueError(f"pause probability {self.pause_prob} not in [0, 1]")
        dlo, dhi = self.pause_range_s
        if not 0.0 <= dlo <= dhi <= 2.0:
            raise ValueError(f"pause range {self.pause_range_s} must lie in [0, 2] s")


@dataclass(frozen=True)
class Prosody:
    """The drawn prosody of one rendition. `pause_draws[k]` is the extra silence (s) for the k-th
    phrase-internal pause, 0 for none; pauses beyond MAX_PAUSE_DRAWS get none."""

    rate: float
    pitch_cents: float
    pause_draws: tuple[float, ...] = field(default_factory=tuple)

    @property
    def is_neutral(self) -> bool:
        return self.rate == 1.0 and self.pitch_cents == 0.0 and not any(self.pause_draws)


def draw_prosody(seed: int, utt_id: str, ranges: ProsodyRanges) -> Prosody:
    """The prosody of `utt_id`, a pure function of (seed, utt_id, ranges)."""
    digest = hashlib.sha256(f"{seed}:{utt_id}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    lo, hi = ranges.rate_range
    rate = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
    pitch = float(rng.uniform(*ranges.pitch_range_cents))
    on = rng.random(MAX_PAUSE_DRAWS) < ranges.pause_prob
    length = rng.uniform(*ranges.pause_range_s, size=MAX_PAUSE_DRAWS)
    pauses = tuple(round(float(d), 3) if o else 0.0 for o, d in zip(on, length))
    return Prosody(rate=round(rate, 4), pitch_cents=round(pitch, 1), pause_draws=pauses)


@dataclass(frozen=True)
class PauseEdit:
    segment_index: int  # index of the Festival "pau" segment that was lengthened
    seconds: float


def insert_pauses(wave: np.ndarray, sample_rate: int, phones: list[str], ends: list[float],
                  prosody: Prosody) -> tuple[np.ndarray, list[float], list[PauseEdit]]:
    """Lengthen phrase-internal pauses: silence inserted at the middle of each chosen `pau` segment.

    wave [N] at `sample_rate`; phones/ends: Festival's segments (ends in s, the last equals the wav
    length). Leading and trailing pauses are not phrase-internal and stay as they are. Returns the new
    wave, the shifted segment ends, and the edits made.
    """
    internal = [i for i, p in enumerate(phones) if p == "pau" and 0 < i < len(phones) - 1]
    edits = [PauseEdit(i, d) for k, i in enumerate(internal)
             if k < len(prosody.pause_draws) and (d := prosody.pause_draws[k]) > 0]
    if not edits:
        return wave, list(ends), []
    pieces, new_ends, cursor = [], list(ends), 0
    for edit in edits:
        start = ends[edit.segment_index - 1]
        mid = int(round((start + ends[edit.segment_index]) / 2 * sample_rate))
        pieces += [wave[cursor:mid], np.zeros(int(round(edit.seconds * sample_rate)), dtype=wave.dtype)]
        cursor = mid
    pieces.append(wave[cursor:])
    for edit in edits:
        # this pause and everything after it end later by the silence inserted
        for j in range(edit.segment_index, len(new_ends)):
            new_ends[j] += round(edit.seconds * sample_rate) / sample_rate
    return np.concatenate(pieces), new_ends, edits


def side_record(utt_id: str, text_id: str, rendition: int, seed: int, prosody: Prosody,
                edits: list[PauseEdit]) -> dict[str, object]:
    """What DIR/prosody/ID.json holds: the drawn values and the pauses actually inserted."""
    return {
        "id": utt_id,
        "text_id": text_id,
        "rendition": rendition,
        "seed": seed,
        "rate": prosody.rate,
        "pitch_cents": prosody.pitch_cents,
        "pauses_inserted": [asdict(e) for e in edits],
    }

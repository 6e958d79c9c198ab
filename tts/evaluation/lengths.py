"""Length / duration errors and AR failure-rate aggregation."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class LengthError:
    frames: int  # syn - ref (signed)
    abs_frames: int
    seconds: float  # syn - ref (signed)
    abs_seconds: float
    ratio: float  # syn / ref
    log_ratio: float  # ln(syn / ref): symmetric, 0 = same length


def length_error(ref_frames: int, syn_frames: int, frame_seconds: float) -> LengthError:
    """Length error of a synthesised utterance, in frames and seconds (frame_seconds = hop / sr)."""
    if ref_frames <= 0 or syn_frames < 0:
        raise ValueError(f"need ref_frames > 0 and syn_frames >= 0, got {ref_frames}, {syn_frames}")
    d = int(syn_frames) - int(ref_frames)
    ratio = syn_frames / ref_frames
    return LengthError(
        frames=d,
        abs_frames=abs(d),
        seconds=d * frame_seconds,
        abs_seconds=abs(d) * frame_seconds,
        ratio=ratio,
        log_ratio=math.log(ratio) if ratio > 0 else -math.inf,
    )


@dataclass(frozen=True)
class DurationError:
    mae_frames: float
    rmse_frames: float
    mae_seconds: float
    n_tokens: int


def duration_error(ref_durations: Sequence[float], syn_durations: Sequence[float],
                   frame_seconds: float) -> DurationError:
    """Per-token (phone) duration error between two duration sequences in frames."""
    a = np.asarray(ref_durations, dtype=np.float64).reshape(-1)
    b = np.asarray(syn_durations, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"duration sequences differ in length: {a.shape[0]} vs {b.shape[0]}")
    if a.size == 0:
        raise ValueError("empty duration sequences")
    d = b - a
    mae = float(np.mean(np.abs(d)))
    return DurationError(mae_frames=mae, rmse_frames=float(np.sqrt(np.mean(d * d))),
                         mae_seconds=mae * frame_seconds, n_tokens=int(a.size))


FAILURE_KINDS = ("no_stop", "skip", "repeat", "low_coverage")


@dataclass(frozen=True)
class FailureRates:
    n: int
    ok_rate: float
    failure_rate: float  # 1 - ok_rate: utterances with any failure
    no_stop: float
    skip: float
    repeat: float
    low_coverage: float
    counts: dict

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def ar_failure_rates(results: Iterable) -> FailureRates:
    """Aggregate objects with bool `.ok`, `.no_stop`, `.skip`, `.repeat`, `.low_coverage`.

    Each kind's rate is the fraction of utterances flagged with it (an utterance may have several);
    `failure_rate` is the fraction not `.ok`.
    """
    results = list(results)
    if not results:
        raise ValueError("no results to aggregate")
    counts = {k: 0 for k in ("ok", *FAILURE_KINDS)}
    for r in results:
        for k in counts:
            if not hasattr(r, k):
                raise AttributeError(f"{type(r).__name__} has no attribute {k!r}")
            counts[k] += bool(getattr(r, k))
    n = len(results)
    return FailureRates(n=n, ok_rate=counts["ok"] / n, failure_rate=1.0 - counts["ok"] / n,
                        **{k: counts[k] / n for k in FAILURE_KINDS}, counts=counts)

"""Token durations from an attention matrix, and their check against a reference segmentation.

Distillation (DESIGN.md section 1): the AR teacher's teacher-forced attention [T, L] is turned into a
monotonic hard alignment by dynamic programming (monotonic alignment search, as Glow-TTS's MAS, here
allowing a jump over `max_skip` tokens so that a token the teacher never attends to, typically a word
boundary, may get 0 frames), giving integer durations that sum exactly to T.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def monotonic_alignment(attention: np.ndarray, max_skip: int = 1, eps: float = 1e-8) -> np.ndarray:
    """attention [T, L] (rows = frames, non-negative) -> durations [L] int64, sum == T.

    The path starts on token 0 or (skipping) up to token `max_skip`, ends on token L-1 or up to
    `max_skip` tokens before it, and at each frame stays or advances by 1..1+max_skip tokens; it
    maximises the summed log attention.  Tokens jumped over get 0 frames.
    """
    T, L = attention.shape
    if T == 0 or L == 0:
        raise ValueError(f"empty attention matrix {attention.shape}")
    logp = np.log(np.clip(attention.astype(np.float64), eps, None))
    neg = -np.inf
    score = np.full((T, L), neg)
    back = np.zeros((T, L), dtype=np.int64)  # how many tokens the path advanced into (t, j)
    score[0, : max_skip + 1] = logp[0, : max_skip + 1]
    for t in range(1, T):
        best = score[t - 1].copy()  # stay on j
        step = np.zeros(L, dtype=np.int64)
        for k in range(1, max_skip + 2):  # advance by k tokens
            cand = np.full(L, neg)
            cand[k:] = score[t - 1, :-k]
            better = cand > best
            best = np.where(better, cand, best)
            step = np.where(better, k, step)
        score[t] = best + logp[t]
        back[t] = step
    end = L - 1 - int(np.argmax(score[T - 1, max(0, L - 1 - max_skip) :][::-1]))
    durations = np.zeros(L, dtype=np.int64)
    j = end
    for t in range(T - 1, -1, -1):
        durations[j] += 1
        j -= back[t, j]
    return durations


@dataclass
class WordBoundaryReport:
    comparable: bool  # same number of words on both sides
    n_words: int
    mean_abs_error_ms: float  # over word starts and ends
    max_abs_error_ms: float


def word_spans_from_tokens(symbols: list[str], durations: np.ndarray, is_phone) -> list[tuple[int, int]]:
    """Frame spans [start, end) of each word = maximal run of phone tokens."""
    edges = np.concatenate([[0], np.cumsum(durations)])
    spans, start = [], None
    for i, s in enumerate(symbols):
        if is_phone(s):
            if start is None:
                start = i
            last = i
        elif start is not None:
            spans.append((int(edges[start]), int(edges[last + 1])))
            start = None
    if start is not None:
        spans.append((int(edges[start]), int(edges[last + 1])))
    return spans


def word_spans_from_segments(segments) -> list[tuple[float, float]]:
    """(start s, end s) per word from Festival phone segments (runs of phones with one word name)."""
    spans: list[tuple[float, float]] = []
    prev_end, cur_word, cur_start = 0.0, None, 0.0
    for seg in segments:
        if seg.word is not None and seg.word != cur_word:
            if cur_word is not None:
                spans.append((cur_start, prev_end))
            cur_word, cur_start = seg.word, prev_end
        elif seg.word is None and cur_word is not None:
            spans.append((cur_start, prev_end))
            cur_word = None
        prev_end = seg.end
    if cur_word is not None:
        spans.append((cur_start, prev_end))
    return spans


def word_boundary_error(token_spans: list[tuple[int, int]], ref_spans: list[tuple[float, float]],
                        frame_seconds: float) -> WordBoundaryReport:
    if len(token_spans) != len(ref_spans) or not ref_spans:
        return WordBoundaryReport(False, len(ref_spans), float("nan"), float("nan"))
    # frame f covers [f*hop - win/2, ...]; with center=True its centre is at f * hop, so a boundary
    # between frames f-1 and f sits at (f - 0.5) * hop; the first start is clamped to 0
    ours = np.array([[max(a - 0.5, 0.0), b - 0.5] for a, b in token_spans]) * frame_seconds
    ref = np.array(ref_spans)
    err = np.abs(ours - ref) * 1000.0
    return WordBoundaryReport(True, len(ref_spans), float(err.mean()), float(err.max()))

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


# The level of an utterance's speech: this percentile of its frame energies (L2 norm of the STFT magnitude).  Not
# the median, which was the reference until 2026-12-07: in an utterance whose pauses fill half its frames (a word
# said alone, data_prep's short pool) the median is a silence level and every frame passes a share of it, so the
# onset came out at the first frames and the first phone kept the whole leading pause (tests/test_durations.py).
# In a sentence, where speech fills most frames, the two references agree to a frame or two.
SPEECH_LEVEL_PERCENTILE = 90.0
# A frame is speech once its energy passes this share of the speech level; before the first such frame is the
# leading pause.
SPEECH_FLOOR = 0.05


def speech_level(energy: np.ndarray) -> float:
    """energy [T] -> the utterance's speech level (SPEECH_LEVEL_PERCENTILE of its frames; 0 for no frames)."""
    return float(np.percentile(energy, SPEECH_LEVEL_PERCENTILE)) if len(energy) else 0.0


def speech_onset(energy: np.ndarray, floor: float = SPEECH_FLOOR) -> int:
    """energy [T] -> the first frame over `floor` x the speech level (0 when none is)."""
    loud = np.flatnonzero(energy > floor * speech_level(energy))
    return int(loud[0]) if loud.size else 0


def onset_first_token(durations: np.ndarray, energy: np.ndarray, floor: float = SPEECH_FLOOR) -> np.ndarray:
    """durations [L] (sum = T) from a teacher's attention, energy [T] -> durations [L] whose first token reaches
    into the speech.  A Tacotron's attention rests on the first token through the leading pause and moves on as
    the speech starts, so the first token gets the pause alone and its phone's sound goes to the second token (the
    9,250-step AR on data/slt: in 99.9 % of utterances, the boundary 7.8 frames before Festival's); a NAR trained
    on that learns a quiet first phone and speaks a lone vowel near-silently.  When the first token ends at or
    before the speech onset, the frames from the onset to the end of the second token are split between the two
    (measured on 1500 data/slt utterances: the first boundary 1.7 frames before Festival's, the teacher's usual
    offset elsewhere, and the first token silent in 43 % of utterances, Festival's segmentation 38 %).  The sum
    is kept.  A NAR trained on these durations still spoke a lone vowel near-silently at its step 1000
    (checkpoints/README.md, "The NAR distilled from the AR teacher"): the boundary is better, the cure was cutting
    the leading pause from the training utterances (`leading_pause_cut`)."""
    d = np.asarray(durations).copy()
    if d.size < 2:
        return d
    onset = speech_onset(energy, floor)
    t0, t1 = int(d[0]), int(d[0] + d[1])
    if t0 <= onset and t1 > onset + 1:
        t0 = onset + (t1 - onset) // 2
        d[0], d[1] = t0, t1 - t0
    return d


def leading_pause_cut(durations: np.ndarray, energy: np.ndarray, keep: int, floor: float = SPEECH_FLOOR) -> int:
    """durations [L] (sum = T), energy [T] -> how many frames to cut from the start so that `keep` frames of the
    leading pause stay before the speech onset; never the first token's last frame (every token keeps >= 1).
    Every training utterance of a corpus begins with a pause, and the first token's frames hold it (Festival's
    segmentation in 38 % of data/slt's utterances, the AR teacher's in 99.9 %): a NAR learns that a first phone is
    mostly silence and speaks a lone vowel ("A.") near-silently.  Cutting the pause at training time, as Coqui's
    `do_trim_silence` and ESPnet's silence trimming do for the whole corpus, gives the first token its sound; the
    model then starts speaking `keep` frames into its output (tts.data.TTSDataset's `lead_pause_frames`)."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0 frames, got {keep}")
    d = np.asarray(durations)
    if d.size == 0 or int(d[0]) < 1:
        return 0
    return max(0, min(speech_onset(energy, floor) - keep, int(d[0]) - 1))


def attention_durations(alignments: np.ndarray, mel_lengths: np.ndarray, token_lengths: np.ndarray,
                        r: int) -> np.ndarray:
    """An AR decode's frames per token: alignments [B, S, L] (decoder step -> attention over the tokens, r frames a
    step), mel_lengths [B] frames, token_lengths [B] -> durations [B, L] int64, row b summing to mel_lengths[b]
    (`monotonic_alignment` of each item's attention, repeated r times per step and cut to its frames)."""
    out = np.zeros((alignments.shape[0], alignments.shape[2]), dtype=np.int64)
    for b, (frames, n) in enumerate(zip(mel_lengths.tolist(), token_lengths.tolist())):
        if frames > 0 and n > 0:
            steps = -(-frames // r)
            attention = np.repeat(alignments[b, :steps, :n], r, axis=0)[:frames]  # [T, n]
            out[b, :n] = monotonic_alignment(attention)
    return out


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


def spans_in_seconds(token_spans: list[tuple[int, int]], frame_seconds: float) -> list[tuple[float, float]]:
    """Frame spans [start, end) -> (start s, end s).  Frame f covers [f*hop - win/2, ...]; with center=True its
    centre is at f * hop, so a boundary between frames f-1 and f sits at (f - 0.5) * hop; the first start is
    clamped to 0."""
    return [(max(a - 0.5, 0.0) * frame_seconds, (b - 0.5) * frame_seconds) for a, b in token_spans]


def word_boundary_error(token_spans: list[tuple[int, int]], ref_spans: list[tuple[float, float]],
                        frame_seconds: float) -> WordBoundaryReport:
    if len(token_spans) != len(ref_spans) or not ref_spans:
        return WordBoundaryReport(False, len(ref_spans), float("nan"), float("nan"))
    ours = np.array(spans_in_seconds(token_spans, frame_seconds))
    ref = np.array(ref_spans)
    err = np.abs(ours - ref) * 1000.0
    return WordBoundaryReport(True, len(ref_spans), float(err.mean()), float(err.max()))


# --- durations from an external phone segmentation (Festival's own) ------------------------------
@dataclass
class SegmentDurations:
    durations: np.ndarray  # [L] int64, sum == n_frames
    phone_match_rate: float  # share of our phone tokens matched to a Festival phone of the same name
    n_ours: int  # phone tokens on our side
    n_reference: int  # non-pause phones on the Festival side


def _align_phones(ours: list[str], ref: list[str]) -> list[int | None]:
    """Levenshtein alignment of two phone sequences -> for each of `ours`, the index in `ref` it is
    paired with (match or substitution), or None (inserted on our side).  Row-vectorised: within a
    row the insertion chain cost[i, j] = min(a[j], cost[i, j-1] + 1) is a running minimum of a - j."""
    n, m = len(ours), len(ref)
    ref_arr = np.array(ref, dtype=object)
    idx = np.arange(m + 1)
    cost = np.zeros((n + 1, m + 1), dtype=np.int64)
    cost[0] = idx
    for i in range(1, n + 1):
        a = np.empty(m + 1, dtype=np.int64)
        a[0] = i
        a[1:] = np.minimum(cost[i - 1, :-1] + (ref_arr != ours[i - 1]), cost[i - 1, 1:] + 1)
        cost[i] = np.minimum.accumulate(a - idx) + idx
    pairs: list[int | None] = [None] * n
    i, j = n, m
    while i > 0 and j > 0:
        if cost[i, j] == cost[i - 1, j - 1] + (ours[i - 1] != ref[j - 1]):
            pairs[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif cost[i, j] == cost[i - 1, j] + 1:
            i -= 1
        else:
            j -= 1
    return pairs


def durations_from_segments(symbols: list[str], is_phone, segments, n_frames: int,
                            frame_seconds: float, pause: str = "pau") -> SegmentDurations:
    """Integer frames per token from a reference phone segmentation (Festival's, `PhoneSegment`s with
    end times in seconds), summing exactly to `n_frames`.

    Our phone tokens (ARPAbet with stress) are aligned to the reference's non-pause phones by edit
    distance on stress-less lowercase names; each token starts where its paired phone starts (the
    first phone at 0, so it takes the leading pause).  The reference pauses just before the next
    paired phone go to the first punctuation token of the non-phone run before it (else its first
    token, a word boundary); the other tokens of the run get 0 frames, as does a run with no pause.
    Unpaired phones split their neighbour's span evenly.  Frame f (centred at f * hop with
    center=True) belongs to the token whose span holds f * hop.  Every phone keeps at least one frame
    (taken from its longest neighbour).
    """
    L = len(symbols)
    if L == 0 or n_frames < 1:
        raise ValueError(f"need tokens and frames, got {L} tokens, {n_frames} frames")
    seg_start, t_end = [], 0.0
    for seg in segments:
        seg_start.append(t_end)
        t_end = float(seg.end)
    seg_start.append(t_end)  # index len(segments) = end of the recording
    ref_idx = [k for k, seg in enumerate(segments) if seg.phone != pause]
    phone_tok = [j for j, s in enumerate(symbols) if is_phone(s)]
    if not phone_tok:
        raise ValueError(f"no phone tokens in {symbols}")
    norm = [symbols[j].rstrip("012").lower() for j in phone_tok]
    pairs = _align_phones(norm, [segments[k].phone for k in ref_idx]) if ref_idx else [None] * len(norm)
    seg_of: dict[int, int | None] = {j: (ref_idx[p] if p is not None else None) for j, p in zip(phone_tok, pairs)}
    seg_of[L] = len(segments)
    matched = sum(p is not None and norm[i] == segments[ref_idx[p]].phone for i, p in enumerate(pairs))

    start: list[float | None] = [None] * (L + 1)  # start time of each token; start[L] = end
    for j in phone_tok:
        if seg_of[j] is not None:
            start[j] = seg_start[seg_of[j]]
    start[L] = t_end
    for j in range(phone_tok[0] + 1):  # leading non-phone tokens: 0 frames
        start[j] = 0.0
    for a, b in zip(phone_tok, phone_tok[1:] + [L]):
        run = list(range(a + 1, b))
        nxt, prev = seg_of[b], seg_of[a]
        if not run or nxt is None:
            continue  # an unpaired next phone gives no reliable pause position: spans are shared
        k = nxt
        while k - 1 >= 0 and segments[k - 1].phone == pause and (prev is None or k - 1 > prev):
            k -= 1
        punct = [j for j in run if not symbols[j].isspace()]
        owner = punct[0] if punct else run[0]
        for j in run:  # [pause start, next phone start) goes to the owner; k == nxt: no pause
            start[j] = seg_start[k] if j <= owner else seg_start[nxt]
    j = 0  # fill unset boundaries evenly between their set neighbours
    while j < L:
        k = j + 1
        while start[k] is None:
            k += 1
        for i in range(j + 1, k):
            start[i] = start[j] + (start[k] - start[j]) * (i - j) / (k - j)
        j = k
    s = np.maximum.accumulate(np.array(start, dtype=np.float64))  # monotone even for an odd pairing
    edges = np.clip(np.ceil(s / frame_seconds - 1e-9), 0, n_frames).astype(np.int64)
    edges[0], edges[-1] = 0, n_frames
    d = np.diff(edges)
    is_ph = np.array([bool(is_phone(x)) for x in symbols])
    for j in np.flatnonzero(is_ph & (d == 0)):  # every phone gets a frame, from its longest neighbour
        for radius in range(1, L):
            cand = [i for i in (j - radius, j + radius) if 0 <= i < L and d[i] >= 2]
            if cand:
                best = max(cand, key=lambda i: d[i])
                d[best] -= 1
                d[j] += 1
                break
    return SegmentDurations(d.astype(np.int64), matched / len(phone_tok), len(phone_tok), len(ref_idx))


# --- durations from the Piper teacher's own alignments (issue 31's joe corpus) --------------------
# Piper (VITS) chose a whole number of 256-sample frames for every espeak phoneme it spoke: the audio was
# generated from exactly these durations, so they are the recording's true segmentation, in espeak IPA.
# They reach our ARPAbet tokens the way Festival's segmentation does: phone segments with end times,
# paired with our phones by edit distance (durations_from_segments).
PIPER_PAUSES = frozenset("^$ ,.;:!?-\u2014\u2026\"'()")  # BOS/EOS, word separator, punctuation: silence or none


def piper_segments(phonemes: list[str], frames: list[int], frame_seconds: float, pause: str = "pau") -> list:
    """Piper's per-phoneme alignment -> `PhoneSegment`s named as Festival's (lowercase ARPAbet, no stress).

    `phonemes` are single espeak IPA symbols, `frames` their durations (same length).  Runs of IPA symbols
    are read greedily longest-first with the IPA -> ARPAbet table of the G2P (`tts.text.ipa`), so "e ɪ" is
    one EY and "ɑ ː ɹ" is AA R; a stress mark's frames go to the phone it precedes, a stray length mark's or
    an unknown symbol's to the phone before it.  An entry of several ARPAbet phones splits its frames
    evenly (the first phone takes the remainder).  Pause and punctuation symbols become `pause` segments.
    """
    from tts.data.corpus import PhoneSegment
    from tts.text.ipa import IPA_TO_ARPABET, PRIMARY, SECONDARY

    if len(phonemes) != len(frames):
        raise ValueError(f"{len(phonemes)} phonemes but {len(frames)} durations")
    max_key = max(len(k) for k in IPA_TO_ARPABET)
    named: list[list] = []  # [name, frames, word index or None]
    carry, word, i = 0, 0, 0  # carry: frames of stress marks waiting for their phone
    while i < len(phonemes):
        sym = phonemes[i]
        if sym in PIPER_PAUSES:
            if sym == " ":
                word += 1
            named.append([pause, int(frames[i]) + carry, None])
            carry, i = 0, i + 1
            continue
        if sym in (PRIMARY, SECONDARY):
            carry, i = carry + int(frames[i]), i + 1
            continue
        for size in range(min(max_key, len(phonemes) - i), 0, -1):
            entry = IPA_TO_ARPABET.get("".join(phonemes[i : i + size]))
            if entry is not None:
                break
        else:  # length mark, palatal modifier ʲ, an unknown symbol: time of the phone before it
            if named and named[-1][0] != pause:
                named[-1][1] += int(frames[i])
            else:
                carry += int(frames[i])
            i += 1
            continue
        total = sum(int(f) for f in frames[i : i + size]) + carry
        share, rest = divmod(total, len(entry))
        for k, phone in enumerate(entry):
            named.append([phone.rstrip("*").lower(), share + (rest if k == 0 else 0), word])
        carry, i = 0, i + size
    if carry and named:
        named[-1][1] += carry
    segments, t = [], 0
    for name, n, w in named:
        t += n
        segments.append(PhoneSegment(name, t * frame_seconds, None if w is None else f"w{w}"))
    return segments

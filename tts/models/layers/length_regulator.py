"""Length regulation: token-level sequences <-> frame-level sequences through integer durations.

FastSpeech (Ren et al. 2019) expands each token's hidden vector d_l times so the decoder runs on
frames in parallel.  Everything here is vectorised: the token that owns frame t is found with one
`searchsorted` over the cumulative durations (no Python loop over tokens or frames), and the same
frame -> token index serves the reverse direction (averaging frame features per token).

Conventions: durations [B, L] are non-negative integers (long), zero on padded tokens; an item's frames
are the concatenation of its tokens' frames, so its frame length is sum(durations[b]).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tts.data.batch import lengths_to_mask


@dataclass
class RegulatedOutput:
    frames: torch.Tensor  # [B, T, D] expanded features, zero on padded frames
    frame_lengths: torch.Tensor  # [B] long, sum of the (possibly clipped) durations
    durations: torch.Tensor  # [B, L] long, the durations actually used (clipped by max_frames)
    token_index: torch.Tensor  # [B, T] long, token owning each frame; L on padded frames
    truncated: torch.Tensor  # [B] bool, True where max_frames cut the item short


def clip_durations(durations: torch.Tensor, max_frames: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The max-frames guard: durations [B, L] -> (durations whose sum is <= max_frames, truncated [B]).

    Clipping the cumulative sum keeps the first tokens intact and shortens/drops the tail, the only
    choice that keeps the output a prefix of the unclipped one (a runaway duration prediction cannot
    allocate an unbounded tensor).  Scriptable (the exported acoustic graph runs it: tts/export.py).
    """
    cum = durations.cumsum(dim=1)  # [B, L]
    truncated = cum[:, -1] > max_frames
    clipped = cum.clamp(max=max_frames)
    before = torch.cat([torch.zeros_like(clipped[:, :1]), clipped[:, :-1]], dim=1)  # cumulative end of token l - 1
    return clipped - before, truncated


def frame_token_index(durations: torch.Tensor, n_frames: int) -> torch.Tensor:
    """durations [B, L] -> index [B, n_frames] of the token owning each frame (L past an item's end).

    Frame t belongs to token l iff cum[l-1] <= t < cum[l] (cum = inclusive cumulative durations), i.e.
    l = the number of tokens whose cumulative end is <= t.  Counted by comparison ([B, T, L] booleans, a
    few MB for a batch) rather than `searchsorted`, which ONNX has no operator for: the exported graph
    runs this very function.  Zero-duration tokens own no frame; frames past the item's total map to L.
    """
    cum = durations.cumsum(dim=1)  # [B, L] non-decreasing
    t = torch.arange(n_frames, device=durations.device, dtype=cum.dtype)  # [T]
    return (cum[:, None, :] <= t[None, :, None]).sum(dim=2)  # [B, T]


def expand_frames(x: torch.Tensor, durations: torch.Tensor, n_frames: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token features x [B, L, D], durations [B, L] (summing to <= n_frames) -> (frames [B, n_frames, D],
    zero past each item's end; the owning token index [B, n_frames]).  Scriptable: the exported graph's
    length regulation is this function.  Gradients flow to x through the gather."""
    n_tokens = x.shape[1]
    index = frame_token_index(durations, n_frames)  # [B, T] in [0, L]
    valid = index < n_tokens  # [B, T]; equals lengths_to_mask(totals, T)
    gather_index = index.clamp(max=n_tokens - 1)[:, :, None].expand(-1, -1, x.shape[2])  # [B, T, D]
    return torch.gather(x, 1, gather_index) * valid[:, :, None].to(x.dtype), index


def regulate_length(
    x: torch.Tensor, durations: torch.Tensor, max_len: int | None = None, max_frames: int | None = None
) -> RegulatedOutput:
    """Expand token features x [B, L, D] by durations [B, L] into frames [B, T, D].

    T = `max_len` if given (teacher forcing: the batch's frame count, so outputs line up with the
    targets), else the longest item (at least 1, so a decoder never sees an empty tensor).
    `max_frames` (inference guard) clips durations first; items longer than T are cut at T too.
    """
    durations = durations.long().clamp_min(0)
    truncated = torch.zeros(durations.shape[0], dtype=torch.bool, device=durations.device)
    if max_frames is not None:
        durations, truncated = clip_durations(durations, max_frames)
    totals = durations.sum(dim=1)  # [B]
    n_frames = int(max_len) if max_len is not None else max(int(totals.max()) if totals.numel() else 0, 1)
    if max_len is not None and bool((totals > n_frames).any()):
        durations, cut = clip_durations(durations, n_frames)
        truncated = truncated | cut
        totals = durations.sum(dim=1)
    frames, index = expand_frames(x, durations, n_frames)
    return RegulatedOutput(frames, totals, durations, index, truncated)


def average_by_durations(
    values: torch.Tensor, durations: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse of `regulate_length` for scalars: frame values [B, T] -> per-token means [B, L].

    `weights` [B, T] (0/1, e.g. voiced frames for pitch) select which frames count.  Returns
    (means [B, L], counts [B, L]); tokens with no counted frame get mean 0 and count 0 (callers decide
    what such a token's target is).  Frames past sum(durations) are ignored, so padding never leaks in.
    """
    batch, n_frames = values.shape
    n_tokens = durations.shape[1]
    index = frame_token_index(durations.long().clamp_min(0), n_frames)  # [B, T] in [0, L]
    w = torch.ones_like(values) if weights is None else weights.to(values.dtype)
    w = w * (index < n_tokens).to(values.dtype)  # frames past the item's end never count
    # one extra "dump" slot (index L) collects the padded frames, then is dropped
    sums = values.new_zeros(batch, n_tokens + 1).scatter_add_(1, index, values * w)[:, :n_tokens]
    counts = values.new_zeros(batch, n_tokens + 1).scatter_add_(1, index, w)[:, :n_tokens]
    means = torch.where(counts > 0, sums / counts.clamp_min(1e-8), torch.zeros_like(sums))
    return means, counts


def durations_from_log(log_durations: torch.Tensor, token_mask: torch.Tensor, speed: float = 1.0,
                       min_frames: int = 0) -> torch.Tensor:
    """Predicted log(d + 1) [B, L] -> integer durations [B, L] (long) for inference: `speed_durations` of the
    predicted frames d = exp(log_d) - 1."""
    return speed_durations(torch.exp(log_durations.float()) - 1.0, token_mask, speed, min_frames)


def speed_durations(frames: torch.Tensor, token_mask: torch.Tensor, speed: float = 1.0,
                    min_frames: int = 0) -> torch.Tensor:
    """Frames per token at speed 1 [B, L] (float: a prediction, or integer ground truth) -> integer durations
    [B, L] (long) at `speed`: THE speed maths of inference (both engines: the exported graph runs this function).

    d = round(frames / speed), clamped >= `min_frames` on real tokens and 0 on padding; speed > 0 (checked
    by the caller's controls: this function is scripted into the exported graph, which has no exceptions).
    Rounding after the speed division (not before) keeps speed=2 at half the frames up to one rounding per
    token.  `min_frames=0` (FastSpeech 2's behaviour) lets a token vanish, as pauses and some stops
    legitimately do in extracted durations; `min_frames=1` guarantees every phoneme is spoken at least one
    frame.  Whatever the setting, an item whose durations all round to 0 gets 1 frame on its first token, so
    no output is ever empty.

    Speeding up (speed > 1) never silences a token, two guards:
    - a token with frames at speed 1 keeps at least one (round(1 / 2) would be 0: a short phone gone);
    - the first token with frames keeps all of them (and the zero-frame tokens before it stay 0).  Its frames
      begin with the utterance's leading pause: the durations give the first phone the recording's leading
      silence (tts.durations), and the decoder renders that pause ~16 frames long (on slt) from the start of
      the frames whatever the token's length.  Divided by the speed, the first phone lost its own frames to
      the pause: "A." was near-silent at speed 1.25 (-60 dBFS; 24 frames -> 19, the vowel 8 -> 3) and so was
      the first word of every sentence at 2.  Speed <= 1 changes nothing here (round(x / speed) >= round(x)).
    """
    mask = token_mask.to(frames.dtype)
    heard = torch.round(frames).clamp_min(0.0) * mask  # [B, L] frames at speed 1
    d = torch.round(frames / speed).clamp_min(0.0)
    lead = (heard.cumsum(dim=1) - heard) == 0  # tokens up to and including the first one with frames
    d = torch.maximum(d, torch.where(lead, heard, heard.clamp(max=1.0))).clamp_min(float(min_frames))
    d = d.long() * token_mask.long()
    empty = (d.sum(dim=1) == 0) & token_mask.any(dim=1)  # [B]
    first = torch.arange(d.shape[1], device=d.device)[None, :] == 0  # [1, L]
    return d + (empty[:, None] & first).long()


def check_durations(durations: torch.Tensor, token_lengths: torch.Tensor, mel_lengths: torch.Tensor) -> None:
    """Raise ValueError unless durations [B, L] are >= 0, zero on padding and sum to mel_lengths [B]."""
    mask = lengths_to_mask(token_lengths, durations.shape[1])
    if bool((durations < 0).any()):
        raise ValueError("negative durations in batch")
    sums = (durations * mask).sum(dim=1)
    if not torch.equal(sums, mel_lengths.to(sums.dtype)):
        bad = (sums != mel_lengths).nonzero().flatten().tolist()
        raise ValueError(
            f"durations do not sum to mel_lengths for items {bad}: sums {sums[bad].tolist()} vs "
            f"mel_lengths {mel_lengths[bad].tolist()} (re-extract durations for this mel config)"
        )

"""Speculative decoding of the Transformer AR (issue 37 item 3): a drafter proposes the next frames, the AR checks
them in ONE cached, teacher-forced chunk and keeps the longest prefix it agrees with.

The AR's decoder position p reads the last frame of position p - 1 (its "input") and predicts r frames.  Plain
decoding runs one position per network call.  A speculative round from position s (s positions emitted, the
last emitted frame y_s pending as input) runs:

    drafts  d_1 .. d_{k-1}        [B, k-1, M]  the drafter's guess of the LAST frame of positions s+1 .. s+k-1
    inputs  [y_s, d_1, .., d_{k-1}]  -> decode_chunk -> o_1 .. o_k  (r frames each; causal inside the chunk)

o_1 is exactly what plain decoding computes at position s+1 (same input, same cache, same prenet noise).  o_i
(i >= 2) was computed from the DRAFT d_{i-1} in place of the AR's own frame o_{i-1}[-1]; it is kept while
every earlier draft was close enough to what the AR itself produced:

    accept d_i  iff  rms_M( d_i - o_i[-1] ) <= tolerance      (normalised mel units, the AR's own space)

The round emits o_1 .. o_{a+1} (a = accepted drafts, the longest accepted prefix; the minimum over the live
items of a batch), keeps the cache of those a + 1 positions and drops the rest; the next round starts from
o_{a+1}[-1].  So every round emits between 1 and k positions for one network call of k positions.

Why this rule (continuous frames never match exactly, so there is no "same token"): the emitted frames are
always the AR's OWN predictions; what a draft changes is only the INPUT of the following position, by at most
`tolerance` in rms.  The AR was trained to read noisy inputs: its prenet applies dropout 0.5 to every input at
training and at inference, and its teacher-forced inputs are real frames, which differ from its own predictions
by its training error.  A tolerance at the scale of that error (the benchmark measures it on validation:
recipes/bench/speculative.py, `--tolerance auto`) therefore feeds the AR inputs no further from its own than
what it reads in training.  The price of the rule is measured, not assumed: the same sentences at the same
seed decoded plainly and speculatively, MCD between the two and CER / DistillMOS with intervals.

Noise.  The prenet's dropout masks of position p are drawn from item b's generator position after position
(tts.models.layers.prenet).  A round draws k positions' masks; the generators are then rewound and advanced by
the a + 1 positions kept, so position p always gets the masks plain decoding gives it: with drafts equal to
the AR's own frames (accept everything), speculative decoding IS plain decoding (tested to 1e-5).

Drafters (`Drafter.draft`): `RepeatDrafter` holds the last emitted frame (a stationary-sound guess, the
baseline); `NARDrafter` reads the non-autoregressive model's mel of the same tokens: the AR's attention
centroid of its last position places it on the NAR's time axis (token centres from the NAR's durations), the
NAR frame that best matches the last emitted frame within `search` frames of it anchors the draft, and the
drafts are the NAR frames every r after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from tts.models.autoregressive import ARStep

__all__ = ["Speculation", "SpeculativeStats", "Drafter", "RepeatDrafter", "NARDrafter", "frame_distance"]


def frame_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[..., M] x [..., M] -> [...]: root mean square difference over the mel channels (normalised units)."""
    return (a - b).pow(2).mean(dim=-1).sqrt()


class Drafter(Protocol):
    def draft(self, frame: torch.Tensor, attention: torch.Tensor, emitted: int, n: int) -> torch.Tensor:
        """frame [B, M]: the last emitted frame (normalised); attention [B, L]: the last emitted position's
        alignment (zeros before the first); emitted: positions emitted so far -> [B, n, M] drafts of the LAST
        frame of the next n positions (normalised)."""
        ...


class RepeatDrafter:
    """Drafts the last emitted frame again: right wherever the sound holds still for k positions."""

    def draft(self, frame: torch.Tensor, attention: torch.Tensor, emitted: int, n: int) -> torch.Tensor:
        return frame[:, None, :].expand(-1, n, -1)


class NARDrafter:
    """Drafts from a non-autoregressive mel of the same tokens (module docstring).

    mels [B, T, M] normalised NAR frames; durations [B, L] integer frames per token (the NAR's own; the AR's
    token axis: the same frontend); lengths [B] valid NAR frames; r the AR's frames per position."""

    def __init__(self, mels: torch.Tensor, durations: torch.Tensor, lengths: torch.Tensor, r: int,
                 search: int = 8) -> None:
        if mels.shape[0] != durations.shape[0] or mels.shape[0] != lengths.shape[0]:
            raise ValueError(f"NAR drafts for {mels.shape[0]} items with {durations.shape[0]} duration rows and "
                             f"{lengths.shape[0]} lengths")
        self.mels, self.lengths, self.r, self.search = mels, lengths.long(), int(r), int(search)
        d = durations.to(torch.float32)
        self.centres = torch.cumsum(d, dim=1) - d / 2  # [B, L] each token's centre frame on the NAR's axis

    def anchor(self, frame: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """-> [B] long: the NAR frame standing for the AR's last emitted frame."""
        B, L = attention.shape
        position = (attention * torch.arange(L, dtype=attention.dtype, device=attention.device)).sum(dim=1)  # [B]
        lower = position.floor().long().clamp(0, L - 1)
        upper = (lower + 1).clamp(max=L - 1)
        w = (position - lower.to(position.dtype)).clamp(0, 1)
        centre = self.centres.gather(1, lower[:, None])[:, 0] * (1 - w) + self.centres.gather(1, upper[:, None])[:, 0] * w
        t = centre.round().long()
        offsets = torch.arange(-self.search, self.search + 1, device=frame.device)  # [W]
        candidates = torch.minimum((t[:, None] + offsets).clamp_min(0), self.lengths[:, None] - 1)  # [B, W]
        rows = self.mels.gather(1, candidates[:, :, None].expand(-1, -1, self.mels.shape[2]))  # [B, W, M]
        best = frame_distance(rows, frame[:, None, :]).argmin(dim=1)  # [B]
        return candidates.gather(1, best[:, None])[:, 0]

    def draft(self, frame: torch.Tensor, attention: torch.Tensor, emitted: int, n: int) -> torch.Tensor:
        start = self.anchor(frame, attention)  # [B]
        steps = torch.arange(1, n + 1, device=frame.device) * self.r  # [n]
        at = torch.minimum(start[:, None] + steps, self.lengths[:, None] - 1)  # [B, n]
        return self.mels.gather(1, at[:, :, None].expand(-1, -1, self.mels.shape[2]))


@dataclass
class SpeculativeStats:
    """Counts of one speculative decode (a batch)."""

    rounds: int = 0  # network calls (chunks of k positions)
    drafted: int = 0  # drafts offered: k - 1 a round
    accepted: int = 0  # drafts accepted (the minimum over the batch's live items)
    emitted: list[int] = field(default_factory=list)  # positions emitted by each round

    @property
    def acceptance(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def positions_per_round(self) -> float:
        return sum(self.emitted) / self.rounds if self.rounds else 0.0


@dataclass
class Speculation:
    """How to decode speculatively: drafter, chunk size k (>= 2: one known input + k - 1 drafts) and the
    acceptance tolerance (rms over mel channels, normalised units).  The decode counts into `stats`."""

    drafter: Drafter
    k: int = 4
    tolerance: float = 0.5
    stats: SpeculativeStats = field(default_factory=SpeculativeStats)

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
            raise ValueError(f"speculative decoding needs k >= 2 positions a round, got {self.k!r}")
        if not self.tolerance >= 0:
            raise ValueError(f"the acceptance tolerance must be >= 0, got {self.tolerance!r}")


class SpeculativeStepper:
    """The step callable of ARAcousticModel._decode for a speculative decode: a round fills a queue of emitted
    positions, the free-running loop takes them one by one (stop tokens and limits stay the loop's).

    run_chunk(cache, inputs [B, k, M]) -> ChunkOutput; cache: the decode's DecoderCache (positions held = emitted);
    generators: the items' prenet RNGs (required: the rewind needs them); skip(generators, n): draw n positions'
    masks; live(): [B] bool items still decoding."""

    def __init__(self, speculation: Speculation, run_chunk: Callable[[Any, torch.Tensor], Any], cache: Any,
                 skip: Callable[[Sequence[torch.Generator], int], None], live: Callable[[], torch.Tensor],
                 n_tokens: int) -> None:
        self.spec, self.run_chunk, self.cache, self.skip, self.live = speculation, run_chunk, cache, skip, live
        self.queue: deque = deque()
        self.stats = speculation.stats
        self.attention: torch.Tensor | None = None
        self.n_tokens = n_tokens

    def __call__(self, s: int, frame: torch.Tensor) -> ARStep:
        if self.queue:
            return self.queue.popleft()
        k = self.spec.k
        if self.attention is None:
            self.attention = frame.new_zeros(frame.shape[0], self.n_tokens)
        drafts = self.spec.drafter.draft(frame, self.attention, s, k - 1).to(frame.dtype)  # [B, k-1, M]
        generators = self.cache.generators
        states = [g.get_state() for g in generators]
        out = self.run_chunk(self.cache, torch.cat([frame[:, None], drafts], dim=1))
        close = frame_distance(out.frames[:, : k - 1, -1], drafts) <= self.spec.tolerance  # [B, k-1]
        prefix = close.long().cumprod(dim=1).sum(dim=1)  # [B] accepted drafts per item
        live = self.live()
        accepted = int(prefix[live].min()) if bool(live.any()) else 0
        n = accepted + 1
        for g, state in zip(generators, states):  # the masks of the n kept positions, as plain decoding draws them
            g.set_state(state)
        self.skip(generators, n)
        self.cache = out.cache.truncated(self.cache.length + n)
        self.stats.rounds += 1
        self.stats.drafted += k - 1
        self.stats.accepted += accepted
        self.stats.emitted.append(n)
        self.attention = out.attention[:, n - 1]
        for i in range(n):
            self.queue.append(ARStep(out.frames[:, i], out.stop_logits[:, i], out.attention[:, i]))
        return self.queue.popleft()

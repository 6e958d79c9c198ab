"""AR rescoring of NAR candidates (issue 37 item 4): an engine decorator.

`RescoringEngine(base, scorer, candidates=N)` is an Engine (tts.runtime.engine) over any other engine (torch or
ONNX), so every user of the one pipeline (CLI `--rescore N`, evaluation systems `rescore: N`, API, benchmarks)
gets rescoring by composition.  Its `mels` asks the base for N candidates of every item, scores each with an
autoregressive model run teacher-forced on that candidate, and returns the best candidate per item; `vocode`
delegates.

Candidates.  Candidate c of an item is the base engine's output for the same ids and item index with the seed
`candidate_seed(controls.seed, c)`: candidate 0 is the run's own seed (N = 1 IS the base engine, bit for bit),
candidate c > 0 a 63-bit blake2b hash of (seed, c).  The base guarantees that (seed, index) gives the same mel
in any batch, so candidate c of item i never depends on the batch; the scores are computed item by item (one
scorer call per item over its N candidates), so the winner does not either.  A base whose output ignores the
seed (the NAR at K = 0, temperature 0) gives N equal candidates: rescoring then changes nothing but the cost.

The score (lower is better) of candidate x (raw log-mel [M, T]) for tokens y:

    score(x) = reconstruction(x) + attention_weight * off_diagonal(x)

- reconstruction: the AR's teacher-forced next-frame error, mean |x_hat - x| over the T real frames and M
  channels in the AR's normalised mel space, x_hat its decoder output BEFORE the postnet (the postnet sees the
  whole sequence; the decoder output at frame t depends only on y and x[:, < t]).  That is the negative
  log-likelihood of x under a Laplace model centred on the AR's prediction (up to a scale and a constant: the
  AR was trained with L1 + L2 on this space), i.e. how well the candidate agrees with what the AR would say
  next from its own past -- the design's "most self-consistent" candidate.
- off_diagonal: the share of the teacher-forced attention mass lying off the diagonal band (the guided-
  attention prior of tts.models.layers.alignment, sigma 0.2; in [0, 1], ~0 for a clean monotonic alignment):
  a candidate whose frames the AR cannot align to the text in order (a skipped, repeated or mumbled word) is
  penalised even if its frames are locally predictable.

The scorer runs deterministically: eval mode and the prenet's inference-time dropout switched off for the
scoring call (restored after), so a score is a function of (tokens, candidate) alone -- with the dropout on,
the score's own noise would rank candidates as much as their content does.  (The mean-field prenet is what
inverted dropout's expectation is; only the AR's free-running decode needs the noise.)

Which term decides (measured, checkpoints/nar.pt + checkpoints/ar.pt, 20 held-out slt sentences, N = 8): within
an item the reconstruction term spreads by 0.0069 on average, the off-diagonal term by 0.00024 (the NAR's
candidates differ in spectral detail, not in alignment), so at weight 1 the choice is reconstruction's on all
20 (weight 2 changes 2, attention alone picks another candidate in 17).  The attention term is kept at 1 as a
guard for candidates that really misalign (the varied-prosody lab is where that is to be measured).

Known bias, to be read in the measurements: a smoother (lower global variance) candidate is easier to
predict, so the reconstruction term alone can prefer over-smoothed candidates; the GV columns of the
measurement (recipes/bench/rescoring.py) show whether it does.

Each call's per-item scores and choice are kept in `RescoringEngine.last_scores` (a list of `ItemScores`).
The AR scorer is any model of the ARAcousticModel interface (`_target`, `_teacher_forced`; Tacotron 2, the
Transformer AR); its symbol table may differ from the base's (ids are mapped by symbol; a symbol the scorer
lacks is a CheckpointError at construction), its mel config may not (MelConfigMismatchError).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts.data.batch import Batch, lengths_to_mask
from tts.errors import CheckpointError, MelConfigMismatchError
from tts.models.layers.alignment import guided_attention_weights
from tts.models.layers.prenet import Prenet
from tts.paths import CHECKPOINT_DIR
from tts.runtime.controls import RANGES, Controls
from tts.runtime.engine import EngineDecorator, MelBatch

MAX_CANDIDATES = 16  # N above this only multiplies the cost: the measured curve stops at 8
DEFAULT_SCORER = str(CHECKPOINT_DIR / "ar.pt")  # the shipped Tacotron 2
DEFAULT_ATTENTION_WEIGHT = 1.0
ATTENTION_SIGMA = 0.2  # the diagonal band's width (the guided-attention prior the AR was trained with)


def candidate_seed(seed: int, candidate: int) -> int:
    """The seed of candidate `candidate` of a run seeded with `seed`: the seed itself for candidate 0 (so N = 1
    is the base engine), else a 63-bit blake2b hash of (seed, candidate) (any int64 is a valid seed)."""
    if candidate == 0:
        return seed
    digest = hashlib.blake2b(f"rescore:{seed}:{candidate}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & int(RANGES["seed"][1])


@dataclass(frozen=True)
class ItemScores:
    """One item's candidates: their seeds, the two score terms, the total and the winner (argmin of score)."""

    index: int  # the item's index (its noise stream)
    seeds: tuple[int, ...]  # [N] candidate seeds
    reconstruction: tuple[float, ...]  # [N] mean L1 of the AR's teacher-forced prediction (normalised space)
    off_diagonal: tuple[float, ...]  # [N] attention mass off the diagonal band, in [0, 1]
    score: tuple[float, ...]  # [N] reconstruction + attention_weight * off_diagonal
    chosen: int  # argmin of score (the first on a tie)


@dataclass(frozen=True)
class CandidateScores:
    """The scorer's verdict on a batch of candidates: reconstruction [N] and off_diagonal [N] (float64 numpy)."""

    reconstruction: np.ndarray
    off_diagonal: np.ndarray

    def total(self, attention_weight: float) -> np.ndarray:
        return self.reconstruction + attention_weight * self.off_diagonal


@contextlib.contextmanager
def deterministic_prenets(model: torch.nn.Module) -> Iterator[None]:
    """The model's prenets without their inference-time dropout inside the block (restored after)."""
    prenets = [m for m in model.modules() if isinstance(m, Prenet)]
    kept = [p.dropout_at_inference for p in prenets]
    try:
        for p in prenets:
            p.dropout_at_inference = False
        yield
    finally:
        for p, k in zip(prenets, kept):
            p.dropout_at_inference = k


@torch.inference_mode()
def score_candidates(scorer: torch.nn.Module, tokens: Sequence[int], mels: Sequence[torch.Tensor]) -> CandidateScores:
    """Score candidate mels (each raw log-mel [M, T_n], real frames only) of ONE token sequence (the scorer's
    ids) with the AR `scorer` teacher-forced: the module docstring's two terms per candidate."""
    device = next(scorer.parameters()).device
    n = len(mels)
    lengths = torch.tensor([int(m.shape[1]) for m in mels], device=device)
    batch_mels = torch.full((n, int(mels[0].shape[0]), int(lengths.max())), float(scorer.mel_pad_value), device=device)
    for k, mel in enumerate(mels):
        batch_mels[k, :, : mel.shape[1]] = mel.to(device=device, dtype=torch.float32)
    token_tensor = torch.tensor(list(tokens), dtype=torch.long, device=device)[None].expand(n, -1).contiguous()
    batch = Batch(ids=[""] * n, texts=[""] * n, tokens=token_tensor,
                  token_lengths=torch.full((n,), len(tokens), device=device), mels=batch_mels, mel_lengths=lengths)
    was_training = scorer.training
    scorer.eval()
    try:
        with deterministic_prenets(scorer):
            out = scorer._teacher_forced(batch)  # normalised; mel_before [N, M, T'], alignments [N, S, L]
            target = scorer._target(batch)  # [N, M, T'] normalised, zero beyond each length
    finally:
        scorer.train(was_training)
    frames = lengths_to_mask(lengths, target.shape[2])[:, None, :].to(target.dtype)  # [N, 1, T']
    error = ((out.mel_before - target).abs() * frames).sum(dim=(1, 2)) / (lengths * target.shape[1])
    steps = (lengths + scorer.r - 1) // scorer.r  # [N] decoder steps holding real frames
    _, n_steps, n_tokens = out.alignments.shape
    band = guided_attention_weights(steps, batch.token_lengths, n_steps, n_tokens, ATTENTION_SIGMA)  # [N, S, L]
    off = (out.alignments.float() * band).sum(dim=(1, 2)) / steps.clamp_min(1)
    return CandidateScores(error.double().cpu().numpy(), off.double().cpu().numpy())


def load_scorer(scorer: Any, device: str = "cpu") -> tuple[torch.nn.Module, list[str] | None, Any]:
    """An AR model, a LoadedCheckpoint or a checkpoint path -> (model on `device`, its symbols or None, its mel
    config or None).  A model without the AR teacher-forcing interface is a CheckpointError."""
    from tts import checkpoint

    symbols = mel_config = None
    if isinstance(scorer, (str, Path)):
        scorer = checkpoint.load(scorer, device)
    if isinstance(scorer, checkpoint.LoadedCheckpoint):
        symbols, mel_config = list(scorer.frontend().symbols), scorer.mel_config
        scorer = scorer.model
    if not (hasattr(scorer, "_teacher_forced") and hasattr(scorer, "_target")):
        raise CheckpointError(f"the rescoring scorer must be an autoregressive acoustic model (Tacotron 2, the "
                              f"Transformer AR); got {type(scorer).__name__}")
    return scorer.to(device).eval(), symbols, mel_config


def attach_ar(base: Any, ar: Any, role: str, device: str | None = None) -> tuple[torch.nn.Module, np.ndarray | None]:
    """An AR model (`load_scorer`'s inputs) for a decorator over the engine `base` -> (the model on the base's
    device, the base-id -> AR-id map or None): its mel config must be the base's (MelConfigMismatchError naming
    `role`), its symbols must cover the base's (`symbol_map`)."""
    model, symbols, mel_config = load_scorer(ar, device or getattr(base, "device", "cpu"))
    base_mel = getattr(base, "mel_config", None)
    if mel_config is not None and base_mel is not None and mel_config != base_mel:
        raise MelConfigMismatchError(f"the {role}'s mel config differs from the voice's: {mel_config} vs {base_mel}")
    return model, symbol_map(base.frontend.symbols, symbols)


def map_ids(table: np.ndarray | None, ids: Sequence[int]) -> list[int]:
    """Base token ids -> the AR's (`attach_ar`'s map; None: the same table)."""
    if table is None:
        return list(ids)
    return table[np.asarray(list(ids), dtype=np.int64)].tolist()


def symbol_map(base_symbols: Sequence[str], scorer_symbols: Sequence[str] | None) -> np.ndarray | None:
    """[V_base] int64: the scorer's id of each base symbol (None when the tables are equal or unknown)."""
    if scorer_symbols is None or list(base_symbols) == list(scorer_symbols):
        return None
    where = {s: i for i, s in enumerate(scorer_symbols)}
    missing = [s for s in base_symbols if s not in where]
    if missing:
        raise CheckpointError(f"the rescoring scorer lacks {len(missing)} of the voice's symbols, e.g. {missing[:5]}: "
                              "it cannot read this voice's text")
    return np.array([where[s] for s in base_symbols], dtype=np.int64)


class RescoringEngine(EngineDecorator):
    """An Engine over `base` that returns, per item, the best of `candidates` base samples under the AR
    `scorer` (module docstring).  Everything else (text, vocoding, attributes such as mel_config) is the base's;
    it does not stream (a candidate is chosen on a whole part), so `stream_part` is None."""

    def __init__(self, base: Any, scorer: Any = DEFAULT_SCORER, candidates: int = 2,
                 attention_weight: float = DEFAULT_ATTENTION_WEIGHT, device: str | None = None) -> None:
        if isinstance(candidates, bool) or not isinstance(candidates, int) or not 1 <= candidates <= MAX_CANDIDATES:
            raise ValueError(f"rescoring candidates must be an integer in [1, {MAX_CANDIDATES}], got {candidates!r}")
        if not attention_weight >= 0:
            raise ValueError(f"attention_weight must be >= 0, got {attention_weight!r}")
        super().__init__(base)
        self.candidates = candidates
        self.attention_weight = float(attention_weight)
        self.scorer, self.to_scorer_ids = attach_ar(base, scorer, "rescoring scorer", device)
        self.last_scores: list[ItemScores] = []

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None) -> MelBatch:
        """N base calls (candidate c: seed candidate_seed(seed, c)), one scorer call per item, the winners."""
        outs = [self.base.mels(ids, indices, controls.replace(seed=candidate_seed(controls.seed, c)), forced_frames)
                for c in range(self.candidates)]
        if self.candidates == 1:
            self.last_scores = [ItemScores(int(i), (controls.seed,), (float("nan"),), (float("nan"),), (0.0,), 0)
                                for i in indices]
            return outs[0]
        seeds = tuple(candidate_seed(controls.seed, c) for c in range(self.candidates))
        scores = []
        for b, index in enumerate(indices):
            mels = [torch.as_tensor(out.mels[b][:, : int(out.lengths[b])]) for out in outs]  # N x [M, T_c]
            s = score_candidates(self.scorer, self._scorer_ids(ids[b]), mels)
            total = s.total(self.attention_weight)
            scores.append(ItemScores(int(index), seeds, tuple(s.reconstruction.tolist()),
                                     tuple(s.off_diagonal.tolist()), tuple(total.tolist()), int(np.argmin(total))))
        self.last_scores = scores
        return self._winners(outs, [s.chosen for s in scores])

    def _scorer_ids(self, ids: Sequence[int]) -> list[int]:
        return map_ids(self.to_scorer_ids, ids)

    def _winners(self, outs: list[MelBatch], chosen: list[int]) -> MelBatch:
        """Item b of outs[chosen[b]], for every b: mels (padded with the scorer's pad value, the mel config's
        log floor, in the base's array type), lengths, truncation, AR verdicts and durations."""
        lengths = np.array([outs[c].lengths[b] for b, c in enumerate(chosen)], dtype=np.int64)
        first = outs[0].mels
        shape = (len(chosen), first.shape[1], int(lengths.max()) if len(lengths) else 0)
        pad = float(self.scorer.mel_pad_value)
        if isinstance(first, torch.Tensor):
            mels: Any = torch.full(shape, pad, dtype=first.dtype, device=first.device)
        else:
            mels = np.full(shape, pad, dtype=first.dtype)
        for b, c in enumerate(chosen):
            mels[b, :, : lengths[b]] = outs[c].mels[b][:, : lengths[b]]
        failures = None if outs[0].failures is None else [outs[c].failures[b] for b, c in enumerate(chosen)]
        durations = None
        if outs[0].durations is not None:
            width = max(o.durations.shape[1] for o in outs)
            durations = np.zeros((len(chosen), width), dtype=np.int64)
            for b, c in enumerate(chosen):
                durations[b, : outs[c].durations.shape[1]] = outs[c].durations[b]
        steps = [o.refine_steps_taken for o in outs]  # the refiner's evaluations, all candidates': the real cost
        return MelBatch(mels, lengths, np.array([bool(outs[c].truncated[b]) for b, c in enumerate(chosen)]),
                        failures, None if steps[0] is None else int(sum(steps)), durations)

"""Coarse-to-fine (issue 37 item 5, the design's hybrid "NAR drafts, AR refines locally"): an engine decorator.

`CoarseToFineEngine(base, refiner)` is an Engine over any NAR engine (tts.runtime.engine): its `mels` asks the base
for its mel (the draft, with its durations, hence its length and timing) and returns, for every frame, what the AR
`refiner` predicts for that frame from the text and the draft's frames before it: the AR run teacher-forced on the
draft, its postnet output.  The refinement is local by construction: the AR's decoder output at frame t reads the
draft only through frames < t (its recurrent state; with r frames a step it reads the last frame of each group
of r, as in its training), and its postnet adds only its receptive field's few frames
around t; the length, the durations and so the rhythm stay the NAR's, so an AR attention failure cannot drop or repeat a word here (the teacher-forced attention
follows the draft).  The pass costs one AR decoder run over T / r steps, sequential in T as a free AR decode is,
but without its stop decision or failure check; the evaluation's `mel_s` measures it.

What it can and cannot fix, to be read in the measurement: the AR at frame t predicts the conditional mean of the
next frame given a true past, so where the draft is over-smoothed the AR's prediction is as smooth or smoother (the
mean of a one-to-many target); where the draft has artefacts a recording would not (a spectral glitch, a jump at a
token boundary) the AR's prediction from its past replaces them by a continuation it has seen in training.

The AR runs deterministically (eval mode, the prenet's inference-time dropout off, as for rescoring), item by item,
so the result is a function of (tokens, draft) alone: a batch gives what each item gives alone.  The AR's symbol
table may differ from the base's (ids mapped by symbol), its mel config may not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tts.data.batch import Batch
from tts.runtime.controls import Controls
from tts.runtime.engine import EngineDecorator, MelBatch
from tts.runtime.rescoring import DEFAULT_SCORER, attach_ar, deterministic_prenets, map_ids

DEFAULT_REFINER = DEFAULT_SCORER  # the shipped Tacotron 2


@torch.inference_mode()
def refine_locally(ar: torch.nn.Module, tokens: Sequence[int], draft: torch.Tensor) -> torch.Tensor:
    """The AR `ar` (ARAcousticModel interface) teacher-forced on ONE draft (raw log-mel [M, T], real frames only)
    for the token ids `tokens` (the AR's own) -> its postnet output, raw log-mel [M, T]."""
    device = next(ar.parameters()).device
    n_frames = int(draft.shape[1])
    batch = Batch(ids=[""], texts=[""], tokens=torch.tensor([list(tokens)], dtype=torch.long, device=device),
                  token_lengths=torch.tensor([len(tokens)], device=device),
                  mels=draft.to(device=device, dtype=torch.float32)[None], mel_lengths=torch.tensor([n_frames], device=device))
    was_training = ar.training
    ar.eval()
    try:
        with deterministic_prenets(ar):
            return ar(batch).mel_after[0, :, :n_frames]
    finally:
        ar.train(was_training)


class CoarseToFineEngine(EngineDecorator):
    """An Engine over the NAR `base` whose mels are the AR `refiner`'s local refinement of the base's (module
    docstring).  Everything else (text, vocoding, durations, lengths) is the base's; it does not stream."""

    def __init__(self, base: Any, refiner: Any = DEFAULT_REFINER, device: str | None = None) -> None:
        super().__init__(base)
        if getattr(base, "capabilities", None) is not None and base.capabilities.autoregressive:
            raise ValueError("coarse-to-fine refines a NAR's draft: the base engine is already autoregressive")
        self.refiner, self.to_refiner_ids = attach_ar(base, refiner, "coarse-to-fine AR", device)

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None) -> MelBatch:
        draft = self.base.mels(ids, indices, controls, forced_frames)
        refined: Any = draft.mels.clone() if isinstance(draft.mels, torch.Tensor) else np.array(draft.mels, copy=True)
        for b in range(len(ids)):
            n = int(draft.lengths[b])
            if n == 0:
                continue
            item = torch.as_tensor(draft.mels[b][:, :n])
            out = refine_locally(self.refiner, map_ids(self.to_refiner_ids, ids[b]), item)
            # the base's array type (torch or numpy), dtype and device
            refined[b, :, :n] = out.to(refined) if isinstance(refined, torch.Tensor) else out.cpu().numpy()
        return dataclasses.replace(draft, mels=refined)

"""Speculative decoding as an engine decorator (issue 37 item 3; the decoding itself: tts/models/speculative.py).

`SpeculativeEngine(base, drafter, k, tolerance)` is an Engine over a torch engine whose model is the Transformer
AR: its `mels` drafts (the NAR engine `drafter` speaks the same ids with the same controls, or "repeat": the last
frame held) and has the base decode speculatively with them; everything else (text, vocoding) is the base's.
So every user of the one pipeline (evaluation systems `speculate: k`, benchmarks) gets it by composition.

Costs are kept per call (`last_draft_s`: the drafter's seconds, `last_stats`: rounds, drafts offered and
accepted) so that a benchmark can report the acceptance rate and the speed-up with the drafter's time counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tts.errors import CheckpointError, MelConfigMismatchError
from tts.models.speculative import Drafter, NARDrafter, RepeatDrafter, Speculation, SpeculativeStats
from tts.paths import CHECKPOINT_DIR
from tts.runtime.controls import Controls
from tts.runtime.engine import EngineDecorator, MelBatch
from tts.runtime.rescoring import symbol_map

REPEAT = "repeat"  # the drafter that holds the last frame (no model)
DEFAULT_DRAFTER = str(CHECKPOINT_DIR / "nar.pt")  # the shipped NAR: the same corpus, the same frontend
DEFAULT_K = 4
DEFAULT_TOLERANCE = 0.5


class SpeculativeEngine(EngineDecorator):
    """An Engine over `base` (a TorchEngine of a Transformer AR) decoding speculatively with k positions a round.

    drafter: an Engine of a NAR model (its mel and durations of the same text draft the frames), a NAR checkpoint
    path (loaded as a mel-only torch engine), or "repeat".  Its symbols may differ from the base's only by order
    (ids are mapped by symbol); its mel config may not differ."""

    def __init__(self, base: Any, drafter: Any = REPEAT, k: int = DEFAULT_K, tolerance: float = DEFAULT_TOLERANCE) -> None:
        from tts.models.transformer_ar import TransformerAR

        model = getattr(base, "model", None)
        if not isinstance(model, TransformerAR):
            raise CheckpointError("speculative decoding needs a Transformer AR voice (a KV-cached decoder that "
                                  f"verifies drafts in one pass); got {type(model).__name__}")
        Speculation(RepeatDrafter(), k, tolerance)  # validates k and tolerance now, before any synthesis
        super().__init__(base)
        self.k, self.tolerance = int(k), float(tolerance)
        if isinstance(drafter, (str, Path)) and str(drafter) != REPEAT:
            from tts import checkpoint
            from tts.runtime.torch_engine import TorchEngine

            drafter = TorchEngine(checkpoint.load(drafter, base.device), None, base.device)
        self.drafter = None if isinstance(drafter, str) else drafter
        if self.drafter is not None:
            if self.drafter.capabilities.autoregressive:
                raise CheckpointError("the speculative drafter must be a non-autoregressive voice (it drafts a "
                                      "whole sentence in one pass)")
            mine, theirs = getattr(base, "mel_config", None), getattr(self.drafter, "mel_config", None)
            if mine is not None and theirs is not None and mine != theirs:
                raise MelConfigMismatchError(f"the drafter's mel config differs from the voice's: {theirs} vs {mine}")
            self.to_drafter_ids = symbol_map(base.frontend.symbols, list(self.drafter.frontend.symbols))
        self.last_stats: SpeculativeStats | None = None
        self.last_draft_s = 0.0

    def make_drafter(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls) -> Drafter:
        """The drafter of one call: the NAR's mels of the same items (normalised into the AR's space), or repeat."""
        if self.drafter is None:
            return RepeatDrafter()
        if self.to_drafter_ids is not None:
            ids = [self.to_drafter_ids[np.asarray(list(x), dtype=np.int64)].tolist() for x in ids]
        # the NAR's own controls (K, temperature) are the drafter's defaults; the run's seed is kept
        draft = self.drafter.mels(ids, indices, self.drafter.defaults.replace(seed=controls.seed))
        model = self.base.model
        mels = model.normalise(torch.as_tensor(draft.mels, device=self.base.device).float()).transpose(1, 2)
        return NARDrafter(mels, torch.as_tensor(draft.durations, device=self.base.device),
                          torch.as_tensor(draft.lengths, device=self.base.device), model.r)

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None) -> MelBatch:
        t0 = time.perf_counter()
        drafter = self.make_drafter(ids, indices, controls)
        self.last_draft_s = time.perf_counter() - t0
        spec = Speculation(drafter, self.k, self.tolerance)
        out = self.base.mels(ids, indices, controls, forced_frames, ar_options={"speculation": spec})
        self.last_stats = spec.stats
        return out

"""`SystemSpec`: THE description of a system under test, for `recipes.evaluate` and the listening-test build.
An acoustic system speaks through the one pipeline (tts.runtime) on the torch engine (any checkpoint)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tts.runtime.pipeline import ItemResult, Pipeline

SYSTEM_KINDS = ("acoustic", "copy", "ground_truth", "piper")
SYSTEM_VOCODER = "griffin-lim"  # a system spec's vocoder when it names none (evaluation, listening test)


@dataclass(frozen=True)
class SystemSpec:
    """One named system under test.

    kind "acoustic": text -> acoustic `checkpoint` -> `vocoder`, through a Pipeline (`pipeline()`), or a shipped
    `voice` (its first model's checkpoint and the shipped vocoder unless `checkpoint` / `vocoder` are given), with
    `refine_steps` K and refiner start-noise `temperature` (None = the checkpoint's own; NAR only), and
    `block_frames` B (block-mode NAR checkpoints: block-wise decoding; 0 = parallel; None = the checkpoint's),
    and `rescore` N (the best of N seeded candidates under the AR checkpoint `scorer`: tts.runtime.rescoring),
    and `speculate` k (a Transformer AR decoded speculatively, drafted by the NAR checkpoint `drafter` or
    "repeat", drafts kept within rms `tolerance`: tts.runtime.speculative), and `coarse_to_fine` (the NAR's mel
    refined frame by frame by that AR checkpoint run teacher-forced on it: tts.runtime.coarse_to_fine).
    The evaluation's reference kinds need no acoustic model: "ground_truth" (the corpus wav), "copy" (the
    corpus mel -> `vocoder`) and "piper" (a peer voice).  The run's seed is not part of the spec: one seed
    serves every system of a run (`identity(seed)` records it next to what made a wav).
    """

    name: str
    kind: str = "acoustic"
    vocoder: str | None = None
    checkpoint: str | None = None
    refine_steps: int | None = None
    temperature: float | None = None
    block_frames: int | None = None
    voice: str | None = None
    rescore: int | None = None  # N > 1: the best of N candidates under the AR `scorer` (tts.runtime.rescoring)
    scorer: str | None = None  # the rescoring AR checkpoint (None: tts.runtime.rescoring.DEFAULT_SCORER)
    speculate: int | None = None  # k >= 2: speculative decoding, k positions a round (tts.runtime.speculative)
    drafter: str | None = None  # its drafter: a NAR checkpoint or "repeat" (None: DEFAULT_DRAFTER)
    tolerance: float | None = None  # its acceptance rms (None: tts.runtime.speculative.DEFAULT_TOLERANCE)
    coarse_to_fine: str | None = None  # an AR checkpoint that refines the NAR's mel locally (tts.runtime.coarse_to_fine)

    def __post_init__(self) -> None:
        if self.kind == "acoustic" and self.voice is not None:
            from tts.runtime.release import shipped_checkpoint, voice_model, voice_vocoder

            if self.checkpoint is None:  # frozen: the resolved checkpoint is set once, here
                object.__setattr__(self, "checkpoint", str(shipped_checkpoint(voice_model(self.voice))))
            if self.vocoder is None:
                object.__setattr__(self, "vocoder", voice_vocoder(self.voice))  # the voice's own
        if self.kind not in SYSTEM_KINDS:
            raise ValueError(f"system {self.name!r}: unknown kind {self.kind!r}; expected one of {list(SYSTEM_KINDS)}")
        if self.kind == "acoustic" and (self.checkpoint is None or self.vocoder is None):
            raise ValueError(f"system {self.name!r}: an acoustic system needs a checkpoint and a vocoder")

    def spec(self) -> dict[str, Any]:
        """What makes the audio, without the name (a report's `systems` table, the benchmark reads K here)."""
        spec = {"kind": self.kind, "vocoder": self.vocoder, "checkpoint": self.checkpoint,
                "refine_steps": self.refine_steps, "temperature": self.temperature}
        if self.block_frames is not None:  # only when set: the identities of earlier runs' wavs stay valid
            spec["block_frames"] = self.block_frames
        if self.voice is not None:
            spec["voice"] = self.voice
        if self.rescore is not None:  # only when set, as block_frames
            spec["rescore"], spec["scorer"] = self.rescore, self.scorer
        if self.speculate is not None:
            spec["speculate"], spec["drafter"], spec["tolerance"] = self.speculate, self.drafter, self.tolerance
        if self.coarse_to_fine is not None:
            spec["coarse_to_fine"] = self.coarse_to_fine
        return spec

    def identity(self, seed: int | None = None) -> dict[str, Any]:
        """spec + the checkpoint's mtime (a retrained `last.ckpt` is a different system) + the run's seed
        for an acoustic system (its noise depends on it): stored beside each wav, a change means resynthesis."""
        ident = self.spec()
        if self.checkpoint is not None and Path(self.checkpoint).is_file():
            ident["checkpoint_mtime_ns"] = Path(self.checkpoint).stat().st_mtime_ns
        if self.kind == "acoustic" and seed is not None:
            ident["seed"] = int(seed)
        return ident

    def pipeline(self, device: str = "cpu") -> Pipeline:
        """The pipeline of an acoustic system (torch engine); a control its model lacks (K on an AR) is a
        ValueError here, before any synthesis."""
        from tts.runtime.torch_engine import TorchEngine

        if self.kind != "acoustic":
            raise ValueError(f"system {self.name!r} of kind {self.kind!r} has no acoustic model to synthesise with")
        engine = TorchEngine.from_paths(self.checkpoint, self.vocoder, device)
        if self.rescore is not None:
            from tts.runtime.rescoring import DEFAULT_SCORER, RescoringEngine

            engine = RescoringEngine(engine, self.scorer or DEFAULT_SCORER, self.rescore)
        if self.speculate is not None:
            from tts.runtime.speculative import DEFAULT_DRAFTER, DEFAULT_TOLERANCE, SpeculativeEngine

            engine = SpeculativeEngine(engine, self.drafter or DEFAULT_DRAFTER, self.speculate,
                                       DEFAULT_TOLERANCE if self.tolerance is None else self.tolerance)
        if self.coarse_to_fine is not None:
            from tts.runtime.coarse_to_fine import CoarseToFineEngine

            engine = CoarseToFineEngine(engine, self.coarse_to_fine)
        pipeline = Pipeline(engine)
        self.controls(pipeline, 0)
        return pipeline

    def controls(self, pipeline: Pipeline, seed: int):
        return pipeline.controls(refine_steps=self.refine_steps, temperature=self.temperature,
                                 block_frames=self.block_frames, seed=seed)

    def synthesize_items(self, pipeline: Pipeline, texts: Sequence[str], seed: int,
                         indices: Sequence[int] | None = None) -> list[ItemResult]:
        """`pipeline.synthesize_items` with this system's controls (pipeline from `self.pipeline()`)."""
        return pipeline.synthesize_items(texts, self.controls(pipeline, seed), indices)

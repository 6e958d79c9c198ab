"""The Python API of the shipped voice.

    import tts
    voice = tts.load()                           # the default voice of checkpoints/default.json
    audio = voice.synthesize("Hello there.")    # Audio: .samples (numpy float32 [N]), .sample_rate
    audio.save("hello.wav")
    for chunk in voice.stream("A long text. Sentence by sentence."):
        ...                                      # numpy float32 chunks as each sentence is made

`tts.load()` speaks with the ONNX export of the default voice (`python -m tts.export`) when it is current,
else with torch (`runtime="torch"` / `"onnx"` choose).  Everything goes through the one pipeline
(tts.runtime.pipeline) over either engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts.runtime import Controls, Pipeline


@dataclass(frozen=True)
class Audio:
    """What `Voice.synthesize` returns."""

    samples: np.ndarray  # [N] float32 in [-1, 1], mono
    sample_rate: int
    sentences: tuple[str, ...]  # the parts spoken (sentences; clause parts of over-long ones)
    notes: tuple[str, ...] = ()  # e.g. a long sentence split, an unspeakable sentence skipped

    @property
    def seconds(self) -> float:
        return self.samples.size / self.sample_rate

    def save(self, path: str | Path) -> Path:
        """A 16-bit PCM wav at `path`."""
        import soundfile as sf

        sf.write(str(path), self.samples, self.sample_rate, subtype="PCM_16")
        return Path(path)


class Voice:
    """One loaded voice (acoustic model + vocoder) on one engine.  Not thread-safe: one call at a time
    (tts.serve batches concurrent requests through one worker)."""

    def __init__(self, pipeline: Pipeline, name: str) -> None:
        self.pipeline, self.name = pipeline, name

    @property
    def runtime(self) -> str:
        return self.pipeline.engine.name

    @property
    def sample_rate(self) -> int:
        return self.pipeline.sample_rate

    def controls(self, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
                 refine_steps: int | None = None, temperature: float | None = None) -> Controls:
        """The voice's own controls with the given ones laid over them (ValueError if out of range or not a
        control of this voice's model)."""
        return self.pipeline.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                      temperature=temperature)

    def synthesize(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
                   refine_steps: int | None = None, temperature: float | None = None, batch_size: int = 8) -> Audio:
        """`text` spoken whole (sentences `pause_s` apart, `batch_size` sentences per model call).  Bad text
        raises tts.text.errors.TextError; an out-of-range control ValueError."""
        controls = self.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                 temperature=temperature)
        result = self.pipeline.synthesize(text, controls, batch_size=batch_size)
        return Audio(result.wave, result.sample_rate, tuple(result.sentences), tuple(result.notes))

    def stream(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
               refine_steps: int | None = None, temperature: float | None = None) -> Iterator[np.ndarray]:
        """`text` as float32 chunks [n] in order, each handed out as soon as it is made: the audio of a
        sentence (with a block-wise model and a streaming vocoder, pieces of it) and the pauses between
        sentences.  Joined they are `synthesize(text, batch_size=1).samples` within
        tts.runtime.pipeline.STREAM_TOLERANCE.  Text and controls are checked before the first chunk."""
        controls = self.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                 temperature=temperature)
        return self.pipeline.stream_utterance(self.pipeline.utterance(text, controls))  # bad text raises here


def load(model: str | None = None, *, checkpoint: str | Path | None = None, vocoder: str | None = None,
         device: str = "cpu", runtime: str = "auto", onnx_dir: str | Path | None = None,
         threads: int | None = None) -> Voice:
    """The voice: `model` a shipped acoustic model ("nar", "ar"; default: checkpoints/default.json) or an
    acoustic `checkpoint` file, with `vocoder` (default: default.json's).  runtime: "auto" (the ONNX export
    of the default voice when it is current and asked for, else torch), "torch", or "onnx" (the export in
    `onnx_dir`, default checkpoints/onnx, run by onnxruntime without torch); `threads`: CPU threads."""
    from tts.runtime.release import open_pipeline

    pipeline = open_pipeline(model, checkpoint, vocoder, runtime, device, onnx_dir, threads)
    if pipeline.engine.name == "onnx":
        name = "onnx:" + Path(pipeline.engine.onnx_dir).name
    else:
        from tts.runtime.release import shipped_defaults

        defaults = shipped_defaults() if checkpoint is None or vocoder is None else {}
        stem = Path(checkpoint).stem if checkpoint is not None else (model or defaults["acoustic"])
        name = f"{stem}+{vocoder or defaults['vocoder']}"
    return Voice(pipeline, name)

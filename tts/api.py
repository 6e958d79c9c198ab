"""The Python API of the shipped voice.

    import tts
    voice = tts.load()                           # the default voice of checkpoints/default.json
    audio = voice.synthesize("Hello there.")    # Audio: .samples (numpy float32 [N]), .sample_rate
    audio.save("hello.wav")
    for chunk in voice.stream("A long text. Sentence by sentence."):
        ...                                      # numpy float32 chunks as each sentence is made

`tts.load(runtime="onnx")` speaks with the ONNX export (`python -m tts.export`) through onnxruntime.
Everything goes through the one inference path (`tts.inference.Synthesizer`, or its ONNX counterpart).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RUNTIMES = ("torch", "onnx")


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
    """One loaded voice (acoustic model + vocoder).  Not thread-safe: one call at a time (tts.serve batches
    concurrent requests through one worker)."""

    def __init__(self, synth: Any, name: str, runtime: str) -> None:
        self.synth, self.name, self.runtime = synth, name, runtime

    @property
    def sample_rate(self) -> int:
        return int(self.synth.mel_config.sample_rate if self.runtime == "torch" else self.synth.sample_rate)

    def synthesize(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
                   refine_steps: int | None = None, temperature: float | None = None, batch_size: int = 8) -> Audio:
        """`text` spoken whole (sentences `pause_s` apart, `batch_size` sentences per model call).  Bad text
        raises tts.text.errors.TextError; an out-of-range control ValueError."""
        result = self.synth.synthesize(text, seed=seed, batch_size=batch_size,
                                       **_controls(speed, pitch_shift, refine_steps, temperature))
        wave = result.wave.numpy() if hasattr(result.wave, "numpy") else np.asarray(result.wave)
        return Audio(wave.astype(np.float32, copy=False), result.sample_rate, tuple(result.sentences),
                     tuple(result.notes))

    def stream(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
               refine_steps: int | None = None, temperature: float | None = None) -> Iterator[np.ndarray]:
        """`text` as float32 chunks [n] in order, each handed out as soon as it is made: the audio of a
        sentence (with a block-wise model and a streaming vocoder, pieces of it) and the pauses between
        sentences.  Joined they are `synthesize(text, batch_size=1).samples` within
        tts.inference.STREAM_TOLERANCE (`Synthesizer.stream`; the ONNX runtime's synthesize with a sink).
        Text and controls are checked before the first chunk."""
        ctl = _controls(speed, pitch_shift, refine_steps, temperature)
        if self.runtime == "torch":
            utt = self.synth.utterance(text, seed=seed, **ctl)  # bad text or controls raise here, not at next()
            return (chunk.numpy() for chunk in self.synth.stream_utterance(utt))
        return self._stream_sink(text, seed, ctl)

    def _stream_sink(self, text: str, seed: int, ctl: dict[str, Any]) -> Iterator[np.ndarray]:
        """A runtime whose synthesize hands each piece to a sink (ONNX): run it in a thread (one sentence per
        batch, for the first audio soonest) and yield its pieces."""
        self.synth.controls(**ctl)  # a bad control before the first chunk, as with torch
        pieces: queue.Queue = queue.Queue(maxsize=4)  # bounded: the thread waits for a slow consumer
        done = object()

        def work() -> None:
            try:
                self.synth.synthesize(text, seed=seed, batch_size=1,
                                      sink=lambda w: pieces.put(np.asarray(w, np.float32)), **ctl)
                pieces.put(done)
            except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
                pieces.put(e)

        threading.Thread(target=work, daemon=True).start()
        while (item := pieces.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item


def _controls(speed: float | None, pitch_shift: float | None, refine_steps: int | None,
              temperature: float | None) -> dict[str, Any]:
    return {k: v for k, v in dict(speed=speed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                  temperature=temperature).items() if v is not None}


def load(model: str | None = None, *, checkpoint: str | Path | None = None, vocoder: str | None = None,
         device: str = "cpu", runtime: str = "torch", onnx_dir: str | Path | None = None,
         threads: int | None = None) -> Voice:
    """The voice: `model` a shipped acoustic model ("nar", "ar"; default: checkpoints/default.json) or an
    acoustic `checkpoint` file, with `vocoder` (default: default.json's).  runtime="onnx": the export in
    `onnx_dir` (default checkpoints/onnx), run by onnxruntime without torch; `threads`: CPU threads."""
    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {list(RUNTIMES)}, got {runtime!r}")
    if runtime == "onnx":
        if model is not None or checkpoint is not None or vocoder is not None or device != "cpu":
            raise ValueError("runtime='onnx' speaks the exported default voice on the CPU: "
                             "give no model, checkpoint, vocoder or device")
        try:
            from tts.onnx_runtime import DEFAULT_ONNX_DIR, OnnxSynthesizer
        except ImportError as e:  # onnxruntime not installed (a base dependency: a broken environment)
            raise RuntimeError(f"ONNX runtime not available ({e}): pip install -e . (onnxruntime), then "
                               "python -m tts.export") from e
        synth = OnnxSynthesizer.load(onnx_dir or DEFAULT_ONNX_DIR, threads=threads or 1)
        return Voice(synth, "onnx:" + Path(onnx_dir or DEFAULT_ONNX_DIR).name, "onnx")
    import torch

    from tts.inference import Synthesizer, shipped_checkpoint, shipped_defaults

    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    defaults = shipped_defaults() if checkpoint is None or vocoder is None else {}
    acoustic = Path(checkpoint) if checkpoint is not None else shipped_checkpoint(model or defaults["acoustic"])
    vocoder = vocoder or defaults["vocoder"]
    synth = Synthesizer.from_paths(acoustic, vocoder, device=device)
    return Voice(synth, f"{acoustic.stem}+{vocoder}", "torch")

"""The Python API of the shipped voice.

    import tts
    voice = tts.load()                           # the default voice of checkpoints/default.json
    joe = tts.load(voice="joe")                  # another shipped voice (tts.voices() lists them)
    audio = voice.synthesize("Hello there.")    # Audio: .samples (numpy float32 [N]), .sample_rate
    audio.save("hello.wav")
    audio.words                                  # each word's start_s / end_s in the audio, and its phones
    for chunk in voice.stream("A long text. Sentence by sentence."):
        ...                                      # numpy float32 chunks as each sentence is made

`tts.load()` speaks with the ONNX export of the default voice (`python -m tts.export`) when it is current,
else with torch (`runtime="torch"` / `"onnx"` choose).  Everything goes through the one pipeline
(tts.runtime.pipeline) over either engine.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tts.runtime import Controls, Pipeline
from tts.runtime.controls import MAX_BATCH_SIZE, MAX_THREADS
from tts.runtime.timestamps import WordTiming


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    """An int argument in [low, high]: TypeError for another type (bool and 1.5 included), ValueError outside."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")


@dataclass(frozen=True)
class Audio:
    """What `Voice.synthesize` returns."""

    samples: np.ndarray  # [N] float32 in [-1, 1], mono
    sample_rate: int
    sentences: tuple[str, ...]  # the parts spoken (sentences; clause parts of over-long ones)
    notes: tuple[str, ...] = ()  # e.g. a long sentence split, an unspeakable sentence skipped
    # each spoken word's place in `samples` (seconds) and its phones, from the model's durations (the AR's from
    # its attention): subtitles, highlighting, lip sync
    words: tuple[WordTiming, ...] = ()

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

    def __init__(self, pipeline: Pipeline, name: str, voice: str | None = None) -> None:
        # voice: the shipped voice's name (None: an acoustic checkpoint file's own voice)
        self.pipeline, self.name, self.voice = pipeline, name, voice

    @property
    def runtime(self) -> str:
        return self.pipeline.engine.name

    @property
    def sample_rate(self) -> int:
        return self.pipeline.sample_rate

    def controls(self, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
                 refine_steps: int | None = None, temperature: float | None = None) -> Controls:
        """The voice's own controls with the given ones laid over them (None = the voice's own; `seed` an int).
        TypeError for a value of the wrong type ("2" for speed, None for seed); ValueError for one out of range
        (tts.runtime.controls.RANGES), not whole (1.5 steps) or a control this voice's model lacks."""
        if seed is None:  # None means "the voice's own" to the pipeline; a seed is always given here
            raise TypeError("seed must be an int, got None")
        return self.pipeline.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                      temperature=temperature)

    def synthesize(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
                   refine_steps: int | None = None, temperature: float | None = None, batch_size: int = 8,
                   sentence_silence: float | None = None, ssml: bool = False) -> Audio:
        """`text` spoken whole (sentences `sentence_silence` seconds apart, default the pipeline's pause_s;
        `batch_size` sentences per model call, 1 to MAX_BATCH_SIZE), with each word's timing (`Audio.words`).
        SSML (tts.text.ssml) when `ssml` or the text starts with <speak>.
        Every argument is checked before any work: TypeError for a wrong type, ValueError for a value out of
        range; bad text raises tts.text.errors.TextError."""
        _check_text(text)
        _check_int("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        controls = self.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                 temperature=temperature)
        result = self.pipeline.synthesize(text, controls, batch_size=batch_size, timestamps=True,
                                          sentence_silence=sentence_silence, ssml=ssml)
        return Audio(result.wave, result.sample_rate, tuple(result.sentences), tuple(result.notes),
                     tuple(result.words or ()))

    def stream(self, text: str, *, speed: float | None = None, seed: int = 0, pitch_shift: float | None = None,
               refine_steps: int | None = None, temperature: float | None = None,
               sentence_silence: float | None = None, ssml: bool = False) -> Iterator[np.ndarray]:
        """`text` as float32 chunks [n] in order, each handed out as soon as it is made: the audio of a
        sentence (with a block-wise model and a streaming vocoder, pieces of it) and the pauses between
        sentences.  Joined they are `synthesize(text, batch_size=1).samples` within
        tts.runtime.pipeline.STREAM_TOLERANCE.  Text and controls are checked before the first chunk."""
        _check_text(text)
        controls = self.controls(speed=speed, seed=seed, pitch_shift=pitch_shift, refine_steps=refine_steps,
                                 temperature=temperature)
        utt = self.pipeline.utterance(text, controls, lazy=True, sentence_silence=sentence_silence, ssml=ssml)
        return self.pipeline.stream_utterance(utt)  # bad text (and bad SSML) raised above, before any chunk


def voices() -> dict[str, list[str]]:
    """The shipped voices (checkpoints/default.json): voice -> its acoustic models, the first speaking for it."""
    from tts.runtime.release import shipped_defaults

    return {voice: list(models) for voice, models in shipped_defaults()["voices"].items()}


def load(model: str | None = None, *, voice: str | None = None, checkpoint: str | Path | None = None,
         vocoder: str | None = None, device: str = "cpu", runtime: str = "auto", onnx_dir: str | Path | None = None,
         threads: int | None = None, lexicon: str | Path | None = None) -> Voice:
    """The voice: a shipped `voice` ("slt", "joe"; default: checkpoints/default.json's) and `model`, one of its
    acoustic models ("nar", "nar_block", "ar" for slt; default: the voice's first), or an acoustic `checkpoint`
    file, with `vocoder` (default: the voice's own, `tts.runtime.release.voice_vocoder`).  An unknown voice or
    model is a ValueError naming the shipped
    ones.  runtime: "auto" (the ONNX export when it holds the model, is current and is asked for, else torch),
    "torch", or "onnx" (the export in `onnx_dir`, default checkpoints/onnx, run by onnxruntime without torch);
    `threads`: CPU threads.  `lexicon`: a user lexicon file (word TAB phones; tts.text.lexicon) whose
    pronunciations win over the frontend's own."""
    from tts.runtime.release import RUNTIMES, device_problem, model_voice, open_pipeline, voice_model

    for name, value in (("model", model), ("voice", voice), ("vocoder", vocoder)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise (ValueError if isinstance(value, str) else TypeError)(
                f"{name} must be a non-empty str or None, got {value!r}")
    for name, value in (("checkpoint", checkpoint), ("onnx_dir", onnx_dir)):
        if value is not None and (not isinstance(value, (str, Path)) or not str(value).strip()):
            raise (ValueError if isinstance(value, str) else TypeError)(
                f"{name} must be a non-empty path (str or Path) or None, got {value!r}")
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise (ValueError if isinstance(runtime, str) else TypeError)(
            f"runtime must be one of {list(RUNTIMES)}, got {runtime!r}")
    if not isinstance(device, str):
        raise TypeError(f"device must be a str such as 'cpu' or 'cuda:0', got {type(device).__name__} {device!r}")
    problem = device_problem(device)
    if problem:
        raise ValueError(f"device {problem}")
    if threads is not None:
        _check_int("threads", threads, 1, MAX_THREADS)
    if checkpoint is not None and voice is not None:
        raise ValueError("give a voice or a checkpoint, not both (a checkpoint speaks with its own voice)")
    user_lexicon = None
    if lexicon is not None:
        from tts.text.lexicon import Lexicon

        if not isinstance(lexicon, (str, Path)):
            raise TypeError(f"lexicon must be a path (str or Path) or None, got {type(lexicon).__name__}")
        user_lexicon = Lexicon.load(lexicon)
    shipped = voice_model(voice, model) if checkpoint is None else None  # an unknown voice fails before loading
    pipeline = open_pipeline(shipped, checkpoint, vocoder, runtime, device, onnx_dir, threads)
    pipeline.use_lexicon(user_lexicon)
    if pipeline.engine.name == "onnx":
        name = f"onnx:{shipped}"
    else:
        from tts.runtime.release import model_vocoder

        stem = Path(checkpoint).stem if checkpoint is not None else shipped
        name = f"{stem}+{vocoder or model_vocoder(shipped)}"
    return Voice(pipeline, name, model_voice(shipped) if shipped is not None else None)

"""The engine interface: what the one pipeline (tts.runtime.pipeline) needs from a way of running the models.

Two implementations: `TorchEngine` (tts.runtime.torch_engine: the checkpoints, any model, any vocoder) and
`OnnxEngine` (tts.runtime.onnx_engine: the exported default voice on onnxruntime, no torch).  An engine runs
the models' own maths (eager, or the exported graphs); it does no text processing, batching, repair or
checking: that is the pipeline's, written once for both.

What an engine can do is declared in `Capabilities`, never sniffed from signatures.  Arrays crossing the
interface are numpy (waves float32 [N]; lengths int64), so the pipeline and its callers are the same for
both engines; mels stay engine-native (a torch tensor or a numpy array) between `mels` and `vocode`.

Torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from tts.runtime.controls import Controls


@dataclass(frozen=True)
class Capabilities:
    """What an engine's loaded voice can do.

    controls: the controls its model takes beyond the seed (a NAR: refine_steps, temperature, speed,
        pitch_shift, block_frames; the Tacotron 2 AR: none);
    block_mode: block_frames > 0 works (a block-mode checkpoint; a parallel one takes only 0);
    streaming: it makes a part's audio block by block (`Engine.stream_part`: a block-mode NAR and a
        streaming vocoder); otherwise a streamed part is one chunk;
    autoregressive: its decodes carry attention verdicts (`MelBatch.failures`), repaired by retries with
        other seeds;
    seeded: its output depends on Controls.seed (the refiner's noise, the AR's prenet dropout);
    forced_lengths: `mels` accepts forced output lengths (the benchmark's random-weight models)."""

    controls: frozenset[str]
    block_mode: bool = False
    streaming: bool = False
    autoregressive: bool = False
    seeded: bool = True
    forced_lengths: bool = False


@dataclass
class MelBatch:
    """One `Engine.mels` call's output."""

    mels: Any  # [B, M, T] raw log-mel, engine-native (torch tensor or numpy), padded
    lengths: np.ndarray  # [B] int64 valid frames per item
    truncated: np.ndarray  # [B] bool: the max-frames guard cut the item (the pipeline re-speaks it in parts)
    failures: list[Any] | None = None  # per item, the AR's attention verdict (.ok, str) or None
    refine_steps_taken: int | None = None  # refiner network evaluations (None: no refiner)
    # [B, L] int64 frames each token got (padding 0), row b summing to lengths[b]: a NAR's own durations, the
    # AR's from its attention (tts.durations.monotonic_alignment); the source of word timestamps
    durations: np.ndarray | None = None


@dataclass
class StreamPiece:
    """A piece of one part's audio from `Engine.stream_part`, with the seconds it cost."""

    wave: np.ndarray  # [n] float32 (may be empty: the vocoder's look-ahead holds samples back)
    mel_s: float
    vocoder_s: float
    durations: np.ndarray | None = None  # [L] int64 frames per token of the part, on its first piece only


class Engine(Protocol):
    name: str  # e.g. "torch" or "onnx"
    sample_rate: int
    hop_length: int  # samples per mel frame: a wave is exactly frames * hop_length long
    capabilities: Capabilities
    defaults: Controls  # the voice's own controls (its model's config; the export's manifest)
    frontend: Any  # the voice's tts.text.TextFrontend (its symbols, its encoding)

    def encode(self, text: str, lexicon: Any = None) -> list[int]:
        """Text -> token ids (the voice's text frontend, with a user lexicon (tts.text.lexicon.Lexicon) over its
        own pronunciations when given; raises tts.text.errors.TextError)."""

    def encode_words(self, text: str, lexicon: Any = None) -> Any:
        """Text -> tts.text.frontend.EncodedText: `encode`'s ids and each word's id range (word timestamps)."""

    def decode(self, ids: Sequence[int]) -> list[str]:
        """Token ids -> their symbols."""

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None) -> MelBatch:
        """Token id lists -> a MelBatch.  Item b's noise comes from (controls.seed, indices[b]) whatever the
        batch (tts.noise), so an item sounds the same alone or batched."""

    def vocode(self, batch: MelBatch) -> list[np.ndarray]:
        """Each item's wave [lengths[b] * hop] float32 in [-1, 1] (unchecked: the pipeline checks)."""

    def stream_part(self, ids: Sequence[int], index: int, controls: Controls) -> Iterator[StreamPiece] | None:
        """Part `ids` (item `index`) as audio pieces in order, or None when this part cannot stream (an engine
        without Capabilities.streaming, or a part the frame guard cut: the pipeline speaks it whole)."""


class TextEncoding:
    """The text side of an engine, the same for both: its voice's frontend (`self.frontend`) with an optional
    user lexicon."""

    frontend: Any

    def encode(self, text: str, lexicon: Any = None) -> list[int]:
        return self.frontend.encode(text, lexicon)

    def encode_words(self, text: str, lexicon: Any = None) -> Any:
        return self.frontend.encode_words(text, lexicon)

    def decode(self, ids: Sequence[int]) -> list[str]:
        return self.frontend.decode(list(ids))


class EngineDecorator:
    """An Engine over another one (`base`): everything is the base's (text, vocoding, attributes such as
    mel_config, model, device) except `mels`, which the subclass writes, and streaming, which is off (a decorator
    decides on whole parts).  AR rescoring (tts.runtime.rescoring) and speculative decoding
    (tts.runtime.speculative) are decorators, so every user of the one pipeline gets them by composition."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.capabilities = replace(base.capabilities, streaming=False)

    def __getattr__(self, name: str) -> Any:
        if name == "base":  # not yet set (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self.base, name)

    def encode(self, text: str, lexicon: Any = None) -> list[int]:
        return self.base.encode(text, lexicon)

    def encode_words(self, text: str, lexicon: Any = None) -> Any:
        return self.base.encode_words(text, lexicon)

    def decode(self, ids: Sequence[int]) -> list[str]:
        return self.base.decode(ids)

    def vocode(self, batch: MelBatch) -> list[np.ndarray]:
        return self.base.vocode(batch)

    def stream_part(self, ids: Sequence[int], index: int, controls: Any) -> Iterator[StreamPiece] | None:
        return None


def timed_pieces(chunks: Iterator[Any], push: Callable[[Any], np.ndarray], finish: Callable[[], np.ndarray],
                 prepare_s: float = 0.0, durations: np.ndarray | None = None) -> Iterator[StreamPiece]:
    """An engine's `stream_part` from its mel chunks (in order, each final) and its streaming vocoder (`push` a
    chunk -> new audio [n] float32, `finish` -> the rest): a StreamPiece per chunk and one for the rest, each
    with the seconds the chunk (mel_s; `prepare_s` added to the first) and its audio (vocoder_s) cost; the
    part's token `durations` [L] ride on the first."""
    carry = prepare_s
    while True:
        t0 = time.perf_counter()
        chunk = next(chunks, None)
        t1 = time.perf_counter()
        audio = push(chunk) if chunk is not None else finish()
        yield StreamPiece(audio, t1 - t0 + carry, time.perf_counter() - t1, durations)
        carry, durations = 0.0, None
        if chunk is None:
            return

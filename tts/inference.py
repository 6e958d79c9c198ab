"""THE text -> waveform path: one acoustic checkpoint and one vocoder.

Every entry point goes through `Synthesizer` (tests/test_one_inference_path.py enforces it):
  * `synthesize(text)`: the CLI path (`python -m tts.synthesize`): sentence split, batches, pauses;
  * `synthesize_items(texts)`: one token sequence per text, batch 1, per-item timings and verdicts
    (`recipes.evaluate`, the listening-test build);
  * the stages `encode` -> `pad` -> `mels` -> `vocode` that both are built on, which `tts.benchmark`
    times one by one (with forced output lengths for random-weight models).
`SystemSpec` is the one description of a system under test (evaluation, listening test).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tts import checkpoint
from tts.errors import CheckpointError, SynthesisError
# the torch-free rules, shared with the ONNX runtime (tts.onnx_runtime), re-exported here
from tts.inference_text import (  # noqa: F401
    CLAUSE_PAUSE_S, CONTROL_RANGES, DEFAULTS_FILE, Part, _short, check_controls, encode_splitting, prepare_parts,
    shipped_controls, shipped_defaults, split_clause, with_final_stop)
from tts.models.layers.alignment import ARFailure
from tts.models.outputs import MelOutput
from tts.models.refiner import item_noise_seed
from tts.paths import CHECKPOINT_DIR
from tts.text import TextFrontend
from tts.text.errors import UnspeakableTextError
from tts.vocoder.base import Vocoder, WaveOutput
from tts.vocoder.registry import load_vocoder

# How far `Synthesizer.stream`'s audio may lie from `synthesize`'s (float samples, full scale 1): the block
# path refines in windows and vocodes in chunks, which reorders float sums (measured up to 1.3e-5 with the
# source-filter vocoder, tests/test_streaming.py): within a 16-bit step (3e-5), so the written wavs differ
# by at most one step.  (Griffin-Lim amplifies the ~2e-6 mel change of another batch size to ~4e-3.)
STREAM_TOLERANCE = 1e-4


@dataclass
class Timings:
    text_s: float = 0.0
    mel_s: float = 0.0
    vocoder_s: float = 0.0
    first_audio_s: float | None = None  # wall time until the first sentence batch was audio

    @property
    def total_s(self) -> float:
        return self.text_s + self.mel_s + self.vocoder_s


@dataclass
class SynthesisResult:
    wave: torch.Tensor  # [N] float32, -1..1
    sample_rate: int
    sentences: list[str]
    timings: Timings
    notes: list[str] = field(default_factory=list)  # e.g. AR failures, skipped sentences
    streamed_samples: int = 0  # samples handed to `synthesize(sink=...)` (then `wave` is empty)

    @property
    def seconds(self) -> float:
        return (self.wave.numel() + self.streamed_samples) / self.sample_rate

    @property
    def rtf(self) -> float:
        return self.timings.total_s / max(self.seconds, 1e-9)


def shipped_checkpoint(model: str) -> Path:
    """checkpoints/MODEL.pt; a model the release does not ship is a clear error naming what it does ship."""
    path = CHECKPOINT_DIR / f"{model}.pt"
    if not path.is_file():
        shipped = sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt"))
        raise CheckpointError(f"no shipped {model!r} model ({path} is missing); this release ships "
                              f"{shipped or 'none'}: train one (recipes.train) and pass --checkpoint PATH")
    return path


SYSTEM_KINDS = ("acoustic", "copy", "ground_truth", "piper")
SYSTEM_VOCODER = "griffin-lim"  # a system spec's vocoder when it names none (evaluation, listening test)


@dataclass(frozen=True)
class SystemSpec:
    """One named system under test: THE system description of `recipes.evaluate` and the listening-test build.

    kind "acoustic": text -> acoustic `checkpoint` -> `vocoder`, through a `Synthesizer` (`synthesizer()`),
    with `refine_steps` K and refiner start-noise `temperature` (None = the checkpoint's own; NAR only), and
    `block_frames` B (block-mode NAR checkpoints: block-wise decoding; 0 = parallel; None = the checkpoint's).
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

    def __post_init__(self) -> None:
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

    def synthesizer(self, device: str = "cpu") -> "Synthesizer":
        """The Synthesizer of an acoustic system; a control its model lacks (K on an AR) is a ValueError here,
        before any synthesis."""
        if self.kind != "acoustic":
            raise ValueError(f"system {self.name!r} of kind {self.kind!r} has no acoustic model to synthesise with")
        synth = Synthesizer.from_paths(self.checkpoint, self.vocoder, device)
        synth.controls(refine_steps=self.refine_steps, temperature=self.temperature, block_frames=self.block_frames)
        return synth

    def synthesize_items(self, synth: "Synthesizer", texts: Sequence[str], seed: int,
                         indices: Sequence[int] | None = None) -> list["ItemResult"]:
        """`synth.synthesize_items` with this system's controls (synth from `self.synthesizer()`)."""
        return synth.synthesize_items(texts, seed=seed, indices=indices, refine_steps=self.refine_steps,
                                      temperature=self.temperature, block_frames=self.block_frames)


@dataclass
class Utterance:
    """A text prepared for speaking (`Synthesizer.utterance`): its parts (part k's noise comes from (seed, k))
    and the run that speaks them (seed, controls, notes, timings, repairs)."""

    parts: list[Part]
    run: "_Run"

    @property
    def notes(self) -> list[str]:
        return self.run.notes


@dataclass
class TokenBatch:
    tokens: torch.Tensor  # [B, L] long, zero-padded
    lengths: torch.Tensor  # [B] valid tokens per item


@dataclass
class ItemResult:
    """One text spoken as one token sequence (`Synthesizer.synthesize_items`)."""

    text: str
    wave: torch.Tensor  # [N] float32, -1..1, CPU
    sample_rate: int
    frames: int  # mel frames the acoustic model made
    n_tokens: int
    mel_s: float  # wall seconds of mel generation (synchronised on CUDA)
    vocoder_s: float  # wall seconds of the vocoder
    ar_failure: ARFailure | None = None  # the AR's verdict on its decode (None for a NAR)
    refine_steps_taken: int | None = None  # refiner network evaluations (None for an AR)

    @property
    def seconds(self) -> float:
        return self.wave.numel() / self.sample_rate


def pad_tokens(ids: Sequence[Sequence[int]], device: str = "cpu") -> TokenBatch:
    """Token id lists -> a zero-padded TokenBatch on `device`."""
    lengths = torch.tensor([len(x) for x in ids], device=device)
    tokens = torch.zeros(len(ids), int(lengths.max()), dtype=torch.long, device=device)
    for b, seq in enumerate(ids):
        tokens[b, : len(seq)] = torch.tensor(list(seq), device=device)
    return TokenBatch(tokens, lengths)


def forced_durations(n_symbols: int, fps: float) -> list[int]:
    """Integer frames per symbol summing to round(n * fps), spread evenly (forced NAR output lengths)."""
    edges = [round(i * fps) for i in range(n_symbols + 1)]
    return [max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]


class Synthesizer:
    """Text -> wave with one acoustic model and one vocoder; see the module docstring for the three ways in.

    `vocoder` may be None for a mel-only Synthesizer (the benchmark's memory probe of the acoustic model
    alone); `vocode` then raises."""

    def __init__(self, acoustic: checkpoint.LoadedCheckpoint, vocoder: Vocoder | None, device: str = "cpu",
                 pause_s: float = 0.25, default_controls: dict[str, Any] | None = None) -> None:
        if acoustic.meta.kind != "acoustic":
            raise CheckpointError(f"expected an acoustic checkpoint, got kind {acoustic.meta.kind!r}")
        if vocoder is not None:
            vocoder.check_mel_config(acoustic.mel_config, "acoustic checkpoint")
            vocoder = vocoder.to(device).eval()
        self.model = acoustic.model.to(device).eval()
        self.frontend: TextFrontend = acoustic.frontend()
        self.vocoder = vocoder
        self.mel_config = acoustic.mel_config
        self.device = device
        self.pause_s = pause_s
        self._infer_args = set(inspect.signature(self.model.infer).parameters)
        self._seeded = "noise_seeds" in self._infer_args  # models that draw noise (the NAR refiner)
        # an AR decoder (Tacotron 2) takes a step limit and draws its prenet dropout from torch's global RNG
        self.autoregressive = "max_decoder_steps" in self._infer_args
        # controls applied where a caller gives none (a shipped model's, from checkpoints/default.json)
        self.default_controls = dict(default_controls or {})
        self.controls()  # a default control the model lacks is an error here, not at the first sentence

    @classmethod
    def from_paths(cls, acoustic_path: str | Path, vocoder: str, device: str = "cpu") -> "Synthesizer":
        """A shipped checkpoint (checkpoints/NAME.pt) speaks with default.json's controls for NAME."""
        acoustic = checkpoint.load(acoustic_path, device)
        return cls(acoustic, load_vocoder(vocoder, acoustic.mel_config, device=device), device,
                   default_controls=shipped_controls(acoustic_path))

    def controls(self, refine_steps: int | None = None, temperature: float | None = None, speed: float | None = None,
                 pitch_shift: float | None = None, block_frames: int | None = None) -> dict[str, float | int]:
        """The given controls (else the default ones) as `infer` keywords; asking a model for one it lacks
        is a ValueError.  block_frames: the NAR's block size (block-mode checkpoints; 0 = parallel)."""
        given = {k: v for k, v in dict(refine_steps=refine_steps, temperature=temperature, speed=speed,
                                       pitch_shift=pitch_shift, block_frames=block_frames).items() if v is not None}
        asked = {**self.default_controls, **given}
        check_controls(asked)
        unsupported = sorted(set(asked) - self._infer_args)
        if unsupported:
            raise ValueError(f"{type(self.model).__name__} has no {', '.join(unsupported)} (NAR-only controls)")
        if asked.get("block_frames") and getattr(self.model, "block_prenet", None) is None:
            raise ValueError("block_frames > 0 needs a block-mode checkpoint (e.g. checkpoints/nar_block.pt); this one "
                             "was trained for parallel decoding only")
        return asked

    # --- the stages (each the only place its work happens) ------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Text -> token ids of one sequence (raises UnspeakableTextError when nothing is speakable)."""
        return self.frontend.encode(text)

    def pad(self, ids: Sequence[Sequence[int]]) -> TokenBatch:
        return pad_tokens(ids, self.device)

    @torch.inference_mode()
    def mels(self, batch: TokenBatch, seed: int = 0, indices: Sequence[int] | None = None,
             refine_steps: int | None = None, temperature: float | None = None, speed: float | None = None,
             pitch_shift: float | None = None, forced_frames: Sequence[int] | None = None,
             block_frames: int | None = None) -> MelOutput:
        """THE acoustic-model call: tokens [B, L] -> mels [B, M, T] + mel_lengths [B] (+ the model's extras).

        indices: each item's position in its run's item stream (default 0..B-1).  The NAR refiner's noise of
        item b comes from item_noise_seed(seed, indices[b]), so an item sounds the same in any batch.  The AR
        decoder's prenet dropout uses torch's global RNG: it is seeded from (seed, indices[0]) inside a
        forked RNG state (batch 1 is then reproducible per item; the caller's RNG is untouched).
        forced_frames: per-item output frames for models whose stop token / durations mean nothing (the
        benchmark's random weights): the NAR gets evenly spread durations summing to them, the AR decodes
        ceil(max / r) steps with its stop token disabled (so up to r - 1 frames more).
        """
        kwargs: dict[str, Any] = self.controls(refine_steps, temperature, speed, pitch_shift, block_frames)
        B = batch.tokens.shape[0]
        indices = list(range(B)) if indices is None else list(indices)
        if len(indices) != B:
            raise ValueError(f"{len(indices)} item indices for a batch of {B}")
        if forced_frames is not None:
            if self.autoregressive:
                kwargs.update(max_decoder_steps=math.ceil(max(forced_frames) / self.model.r),
                              stop_threshold=1.1)  # a probability never exceeds 1: the decoder never stops
            elif "durations" in self._infer_args:
                d = torch.zeros_like(batch.tokens)  # [B, L] frames per token, zero on padding
                for b in range(B):
                    n = int(batch.lengths[b])
                    d[b, :n] = torch.tensor(forced_durations(n, forced_frames[b] / max(n, 1)), device=self.device)
                kwargs["durations"] = d
            else:
                raise ValueError(f"{type(self.model).__name__} cannot be forced to an output length")
        if self._seeded:
            kwargs["noise_seeds"] = [item_noise_seed(seed, i) for i in indices]
            return self.model.infer(batch.tokens, batch.lengths, **kwargs)
        cuda = [torch.device(self.device)] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(item_noise_seed(seed, indices[0]))
            return self.model.infer(batch.tokens, batch.lengths, **kwargs)

    @torch.inference_mode()
    def vocode(self, mels: MelOutput) -> WaveOutput:
        """THE vocoder call on model output: mels [B, M, T] + mel_lengths [B] -> wave [B, N] + lengths [B]."""
        if self.vocoder is None:
            raise ValueError("this Synthesizer was built without a vocoder (mel-only)")
        return self.vocoder(mels.mels, mels.mel_lengths)

    def _sync(self) -> None:
        """Wait for queued CUDA work, so that a wall-clock reading covers the stage it follows."""
        if torch.device(self.device).type == "cuda":
            torch.cuda.synchronize(self.device)

    # --- built on the stages ----------------------------------------------------------------------
    def synthesize_items(self, texts: Sequence[str], seed: int = 0, indices: Sequence[int] | None = None,
                         refine_steps: int | None = None, temperature: float | None = None,
                         speed: float | None = None, pitch_shift: float | None = None,
                         block_frames: int | None = None) -> list[ItemResult]:
        """Each text as ONE token sequence (no sentence split, as in training), batch 1 so that the timings
        are per item.  indices: the items' positions in their run (default 0..n-1); pass stable ones (e.g. a
        corpus position) so that a resumed run makes the same audio as an uninterrupted one."""
        indices = list(range(len(texts))) if indices is None else list(indices)
        if len(indices) != len(texts):
            raise ValueError(f"{len(indices)} item indices for {len(texts)} texts")
        results: list[ItemResult] = []
        for text, index in zip(texts, indices):
            ids = self.encode(text)
            batch = self.pad([ids])
            self._sync()
            t0 = time.perf_counter()
            out = self.mels(batch, seed=seed, indices=[index], refine_steps=refine_steps, temperature=temperature,
                            speed=speed, pitch_shift=pitch_shift, block_frames=block_frames)
            self._sync()
            t1 = time.perf_counter()
            waves = self.vocode(out)
            self._sync()
            t2 = time.perf_counter()
            failures = getattr(out, "failures", None)
            steps = getattr(out, "refine_steps_taken", None)
            results.append(ItemResult(
                text=text, wave=waves.wave[0, : int(waves.lengths[0])].float().cpu(),
                sample_rate=self.mel_config.sample_rate, frames=int(out.mel_lengths[0]), n_tokens=len(ids),
                mel_s=t1 - t0, vocoder_s=t2 - t1, ar_failure=failures[0] if failures else None,
                refine_steps_taken=None if steps is None else int(steps)))
        return results

    def synthesize(self, text: str, batch_size: int = 8, refine_steps: int | None = None, speed: float | None = None,
                   pitch_shift: float | None = None, progress: Callable[[int, int], None] | None = None,
                   temperature: float | None = None, seed: int = 0, ar_retries: int = 0,
                   fail_on_ar_failure: bool = False, sink: Callable[[torch.Tensor], None] | None = None,
                   block_frames: int | None = None) -> SynthesisResult:
        """Speak `text` sentence by sentence, `batch_size` sentences at a time, `pause_s` between them.
        `seed` fixes the NAR refiner's starting noise: sentence k's noise comes from item_noise_seed(seed, k),
        whatever the batch size, so the same call gives the same audio and a sentence sounds the same alone
        or batched with others.

        A sentence the frontend finds too long, or one the model's frame guard cut short (very slow speech),
        is split at clause boundaries (`split_clause`) and spoken in parts, never refused.  An AR sentence
        whose attention failed is spoken again alone with up to `ar_retries` other seeds; one still failing
        is a note, or a SynthesisError naming it when `fail_on_ar_failure`.  Non-finite audio is always a
        SynthesisError: it is never returned.

        sink: called with each piece of audio [N] (a sentence, a pause) in order as soon as its batch is
        vocoded, instead of keeping the whole wave (memory stays one batch, whatever the length of the text;
        the result's `wave` is then empty and `streamed_samples` counts what the sink got)."""
        utt = self.utterance(text, seed=seed, refine_steps=refine_steps, temperature=temperature, speed=speed,
                             pitch_shift=pitch_shift, ar_retries=ar_retries, fail_on_ar_failure=fail_on_ar_failure,
                             block_frames=block_frames)
        n = len(utt.parts)
        pieces: list[torch.Tensor] = []
        streamed = 0
        for start in range(0, n, batch_size):
            ks = range(start, min(start + batch_size, n))
            # seeds by position in the sentence stream, not in the batch
            for k, wave in zip(ks, self.speak([(utt, k) for k in ks])):
                for piece in [self.silence(utt.parts[k].pause_s), wave]:
                    if sink is None:
                        pieces.append(piece)
                    elif piece.numel():
                        sink(piece)
                        streamed += piece.numel()
            if progress is not None:
                progress(ks[-1] + 1, n)
        wave = torch.cat(pieces) if pieces else torch.zeros(0)
        return SynthesisResult(wave, self.mel_config.sample_rate, [p.text for p in utt.parts], utt.run.timings,
                               utt.run.notes, streamed_samples=streamed)

    def prepare(self, text: str) -> tuple[list["Part"], list[str]]:
        """THE text stage: `text` -> the parts to speak (sentences; a sentence over the frontend's max_symbols
        cut at clause boundaries, its parts joined by CLAUSE_PAUSE_S instead of the sentence pause) and notes.
        A sentence with nothing speakable is skipped with a note; UnspeakableTextError when none is left.
        (tts.inference_text.prepare_parts: the same for the ONNX runtime.)"""
        return prepare_parts(text, self.encode, self.pause_s)

    def utterance(self, text: str, seed: int = 0, refine_steps: int | None = None, temperature: float | None = None,
                  speed: float | None = None, pitch_shift: float | None = None, ar_retries: int = 0,
                  fail_on_ar_failure: bool = False, block_frames: int | None = None) -> "Utterance":
        """`text` prepared for speaking with these controls (checked here, before any work); its parts are
        then spoken by `speak`, in batches of any composition (`synthesize`; tts.serve's dynamic batcher)."""
        t0 = time.perf_counter()
        ctl = dict(refine_steps=refine_steps, temperature=temperature, speed=speed, pitch_shift=pitch_shift,
                   block_frames=block_frames)
        self.controls(**ctl)  # an unsupported or out-of-range control: before any work
        parts, notes = self.prepare(text)
        run = _Run(seed=seed, ctl=ctl, timings=Timings(text_s=time.perf_counter() - t0), notes=notes,
                   next_index=len(parts), t0=t0, ar_retries=ar_retries, fail_on_ar_failure=fail_on_ar_failure)
        return Utterance(parts, run)

    def speak(self, items: Sequence[tuple["Utterance", int]]) -> list[torch.Tensor]:
        """One batch: part k of each (utterance, k) -> its wave [N] (CPU float32), with `synthesize`'s repairs.
        The items may come from different utterances (several requests of the speech server) made with the
        same seed and controls; part k's noise comes from (seed, k) whatever the batch, so a part sounds the
        same alone or batched.  Each utterance's notes and repairs stay its own; the batch's timings are
        counted in its first item's run."""
        if not items:
            return []
        runs = [u.run for u, _ in items]
        if any((r.seed, r.ctl) != (runs[0].seed, runs[0].ctl) for r in runs):
            raise ValueError("the items of one batch need the same seed and controls")
        chunk = [(u.parts[k].text, u.parts[k].ids) for u, k in items]
        return self._speak(chunk, [k for _, k in items], runs)

    def stream(self, text: str, seed: int = 0, refine_steps: int | None = None, temperature: float | None = None,
               speed: float | None = None, pitch_shift: float | None = None, block_frames: int | None = None,
               ar_retries: int = 0, fail_on_ar_failure: bool = False) -> Iterator[torch.Tensor]:
        """Speak `text` as a stream of audio chunks [n] (CPU float32, in order; concatenated they are
        `synthesize`'s wave within STREAM_TOLERANCE), each handed on as soon as it is vocoded: parts one at a
        time (batch 1, for latency), and inside a part, with a block-mode NAR and a streaming vocoder (the
        source-filter one), block by block (`FastSpeech2.stream_mels` -> `vocoder.stream()`).  Otherwise
        (AR, a parallel NAR, a vocoder without `stream`, e.g. Griffin-Lim) a part is one chunk.  Memory stays
        one part, whatever the length of the text.  Timings/notes: `stream_utterance` on `utterance(...)`."""
        utt = self.utterance(text, seed=seed, refine_steps=refine_steps, temperature=temperature, speed=speed,
                             pitch_shift=pitch_shift, ar_retries=ar_retries, fail_on_ar_failure=fail_on_ar_failure,
                             block_frames=block_frames)
        yield from self.stream_utterance(utt)

    def stream_utterance(self, utt: "Utterance") -> Iterator[torch.Tensor]:
        """`stream` of a prepared utterance (its run collects timings, first audio included, and notes)."""
        for k, part in enumerate(utt.parts):
            if part.pause_s > 0:
                yield self.silence(part.pause_s)
            yield from self._stream_part(utt, k)

    @torch.inference_mode()
    def _stream_part(self, utt: "Utterance", k: int) -> Iterator[torch.Tensor]:
        run = utt.run
        streams = hasattr(self.model, "stream_mels") and hasattr(self.vocoder, "stream")
        plan = None
        if streams:
            ctl = self.controls(**run.ctl)
            batch = self.pad([utt.parts[k].ids])
            t0 = time.perf_counter()
            plan = self.model.prepare(batch.tokens, batch.lengths, speed=ctl.get("speed", 1.0),
                                      pitch_shift=ctl.get("pitch_shift", 0.0))
            run.timings.mel_s += time.perf_counter() - t0
        if plan is None or bool(plan.truncated[0]):  # no block path here, or a guard-cut part to repair
            yield self.speak([(utt, k)])[0]
            return
        voc = self.vocoder.stream()
        mel_chunks = self.model.stream_mels(plan, ctl.get("block_frames"), ctl.get("refine_steps"), ctl.get("temperature"),
                                            noise_seeds=[item_noise_seed(run.seed, k)])
        while True:
            t0 = time.perf_counter()
            chunk = next(mel_chunks, None)
            self._sync()
            t1 = time.perf_counter()
            audio = voc.push(chunk.mels) if chunk is not None else voc.finish()
            self._sync()
            t2 = time.perf_counter()
            run.timings.mel_s += t1 - t0
            run.timings.vocoder_s += t2 - t1
            wave = audio[0].float().cpu()
            if not bool(torch.isfinite(wave).all()):
                raise SynthesisError(f"the model made non-finite (NaN/inf) audio for {_short(utt.parts[k].text)!r}; "
                                     "the checkpoint or the controls are broken")
            if wave.numel():
                if run.timings.first_audio_s is None:
                    run.timings.first_audio_s = t2 - run.t0
                yield wave
            if chunk is None:
                return

    def silence(self, seconds: float) -> torch.Tensor:
        """[round(seconds * sample_rate)] zeros: the pause before a part."""
        return torch.zeros(int(seconds * self.mel_config.sample_rate))

    def _encode_splitting(self, sentence: str) -> list[tuple[str, list[int]]]:
        """(text, ids) of `sentence`, cut at clause boundaries into as many parts as the frontend's
        max_symbols needs; a part with nothing speakable (a lone bracket) is dropped."""
        return encode_splitting(self.encode, sentence)

    def _speak(self, chunk: list[tuple[str, list[int]]], indices: list[int], runs: "_Run | Sequence[_Run]"
               ) -> list[torch.Tensor]:
        """One batch through `mels` and `vocode` -> each item's wave [N] (CPU float32), with the repairs
        `synthesize` promises: truncated items are spoken again in clause parts, AR failures retried.
        runs: the run of each item (one run for all); the first one's seed and controls make the batch."""
        runs = [runs] * len(chunk) if isinstance(runs, _Run) else list(runs)
        run = runs[0]
        batch = self.pad([ids for _, ids in chunk])
        t1 = time.perf_counter()
        out = self.mels(batch, seed=run.seed, indices=indices, **run.ctl)
        self._sync()
        t2 = time.perf_counter()
        waves = self.vocode(out)
        self._sync()
        t3 = time.perf_counter()
        run.timings.mel_s += t2 - t1
        run.timings.vocoder_s += t3 - t2
        if run.timings.first_audio_s is None:
            run.timings.first_audio_s = t3 - run.t0
        failures = getattr(out, "failures", None) or [None] * len(chunk)
        truncated = getattr(out, "truncated", None)
        result: list[torch.Tensor] = []
        for k, (text, _) in enumerate(chunk):
            wave = waves.wave[k, : int(waves.lengths[k])].float().cpu()
            if not bool(torch.isfinite(wave).all()):
                # a NaN sample becomes -32768 in a 16-bit wav: full-scale DC, never written
                raise SynthesisError(f"the model made non-finite (NaN/inf) audio for {_short(text)!r}; "
                                     "the checkpoint or the controls are broken")
            if truncated is not None and bool(truncated[k]) and (halves := split_clause(text)) is not None:
                runs[k].notes.append(f"the frame guard cut {_short(text)!r}: spoken again in two parts")
                wave = self._speak_parts(halves, runs[k])
            elif failures[k] is not None and not failures[k].ok:
                wave = self._retry_ar(chunk[k], indices[k], failures[k], wave, runs[k])
            result.append(wave)
        return result

    def _speak_parts(self, texts: Sequence[str], run: "_Run") -> torch.Tensor:
        """Texts spoken one by one (fresh item indices past the sentence stream), joined by a short pause."""
        pieces: list[torch.Tensor] = []
        for part in texts:
            try:
                encoded = self._encode_splitting(part)
            except UnspeakableTextError:
                continue
            for item in encoded:
                index, run.next_index = run.next_index, run.next_index + 1
                pieces += [*self._speak([item], [index], run), torch.zeros(int(CLAUSE_PAUSE_S * self.mel_config.sample_rate))]
        return torch.cat(pieces[:-1]) if pieces else torch.zeros(0)

    def _retry_ar(self, item: tuple[str, list[int]], index: int, failure: ARFailure, wave: torch.Tensor,
                  run: "_Run") -> torch.Tensor:
        """An AR item whose attention failed, spoken again alone with other decoder seeds."""
        for attempt in range(1, run.ar_retries + 1):
            retry = run.seed + attempt * 7919  # another prenet-dropout stream, still reproducible
            out = self.mels(self.pad([item[1]]), seed=retry, indices=[index], **run.ctl)
            failure = out.failures[0]
            if failure.ok:
                run.notes.append(f"AR attention failed on {_short(item[0])!r}; retry {attempt} succeeded")
                waves = self.vocode(out)
                return waves.wave[0, : int(waves.lengths[0])].float().cpu()
        message = f"AR failure in {_short(item[0])!r}: {failure}"
        if run.fail_on_ar_failure:
            raise SynthesisError(f"{message} (after {run.ar_retries} retries)")
        run.notes.append(message)
        return wave


@dataclass
class _Run:
    """The state of one `synthesize` call shared by its batches."""

    seed: int
    ctl: dict[str, Any]
    timings: Timings
    notes: list[str]
    next_index: int  # the next free item index for parts spoken again (past the sentence stream)
    t0: float
    ar_retries: int
    fail_on_ar_failure: bool

"""THE text -> wave pipeline, one for every way in (the CLI, the Python API, the server, evaluation, the
listening-test build, the benchmark) over either engine (tts.runtime.engine: torch or ONNX).

    text ─► text stage (sentences, clause cuts: tts.runtime.text_stage) ─► parts (token sequences)
         ─► batches ─► engine.mels ─► engine.vocode ─► checks and repairs ─► sink (file, stream, HTTP)

Repairs and checks, written here once: a part the model's frame guard cut (very slow speech) is spoken
again in clause parts; an AR part whose attention failed is spoken again alone with other seeds; audio
that is not finite is a SynthesisError, never returned.  Part k of a text gets the noise of (seed, k)
whatever batch it lands in (tts.noise), so a text sounds the same spoken whole, batched with other
requests' parts (tts.serve) or streamed.

Torch-free: with the ONNX engine nothing here imports torch (the CLI's fast start).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tts.errors import SynthesisError
from tts.runtime.controls import RANGES, Controls
from tts.runtime.engine import Engine
from tts.runtime.text_stage import (CLAUSE_PAUSE_S, Part, PartStream, _short, encode_splitting, prepare_parts,
                                    split_clause)
from tts.runtime.timestamps import WordTiming, part_words
from tts.text.errors import UnspeakableTextError

# How far a streamed text's audio may lie from `synthesize`'s (float samples, full scale 1): the block path
# refines in windows and vocodes in chunks, which reorders float sums (measured up to 1.3e-5 with the
# source-filter vocoder, tests/test_streaming.py): within a 16-bit step (3e-5), so the written wavs differ
# by at most one step.  (Griffin-Lim amplifies the ~2e-6 mel change of another batch size to ~4e-3.)
STREAM_TOLERANCE = 1e-4
AR_RETRY_SEED_STEP = 7919  # retry r of an AR part uses seed + r * this: another prenet-dropout stream
# The item indices of parts spoken again (guard-cut repairs): REPAIR_INDEX_BASE, +1, ... in the order they are
# spoken, past any text's own parts (part k's noise comes from (seed, k)) and known before the text's last part
# is made: a lazy utterance does not know how many parts it has, and its audio must be the eager one's.
REPAIR_INDEX_BASE = 1 << 40


@dataclass
class Timings:
    text_s: float = 0.0
    mel_s: float = 0.0
    vocoder_s: float = 0.0
    first_audio_s: float | None = None  # wall time from the call until the first audio was made

    @property
    def total_s(self) -> float:
        return self.text_s + self.mel_s + self.vocoder_s


@dataclass
class SynthesisResult:
    wave: np.ndarray  # [N] float32, -1..1 (empty when a sink took the audio)
    sample_rate: int
    sentences: list[str]
    timings: Timings
    notes: list[str] = field(default_factory=list)  # e.g. AR failures, skipped sentences, repairs
    streamed_samples: int = 0  # samples handed to a sink
    words: list[WordTiming] | None = None  # each word's place in the audio (asked for with timestamps=True)

    @property
    def seconds(self) -> float:
        return (self.wave.size + self.streamed_samples) / self.sample_rate

    @property
    def rtf(self) -> float:
        return self.timings.total_s / max(self.seconds, 1e-9)


@dataclass
class ItemResult:
    """One text spoken as one token sequence (`Pipeline.synthesize_items`)."""

    text: str
    wave: np.ndarray  # [N] float32, -1..1
    sample_rate: int
    frames: int  # mel frames the acoustic model made
    n_tokens: int
    mel_s: float  # wall seconds of mel generation
    vocoder_s: float  # wall seconds of the vocoder
    ar_failure: Any = None  # the AR's verdict on its decode (None for a NAR)
    refine_steps_taken: int | None = None  # refiner network evaluations (None without a refiner)

    @property
    def seconds(self) -> float:
        return self.wave.size / self.sample_rate


@dataclass
class Run:
    """The state of one text being spoken, shared by its batches: its controls, timings, notes and repairs."""

    controls: Controls
    timings: Timings
    notes: list[str]
    next_index: int  # the next free item index for parts spoken again (from REPAIR_INDEX_BASE)
    t0: float
    ar_retries: int = 0
    fail_on_ar_failure: bool = False
    # timestamps asked for: part k's words (from its wave's first sample) once spoken, until placed in `words`
    part_words: dict[int, list[WordTiming]] | None = None
    words: list[WordTiming] = field(default_factory=list)  # placed words, seconds from the text's first sample


@dataclass
class Spoken:
    """One part's audio [N] float32 and, when timestamps were asked for, its words (from its first sample)."""

    wave: np.ndarray
    words: list[WordTiming] | None = None


@dataclass
class Utterance:
    """A text prepared for speaking: its parts (part k's noise comes from (seed, k)) and its run."""

    parts: list[Part] | PartStream  # a PartStream (Pipeline.utterance(lazy=True)): made as they are asked for
    run: Run
    # an SSML document's final break (seconds), once the last part is made (a PartStream's own list when lazy)
    tail: list[float] = field(default_factory=list)

    @property
    def notes(self) -> list[str]:
        return self.run.notes

    @property
    def tail_s(self) -> float:
        """Silence after the last part (an SSML break at the end; known once the last part is made)."""
        return sum(self.tail)

    def controls(self, k: int) -> Controls:
        """Part k's controls: the run's, with the part's SSML prosody laid over them (speed multiplied, pitch
        shift added; each held to its range, with a note when it had to be)."""
        part, base = self.parts[k], self.run.controls
        if part.speed == 1.0 and part.pitch_shift == 0.0:
            return base
        speed, pitch = base.speed * part.speed, base.pitch_shift + part.pitch_shift
        held = {"speed": min(max(speed, RANGES["speed"][0]), RANGES["speed"][1]),
                "pitch_shift": min(max(pitch, RANGES["pitch_shift"][0]), RANGES["pitch_shift"][1])}
        if held != {"speed": speed, "pitch_shift": pitch}:
            note = f"SSML prosody of {_short(part.text)!r} held to the model's ranges: {held}"
            if note not in self.run.notes:
                self.run.notes.append(note)
        return base.replace(**held)


class Pipeline:
    """Text -> wave over one engine; see the module docstring."""

    def __init__(self, engine: Engine, pause_s: float = 0.25, lexicon: Any = None) -> None:
        # lexicon: a user lexicon (tts.text.lexicon.Lexicon) over the frontend's own pronunciations, or None
        self.engine = engine
        self.pause_s = pause_s
        self.lexicon = None
        self.use_lexicon(lexicon)

    def use_lexicon(self, lexicon: Any) -> None:
        """Speak with a user lexicon (tts.text.lexicon.Lexicon; None: none), checked against the voice's symbols
        (tts.text.errors.PronunciationError naming the unknown ones)."""
        if lexicon is not None:
            lexicon.check(self.engine.frontend.symbols)
        self.lexicon = lexicon

    def encode(self, text: str) -> list[int]:
        """Text -> token ids: the voice's frontend with this pipeline's lexicon."""
        return self.engine.encode(text, self.lexicon)

    @property
    def sample_rate(self) -> int:
        return self.engine.sample_rate

    @property
    def capabilities(self):
        return self.engine.capabilities

    def controls(self, controls: Controls | None = None, **given: Any) -> Controls:
        """The voice's controls (or `controls`) with the given ones (None = default) laid over them; asking
        the model for a control it lacks is a ValueError naming it."""
        given = {k: v for k, v in given.items() if v is not None}
        lacks = sorted(set(given) - set(self.engine.capabilities.controls) - {"seed"})
        if lacks:
            raise ValueError(f"this {self.engine.name} voice's model has no {', '.join(lacks)} control "
                             f"(it takes: {', '.join(sorted(self.engine.capabilities.controls)) or 'only a seed'})")
        if given.get("block_frames") and not self.engine.capabilities.block_mode:
            raise ValueError("block_frames > 0 needs a block-mode checkpoint (e.g. checkpoints/nar_block.pt); this "
                             "voice was trained for parallel decoding only")
        return (controls or self.engine.defaults).replace(**given)

    # --- the text stage -------------------------------------------------------------------------------
    def utterance(self, text: str, controls: Controls | None = None, ar_retries: int = 0,
                  fail_on_ar_failure: bool = False, lazy: bool = False, timestamps: bool = False,
                  sentence_silence: float | None = None, ssml: bool = False) -> Utterance:
        """`text` prepared for speaking: the parts (sentences with a final stop; a sentence over the
        frontend's symbol limit cut at clause boundaries) and its run.  A sentence with nothing speakable is
        skipped with a note; UnspeakableTextError when none is left.

        lazy: the parts are a PartStream, made sentence by sentence as they are spoken (the first audio of a
        document after its first sentence's text work, not the whole document's): only the first part is made
        here, so that text with nothing speakable still raises here; a later part's text problem raises when
        it is reached, and the notes and `timings.text_s` fill as the parts are made.  The audio is the eager
        utterance's, sample for sample (the same item indices, REPAIR_INDEX_BASE for repairs).

        timestamps: each word's place in the audio is kept (`Run.words`, `SynthesisResult.words`).
        sentence_silence: seconds between sentences (default the pipeline's pause_s), exact to a sample.
        ssml: the text is SSML (tts.text.ssml; also when it starts with <speak>): its breaks, prosody, phonemes,
        say-as and substitutions are spoken; malformed SSML is a tts.text.ssml.SsmlError here."""
        from tts.text.ssml import is_ssml, parse_ssml

        t0 = time.perf_counter()
        pause_s = self.pause_s if sentence_silence is None else check_silence(sentence_silence)
        source: Any = text
        if ssml or is_ssml(text):
            source = parse_ssml(text if is_ssml(text) else f"<speak>{text}</speak>")
        tail: list[float] = []
        if lazy:
            parts: list[Part] | PartStream = PartStream(source, self.encode, pause_s)
            parts.first()
            notes, tail = parts.notes, parts.tail  # the same lists: filled as the parts are made
        else:
            parts, notes = prepare_parts(source, self.encode, pause_s, tail)
        run = Run(controls or self.engine.defaults, Timings(text_s=time.perf_counter() - t0), notes,
                  next_index=REPAIR_INDEX_BASE, t0=t0, ar_retries=ar_retries, fail_on_ar_failure=fail_on_ar_failure,
                  part_words={} if timestamps else None)
        return Utterance(parts, run, tail)

    def place_words(self, utt: Utterance, k: int, offset_samples: int) -> None:
        """Part k's words (timestamps asked for), placed at `offset_samples` of the text's audio (`Run.words`)."""
        if utt.run.part_words is not None:
            utt.run.words += [w.shifted(offset_samples / self.sample_rate) for w in utt.run.part_words.pop(k, [])]

    @staticmethod
    def _count_text_time(utt: Utterance) -> None:
        """A lazy utterance's text seconds so far (its parts are made while it is spoken)."""
        if isinstance(utt.parts, PartStream):
            utt.run.timings.text_s = utt.parts.text_s

    # --- whole texts ----------------------------------------------------------------------------------
    def synthesize(self, text: str, controls: Controls | None = None, batch_size: int = 8,
                   progress: Callable[[int, int | None], None] | None = None,
                   sink: Callable[[np.ndarray], None] | None = None,
                   ar_retries: int = 0, fail_on_ar_failure: bool = False, timestamps: bool = False,
                   sentence_silence: float | None = None, ssml: bool = False) -> SynthesisResult:
        """Speak `text` sentence by sentence, `batch_size` parts at a time, `pause_s` between sentences.  The
        parts are made as they are spoken (a lazy utterance): each batch's text work just before its audio.

        progress: called after each batch with (parts spoken, total); the total is None until the last batch
        (it is known only once the text is spent).
        sink: called with each piece of audio [N] (a sentence, a pause) in order as soon as its batch is
        vocoded, instead of keeping the whole wave (memory stays one batch, whatever the length of the
        text; the result's `wave` is then empty and `streamed_samples` counts what the sink got).
        timestamps, sentence_silence, ssml: as `utterance` (parts of other SSML prosody go in other batches)."""
        utt = self.utterance(text, controls, ar_retries, fail_on_ar_failure, lazy=True, timestamps=timestamps,
                             sentence_silence=sentence_silence, ssml=ssml)
        pieces: list[np.ndarray] = []
        streamed = made = 0  # samples handed to the sink; samples made so far (the next piece's offset)

        def emit(piece: np.ndarray) -> None:
            nonlocal streamed, made
            made += piece.size
            if sink is None:
                pieces.append(piece)
            elif piece.size:
                sink(piece)
                streamed += piece.size

        def speak(ks: list[int], total: int | None) -> None:
            self._count_text_time(utt)
            for k, wave in zip(ks, self.speak([(utt, k) for k in ks])):
                emit(self.silence(utt.parts[k].pause_s))
                self.place_words(utt, k, made)
                emit(wave)
            if progress is not None:
                progress(ks[-1] + 1, total)

        batch: list[int] = []
        for k, _ in enumerate(utt.parts):
            # part k exists, so this batch is not the last one
            if len(batch) == batch_size or (batch and utt.controls(k) != utt.controls(batch[0])):
                speak(batch, None)
                batch = []
            batch.append(k)
        speak(batch, batch[-1] + 1)  # the text is spent: the total is known (utterance() made part 0 at least)
        self._count_text_time(utt)
        emit(self.silence(utt.tail_s))
        wave = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return SynthesisResult(wave, self.sample_rate, [p.text for p in utt.parts], utt.run.timings, utt.run.notes,
                               streamed_samples=streamed, words=utt.run.words if timestamps else None)

    def stream(self, text: str, controls: Controls | None = None, ar_retries: int = 0,
               fail_on_ar_failure: bool = False, sentence_silence: float | None = None,
               ssml: bool = False) -> Iterator[np.ndarray]:
        """`text` as audio chunks [n] in order, each handed on as soon as it is made: parts one at a time
        (batch 1, for latency) and, on an engine that streams, block by block inside a part.  Joined they are
        `synthesize`'s wave within STREAM_TOLERANCE.  Memory stays one part, whatever the length of the text.

        Bad text (empty, nothing speakable) raises here, at the call, before any chunk (not at the first `next`).
        The iterator holds no thread: a caller that stops iterating (a `break`, dropping it, `close()`) leaves
        no work running, and nothing more is made."""
        return self.stream_utterance(self.utterance(text, controls, ar_retries, fail_on_ar_failure, lazy=True,
                                                    sentence_silence=sentence_silence, ssml=ssml))

    def stream_utterance(self, utt: Utterance) -> Iterator[np.ndarray]:
        """`stream` of a prepared utterance (its run collects timings, first audio included, and notes).  A lazy
        utterance's parts are made one at a time as they are reached: its first chunk comes before its second
        part is made.  With timestamps (utterance(timestamps=True)), a part's words are in `run.words` before its
        first chunk is yielded."""
        run = utt.run
        made = 0  # samples yielded so far
        for k, part in enumerate(utt.parts):
            self._count_text_time(utt)
            if part.pause_s > 0:
                pause = self.silence(part.pause_s)
                made += pause.size
                yield pause
            pieces = self.engine.stream_part(part.ids, k, utt.controls(k)) if self.capabilities.streaming else None
            if pieces is None:  # this engine or this part (a guard-cut one, repaired) speaks whole
                [wave] = self.speak([(utt, k)])
                self.place_words(utt, k, made)
                made += wave.size
                yield wave
                continue
            for piece in pieces:
                run.timings.mel_s += piece.mel_s
                run.timings.vocoder_s += piece.vocoder_s
                if piece.durations is not None and run.part_words is not None:
                    run.part_words[k] = self._words(part.text, part.ids, piece.durations)
                    self.place_words(utt, k, made)
                self._check_finite(piece.wave, part.text)
                made += piece.wave.size
                if piece.wave.size:
                    if run.timings.first_audio_s is None:
                        run.timings.first_audio_s = time.perf_counter() - run.t0
                    yield piece.wave
        self._count_text_time(utt)
        if utt.tail_s:
            yield self.silence(utt.tail_s)

    def synthesize_items(self, texts: Sequence[str], controls: Controls | None = None,
                         indices: Sequence[int] | None = None) -> list[ItemResult]:
        """Each text as ONE token sequence (no sentence split, as in training), batch 1, so that the timings
        are per item, without repairs (evaluation measures what the model does).  indices: the items'
        positions in their run (default 0..n-1); pass stable ones (a corpus position) so that a resumed run
        makes the same audio as an uninterrupted one."""
        controls = controls or self.engine.defaults
        indices = list(range(len(texts))) if indices is None else list(indices)
        if len(indices) != len(texts):
            raise ValueError(f"{len(indices)} item indices for {len(texts)} texts")
        results: list[ItemResult] = []
        for text, index in zip(texts, indices):
            ids = self.encode(text)
            t0 = time.perf_counter()
            out = self.engine.mels([ids], [index], controls)
            t1 = time.perf_counter()
            [wave] = self.engine.vocode(out)
            t2 = time.perf_counter()
            self._check_finite(wave, text)
            results.append(ItemResult(
                text=text, wave=wave, sample_rate=self.sample_rate, frames=int(out.lengths[0]), n_tokens=len(ids),
                mel_s=t1 - t0, vocoder_s=t2 - t1, ar_failure=out.failures[0] if out.failures else None,
                refine_steps_taken=out.refine_steps_taken))
        return results

    # --- batches of parts ------------------------------------------------------------------------------
    def speak(self, items: Sequence[tuple[Utterance, int]]) -> list[np.ndarray]:
        """One batch: part k of each (utterance, k) -> its wave [N] float32, repaired.  The items may come from
        different utterances (several requests of the speech server) with equal controls; part k's noise
        comes from (seed, k) whatever the batch.  Each utterance's notes and repairs stay its own; the
        batch's timings are counted in its first item's run."""
        if not items:
            return []
        runs = [u.run for u, _ in items]
        controls = [u.controls(k) for u, k in items]
        if any(c != controls[0] for c in controls):
            raise ValueError("the items of one batch need equal controls")
        chunk = [(u.parts[k].text, u.parts[k].ids) for u, k in items]
        spoken = self._speak(chunk, [k for _, k in items], runs, controls[0])
        for (u, k), s in zip(items, spoken):
            if u.run.part_words is not None:
                u.run.part_words[k] = s.words or []
        return [s.wave for s in spoken]

    def silence(self, seconds: float) -> np.ndarray:
        """[round(seconds * sample_rate)] zeros (the nearest whole sample): the pause before a part."""
        return np.zeros(round(seconds * self.sample_rate), np.float32)

    def _words(self, text: str, ids: Sequence[int], durations: np.ndarray) -> list[WordTiming]:
        """A part's words from its token durations [L] (tts.runtime.timestamps), from its first sample."""
        encoded = self.engine.encode_words(text, self.lexicon)
        if list(encoded.ids) != list(ids):  # the text stage's ids are the frontend's: never expected
            raise SynthesisError(f"word alignment of {_short(text)!r} does not match its tokens")
        return part_words(encoded.words, self.engine.decode(ids), np.asarray(durations)[: len(ids)],
                          self.engine.hop_length / self.sample_rate)

    def _speak(self, chunk: list[tuple[str, list[int]]], indices: list[int], runs: list[Run],
               controls: Controls) -> list[Spoken]:
        run = runs[0]
        t1 = time.perf_counter()
        out = self.engine.mels([ids for _, ids in chunk], indices, controls)
        t2 = time.perf_counter()
        waves = self.engine.vocode(out)
        t3 = time.perf_counter()
        run.timings.mel_s += t2 - t1
        run.timings.vocoder_s += t3 - t2
        if run.timings.first_audio_s is None:
            run.timings.first_audio_s = t3 - run.t0
        failures = out.failures or [None] * len(chunk)
        result: list[Spoken] = []
        for k, (text, ids) in enumerate(chunk):
            spoken = Spoken(waves[k], self._item_words(runs[k], text, ids, out, k))
            self._check_finite(spoken.wave, text)
            if bool(out.truncated[k]) and (halves := split_clause(text)) is not None:
                runs[k].notes.append(f"the frame guard cut {_short(text)!r}: spoken again in two parts")
                spoken = self._speak_parts(halves, runs[k], controls)
            elif failures[k] is not None and not failures[k].ok:
                spoken = self._retry_ar((text, ids), indices[k], failures[k], spoken, runs[k], controls)
            result.append(spoken)
        return result

    def _item_words(self, run: Run, text: str, ids: Sequence[int], out: Any, k: int) -> list[WordTiming] | None:
        """Item k's words when its run asked for timestamps (else None)."""
        if run.part_words is None:
            return None
        if out.durations is None:
            raise SynthesisError(f"this {self.engine.name} voice gives no token durations: no word timestamps")
        return self._words(text, ids, out.durations[k])

    def _speak_parts(self, texts: Sequence[str], run: Run, controls: Controls) -> Spoken:
        """Texts spoken one by one (fresh item indices from REPAIR_INDEX_BASE), joined by CLAUSE_PAUSE_S."""
        pieces: list[np.ndarray] = []
        words: list[WordTiming] | None = None if run.part_words is None else []
        made = 0  # samples so far: the next piece's offset
        for text in texts:
            try:
                encoded = encode_splitting(self.encode, text)
            except UnspeakableTextError:
                continue
            for item in encoded:
                index, run.next_index = run.next_index, run.next_index + 1
                [spoken] = self._speak([item], [index], [run], controls)
                if words is not None:
                    words += [w.shifted(made / self.sample_rate) for w in spoken.words or []]
                pause = self.silence(CLAUSE_PAUSE_S)
                pieces += [spoken.wave, pause]
                made += spoken.wave.size + pause.size
        return Spoken(np.concatenate(pieces[:-1]) if pieces else np.zeros(0, np.float32), words)

    def _retry_ar(self, item: tuple[str, list[int]], index: int, failure: Any, spoken: Spoken, run: Run,
                  controls: Controls) -> Spoken:
        """An AR part whose attention failed, spoken again alone with other seeds."""
        for attempt in range(1, run.ar_retries + 1):
            retry = controls.replace(seed=controls.seed + attempt * AR_RETRY_SEED_STEP)
            out = self.engine.mels([item[1]], [index], retry)
            failure = out.failures[0]
            if failure.ok:
                run.notes.append(f"AR attention failed on {_short(item[0])!r}; retry {attempt} succeeded")
                [wave] = self.engine.vocode(out)
                self._check_finite(wave, item[0])
                return Spoken(wave, self._item_words(run, item[0], item[1], out, 0))
        message = f"AR failure in {_short(item[0])!r}: {failure}"
        if run.fail_on_ar_failure:
            raise SynthesisError(f"{message} (after {run.ar_retries} retries)")
        run.notes.append(message)
        return spoken

    @staticmethod
    def _check_finite(wave: np.ndarray, text: str) -> None:
        # a NaN sample becomes -32768 in a 16-bit wav: full-scale DC, never written
        if not np.isfinite(wave).all():
            raise SynthesisError(f"the model made non-finite (NaN/inf) audio for {_short(text)!r}; "
                                 "the checkpoint or the controls are broken")


# The longest silence between sentences (--sentence-silence): longer is a mistake (minutes of nothing), not a style.
MAX_SENTENCE_SILENCE_S = 10.0


def check_silence(seconds: float) -> float:
    """A sentence silence in [0, MAX_SENTENCE_SILENCE_S] seconds (TypeError for a non-number, ValueError outside)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"sentence silence must be a number of seconds, got {type(seconds).__name__} {seconds!r}")
    if not 0 <= seconds <= MAX_SENTENCE_SILENCE_S:
        raise ValueError(f"sentence silence must be a number of seconds in [0, {MAX_SENTENCE_SILENCE_S:g}], got {seconds!r}")
    return float(seconds)

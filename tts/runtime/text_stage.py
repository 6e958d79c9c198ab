"""The pipeline's text stage (tts.runtime.pipeline), torch-free: the sentence rules (a final stop, clause
cuts of a sentence the model cannot speak whole, the pause between clause parts) that turn a text into the
token sequences an engine speaks.  Plain Python: importing it costs nothing at start-up.

Sentence by sentence: `iter_parts` finds, normalises and encodes one sentence at a time, as the parts are
asked for, so that the first audio of any document comes as fast as that of its first sentence; and no
sentence costs more than MAX_SENTENCE_CHARS of text work before its audio (a megabyte without a space or a
stop is spoken in pieces as it is read, not normalised whole first).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


# The silence between the parts of a sentence the frame guard cut: a comma's pause, shorter than the
# pause between sentences (Pipeline.pause_s).
CLAUSE_PAUSE_S = 0.1

# Clause boundaries a too-long sentence is cut at, strongest first: semicolons and colons, then commas,
# brackets and dashes, then before a conjunction or relative word, then any space (a word boundary).
_CLAUSE_BREAKS = (
    re.compile(r"[;:]\s+"),
    re.compile(r"[,)\]\u2014\u2013]\s+|\s+(?:--?|\u2014|\u2013)\s+"),
    re.compile(r"\s+(?=(?:and|but|or|nor|so|yet|because|although|though|whereas|while|which|who|where|when|"
               r"that|if|then)\b)", re.IGNORECASE),
    re.compile(r"\s+"),
)


# The longest text one sentence may be before it is cut, unread, into pieces at clause boundaries (else between
# words, else anywhere).  Far above a real sentence (the corpus' longest is ~300 characters; the frontend's
# 400-symbol limit is ~450), so only text without stops meets it: without it, one 1 MB "sentence" was
# normalised and phonemised whole, then again in halves, before any audio (none within 150 s).
MAX_SENTENCE_CHARS = 1000


def bounded_pieces(sentence: str, limit: int = MAX_SENTENCE_CHARS) -> Iterator[str]:
    """`sentence` in pieces of at most `limit` characters, in order, cut at the strongest clause boundary in the
    second half of each window (else the last space, else at the limit), each found by reading only its window:
    linear in the length, and the first piece comes at once."""
    rest = sentence.strip()
    while len(rest) > limit:
        window = rest[: limit + 1]  # a boundary right after the limit still makes a piece of `limit`
        cut = 0
        inside = _inline_spans(window)
        for pattern in _CLAUSE_BREAKS:
            ends = [m.end() for m in pattern.finditer(window, limit // 2) if m.end() <= limit
                    and not _within(m.start(), inside)]
            if ends:
                cut = ends[-1]
                break
        cut = cut or limit
        head, rest = rest[:cut].strip(), rest[cut:].strip()
        if head:
            yield head
    if rest:
        yield rest


def _inline_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each inline pronunciation ("[[HH AH0 L OW1]]"): never cut inside one (its phones would be
    two unspeakable halves)."""
    from tts.text.frontend import INLINE_PHONEMES_RE

    return [m.span() for m in INLINE_PHONEMES_RE.finditer(text)] if "[[" in text else []


def _within(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(a < position < b for a, b in spans)


def split_clause(text: str) -> tuple[str, str] | None:
    """`text` cut in two at its strongest clause boundary nearest the middle (a character cut in a text
    without spaces); None for text too short to cut.  Used on sentences the model cannot speak whole."""
    inside = _inline_spans(text)
    for pattern in _CLAUSE_BREAKS:
        cuts = [m.end() for m in pattern.finditer(text) if m.start() > 0 and m.end() < len(text)
                and not _within(m.start(), inside)]
        cuts = [c for c in cuts if text[:c].strip() and text[c:].strip()]
        if cuts:
            cut = min(cuts, key=lambda c: abs(c - len(text) / 2))
            return text[:cut].strip(), text[cut:].strip()
    if len(text.strip()) < 2:
        return None
    middle = len(text) // 2
    return text[:middle].strip(), text[middle:].strip()


@dataclass
class Part:
    """One token sequence of a text being spoken: a sentence, or a clause part of a sentence too long for the
    model (`prepare_parts`)."""

    text: str
    ids: list[int]
    pause_s: float  # silence before it: 0 first, CLAUSE_PAUSE_S inside a sentence, the sentence pause otherwise
    # SSML <prosody> of the part: its speed multiplies the run's, its pitch shift (semitones) adds to the run's
    speed: float = 1.0
    pitch_shift: float = 0.0


def encode_splitting(encode: Callable[[str], list[int]], sentence: str) -> list[tuple[str, list[int]]]:
    """(text, ids) of `sentence`, cut at clause boundaries into as many parts as the frontend's max_symbols
    needs (`encode` raises TextTooLongError); a part with nothing speakable (a lone bracket) is dropped."""
    from tts.text.errors import TextTooLongError, UnspeakableTextError

    try:
        return [(sentence, encode(sentence))]
    except TextTooLongError:
        halves = split_clause(sentence)
        if halves is None:
            raise
    parts: list[tuple[str, list[int]]] = []
    for half in halves:
        try:
            parts += encode_splitting(encode, half)
        except UnspeakableTextError:
            continue
    if not parts:
        raise UnspeakableTextError(sentence)
    return parts


def iter_parts(text: str, encode: Callable[[str], list[int]], pause_s: float, notes: list[str]) -> Iterator[Part]:
    """THE text stage of both runtimes, one sentence at a time as the parts are asked for: `text` -> the parts to
    speak (sentences with a final stop; a sentence over MAX_SENTENCE_CHARS cut unread into pieces, a piece over
    the frontend's max_symbols cut at clause boundaries, the parts of a sentence joined by CLAUSE_PAUSE_S
    instead of the sentence pause `pause_s`), appending notes to `notes` as it goes.  A sentence with nothing
    speakable is skipped with a note; UnspeakableTextError (after the last sentence) when none was left."""
    from tts.text.errors import TextError, UnspeakableTextError
    from tts.text.sentences import iter_sentences

    first_error: TextError | None = None
    spoken = 0
    for s in _sentences_or_text(iter_sentences(text), text):
        pieces = list(bounded_pieces(with_final_stop(s)))  # the stop before the cut: only the last piece ends
        if len(pieces) > 1:
            notes.append(f"cut a sentence of {len(s)} characters (over {MAX_SENTENCE_CHARS}) into {len(pieces)} "
                         f"pieces before reading it: {_short(s)!r}")
        j = 0
        for piece in pieces:
            try:
                encoded = encode_splitting(encode, piece)
            except UnspeakableTextError as e:  # e.g. a sentence of only symbols: skip it, keep the rest
                first_error = first_error or e
                notes.append(f"skipped unspeakable sentence {_short(piece)!r}")
                continue
            if len(encoded) > 1:
                notes.append(f"split a long sentence into {len(encoded)} parts at clause boundaries: {_short(piece)!r}")
            for text_k, ids in encoded:
                yield Part(text_k, ids, 0.0 if not spoken else CLAUSE_PAUSE_S if j else pause_s)
                spoken += 1
                j += 1
    if not spoken:
        raise first_error if first_error is not None else UnspeakableTextError(f"nothing speakable in {_short(text)!r}")


def iter_document_parts(document: Any, encode: Callable[[str], list[int]], pause_s: float, notes: list[str],
                        tail: list[float]) -> Iterator[Part]:
    """`iter_parts` of an SSML document (tts.text.ssml.SsmlDocument): each speech segment's parts carry its prosody;
    a break sets the silence before the next part exactly (breaks in a row add up; one before the first part is
    silence at the start); between segments without one, the sentence pause after a sentence's end and
    CLAUSE_PAUSE_S inside a sentence (a prosody change).  A break after the last part is appended to `tail` (the
    caller's silence at the end).  UnspeakableTextError when no segment has anything speakable."""
    from tts.text.errors import TextError, UnspeakableTextError
    from tts.text.ssml import PauseSegment

    pending: float | None = None  # seconds of breaks since the last part
    spoken, first_error = 0, None
    previous_text = ""
    for segment in document.segments:
        if isinstance(segment, PauseSegment):
            pending = (pending or 0.0) + segment.seconds
            continue
        between = 0.0 if not spoken else pause_s if _ends_sentence(previous_text) else CLAUSE_PAUSE_S
        try:
            for k, part in enumerate(iter_parts(segment.text, encode, pause_s, notes)):
                if k == 0:
                    part.pause_s = pending if pending is not None else between
                    pending = None
                part.speed, part.pitch_shift = segment.speed, segment.pitch_shift
                spoken += 1
                yield part
        except TextError as e:
            if not isinstance(e, UnspeakableTextError):
                raise
            first_error = first_error or e
            notes.append(f"skipped unspeakable SSML text {_short(segment.text)!r}")
            continue
        previous_text = segment.text
    if not spoken:
        raise first_error if first_error is not None else UnspeakableTextError("nothing speakable in the SSML document")
    if pending:
        tail.append(pending)


def _ends_sentence(text: str) -> bool:
    return text.rstrip().rstrip(_CLOSERS)[-1:] in tuple(_TERMINAL)


def _sentences_or_text(sentences: Iterator[str], text: str) -> Iterator[str]:
    """The sentences, or the text itself when it has none (only whitespace: the frontend names the error)."""
    found = False
    for s in sentences:
        found = True
        yield s
    if not found:
        yield text


def _source(text: Any, encode: Callable[[str], list[int]], pause_s: float, notes: list[str],
            tail: list[float]) -> Iterator[Part]:
    """The parts of plain text (`iter_parts`) or of an SSML document (`iter_document_parts`)."""
    if isinstance(text, str):
        return iter_parts(text, encode, pause_s, notes)
    return iter_document_parts(text, encode, pause_s, notes, tail)


def prepare_parts(text: Any, encode: Callable[[str], list[int]], pause_s: float,
                  tail: list[float] | None = None) -> tuple[list[Part], list[str]]:
    """`iter_parts` (or `iter_document_parts` of an SSML document) all at once -> (parts, notes); a final
    break's seconds are appended to `tail`."""
    notes: list[str] = []
    return list(_source(text, encode, pause_s, notes, [] if tail is None else tail)), notes


class PartStream:
    """The parts of a text made as they are asked for (`iter_parts`) and kept once made: what a pipeline iterates
    to speak a document sentence by sentence, its first audio after its first sentence's text work.

    `first()` makes the first part now, so that bad text (empty, nothing speakable) is an error before any audio;
    iterating yields the parts made so far, then makes the rest one at a time; `made` holds them in order (part k
    is made[k]); `notes` fills as they are made; `text_s` sums the seconds spent making them."""

    def __init__(self, text: Any, encode: Callable[[str], list[int]], pause_s: float) -> None:
        # text: plain text, or an SSML document (tts.text.ssml.SsmlDocument)
        self.made: list[Part] = []
        self.notes: list[str] = []
        self.tail: list[float] = []  # an SSML document's final break, once the last part is made
        self.text_s = 0.0
        self._source: Iterator[Part] | None = _source(text, encode, pause_s, self.notes, self.tail)

    def _make_next(self) -> bool:
        """Make one more part (False when the text is spent)."""
        if self._source is None:
            return False
        t0 = time.perf_counter()
        try:
            self.made.append(next(self._source))
            return True
        except StopIteration:
            self._source = None
            return False
        finally:
            self.text_s += time.perf_counter() - t0

    def first(self) -> Part:
        if not self.made:
            self._make_next()  # the source raises bad text before its last sentence if nothing was speakable
        return self.made[0]

    def __iter__(self) -> Iterator[Part]:
        k = 0
        while k < len(self.made) or self._make_next():
            yield self.made[k]
            k += 1

    def __getitem__(self, k: int) -> Part:
        return self.made[k]

    def all(self) -> list[Part]:
        """Every part, made now."""
        for _ in self:
            pass
        return self.made


_TERMINAL = ".!?\u2026"
_CLOSERS = "\"')]}\u00bb\u201d\u2019"


def with_final_stop(sentence: str) -> str:
    """`sentence` ending in terminal punctuation ("." added where it has none).  The models were trained on
    sentences that end in one: without it a one-vowel utterance ("I", "eh") comes out as 0.2 s of
    near-silence and any sentence is cut short, its last word unfinished."""
    if sentence.rstrip(_CLOSERS)[-1:] in tuple(_TERMINAL):
        return sentence
    return sentence + "."


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

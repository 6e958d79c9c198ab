"""The pipeline's text stage (tts.runtime.pipeline), torch-free: the sentence rules (a final stop, clause
cuts of a sentence the model cannot speak whole, the pause between clause parts) that turn a text into the
token sequences an engine speaks.  Plain Python: importing it costs nothing at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


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


def split_clause(text: str) -> tuple[str, str] | None:
    """`text` cut in two at its strongest clause boundary nearest the middle (a character cut in a text
    without spaces); None for text too short to cut.  Used on sentences the model cannot speak whole."""
    for pattern in _CLAUSE_BREAKS:
        cuts = [m.end() for m in pattern.finditer(text) if m.start() > 0 and m.end() < len(text)]
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


def prepare_parts(text: str, encode: Callable[[str], list[int]], pause_s: float) -> tuple[list[Part], list[str]]:
    """THE text stage of both runtimes: `text` -> the parts to speak (sentences with a final stop; a sentence
    over the frontend's max_symbols cut at clause boundaries, its parts joined by CLAUSE_PAUSE_S instead of the
    sentence pause `pause_s`) and notes.  A sentence with nothing speakable is skipped with a note;
    UnspeakableTextError when none is left."""
    from tts.text import split_sentences
    from tts.text.errors import TextError, UnspeakableTextError

    parts: list[Part] = []
    notes: list[str] = []
    errors: list[TextError] = []
    for s in split_sentences(text) or [text]:
        try:
            pieces_of_s = encode_splitting(encode, with_final_stop(s))
        except UnspeakableTextError as e:  # e.g. a sentence of only symbols: skip it, keep the rest
            errors.append(e)
            notes.append(f"skipped unspeakable sentence {s!r}")
            continue
        if len(pieces_of_s) > 1:
            notes.append(f"split a long sentence into {len(pieces_of_s)} parts at clause boundaries: {_short(s)!r}")
        for j, (piece, ids) in enumerate(pieces_of_s):
            parts.append(Part(piece, ids, 0.0 if not parts else CLAUSE_PAUSE_S if j else pause_s))
    if not parts:
        raise errors[0] if errors else UnspeakableTextError(f"nothing speakable in {text!r}")
    return parts, notes


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

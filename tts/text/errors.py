"""Errors raised by the text frontend.

Every error is a `TextError`, itself a `ValueError`, so callers that only care
"was this input bad?" can catch one type, while tests and the synthesis CLI
can tell the cases apart.
"""

from __future__ import annotations

from collections.abc import Sequence


class TextError(ValueError):
    """Base class of every error about input text or symbols."""


class EmptyTextError(TextError):
    """The input text is empty or only whitespace."""

    def __init__(self) -> None:
        super().__init__("input text is empty or only whitespace; nothing to synthesise")


class UnspeakableTextError(TextError):
    """Nothing speakable is left after cleaning and normalisation (e.g. '???' or only emoji)."""

    def __init__(self, text: str) -> None:
        shown = text if len(text) <= 80 else text[:77] + "..."
        super().__init__(
            f"text {shown!r} contains no speakable words after normalisation "
            "(only punctuation, symbols or characters that were dropped)"
        )
        self.text = text


class TextTooLongError(TextError):
    """The phoneme sequence is longer than the frontend's `max_symbols` guard."""

    def __init__(self, n_symbols: int, max_symbols: int, n_sentences: int) -> None:
        hint = (
            f"the text has {n_sentences} sentences: split it with tts.text.split_sentences() "
            "and synthesise them one by one"
            if n_sentences > 1
            else "it is a single sentence: shorten it or break it into smaller sentences "
            "(tts.text.split_sentences() only splits at sentence ends)"
        )
        super().__init__(
            f"text encodes to {n_symbols} symbols, more than max_symbols={max_symbols}; {hint}"
        )
        self.n_symbols = n_symbols
        self.max_symbols = max_symbols


class UnknownSymbolError(TextError):
    """A phoneme/symbol (or id) that is not in the symbol table."""

    def __init__(self, unknown: Sequence[str]) -> None:
        listed = ", ".join(repr(s) for s in unknown)
        super().__init__(
            f"{len(unknown)} unknown symbol(s) not in the symbol table: {listed}"
        )
        self.unknown = list(unknown)


class PronunciationError(TextError):
    """A pronunciation given by the user (inline `[[...]]` phonemes, a user lexicon entry, an SSML `<phoneme>`)
    that cannot be spoken: symbols that are not phones of the model's table, IPA with no ARPAbet mapping, a
    malformed lexicon line.  Its own type, so that a caller can tell "your pronunciation is wrong" from "your
    text is wrong"; `unknown` holds the offending symbols (empty for a malformed line)."""

    def __init__(self, message: str, unknown: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.unknown = list(unknown)

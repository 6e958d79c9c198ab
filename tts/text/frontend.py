"""The text frontend: raw text -> normalised text -> phonemes -> symbol ids.

`TextFrontend.to_dict()` describes the whole configuration (normaliser version, lexicon and
its version, OOV strategy, symbol table, length guard) so that a checkpoint says exactly how
its inputs were made, and `TextFrontend.from_dict()` rebuilds the same frontend.
"""

from __future__ import annotations

import logging
import re
from collections import ChainMap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from tts.text.errors import EmptyTextError, PronunciationError, TextError, TextTooLongError, UnspeakableTextError
from tts.text.g2p import G2P, cmudict_version
from tts.text.lexicon import Lexicon, check_phones, parse_pronunciation
from tts.text.normalizer import normalize
from tts.text.sentences import split_sentences
from tts.text.symbols import SymbolTable
from tts.text.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

# Bump when normalisation output changes for some input, so checkpoints can tell (and token caches of
# the datasets, keyed by to_dict(), are rebuilt). 2: the document classes of issue 24 (telephone,
# electronic, addresses, dates, Roman numerals, ...); 15 of the 15 000 corpus sentences read differently.
# 3: mathematical notation (tts.text.mathematics: ≥ ± ÷ × ∞ π, powers, ½, feet/inches, 1e308, 10^9, Unicode digits).
NORMALIZER_VERSION = 3
FORMAT_VERSION = 1


# The programs a stored description may name for out-of-vocabulary words.  A description comes from a
# checkpoint, i.e. a file from anywhere: a path in it ("./espeak-ng" shipped beside the file, "/bin/sh") would be
# run as a program, so only these names are kept and looked up on PATH.
ESPEAK_PROGRAMS = ("espeak-ng", "espeak")
_VOICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]{0,39}")


def stored_espeak(executable: Any) -> str | None:
    """The espeak program of a stored description: None (spell), or one of ESPEAK_PROGRAMS found on PATH; a path
    keeps only its program name (the training machine's /usr/bin/espeak-ng is this machine's espeak-ng)."""
    if executable is None:
        return None
    name = PurePath(executable).name if isinstance(executable, str) else None
    if name not in ESPEAK_PROGRAMS:
        raise TextError(f"text frontend names {executable!r} as its espeak program; only {list(ESPEAK_PROGRAMS)} "
                        "(looked up on PATH) or none are allowed")
    return name


def stored_espeak_voice(voice: Any) -> str:
    """A stored espeak voice name ("en-us"); anything else (an option, a path) is refused."""
    if not isinstance(voice, str) or not _VOICE_NAME.fullmatch(voice):
        raise TextError(f"text frontend espeak voice {voice!r} is not a voice name")
    return voice


# Inline phonemes in plain text: "[[HH AH0 L OW1]]" (ARPAbet of the symbol table) or "[[/həˈloʊ/]]" (IPA).  Single
# square brackets keep their meaning (the normaliser reads them as a comma's pause).
INLINE_PHONEMES_RE = re.compile(r"\[\[([^\[\]]*)\]\]")
# The word an inline pronunciation stands as while the text is normalised: letters only, so that no normaliser
# pass (numbers, units, spelled capitals) reads it, unlike any English word, and capitalised like the name it
# most often is ("Dr. [[...]]" is "doctor", "[[...]] St." "street"); the G2P then finds its phones in the
# lexicon the frontend passes it (looked up lowercased).  k-th span: the prefix + k in letters.
_PLACEHOLDER_PREFIX = "Qqxinlinephonemes"


@dataclass(frozen=True)
class WordSpan:
    """One spoken word of an encoded text: its text as spoken (the normalised form, "three" of "3"; an inline
    pronunciation's bracket content, "HH AH0 L OW1") and the range [start, end) of its phones' ids."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class EncodedText:
    """`TextFrontend.encode_words`: the ids `encode` gives, and the words they speak, in order, not overlapping,
    together covering every phone id (the ids between words are word boundaries and pause marks)."""

    ids: list[int]
    words: list[WordSpan]


def _placeholder(k: int) -> str:
    letters = ""
    while True:
        k, r = divmod(k, 26)
        letters = chr(ord("a") + r) + letters
        if k == 0:
            return _PLACEHOLDER_PREFIX + letters


class TextFrontend:
    """Normaliser + G2P + tokenizer.

    Pronunciation control (runtime options, never part of `to_dict`, so checkpoints do not depend on them):
    inline phonemes `[[HH AH0 L OW1]]` / `[[/həˈloʊ/]]` in the text are spoken exactly as written, as one word,
    untouched by the normaliser; a user lexicon (`tts.text.lexicon.Lexicon`, the `lexicon` argument of
    `phonemize`/`encode`/`encode_words`) gives words phones before CMUdict and espeak-ng.  Phones that are not in
    the symbol table are a `PronunciationError` naming them.

    Characters that cannot be spoken (emoji, CJK, control characters) are dropped with a logged
    warning, after accents are transliterated (é -> e); see `tts.text.cleaning`.

    Args:
        symbols: symbol table; defaults to `SymbolTable.default()`.
        espeak_executable: espeak-ng program used for out-of-vocabulary words; None (or a
            missing program) spells them letter by letter instead (see `tts.text.g2p`).
        espeak_voice: espeak-ng voice.
        max_symbols: if set, `phonemize`/`encode` raise TextTooLongError for text whose symbol
            sequence is longer; split long text with `split_sentences` first.

    Raises (from phonemize/encode), all `TextError`s:
        EmptyTextError: empty or whitespace-only text.
        UnspeakableTextError: nothing speakable after normalisation ("???", only emoji).
        TextTooLongError: more than `max_symbols` symbols.
        PronunciationError: inline phonemes or lexicon phones that are not phones of the symbol table.
    """

    def __init__(
        self,
        symbols: SymbolTable | None = None,
        espeak_executable: str | None = "espeak-ng",
        espeak_voice: str = "en-us",
        max_symbols: int | None = None,
    ) -> None:
        if max_symbols is not None and max_symbols < 1:
            raise TextError(f"max_symbols must be a positive integer or None, got {max_symbols}")
        self.symbols = symbols if symbols is not None else SymbolTable.default()
        self.tokenizer = Tokenizer(self.symbols)
        self.g2p = G2P(espeak_executable=espeak_executable, espeak_voice=espeak_voice)
        self.max_symbols = max_symbols

    @property
    def vocab_size(self) -> int:
        return len(self.symbols)

    def normalize(self, text: str) -> str:
        return normalize(text)

    def phonemize(self, text: str, lexicon: Lexicon | None = None) -> list[str]:
        """Symbols for `text`: ARPAbet phones with stress, " " word boundaries, pause marks."""
        return self._analyse(text, lexicon)[0]

    def encode(self, text: str, lexicon: Lexicon | None = None) -> list[int]:
        """Symbol ids for `text` (see `phonemize` for the errors)."""
        return self.tokenizer.encode(self.phonemize(text, lexicon))

    def encode_words(self, text: str, lexicon: Lexicon | None = None) -> EncodedText:
        """`encode`'s ids with the id range of each spoken word (for word timestamps: a word's time is the sum of
        its ids' durations)."""
        phonemes, spans = self._analyse(text, lexicon)
        return EncodedText(self.tokenizer.encode(phonemes), [WordSpan(w, start, end) for w, start, end in spans])

    def _analyse(self, text: str, lexicon: Lexicon | None) -> tuple[list[str], list[tuple[str, int, int]]]:
        """(symbols, words (text as spoken, start, end)) of `text`, with its errors (see the class)."""
        if not text or not text.strip():
            raise EmptyTextError()
        protected, inline = self._protect_inline(text)
        overrides: Mapping[str, Sequence[str]] | None = None
        if inline or lexicon is not None:
            overrides = ChainMap({k: phones for k, (_, phones) in inline.items()}, lexicon if lexicon is not None else {})
        phonemes, spans = self.g2p.phonemize_words(self.normalize(protected), overrides)
        if lexicon is not None:  # its words' phones (inline ones were checked as they were read)
            check_phones((p for w, start, end in spans if w.lower() in lexicon or w.strip("'").lower() in lexicon
                          for p in phonemes[start:end]), self.symbols, lexicon.name)
        if inline:
            spans = [(w.lower() if w.lower() in inline else w, start, end) for w, start, end in spans]
            found = [w for w, _, _ in spans if w in inline]
            if found != list(inline):  # the normaliser changed a placeholder: never expected
                raise TextError(f"inline phonemes of {text[:80]!r} were lost in normalisation")
            spans = [(inline[w][0] if w in inline else w, start, end) for w, start, end in spans]
        if not any(self.symbols.is_phone(p) for p in phonemes):
            raise UnspeakableTextError(text)
        if self.max_symbols is not None and len(phonemes) > self.max_symbols:
            raise TextTooLongError(len(phonemes), self.max_symbols, len(split_sentences(text)))
        return phonemes, spans

    def _protect_inline(self, text: str) -> tuple[str, dict[str, tuple[str, tuple[str, ...]]]]:
        """`text` with each inline pronunciation `[[...]]` replaced by a placeholder word (spaces around it: it
        is one word), and placeholder -> (the bracket content, its phones, checked against the symbol table)."""
        if "[[" not in text:
            return text, {}
        inline: dict[str, tuple[str, tuple[str, ...]]] = {}

        def protect(m: re.Match[str]) -> str:
            content = m.group(1).strip()
            where = f"inline phonemes [[{content}]]"
            try:
                phones = parse_pronunciation(content)
            except PronunciationError as e:
                raise PronunciationError(f"{where}: {e}", e.unknown) from None
            check_phones(phones, self.symbols, where)
            key = _placeholder(len(inline))
            inline[key.lower()] = (content, phones)
            return f" {key} "

        return INLINE_PHONEMES_RE.sub(protect, text), inline

    def decode(self, ids: list[int]) -> list[str]:
        return self.tokenizer.decode(ids)

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description of this frontend (goes into checkpoints)."""
        return {
            "format_version": FORMAT_VERSION,
            "language": "en-us",
            "normalizer_version": NORMALIZER_VERSION,
            "g2p": self.g2p.to_dict(),
            "max_symbols": self.max_symbols,
            "symbols": self.symbols.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TextFrontend:
        """Rebuild a frontend; warns when this code would normalise/phonemise differently."""
        if data.get("format_version") != FORMAT_VERSION:
            raise TextError(
                f"text frontend format_version {data.get('format_version')!r} is not supported "
                f"(expected {FORMAT_VERSION})"
            )
        if not isinstance(data.get("symbols"), dict):
            raise TextError("text frontend description has no 'symbols' table")
        g2p = data.get("g2p") or {}
        if data.get("normalizer_version") != NORMALIZER_VERSION:
            # The model reads phonemes, not text: another normaliser changes which words some inputs
            # become, never whether the model can speak them, so this is a note, not a warning.
            logger.debug(
                "checkpoint text was normalised by normaliser version %s, this code is version %s",
                data.get("normalizer_version"), NORMALIZER_VERSION,
            )
        if g2p.get("lexicon_version") not in (None, cmudict_version()):
            logger.warning(
                "checkpoint used cmudict %s, installed cmudict is %s: some pronunciations may differ",
                g2p.get("lexicon_version"), cmudict_version(),
            )
        max_symbols = data.get("max_symbols")
        if max_symbols is not None and (isinstance(max_symbols, bool) or not isinstance(max_symbols, int)):
            raise TextError(f"text frontend max_symbols must be an integer or None, got {max_symbols!r}")
        return cls(
            symbols=SymbolTable.from_dict(data["symbols"]),
            espeak_executable=stored_espeak(g2p.get("espeak_executable", "espeak-ng")),
            espeak_voice=stored_espeak_voice(g2p.get("espeak_voice", "en-us")),
            max_symbols=max_symbols,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextFrontend) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (
            f"TextFrontend(vocab_size={self.vocab_size}, espeak_executable="
            f"{self.g2p.espeak_executable!r}, max_symbols={self.max_symbols})"
        )

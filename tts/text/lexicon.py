"""User pronunciations: a user lexicon (word -> ARPAbet phones) and the phoneme notation it shares with inline
`[[...]]` phonemes and SSML `<phoneme>`.

Users fix a mispronounced name by giving its phones, not by respelling it (rhasspy/piper #711): either in the
text (`[[HH AH0 L OW1]]`, see `TextFrontend`) or once for every occurrence, in a lexicon file::

    # word<TAB>phonemes; blank lines and lines starting with # are skipped
    nguyen	W IH1 N
    gif	/ɡɪf/

A pronunciation is ARPAbet symbols of the model's symbol table separated by spaces, stress digits as in the
table (AH0 AH1 AH2), or IPA between slashes, mapped to ARPAbet by the table of `tts.text.ipa` (the one espeak-ng's
output goes through).  The user lexicon is consulted before CMUdict and espeak-ng (`G2P.pronounce`); it is a
runtime option of `TextFrontend.encode`, never part of a checkpoint's description (`TextFrontend.to_dict`), so a
model's files stay the same whatever lexicon speaks with it.

A lexicon word is what the G2P sees as one word of *normalised* text: letters and apostrophes.  A key such as
"3000" or "e-mail" would never match (the normaliser reads "3000" as "three thousand", the G2P splits hyphenated
words), so it is refused when the lexicon is made instead of being silently ignored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from tts.text.errors import PronunciationError
from tts.text.ipa import IGNORED, IPA_TO_ARPABET, PRIMARY, SECONDARY, ipa_to_arpabet
from tts.text.symbols import SymbolTable

Pronunciation = tuple[str, ...]

# A word as the G2P tokenises normalised text (tts.text.g2p._TOKEN_RE, without the hyphen it splits at).
WORD_RE = re.compile(r"[A-Za-z']*[A-Za-z][A-Za-z']*")
# How many valid phones an error about unknown symbols lists.
VALID_SHOWN = 12
# Characters an IPA pronunciation may contain: those of the mapping's keys, stress and length marks, separators.
_IPA_KNOWN = frozenset("".join(IPA_TO_ARPABET)) | IGNORED | {PRIMARY, SECONDARY, "\u02d0"}


def parse_pronunciation(spec: str) -> Pronunciation:
    """The phones of a pronunciation as the user wrote it: ARPAbet symbols separated by whitespace
    ("HH AH0 L OW1", kept exactly as written), or IPA between slashes ("/həˈloʊ/", mapped by `tts.text.ipa`).

    Not checked against a symbol table here (the table is the model's, known only when speaking: see
    `check_phones`); IPA characters without a mapping are a PronunciationError now, since the mapping would
    otherwise skip them and speak something else than what was written."""
    text = spec.strip()
    if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
        ipa = unicodedata.normalize("NFC", text[1:-1])
        unmapped = list(dict.fromkeys(c for c in ipa if not (c in _IPA_KNOWN or c.isspace() or unicodedata.combining(c))))
        if unmapped:
            raise PronunciationError(
                f"IPA {text!r} has symbol(s) with no ARPAbet mapping: {', '.join(repr(c) for c in unmapped)} "
                "(write the phones in ARPAbet instead, e.g. [[HH AH0 L OW1]])", unmapped)
        phones = tuple(ipa_to_arpabet(ipa))
        if not phones:
            raise PronunciationError(f"IPA {text!r} gives no phones")
        return phones
    phones = tuple(text.split())
    if not phones:
        raise PronunciationError("empty pronunciation: give ARPAbet phones (HH AH0 L OW1) or IPA in slashes (/həˈloʊ/)")
    return phones


def check_phones(phones: Iterable[str], symbols: SymbolTable, where: str) -> None:
    """PronunciationError naming every symbol of `phones` that is not a phone of `symbols` (pause marks and the
    word boundary are not phones: a pronunciation is one word's sounds), with a few valid phones to choose from;
    `where` says whose pronunciation it is ("inline phonemes [[...]]", "lexicon words.tsv:3")."""
    unknown = list(dict.fromkeys(p for p in phones if not symbols.is_phone(p)))
    if not unknown:
        return
    valid = [s for s in symbols if symbols.is_phone(s)]
    hints = [f"{p!r} (did you mean {p.upper()!r}?)" if symbols.is_phone(p.upper()) else repr(p) for p in unknown]
    raise PronunciationError(
        f"{where}: unknown phoneme symbol(s) {', '.join(hints)}; the model's {len(valid)} phones are ARPAbet "
        f"with stress digits as in its table, e.g. {' '.join(valid[:VALID_SHOWN])} ...", unknown)


@dataclass(frozen=True, eq=False)
class Lexicon(Mapping[str, Pronunciation]):
    """A user lexicon: lowercased word -> its phones, consulted before CMUdict and espeak-ng.

    An immutable mapping (equal to any mapping with the same entries).  Make one with `load` (a file) or
    `from_entries` (a dict, e.g. from a server configuration); check it against a model's symbols with `check`
    before speaking, so that a typo is named once, with its word, instead of at the first sentence using it.
    `source` names it in messages (the file's path)."""

    entries: Mapping[str, Pronunciation]
    source: str = field(default="lexicon")

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", MappingProxyType(dict(self.entries)))

    @classmethod
    def from_entries(cls, entries: Mapping[str, str | Sequence[str]], source: str = "lexicon") -> Lexicon:
        """From word -> pronunciation: a string in the notation of `parse_pronunciation` ("HH AH0 L OW1",
        "/həˈloʊ/") or a sequence of ARPAbet symbols.  Words are lowercased; a word the G2P could never look
        up (not letters and apostrophes) is a PronunciationError."""
        parsed: dict[str, Pronunciation] = {}
        for word, spec in entries.items():
            where = f"{source} entry {word!r}"
            try:
                phones = parse_pronunciation(spec) if isinstance(spec, str) else tuple(spec)
            except PronunciationError as e:
                raise PronunciationError(f"{where}: {e}", e.unknown) from None
            if not phones or not all(isinstance(p, str) and p and not any(c.isspace() for c in p) for p in phones):
                raise PronunciationError(f"{where}: phones must be non-empty symbols without spaces, got {spec!r}")
            parsed[_key(word, where)] = phones
        return cls(parsed, source)

    @classmethod
    def load(cls, path: str | Path) -> Lexicon:
        """Read a UTF-8 file of `word<TAB>phonemes` lines (blank lines and lines starting with # skipped; text
        after a # is a comment).  A later line of the same word replaces an earlier one.  A line without a tab,
        with a word that is not letters and apostrophes, or with a bad pronunciation is a PronunciationError
        naming file:line."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise PronunciationError(f"lexicon {path} is not UTF-8 text: {e}") from None
        except OSError as e:
            raise PronunciationError(f"cannot read lexicon {path}: {e.strerror or e}") from None
        entries: dict[str, Pronunciation] = {}
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0]
            if not line.strip():
                continue
            where = f"lexicon {path}:{number}"
            word, tab, spec = line.partition("\t")
            if not tab:
                raise PronunciationError(f"{where}: expected word<TAB>phonemes, got {line.strip()!r}")
            try:
                entries[_key(word.strip(), where)] = parse_pronunciation(spec)
            except PronunciationError as e:
                raise PronunciationError(str(e) if str(e).startswith(where) else f"{where}: {e}", e.unknown) from None
        return cls(entries, str(path))

    @property
    def name(self) -> str:
        """How messages name it: "lexicon" or "lexicon <its file>"."""
        return "lexicon" if self.source == "lexicon" else f"lexicon {self.source}"

    def check(self, symbols: SymbolTable) -> None:
        """PronunciationError naming each symbol that is not a phone of `symbols` (a model's table), with the
        first word that uses it."""
        used: dict[str, str] = {}
        for word, phones in self.entries.items():
            for p in phones:
                if not symbols.is_phone(p):
                    used.setdefault(p, word)
        if used:
            try:
                check_phones(used, symbols, self.name)
            except PronunciationError as e:
                words = ", ".join(f"{p!r} in {w!r}" for p, w in used.items())
                raise PronunciationError(f"{e} [{words}]", e.unknown) from None

    # -- Mapping -------------------------------------------------------------------------
    def __getitem__(self, word: str) -> Pronunciation:
        return self.entries[word]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"Lexicon({len(self)} words from {self.source})"


def _key(word: str, where: str) -> str:
    if not isinstance(word, str) or not WORD_RE.fullmatch(word):
        raise PronunciationError(
            f"{where}: {word!r} is not a word the G2P looks up (letters and apostrophes only: numbers are read "
            "as words first, hyphenated words by their parts)")
    return word.lower()

"""The symbol inventory the acoustic models embed: pad, word boundary, pauses, ARPAbet phones.

The table is data, not code: it is saved into every checkpoint (`to_dict()`), and a model's
embedding size is derived from `len(table)` instead of being restated in a config.  Ids are
positions in `symbols`, so the order is part of the contract and never changes for a saved table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tts.text.errors import TextError

PAD = "_"
WORD_BOUNDARY = " "
# Punctuation kept as pause symbols.  The normaliser maps every other mark onto these.
PUNCTUATION: tuple[str, ...] = (",", ".", "?", "!", ";", ":", "-")

# The 15 ARPAbet vowels carry a lexical stress digit: 0 unstressed, 1 primary, 2 secondary
# (CMUdict's convention).  Consonants carry none.
ARPABET_VOWELS: tuple[str, ...] = (
    "AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW",
)
ARPABET_CONSONANTS: tuple[str, ...] = (
    "B", "CH", "D", "DH", "F", "G", "HH", "JH", "K", "L", "M", "N", "NG",
    "P", "R", "S", "SH", "T", "TH", "V", "W", "Y", "Z", "ZH",
)
STRESSES: tuple[str, ...] = ("0", "1", "2")
ARPABET_PHONES: tuple[str, ...] = tuple(
    v + s for v in ARPABET_VOWELS for s in STRESSES
) + ARPABET_CONSONANTS

FORMAT_VERSION = 1


@dataclass(frozen=True)
class SymbolTable:
    """An ordered, duplicate-free list of symbols; a symbol's id is its index.

    `pad` must be at id 0 (padding masks and `nn.Embedding(padding_idx=0)` rely on it).
    Equality compares the full ordered contents, so two tables are equal exactly when
    they map every symbol to the same id.
    """

    symbols: tuple[str, ...]
    pad: str = PAD
    word_boundary: str = WORD_BOUNDARY
    punctuation: tuple[str, ...] = PUNCTUATION
    _index: dict[str, int] = field(init=False, repr=False, compare=False, hash=False)
    _non_phones: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        symbols = tuple(self.symbols)
        object.__setattr__(self, "symbols", symbols)
        object.__setattr__(self, "punctuation", tuple(self.punctuation))
        if not symbols or symbols[0] != self.pad:
            raise TextError(f"pad symbol {self.pad!r} must be at id 0, got {symbols[:1]!r}")
        duplicates = sorted({s for s in symbols if symbols.count(s) > 1})
        if duplicates:
            raise TextError(f"duplicate symbols in symbol table: {duplicates!r}")
        missing = [s for s in (self.word_boundary, *self.punctuation) if s not in symbols]
        if missing:
            raise TextError(f"word boundary/punctuation symbols missing from table: {missing!r}")
        object.__setattr__(self, "_index", {s: i for i, s in enumerate(symbols)})
        object.__setattr__(
            self, "_non_phones", frozenset({self.pad, self.word_boundary, *self.punctuation})
        )

    @classmethod
    def default(cls) -> SymbolTable:
        """Pad, word boundary, the pause marks, then the 69 stressed ARPAbet phones."""
        return cls(symbols=(PAD, WORD_BOUNDARY, *PUNCTUATION, *ARPABET_PHONES))

    # -- lookups -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.symbols)

    def id_of(self, symbol: str) -> int:
        """Id of one symbol; KeyError if absent (the Tokenizer turns it into UnknownSymbolError)."""
        return self._index[symbol]

    def symbol_of(self, symbol_id: int) -> str:
        return self.symbols[symbol_id]

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def word_boundary_id(self) -> int:
        return self._index[self.word_boundary]

    def is_phone(self, symbol: str) -> bool:
        """True for phones (anything that is not pad, word boundary or a pause mark)."""
        return symbol in self._index and symbol not in self._non_phones

    def unknown(self, symbols: Iterable[str]) -> list[str]:
        """The distinct symbols of `symbols` not in the table, in first-seen order."""
        seen: dict[str, None] = {}
        for s in symbols:
            if s not in self._index:
                seen.setdefault(s, None)
        return list(seen)

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable description (goes into checkpoints)."""
        return {
            "format_version": FORMAT_VERSION,
            "symbols": list(self.symbols),
            "pad": self.pad,
            "word_boundary": self.word_boundary,
            "punctuation": list(self.punctuation),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SymbolTable:
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise TextError(
                f"symbol table format_version {version!r} is not supported (expected {FORMAT_VERSION})"
            )
        return cls(
            symbols=tuple(_str_list(data, "symbols")),
            pad=_str(data, "pad"),
            word_boundary=_str(data, "word_boundary"),
            punctuation=tuple(_str_list(data, "punctuation")),
        )


def _str_list(data: dict[str, Any], key: str) -> Sequence[str]:
    value = data.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TextError(f"symbol table field {key!r} must be a list of strings, got {value!r}")
    return value


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise TextError(f"symbol table field {key!r} must be a string, got {value!r}")
    return value

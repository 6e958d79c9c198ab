"""Symbols <-> integer ids, with an explicit error for anything outside the table."""

from __future__ import annotations

from collections.abc import Sequence

from tts.text.errors import UnknownSymbolError
from tts.text.symbols import SymbolTable


class Tokenizer:
    """Maps phoneme/pause symbols to ids of a `SymbolTable` and back.

    Unknown input is never mapped to a silent fallback id: a model trained on one table and
    fed symbols from another would otherwise produce garbage without any sign of the cause.
    """

    def __init__(self, symbols: SymbolTable) -> None:
        self.symbols = symbols

    @property
    def vocab_size(self) -> int:
        return len(self.symbols)

    def encode(self, phonemes: Sequence[str]) -> list[int]:
        """Ids of `phonemes`; raises UnknownSymbolError naming every unknown symbol."""
        unknown = self.symbols.unknown(phonemes)
        if unknown:
            raise UnknownSymbolError(unknown)
        return [self.symbols.id_of(p) for p in phonemes]

    def decode(self, ids: Sequence[int]) -> list[str]:
        """Symbols of `ids`; ids outside [0, vocab_size) raise UnknownSymbolError."""
        n = len(self.symbols)
        bad = sorted({int(i) for i in ids if not 0 <= int(i) < n})
        if bad:
            raise UnknownSymbolError([f"id {i} (vocab size {n})" for i in bad])
        return [self.symbols.symbol_of(int(i)) for i in ids]

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"

"""Text frontend: normalisation, G2P (CMUdict + espeak-ng), symbols and tokenizer.

Typical use::

    from tts.text import TextFrontend, split_sentences
    frontend = TextFrontend(max_symbols=600)
    ids = [frontend.encode(s) for s in split_sentences(long_text)]
    checkpoint["text"] = frontend.to_dict()      # later: TextFrontend.from_dict(...)
"""

from tts.text.errors import (
    EmptyTextError,
    TextError,
    TextTooLongError,
    UnknownSymbolError,
    UnspeakableTextError,
)
from tts.text.frontend import TextFrontend
from tts.text.g2p import G2P
from tts.text.normalizer import normalize
from tts.text.sentences import split_sentences
from tts.text.symbols import ARPABET_PHONES, PAD, PUNCTUATION, WORD_BOUNDARY, SymbolTable
from tts.text.tokenizer import Tokenizer

__all__ = [
    "ARPABET_PHONES",
    "EmptyTextError",
    "G2P",
    "PAD",
    "PUNCTUATION",
    "SymbolTable",
    "TextError",
    "TextFrontend",
    "TextTooLongError",
    "Tokenizer",
    "UnknownSymbolError",
    "UnspeakableTextError",
    "WORD_BOUNDARY",
    "normalize",
    "split_sentences",
]

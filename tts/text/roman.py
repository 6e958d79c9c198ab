"""Roman numerals in the two places an English reader meets them.

- after a word that numbers a part of something ("Chapter XIV", "PART XL", "World War II",
  "Act III"): the cardinal, "chapter fourteen";
- after a capitalised name (a regnal or generational number: "Louis XIV's", "Henry VIII",
  "Sam II"): "the" + the ordinal, "Louis the fourteenth's".
Everything else stays letters: a lone "I" is the pronoun ("Sam and I", "the book I read"), a lone
letter after a name is a letter ("Malcolm X", "Henry V" too: one letter is too weak a sign), and numerals that are also common acronyms ("CD", "MD", "DC", "CV", "MIX",
"DIV") are only read after a part word.  Only upper-case numerals count.
"""

from __future__ import annotations

import re

from tts.text import number_words as numbers

# Words after which a numeral is a cardinal part number (compared lower-case).
PART_WORDS = frozenset(
    "chapter chapters part parts volume vol book act scene section article appendix annex phase stage "
    "type class grade level round season episode war world super psalm canto track figure table plate "
    "step tier category series bowl system version".split()
)
# Valid numerals that are more often acronyms or words: read only after a part word.
ACRONYMS = frozenset({"CD", "MD", "DC", "CV", "MIX", "DIV", "CC", "MC", "LI", "MI", "DI", "CI", "DL", "ML", "MM",
                      "CL", "XL", "LX", "CM", "DCC", "MCC", "CID", "VI", "XXX", "DIX", "MIC", "C", "D", "L", "M"})
_VALID = re.compile(r"M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
# not before ".2": "System V.2" is a version
_CANDIDATE_RE = re.compile(r"\b([A-Za-z]+)(\.?\s+)([IVXLCDM]+)\b('s)?(?!['\w-]|\.\d)")


def roman_value(numeral: str) -> int | None:
    """Value of a well-formed upper-case Roman numeral, None for anything else ("IIII", "VX", "")."""
    if not numeral or not _VALID.fullmatch(numeral):
        return None
    total = 0
    for i, ch in enumerate(numeral):
        value = _VALUES[ch]
        nxt = _VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < nxt else value
    return total


def _reading(before: str, numeral: str) -> str | None:
    value = roman_value(numeral)
    if value is None:
        return None
    if before.lower() in PART_WORDS:
        # A lone letter only after a capitalised part word: "Part I", "Type V", but "the book I read"
        # and "Type C" / "Appendix D" keep their letters.
        if len(numeral) >= 2 or (numeral in "IVX" and before[0].isupper()):
            return numbers.cardinal(value)
        return None
    is_name = len(before) >= 2 and before[0].isupper() and before[1:].islower()
    if is_name and numeral not in ACRONYMS and len(numeral) >= 2:
        return "the " + numbers.ordinal(value)
    return None


def expand_roman(text: str) -> str:
    """'chapter XIV' -> 'chapter fourteen', "Louis XIV's" -> "Louis the fourteenth's"."""

    def repl(m: re.Match[str]) -> str:
        reading = _reading(m.group(1), m.group(3))
        if reading is None:
            return m.group(0)
        return f"{m.group(1)}{m.group(2)}{reading}{m.group(4) or ''}"

    return _CANDIDATE_RE.sub(repl, text)

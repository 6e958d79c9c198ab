"""Street addresses: "1428 Elm St." -> "fourteen twenty-eight Elm Street", "CA 95051" -> "California
nine five zero five one", "Apt. 7B" -> "apartment 7B".

An address is recognised by its shape, a house number followed by an optional direction, one to three
street-name words (capitalised, or an ordinal such as "1st") and a street type ("St", "Ave", "Expy",
... any case, optional period).  Only then is "St" a street and "N" North: on its own "St. Louis"
stays a saint (see `tts.text.normalizer._expand_titles`).  House numbers are read as people say them:
in pairs ("2788" -> "twenty-seven eighty-eight", "123" -> "one twenty-three", "708" -> "seven zero
eight"); a state code becomes the state's name when a ZIP code follows it, or when it ends the
address after a city and is not also an English word ("OK", "IN", "ME"); ZIP codes are read digit by
digit.
"""

from __future__ import annotations

import re

from tts.text import number_words as numbers
from tts.text.abbreviations import DIRECTIONS, STATE_WORDS, STREET_TYPES, UNIT_DESIGNATORS, US_STATES
from tts.text.sentences import ends_sentence

_TYPE_ALT = "|".join(sorted(STREET_TYPES, key=len, reverse=True))
_DIR_ALT = "|".join(sorted(DIRECTIONS, key=len, reverse=True))
_NAME_WORD = r"(?:[A-Z][a-z]+|\d+(?:st|nd|rd|th))"
_ADDRESS_RE = re.compile(
    r"(?<![\w.,$-])(\d{1,6})\s+(?:(" + _DIR_ALT + r")\.?\s+)?((?:" + _NAME_WORD + r"\s+){1,3})"
    r"(?i:(" + _TYPE_ALT + r"))\b(\.)?"
)
_STATE_ZIP_RE = re.compile(r"\b([A-Z]{2}),?\s+(\d{5})(?:-(\d{4}))?\b")
_STATE_END_RE = re.compile(r"(?<=[a-z], )([A-Z]{2})\b(?=\s*(?:,|$|\.\s*$))")
_DESIGNATOR_RE = re.compile(r"\b(" + "|".join(UNIT_DESIGNATORS) + r")\.?\s*(?=#?\s*\w*\d)")


def house_number(digits: str) -> str:
    """'2788' -> 'twenty-seven eighty-eight', '123' -> 'one twenty-three', '708' -> 'seven zero eight',
    '500' -> 'five hundred', '1600' -> 'sixteen hundred'."""
    n = int(digits)
    if len(digits) <= 2 or digits.startswith("0"):
        return numbers.cardinal(digits)
    if len(digits) == 3 and digits.endswith("00"):
        return numbers.cardinal(digits)  # "500" -> "five hundred"
    if len(digits) == 3:
        pair = digits[1:]
        rest = numbers.digits(pair) if pair.startswith("0") else numbers.cardinal(pair)
        return f"{numbers.cardinal(digits[0])} {rest}"
    if len(digits) == 4:
        return numbers.year(n)
    return numbers.digits(digits)


def _address(text: str, m: re.Match[str]) -> str:
    number, direction, name, kind, period = m.groups()
    words = [house_number(number)]
    if direction:
        words.append(DIRECTIONS[direction])
    words.append(name.strip())
    words.append(STREET_TYPES[kind.lower()])
    # the period of "St." also ends the sentence when a capital (or the end of the text) follows
    end = "." if period and ends_sentence(text, m.end()) else ""
    return " ".join(words) + end


def expand_addresses(text: str) -> str:
    """House number + street, unit designators, state codes with ZIP codes (before the number passes)."""
    text = _ADDRESS_RE.sub(lambda m: _address(text, m), text)
    text = _DESIGNATOR_RE.sub(lambda m: UNIT_DESIGNATORS[m.group(1)] + " ", text)

    def state_zip(m: re.Match[str]) -> str:
        if m.group(1) not in US_STATES:
            return m.group(0)
        zip_words = numbers.digits(m.group(2)) + (f", {numbers.digits(m.group(3))}" if m.group(3) else "")
        return f"{US_STATES[m.group(1)]} {zip_words}"

    text = _STATE_ZIP_RE.sub(state_zip, text)
    return _STATE_END_RE.sub(
        lambda m: US_STATES[m.group(1)] if m.group(1) in US_STATES and m.group(1) not in STATE_WORDS else m.group(0),
        text,
    )

"""Dates: numeric dates, month names with days, quarters ("2Q22") and eras ("340 A.D.").

Years are left as digits for the normaliser's year pass ("January fifteenth, 2020" -> "... twenty
twenty"), except two-digit years, read here as their two digits' number ("11/17/05" -> "... zero
five", "01/07/98" -> "... ninety-eight").

A month with a leading zero before a four-digit year is a month and year ("09/2025").
Orders of numeric dates: year first is ISO (Y-M-D, also with / or .); otherwise the US order M/D/Y,
unless the first number cannot be a month (> 12) and the second can, which is D/M/Y ("15.01.2020" ->
"the fifteenth of January, 2020").  Month names are matched in any case and as abbreviations ("jul",
"SEPT.", "Jan-15"); a lower-case "may" is only a month before a year or after a day ("17 may 2010"),
never in "you may 5 times".
"""

from __future__ import annotations

import re

from tts.text import number_words as numbers
from tts.text.abbreviations import MONTH_FORMS, MONTHS
from tts.text.sentences import ends_sentence

_MONTH_ALT = "|".join(sorted(MONTH_FORMS, key=len, reverse=True))
_DAY = r"(0?[1-9]|[12]\d|3[01])"


def _month(word: str) -> str:
    return MONTHS[MONTH_FORMS[word.lower().rstrip(".")] - 1]


def _year(digits: str) -> str:
    """Four digits stay for the year pass; two digits are read here ('05' -> 'zero five')."""
    return digits if len(digits) == 4 else numbers.cardinal(digits)


def _month_first(month: int, day: int, year: str | None) -> str:
    return f"{MONTHS[month - 1]} {numbers.ordinal(day)}" + (f", {_year(year)}" if year else "")


def _day_first(day: int, month: int, year: str | None) -> str:
    return f"the {numbers.ordinal(day)} of {MONTHS[month - 1]}" + (f", {_year(year)}" if year else "")


_YMD_RE = re.compile(r"(?<![\w./-])(\d{4})([-/.])(0?[1-9]|1[0-2])\2" + _DAY + r"(?![\w]|[./-]\d)")
_XYZ_RE = re.compile(r"(?<![\w./-])(\d{1,2})([-/.])(\d{1,2})\2(\d{4}|\d{2})(?![\w]|[./-]\d)")


def _numeric(m: re.Match[str]) -> str:
    first, second, year = int(m.group(1)), int(m.group(3)), m.group(4)
    if m.group(2) == "." and len(year) == 2:  # "1.2.10" is a version number, not a date
        return m.group(0)
    if 1 <= first <= 12 and 1 <= second <= 31:
        return _month_first(first, second, year)
    if 13 <= first <= 31 and 1 <= second <= 12:
        return _day_first(first, second, year)
    return m.group(0)


# "09/2025": a month with its leading zero before a four-digit year (card expiry dates, issues);
# without the zero "1/2007" stays a fraction.
_MONTH_YEAR_RE = re.compile(r"(?<![\w./-])(0[1-9]|1[0-2])/(\d{4})(?![\w]|[./-]\d)")
_MONTH_DAY_RE = re.compile(
    r"\b(" + _MONTH_ALT + r")(\.?[\s-]+|\.)" + _DAY + r"(?:st|nd|rd|th)?\b(?![:.]\d|,\d)"
    r"(?:(,?[\s-]+)(\d{4})\b(?![:.,]?\d))?",
    re.IGNORECASE,
)
_DAY_MONTH_RE = re.compile(
    r"\b(the\s+)?" + _DAY + r"(?:st|nd|rd|th)?(?:\s+of)?\s+(" + _MONTH_ALT + r")\b(?:\.(?=,?\s+\d{4}))?(?:(,?\s+)(\d{4})\b(?![:.,]?\d))?",
    re.IGNORECASE,
)


# Month names that are also common English words: in lower case only a month when a year follows.
_WORD_MONTHS = frozenset({"may", "march", "mar"})


def _is_month(word: str, year: str | None) -> bool:
    return not (word.rstrip(".") in _WORD_MONTHS and year is None)


def _month_day(m: re.Match[str]) -> str:
    word, day, year = m.group(1), int(m.group(3)), m.group(5)
    if not _is_month(word, year):
        return m.group(0)
    return _month_first(MONTH_FORMS[word.lower()], day, year)


def _day_month(m: re.Match[str]) -> str:
    the, day, word, year = m.group(1), int(m.group(2)), m.group(3), m.group(5)
    if not _is_month(word, year):
        return m.group(0)
    reading = f"{numbers.ordinal(day)} of {_month(word)}" + (f", {_year(year)}" if year else "")
    return f"{the or 'the '}{reading}"


_QUARTER_RE = re.compile(r"\b([1-4])Q(\d{2}|\d{4})\b|\bQ([1-4])(?:\s+|')(\d{4}|\d{2})\b")
_ERA_RE = re.compile(r"(?<![\w.,])(\d{1,4})\s?(A\.?D|B\.?C\.?E|B\.?C|C\.?E)\b\.?")


def _era_year(digits: str) -> str:
    """340 -> 'three forty', 79 -> 'seventy-nine', 1066 -> 'ten sixty-six' (years said in pairs)."""
    if len(digits) == 3 and digits[1] != "0":
        return f"{numbers.cardinal(digits[0])} {numbers.cardinal(digits[1:])}"
    if len(digits) == 4:
        return numbers.year(int(digits))
    return numbers.cardinal(digits)


def expand_dates(text: str) -> str:
    """Numeric dates, then month-name dates, quarters and eras (before ranges, fractions, times)."""
    text = _YMD_RE.sub(lambda m: _month_first(int(m.group(3)), int(m.group(4)), m.group(1)), text)
    text = _XYZ_RE.sub(_numeric, text)
    text = _MONTH_YEAR_RE.sub(lambda m: f"{MONTHS[int(m.group(1)) - 1]} {m.group(2)}", text)
    text = _MONTH_DAY_RE.sub(_month_day, text)
    text = _DAY_MONTH_RE.sub(_day_month, text)

    def quarter(m: re.Match[str]) -> str:
        q, year = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        return f"the {numbers.ordinal(int(q))} quarter of {_year(year)}"

    text = _QUARTER_RE.sub(quarter, text)
    def era(m: re.Match[str]) -> str:
        # the period of "A.D." also ends the sentence at the end of the text or before a capital
        final = "." if m.group(0).endswith(".") and ends_sentence(text, m.end()) else ""
        return f"{_era_year(m.group(1))} {' '.join(m.group(2).replace('.', ''))}{final}"

    return _ERA_RE.sub(era, text)

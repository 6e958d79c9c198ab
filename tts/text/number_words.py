"""Number words for the normaliser, wrapping num2words in US-English reading style.

num2words' English output is British-flavoured for TTS purposes ("one hundred and five",
"one million, two hundred ..."): the commas would become pause symbols, so they are removed,
and "and" inside numbers is dropped (US style: "two thousand five").
"""

from __future__ import annotations

import re


def num2words(number: int, **kwargs: str) -> str:
    """num2words.num2words, imported on first use: ~20 ms of every start-up, and only text with numbers
    needs it (recipes.benchmark cold-start)."""
    from num2words import num2words as convert

    return convert(number, **kwargs)


DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# Longer digit strings are identifiers (account numbers, ids), read digit by digit ...
MAX_CARDINAL_DIGITS = 15
# ... unless grouped by thousands separators, which only quantities are: "124,444,234,854,823,834,553"
# is read in quintillions (num2words names groups up to 10^27).
MAX_GROUPED_DIGITS = 27


def _us_style(words: str) -> str:
    words = words.replace(",", "")
    words = re.sub(r"\band\s+", "", words)
    words = words.replace("oh-", "oh ")  # "nineteen oh-five" -> "nineteen oh five"
    return re.sub(r"\s+", " ", words).strip()


def digits(s: str) -> str:
    """'007' -> 'zero zero seven'."""
    return " ".join(DIGIT_WORDS[int(d)] for d in s if d.isdigit())


def cardinal(s: str | int) -> str:
    """Integer words; a string with a leading zero or too many digits is read digit by digit."""
    grouped = "," in str(s)
    text = str(s).replace(",", "")
    negative = text.startswith("-")
    text = text.lstrip("-")
    if len(text) > 1 and text.startswith("0") or len(text) > (MAX_GROUPED_DIGITS if grouped else MAX_CARDINAL_DIGITS):
        words = digits(text)
    else:
        words = _us_style(num2words(int(text)))
    return f"minus {words}" if negative else words


def decimal(s: str) -> str:
    """'3.14' -> 'three point one four', '.5' -> 'point five', '1,234.5' handled too."""
    text = s.replace(",", "")
    negative = text.startswith("-")
    text = text.lstrip("-")
    whole, _, frac = text.partition(".")
    parts = []
    if whole:
        parts.append(cardinal(whole) if not (len(whole) > 1 and whole.startswith("0")) else digits(whole))
    if frac:
        parts.append("point " + digits(frac))
    words = " ".join(parts)
    return f"minus {words}" if negative else words


def number(s: str) -> str:
    """Cardinal or decimal, whichever `s` is."""
    return decimal(s) if "." in s else cardinal(s)


def ordinal(n: int) -> str:
    """22 -> 'twenty-second', 103 -> 'one hundred third'."""
    return _us_style(num2words(n, to="ordinal"))


def ordinal_of(s: str) -> str:
    """Ordinal words of a digit string; one too long for a cardinal (an identifier) is read digit by digit
    with its last digit ordinal ('1234567890123456th' -> '... five sixth'), never through int(), which
    refuses strings over 4,300 digits."""
    if len(s) > MAX_CARDINAL_DIGITS:
        return f"{digits(s[:-1])} {ordinal(int(s[-1]))}"
    return ordinal(int(s))


def year(n: int) -> str:
    """1999 -> 'nineteen ninety-nine', 2005 -> 'two thousand five', 2019 -> 'twenty nineteen'."""
    return _us_style(num2words(n, to="year"))


def plural(words: str) -> str:
    """Pluralise the last word of a number reading: 'nineteen ninety' -> 'nineteen nineties'."""
    head, _, last = words.rpartition(" ")
    if "-" in last:  # "ninety-nine" -> "ninety-nines"
        prefix, _, last = last.rpartition("-")
        head = f"{head} {prefix}-".strip() if head else f"{prefix}-"
        sep = ""
    else:
        sep = " " if head else ""
    if last.endswith("y"):
        last = last[:-1] + "ies"
    elif last.endswith(("x", "s")):
        last += "es"
    else:
        last += "s"
    return f"{head}{sep}{last}"


def is_one(s: str) -> bool:
    """True when the number string means exactly one (singular units: '1 km', '1.0 kg' is plural)."""
    return s.replace(",", "").lstrip("+") == "1"

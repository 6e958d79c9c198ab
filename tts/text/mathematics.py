"""Mathematical and technical notation read as words, the normaliser's first pass (before `clean_characters`,
whose Unicode decomposition would turn "x²" into "x2" and drop "≥", "½" or an Arabic-Indic "٣").

    x ≥ 3 -> x greater than or equal to 3       5 ± 2 -> 5 plus or minus 2       6 ÷ 3 -> 6 divided by 3
    3 × 4 -> 3 times 4 (3 × 4 m: a dimension, read "by" later)                   ∞, π -> infinity, pi
    x² -> x squared, 10³ -> 10 cubed, 2⁸ -> 2 to the power of eight, 5 m² -> 5 m2 (the unit pass: square meters)
    ½ -> 1/2, 1½ -> 1 1/2 (the fraction pass: one and a half)     ٣, ۳, ३, ３ -> 3 (any Unicode decimal digit)
    6'2", 6′2″ -> 6 feet 2 inches, 5′ -> 5 feet, 30″ -> 30 inches, 40°26′46″ -> 40 degrees 26 minutes 46 seconds
    1e308 -> 1 times ten to the power of three hundred eight      10^9 -> 10 to the power of nine, x^2 -> x squared
    5 > 3 -> 5 greater than 3 (ASCII < > <= >= != only between numbers or between spaced operands)

Digits of the operands stay digits for the number passes (which know decimals, years, money); exponents are
written out here, where their reading is known (a power of 1999 is no year).
"""

from __future__ import annotations

import re
import unicodedata

from tts.text import number_words as numbers
from tts.text.abbreviations import UNITS

# Symbols whose reading does not depend on their neighbours.  (U+2260 "≠" is read by tts.text.cleaning.)
SYMBOL_READINGS: dict[str, str] = {
    "\u2265": "greater than or equal to", "\u2264": "less than or equal to", "\u2267": "greater than or equal to",
    "\u2266": "less than or equal to", "\u226b": "much greater than", "\u226a": "much less than",
    "\u2248": "approximately", "\u2245": "approximately equal to", "\u2243": "approximately equal to",
    "\u223c": "approximately", "\u2261": "is identical to", "\u221d": "proportional to",
    "\u00b1": "plus or minus", "\u2213": "minus or plus", "\u00f7": "divided by", "\u2219": "times",
    "\u22c5": "times", "\u221e": "infinity", "\u03c0": "pi", "\u03a0": "pi", "\u221a": "the square root of",
    "\u221b": "the cube root of", "\u2211": "the sum of", "\u220f": "the product of", "\u222b": "the integral of",
    "\u2202": "partial", "\u2206": "delta", "\u0394": "delta", "\u03b1": "alpha", "\u03b2": "beta",
    "\u03b3": "gamma", "\u03b4": "delta", "\u03b5": "epsilon", "\u03b8": "theta", "\u03bb": "lambda",
    "\u03c3": "sigma", "\u03a3": "sigma", "\u03c6": "phi", "\u03c9": "omega", "\u03a9": "omega",
    "\u2030": "per mille", "\u2192": "to", "\u21d2": "implies", "\u2190": "from", "\u2194": "to and from",
    "\u2220": "angle", "\u2208": "in", "\u2209": "not in", "\u2229": "intersection", "\u222a": "union",
    "\u2200": "for all", "\u2203": "there exists",
}
# Arabic-script number punctuation: the decimal separator, the thousands separator and the percent sign.
NUMBER_PUNCTUATION = {"\u066b": ".", "\u066c": ",", "\u066a": "%"}

_SUPERSCRIPTS = {"\u2070": "0", "\u00b9": "1", "\u00b2": "2", "\u00b3": "3", "\u2074": "4", "\u2075": "5",
                 "\u2076": "6", "\u2077": "7", "\u2078": "8", "\u2079": "9", "\u207b": "-", "\u207a": "+"}
_SUPERSCRIPT_RUN = re.compile("[" + "".join(_SUPERSCRIPTS) + "]+")
_UNIT_BEFORE = re.compile(r"\d\s?(?:" + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True)
                                                  if u.isalpha()) + r")$")
_VULGAR_FRACTION = re.compile("[\u00bc-\u00be\u2150-\u215e]")

_NUM = r"\d+(?:\.\d+)?"
_ARC = re.compile(r"(\d+)\s?\u00b0\s?(\d+)\s?['\u2032](?:\s?(" + _NUM + r")\s?(?:\"|\u2033|''))?")
_FEET_INCHES = re.compile(r"(?<![\w.'])(" + _NUM + r")\s?(?:'|\u2032)\s?(" + _NUM + r")\s?(\"|\u2033|'')?(?![\w'])")
_PRIME_ALONE = re.compile(r"(?<![\w.])(" + _NUM + r")\s?(\u2032|\u2033)(?![\w])")
_SCIENTIFIC = re.compile(r"(?<![\w.])(" + _NUM + r")[eE]([+-]?)(\d{1,4})(?![\w.])")
_POWER = re.compile(r"([A-Za-z0-9)\]])\s?(?:\^|\*\*)\s?([+-]?)(\d{1,4})(?![\w.])")
_TIMES_DIMENSION = re.compile(r"(\d)\s?\u00d7\s?(?=" + _NUM + r"\s?[A-Za-z])")
_COMPARISON_WORDS = {"<": "less than", ">": "greater than", "<=": "less than or equal to",
                     ">=": "greater than or equal to", "!=": "not equal to", "<>": "not equal to"}
_COMPARISON_DIGITS = re.compile(r"(?<=\d)\s?(<=|>=|!=|<>|<|>)\s?(?=[-+]?\.?\d)")
_COMPARISON_SPACED = re.compile(r"(?<=[\w)])\s(<=|>=|!=|<>|<|>)\s(?=[-+(\w])")


def expand_math(text: str) -> str:
    """See the module docstring."""
    text = _ascii_digits(text)
    text = _ARC.sub(_arc_words, text)
    text = _FEET_INCHES.sub(_feet_inches_words, text)
    text = _PRIME_ALONE.sub(lambda m: f"{m.group(1)} {_unit_word(m.group(1), 'foot' if m.group(2) == chr(0x2032) else 'inch')}",
                            text)
    text = _SUPERSCRIPT_RUN.sub(_superscript_words, text)
    text = _VULGAR_FRACTION.sub(_fraction_digits, text)
    text = _SCIENTIFIC.sub(lambda m: f"{m.group(1)} times ten {_power(m.group(2), m.group(3))}", text)
    text = _POWER.sub(lambda m: f"{m.group(1)} {_power(m.group(2), m.group(3))}", text)
    text = _TIMES_DIMENSION.sub(r"\1 x ", text)  # "3 × 4 m": the dimension pass reads "by"
    text = text.replace("\u00d7", " times ")
    text = _COMPARISON_DIGITS.sub(lambda m: f" {_COMPARISON_WORDS[m.group(1)]} ", text)
    text = _COMPARISON_SPACED.sub(lambda m: f" {_COMPARISON_WORDS[m.group(1)]} ", text)
    return "".join(f" {SYMBOL_READINGS[c]} " if c in SYMBOL_READINGS else NUMBER_PUNCTUATION.get(c, c) for c in text)


def _ascii_digits(text: str) -> str:
    """Every Unicode decimal digit (Arabic-Indic, Devanagari, fullwidth, ...) as its ASCII digit."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(c)) if not c.isascii() and unicodedata.category(c) == "Nd" else c
                   for c in text)


def _unit_word(value: str, unit: str) -> str:
    plural = {"foot": "feet", "inch": "inches", "degree": "degrees", "minute": "minutes", "second": "seconds"}
    return unit if value == "1" else plural[unit]


def _arc_words(m: re.Match[str]) -> str:
    words = f"{m.group(1)} {_unit_word(m.group(1), 'degree')} {m.group(2)} {_unit_word(m.group(2), 'minute')}"
    return words + (f" {m.group(3)} {_unit_word(m.group(3), 'second')}" if m.group(3) else "") + " "


def _feet_inches_words(m: re.Match[str]) -> str:
    """6'2" / 6′2″ / 6'2: a height.  Without an inch mark only when the foot mark is the prime (′) or an apostrophe
    right after the digits with digits right after it ("6'2"): "the 1990's" has letters, never digits."""
    return f"{m.group(1)} {_unit_word(m.group(1), 'foot')} {m.group(2)} {_unit_word(m.group(2), 'inch')}"


def _superscript_words(m: re.Match[str]) -> str:
    """A run of superscript digits: after a unit of a quantity ("5 m²") the unit pass's own "m2" (square
    meters); else squared, cubed, or to the power of N."""
    digits = "".join(_SUPERSCRIPTS[c] for c in m.group(0))
    if _UNIT_BEFORE.search(m.string, 0, m.start()) and digits in ("2", "3"):
        return digits
    sign, value = (digits[0], digits[1:]) if digits[0] in "+-" else ("", digits)
    return " " + _power(sign, value) if value else " "


def _power(sign: str, exponent: str) -> str:
    if not sign and exponent == "2":
        return "squared"
    if not sign and exponent == "3":
        return "cubed"
    return f"to the power of {'minus ' if sign == '-' else ''}{numbers.cardinal(int(exponent))}"


def _fraction_digits(m: re.Match[str]) -> str:
    """½ -> "1/2" for the fraction pass, spaced from a whole number before it ("1½" -> "1 1/2")."""
    fraction = unicodedata.normalize("NFKD", m.group(0)).replace("\u2044", "/")
    before = m.string[m.start() - 1 : m.start()]
    return (" " if before.isdigit() else "") + fraction + " "

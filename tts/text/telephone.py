"""Telephone numbers, US social-security numbers and IPv4 addresses, read as digit groups.

Groups are separated by commas, which the G2P turns into short pauses: "(555) 123-4567" ->
"five five five, one two three, four five six seven", as people read numbers out.

Shapes recognised (anything else is left to the number passes):
- North-American numbers, with an optional country code ("+1", "+44", or a bare "1"), the area code
  bare or in brackets, separators space . or -, and an optional "-1234" extension;
- vanity toll-free numbers "1-800-GO-U-HAUL" (800 is said "eight hundred"; letter groups are kept);
- a 7-digit local number "555-1234": a first group starting 2-9 and a four-digit second group that
  is not round (ranges such as "200-1500" / "300-2000" end in 00) and not followed by a unit;
- other international numbers: "+" and a 1-3 digit country code, then 2-5 groups of digits separated
  by spaces or hyphens ("+44 20 7946 0958");
- a number of 4+ digits after a word that announces an identifier ("card ending in 8876", "PIN 1234",
  "extension 2045", "order number 2019"): digit by digit, never a year or a quantity;
- "123-45-6789" (SSN shape) and four dot-separated groups of 1-3 digits (an IPv4 address, read
  digit by digit joined by "dot"; version strings have other shapes).
"""

from __future__ import annotations

import re

from tts.text import number_words as numbers
from tts.text.abbreviations import UNITS

_TOLL_FREE = {"800": "eight hundred"}

_VANITY_RE = re.compile(
    r"(?<![\w+-])(\+?1)-(8(?:00|88|77|66|55|44|33))-((?:[A-Z0-9]+-)*[A-Z0-9]*[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*)(?![\w-])"
)
_NANP_RE = re.compile(
    r"(?<![\w+-])(?:(\+\d{1,3}|1)(?:[ .-]|(?=\())?)?(?:\((\d{3})\)[ .-]?|(\d{3})[ .-])(\d{3})[.-](\d{4})(?:-(\d{1,4}))?(?![\w-]|[.,]\d)"
)
_INTERNATIONAL_RE = re.compile(r"(?<![\w+])\+(\d{1,3})((?:[ -]\d{1,5}){2,5})(?![\w-]|[.,]\d)")
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_LOCAL_RE = re.compile(r"(?<![\w.,+$£€-])([2-9]\d{2})-(\d{2}(?!00)\d{2})(?![\w-]|[.,]\d|\s?(?:" + _UNIT_ALT + r")\b)")
_SSN_RE = re.compile(r"(?<![\w.-])(\d{3})-(\d{2})-(\d{4})(?![\w-]|[.,]\d)")
_CUE_RE = re.compile(
    r"\b((?i:ending in|ends in|ending with|pin(?: code)?|extension|ext\.|account(?: number| no\.?)?|"
    r"card number|order number|reference number|confirmation number|zip(?: code)?)|ID)\s*(#?)\s*(\d{4,})\b(?![.,]\d)"
)
_IPV4_RE = re.compile(r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)")


def _country(code: str | None) -> list[str]:
    if not code:
        return []
    words = numbers.digits(code)
    return [f"plus {words}" if code.startswith("+") else words]


def _vanity(m: re.Match[str]) -> str:
    parts = _country(m.group(1)) + [_TOLL_FREE.get(m.group(2), numbers.digits(m.group(2)))]
    tail = " ".join(numbers.digits(g) if g.isdigit() else g for g in m.group(3).split("-"))
    return ", ".join([*parts, tail])


def _nanp(m: re.Match[str]) -> str:
    country, bracketed, bare, exchange, line, ext = m.groups()
    groups = _country(country) + [numbers.digits(g) for g in (bracketed or bare, exchange, line, ext) if g]
    return ", ".join(groups)


def expand_telephone(text: str) -> str:
    """Phone numbers, SSNs and IPv4 addresses to digit words (before dates, ranges and decimals)."""
    text = _VANITY_RE.sub(_vanity, text)
    text = _NANP_RE.sub(_nanp, text)
    text = _INTERNATIONAL_RE.sub(
        lambda m: ", ".join([f"plus {numbers.digits(m.group(1))}", *(numbers.digits(g) for g in re.split(r"[ -]", m.group(2)) if g)]),
        text,
    )
    text = _CUE_RE.sub(lambda m: f"{m.group(1)} {numbers.digits(m.group(3))}", text)
    text = _SSN_RE.sub(lambda m: ", ".join(numbers.digits(g) for g in m.groups()), text)
    text = _LOCAL_RE.sub(lambda m: ", ".join(numbers.digits(g) for g in m.groups()), text)
    return _IPV4_RE.sub(lambda m: " dot ".join(numbers.digits(g) for g in m.groups()), text)

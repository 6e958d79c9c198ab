"""English text normalisation: numbers, money, dates, times, units and abbreviations to words.

`normalize(text)` runs a fixed sequence of small regex passes (`PASSES`).  Order matters and is
the main design decision here:

1. characters are cleaned first (accents transliterated, emoji/CJK/control dropped with a
   warning, see `tts.text.cleaning`), so every later pattern sees ASCII (+ £ € ¢ °);
2. abbreviations next, so "No. 5" / "Jan. 5" become "number 5" / "January 5" for the number passes;
3. patterns that give digits a *special* reading (phone numbers, dates, ranges, money, percent,
   times, units, decades, ordinals, years, fractions) run before the generic cardinal/decimal
   pass, which reads whatever digits are left;
4. punctuation is tidied last.  The pause marks , . ? ! ; : and the dash " - " are KEPT (they
   become pause symbols); brackets become commas, quotes are dropped.

Word case is preserved for words of the input (the G2P spells unknown all-caps acronyms);
generated words are lowercase.  Heuristics worth knowing (each documented at its pass): a bare
4-digit number 1100-2099 is read as a year; "Dr."/"St." are "doctor"/"saint" unless they follow
a capitalised word and precede none ("Elm St." -> "street"); "a.m."/"p.m." become "a m"/"p m"
(letters the G2P spells).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tts.text import number_words as numbers
from tts.text.abbreviations import (
    CURRENCIES,
    LATIN,
    MONEY_SCALES,
    MONTHS,
    SENTENCE_ABBREVIATIONS,
    STREET_READINGS,
    SYMBOL_WORDS,
    TITLES,
    UNITS,
)
from tts.text.cleaning import clean_characters

# A number as written: "5", "1,234", "3.14", ".5", "1,234.50".
NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
MONTH_ALT = "|".join(MONTHS)

# True where a sentence may end right after position: end of text, or space + capital letter.
_SENTENCE_END_AHEAD = re.compile(r"\s*$|\s+[\"']?[A-Z]")


def _ends_sentence(text: str, pos: int) -> bool:
    return _SENTENCE_END_AHEAD.match(text, pos) is not None


# --------------------------------------------------------------------------------------------
# 1. characters and whitespace
# --------------------------------------------------------------------------------------------
def _collapse_whitespace(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------
# 2. abbreviations
# --------------------------------------------------------------------------------------------
# Short titles are also written without a period ("Mr Smith"); the rest need theirs.
_BARE_TITLES = ("Mrs", "Mr", "Ms", "Dr", "St")
_TITLE_RE = re.compile(
    r"\b(?:(" + "|".join(_BARE_TITLES) + r")\b\.?|("
    + "|".join(t for t in TITLES if t not in _BARE_TITLES) + r")\.)(?=\s|$)"
)
_WORD_BEFORE_RE = re.compile(r"([A-Za-z]+)\W*$")


def _expand_titles(text: str) -> str:
    """Mr. Mrs. Dr. St. ... -> mister missus doctor saint; 'Elm St.' -> 'Elm street'.

    The title reading is chosen when a capitalised word follows ("Dr. Smith", "St. Louis");
    the street reading when none follows and a capitalised word precedes ("Elm Dr.",
    "Main St. is closed").  A street reading keeps its period if it ends the sentence.
    """

    def repl(m: re.Match[str]) -> str:
        abbr = m.group(1) or m.group(2)
        after = text[m.end():]
        # A period at the very end of the text is also the sentence end.
        final = "." if m.group(0).endswith(".") and re.match(r"\s*$", after) else ""
        name_follows = re.match(r"\s+[A-Z]", after) is not None
        before = _WORD_BEFORE_RE.search(text[: m.start()])
        cap_before = before is not None and before.group(1)[0].isupper()
        if abbr in STREET_READINGS and cap_before and not name_follows:
            return STREET_READINGS[abbr] + final
        return TITLES[abbr] + final

    return _TITLE_RE.sub(repl, text)


_SENTENCE_ABBR_RE = re.compile(r"\b(" + "|".join(SENTENCE_ABBREVIATIONS) + r")\.")


def _expand_sentence_abbreviations(text: str) -> str:
    """etc. Jr. Inc. Ave. Jan.-Dec. ...; the period survives when it also ends the sentence."""

    def repl(m: re.Match[str]) -> str:
        word = SENTENCE_ABBREVIATIONS[m.group(1)]
        return word + ("." if _ends_sentence(text, m.end()) else "")

    return _SENTENCE_ABBR_RE.sub(repl, text)


_LATIN_RE = re.compile(
    r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(LATIN, key=len, reverse=True)) + r")(?![\w.])",
    re.IGNORECASE,
)


def _expand_latin(text: str) -> str:
    """e.g. -> for example, i.e. -> that is, vs. -> versus (these never end a sentence)."""
    return _LATIN_RE.sub(lambda m: LATIN[m.group(1).lower()], text)


_INITIALISM_RE = re.compile(r"(?<![\w.])((?:[A-Za-z]\.){2,})(?![\w])")


def _expand_initialisms(text: str) -> str:
    """'U.S.A.' -> 'U S A' (single letters, which the G2P spells); the final period is kept
    when it also ends the sentence.  Runs after e.g./i.e., which are read as words."""

    def repl(m: re.Match[str]) -> str:
        letters = " ".join(m.group(1).replace(".", ""))
        return letters + ("." if _ends_sentence(text, m.end()) else "")

    return _INITIALISM_RE.sub(repl, text)


def _expand_number_sign(text: str) -> str:
    """'No. 5' / 'no. 5' / '#5' -> 'number 5' (only before digits: 'No.' alone is the word no)."""
    text = re.sub(r"\b[Nn]o\.\s*(?=\d)", "number ", text)
    return re.sub(r"#\s*(?=\d)", "number ", text)


# --------------------------------------------------------------------------------------------
# 3. digits with a special reading
# --------------------------------------------------------------------------------------------
_PHONE_RE = re.compile(r"(?<![\w-])(?:\+?(1)[ .-])?\(?(\d{3})\)?[ .-](\d{3})[.-](\d{4})(?![\w-])")


def _expand_phone_numbers(text: str) -> str:
    """'(555) 123-4567', '555-123-4567', '1-800-555-1234' -> digit groups separated by commas (pauses).

    Seven-digit '555-1234' is deliberately not matched: it is indistinguishable from a range
    such as '100-1000' and is read as one ('five hundred fifty-five to ...')."""
    return _PHONE_RE.sub(lambda m: ", ".join(numbers.digits(g) for g in m.groups() if g), text)


def _date_words(year: str, month: int, day: int) -> str:
    return f"{MONTHS[month - 1]} {numbers.ordinal(day)}, {year}"


_ISO_DATE_RE = re.compile(r"\b(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")
_US_DATE_RE = re.compile(r"\b(0?[1-9]|1[0-2])/(0?[1-9]|[12]\d|3[01])/(\d{4})\b")


def _expand_numeric_dates(text: str) -> str:
    """2020-01-15 and 1/15/2020 (US order) -> 'January fifteenth, 2020' (year read later)."""
    text = _ISO_DATE_RE.sub(lambda m: _date_words(m.group(1), int(m.group(2)), int(m.group(3))), text)
    return _US_DATE_RE.sub(lambda m: _date_words(m.group(3), int(m.group(1)), int(m.group(2))), text)


_MONTH_DAY_RE = re.compile(r"\b(" + MONTH_ALT + r")\s+(0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?\b(?![:.,]?\d)")
_DAY_MONTH_RE = re.compile(r"\b(0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?\s+(" + MONTH_ALT + r")\b")


def _expand_month_days(text: str) -> str:
    """'March 3' -> 'March third'; '3 March' / '3rd March' -> 'the third of March'."""
    text = _MONTH_DAY_RE.sub(lambda m: f"{m.group(1)} {numbers.ordinal(int(m.group(2)))}", text)
    return _DAY_MONTH_RE.sub(lambda m: f"the {numbers.ordinal(int(m.group(1)))} of {m.group(2)}", text)


_RANGE_RE = re.compile(r"(?<![\w.,-])(" + NUM + r")-(" + NUM + r")(?![\d-])")


def _expand_ranges(text: str) -> str:
    """'10-20' -> '10 to 20', '1990-1995' -> '1990 to 1995'; the numbers are read by later passes
    (so '10-20 km' still gets its unit, and years stay years)."""
    return _RANGE_RE.sub(r"\1 to \2", text)


def _expand_negatives(text: str) -> str:
    """'-5' -> 'minus 5' when the minus is not inside a word or range ('COVID-19' is left alone)."""
    return re.sub(r"(?<![\w.,)-])-(?=[$£€]?\.?\d)", "minus ", text)


# Not right after a number: in "10€ 5 times" the € belongs to the 10 (_MONEY_AFTER_RE), not to the 5.
_MONEY_RE = re.compile(
    r"(?<![\d.])(?<![\d.] )([$£€])\s?(" + NUM + r")(?:\s?(" + "|".join(MONEY_SCALES) + r")\b)?"
)
_MONEY_AFTER_RE = re.compile(r"(?<![\w.])(" + NUM + r")\s?([€£¢])")


def _money_words(symbol: str, amount: str, scale: str | None) -> str:
    major1, major_n, minor1, minor_n = CURRENCIES[symbol]
    if scale:  # "$1.2 million" -> "one point two million dollars"
        return f"{numbers.number(amount)} {MONEY_SCALES[scale]} {major_n}"
    whole, _, frac = amount.replace(",", "").partition(".")
    if len(frac) > 2:  # "$1.234" is not dollars-and-cents
        return f"{numbers.decimal(amount)} {major_n}"
    cents = int(frac.ljust(2, "0")) if frac else 0
    parts = []
    # string tests, not int(whole): a 5,000-digit amount passes Python's int-from-string digit limit
    if whole.strip("0") or cents == 0:
        one = whole.lstrip("0") == "1"
        parts.append(f"{numbers.cardinal(whole or '0')} {major1 if one else major_n}")
    if cents:
        parts.append(f"{numbers.cardinal(cents)} {minor1 if cents == 1 else minor_n}")
    return " and ".join(parts)


def _expand_money(text: str) -> str:
    """$5 -> five dollars, $5.50 -> five dollars and fifty cents, $1.2 million, £3, €10, 10€, 5¢."""
    text = _MONEY_RE.sub(lambda m: _money_words(m.group(1), m.group(2), m.group(3)), text)

    def after(m: re.Match[str]) -> str:
        if m.group(2) == "¢":
            return f"{numbers.number(m.group(1))} {'cent' if numbers.is_one(m.group(1)) else 'cents'}"
        return _money_words(m.group(2), m.group(1), None)

    return _MONEY_AFTER_RE.sub(after, text)


def _expand_percent(text: str) -> str:
    """45% -> forty-five percent, 3.5% -> three point five percent."""
    return re.sub(r"(?<![\w.])(" + NUM + r")\s?%", lambda m: f"{numbers.number(m.group(1))} percent", text)


_TIME_RE = re.compile(
    r"(?<![\w:.])([01]?\d|2[0-4]):([0-5]\d)(?::([0-5]\d))?(?![\d:])"
    r"(?:\s?([AaPp])\.?\s?[Mm]\b(\.)?)?"
)
_HOUR_AMPM_RE = re.compile(r"(?<![\w:.])(1[0-2]|0?[1-9])\s?([AaPp])\.?\s?[Mm]\b(\.)?")


def _ampm(letter: str | None, period: str | None, text: str, end: int) -> str:
    """' a m' / ' p m' (letters, spelled by the G2P); the period of 'p.m.' may also end the sentence."""
    if not letter:
        return ""
    keep = "." if period and _ends_sentence(text, end) else ""
    return f" {letter.lower()} m{keep}"


def _expand_times(text: str) -> str:
    """3:30 pm -> three thirty p m; 12:00 -> twelve o'clock; 3:05 -> three oh five; 7 a.m. -> seven a m."""

    def clock(m: re.Match[str]) -> str:
        hour, minute, second = int(m.group(1)), m.group(2), m.group(3)
        suffix = _ampm(m.group(4), m.group(5), text, m.end())
        words = numbers.cardinal(hour)
        if minute == "00":
            if not suffix and second is None:
                words += " o'clock" if hour <= 12 else " hundred"
        elif minute.startswith("0"):
            words += " oh " + numbers.cardinal(minute[1])
        else:
            words += " " + numbers.cardinal(minute)
        if second is not None and second != "00":
            words += f" and {numbers.cardinal(int(second))} {'second' if second == '01' else 'seconds'}"
        return words + suffix

    text = _TIME_RE.sub(clock, text)
    return _HOUR_AMPM_RE.sub(
        lambda m: numbers.cardinal(int(m.group(1))) + _ampm(m.group(2), m.group(3), text, m.end()), text
    )


_UNIT_RE = re.compile(
    r"(?<![\w.])(" + NUM + r")\s?("
    + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
    + r")(?![\w/])"
)


def _expand_units(text: str) -> str:
    """'5 km' / '5km' -> 'five kilometers', '1 kg' -> 'one kilogram'; only right after a number."""

    def repl(m: re.Match[str]) -> str:
        singular, plural = UNITS[m.group(2)]
        return f"{numbers.number(m.group(1))} {singular if numbers.is_one(m.group(1)) else plural}"

    return _UNIT_RE.sub(repl, text)


def _expand_decades(text: str) -> str:
    """1990s -> nineteen nineties, 1900s -> nineteen hundreds, '90s / 90s -> nineties."""
    text = re.sub(
        r"\b(1[1-9]\d0|20\d0)'?s\b", lambda m: numbers.plural(numbers.year(int(m.group(1)))), text
    )
    return re.sub(
        r"(?<![\w'])'?([1-9]0)'?s\b", lambda m: numbers.plural(numbers.cardinal(m.group(1))), text
    )


def _expand_ordinals(text: str) -> str:
    """1st -> first, 22nd -> twenty-second, 103rd -> one hundred third."""
    return re.sub(
        r"\b(\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th|ST|ND|RD|TH)\b",
        lambda m: numbers.ordinal_of(m.group(1).replace(",", "")),
        text,
    )


def _split_letters_digits(text: str) -> str:
    """'mp3' -> 'mp 3', '3D' -> '3 D' so both halves are read (after unit/ordinal passes)."""
    return re.sub(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])", " ", text)


def _expand_years(text: str) -> str:
    """A bare 4-digit number 1000-2099 is read as a year: 1999 -> nineteen ninety-nine,
    2005 -> two thousand five, 2019 -> twenty nineteen.  Write "1,999" for the cardinal."""
    return re.sub(
        r"(?<![\w.,])(1\d\d\d|20\d\d)(?![\w]|[.,]\d)", lambda m: numbers.year(int(m.group(1))), text
    )


_FRACTION_RE = re.compile(r"(?<![\w/.])(?:(\d+)\s+)?(\d+)/(\d+)(?![\w/])")


def _fraction_words(numerator: int, denominator: int) -> str:
    if denominator == 2:
        name = "half" if numerator == 1 else "halves"
    elif denominator == 4:
        name = "quarter" if numerator == 1 else "quarters"
    else:
        name = numbers.ordinal(denominator) + ("" if numerator == 1 else "s")
    return f"{numbers.cardinal(numerator)} {name}"


def _expand_fractions(text: str) -> str:
    """1/2 -> one half, 3/4 -> three quarters, 2 1/2 -> two and one half (proper fractions with
    denominators 2-10); any other a/b -> 'a slash b' ('24/7' is not twenty-four sevenths)."""

    def repl(m: re.Match[str]) -> str:
        whole, num, den = m.group(1), int(m.group(2)), int(m.group(3))
        if 2 <= den <= 10 and (num < den or whole):
            words = _fraction_words(num, den)
            return f"{numbers.cardinal(whole)} and {words}" if whole else words
        prefix = f"{whole} " if whole else ""
        return f"{prefix}{num} slash {den}"

    return _FRACTION_RE.sub(repl, text)


# --------------------------------------------------------------------------------------------
# 4. whatever digits are left, symbols, punctuation
# --------------------------------------------------------------------------------------------
def _expand_numbers(text: str) -> str:
    """Remaining numbers: '1,234' -> one thousand two hundred thirty-four, '3.14' -> three point
    one four, '007' -> zero zero seven; '2.0.1' / '192.168.0.1' -> groups joined by 'dot'."""
    text = re.sub(
        r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d])",
        lambda m: " dot ".join(numbers.cardinal(g) for g in m.group(0).split(".")),
        text,
    )
    return re.sub(r"(?<!\d)" + NUM + r"(?!\d)", lambda m: numbers.number(m.group(0)), text)


def _expand_symbols(text: str) -> str:
    """& @ + = % ° -> words; '/' between words -> 'slash'; other currency signs are dropped."""
    for sym, word in SYMBOL_WORDS.items():
        text = text.replace(sym, f" {word} ")
    text = text.replace("/", " slash ")
    return re.sub(r"[$£€¢]", " ", text)


def _tidy_punctuation(text: str) -> str:
    """Keep , . ? ! ; : and ' - ' as pause marks; brackets -> commas; drop everything else."""
    text = re.sub(r"[()\[\]{}]", ",", text)
    text = re.sub(r"\.{2,}", ".", text)  # ellipsis -> one sentence pause
    text = re.sub(r"\s*-{2,}\s*", " - ", text)  # "--" is a dash
    # Hyphens inside words stay ("well-known"); any other hyphen is a spaced dash.
    text = re.sub(r"(?<![A-Za-z])-|-(?![A-Za-z])", " - ", text)
    # Apostrophes only inside/at the edge of a word ("don't", "'em", "dogs'"); quotes go.
    text = re.sub(r"(?<![A-Za-z])'(?![A-Za-z])", " ", text)
    text = re.sub(r"[^A-Za-z' ,.?!;:-]", " ", text)
    # A run of marks keeps its strongest: a sentence end if there is one, else the first mark.
    text = re.sub(r"[,.?!;:-](?:\s*[,.?!;:-])+", _strongest_mark, text)
    text = re.sub(r"\s+([,.?!;:])", r"\1", text)
    text = re.sub(r"([,.?!;:])(?=[A-Za-z'])", r"\1 ", text)
    text = _collapse_whitespace(text)
    return re.sub(r"^[\s,.?!;:-]+", "", text)  # nothing to pause for before the first word


def _strongest_mark(m: re.Match[str]) -> str:
    marks = [c for c in m.group(0) if not c.isspace()]
    for c in marks:
        if c in ".?!":
            return c
    return " - " if marks[0] == "-" else marks[0]


# The pipeline.  Each pass takes and returns text; see the module docstring for the order.
PASSES: tuple[Callable[[str], str], ...] = (
    clean_characters,
    _collapse_whitespace,
    _expand_titles,
    _expand_sentence_abbreviations,
    _expand_latin,
    _expand_initialisms,
    _expand_number_sign,
    _expand_phone_numbers,
    _expand_numeric_dates,
    _expand_month_days,
    _expand_ranges,
    _expand_negatives,
    _expand_money,
    _expand_percent,
    _expand_times,
    _expand_units,
    _expand_decades,
    _expand_ordinals,
    _split_letters_digits,
    _expand_years,
    _expand_fractions,
    _expand_numbers,
    _expand_symbols,
    _tidy_punctuation,
)


def normalize(text: str) -> str:
    """Spoken-form English: every digit and symbol written out, pause punctuation kept.

    >>> normalize("Dr. Smith paid $5.50 on Jan. 3rd, 2019 at 3:30 pm.")
    'doctor Smith paid five dollars and fifty cents on January third, twenty nineteen at three thirty p m.'
    """
    for step in PASSES:
        text = step(text)
    return text

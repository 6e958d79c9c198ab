"""English text normalisation: numbers, money, dates, times, units, addresses, URLs and abbreviations to words.

`normalize(text)` runs a fixed sequence of small regex passes (`PASSES`).  Order matters and is
the main design decision here:

0. mathematical notation is read first, before anything decomposes its characters (`tts.text.mathematics`:
   ≥ ± ÷ × ∞ π, superscripts, ½, primes, 1e308, 10^9, any Unicode decimal digit);
1. characters are cleaned next (accents transliterated, emoji/CJK/control dropped with a
   warning, see `tts.text.cleaning`), so every later pattern sees ASCII (+ currency and degree signs);
2. whole tokens whose punctuation belongs to them are read next, before anything splits them:
   e-mails/URLs/domains (`tts.text.electronic`), phone numbers and other digit strings
   (`tts.text.telephone`), street addresses (`tts.text.addresses`);
3. abbreviations, so "No. 5" / "Jan. 5" become "number 5" / "January 5" for the number passes;
   then Roman numerals (`tts.text.roman`) and dates (`tts.text.dates`);
4. patterns that give digits a *special* reading (ranges, money, percent, times, units, decades,
   fractions, ordinals, years) run before the generic cardinal/decimal pass, which reads whatever
   digits are left;
5. punctuation is tidied last.  The pause marks , . ? ! ; : and the dash " - " are KEPT (they
   become pause symbols); brackets become commas, quotes are dropped.

Word case is preserved for words of the input (the G2P spells unknown all-caps acronyms);
generated words are lowercase, except spelled letters (capitals separated by spaces, "W W W") and
names (months, street types).  Heuristics worth knowing (each documented at its pass): a bare
4-digit number 1100-2099 is read as a year; "Dr."/"St." are "doctor"/"saint" unless they follow
a capitalised word and precede none ("Elm St." -> "street") or follow a house number; "a.m."/"p.m."
become "a m"/"p m" (letters the G2P spells); a bare number of 5+ digits not ending in 00 is an
identifier read digit by digit; a hyphen between two numbers is a range ("to").
How this compares with NVIDIA's NeMo normaliser: `python -m recipes.peers.measure_nemo` and
docs/results/text_normalisation.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tts.text import number_words as numbers
from tts.text.abbreviations import (
    CURRENCIES,
    DOLLAR_PREFIXES,
    LATIN,
    MONEY_SCALES,
    PER_UNITS,
    SENTENCE_ABBREVIATIONS,
    STREET_READINGS,
    SYMBOL_WORDS,
    TITLES,
    UNITS,
)
from tts.text.addresses import expand_addresses
from tts.text.cleaning import clean_characters
from tts.text.dates import expand_dates
from tts.text.electronic import expand_electronic
from tts.text.mathematics import expand_math
from tts.text.roman import expand_roman
from tts.text.sentences import ends_sentence
from tts.text.telephone import expand_telephone

# A number as written: "5", "1,234", "3.14", ".5", "1,234.50".
NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"

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
        return word + ("." if ends_sentence(text, m.end()) else "")

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
        return letters + ("." if ends_sentence(text, m.end()) else "")

    return _INITIALISM_RE.sub(repl, text)


def _expand_number_sign(text: str) -> str:
    """'No. 5' / 'no. 5' / '#5' -> 'number 5' (only before digits: 'No.' alone is the word no)."""
    text = re.sub(r"\b[Nn]o\.\s*(?=\d)", "number ", text)
    return re.sub(r"#\s*(?=\d)", "number ", text)


# --------------------------------------------------------------------------------------------
# 3. digits with a special reading
# --------------------------------------------------------------------------------------------
# Numbers, money amounts and times as a range's ends ("10-20", "$5-$10", "2pm-5pm", "1960s-80s").
_MONEY_NUM = r"(?:US)?[$£€¥₩₹]?" + NUM
_RANGE_RE = re.compile(r"(?<![\w.,-])(" + _MONEY_NUM + r"(?:'?s)?)-(" + _MONEY_NUM + r"(?:'?s)?)(?![\d-]|\.\d)")
_CLOCK = r"\d{1,2}(?::\d{2})?\s?[AaPp]\.?[Mm]\.?|\d{1,2}:\d{2}"
_TIME_RANGE_RE = re.compile(r"(?<![\w:.])(" + _CLOCK + r")\s?-\s?(" + _CLOCK + r")(?![\w:])")
_UNIT_AHEAD_RE = re.compile(
    r"\s?(?:" + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True)) + r")(?![\w])"
)


_EQUATION_MINUS_RE = re.compile(r"(?<![\w.,-])(" + NUM + r")\s?-\s?(" + NUM + r")(?=\s?=)")


def _expand_ranges(text: str) -> str:
    """'10-20' -> '10 to 20', '$5-$10' -> '$5 to $10', '2pm-5pm' -> '2pm to 5pm'; the numbers are read by
    later passes (so '10-20 km' still gets its unit, and years stay years).

    Scores read the same way ('won 3-1' -> 'three to one').  In an equation the hyphen is a minus
    ('1-2=5').  Before a unit a four-digit end is a quantity, not a year: '1234-123kg' -> 'one thousand
    two hundred thirty-four to ...'."""
    text = _TIME_RANGE_RE.sub(r"\1 to \2", text)
    text = _EQUATION_MINUS_RE.sub(r"\1 minus \2", text)

    def repl(m: re.Match[str]) -> str:
        first, second = m.group(1), m.group(2)
        unit_follows = _UNIT_AHEAD_RE.match(text, m.end()) is not None
        if unit_follows:  # "1,234" is read as a cardinal by the number passes, never as a year
            first, second = (f"{int(x):,}" if re.fullmatch(r"\d{4}", x) else x for x in (first, second))
        return f"{first} to {second}"

    return _RANGE_RE.sub(repl, text)


def _expand_negatives(text: str) -> str:
    """'-5' -> 'minus 5' when the minus is not inside a word or range ('COVID-19' is left alone)."""
    return re.sub(r"(?<![\w.,)-])-(?=[$£€¥₩₹]?\.?\d)", "minus ", text)


_CURRENCY_SIGNS = "".join(CURRENCIES)
_PER_RE = r"(?:\s?/\s?([A-Za-z]+)\b)?"
# Not right after a number: in "10€ 5 times" the € belongs to the 10 (_MONEY_AFTER_RE), not to the 5.
_MONEY_RE = re.compile(
    r"(?<![\d.])(?<![\d.] )(?:\b(" + "|".join(sorted(DOLLAR_PREFIXES, key=len, reverse=True)) + r")(?=\$))?"
    r"([" + _CURRENCY_SIGNS + r"])\s?(" + NUM + r")(?:\s?(" + "|".join(MONEY_SCALES) + r")\b)?" + _PER_RE
)
_MONEY_AFTER_RE = re.compile(r"(?<![\w.])(" + NUM + r")\s?([€£¢])" + _PER_RE)


def _per(token: str | None) -> str | None:
    """'mo' -> 'per month', 'kg' -> 'per kilogram'; None when the token is no known unit."""
    if token is None:
        return None
    if token in PER_UNITS or token.lower() in PER_UNITS:
        return "per " + PER_UNITS.get(token, PER_UNITS.get(token.lower(), ""))
    if token in UNITS:
        return "per " + UNITS[token][0]
    return None


def _money_words(symbol: str, amount: str, scale: str | None, prefix: str | None = None) -> str:
    major1, major_n, minor1, minor_n = CURRENCIES[symbol]
    if prefix:  # "US$5" -> "five US dollars"
        major1, major_n = f"{DOLLAR_PREFIXES[prefix]} {major1}", f"{DOLLAR_PREFIXES[prefix]} {major_n}"
    if scale:  # "$1.2 million" -> "one point two million dollars"
        return f"{numbers.number(amount)} {MONEY_SCALES[scale]} {major_n}"
    whole, _, frac = amount.replace(",", "").partition(".")
    if len(frac) > 2 and not frac[2:].strip("0"):  # "$20.500" is twenty dollars fifty
        frac = frac[:2]
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


def _with_rate(words: str, m: re.Match[str], token: str | None) -> str:
    """The amount + 'per month' for '$20/mo'; an unknown '/token' is left as written."""
    if token is None:
        return words
    rate = _per(token)
    return f"{words} {rate}" if rate else words + m.group(0)[m.group(0).rindex("/"):]


def _expand_money(text: str) -> str:
    """$5 -> five dollars, $5.50 -> five dollars and fifty cents, $1.2 million, £3, €10, ¥30b, 10€, 5¢,
    US$5 -> five US dollars, $20/mo -> twenty dollars per month."""
    text = _MONEY_RE.sub(
        lambda m: _with_rate(_money_words(m.group(2), m.group(3), m.group(4), m.group(1)), m, m.group(5)), text
    )

    def after(m: re.Match[str]) -> str:
        if m.group(2) == "¢":
            words = f"{numbers.number(m.group(1))} {'cent' if numbers.is_one(m.group(1)) else 'cents'}"
        else:
            words = _money_words(m.group(2), m.group(1), None)
        return _with_rate(words, m, m.group(3))

    return _MONEY_AFTER_RE.sub(after, text)


def _expand_percent(text: str) -> str:
    """45% -> forty-five percent, 3.5% -> three point five percent."""
    return re.sub(r"(?<![\w.])(" + NUM + r")\s?%", lambda m: f"{numbers.number(m.group(1))} percent", text)


_AMPM = r"(?:\s?([AaPp])\.?\s?[Mm]\b(\.)?)"
# A time zone after the time or its a.m./p.m. ("1:59 p.m. est", "p.m.EST", "e.s.t"): spelled.
_ZONE = r"(?:\s?(?i:((?:[ecmp]\.?[sd]|g\.?m|u\.?t\.?c|b\.?s|c\.?e)\.?t?\.?))(?![\w]))?"
_TIME_RE = re.compile(
    r"(?<![\w:.])([01]?\d|2[0-4]):([0-5]\d)(?::([0-5]\d))?(?![\d:])" + _AMPM + "?" + _ZONE
)
_HOUR_AMPM_RE = re.compile(r"(?<![\w:.])(1[0-2]|0?[1-9])" + _AMPM + _ZONE)
_DOTTED_TIME_RE = re.compile(r"(?<![\w:.])(1[0-2]|0?[1-9])\.([0-5]\d)(?=\s?[AaPp]\.?\s?[Mm]\b)")
_ZONES = frozenset({"est", "edt", "cst", "cdt", "mst", "mdt", "pst", "pdt", "gmt", "utc", "bst", "cet"})


def _ampm(letter: str | None, period: str | None, zone: str | None, text: str, end: int) -> str:
    """' a m' / ' p m' (letters, spelled by the G2P) and a spelled zone; the period of 'p.m.' may also end
    the sentence."""
    words = f" {letter.lower()} m" if letter else ""
    zone_letters = (zone or "").replace(".", "").lower()
    if zone_letters in _ZONES:
        words += " " + " ".join(zone_letters.upper())
    elif zone:
        return ""  # not a zone: the caller keeps its text
    keep = "." if (period or (zone or "").endswith(".")) and ends_sentence(text, end) else ""
    return words + keep


def _give_back(m: re.Match[str], group: int) -> str:
    """The text of `group` to the end of the match, with the space before it (a word that is no zone)."""
    start = m.start(group)
    return m.string[start - (start > 0 and m.string[start - 1].isspace()): m.end()]


def _duration_part(value: int, unit: str) -> str:
    return f"{numbers.cardinal(value)} {unit if value == 1 else unit + 's'}"


def _expand_times(text: str) -> str:
    """3:30 pm -> three thirty p m; 12:00 -> twelve o'clock; 3:05 -> three oh five; 7 a.m. -> seven a m;
    14:10:30 -> fourteen hours ten minutes and thirty seconds; 1.59 p.m. EST -> one fifty-nine p m E S T."""
    text = _DOTTED_TIME_RE.sub(r"\1:\2", text)

    def clock(m: re.Match[str]) -> str:
        hour, minute, second = int(m.group(1)), m.group(2), m.group(3)
        zone = m.group(6)
        if zone and zone.replace(".", "").lower() not in _ZONES:
            zone = None  # a word after the time, not a zone: give it back
        suffix = _ampm(m.group(4), m.group(5), zone, text, m.end())
        tail = "" if zone or not m.group(6) else _give_back(m, 6)
        if second is not None:  # with seconds it is read as hours, minutes and seconds
            words = (f"{_duration_part(hour, 'hour')} {_duration_part(int(minute), 'minute')} and "
                     f"{_duration_part(int(second), 'second')}")
            return words + suffix + tail
        words = numbers.cardinal(hour)
        if minute == "00":
            if not suffix:
                words += " o'clock" if hour <= 12 else " hundred"
        elif minute.startswith("0"):
            words += " oh " + numbers.cardinal(minute[1])
        else:
            words += " " + numbers.cardinal(minute)
        return words + suffix + tail

    text = _TIME_RE.sub(clock, text)

    def hour_only(m: re.Match[str]) -> str:
        zone = m.group(4)
        if zone and zone.replace(".", "").lower() not in _ZONES:
            return numbers.cardinal(int(m.group(1))) + _ampm(m.group(2), m.group(3), None, text, m.end()) + \
                _give_back(m, 4)
        return numbers.cardinal(int(m.group(1))) + _ampm(m.group(2), m.group(3), zone, text, m.end())

    return _HOUR_AMPM_RE.sub(hour_only, text)


_UNIT_ALT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_SCALE_WORDS = "thousand|million|billion|trillion"
_UNIT_RE = re.compile(
    r"(?<![\w.])(" + NUM + r")(?:\s(" + _SCALE_WORDS + r"))?\s?(" + _UNIT_ALT + r")"
    r"(?:\s?/\s?([A-Za-z]+))?(?![\w/])"
)
# "12/kg" (a rate without a unit on top), "4 1/2 lbs" (a fraction of a unit), "2x8 m2" (dimensions)
_BARE_RATE_RE = re.compile(r"(?<![\w./])(" + NUM + r")\s?/\s?(" + _UNIT_ALT + r")(?![\w/])")
_FRACTION_UNIT_RE = re.compile(r"(?<![\w./])(?:(\d+)\s+)?(\d+)/(\d+)\s?(" + _UNIT_ALT + r")(?![\w/])")
_DIMENSION_RE = re.compile(r"(?<![\w.])(" + NUM + r")\s?[xX]\s?(?=" + NUM + r"\s?(?:" + _UNIT_ALT + r")(?![\w/]))")
# "3 cc/s": a number, a one- or two-letter token and a slash with another short token is a rate of
# unknown units ("3 tcp/ip bugs", with a longer first token, is not)
_TOKEN_RATE_RE = re.compile(
    r"(?<![\w.])(" + NUM + r")\s?([A-Za-z]{1,2})/([A-Za-z]{1,3})(?![\w/])"
)


def _expand_units(text: str) -> str:
    """'5 km' / '5km' -> 'five kilometers', '1 kg' -> 'one kilogram', '5 m/s' -> 'five meters per second',
    '12kg/kg' -> 'twelve kilograms per kilogram', '100 million kg', '4 1/2 lbs' -> 'four and a half
    pounds', '2x8 m2' -> 'two by eight square meters'; units are read only right after a number."""

    def repl(m: re.Match[str]) -> str:
        amount, scale, unit, denominator = m.groups()
        rate = _per(denominator)
        if denominator is not None and rate is None:
            return m.group(0)  # "5 m/xyz": not a rate we can read
        singular, plural = UNITS[unit]
        words = numbers.number(amount) + (f" {scale}" if scale else "")
        words += " " + (singular if numbers.is_one(amount) and not scale else plural)
        return words + (f" {rate}" if rate else "")

    def fraction(m: re.Match[str]) -> str:
        whole, num, den, unit = m.groups()
        if int(den) == 0:
            return m.group(0)
        words = _fraction_reading(whole, int(num), int(den))
        singular, plural = UNITS[unit]
        return f"{words} {singular if not whole and int(num) == 1 else plural}"

    text = _DIMENSION_RE.sub(r"\1 by ", text)
    text = _FRACTION_UNIT_RE.sub(fraction, text)
    text = _UNIT_RE.sub(repl, text)
    text = _BARE_RATE_RE.sub(lambda m: f"{numbers.number(m.group(1))} per {UNITS[m.group(2)][0]}", text)
    return _TOKEN_RATE_RE.sub(lambda m: f"{numbers.number(m.group(1))} {m.group(2)} per {m.group(3)}", text)


def _expand_decades(text: str) -> str:
    """1990s -> nineteen nineties, 1900s -> nineteen hundreds, '90s / 90s -> nineties."""
    text = re.sub(
        r"\b(1[1-9]\d0|20\d0)(?:'?s| s)\b", lambda m: numbers.plural(numbers.year(int(m.group(1)))), text
    )
    return re.sub(
        r"(?<![\w'])'?([1-9]0)'?s\b", lambda m: numbers.plural(numbers.cardinal(m.group(1))), text
    )


def _ordinal_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _expand_ordinals(text: str) -> str:
    """1st -> first, 22nd -> twenty-second, 103rd -> one hundred third; a suffix that does not fit the
    number is read as written ('21th' -> 'twenty-one t h': we do not guess which was the typo)."""

    def repl(m: re.Match[str]) -> str:
        digits, suffix = m.group(1).replace(",", ""), m.group(2)
        if len(digits) <= numbers.MAX_CARDINAL_DIGITS and _ordinal_suffix(int(digits)) != suffix.lower():
            return f"{numbers.cardinal(digits)} {' '.join(suffix.lower())}"
        return numbers.ordinal_of(digits)

    return re.sub(r"\b(\d{1,3}(?:,\d{3})+|\d+)(st|nd|rd|th|ST|ND|RD|TH)\b", repl, text)


def _split_letters_digits(text: str) -> str:
    """'mp3' -> 'mp 3', '3D' -> '3 D', 'V.2' -> 'V .2' so both halves are read (after unit/ordinal passes)."""
    return re.sub(r"(?<=[A-Za-z])(?=\.?\d)|(?<=\d)(?=[A-Za-z])", " ", text)


def _expand_years(text: str) -> str:
    """A bare 4-digit number 1000-2099 is read as a year: 1999 -> nineteen ninety-nine,
    2005 -> two thousand five, 2019 -> twenty nineteen.  Write "1,999" for the cardinal."""
    return re.sub(
        r"(?<![\w.,])(1\d\d\d|20\d\d)(?![\w]|[.,]\d)", lambda m: numbers.year(int(m.group(1))), text
    )


# Spaces around the slash only between two numbers ("1795 / 1805"); a denominator may carry an
# ordinal suffix ("1/4th", "1/3RD").  Not after a letter or hyphen: "PDP-11/24" is a model name.
_FRACTION_RE = re.compile(
    r"(?<![\w/.-])(?:(\d+)\s+)?(\d+)(\s?/\s?)(\d+)(?:st|nd|rd|th|ST|ND|RD|TH)?(?![\w/]|\.\d)"
)
# Number pairs with a slash that are names, not fractions.
FRACTION_IDIOMS: dict[str, str] = {"24/7": "twenty-four seven", "9/11": "nine eleven", "50/50": "fifty-fifty",
                                   "20/20": "twenty-twenty", "7/11": "seven eleven"}


_ACRONYM_BEFORE_RE = re.compile(r"\b[A-Z]{2,}\s$")


def _fraction_words(numerator: int, denominator: int, article: bool = False) -> str:
    """3/4 -> 'three quarters', 31/32 -> 'thirty-one thirty-seconds', 142/1 -> 'one hundred forty-two over
    one'; `article`: a numerator of one is 'a' ('two and a half')."""
    if denominator == 1:
        return f"{numbers.cardinal(numerator)} over one"
    if denominator == 2:
        name = "half" if numerator == 1 else "halves"
    elif denominator == 4:
        name = "quarter" if numerator == 1 else "quarters"
    else:
        name = numbers.ordinal_of(str(denominator)) + ("" if numerator == 1 else "s")
    count = "a" if article and numerator == 1 else numbers.cardinal(numerator)
    return f"{count} {name}"


def _fraction_reading(whole: str | None, numerator: int, denominator: int) -> str:
    if whole:
        return f"{numbers.cardinal(whole)} and {_fraction_words(numerator, denominator, article=True)}"
    return _fraction_words(numerator, denominator)


def _expand_fractions(text: str) -> str:
    """1/2 -> one half, 3/4 -> three quarters, 2 1/2 -> two and a half, 1/4th -> one quarter, 22/3 ->
    twenty-two thirds; '24/7' and a few other idioms are read as said; right after an acronym a/b is a
    model number ('PDP 11/70' -> 'eleven slash seventy').  Dates with a year were read before, so what
    is left of the form a/b is a fraction."""

    def repl(m: re.Match[str]) -> str:
        whole, num, slash, den = m.group(1), m.group(2), m.group(3), m.group(4)
        if not whole and _ACRONYM_BEFORE_RE.search(text, 0, m.start()):
            return f"{num} slash {den}"  # "PDP 11/70": a model number after an acronym
        if f"{num}/{den}" in FRACTION_IDIOMS and slash == "/":
            return (f"{whole} " if whole else "") + FRACTION_IDIOMS[f"{num}/{den}"]
        if len(num) > numbers.MAX_CARDINAL_DIGITS or len(den) > numbers.MAX_CARDINAL_DIGITS or int(den) == 0:
            return f"{whole + ' ' if whole else ''}{num} slash {den}"
        return _fraction_reading(whole, int(num), int(den))

    return _FRACTION_RE.sub(repl, text)


# --------------------------------------------------------------------------------------------
# 4. whatever digits are left, symbols, punctuation
# --------------------------------------------------------------------------------------------
_IDENTIFIER_RE = re.compile(r"(?<![\d.,])(?<!minus )\d{5,}(?<!00)(?![\d]|[.,]\d)")
_QUANTITY_CUE_RE = re.compile(
    r"\b(?:about|around|approximately|roughly|nearly|almost|over|under|than|exactly|some|total|of)\s+$", re.IGNORECASE
)


def _expand_numbers(text: str) -> str:
    """Remaining numbers: '1,234' -> one thousand two hundred thirty-four, '3.14' -> three point
    one four, '007' -> zero zero seven; '2.0.1' -> groups joined by 'dot'.

    A run of five or more digits written without thousands separators and not ending in 00 is an
    identifier (ZIP code, account or order number: '95051' -> 'nine five zero five one'); '20000',
    '20,000', negative numbers and numbers after a word of quantity ('about 30999') stay quantities."""
    text = re.sub(
        r"(?<![\d.])\d+(?:\.\d+){2,}(?![\d])",
        lambda m: " dot ".join(numbers.cardinal(g) for g in m.group(0).split(".")),
        text,
    )
    text = _IDENTIFIER_RE.sub(
        lambda m: m.group(0) if _QUANTITY_CUE_RE.search(text, 0, m.start()) else numbers.digits(m.group(0)), text
    )
    return re.sub(r"(?<!\d)" + NUM + r"(?!\d)", lambda m: numbers.number(m.group(0)), text)


def _expand_symbols(text: str) -> str:
    """& @ + = % ° -> words; '/' between words -> 'slash'; other currency signs are dropped."""
    text = re.sub(r"\b(and|or)/(or|and)\b", r"\1 \2", text)  # "and/or" is said "and or"
    for sym, word in SYMBOL_WORDS.items():
        text = text.replace(sym, f" {word} ")
    text = text.replace("/", " slash ")
    return re.sub(r"[" + _CURRENCY_SIGNS + r"¢]", " ", text)


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
    expand_math,
    clean_characters,
    _collapse_whitespace,
    expand_electronic,
    expand_telephone,
    expand_addresses,
    _expand_titles,
    _expand_sentence_abbreviations,
    _expand_latin,
    _expand_initialisms,
    _expand_number_sign,
    expand_roman,
    expand_dates,
    _expand_ranges,
    _expand_negatives,
    _expand_money,
    _expand_percent,
    _expand_times,
    _expand_units,
    _expand_decades,
    _expand_fractions,
    _expand_ordinals,
    _split_letters_digits,
    _expand_years,
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

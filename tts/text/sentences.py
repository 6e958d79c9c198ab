"""Sentence splitting for long input, so each piece fits a model's length limit.

A split happens after . ? or ! (plus closing quotes/brackets) followed by whitespace and a
sentence-like start (capital letter, digit, quote, bracket), except after:
- titles and other abbreviations that precede more of the sentence ("Dr. Smith", "e.g. Apples",
  "No. 5", "Jan. 5"),
- single-letter initials and dotted initialisms ("J. K. Rowling", "the U.S. President"): a
  missed split only makes a longer piece, a wrong one breaks a sentence's prosody.
Two abbreviations often end a sentence and do split before a capital: "a.m."/"p.m." ("It opens at
9 a.m. Come early.") and a street type after a house number ("She lived at 1428 Elm St. It was
old."), while "St. Louis" and "Dr. Smith" stay titles.
"3.5", "www.example.com/a.b" and "j.doe@example.com" never split: no whitespace follows their
periods.  Blank lines always split.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tts.text.abbreviations import MONTHS, STREET_TYPES, TITLES

# Lowercased words whose period never ends a sentence.
_NEVER_FINAL = frozenset({t.lower() for t in TITLES} | {"e.g", "i.e", "cf", "vs", "viz", "approx"})
# ... and these only when a number follows ("No. 5", "Jan. 5", "pp. 10").
_BEFORE_NUMBER = frozenset(
    {"no", "nos", "pp", "p", "vol", "fig", "ch", "sec", "sept"} | {m[:3].lower() for m in MONTHS}
)

_CANDIDATE_RE = re.compile(r"[.?!]+[\"')\]]*(?=\s+(\S))")
_TOKEN_BEFORE_RE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_INITIALISM_RE = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]|[A-Z]")
# A word that is a URL, e-mail address or domain name: a "/" or "@", or a dotted label of 2+ characters
# beside another label ("example.com"; "U.S" and "e.g" have single-letter labels only).
_ADDRESS_WORD_RE = re.compile(r"[/@]|\w\w\.\w|\w\.\w\w")
# Times of day: "a.m." / "p.m." end a sentence when a capital follows.
_CLOCK_SUFFIXES = frozenset({"a.m", "p.m"})
# "... 1428 Elm St." : a house number and capitalised street name before a street type.
_HOUSE_LOOKBACK = 120  # characters: a house number, a direction and up to three street-name words
_HOUSE_BEFORE_RE = re.compile(r"\d+[A-Za-z]?\s+(?:[NSEW]\.?\s+)?(?:(?:[A-Z][a-z]+|\d+(?:st|nd|rd|th))\s+){1,3}$")


# True where a sentence may end right after a position: end of text, or space + capital letter.
_SENTENCE_END_AHEAD = re.compile(r"\s*$|\s+[\"']?[A-Z]")


def ends_sentence(text: str, pos: int) -> bool:
    """Whether a period just before `pos` can also end the sentence (the normaliser keeps it as a pause)."""
    return _SENTENCE_END_AHEAD.match(text, pos) is not None


def _word_start(text: str, end: int) -> int:
    """Index of the first character of the run of non-space characters that ends at `end`."""
    i = end
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return i


def _is_split(text: str, m: re.Match[str]) -> bool:
    nxt = m.group(1)
    if not (nxt[0].isupper() or nxt[0].isdigit() or nxt[0] in "\"'(["):
        return False
    if not m.group(0).startswith("."):
        return True  # ? and ! always end a sentence
    # every look back stays within the word (or the few words of an address) before the period: searching
    # from the text's start would make splitting a long document quadratic in its length
    start = _word_start(text, m.start())
    before = _TOKEN_BEFORE_RE.search(text, start, m.start())
    if before is None:
        return True
    token = before.group(1)
    word = text[start : m.start()]
    if _ADDRESS_WORD_RE.search(word):
        return True  # a URL, e-mail or domain ends here ("... at www.example.com/a.b. It ...")
    if token.lower() in _CLOCK_SUFFIXES:
        return nxt[0].isupper()
    if token.lower() in STREET_TYPES and _HOUSE_BEFORE_RE.search(text, max(0, before.start() - _HOUSE_LOOKBACK),
                                                                    before.start()):
        return True
    if token.lower() in _NEVER_FINAL or _INITIALISM_RE.fullmatch(token):
        return False
    return not (token.lower() in _BEFORE_NUMBER and nxt[0].isdigit())


_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def _paragraphs(text: str) -> Iterator[str]:
    start = 0
    for m in _PARAGRAPH_BREAK.finditer(text):
        yield text[start : m.start()]
        start = m.end()
    yield text[start:]


def iter_sentences(text: str) -> Iterator[str]:
    """The sentences of `split_sentences`, one at a time as they are found: the first sentence of a long document
    comes after reading that sentence, not the document (the speech of a 5 MB text starts at once)."""
    for paragraph in _paragraphs(text):
        start = 0
        for m in _CANDIDATE_RE.finditer(paragraph):
            if _is_split(paragraph, m):
                sentence = " ".join(paragraph[start : m.end()].split())
                if sentence:
                    yield sentence
                start = m.end()
        sentence = " ".join(paragraph[start:].split())
        if sentence:
            yield sentence


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, stripped, in order; empty pieces are dropped."""
    return list(iter_sentences(text))

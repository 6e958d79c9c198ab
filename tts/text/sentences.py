"""Sentence splitting for long input, so each piece fits a model's length limit.

A split happens after . ? or ! (plus closing quotes/brackets) followed by whitespace and a
sentence-like start (capital letter, digit, quote, bracket), except after:
- titles and other abbreviations that precede more of the sentence ("Dr. Smith", "e.g. Apples",
  "No. 5", "Jan. 5"),
- single-letter initials and dotted initialisms ("J. K. Rowling", "the U.S. President"): a
  missed split only makes a longer piece, a wrong one breaks a sentence's prosody.
"3.5" never splits because no whitespace follows its period.  Blank lines always split.
"""

from __future__ import annotations

import re

from tts.text.abbreviations import MONTHS, TITLES

# Lowercased words whose period never ends a sentence.
_NEVER_FINAL = frozenset({t.lower() for t in TITLES} | {"e.g", "i.e", "cf", "vs", "viz", "approx"})
# ... and these only when a number follows ("No. 5", "Jan. 5", "pp. 10").
_BEFORE_NUMBER = frozenset(
    {"no", "nos", "pp", "p", "vol", "fig", "ch", "sec", "sept"} | {m[:3].lower() for m in MONTHS}
)

_CANDIDATE_RE = re.compile(r"[.?!]+[\"')\]]*(?=\s+(\S))")
_TOKEN_BEFORE_RE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_INITIALISM_RE = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]|[A-Z]")


def _is_split(text: str, m: re.Match[str]) -> bool:
    nxt = m.group(1)
    if not (nxt[0].isupper() or nxt[0].isdigit() or nxt[0] in "\"'(["):
        return False
    if not m.group(0).startswith("."):
        return True  # ? and ! always end a sentence
    before = _TOKEN_BEFORE_RE.search(text, 0, m.start())
    if before is None:
        return True
    token = before.group(1)
    if token.lower() in _NEVER_FINAL or _INITIALISM_RE.fullmatch(token):
        return False
    return not (token.lower() in _BEFORE_NUMBER and nxt[0].isdigit())


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, stripped, in order; empty pieces are dropped."""
    sentences: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        start = 0
        for m in _CANDIDATE_RE.finditer(paragraph):
            if _is_split(paragraph, m):
                sentences.append(paragraph[start : m.end()])
                start = m.end()
        sentences.append(paragraph[start:])
    return [s for s in (" ".join(p.split()) for p in sentences) if s]

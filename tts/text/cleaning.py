"""Character-level cleaning, the first normalisation pass.

After this pass the text contains only printable ASCII plus the few non-ASCII symbols that later
passes turn into words (currency and degree signs).  Accented letters are transliterated
(é -> e) with Unicode decomposition; typographic punctuation is mapped to ASCII.  Everything
else that cannot be spoken (emoji, CJK, control characters, ...) is dropped, and a warning
names what was dropped, so a dataset builder sees it instead of silently training on holes.
"""

from __future__ import annotations

import logging
import unicodedata

logger = logging.getLogger(__name__)

# Non-ASCII characters kept because a later pass reads them (money, units).
KEPT_SYMBOLS = frozenset("£€¢°¥₩₹")

# Typographic punctuation and letters that Unicode decomposition does not reduce to ASCII.
# En dash becomes "-" (the range/dash pass decides between "to" and a pause); em dash and the
# horizontal bar are always a pause.
CHAR_MAP: dict[str, str] = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"', "\u2033": '"',
    "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-",
    "\u2014": " - ", "\u2015": " - ",
    "\u2026": "...",
    "\u00d7": " x ", "\u2044": "/", "\u00a0": " ", "\u2009": " ", "\u202f": " ",
    "\u00df": "ss", "\u00e6": "ae", "\u00c6": "AE", "\u0153": "oe", "\u0152": "OE",
    "\u00f8": "o", "\u00d8": "O", "\u0142": "l", "\u0141": "L", "\u0111": "d", "\u0110": "D",
    "\u00f0": "d", "\u00d0": "D", "\u00fe": "th", "\u00de": "Th", "\u0131": "i",
    "\u00bf": "", "\u00a1": "",
    # NFKD would give "=" (+ a combining overlay): read as "equals", the opposite of what it says
    "\u2260": " not equal to ",
    # the masculine ordinal sign stands for a degree sign in "45º" far more often than for "nº"
    "\u00ba": "\u00b0",
}

# Whitespace-like control characters become spaces; other controls are dropped.
WHITESPACE_CONTROLS = frozenset("\t\n\r\v\f")


def clean_characters(text: str) -> str:
    """Transliterate accents, map typographic punctuation, drop unspeakable characters.

    Dropped characters (anything not printable ASCII and not in KEPT_SYMBOLS after
    transliteration) are reported in one logged warning per call.
    """
    # NFC first: a decomposed accent ("e" + U+0301) becomes one letter, transliterated as a whole
    mapped = "".join(CHAR_MAP.get(ch, ch) for ch in unicodedata.normalize("NFC", text))
    kept: list[str] = []
    dropped: list[str] = []
    for ch in mapped:
        if ch in WHITESPACE_CONTROLS:
            kept.append(" ")
        elif _invisible(ch):
            continue  # inside a word ("re\u00adsume", "Hel\u200blo"): a space here would split it
        elif " " <= ch <= "~" or ch in KEPT_SYMBOLS:
            kept.append(ch)
        else:
            ascii_form = _transliterate(ch)
            if ascii_form:
                kept.append(ascii_form)
            else:
                dropped.append(ch)
                kept.append(" ")  # keep word separation: "a🙂b" must not become "ab"
    if dropped:
        shown = "".join(dict.fromkeys(dropped))
        logger.warning(
            "dropped %d unspeakable character(s) from text: %s",
            len(dropped),
            ", ".join(f"{c!r} (U+{ord(c):04X})" for c in shown[:20]),
        )
    return "".join(kept)


def _invisible(ch: str) -> bool:
    """Characters that are no glyph of their own: format characters (zero-width space and joiners, soft
    hyphen, BOM, direction marks), combining marks left over after NFC, and DEL (a deleted byte, found
    inside words).  Other control characters stay reported drops that separate words."""
    return ch == "\x7f" or unicodedata.category(ch) in ("Cf", "Mn", "Me")


def _transliterate(ch: str) -> str:
    """ASCII form of one character via NFKD (é -> e, ﬁ -> fi, ² -> 2), or "" if there is none."""
    decomposed = unicodedata.normalize("NFKD", ch)
    ascii_part = "".join(c for c in decomposed if " " <= c <= "~")
    # Only accept a decomposition whose remainder is combining marks; otherwise the
    # character is something else (e.g. a symbol) and its ASCII fragment would be misleading.
    rest = [c for c in decomposed if not (" " <= c <= "~")]
    # A mark on a symbol changes what it says (U+2260 is "=" + an overlay): only letters and digits keep theirs.
    if ascii_part and all(unicodedata.category(c).startswith("M") for c in rest) and (not rest or ascii_part.isalnum()):
        return ascii_part
    return ""

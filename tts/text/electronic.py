"""E-mail addresses, URLs and bare domain names read symbol by symbol ("user at example dot com").

Runs before every other pass, on cleaned text, so that no later pass sees the pieces of an address:
without it "www.example.com/path" lost its dots to the sentence splitter and "/" became a fraction.

What counts as an address (deliberately strict, a false match reads ordinary prose as symbols):
- an e-mail: `local@domain.tld`;
- a URL with a scheme (`https://`, `file:///`, ...) or starting `www.`;
- a bare domain: two or more dot-separated lowercase labels, the first of 2+ characters containing a
  letter, the last 2-4 letters ("nvidia.com", "test2.uk"); "e.g", "p.m" and "3.14" do not qualify.
A trailing sentence mark ("... at example.com.") is left outside the address.

Reading: symbols by name (dot, slash, colon, at, dash, underscore, ...); digit runs digit by digit
("asdf123" -> "asdf one two three"), except a round number of hundreds or thousands ("rtx-6000"
-> "six thousand", as product names are said); a letter run is a word when it can be said as one,
and spelled (space-separated capitals, which the G2P spells) when it has no vowel or is at most two
letters long ("www", "sm", "de"); a few file extensions have a spoken name ("jpg" -> "jpeg").
"""

from __future__ import annotations

import re

from tts.text import number_words as numbers

SYMBOL_NAMES: dict[str, str] = {
    ".": "dot", "/": "slash", ":": "colon", "@": "at", "-": "dash", "_": "underscore", "&": "ampersand",
    "~": "tilde", "?": "question mark", "=": "equals", "#": "hash", "%": "percent", "+": "plus",
}
# Letter runs said as a word although the general rule would spell them, or said differently.
SPOKEN_PARTS: dict[str, str] = {"jpg": "jpeg", "com": "com", "org": "org", "net": "net", "gov": "gov"}
# Letter runs spelled although they look sayable (schemes, well-known acronyms of addresses).
SPELLED_PARTS = frozenset({"http", "https", "ftp", "html", "htm", "php", "xml", "pdf", "www", "abc", "asp"})

_PATH = r"(?:/[^\s\"'<>()\[\]]*)?"
_EMAIL_RE = re.compile(r"(?<![\w.@&+-])[\w.%+&-]*\w@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+" + _PATH)
_URL_RE = re.compile(r"(?<![\w@/])(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[^\s\"'<>()\[\]]+", re.IGNORECASE)
_DOMAIN_RE = re.compile(
    r"(?<![\w@./:-])(?=[a-z0-9-]*[a-z])[a-z0-9][a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,4}" + _PATH + r"(?![\w@])"
)
_TRAILING_MARKS = ".,;:!?"
_PIECE_RE = re.compile(r"[A-Za-z]+|\d+|.", re.DOTALL)


def _letters(run: str) -> str:
    low = run.lower()
    if low in SPOKEN_PARTS:
        return SPOKEN_PARTS[low]
    if low in SPELLED_PARTS or len(low) <= 2 or not re.search(r"[aeiouy]", low):
        return " ".join(low.upper())
    return low


def _digits(run: str) -> str:
    if len(run) <= 6 and run[0] != "0" and re.fullmatch(r"[1-9]0{2,}", run):
        return numbers.cardinal(run)
    return numbers.digits(run)


def read_address(address: str) -> str:
    """Spoken form of one e-mail address, URL or domain."""
    words = []
    for piece in _PIECE_RE.findall(address):
        if piece.isalpha():
            words.append(_letters(piece))
        elif piece.isdigit():
            words.append(_digits(piece))
        elif not piece.isspace():
            words.append(SYMBOL_NAMES.get(piece, ""))
    return " ".join(w for w in words if w)


def _replace(pattern: re.Pattern[str], text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        found = m.group(0)
        core = found.rstrip(_TRAILING_MARKS) if not found.endswith("/") else found
        if core.count("(") == 0 and core.endswith(")"):
            core = core[:-1]
        if not core:
            return found
        # pad with spaces: the spoken form must not glue onto neighbouring words
        return f" {read_address(core)} " + found[len(core):]

    return pattern.sub(repl, text)


def expand_electronic(text: str) -> str:
    """E-mails first (their domain is part of them), then URLs, then bare domains."""
    for pattern in (_EMAIL_RE, _URL_RE, _DOMAIN_RE):
        text = _replace(pattern, text)
    return text

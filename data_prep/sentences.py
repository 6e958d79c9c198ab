"""English sentences for the built-in corpus, taken from Debian's `fortunes` + `fortunes-min`.

Pipeline (every step deterministic):
  fortune files (minus FILE_BLOCKLIST) -> entries (separated by a line "%") -> attribution lines cut
  -> whitespace collapsed -> split into sentences (abbreviation- and initial-aware)
  -> `filter_reason` (ASCII, allowed characters, 3..max_words words, letters-mostly, complete sentence,
     balanced quotes/brackets, not shouting, no speaker label, no WORD_BLOCKLIST word)
  -> case-insensitive dedupe -> ordered by a seeded hash of the lowercased sentence.

Ordering by hash (instead of a shuffle of the whole list) keeps the order of two sentences the same when
the pool changes (another fortunes version, another blocklist), and avoids the alphabetical bias a plain
sort would give the first N. The blocklists are a small, documented content review, not a guarantee.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

FORTUNES_DIR = Path("/usr/share/games/fortunes")

# Held-out evaluation text is drawn from Debian's package documentation: no training corpus may read it.
HELD_OUT_ROOT = Path("/usr/share/doc")


class HeldOutSourceError(ValueError):
    """A sentence source lies under HELD_OUT_ROOT (the held-out evaluation text)."""


def refuse_held_out(path: Path) -> Path:
    """`path` resolved (symlinks followed); HeldOutSourceError if it is or lies under /usr/share/doc."""
    resolved = Path(path).resolve()
    if resolved == HELD_OUT_ROOT or HELD_OUT_ROOT in resolved.parents:
        raise HeldOutSourceError(
            f"refusing sentence source {path} (resolves to {resolved}): {HELD_OUT_ROOT} is where the held-out "
            "evaluation text comes from, so no training corpus may read it"
        )
    return resolved

# Files skipped whole. Why each one: ascii-art is pictures, not prose; ethnic and men-women are mostly
# stereotype jokes (the content review of DESIGN.md section 3); translate-me is partly non-English.
FILE_BLOCKLIST: frozenset[str] = frozenset({"ascii-art", "ethnic", "men-women", "translate-me"})

# Sentences containing one of these words (case-insensitive, whole word; a trailing "*" also matches
# any suffix) are dropped: profanity, slurs and sexual terms that a demo voice should not say.
WORD_BLOCKLIST: tuple[str, ...] = (
    "fuck*", "shit*", "cunt*", "nigger*", "nigga*", "fag", "fags", "faggot*", "retard*", "whore*",
    "slut*", "rape", "raped", "rapes", "rapist*", "raping", "bitch*", "dick", "dicks", "cock", "cocks",
    "pussy", "tits", "penis*", "vagina*", "masturbat*", "orgasm*", "porn*", "dildo*", "kike*", "spic",
    "spics", "chink*", "dyke*", "wetback*", "negro*", "homo", "homos", "tranny", "bastard*", "sex*",
)

# Characters a sentence may contain. Everything else (\ / @ # * _ < > [ ] { } | ~ ^ ` = + and tabs)
# marks code, ASCII art, e-mail addresses or markup, and would also break the `|`-separated metadata.
_ALLOWED = re.compile(r"^[A-Za-z0-9 .,;:!?'\"()$%&-]+$")

# Period-final words after which a sentence does NOT end.
_ABBREVIATIONS: frozenset[str] = frozenset(
    "mr mrs ms dr st jr sr prof vs etc e.g i.e mt no inc ltd co gen col capt lt sgt rev hon gov sen rep "
    "pres ft messrs vol ch fig approx dept univ".split()
)

_ATTRIBUTION = re.compile(r"^\s*--\s*\S")  # "\t\t-- Mark Twain" starts an attribution block
_SPEAKER_LABEL = re.compile(r"^[\"(]?[A-Za-z][\w.' ]{0,20}:\s")  # "Q: ...", "Bob: ..."
# A sentence boundary: [.!?], optional closing quote/bracket, whitespace, then an opening character.
_BOUNDARY = re.compile(r"([.!?]+[\"')]*)\s+(?=[\"'(]?[A-Z0-9])")
_END = re.compile(r"[.!?][\"')]*$")
_START = re.compile(r"^[\"'(]?[A-Z]")


def _blocklist_regex(words: tuple[str, ...]) -> re.Pattern[str]:
    parts = [re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) for w in words]
    return re.compile(r"\b(?:" + "|".join(parts) + r")\b", re.IGNORECASE)


_BLOCKED = _blocklist_regex(WORD_BLOCKLIST)


@dataclass(frozen=True)
class SentenceConfig:
    min_words: int = 3
    max_words: int = 25
    min_letter_fraction: float = 0.8  # letters / non-space characters ("letters-mostly")
    max_upper_fraction: float = 0.5  # upper-case / letters; above this the sentence is shouting
    seed: str = "slt-v1"


def read_entries(path: Path) -> list[str]:
    """Fortune entries of one file (raw text; entries are separated by lines holding only "%")."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    entries, cur = [], []
    for line in text.splitlines():
        if line.strip() == "%":
            entries.append("\n".join(cur))
            cur = []
        else:
            cur.append(line)
    entries.append("\n".join(cur))
    return [e for e in entries if e.strip()]


def entry_text(entry: str) -> str:
    """One entry as a single line: attribution lines ("-- Author") and what follows them removed."""
    kept = []
    for line in entry.splitlines():
        if _ATTRIBUTION.match(line):
            break
        kept.append(line)
    return " ".join(" ".join(kept).split())


def split_sentences(text: str) -> list[str]:
    """Split one line of prose into sentences; no split after abbreviations or single initials."""
    sentences, start = [], 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start(1)].split()
        last = before[-1].lower().lstrip("\"'(") if before else ""
        is_initial = len(last) == 1 and last.isalpha() and m.group(1).startswith(".")
        if m.group(1) == "." and (last in _ABBREVIATIONS or is_initial):
            continue
        sentences.append(text[start : m.end(1)].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def filter_reason(sentence: str, config: SentenceConfig = SentenceConfig()) -> str | None:
    """Why `sentence` is rejected, or None if it is kept."""
    if not sentence.isascii():
        return "non-ascii"
    if not _ALLOWED.match(sentence):
        return "characters"
    n_words = len(sentence.split())
    if not config.min_words <= n_words <= config.max_words:
        return "length"
    chars = sentence.replace(" ", "")
    letters = [c for c in chars if c.isalpha()]
    if len(letters) < config.min_letter_fraction * len(chars):
        return "letters"
    if sum(c.isupper() for c in letters) > config.max_upper_fraction * len(letters):
        return "shouting"
    if not (_START.match(sentence) and _END.search(sentence)):
        return "fragment"
    if sentence.count('"') % 2 or sentence.count("(") != sentence.count(")"):
        return "unbalanced"
    if "--" in sentence or "..." in sentence:
        return "fragment"  # dashes/ellipses mostly mark quotes torn out of dialogue
    if _SPEAKER_LABEL.match(sentence):
        return "speaker-label"
    if _BLOCKED.search(sentence):
        return "blocklist"
    return None


# The short pool (`short_sentences`): utterances of one or two words, which the main pool's 3-word minimum leaves
# out, so that a model has heard a lone word, a lone vowel and a phrase-final stressed schwa before a user types
# "Uh?" (the gate of recipes.bench.short_utterances found the models trained without them quiet there).
# (Letters-mostly at 0.5: "No." is two letters of three characters.)
SHORT_CONFIG = SentenceConfig(min_words=1, max_words=2, min_letter_fraction=0.5, seed="slt-short-v1")

# Everyday interjections and one-word answers, written for this project (the fortunes hold few: "What?" is the
# only one of these there).  Each passes `filter_reason` under SHORT_CONFIG (tests/test_data_prep.py).  The texts of
# the short-utterance gate are NOT here, and `short_sentences` drops any text that reads like one of them, so the
# gate still tests words the model never heard alone; "Huh?", "Duh." and "Uh-huh." teach the phrase-final AH1
# that its "Uh." needs.
INTERJECTIONS: tuple[str, ...] = (
    "Huh?", "Duh.", "Um.", "Uh-huh.", "Uh-oh!", "Ah.", "Aha!", "Ahem.", "Eh?", "Hmm.", "Mm-hmm.", "Oops.",
    "Ouch!", "Whoa!", "Wow.", "Yay!", "Yes.", "Yeah.", "Yep.", "No.", "Nope.", "Okay.", "Sure.", "Maybe.",
    "Thanks.", "Thank you.", "Hi.", "Hey!", "Bye.", "Goodbye.", "Please.", "Sorry?", "Why?", "Who?", "How?",
    "When?", "Where?", "Which one?", "Really?", "Right.", "Fine.", "Good.", "Done.", "Wait.", "Come in.",
    "Go on.", "Me?", "You?", "Us.", "Them.", "Now!", "Here.", "There.", "Ah, yes.", "Oh, no!", "Oh well.",
    "Uh, sure.", "Huh, okay.", "Not now.", "Of course.", "Good night.", "See you.", "Me too.", "Why not?",
)


def _letters_key(text: str) -> str:
    """"Uh?" and "uh." alike: the lower-case letters and spaces of a text (what is said, not how it ends)."""
    return " ".join("".join(c for c in text.lower() if c.isalpha() or c.isspace()).split())


def short_sentences(held_out: tuple[str, ...] = (), config: SentenceConfig = SHORT_CONFIG,
                    fortunes_dir: Path = FORTUNES_DIR) -> list[str]:
    """The short pool in its order: the fortunes' sentences of `config`'s lengths (1-2 words) and INTERJECTIONS,
    filtered, deduplicated and ordered by a seeded hash as the main pool; a text whose letters are those of one of
    `held_out` (the gate's texts) is dropped."""
    banned = {_letters_key(t) for t in held_out}
    pool = select_sentences([*INTERJECTIONS, *raw_fortune_sentences(fortunes_dir)], config)
    return [s for s in pool if _letters_key(s) not in banned]


def fortune_files(fortunes_dir: Path = FORTUNES_DIR) -> list[Path]:
    """Text files of the installed fortune databases (not the .dat indexes or .u8 duplicates), sorted.
    A folder or file that resolves under /usr/share/doc is refused (`refuse_held_out`)."""
    refuse_held_out(fortunes_dir)
    if not fortunes_dir.is_dir():
        raise FileNotFoundError(
            f"{fortunes_dir} not found: install Debian's fortune databases "
            "(apt-get install -y --no-install-recommends fortunes fortunes-min)"
        )
    files = sorted(
        p for p in fortunes_dir.iterdir()
        if p.is_file() and p.suffix not in (".dat", ".u8") and p.name not in FILE_BLOCKLIST
    )
    for p in files:
        refuse_held_out(p)
    return files


def order_key(sentence: str, seed: str) -> str:
    return hashlib.sha256(f"{seed}\n{sentence.lower()}".encode()).hexdigest()


def select_sentences(sentences: list[str], config: SentenceConfig = SentenceConfig()) -> list[str]:
    """Filter, dedupe case-insensitively (first occurrence wins) and order by seeded hash."""
    seen: dict[str, str] = {}
    for s in sentences:
        s = " ".join(s.split())
        key = s.lower()
        if key not in seen and filter_reason(s, config) is None:
            seen[key] = s
    return sorted(seen.values(), key=lambda s: order_key(s, config.seed))


def raw_fortune_sentences(fortunes_dir: Path = FORTUNES_DIR) -> list[str]:
    """Every sentence of the installed fortunes, unfiltered, in file order."""
    raw = []
    for path in fortune_files(fortunes_dir):
        for entry in read_entries(path):
            raw.extend(split_sentences(entry_text(entry)))
    return raw


def fortune_sentences(config: SentenceConfig = SentenceConfig(), fortunes_dir: Path = FORTUNES_DIR) -> list[str]:
    """All usable sentences of the installed fortunes, in the corpus order."""
    return select_sentences(raw_fortune_sentences(fortunes_dir), config)


def source_provenance(fortunes_dir: Path = FORTUNES_DIR) -> dict[str, object]:
    """What the sentence pool was built from (for corpus.json): file names with sha256."""
    return {
        "dir": str(fortunes_dir),
        "files": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in fortune_files(fortunes_dir)},
        "skipped_files": sorted(FILE_BLOCKLIST),
        "word_blocklist": list(WORD_BLOCKLIST),
    }

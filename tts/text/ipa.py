"""Map espeak-ng's US-English IPA output to CMUdict-style ARPAbet with stress digits.

espeak-ng writes stress as a mark *before the stressed vowel* (ˈ primary, ˌ secondary), so
stress is carried forward to the next vowel; vowels without a mark are unstressed (0), as in
CMUdict.  The table is keyed by IPA phoneme strings, matched greedily longest-first inside each
espeak phoneme (espeak is run with `--sep=_`, but the parser also works on unseparated IPA).
Vowel entries use "*" where the stress digit goes; only the first vowel of a multi-vowel entry
("aɪɚ" = AY ER0) takes the pending stress.

Choices where espeak distinguishes less or more than CMUdict:
- flap ɾ and glottal stop ʔ are allophones of /t/ (water, button) -> T;
- reduced ᵻ -> IH, ɐ -> AH (CMUdict writes IH0/AH0 there);
- espeak's r-coloured vowels already contain the R ("ɑːɹ" -> AA R), and espeak sometimes writes
  another ɹ after them ("ʊɹ_ɹ"), so an R right after R/ER is dropped;
- syllabic n̩ l̩ m̩ -> AH0 N / AH0 L / AH0 M, like CMUdict's "button" B AH1 T AH0 N;
- x (German "Bach") -> K, ç -> HH;
- unstressed ɪ before another vowel ("minium" m_ˈɪ_n_ɪ__ə_m) -> IY0, CMUdict's hiatus vowel.
"""

from __future__ import annotations

import logging
import unicodedata

logger = logging.getLogger(__name__)

PRIMARY = "\u02c8"  # ˈ
SECONDARY = "\u02cc"  # ˌ
# Separators espeak may put between phonemes (our --sep=_, ties, zero-width joiners) and
# prosodic marks we do not model (length is part of the vowel identity in the table below).
IGNORED = frozenset("_\u0361\u035c\u200d\u200c|\u2016.\u02d1")

IPA_TO_ARPABET: dict[str, tuple[str, ...]] = {
    # vowels and diphthongs
    "ɑː": ("AA*",), "ɑ": ("AA*",), "ɒ": ("AA*",), "ɑːɹ": ("AA*", "R"), "ɑɹ": ("AA*", "R"),
    "æ": ("AE*",), "a": ("AE*",), "aɪ": ("AY*",), "aʊ": ("AW*",),
    "aɪɚ": ("AY*", "ER0"), "aɪə": ("AY*", "AH0"), "aʊɚ": ("AW*", "ER0"), "aʊə": ("AW*", "AH0"),
    "ʌ": ("AH*",), "ə": ("AH*",), "ɐ": ("AH*",), "əl": ("AH*", "L"),
    "ɚ": ("ER*",), "ɝ": ("ER*",), "ɜː": ("ER*",), "ɜ": ("ER*",), "ɜːɹ": ("ER*",),
    "ɔː": ("AO*",), "ɔ": ("AO*",), "oː": ("AO*",),
    "ɔːɹ": ("AO*", "R"), "ɔɹ": ("AO*", "R"), "oːɹ": ("AO*", "R"), "oɹ": ("AO*", "R"),
    "ɔɪ": ("OY*",),
    "ɛ": ("EH*",), "e": ("EH*",), "ɛɹ": ("EH*", "R"), "eə": ("EH*", "R"), "eɪ": ("EY*",),
    "ɪ": ("IH*",), "ᵻ": ("IH*",), "ɪɹ": ("IH*", "R"), "ɪə": ("IH*", "R"),
    "i": ("IY*",), "iː": ("IY*",), "iə": ("IY*", "AH0"), "iɚ": ("IY*", "ER0"),
    "oʊ": ("OW*",), "o": ("OW*",), "əʊ": ("OW*",), "oʊɹ": ("AO*", "R"),
    "ʊ": ("UH*",), "ʊɹ": ("UH*", "R"), "ʊə": ("UH*", "AH0"),
    "u": ("UW*",), "uː": ("UW*",), "ʉ": ("UW*",), "ʉː": ("UW*",),
    # syllabic consonants
    "n̩": ("AH*", "N"), "l̩": ("AH*", "L"), "m̩": ("AH*", "M"),
    # consonants
    "p": ("P",), "b": ("B",), "t": ("T",), "d": ("D",), "k": ("K",), "ɡ": ("G",), "g": ("G",),
    "f": ("F",), "v": ("V",), "θ": ("TH",), "ð": ("DH",), "s": ("S",), "z": ("Z",),
    "ʃ": ("SH",), "ʒ": ("ZH",), "h": ("HH",), "ɦ": ("HH",), "ç": ("HH",), "x": ("K",),
    "tʃ": ("CH",), "dʒ": ("JH",), "ʧ": ("CH",), "ʤ": ("JH",),
    "m": ("M",), "n": ("N",), "ŋ": ("NG",), "ɲ": ("N", "Y"),
    "l": ("L",), "ɫ": ("L",), "ɬ": ("L",), "ɹ": ("R",), "r": ("R",), "ɻ": ("R",), "ɾ": ("T",),
    "w": ("W",), "ʍ": ("W",), "j": ("Y",), "ʔ": ("T",),
}
_MAX_KEY = max(len(k) for k in IPA_TO_ARPABET)
_R_COLOURED = ("R", "ER0", "ER1", "ER2")


def ipa_to_arpabet(ipa: str) -> list[str]:
    """ARPAbet phones (with stress digits on vowels) of one word's IPA string.

    Characters the table does not know are skipped and logged at warning level; the result
    therefore only ever contains valid ARPAbet phones (possibly empty).
    """
    text = unicodedata.normalize("NFC", ipa)
    phones: list[str] = []
    unknown: list[str] = []
    stress = "0"
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == PRIMARY:
            stress, i = "1", i + 1
            continue
        if ch == SECONDARY:
            stress, i = "2", i + 1
            continue
        if ch.isspace() or ch in IGNORED or ch == "\u02d0":  # stray length mark ː
            i += 1
            continue
        for size in range(min(_MAX_KEY, len(text) - i), 0, -1):
            entry = IPA_TO_ARPABET.get(text[i : i + size])
            if entry is not None:
                break
        else:
            if not unicodedata.combining(ch):
                unknown.append(ch)
            i += 1
            continue
        i += size
        for phone in entry:
            if phone.endswith("*"):
                phone, stress = phone[:-1] + stress, "0"
            if phone == "R" and phones and phones[-1] in _R_COLOURED:
                continue  # espeak's "ʊɹ_ɹ": the R is already part of the vowel
            phones.append(phone)
    for k in range(len(phones) - 1):
        if phones[k] == "IH0" and phones[k + 1][-1].isdigit():
            phones[k] = "IY0"
    if unknown:
        logger.warning("skipped IPA symbol(s) with no ARPAbet mapping in %r: %s", ipa, unknown)
    return phones

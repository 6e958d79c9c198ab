"""Pronunciation control: inline [[...]] phonemes, the user lexicon (tts.text.lexicon), and the word alignment of
TextFrontend.encode_words.  Real frontend (normaliser, CMUdict, espeak-ng where installed); the phones that reach
the model are checked through frontend.decode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tts.text.errors import EmptyTextError, PronunciationError, TextError, UnknownSymbolError, UnspeakableTextError
from tts.text.frontend import EncodedText, TextFrontend, WordSpan
from tts.text.lexicon import Lexicon, parse_pronunciation
from tts.text.symbols import SymbolTable

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")

# encode() of TextFrontend(espeak_executable=None) computed before inline phonemes, lexicons and encode_words
# existed (commit 01fd055): ordinary text must keep exactly these ids.
BEFORE = {
    "Hello, world. Yes?": [60, 15, 63, 43, 2, 1, 74, 31, 63, 56, 3, 1, 75, 28, 69, 4],
    "It costs $3,000 on Jan. 5th, 2020 (or so)!": [
        37, 71, 1, 62, 10, 69, 71, 69, 1, 72, 68, 40, 1, 72, 22, 76, 15, 65, 56, 1, 56, 10, 63, 30, 76, 1, 10, 65, 1,
        61, 13, 65, 75, 51, 29, 68, 39, 1, 58, 37, 58, 72, 2, 1, 71, 74, 28, 65, 71, 39, 1, 71, 74, 28, 65, 71, 39,
        2, 1, 19, 68, 1, 69, 43, 5],
    "Dr. Smith lives at 1428 Elm St. Call 555-1234 - now.": [
        56, 10, 62, 71, 30, 1, 69, 64, 37, 72, 1, 63, 37, 73, 76, 1, 13, 71, 1, 58, 19, 68, 71, 40, 65, 1, 71, 74,
        28, 65, 71, 39, 1, 34, 71, 1, 28, 63, 64, 1, 69, 71, 68, 40, 71, 3, 1, 62, 19, 63, 1, 58, 25, 73, 1, 58, 25,
        73, 1, 58, 25, 73, 2, 1, 74, 16, 65, 1, 71, 52, 1, 72, 68, 40, 1, 58, 19, 68, 8, 1, 65, 22, 3],
    "The U.S.A. [not] well-known": [57, 15, 1, 75, 52, 1, 28, 69, 1, 34, 2, 1, 65, 10, 71, 2, 1, 74, 28, 63, 1, 65,
                                    43, 65],
    "zorblax at 7:30 a.m.": [76, 40, 43, 10, 68, 54, 40, 28, 63, 34, 28, 62, 69, 1, 13, 71, 1, 69, 28, 73, 15, 65, 1,
                             72, 31, 56, 41, 1, 34, 1, 28, 64, 3],
}


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(espeak_executable=None)


def phones(frontend: TextFrontend, text: str, lexicon: Lexicon | None = None) -> str:
    """The symbols `encode` gives, word boundaries as "|"."""
    return " ".join("|" if s == " " else s for s in frontend.decode(frontend.encode(text, lexicon)))


# -- ordinary text is unchanged ---------------------------------------------------------------
@pytest.mark.parametrize("text", list(BEFORE))
def test_encode_of_ordinary_text_is_unchanged(frontend: TextFrontend, text: str) -> None:
    assert frontend.encode(text) == BEFORE[text]
    assert frontend.encode(text, None) == BEFORE[text]
    assert frontend.encode_words(text).ids == BEFORE[text]


def test_the_lexicon_is_not_part_of_the_description(frontend: TextFrontend) -> None:
    before = frontend.to_dict()
    frontend.encode("Hello [[HH AH0]]", Lexicon.from_entries({"hello": "HH EH1 L OW0"}))
    assert frontend.to_dict() == before
    assert TextFrontend.from_dict(before) == frontend


# -- inline phonemes ----------------------------------------------------------------------------
def test_inline_arpabet_reaches_the_symbols_as_one_word(frontend: TextFrontend) -> None:
    assert phones(frontend, "Say [[HH AH0 L OW1]], please.") == "S EY1 | HH AH0 L OW1 , | P L IY1 Z ."
    # glued to words: still its own word, with boundaries around it
    assert phones(frontend, "a[[K AE1 T]]b") == "AH0 | K AE1 T | B IY1"


def test_inline_ipa_is_mapped(frontend: TextFrontend) -> None:
    assert phones(frontend, "Say [[/həˈloʊ/]].") == "S EY1 | HH AH0 L OW1 ."


def test_inline_phonemes_pass_the_normaliser_untouched(frontend: TextFrontend) -> None:
    # digits, a unit, a percent sign and a title around the span are read as before; the span is not read at all
    assert phones(frontend, "5 [[T EH1 S T]] $3 [[K AE1 T]]%") == (
        "F AY1 V | T EH1 S T | TH R IY1 | D AA1 L ER0 Z | K AE1 T | P ER0 S EH1 N T")
    assert phones(frontend, "Dr. [[N UW1]]") == "D AA1 K T ER0 | N UW1"


def test_single_brackets_keep_their_meaning(frontend: TextFrontend) -> None:
    assert phones(frontend, "The U.S.A. [not] well-known") == phones(frontend, "The U.S.A. (not) well-known")
    assert frontend.encode("a [b] c") == frontend.encode("a (b) c")


def test_unknown_inline_symbols_are_named_with_valid_ones(frontend: TextFrontend) -> None:
    with pytest.raises(PronunciationError) as caught:
        frontend.encode("Say [[HH ah0 XX L OW1]].")
    message = str(caught.value)
    assert "'ah0'" in message and "'XX'" in message and "did you mean 'AH0'" in message
    assert "AA0 AA1" in message  # a few valid phones
    assert caught.value.unknown == ["ah0", "XX"]
    assert isinstance(caught.value, TextError)


def test_pause_marks_are_not_phones_of_a_pronunciation(frontend: TextFrontend) -> None:
    with pytest.raises(PronunciationError, match="','"):
        frontend.encode("[[HH , AH0]]")


def test_unmapped_ipa_and_empty_brackets_are_refused(frontend: TextFrontend) -> None:
    with pytest.raises(PronunciationError, match="'ʁ'"):
        frontend.encode("[[/ʁu/]]")
    with pytest.raises(PronunciationError, match="empty"):
        frontend.encode("Say [[  ]] now")


def test_only_inline_phonemes_is_speakable_and_empty_stays_empty(frontend: TextFrontend) -> None:
    assert phones(frontend, "[[AA1]]") == "AA1"
    with pytest.raises(EmptyTextError):
        frontend.encode("   ")
    with pytest.raises(UnspeakableTextError):
        frontend.encode("???", Lexicon.from_entries({"x": "EH1 K S"}))


# -- the user lexicon -----------------------------------------------------------------------------
def test_lexicon_overrides_cmudict(frontend: TextFrontend) -> None:
    lexicon = Lexicon.from_entries({"Tomato": "T AH0 M AA1 T OW2"})
    assert phones(frontend, "tomato") == "T AH0 M EY1 T OW2"
    assert phones(frontend, "A TOMATO, tomato's.", lexicon) == "AH0 | T AH0 M AA1 T OW2 , | T AH0 M AA1 T OW2 Z ."


def test_lexicon_overrides_the_oov_fallback(frontend: TextFrontend) -> None:
    lexicon = Lexicon.from_entries({"zorblax": ["Z", "AO1", "R", "B", "L", "AE2", "K", "S"]})
    assert phones(frontend, "zorblax", lexicon) == "Z AO1 R B L AE2 K S"


@needs_espeak
def test_lexicon_overrides_espeak() -> None:
    frontend = TextFrontend()
    spoken = phones(frontend, "Nguyen")
    assert phones(frontend, "Nguyen", Lexicon.from_entries({"nguyen": "W IH1 N"})) == "W IH1 N" != spoken


def test_lexicon_overrides_spelled_letters(frontend: TextFrontend) -> None:
    assert phones(frontend, "U S A") == "Y UW1 | EH1 S | EY1"
    assert phones(frontend, "U S A", Lexicon.from_entries({"a": "AA1"})) == "Y UW1 | EH1 S | AA1"


def test_lexicon_ipa_entries(frontend: TextFrontend) -> None:
    lexicon = Lexicon.from_entries({"gif": "/ˈdʒɪf/"})
    assert lexicon["gif"] == ("JH", "IH1", "F")
    assert phones(frontend, "a gif", lexicon) == "AH0 | JH IH1 F"


def test_lexicon_load(frontend: TextFrontend, tmp_path: Path) -> None:
    path = tmp_path / "words.tsv"
    path.write_text("# my words\n\nTomato\tT AH0 M AA1 T OW2\ngif\t/ˈdʒɪf/  # the right way\n"
                    "gif\tG IH1 F\n", encoding="utf-8")
    lexicon = Lexicon.load(path)
    assert dict(lexicon) == {"tomato": ("T", "AH0", "M", "AA1", "T", "OW2"), "gif": ("G", "IH1", "F")}
    assert lexicon == Lexicon.from_entries({"tomato": "T AH0 M AA1 T OW2", "gif": "G IH1 F"})
    assert lexicon.source == str(path) and lexicon.name == f"lexicon {path}" and "2 words" in repr(lexicon)
    bad = tmp_path / "bad.tsv"
    bad.write_text("kitten\tK IH1 T Q N\n", encoding="utf-8")
    with pytest.raises(PronunciationError, match=f"^lexicon {bad}: unknown phoneme symbol.s. 'Q'.*'Q' in 'kitten'"):
        Lexicon.load(bad).check(frontend.symbols)
    assert phones(frontend, "tomato gif", lexicon) == "T AH0 M AA1 T OW2 | G IH1 F"


@pytest.mark.parametrize(("line", "expected"), [
    ("tomato T AH0 M AA1 T OW2", "expected word<TAB>phonemes"),
    ("tomato\t", "empty pronunciation"),
    ("3000\tTH R IY1", "'3000' is not a word"),
    ("e-mail\tIY1 M EY2 L", "'e-mail' is not a word"),
    ("rue\t/ʁy/", "'ʁ'"),
])
def test_a_bad_lexicon_line_is_named_with_its_number(tmp_path: Path, line: str, expected: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(f"# header\nhello\tHH AH0 L OW1\n{line}\n", encoding="utf-8")
    with pytest.raises(PronunciationError) as caught:
        Lexicon.load(path)
    assert f"{path}:3" in str(caught.value) and expected in str(caught.value)


def test_lexicon_file_errors(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes("caf\xe9\tK AE1 F\n".encode("latin-1"))
    with pytest.raises(PronunciationError, match="not UTF-8"):
        Lexicon.load(latin1)
    with pytest.raises(PronunciationError, match="cannot read lexicon"):
        Lexicon.load(tmp_path / "missing.tsv")


def test_lexicon_check_names_unknown_symbols_and_their_words(frontend: TextFrontend) -> None:
    lexicon = Lexicon.from_entries({"hello": "HH AH0 L OW1", "kitten": "K IH1 T Q N", "bad": "B AE1 DD"})
    lexicon.from_entries({"hello": "HH AH0 L OW1"}).check(frontend.symbols)  # a good one passes
    with pytest.raises(PronunciationError) as caught:
        lexicon.check(frontend.symbols)
    assert caught.value.unknown == ["Q", "DD"]
    assert "'Q' in 'kitten'" in str(caught.value) and "'DD' in 'bad'" in str(caught.value)
    # encoding with it names them too, not as an anonymous unknown-symbol error
    with pytest.raises(PronunciationError, match="^lexicon: unknown phoneme symbol.s. 'Q'"):
        frontend.encode("a kitten", lexicon)
    assert phones(frontend, "hello", lexicon) == "HH AH0 L OW1"  # unused bad entries do not stop other words


def test_lexicon_is_immutable() -> None:
    entries = {"hello": "HH AH0 L OW1"}
    lexicon = Lexicon.from_entries(entries)
    entries["hello"] = "X"
    assert lexicon["hello"] == ("HH", "AH0", "L", "OW1")
    with pytest.raises(TypeError):
        lexicon.entries["hello"] = ("X",)  # type: ignore[index]
    with pytest.raises(AttributeError):
        lexicon.source = "other"  # type: ignore[misc]


def test_parse_pronunciation() -> None:
    assert parse_pronunciation(" HH  AH0\tL OW1 ") == ("HH", "AH0", "L", "OW1")
    assert parse_pronunciation("/həˈloʊ/") == ("HH", "AH0", "L", "OW1")
    with pytest.raises(PronunciationError):
        parse_pronunciation("//")


def test_a_custom_symbol_table_is_checked(tmp_path: Path) -> None:
    default = SymbolTable.default()
    small = SymbolTable(symbols=(default.pad, default.word_boundary, *default.punctuation, "AA1", "B", "K", "T"))
    frontend = TextFrontend(symbols=small, espeak_executable=None)
    assert frontend.decode(frontend.encode("[[B AA1 T]]")) == ["B", "AA1", "T"]
    with pytest.raises(PronunciationError, match="'IY1'") as caught:
        frontend.encode("[[B IY1 T]]")
    assert "4 phones" in str(caught.value)
    # a word the lexicon does not give is the table's own problem, as without a lexicon
    with pytest.raises(UnknownSymbolError, match="'IY1'") as other:
        frontend.encode("bee", Lexicon.from_entries({"bat": "B AA1 T"}))
    assert not isinstance(other.value, PronunciationError)
    assert frontend.decode(frontend.encode("bat", Lexicon.from_entries({"bat": "B AA1 T"}))) == ["B", "AA1", "T"]


# -- word alignment ---------------------------------------------------------------------------------
def assert_cover(frontend: TextFrontend, encoded: EncodedText) -> None:
    """Words in order, not overlapping, holding every phone id and nothing else."""
    symbols = frontend.decode(encoded.ids)
    inside: set[int] = set()
    previous_end = 0
    for word in encoded.words:
        assert previous_end <= word.start < word.end <= len(encoded.ids)
        previous_end = word.end
        inside.update(range(word.start, word.end))
    assert inside == {i for i, s in enumerate(symbols) if frontend.symbols.is_phone(s)}


def test_encode_words_spans_match_the_words(frontend: TextFrontend) -> None:
    encoded = frontend.encode_words("It costs $3,000, Dr. Who!")
    assert encoded.ids == frontend.encode("It costs $3,000, Dr. Who!")
    assert [w.text for w in encoded.words] == ["It", "costs", "three", "thousand", "dollars", "doctor", "Who"]
    symbols = frontend.decode(encoded.ids)
    assert symbols[encoded.words[2].start:encoded.words[2].end] == ["TH", "R", "IY1"]
    assert symbols[encoded.words[-1].start:encoded.words[-1].end] == ["HH", "UW1"]
    assert encoded.words[0] == WordSpan("It", 0, 2)
    assert_cover(frontend, encoded)


def test_encode_words_with_inline_phonemes_and_lexicon(frontend: TextFrontend) -> None:
    lexicon = Lexicon.from_entries({"tomato": "T AH0 M AA1 T OW2"})
    text = "Say [[HH AH0 L OW1]] to the tomato, [[/ˈdʒɪf/]] U S A."
    encoded = frontend.encode_words(text, lexicon)
    assert encoded.ids == frontend.encode(text, lexicon)
    assert [w.text for w in encoded.words] == ["Say", "HH AH0 L OW1", "to", "the", "tomato", "/ˈdʒɪf/", "U", "S", "A"]
    symbols = frontend.decode(encoded.ids)
    assert symbols[encoded.words[1].start:encoded.words[1].end] == ["HH", "AH0", "L", "OW1"]
    assert symbols[encoded.words[4].start:encoded.words[4].end] == ["T", "AH0", "M", "AA1", "T", "OW2"]
    assert_cover(frontend, encoded)


@pytest.mark.parametrize("text", [*BEFORE, "well-known yes-no; a - b", "[[AA1]]-[[B IY1]]"])
def test_encode_words_cover_every_phone(frontend: TextFrontend, text: str) -> None:
    assert_cover(frontend, frontend.encode_words(text))


def test_encoded_text_is_frozen(frontend: TextFrontend) -> None:
    encoded = frontend.encode_words("Hello")
    with pytest.raises(AttributeError):
        encoded.ids = []  # type: ignore[misc]
    with pytest.raises(AttributeError):
        encoded.words[0].start = 1  # type: ignore[misc]

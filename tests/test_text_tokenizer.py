"""Symbol table, tokenizer, the TextFrontend (errors, serialisation) and sentence splitting."""

from __future__ import annotations

import json
import logging

import pytest

from tts.text import (
    ARPABET_PHONES,
    EmptyTextError,
    SymbolTable,
    TextError,
    TextFrontend,
    TextTooLongError,
    Tokenizer,
    UnknownSymbolError,
    UnspeakableTextError,
    split_sentences,
)

MISSING_ESPEAK = "/nonexistent/bin/espeak-ng"


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend()


# -- symbol table ------------------------------------------------------------------------
def test_default_table_layout() -> None:
    table = SymbolTable.default()
    assert table.symbols[0] == "_" and table.pad_id == 0
    assert table.symbols[1] == " " and table.word_boundary_id == 1
    assert table.symbols[2:9] == (",", ".", "?", "!", ";", ":", "-")
    assert len(ARPABET_PHONES) == 15 * 3 + 24
    assert len(table) == 2 + 7 + 69 == 78
    assert {"AH0", "AH1", "AH2", "EY1", "ZH", "NG"} <= set(table.symbols)
    assert "AH" not in table  # vowels only exist with a stress digit
    assert table.is_phone("EY1") and not table.is_phone(",") and not table.is_phone(" ")


def test_table_json_round_trip() -> None:
    table = SymbolTable.default()
    restored = SymbolTable.from_dict(json.loads(json.dumps(table.to_dict())))
    assert restored == table
    assert [restored.id_of(s) for s in table.symbols] == list(range(len(table)))


def test_table_equality_depends_on_order() -> None:
    table = SymbolTable.default()
    swapped = list(table.symbols)
    swapped[9], swapped[10] = swapped[10], swapped[9]
    assert SymbolTable(symbols=tuple(swapped)) != table
    assert SymbolTable(symbols=table.symbols) == table


@pytest.mark.parametrize(
    "symbols",
    [
        (" ", "_", ",", ".", "?", "!", ";", ":", "-"),  # pad not first
        ("_", " ", ",", ".", "?", "!", ";", ":", "-", "AA0", "AA0"),  # duplicate
        ("_", ",", ".", "?", "!", ";", ":", "-"),  # no word boundary
    ],
)
def test_invalid_tables_are_rejected(symbols: tuple[str, ...]) -> None:
    with pytest.raises(TextError):
        SymbolTable(symbols=symbols)


def test_from_dict_rejects_bad_input() -> None:
    data = SymbolTable.default().to_dict()
    with pytest.raises(TextError, match="format_version"):
        SymbolTable.from_dict({**data, "format_version": 99})
    with pytest.raises(TextError, match="symbols"):
        SymbolTable.from_dict({**data, "symbols": "abc"})


# -- tokenizer ---------------------------------------------------------------------------
def test_encode_decode_round_trip() -> None:
    tok = Tokenizer(SymbolTable.default())
    phones = ["HH", "AH0", "L", "OW1", ",", " ", "W", "ER1", "L", "D", "."]
    ids = tok.encode(phones)
    assert ids[:4] == [tok.symbols.id_of(p) for p in ("HH", "AH0", "L", "OW1")]
    assert ids[4:6] == [2, 1]
    assert 0 not in ids  # pad is never produced by encoding
    assert tok.decode(ids) == phones
    assert tok.vocab_size == 78


def test_unknown_symbol_error_names_the_symbols() -> None:
    tok = Tokenizer(SymbolTable.default())
    with pytest.raises(UnknownSymbolError, match=r"'AH'.*'xx'") as info:
        tok.encode(["HH", "AH", "L", "xx", "AH"])
    assert info.value.unknown == ["AH", "xx"]
    assert isinstance(info.value, TextError) and isinstance(info.value, ValueError)


def test_decode_out_of_range_id() -> None:
    tok = Tokenizer(SymbolTable.default())
    with pytest.raises(UnknownSymbolError, match="id 78"):
        tok.decode([1, 78])
    with pytest.raises(UnknownSymbolError, match="id -1"):
        tok.decode([-1])


# -- frontend ----------------------------------------------------------------------------
def test_phonemize_full_pipeline(frontend: TextFrontend) -> None:
    assert frontend.phonemize("Dr. Smith paid $5.") == [
        "D", "AA1", "K", "T", "ER0", " ", "S", "M", "IH1", "TH", " ", "P", "EY1", "D", " ",
        "F", "AY1", "V", " ", "D", "AA1", "L", "ER0", "Z", ".",
    ]


def test_encode_gives_valid_ids(frontend: TextFrontend) -> None:
    ids = frontend.encode("Hi! The FBI met Zorblax at 7 a.m., right?")
    assert ids and all(0 < i < frontend.vocab_size for i in ids)
    assert frontend.decode(ids)[-1] == "?"


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(frontend: TextFrontend, text: str) -> None:
    with pytest.raises(EmptyTextError, match="empty"):
        frontend.encode(text)


@pytest.mark.parametrize("text", ["???", "🙂🙂", "... !!! ---", "中文"])
def test_unspeakable_text(frontend: TextFrontend, text: str) -> None:
    with pytest.raises(UnspeakableTextError, match="no speakable words"):
        frontend.encode(text)


def test_unspeakable_characters_are_dropped_with_warning(
    frontend: TextFrontend, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert frontend.phonemize("Café 🙂!") == frontend.phonemize("Cafe!")
    assert "U+1F642" in caplog.text


def test_too_long_text_mentions_split_sentences() -> None:
    fe = TextFrontend(max_symbols=20)
    assert len(fe.phonemize("Hello there.")) <= 20
    with pytest.raises(TextTooLongError, match="split_sentences") as info:
        fe.encode("Hello there, this sentence is far too long for twenty symbols.")
    assert info.value.n_symbols > 20 and info.value.max_symbols == 20
    with pytest.raises(TextTooLongError, match="3 sentences"):
        fe.encode("Hello there. How are you today? I am fine.")
    # each sentence alone fits
    for sentence in split_sentences("Hello there. How are you? I am fine."):
        fe.encode(sentence)


def test_invalid_max_symbols() -> None:
    with pytest.raises(TextError):
        TextFrontend(max_symbols=0)


def test_frontend_round_trip_through_json() -> None:
    fe = TextFrontend(espeak_executable=None, max_symbols=300)
    data = json.loads(json.dumps(fe.to_dict()))
    assert data["g2p"]["lexicon"] == "cmudict" and data["g2p"]["espeak_executable"] is None
    assert data["symbols"]["symbols"][0] == "_"
    restored = TextFrontend.from_dict(data)
    assert restored == fe
    assert restored.max_symbols == 300 and restored.symbols == fe.symbols
    assert restored.encode("Hello world.") == fe.encode("Hello world.")


def test_a_stored_espeak_program_is_only_ever_espeak_on_path() -> None:
    """A stored description comes from a checkpoint (a file from anywhere): a path in it is reduced to espeak's
    own name, looked up on PATH, and any other program is refused (issue 35 item 1)."""
    data = TextFrontend(espeak_executable=MISSING_ESPEAK).to_dict()
    assert data["g2p"]["espeak_executable"] == MISSING_ESPEAK
    assert TextFrontend.from_dict(data).g2p.espeak_executable == "espeak-ng"
    for program in ("/bin/sh", "sh", "./evil", 3):
        data["g2p"]["espeak_executable"] = program
        with pytest.raises(TextError, match="espeak program"):
            TextFrontend.from_dict(data)


def test_frontend_from_dict_rejects_unknown_format() -> None:
    data = TextFrontend().to_dict()
    with pytest.raises(TextError, match="format_version"):
        TextFrontend.from_dict({**data, "format_version": 2})


def test_frontend_fallback_path_without_espeak(caplog: pytest.LogCaptureFixture) -> None:
    fe = TextFrontend(espeak_executable=MISSING_ESPEAK)
    with caplog.at_level(logging.WARNING):
        ids = fe.encode("Blorptastic!")
    assert fe.decode(ids)[:3] == ["B", "IY1", "EH1"]  # B, L spelled
    assert "letter by letter" in caplog.text


# -- sentence splitting ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
        ("Dr. Smith arrived. He sat down.", ["Dr. Smith arrived.", "He sat down."]),
        ("Pi is 3.5 or so. Really.", ["Pi is 3.5 or so.", "Really."]),
        (
            "Mr. J. K. Rowling wrote it, e.g. Harry. Next.",
            ["Mr. J. K. Rowling wrote it, e.g. Harry.", "Next."],
        ),
        ("See No. 5 and Jan. 3 here. Then go.", ["See No. 5 and Jan. 3 here.", "Then go."]),
        ("We met at 3 p.m. today. It rained.", ["We met at 3 p.m. today.", "It rained."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("It ended. 5 people came.", ["It ended.", "5 people came."]),
        ("First paragraph\n\nsecond paragraph", ["First paragraph", "second paragraph"]),
        ("  one line  with   spaces  ", ["one line with spaces"]),
        ("", []),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected

"""The text stage sentence by sentence (issue 35 items 3 and 10): a document's first part is made after its first
sentence's text work, whatever its length, and no sentence, however long, costs more than MAX_SENTENCE_CHARS of
text work before its first part.  Real frontend (normaliser, CMUdict, espeak-ng), real documents."""

import random
import string
import time

import pytest

from tts.runtime.text_stage import (
    CLAUSE_PAUSE_S,
    MAX_SENTENCE_CHARS,
    PartStream,
    bounded_pieces,
    iter_parts,
    prepare_parts,
)
from tts.text import TextFrontend
from tts.text.errors import UnspeakableTextError

PARAGRAPH = ("The meeting starts at 9:30 a.m. on Jan. 5, 2024. Dr. Smith will present 3 results, each under 10 "
             "minutes! Is $12.50 too much for lunch? We think not; bring a friend.\n\n")


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(max_symbols=400)


class CountingEncoder:
    """The frontend's encode, counting the texts it was given and their characters."""

    def __init__(self, frontend: TextFrontend) -> None:
        self.frontend, self.calls, self.chars = frontend, 0, 0

    def __call__(self, text: str) -> list[int]:
        self.calls += 1
        self.chars += len(text)
        return self.frontend.encode(text)


def test_the_first_part_of_a_5_mb_document_costs_its_first_sentence(frontend):
    document = PARAGRAPH * (5_000_000 // len(PARAGRAPH))
    encode = CountingEncoder(frontend)
    t0 = time.perf_counter()
    stream = PartStream(document, encode, 0.25)
    first = stream.first()
    seconds = time.perf_counter() - t0
    assert first.text == "The meeting starts at 9:30 a.m. on Jan. 5, 2024."
    assert encode.calls == 1 and seconds < 1.0, (encode.calls, seconds)  # whole-document work took 44 s
    parts = [p for _, p in zip(range(12), stream)]
    assert [p.text for p in parts[:5]] == [
        "The meeting starts at 9:30 a.m. on Jan. 5, 2024.", "Dr. Smith will present 3 results, each under 10 minutes!",
        "Is $12.50 too much for lunch?", "We think not; bring a friend.", first.text]
    assert encode.calls == 12 and stream.made == parts  # made as asked for, and kept


def test_a_part_stream_is_the_eager_stage_one_part_at_a_time(frontend):
    text = PARAGRAPH * 3 + "A last sentence without a stop"
    eager, eager_notes = prepare_parts(text, frontend.encode, 0.25)
    stream = PartStream(text, frontend.encode, 0.25)
    assert list(stream) == eager and stream.all() == eager and list(stream) == eager  # iterable again
    assert stream.notes == eager_notes and stream[3] == eager[3] and stream.text_s > 0
    assert eager[-1].text.endswith("stop.") and [p.pause_s for p in eager[:2]] == [0.0, 0.25]


@pytest.mark.parametrize("text", ["   \n\n  ", "??? !!! ...", "\u2603 \u2603"])
def test_bad_text_is_an_error_at_the_first_part(frontend, text):
    with pytest.raises(UnspeakableTextError):
        PartStream(text, frontend.encode, 0.25).first()


@pytest.mark.parametrize("kind", ["letters", "digits", "words"])
def test_a_megabyte_without_stops_gives_its_first_part_at_once(frontend, kind):
    """Item 3: 1 MB without punctuation (or without spaces) was normalised whole, then again in halves: no audio
    within 150 s.  Now its first piece is read alone."""
    rng = random.Random(35)
    text = {"letters": "".join(rng.choice(string.ascii_lowercase) for _ in range(1_000_000)),
            "digits": "7" * 1_000_000,
            "words": " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(200_000))}[kind]
    encode = CountingEncoder(frontend)
    notes: list[str] = []
    t0 = time.perf_counter()
    parts = iter_parts(text, encode, 0.25, notes)
    first, second = next(parts), next(parts)
    assert time.perf_counter() - t0 < 10.0
    assert len(first.ids) <= 400 and second.pause_s == CLAUSE_PAUSE_S  # parts of one sentence
    assert encode.chars < 8 * MAX_SENTENCE_CHARS  # the window's pieces and their halves, not the megabyte
    assert any("before reading it" in n for n in notes)


def test_bounded_pieces_cut_at_the_strongest_boundary_and_keep_every_word():
    clause = "the quick brown fox jumps over the lazy dog"
    text = "; ".join(", ".join([clause] * 3) for _ in range(20))
    pieces = list(bounded_pieces(text, 300))
    assert all(len(p) <= 300 for p in pieces) and " ".join(pieces).split() == text.split()
    assert all(p.endswith(";") for p in pieces[:-1])  # semicolons before commas
    words = " ".join(["word"] * 500)
    assert all(p.split() == ["word"] * len(p.split()) for p in bounded_pieces(words, 100))  # between words
    assert [len(p) for p in bounded_pieces("x" * 250, 100)] == [100, 100, 50]  # anywhere, without spaces
    assert list(bounded_pieces("short", 100)) == ["short"] and list(bounded_pieces("   ", 100)) == []


def test_bounded_pieces_is_linear_in_the_length():
    text = ("a" * 40 + " ") * 50_000  # 2 MB
    t0 = time.perf_counter()
    n = sum(1 for _ in bounded_pieces(text))
    assert n == pytest.approx(len(text) / MAX_SENTENCE_CHARS, rel=0.1) and time.perf_counter() - t0 < 5.0


def test_clause_cuts_never_split_an_inline_pronunciation(frontend):
    """A sentence too long for the model is cut at clause boundaries and spaces, never inside [[...]]."""
    from tts.runtime.text_stage import split_clause

    inline = "[[T AH0 M EY1 T OW0 S AA1 S]]"
    text = " ".join(["word"] * 10 + [inline] + ["word"] * 10)
    for cut in (split_clause(text), split_clause(f"a {inline} b")):
        assert cut is not None and all(p.count("[[") == p.count("]]") for p in cut), cut
    pieces = list(bounded_pieces(" ".join(["word"] * 30 + [inline] * 20), 120))
    assert all(p.count("[[") == p.count("]]") for p in pieces) and sum(p.count("[[") for p in pieces) == 20

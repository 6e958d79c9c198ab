"""The sentence splitter (issue 24 item 3): abbreviations, initials, times, addresses, URLs, e-mails, decimals."""

from __future__ import annotations

import pytest

from tts.text.sentences import split_sentences

SPLITS = [
    # plain sentence ends
    ("One. Two! Three? Four.", ["One.", "Two!", "Three?", "Four."]),
    ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
    ("It ended (finally.) We went home.", ["It ended (finally.)", "We went home."]),
    ("Wait... What happened?", ["Wait...", "What happened?"]),
    ("First part.\n\nsecond paragraph", ["First part.", "second paragraph"]),
    # titles never end a sentence
    ("Dr. Smith met Mr. Jones.", ["Dr. Smith met Mr. Jones."]),
    ("St. Louis is big. Prof. Kay agreed.", ["St. Louis is big.", "Prof. Kay agreed."]),
    ("We saw Mt. Fuji. It was calm.", ["We saw Mt. Fuji.", "It was calm."]),
    # Latin abbreviations
    ("Bring fruit, e.g. Apples and pears.", ["Bring fruit, e.g. Apples and pears."]),
    ("One thing, i.e. The best one.", ["One thing, i.e. The best one."]),
    ("Cats vs. Dogs is old.", ["Cats vs. Dogs is old."]),
    ("Pens, paper, etc. Then the rest.", ["Pens, paper, etc.", "Then the rest."]),
    # numbers after No. / months / pages
    ("It is No. 5 on the list.", ["It is No. 5 on the list."]),
    ("Due Jan. 5 at noon.", ["Due Jan. 5 at noon."]),
    ("Read pp. 10 to 12.", ["Read pp. 10 to 12."]),
    ("I said no. No more.", ["I said no.", "No more."]),
    # initials
    ("J. K. Rowling wrote it. It sold.", ["J. K. Rowling wrote it.", "It sold."]),
    ("John F. Kennedy spoke.", ["John F. Kennedy spoke."]),
    ("The U.S. Army marched.", ["The U.S. Army marched."]),
    # a.m. / p.m.
    ("It opens at 9 a.m. Come early.", ["It opens at 9 a.m.", "Come early."]),
    ("It closes at 5 p.m. on Fridays.", ["It closes at 5 p.m. on Fridays."]),
    ("At 6 p.m. Tom called. Then Ann.", ["At 6 p.m.", "Tom called.", "Then Ann."]),
    # streets: after a house number the type ends the sentence, alone it is a title
    ("She lived at 1428 Elm St. It was old.", ["She lived at 1428 Elm St.", "It was old."]),
    ("Go to 12 Oak Dr. Then turn left.", ["Go to 12 Oak Dr.", "Then turn left."]),
    ("Ask Dr. Oak first.", ["Ask Dr. Oak first."]),
    # URLs, e-mail addresses and decimals are never split inside
    ("See www.example.com/a.b. It works.", ["See www.example.com/a.b.", "It works."]),
    ("Mail j.doe@example.com. Then wait.", ["Mail j.doe@example.com.", "Then wait."]),
    ("Open https://x.org/A.B?q=1.2 Now.", ["Open https://x.org/A.B?q=1.2 Now."]),
    ("Pi is 3.14. Tau is 6.28.", ["Pi is 3.14.", "Tau is 6.28."]),
    ("It costs $3.50. Cheap.", ["It costs $3.50.", "Cheap."]),
    ("Version 2.0.1. Next one.", ["Version 2.0.1.", "Next one."]),
    ("Use example.com. It is free.", ["Use example.com.", "It is free."]),
]


@pytest.mark.parametrize(("text", "expected"), SPLITS, ids=[s[0][:40] for s in SPLITS])
def test_split(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_pieces_keep_every_word() -> None:
    text = " ".join(s for s, _ in SPLITS)
    assert " ".join(split_sentences(text)).split() == text.split()


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", "..."])
def test_nothing_to_say(text: str) -> None:
    assert split_sentences(text) == ([] if not text.strip(" \n") else ["..."])


@pytest.mark.parametrize("sentence", ["Dr. Smith met J. K. Rowling at 9 a.m. on Jan. 5. ", "She lived at 1428 Elm St. ",
                                      "It works, e.g. here. "])
def test_a_long_document_splits_in_linear_time(sentence: str) -> None:
    """Each look back stays near its period: over a ~1 MB document a search from the text's start
    (quadratic: ~5 s at 143 KB before the fix, minutes here) misses this bound by two orders of magnitude."""
    import time

    doc = sentence * (1_000_000 // len(sentence))
    start = time.perf_counter()
    pieces = split_sentences(doc)
    assert time.perf_counter() - start < 5.0, "splitting is not linear in the document's length"
    assert len(pieces) >= len(doc) // len(sentence)  # every repetition ends at least one sentence

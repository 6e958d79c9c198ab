"""Mathematical and technical notation read as words (issue 35 items 5 and 8: "x ≥ 3" was spoken as "x three",
"6'2\"" as "six'two", "1e308" as "one e three hundred eight", "10^9" as "ten nine", Arabic-Indic digits as nothing).
Every expected string was read aloud as written."""

from __future__ import annotations

import pytest

from tts.text import TextFrontend
from tts.text.frontend import NORMALIZER_VERSION
from tts.text.normalizer import normalize

CASES: list[tuple[str, str]] = [
    # comparison and arithmetic symbols
    ("x ≥ 3", "x greater than or equal to three"),
    ("x ≤ 3", "x less than or equal to three"),
    ("5 ± 2", "five plus or minus two"),
    ("±0.5 mm", "plus or minus zero point five millimeters"),
    ("6 ÷ 3", "six divided by three"),
    ("3 × 4", "three times four"),
    ("3×4", "three times four"),
    ("3 × 4 m", "three by four meters"),
    ("≈ 5 kg", "approximately five kilograms"),
    ("a ≠ b", "a not equal to b"),
    ("5 > 3", "five greater than three"),
    ("2 < 3", "two less than three"),
    ("if x < y", "if x less than y"),
    ("n >= 10", "n greater than or equal to ten"),
    ("∞", "infinity"),
    ("π r²", "pi r squared"),
    ("√2", "the square root of two"),
    ("α and β", "alpha and beta"),
    ("5‰", "five per mille"),
    # powers and scientific notation
    ("x²", "x squared"),
    ("10³", "ten cubed"),
    ("E = mc²", "E equals mc squared"),
    ("2⁸ values", "two to the power of eight values"),
    ("10⁻³ s", "ten to the power of minus three s"),
    ("5 m²", "five square meters"),
    ("3 cm³", "three cubic centimeters"),
    ("10^9", "ten to the power of nine"),
    ("10^-9", "ten to the power of minus nine"),
    ("2**10", "two to the power of ten"),
    ("x^2", "x squared"),
    ("1e308", "one times ten to the power of three hundred eight"),
    ("1e-5", "one times ten to the power of minus five"),
    ("2.5e10 atoms", "two point five times ten to the power of ten atoms"),
    # fractions
    ("½ cup", "one half cup"),
    ("¼ mile", "one quarter mile"),
    ("1½ cups", "one and a half cups"),
    ("2¾ cups", "two and three quarters cups"),
    # primes: feet and inches after numbers, minutes and seconds of arc after degrees
    ("6'2\"", "six feet two inches"),
    ("He's 6'2\" tall.", "He's six feet two inches tall."),
    ("6′2″", "six feet two inches"),
    ("I'm 5'11.", "I'm five feet eleven inches."),
    ("a 5′ wall", "a five feet wall"),
    ("a 30″ screen", "a thirty inches screen"),
    ("40°26′46″N", "forty degrees twenty-six minutes forty-six seconds N"),
    # Unicode digits
    ("٣", "three"),
    ("١٢٣ books", "one hundred twenty-three books"),
    ("۱۲۳", "one hundred twenty-three"),
    ("१२३", "one hundred twenty-three"),
    ("１２", "twelve"),
    ("٣٫٥", "three point five"),
    ("٥٠٪", "fifty percent"),
]

LOOK_ALIKES: list[tuple[str, str]] = [  # what must keep its reading
    ("It's the 1990's.", "It's the nineteen nineties."),
    ("Rock'n'roll", "Rock'n'roll"),
    ("She said \"5\" twice.", "She said five twice."),
    ("Call 555-1234.", "Call five five five, one two three four."),
    ("The 3e model", "The three e model"),
    ("Use a 2x4 board.", "Use a two x four board."),
    ("a <b>bold</b> tag", "a b bold slash b tag"),
    ("90°", "ninety degrees"),
]


@pytest.mark.parametrize(("text", "expected"), CASES + LOOK_ALIKES, ids=[c[0] for c in CASES + LOOK_ALIKES])
def test_symbols_are_read_as_words(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_a_symbol_is_spoken_as_its_words():
    """What the model reads: "x ≥ 3" gives the symbols of its words (it gave those of "x three")."""
    fe = TextFrontend()
    assert fe.encode("x ≥ 3.") == fe.encode("x greater than or equal to three.")
    assert fe.encode("٣ ≤ π.") == fe.encode("three less than or equal to pi.")


def test_the_normaliser_version_says_its_output_changed():
    assert NORMALIZER_VERSION >= 3

"""Normaliser: every expected string below was checked by reading it aloud as written."""

from __future__ import annotations

import logging

import pytest

from tts.text import number_words as numbers
from tts.text.cleaning import clean_characters
from tts.text.normalizer import normalize

CASES = [
    # cardinals, thousands separators, negatives, leading zeros
    ("I have 5 apples.", "I have five apples."),
    ("There are 1,234 people.", "There are one thousand two hundred thirty-four people."),
    ("Over 100,000,000 users.", "Over one hundred million users."),
    ("It was -5 degrees.", "It was minus five degrees."),
    ("He is -12 now.", "He is minus twelve now."),
    ("I have 007 bonds.", "I have zero zero seven bonds."),
    ("Numbers 1 2 3.", "Numbers one two three."),
    ("In 1,999 cases.", "In one thousand nine hundred ninety-nine cases."),
    # ordinals
    ("He came 1st, she came 22nd and they came 103rd.",
     "He came first, she came twenty-second and they came one hundred third."),
    ("The 2nd and 3rd and 11th and 21st.", "The second and third and eleventh and twenty-first."),
    # decimals
    ("Pi is 3.14.", "Pi is three point one four."),
    ("It is 0.5 m.", "It is zero point five meters."),
    ("Version 2.0.1 is out.", "Version two dot zero dot one is out."),
    # money
    ("It costs $5.", "It costs five dollars."),
    ("It costs $1.", "It costs one dollar."),
    ("It costs $5.50.", "It costs five dollars and fifty cents."),
    ("It cost $2.05.", "It cost two dollars and five cents."),
    ("It costs $0.99.", "It costs ninety-nine cents."),
    ("It costs $.50 now.", "It costs fifty cents now."),
    ("It costs $1.2 million.", "It costs one point two million dollars."),
    ("I paid $1,000,000.", "I paid one million dollars."),
    ("$10k salary", "ten thousand dollars salary"),
    ("$3bn deal", "three billion dollars deal"),
    ("It costs £3.", "It costs three pounds."),
    ("£1 coin", "one pound coin"),
    ("It costs £3.50.", "It costs three pounds and fifty pence."),
    ("It costs €10.", "It costs ten euros."),
    ("Cost: €1.50.", "Cost: one euro and fifty cents."),
    ("It's 100€.", "It's one hundred euros."),
    # percentages
    ("Growth was 45%.", "Growth was forty-five percent."),
    ("Growth was 3.5%.", "Growth was three point five percent."),
    ("-3.5% change", "minus three point five percent change"),
    ("A 20% tip on $100 is $20.", "A twenty percent tip on one hundred dollars is twenty dollars."),
    # years and decades
    ("In 1999 we met.", "In nineteen ninety-nine we met."),
    ("In 2005 we met.", "In two thousand five we met."),
    ("In 2019 we met.", "In twenty nineteen we met."),
    ("In 2000 we met.", "In two thousand we met."),
    ("In 1905 we met.", "In nineteen oh five we met."),
    ("Born in 1066.", "Born in ten sixty-six."),
    ("The 1900s were long.", "The nineteen hundreds were long."),
    ("Back in the 1990s.", "Back in the nineteen nineties."),
    ("The '90s were fun.", "The nineties were fun."),
    ("In the 80's.", "In the eighties."),
    # times
    ("Meet me at 3:30 pm.", "Meet me at three thirty p m."),
    ("Meet me at 12:00.", "Meet me at twelve o'clock."),
    ("Meet me at 3:05.", "Meet me at three oh five."),
    ("It's 10:45 AM.", "It's ten forty-five a m."),
    ("Meet me at 7 a.m. tomorrow.", "Meet me at seven a m tomorrow."),
    ("We left at 7 a.m.", "We left at seven a m."),
    ("It's 9:00 p.m. now.", "It's nine p m now."),
    ("Meet at 12:00 pm or 14:00 or 5pm.", "Meet at twelve p m or fourteen hundred or five p m."),
    # dates
    ("Born on Jan. 5, 1990.", "Born on January fifth, nineteen ninety."),
    ("March 3 was fine.", "March third was fine."),
    ("The 22nd of May.", "The twenty-second of May."),
    ("It was 2020-01-15.", "It was January fifteenth, twenty twenty."),
    # abbreviations
    ("Mr. Smith met Mrs. Jones.", "mister Smith met missus Jones."),
    ("Mr Smith and Dr Smith and Sen. Smith.", "mister Smith and doctor Smith and senator Smith."),
    ("Dr. Who lives on Elm Dr.", "doctor Who lives on Elm drive."),
    ("St. Louis is on Main St. nearby.", "saint Louis is on Main street nearby."),
    ("Mt. Everest is high.", "mount Everest is high."),
    ("Smith Jr. arrived.", "Smith junior arrived."),
    ("Apples vs. oranges.", "Apples versus oranges."),
    ("Cats, dogs, etc.", "Cats, dogs, et cetera."),
    ("Cats, dogs, etc. Then more.", "Cats, dogs, et cetera. Then more."),
    ("Fruit, e.g., apples, i.e. food.", "Fruit, for example, apples, that is food."),
    ("He lives at No. 5.", "He lives at number five."),
    ("No. I won't.", "No. I won't."),
    ("See Fig. 3.", "See figure three."),
    ("Shop at 5th Ave. Then go home.", "Shop at fifth avenue. Then go home."),
    ("The U.S.A. is big.", "The U S A is big."),
    # units
    ("It is 5 km away.", "It is five kilometers away."),
    ("It is 5km away.", "It is five kilometers away."),
    ("It weighs 1 kg.", "It weighs one kilogram."),
    ("It is 30 cm long.", "It is thirty centimeters long."),
    ("He's 6 ft tall.", "He's six feet tall."),
    ("Speed 60 mph.", "Speed sixty miles per hour."),
    ("Temperature 30°C.", "Temperature thirty degrees Celsius."),
    ("It has 16 GB of RAM.", "It has sixteen gigabytes of RAM."),
    # ranges
    ("Pages 10-20.", "Pages ten to twenty."),
    ("From 1990-1995.", "From nineteen ninety to nineteen ninety-five."),
    ("She ran 10-20 km.", "She ran ten to twenty kilometers."),
    ("He was No. 1 in 2019-2020.", "He was number one in twenty nineteen to twenty twenty."),
    # fractions and phone numbers
    ("Take 1/2 cup.", "Take one half cup."),
    ("Take 3/4 cup.", "Take three quarters cup."),
    ("We've got 2 1/2 hours.", "We've got two and a half hours."),
    ("It's 24/7.", "It's twenty-four seven."),
    ("Call (555) 123-4567 now.", "Call five five five, one two three, four five six seven now."),
    # symbols, letters with digits
    ("2 + 2 = 4", "two plus two equals four"),
    ("Rock & roll", "Rock and roll"),
    ("My iPhone 12 plays mp3 files in 3D.", "My iPhone twelve plays mp three files in three D."),
    ("The COVID-19 pandemic", "The COVID-nineteen pandemic"),
    # punctuation is kept as pauses, tidied
    ("Hello — world.", "Hello - world."),
    ("An em—dash and en–dash.", "An em - dash and en-dash."),
    ("Wait... what?!", "Wait. what?"),
    ("Really?? Yes!!", "Really? Yes!"),
    ("Hello!!! ... ok ,, fine ;", "Hello! ok, fine;"),
    ('He said "hi" (quietly).', "He said hi, quietly."),
    ("I don't know, I'm sure.", "I don't know, I'm sure."),
    ("A  tab\tand\nnewline.", "A tab and newline."),
    # characters
    ("Café déjà vu", "Cafe deja vu"),
    ("Hello 🙂 world 中文", "Hello world"),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_enough_cases() -> None:
    assert len(CASES) >= 60


def test_output_has_no_digits_or_symbols() -> None:
    text = "On 3/4/2021 at 10:15 pm, 45% of 1,200 users paid $3.99 (£2.50) for 2 GB & more!"
    out = normalize(text)
    assert not any(c.isdigit() for c in out), out
    assert set(out) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ' ,.?!;:-")
    assert out == (
        "On March fourth, twenty twenty-one at ten fifteen p m, forty-five percent of one thousand "
        "two hundred users paid three dollars and ninety-nine cents, two pounds and fifty pence, "
        "for two gigabytes and more!"
    )


def test_dropped_characters_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tts.text.cleaning"):
        assert clean_characters("ok 🙂\x07 ok") == "ok    ok"
    assert "U+1F642" in caplog.text and "U+0007" in caplog.text


def test_transliteration_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert clean_characters("Zoë’s naïve façade “here”") == "Zoe's naive facade \"here\""
    assert caplog.text == ""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2005", "two thousand five"),
        ("1234567", "one million two hundred thirty-four thousand five hundred sixty-seven"),
        ("-40", "minus forty"),
        ("0", "zero"),
        ("0042", "zero zero four two"),
    ],
)
def test_cardinal_is_us_style_without_commas(value: str, expected: str) -> None:
    assert numbers.cardinal(value) == expected


def test_year_plural() -> None:
    assert numbers.plural(numbers.year(1990)) == "nineteen nineties"
    assert numbers.plural(numbers.year(1999)) == "nineteen ninety-nines"
    assert numbers.plural(numbers.cardinal(60)) == "sixties"

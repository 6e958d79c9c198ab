"""SSML (tts.text.ssml): each supported tag, nesting, malformed documents with their position, the XML attacks
(entity expansion, billion laughs, external entities, DOCTYPE) refused, unknown tags refused, plain text left
alone; the segments' text read by the real frontend."""

from __future__ import annotations

import math

import pytest

from tts.text.errors import EmptyTextError, PronunciationError, TextError
from tts.text.frontend import TextFrontend
from tts.text.ssml import (BREAK_STRENGTHS, MAX_BREAK_S, MAX_SPEED, MAX_SSML_CHARS, MIN_SPEED, PARAGRAPH_PAUSE_S,
                           PauseSegment, SpeechSegment, SsmlDocument, SsmlError, is_ssml, parse_ssml)


@pytest.fixture(scope="module")
def frontend() -> TextFrontend:
    return TextFrontend(espeak_executable=None)


def segments(body: str) -> tuple:
    return parse_ssml(f"<speak>{body}</speak>").segments


def speech(body: str) -> str:
    """The one speech segment of `body`."""
    (segment,) = segments(body)
    assert isinstance(segment, SpeechSegment)
    return segment.text


def error(document: str) -> SsmlError:
    with pytest.raises(SsmlError) as caught:
        parse_ssml(document)
    return caught.value


# -- plain text and <speak> -------------------------------------------------------------------------
def test_is_ssml_only_for_speak_documents() -> None:
    assert is_ssml("<speak>Hi</speak>")
    assert is_ssml("  \n<speak version='1.1' xmlns='http://www.w3.org/2001/10/synthesis'>Hi</speak>")
    assert is_ssml('<?xml version="1.0" encoding="UTF-8"?>\n<speak>Hi</speak>')
    assert is_ssml("<speak/>")
    assert is_ssml("\ufeff<speak>Hi</speak>")  # a byte-order mark read from a file
    assert not is_ssml("Hello <speak>there</speak>")
    assert not is_ssml("<speaker>Hi</speaker>")
    assert not is_ssml("I <3 <b>tags</b> & 5 < 6")


def test_text_and_attributes_of_speak() -> None:
    document = parse_ssml('<?xml version="1.0"?><speak version="1.1" xml:lang="en-US" '
                          'xmlns="http://www.w3.org/2001/10/synthesis">\n  Hello,\n   world.  </speak>')
    assert document == SsmlDocument((SpeechSegment("Hello, world.", 1.0, 0.0),))


def test_predefined_entities_and_character_references_are_text() -> None:
    assert speech("Tom &amp; Jerry &lt;3 caf&#233; &#x41;") == "Tom & Jerry <3 café A"


def test_nothing_to_speak_is_empty_text() -> None:
    for body in ("", "   \n ", '<break time="1s"/>', '<mark name="a"/>', "<p> </p>"):
        with pytest.raises(EmptyTextError):
            parse_ssml(f"<speak>{body}</speak>")
    with pytest.raises(EmptyTextError):
        parse_ssml("<speak/>")


# -- <break> ---------------------------------------------------------------------------------------
def test_break_time_and_strength() -> None:
    assert segments('One <break time="500ms"/> two <break time="1.5s"/> three') == (
        SpeechSegment("One"), PauseSegment(0.5), SpeechSegment("two"), PauseSegment(1.5), SpeechSegment("three"))
    assert segments('a <break strength="strong"/> b')[1] == PauseSegment(BREAK_STRENGTHS["strong"])
    assert segments("a <break/> b")[1] == PauseSegment(BREAK_STRENGTHS["medium"])
    assert segments('a <break strength="none"/> b')[1] == PauseSegment(0.0)
    assert segments('a <break time="250ms" strength="x-strong"/> b')[1] == PauseSegment(0.25)  # time wins
    assert segments('a <break time="2 s"></break> b')[1] == PauseSegment(2.0)


def test_break_is_clamped() -> None:
    assert segments('a <break time="3600s"/> b')[1] == PauseSegment(MAX_BREAK_S)


def test_break_before_and_after_the_text_is_kept() -> None:
    assert segments('<break time="1s"/>Hi<break time="2s"/>') == (PauseSegment(1.0), SpeechSegment("Hi"),
                                                                  PauseSegment(2.0))


# -- <say-as> --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "expected"), [
    ('<say-as interpret-as="characters">abc</say-as>', "A B C"),
    ('<say-as interpret-as="spell-out">R2-D2</say-as>', "R two D two"),
    ('<say-as interpret-as="digits">2024</say-as>', "two zero two four"),
    ('<say-as interpret-as="cardinal">2024</say-as>', "two thousand twenty-four"),
    ('<say-as interpret-as="cardinal">-1,234.5</say-as>', "minus one thousand two hundred thirty-four point five"),
    ('<say-as interpret-as="ordinal">21</say-as>', "twenty-first"),
    ('<say-as interpret-as="ordinal">3rd</say-as>', "third"),
    ('<say-as interpret-as="date" format="mdy">1/5/2020</say-as>', "January fifth, twenty twenty"),
    ('<say-as interpret-as="date" format="dmy">5.1.98</say-as>', "the fifth of January, ninety-eight"),
    ('<say-as interpret-as="date" format="ymd">2020-01-05</say-as>', "January fifth, twenty twenty"),
    ('<say-as interpret-as="date" format="my">Jan 2021</say-as>', "January twenty twenty-one"),
    ('<say-as interpret-as="date">2020-01-05</say-as>', "January fifth, 2020"),
    ('<say-as interpret-as="time">10:30 a.m.</say-as>', "ten thirty a m"),
    ('<say-as interpret-as="telephone">(555) 123-4567</say-as>', "five five five, one two three, four five six seven"),
    ('<say-as interpret-as="telephone">+1 23</say-as>', "plus one two three"),
])
def test_say_as(body: str, expected: str) -> None:
    assert speech(f"Read {body} now") == f"Read {expected} now"


def test_say_as_is_read_by_the_frontend(frontend: TextFrontend) -> None:
    text = speech('<say-as interpret-as="characters">ok</say-as>')
    assert frontend.decode(frontend.encode(text)) == ["OW1", " ", "K", "EY1"]
    digits = speech('<say-as interpret-as="digits">12</say-as>')
    assert frontend.decode(frontend.encode(digits)) == frontend.decode(frontend.encode("one two"))


# -- <phoneme> and <sub> ----------------------------------------------------------------------------
def test_phoneme_becomes_inline_phonemes(frontend: TextFrontend) -> None:
    text = speech('I say <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme>, '
                  '<phoneme alphabet="x-arpabet" ph="T AH0 M EY1 T OW2">tomato</phoneme>.')
    assert text == "I say [[/təˈmɑːtoʊ/]], [[T AH0 M EY1 T OW2]]."
    symbols = frontend.decode(frontend.encode(text))
    assert symbols == ["AY1", " ", "S", "EY1", " ", "T", "AH0", "M", "AA1", "T", "OW0", ",", " ",
                       "T", "AH0", "M", "EY1", "T", "OW2", "."]
    assert speech('<phoneme ph="/ˈdʒɪf/">gif</phoneme>') == "[[/ˈdʒɪf/]]"  # ipa is the default alphabet


def test_phoneme_errors(frontend: TextFrontend) -> None:
    assert "line 2, column 3" in str(error('<speak>\n  <phoneme ph="ʁu">roux</phoneme></speak>'))
    assert "'ʁ'" in str(error('<speak><phoneme ph="ʁu">roux</phoneme></speak>'))
    assert "alphabet='x-sampa'" in str(error('<speak><phoneme alphabet="x-sampa" ph="h@">a</phoneme></speak>'))
    assert "without brackets" in str(error('<speak><phoneme alphabet="x-arpabet" ph="AA1]] [[B">a</phoneme></speak>'))
    assert "give the phonemes" in str(error("<speak><phoneme>a</phoneme></speak>"))
    # ARPAbet is the model's: checked when the text is encoded
    text = speech('<phoneme alphabet="x-arpabet" ph="HH XX1">a</phoneme>')
    with pytest.raises(PronunciationError, match="'XX1'"):
        frontend.encode(text)


def test_sub() -> None:
    assert speech('The <sub alias="World Wide Web">WWW</sub> Consortium') == "The World Wide Web Consortium"
    assert "needs an alias" in str(error("<speak><sub>WWW</sub></speak>"))


# -- <prosody> --------------------------------------------------------------------------------------
def test_prosody_rate_and_pitch() -> None:
    assert segments('a <prosody rate="slow" pitch="+2st">b</prosody> c') == (
        SpeechSegment("a"), SpeechSegment("b", 0.75, 2.0), SpeechSegment("c"))
    cases = {'rate="x-fast"': 1.5, 'rate="150%"': 1.5, 'rate="+20%"': 1.2, 'rate="-20%"': 0.8, 'rate="0.9"': 0.9}
    for attribute, speed in cases.items():
        (segment,) = segments(f"<prosody {attribute}>x</prosody>")
        assert segment.speed == pytest.approx(speed), attribute
    pitches = {'pitch="x-high"': 6.0, 'pitch="low"': -3.0, 'pitch="-1.5st"': -1.5, 'pitch="+10%"': 12 * math.log2(1.1),
               'pitch="default"': 0.0}
    for attribute, shift in pitches.items():
        (segment,) = segments(f"<prosody {attribute}>x</prosody>")
        assert segment.pitch_shift == pytest.approx(shift), attribute


def test_nested_prosody_multiplies_and_adds() -> None:
    got = segments('<prosody rate="50%" pitch="+2st">a <prosody rate="150%" pitch="+3st">b '
                   '<prosody rate="fast" pitch="low">c</prosody></prosody> d</prosody>')
    assert got == (SpeechSegment("a", 0.5, 2.0), SpeechSegment("b", 0.75, 5.0), SpeechSegment("c", 1.25, -3.0),
                   SpeechSegment("d", 0.5, 2.0))


def test_prosody_is_clamped() -> None:
    (slow,) = segments('<prosody rate="1%">a</prosody>')
    (fast,) = segments('<prosody rate="10"><prosody rate="10">a</prosody></prosody>')
    (high,) = segments('<prosody pitch="+30st">a</prosody>')
    assert (slow.speed, fast.speed, high.pitch_shift) == (MIN_SPEED, MAX_SPEED, 12.0)


def test_equal_prosody_is_merged() -> None:
    assert segments('a <prosody rate="slow">b</prosody><prosody rate="slow"> c</prosody> '
                    '<prosody rate="fast"> </prosody> d <prosody rate="100%">e</prosody>') == (
        SpeechSegment("a"), SpeechSegment("b c", 0.75, 0.0), SpeechSegment("d e"))


# -- values refused, each named --------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "expected"), [
    ('a <break time="fast"/>', "time='fast'"),
    ('a <break time="-1s"/>', "time='-1s'"),
    ('a <break strength="loud"/>', "strength='loud'"),
    ('a <break duration="1s"/>', "does not support the attribute(s) duration"),
    ("a <break>text</break>", "<break> holds no text"),
    ('<say-as interpret-as="cardinal">many</say-as>', "cannot read 'many'"),
    ('<say-as interpret-as="ordinal">first</say-as>', "cannot read 'first'"),
    ('<say-as interpret-as="digits">none</say-as>', "cannot read 'none'"),
    ('<say-as interpret-as="currency">$5</say-as>', "interpret-as='currency'"),
    ("<say-as>5</say-as>", "interpret-as=None"),
    ('<say-as interpret-as="date" format="qq">5</say-as>', "format='qq'"),
    ('<say-as interpret-as="date" format="mdy">1/5</say-as>', "needs 3 field(s)"),
    ('<say-as interpret-as="date" format="mdy">13/5/2020</say-as>', "'13' is not a month"),
    ('<say-as interpret-as="cardinal"><sub alias="x">5</sub></say-as>', "<sub> inside <say-as>"),
    ('<prosody rate="quick">a</prosody>', "rate='quick'"),
    ('<prosody rate="0">a</prosody>', "must be above 0"),
    ('<prosody pitch="120Hz">a</prosody>', "Hz values are not supported"),
    ('<prosody pitch="-100%">a</prosody>', "lower the pitch to nothing"),
    ('<prosody volume="loud">a</prosody>', "does not support the attribute(s) volume"),
])
def test_bad_values_are_named(body: str, expected: str) -> None:
    assert expected in str(error(f"<speak>{body}</speak>"))


# -- <p>, <s>, <mark> ---------------------------------------------------------------------------------
def test_sentences_and_paragraphs() -> None:
    assert segments("<p><s>One</s><s>Two!</s></p><p>Three, </p>Four") == (
        SpeechSegment("One."), SpeechSegment("Two!"), PauseSegment(PARAGRAPH_PAUSE_S), SpeechSegment("Three."),
        PauseSegment(PARAGRAPH_PAUSE_S), SpeechSegment("Four"))
    assert segments("Intro <p>Body</p>") == (SpeechSegment("Intro."), PauseSegment(PARAGRAPH_PAUSE_S),
                                           SpeechSegment("Body."))
    assert segments('<s>He said "yes"</s>')[0] == SpeechSegment('He said "yes".')


def test_mark_is_ignored() -> None:
    assert speech('Go <mark name="here"/>now') == "Go now"


def test_segments_with_inline_phonemes_are_plain_text_for_the_frontend(frontend: TextFrontend) -> None:
    document = parse_ssml('<speak><p>Hello <phoneme ph="wɝld">world</phoneme>.</p>'
                          '<break time="1s"/><prosody rate="slow"><say-as interpret-as="cardinal">3</say-as> '
                          '<sub alias="doctors">Drs.</sub></prosody></speak>')
    texts = [s.text for s in document.segments if isinstance(s, SpeechSegment)]
    assert texts == ["Hello [[/wɝld/]].", "three doctors"]
    assert [frontend.decode(frontend.encode(t)) for t in texts] == [
        ["HH", "AH0", "L", "OW1", " ", "W", "ER0", "L", "D", "."],
        ["TH", "R", "IY1", " ", "D", "AA1", "K", "T", "ER0", "Z"]]


# -- refused documents ---------------------------------------------------------------------------------
def test_unknown_tags_are_refused_never_spoken() -> None:
    e = error("<speak>Hello <emphasis>big</emphasis> world</speak>")
    assert "<emphasis>" in str(e) and (e.line, e.column) == (1, 14)
    assert "<foo:bar>" in str(error("<speak><foo:bar/></speak>"))
    assert "plays no audio" in str(error('<speak>\n<audio src="http://example.com/a.mp3">a</audio></speak>'))
    assert "root element must be <speak>" in str(error("<?xml version='1.0'?><p>hi</p>"))
    assert "<speak> inside <speak>" in str(error("<speak><speak>a</speak></speak>"))


@pytest.mark.parametrize(("document", "line", "column", "expected"), [
    ("<speak>Hello</spek>", 1, 15, "mismatched tag"),  # the name of the wrong end tag
    ("<speak>\n  a\n  <break time='1s'>\n</speak>", 4, 3, "mismatched tag"),
    ("<speak>Hello", 1, 13, "no element found"),
    ("<speak>a & b</speak>", 1, 11, "not well-formed"),
    ("<speak>Hi</speak> trailing", 1, 19, "junk after document element"),
    ("<speak>&nbsp;</speak>", 1, 8, "undefined entity"),
    ("<speak><break time=1s/></speak>", 1, 20, "not well-formed"),
])
def test_malformed_xml_gives_its_position(document: str, line: int, column: int, expected: str) -> None:
    e = error(document)
    assert (e.line, e.column) == (line, column)
    assert str(e).startswith(f"SSML line {line}, column {column}: malformed XML: {expected}")
    assert isinstance(e, TextError)


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE speak [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<speak>&lol9;</speak>"""


@pytest.mark.parametrize("document", [
    BILLION_LAUGHS,
    '<!DOCTYPE speak [<!ENTITY name "Bob">]><speak>Hi &name;</speak>',
    '<!DOCTYPE speak [<!ENTITY secret SYSTEM "file:///etc/passwd">]><speak>&secret;</speak>',
    '<!DOCTYPE speak SYSTEM "http://example.com/speak.dtd"><speak>Hi</speak>',
    '<!DOCTYPE speak [<!ENTITY % p SYSTEM "http://example.com/x.dtd"> %p;]><speak>Hi</speak>',
    "<!DOCTYPE speak><speak>Hi</speak>",
])
def test_doctype_and_entities_are_refused(document: str) -> None:
    e = error(document)
    assert "DOCTYPE is not allowed" in str(e)
    assert e.line >= 1 and e.column >= 1


def test_characters_that_are_not_text() -> None:
    e = error("<speak>\nab\ud800</speak>")
    assert (e.line, e.column) == (2, 3) and "U+D800" in str(e)
    e = error("<speak>a\x00b</speak>")
    assert (e.line, e.column) == (1, 9) and "malformed XML" in str(e)


def test_size_limit() -> None:
    document = "<speak>" + "a " * (MAX_SSML_CHARS // 2) + "</speak>"
    e = error(document)
    assert f"over the limit of {MAX_SSML_CHARS}" in str(e)


def test_depth_limit() -> None:
    assert "nested deeper" in str(error("<speak>" + "<s>" * 100 + "a" + "</s>" * 100 + "</speak>"))


def test_hostile_text_is_spoken_as_text() -> None:
    assert speech("<![CDATA[<speak>x</speak> & ]]>") == "<speak>x</speak> &"
    assert speech("a<!-- a comment -->b") == "ab"
    assert speech("<?php system('ls') ?>fine") == "fine"

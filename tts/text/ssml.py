"""SSML: a documented subset of the W3C Speech Synthesis Markup Language, read into plain-text segments.

`parse_ssml(text)` turns a `<speak>` document into an `SsmlDocument`: a sequence of `SpeechSegment`s (plain text
the frontend reads, with the speed and pitch shift of their `<prosody>`) and `PauseSegment`s (breaks).  SSML is
never spoken as text: a tag this module does not know is an `SsmlError` naming it, and malformed XML is an
`SsmlError` with its line and column.  Plain text stays plain: only input that starts with `<speak` is SSML
(`is_ssml`; a caller may also wrap text in `<speak>` on request).

Safety.  The document comes from anyone (the speech server's clients), so it is read by expat with every route to
entity expansion closed: a DOCTYPE (where entities, and so "billion laughs" and external entities, are declared)
is refused as it starts, before its internal subset is read; entity declarations and external entity references
are refused too (defence in depth); parameter entities are never parsed; an undeclared entity ("&foo;") is
expat's own error.  The five predefined entities (&amp; &lt; ...) and character references (&#233;) are ordinary
XML and are read.  Documents longer than MAX_SSML_CHARS characters or nested deeper than MAX_DEPTH are refused.

The subset (everything else is an SsmlError):
- `<speak>`: the root; its attributes (version, xmlns, xml:lang) are accepted and ignored.
- `<break time="500ms|1.5s" strength="none|x-weak|weak|medium|strong|x-strong"/>`: a pause of `time` (wins when
  both are given), else of the strength's seconds (BREAK_STRENGTHS; a bare `<break/>` is "medium"), at most
  MAX_BREAK_S.  "none" gives a PauseSegment of 0 s: no pause where the sentence rules would put one.
- `<say-as interpret-as="..." format="...">text</say-as>`: rendered here to words the frontend reads:
  characters / spell-out: letters one by one (digits as their names); digits: digit by digit;
  cardinal ("-1,234.5"), ordinal ("21", "21st"): number words; date: with `format` (mdy dmy ymd ydm md dm ym my y
  m d: the order of the numbers, separated by anything) read as "January fifth, twenty twenty" or "the fifth of
  January, ...", without one the normaliser's date reading (tts.text.dates); time: the normaliser's reading of
  times ("10:30 a.m."); telephone: the normaliser's telephone reading (tts.text.telephone), any other digits
  digit by digit.
- `<phoneme alphabet="ipa|x-arpabet" ph="...">word</phoneme>`: spoken as the inline phonemes `[[/ph/]]` (IPA) or
  `[[ph]]` (ARPAbet of the model's table, checked when encoded); the word inside is not spoken.
- `<sub alias="...">text</sub>`: the alias is spoken instead of the text.
- `<prosody rate="..." pitch="...">`: a speed multiplier and a pitch shift in semitones for the text inside.
  rate: a label (RATE_LABELS, absolute), "N%" (N/100 of the enclosing rate, as in SSML 1.1: "150%" is 1.5x),
  "+N%"/"-N%" (the enclosing rate changed by N%), or a bare number (a multiplier of the enclosing rate); the
  result is clamped to [MIN_SPEED, MAX_SPEED].  pitch: a label (PITCH_LABELS, absolute semitones), "+Nst"/"-Nst"
  (semitones added to the enclosing shift), "+N%"/"-N%" (the frequency changed by N%: 12*log2(1 + N/100)
  semitones added); clamped to +-MAX_PITCH_SHIFT.  Hz values, volume, contour, range and duration are refused.
- `<p>`, `<s>`: paragraph and sentence boundaries: the text before the boundary ends its segment, with a final
  "." if it has no terminal punctuation; between paragraphs a PauseSegment of PARAGRAPH_PAUSE_S (added to any
  break there).
- `<mark name="..."/>`: accepted and ignored (no events are reported).  `<audio>` is refused: only text is spoken.

Text between tags is spoken; adjacent text with equal prosody is one segment (whitespace collapsed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.parsers import expat

from tts.text import number_words as numbers
from tts.text.abbreviations import MONTH_FORMS, MONTHS, SYMBOL_WORDS
from tts.text.dates import expand_dates
from tts.text.errors import EmptyTextError, PronunciationError, TextError
from tts.text.lexicon import parse_pronunciation
from tts.text.normalizer import normalize
from tts.text.telephone import expand_telephone

MAX_SSML_CHARS = 1_000_000  # a long book chapter; far above the speech server's 4096-character input
MAX_DEPTH = 64  # nested elements
MAX_BREAK_S = 10.0  # longest single <break>: a longer one is clamped (silence is cheap to ask, costly to send)
PARAGRAPH_PAUSE_S = 0.75  # between <p> paragraphs: longer than the pipeline's sentence pause (0.25 s)
BREAK_STRENGTHS: dict[str, float] = {
    "none": 0.0, "x-weak": 0.1, "weak": 0.2, "medium": 0.4, "strong": 0.75, "x-strong": 1.2,
}
RATE_LABELS: dict[str, float] = {
    "x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5,
}
PITCH_LABELS: dict[str, float] = {  # semitones
    "x-low": -6.0, "low": -3.0, "medium": 0.0, "default": 0.0, "high": 3.0, "x-high": 6.0,
}
MIN_SPEED, MAX_SPEED = 0.25, 4.0
MAX_PITCH_SHIFT = 12.0  # semitones, either way
SAY_AS = ("characters", "spell-out", "cardinal", "ordinal", "digits", "date", "time", "telephone")
DATE_FORMATS = ("mdy", "dmy", "ymd", "ydm", "md", "dm", "ym", "my", "y", "m", "d")
PHONEME_ALPHABETS = ("ipa", "x-arpabet")
# Attributes each element accepts (besides xml:lang / xml:id / id, accepted everywhere and ignored); None: any.
_ATTRIBUTES: dict[str, frozenset[str] | None] = {
    "speak": None,
    "break": frozenset({"time", "strength"}),
    "say-as": frozenset({"interpret-as", "format", "detail"}),
    "phoneme": frozenset({"alphabet", "ph"}),
    "sub": frozenset({"alias"}),
    "prosody": frozenset({"rate", "pitch"}),
    "p": frozenset(),
    "s": frozenset(),
    "mark": frozenset({"name"}),
}
_ANYWHERE = frozenset({"xml:lang", "xml:id", "id"})
_REFUSED = {
    "audio": "this synthesiser speaks text only and plays no audio files; give the text to say instead",
}

_SSML_START = re.compile(r"\ufeff?\s*(?:<\?xml[^>]*\?>\s*)?<speak[\s/>]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TIME = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)")
_PERCENT = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)%")
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_SEMITONES = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)st")
_CARDINAL = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+", re.ASCII)
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)?", re.IGNORECASE | re.ASCII)
_DIGITS = re.compile(r"\d+", re.ASCII)
_SPACE_BEFORE_MARK = re.compile(r" ([,;:.!?])(?= |$)")  # "fifth ;" of a say-as' padding -> "fifth;"
_TERMINAL = ".!?\u2026"
_CLOSERS = "\"')]}\u00bb\u201d\u2019"


class SsmlError(TextError):
    """Malformed or unsupported SSML; the message starts with the line and column (1-based) where it is."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"SSML line {line}, column {column}: {message}")
        self.line = line
        self.column = column


@dataclass(frozen=True)
class SpeechSegment:
    """Plain text the frontend reads (it may contain inline phonemes `[[...]]`), with its prosody: `speed` a
    multiplier of the run's speed (1.0: unchanged), `pitch_shift` semitones added to the run's shift."""

    text: str
    speed: float = 1.0
    pitch_shift: float = 0.0


@dataclass(frozen=True)
class PauseSegment:
    """A silence of `seconds` (a `<break>`, or the pause between `<p>` paragraphs)."""

    seconds: float


Segment = SpeechSegment | PauseSegment


@dataclass(frozen=True)
class SsmlDocument:
    """A parsed SSML document: its segments in order (at least one SpeechSegment)."""

    segments: tuple[Segment, ...]


def is_ssml(text: str) -> bool:
    """True when `text` is an SSML document: its first non-space characters are `<speak` (after an optional XML
    declaration `<?xml ...?>`).  Anything else is plain text, whatever tags it contains."""
    return _SSML_START.match(text) is not None


def parse_ssml(text: str) -> SsmlDocument:
    """The segments of the SSML document `text` (see the module's documentation for the subset).

    Raises SsmlError (malformed XML, a DOCTYPE or entity declaration, an unknown tag or attribute value, a
    document over MAX_SSML_CHARS), EmptyTextError (nothing to speak: no text, only breaks).  Text with nothing
    speakable after normalisation ("???") is found when the segments are encoded (UnspeakableTextError)."""
    if len(text) > MAX_SSML_CHARS:
        line = text.count("\n", 0, MAX_SSML_CHARS) + 1
        raise SsmlError(f"the document is {len(text)} characters long, over the limit of {MAX_SSML_CHARS}",
                        line, MAX_SSML_CHARS - text.rfind("\n", 0, MAX_SSML_CHARS))
    surrogate = _SURROGATE.search(text)
    if surrogate is not None:  # not text at all (JSON lets a client send one): expat could not even be given it
        start = surrogate.start()
        raise SsmlError(f"character U+{ord(surrogate.group()):04X} is a lone surrogate, not text",
                        text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start))
    return _Reader().read(text)


@dataclass
class _Frame:
    """An open element: its tag, where it starts, the prosody inside it, and what its text is for: "speak"
    (spoken), "capture" (say-as: collected, rendered at the end), "replace" (sub, phoneme: not spoken),
    "empty" (break, mark: none allowed)."""

    tag: str
    line: int
    column: int
    speed: float
    pitch: float
    mode: str = "speak"
    attrs: dict[str, str] = field(default_factory=dict)
    captured: list[str] = field(default_factory=list)


class _Reader:
    """One document's expat parser and the segments it builds."""

    def __init__(self) -> None:
        # encoding="utf-8": the text is a str; a declaration naming another encoding must not re-decode it
        parser = expat.ParserCreate(encoding="utf-8")
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._doctype
        parser.EntityDeclHandler = self._entity
        parser.ExternalEntityRefHandler = self._external_entity
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text
        self.parser = parser
        self.stack: list[_Frame] = []
        self.segments: list[Segment] = []
        self.pending: list[str] = []  # text of the segment being built
        self.prosody = (1.0, 0.0)  # of the pending text
        self.paragraph_pause = False  # a <p> boundary passed since the last text
        self.spoken = False  # a SpeechSegment was made

    def read(self, text: str) -> SsmlDocument:
        try:
            self.parser.Parse(text, True)
        except expat.ExpatError as e:
            raise SsmlError(f"malformed XML: {expat.ErrorString(e.code)}", e.lineno, e.offset + 1) from None
        if not self.spoken:
            raise EmptyTextError()
        return SsmlDocument(tuple(self.segments))

    # -- errors ---------------------------------------------------------------------------
    def _error(self, message: str, frame: _Frame | None = None) -> SsmlError:
        if frame is not None:
            return SsmlError(message, frame.line, frame.column)
        return SsmlError(message, self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber + 1)

    def _doctype(self, *_: object) -> None:
        raise self._error("a DOCTYPE is not allowed in SSML (entity declarations are refused: they are how "
                          "'billion laughs' and external entities attack XML readers)")

    def _entity(self, name: str, *_: object) -> None:
        raise self._error(f"entity declaration {name!r} refused")

    def _external_entity(self, *_: object) -> int:
        raise self._error("external entities are refused")

    # -- elements -------------------------------------------------------------------------
    def _start(self, tag: str, attrs: dict[str, str]) -> None:
        parent = self.stack[-1] if self.stack else None
        frame = _Frame(tag, self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber + 1,
                       parent.speed if parent else 1.0, parent.pitch if parent else 0.0, attrs=attrs)
        self._check_place(tag, parent, frame)
        allowed = _ATTRIBUTES[tag]
        if allowed is not None:
            extra = sorted(set(attrs) - allowed - _ANYWHERE)
            if extra:
                raise self._error(f"<{tag}> does not support the attribute(s) {', '.join(extra)}"
                                  + (f" (supported: {', '.join(sorted(allowed))})" if allowed else ""), frame)
        if tag == "break":
            frame.mode = "empty"
            self._flush(final_stop=False)
            self.segments.append(PauseSegment(self._break_seconds(attrs, frame)))
        elif tag == "mark":
            frame.mode = "empty"
        elif tag == "say-as":
            interpret = attrs.get("interpret-as")
            if interpret not in SAY_AS:
                raise self._error(f"<say-as interpret-as={interpret!r}> is not supported; supported: "
                                  f"{', '.join(SAY_AS)}", frame)
            if interpret == "date" and attrs.get("format") not in (None, *DATE_FORMATS):
                raise self._error(f"<say-as interpret-as=\"date\" format={attrs['format']!r}>: the format must be "
                                  f"one of {', '.join(DATE_FORMATS)}", frame)
            frame.mode = "capture"
        elif tag == "phoneme":
            frame.mode = "replace"
            self._add(f" {self._inline_phonemes(attrs, frame)} ", frame)
        elif tag == "sub":
            if "alias" not in attrs:
                raise self._error("<sub> needs an alias attribute (the text to speak)", frame)
            frame.mode = "replace"
            self._add(attrs["alias"], frame)
        elif tag == "prosody":
            frame.speed = self._rate(attrs.get("rate"), frame)
            frame.pitch = self._pitch(attrs.get("pitch"), frame)
        elif tag in ("p", "s"):
            self._boundary(tag)
        self.stack.append(frame)

    def _check_place(self, tag: str, parent: _Frame | None, frame: _Frame) -> None:
        if tag in _REFUSED:
            raise self._error(f"<{tag}> is not supported: {_REFUSED[tag]}", frame)
        if tag not in _ATTRIBUTES:
            raise self._error(f"unknown or unsupported SSML element <{tag}>; supported: "
                              f"{', '.join(f'<{t}>' for t in _ATTRIBUTES)}", frame)
        if parent is None and tag != "speak":
            raise self._error(f"the document's root element must be <speak>, not <{tag}>", frame)
        if parent is not None and tag == "speak":
            raise self._error("<speak> inside <speak>", frame)
        if parent is not None and parent.mode != "speak":
            raise self._error(f"<{tag}> inside <{parent.tag}>, which holds only text", frame)
        if len(self.stack) >= MAX_DEPTH:
            raise self._error(f"elements nested deeper than {MAX_DEPTH}", frame)

    def _end(self, tag: str) -> None:
        frame = self.stack.pop()
        if frame.mode == "capture":
            self._add(f" {self._say_as(''.join(frame.captured), frame)} ", frame)
        elif tag in ("p", "s"):
            self._boundary(tag)
        elif tag == "speak":
            self._flush(final_stop=False)

    def _text(self, data: str) -> None:
        frame = self.stack[-1]
        if frame.mode == "capture":
            frame.captured.append(data)
        elif frame.mode == "empty" and data.strip():
            raise self._error(f"<{frame.tag}> holds no text")
        elif frame.mode == "speak":
            self._add(data, frame)

    # -- segments -------------------------------------------------------------------------
    def _add(self, text: str, frame: _Frame) -> None:
        """Text spoken with `frame`'s prosody: ends the pending segment when the prosody changes."""
        if not text.strip():
            self.pending.append(text)  # spacing between words, whatever its prosody
            return
        if self.paragraph_pause and self.spoken:
            self._flush(final_stop=True)
            self.segments.append(PauseSegment(PARAGRAPH_PAUSE_S))
        self.paragraph_pause = False
        if (frame.speed, frame.pitch) != self.prosody:
            self._flush(final_stop=False)
            self.prosody = (frame.speed, frame.pitch)
        self.pending.append(text)

    def _boundary(self, tag: str) -> None:
        """A <s> or <p> starts or ends: the text before it is a segment ending in a stop."""
        self._flush(final_stop=True)
        if tag == "p":
            self.paragraph_pause = True

    def _flush(self, final_stop: bool) -> None:
        text = _SPACE_BEFORE_MARK.sub(r"\1", " ".join("".join(self.pending).split()))
        self.pending = []
        if not text:
            return
        if final_stop and text.rstrip(_CLOSERS)[-1:] not in tuple(_TERMINAL):
            text = text.rstrip(",;:- ") + "."
        self.segments.append(SpeechSegment(text, *self.prosody))
        self.spoken = True

    # -- attribute values -------------------------------------------------------------------
    def _break_seconds(self, attrs: dict[str, str], frame: _Frame) -> float:
        if "time" in attrs:
            m = _TIME.fullmatch(attrs["time"].strip())
            if m is None:
                raise self._error(f"<break time={attrs['time']!r}>: give seconds or milliseconds, e.g. \"1.5s\" "
                                  "or \"500ms\"", frame)
            seconds = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
            return min(seconds, MAX_BREAK_S)
        strength = attrs.get("strength", "medium")
        if strength not in BREAK_STRENGTHS:
            raise self._error(f"<break strength={strength!r}>: one of {', '.join(BREAK_STRENGTHS)}", frame)
        return BREAK_STRENGTHS[strength]

    def _rate(self, value: str | None, frame: _Frame) -> float:
        rate = self._prosody("rate", value, RATE_LABELS, frame.speed, _relative_rate, frame,
                             "a percentage (\"80%\", \"+10%\") or a multiplier (\"1.2\")")
        if not rate > 0:
            raise self._error(f"<prosody rate={value!r}> gives a rate of {rate:g}: it must be above 0", frame)
        return min(max(rate, MIN_SPEED), MAX_SPEED)

    def _pitch(self, value: str | None, frame: _Frame) -> float:
        pitch = self._prosody("pitch", value, PITCH_LABELS, frame.pitch, _relative_pitch, frame,
                              "semitones (\"+2st\", \"-3st\") or a percentage (\"+10%\"); Hz values are not supported")
        if math.isnan(pitch):
            raise self._error(f"<prosody pitch={value!r}> would lower the pitch to nothing", frame)
        return min(max(pitch, -MAX_PITCH_SHIFT), MAX_PITCH_SHIFT)

    def _prosody(self, name: str, value: str | None, labels: dict[str, float], inherited: float,
                 relative: Callable[[str, float], float | None], frame: _Frame, forms: str) -> float:
        """A <prosody> attribute's value: the enclosing one when absent, a label's (absolute), or `relative`'s
        reading of the text against the enclosing value (None: not of its forms, an SsmlError listing them)."""
        if value is None:
            return inherited
        v = value.strip().lower()
        result = labels[v] if v in labels else relative(v, inherited)
        if result is None:
            raise self._error(f"<prosody {name}={value!r}>: a label ({', '.join(labels)}), {forms}", frame)
        return result

    def _inline_phonemes(self, attrs: dict[str, str], frame: _Frame) -> str:
        """`[[...]]` text of a <phoneme>; IPA is checked now (its mapping needs no model), ARPAbet when encoded."""
        alphabet = attrs.get("alphabet", "ipa")
        if alphabet not in PHONEME_ALPHABETS:
            raise self._error(f"<phoneme alphabet={alphabet!r}>: one of {', '.join(PHONEME_ALPHABETS)}", frame)
        ph = " ".join(attrs.get("ph", "").split())
        if not ph or "[" in ph or "]" in ph:
            raise self._error(f"<phoneme ph={attrs.get('ph', '')!r}>: give the phonemes, without brackets", frame)
        spec = f"/{ph.strip('/')}/" if alphabet == "ipa" else ph
        try:
            parse_pronunciation(spec)
        except PronunciationError as e:
            raise self._error(f"<phoneme>: {e}", frame) from None
        return f"[[{spec}]]"

    def _say_as(self, content: str, frame: _Frame) -> str:
        """The words of a <say-as> element's text."""
        kind, text = frame.attrs["interpret-as"], " ".join(content.split())
        words = None
        if kind in ("characters", "spell-out"):
            words = " ".join(_character(c) for c in text if _character(c))
        elif kind == "digits":
            words = numbers.digits("".join(_DIGITS.findall(text)))
        elif kind == "cardinal" and _CARDINAL.fullmatch(text):
            words = numbers.number(text.lstrip("+"))
        elif kind == "ordinal" and (m := _ORDINAL.fullmatch(text.replace(",", ""))):
            words = numbers.ordinal_of(m.group(1))
        elif kind == "date" and text:
            words = self._date(text, frame) if "format" in frame.attrs else expand_dates(text)
        elif kind == "time" and _DIGITS.search(text):
            words = normalize(text).rstrip(_TERMINAL)  # "a.m." at its end is no sentence end here
        elif kind == "telephone":
            words = _DIGITS.sub(lambda m: numbers.digits(m.group()), expand_telephone(text)).replace("+", " plus ")
        if not words or not words.strip():
            raise self._error(f"<say-as interpret-as=\"{kind}\"> cannot read {text!r}", frame)
        return words

    def _date(self, text: str, frame: _Frame) -> str:
        fmt = frame.attrs["format"]
        fields = re.findall(r"\d+|[A-Za-z]+\.?", text)
        if len(fields) != len(fmt):
            raise self._error(f"<say-as interpret-as=\"date\" format=\"{fmt}\"> needs {len(fmt)} field(s), "
                              f"got {text!r}", frame)
        parts = dict(zip(fmt, fields, strict=True))
        month = day = year = None
        if "m" in parts:
            value = parts["m"]
            index = int(value) if value.isdigit() else MONTH_FORMS.get(value.lower().rstrip("."), 0)
            if not 1 <= index <= 12:
                raise self._error(f"<say-as interpret-as=\"date\">: {value!r} is not a month", frame)
            month = MONTHS[index - 1]
        if "d" in parts:
            if not parts["d"].isdigit() or not 1 <= int(parts["d"]) <= 31:
                raise self._error(f"<say-as interpret-as=\"date\">: {parts['d']!r} is not a day", frame)
            day = numbers.ordinal(int(parts["d"]))
        if "y" in parts:
            if not parts["y"].isdigit():
                raise self._error(f"<say-as interpret-as=\"date\">: {parts['y']!r} is not a year", frame)
            y = parts["y"]
            year = numbers.cardinal(y) if len(y) <= 2 else numbers.year(int(y))
        if day and month:
            head = f"the {day} of {month}" if fmt.startswith("d") else f"{month} {day}"
        else:
            head = month or (f"the {day}" if day else "")
        return ", ".join(p for p in (head, year) if p) if day else " ".join(p for p in (head, year) if p)


def _relative_rate(value: str, inherited: float) -> float | None:
    """"N%" (N/100 of the enclosing rate), "+N%"/"-N%" (changed by N%), "N" (a multiplier); None otherwise."""
    if (m := _PERCENT.fullmatch(value)) is not None:
        n = float(m.group(2)) / 100.0
        return inherited * (1.0 + n if m.group(1) == "+" else 1.0 - n if m.group(1) == "-" else n)
    return inherited * float(value) if _NUMBER.fullmatch(value) else None


def _relative_pitch(value: str, inherited: float) -> float | None:
    """"+Nst"/"-Nst" (semitones added), "+N%"/"-N%" (the frequency changed by N%; NaN when that leaves none);
    None otherwise."""
    if (m := _SEMITONES.fullmatch(value)) is not None:
        return inherited + (-1.0 if m.group(1) == "-" else 1.0) * float(m.group(2))
    if (m := _PERCENT.fullmatch(value)) is not None:
        factor = 1.0 + (-1.0 if m.group(1) == "-" else 1.0) * float(m.group(2)) / 100.0
        return inherited + 12.0 * math.log2(factor) if factor > 0 else math.nan
    return None


def _character(c: str) -> str:
    """A character of <say-as interpret-as="characters">: a letter in capitals (the G2P spells runs of them),
    a digit's name, a symbol's word; "" for spaces and marks with no reading."""
    if c.isalpha():
        return c.upper()
    if c in "0123456789":
        return numbers.digits(c)
    return SYMBOL_WORDS.get(c, "")

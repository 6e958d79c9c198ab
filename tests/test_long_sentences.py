"""Issue 23 item 5: a sentence over the model's symbol limit is cut at clause boundaries (semicolons and
colons, then commas, then before conjunctions, then between words, a character cut last), its parts joined
by a short pause (CLAUSE_PAUSE_S, not the sentence pause), and never refused: with the shipped voice, in the
Python API, the CLI and the server."""

import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from tts.paths import REPO_ROOT
from tts.runtime.text_stage import CLAUSE_PAUSE_S, split_clause

# One sentence of licence text (MIT's grant, notice and warranty joined as some licences write them):
# far over the shipped frontend's 400 symbols.
LICENCE = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated "
    "documentation files, to deal in the software without restriction, including without limitation the rights to "
    "use, copy, modify, merge, publish, distribute, sublicense, and sell copies of the software, and to permit "
    "persons to whom the software is furnished to do so, subject to the following conditions: the above copyright "
    "notice and this permission notice shall be included in all copies or substantial portions of the software; "
    "the software is provided as is, without warranty of any kind, express or implied, including but not limited "
    "to the warranties of merchantability, fitness for a particular purpose and noninfringement."
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py says why


@pytest.mark.parametrize("text,cut", [
    # a semicolon or colon beats a comma even when the comma is nearer the middle
    ("alpha beta gamma delta; epsilon, zeta eta theta iota kappa lambda mu", "alpha beta gamma delta;"),
    ("first come these words: then, after a comma, many more words follow here", "first come these words:"),
    # a comma beats a conjunction
    ("the cat sat on the mat and the dog slept by the door, then it rained", "the cat sat on the mat and the dog slept by the door,"),
    # a conjunction (cut before it) beats a plain word boundary
    ("cats sleep all day long because nights are for hunting mice", "cats sleep all day long"),
    # words before characters
    ("one two three four five six", "one two three"),
    ("abcdefghij", "abcde"),
])
def test_boundary_order(text, cut):
    head, tail = split_clause(text)
    assert head == cut
    assert text in (f"{head} {tail}", head + tail)  # nothing lost at the cut


def test_licence_sentence_is_cut_at_clauses_with_short_pauses(voice):
    pipeline = voice.pipeline
    limit = pipeline.engine.frontend.max_symbols
    with pytest.raises(Exception, match="max_symbols"):
        pipeline.engine.encode(LICENCE)  # the model cannot take it whole
    text = LICENCE + " Thank you."
    utt = pipeline.utterance(text)
    parts, notes = utt.parts, utt.notes
    assert len(parts) > 2 and all(len(p.ids) <= limit for p in parts)
    assert " ".join(p.text for p in parts).split() == text.split()  # no word lost or added
    assert parts[0].text.endswith(":")  # the colon, the strongest boundary, is the first cut
    # parts of the long sentence are a short pause apart; the next sentence the sentence pause
    assert [p.pause_s for p in parts] == [0.0] + [CLAUSE_PAUSE_S] * (len(parts) - 2) + [pipeline.pause_s]
    assert CLAUSE_PAUSE_S < pipeline.pause_s
    assert any("split a long sentence" in n for n in notes)
    # the audio is each part after its pause: the sink gets them in order
    pieces: list[np.ndarray] = []
    result = pipeline.synthesize(text, sink=pieces.append)
    silences = [p.size for p in pieces if not bool(p.any())]
    assert silences == [pipeline.silence(p.pause_s).size for p in parts[1:]]
    assert len(pieces) == 2 * len(parts) - 1 and result.seconds > 20
    assert all(bool(np.isfinite(p).all()) for p in pieces)


def test_words_without_any_clause_boundary_are_cut_between_words(voice):
    pipeline = voice.pipeline
    text = " ".join(f"item{i % 10} blue green" for i in range(60)) + "."  # no punctuation, no conjunction
    parts = pipeline.utterance(text).parts
    assert len(parts) > 1 and all(len(p.ids) <= pipeline.engine.frontend.max_symbols for p in parts)
    assert " ".join(p.text for p in parts).split() == text.split()


def test_cli_speaks_the_licence_instead_of_exit_3(tmp_path):
    out = tmp_path / "licence.wav"
    proc = subprocess.run([sys.executable, "-m", "tts.synthesize", "--threads", "1", "--text", LICENCE,
                           "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    wave, sr = sf.read(out)
    assert wave.size / sr > 20 and np.abs(wave).max() > 0.05

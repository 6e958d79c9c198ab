"""SSML, user lexicons and inline phonemes through the one pipeline (issue 36), on the shipped default voice's ONNX
export and on torch: a break is exact silence, prosody is the controls per span, <phoneme> / a lexicon / [[...]]
change the phones that reach the model; the CLI's --ssml and --lexicon end to end (the parser and the lexicon
themselves: tests/test_ssml.py, tests/test_lexicon.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from tts.paths import REPO_ROOT
from tts.runtime import Pipeline
from tts.runtime.release import open_pipeline
from tts.text.errors import TextError
from tts.text.lexicon import Lexicon
from tts.text.ssml import SsmlError


@pytest.fixture(scope="module", params=["onnx", "torch"])
def pipeline(request) -> Pipeline:
    torch.set_num_threads(1)
    return open_pipeline(None, None, None, request.param, "cpu", None, 1, None)


def phones(pipeline: Pipeline, text: str, **kw) -> list[list[str]]:
    utt = pipeline.utterance(text, pipeline.controls(), **kw)
    return [pipeline.engine.decode(p.ids) for p in utt.parts]


def test_a_break_is_exact_silence_and_the_rest_is_plain_speech(pipeline: Pipeline):
    c = pipeline.controls(seed=4)
    plain = pipeline.synthesize("Hello there. Good morning.", c, sentence_silence=0.7).wave
    ssml = pipeline.synthesize('<speak>Hello there.<break time="700ms"/>Good morning.</speak>', c).wave
    np.testing.assert_array_equal(ssml, plain)
    tail = pipeline.synthesize('<speak>Hello there.<break time="1.5s"/></speak>', c).wave
    alone = pipeline.synthesize("Hello there.", c).wave
    assert tail.size - alone.size == round(1.5 * pipeline.sample_rate) and not tail[alone.size:].any()


def test_prosody_is_the_controls_of_its_span(pipeline: Pipeline):
    c = pipeline.controls(seed=1)
    pitched = pipeline.synthesize('<speak><prosody pitch="+2st">Hello there.</prosody></speak>', c).wave
    np.testing.assert_array_equal(pitched, pipeline.synthesize("Hello there.", c.replace(pitch_shift=2.0)).wave)
    slow = pipeline.synthesize('<speak><prosody rate="x-slow">Hello there.</prosody></speak>', c).wave
    assert slow.size > 1.3 * pipeline.synthesize("Hello there.", c).wave.size
    # spans of different prosody go in different batches: the same audio at any batch size
    doc = ('<speak>One sentence here. <prosody rate="fast">A faster one.</prosody> <prosody pitch="-3st">And a '
           'lower one.</prosody> The last.</speak>')
    np.testing.assert_array_equal(pipeline.synthesize(doc, c, batch_size=8).wave,
                                  pipeline.synthesize(doc, c, batch_size=1).wave)


def test_phonemes_lexicons_and_inline_phonemes_reach_the_model(pipeline: Pipeline, tmp_path: Path):
    ph = ["T", "AH0", "M", "AA1", "T", "OW2"]
    said = phones(pipeline, f'<speak><phoneme alphabet="x-arpabet" ph="{" ".join(ph)}">tomato</phoneme>.</speak>')
    assert ph == [s for s in said[0] if s in ph or s.strip() and s not in ".,"][: len(ph)]
    inline = phones(pipeline, f"Say [[{' '.join(ph)}]].")
    assert " ".join(ph) in " ".join(inline[0])
    before = phones(pipeline, "Tomato soup.")
    lexicon = tmp_path / "lexicon.tsv"
    lexicon.write_text("# my words\ntomato\t" + " ".join(ph) + "\n", encoding="utf-8")
    pipeline.use_lexicon(Lexicon.load(lexicon))
    try:
        after = phones(pipeline, "Tomato soup.")
        words = pipeline.synthesize("Tomato soup.", pipeline.controls(), timestamps=True).words
    finally:
        pipeline.use_lexicon(None)
    assert after != before and " ".join(ph) in " ".join(after[0])
    assert words[0].phones == tuple(ph)


def test_bad_ssml_and_unknown_phonemes_are_text_errors(pipeline: Pipeline):
    with pytest.raises(SsmlError, match="line 1"):
        pipeline.synthesize("<speak>Hello <break time='1s'></speak>")
    with pytest.raises(SsmlError):
        pipeline.synthesize('<speak><audio src="x.wav"/></speak>')
    with pytest.raises(TextError, match="QQ"):
        pipeline.synthesize("Say [[QQ AH0]].")
    assert issubclass(SsmlError, TextError)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


def test_cli_speaks_ssml_with_a_lexicon_and_refuses_bad_ssml(tmp_path: Path):
    lexicon = tmp_path / "lex.tsv"
    lexicon.write_text("tomato\tT AH0 M AA1 T OW2\n", encoding="utf-8")
    out, stamps = tmp_path / "a.wav", tmp_path / "a.json"
    r = run("--text", '<speak>I like tomato.<break time="500ms"/>Yes.</speak>', "--lexicon", str(lexicon),
            "--out", str(out), "--timestamps", str(stamps), "--quiet")
    assert r.returncode == 0, r.stderr
    words = json.loads(stamps.read_text())["words"]
    assert [w["word"].lower() for w in words][:3] == ["i", "like", "tomato"] and words[2]["phones"] == "T AH0 M AA1 T OW2".split()
    assert sf.info(str(out)).frames > 0
    r = run("--ssml", "--text", "Hello <break time='1s'>", "--out", str(tmp_path / "b.wav"))
    assert r.returncode == 3 and "line" in r.stderr and not (tmp_path / "b.wav").exists(), r.stderr
    bad = tmp_path / "bad.tsv"
    bad.write_text("tomato\tT AH0 QQ\n", encoding="utf-8")
    r = run("--text", "Hi.", "--lexicon", str(bad), "--out", str(tmp_path / "c.wav"))
    assert r.returncode == 3 and "QQ" in r.stderr, r.stderr


def test_prosody_beyond_the_models_range_is_held_to_it_with_a_note(pipeline: Pipeline):
    c = pipeline.controls(seed=1, speed=2.0)
    held = pipeline.synthesize('<speak><prosody rate="x-fast" pitch="+10st">Hello there.</prosody></speak>',
                               c.replace(pitch_shift=6.0))
    assert any("held to the model's ranges" in n for n in held.notes), held.notes
    np.testing.assert_array_equal(held.wave, pipeline.synthesize("Hello there.", c.replace(pitch_shift=12.0)).wave)

"""Word timestamps through the CLI (`--timestamps` json / srt / vtt, `--sentence-silence`) and the Python API
(`Audio.words`), with the shipped default voice on the default runtime (the ONNX export when current) and its
streamed form; the timings' maths is tested on both engines in tests/test_pipeline.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
import tts
from tts.paths import REPO_ROOT
from tts.runtime.timestamps import WordTiming, to_srt, to_vtt

TEXT = "Hello world. It is 3 o'clock."
WORDS = ["hello", "world", "it", "is", "three", "o'clock"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("stream", [False, True])
def test_cli_writes_word_timestamps_beside_the_audio(tmp_path: Path, stream: bool):
    out, stamps = tmp_path / "a.wav", tmp_path / "a.json"
    r = run("--text", TEXT, "--out", str(out), "--timestamps", str(stamps), "--quiet", *(["--stream"] * stream))
    assert r.returncode == 0, r.stderr
    data = json.loads(stamps.read_text())
    info = sf.info(str(out))
    assert data["sample_rate"] == info.samplerate and data["seconds"] == pytest.approx(info.frames / info.samplerate, abs=1e-5)
    assert [w["word"].lower() for w in data["words"]] == WORDS
    ends = [0.0] + [w["end_s"] for w in data["words"]]
    for w, previous_end in zip(data["words"], ends):
        assert previous_end <= w["start_s"] < w["end_s"] <= data["seconds"] and w["phones"]
    # the API gives the same words as the CLI (one pipeline)
    audio = tts.load().synthesize(TEXT)
    assert [w.to_dict() for w in audio.words] == data["words"]


def test_cli_writes_subtitles_by_extension(tmp_path: Path):
    for suffix, first in ((".srt", r"1\n00:00:00,\d{3} --> 00:00:00,\d{3}\nHello\n"),
                          (".vtt", r"WEBVTT\n\n00:00:00\.\d{3} --> 00:00:00\.\d{3}\nHello\n")):
        stamps = tmp_path / f"a{suffix}"
        r = run("--text", TEXT, "--out", str(tmp_path / "a.wav"), "--timestamps", str(stamps), "--quiet")
        assert r.returncode == 0, r.stderr
        assert re.match(first, stamps.read_text()), stamps.read_text()[:80]
        assert stamps.read_text().count(" --> ") == len(WORDS)


def test_subtitle_clocks():
    words = [WordTiming("a", 0.0, 0.5, ("AH0",)), WordTiming("b", 3661.25, 3661.5, ("B",))]
    assert to_srt(words) == "1\n00:00:00,000 --> 00:00:00,500\na\n\n2\n01:01:01,250 --> 01:01:01,500\nb\n\n"
    assert to_vtt(words).startswith("WEBVTT\n\n00:00:00.000 --> 00:00:00.500\na\n")


def test_cli_sentence_silence(tmp_path: Path):
    lengths = {}
    for silence in ("0", "1.5"):
        out = tmp_path / f"s{silence}.wav"
        r = run("--text", TEXT, "--out", str(out), "--sentence-silence", silence, "--quiet")
        assert r.returncode == 0, r.stderr
        lengths[silence] = sf.info(str(out)).frames
    assert lengths["1.5"] - lengths["0"] == round(1.5 * 22050)  # one gap between the two sentences


@pytest.mark.parametrize("args, message", [
    (["--timestamps", "a.txt"], "extension must be one of .json, .srt, .vtt"),
    (["--sentence-silence", "-1"], "sentence silence must be"),
    (["--sentence-silence", "20"], "sentence silence must be"),
])
def test_cli_refuses_bad_timestamp_options(tmp_path: Path, args: list[str], message: str):
    r = run("--text", TEXT, "--out", str(tmp_path / "a.wav"), *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (tmp_path / "a.wav").exists()


def test_cli_timestamps_and_out_the_same_file(tmp_path: Path):
    r = run("--text", TEXT, "--out", str(tmp_path / "a.json"), "--timestamps", str(tmp_path / "a.json"))
    assert r.returncode == 2 and "same file" in r.stderr


def test_word_timing_benchmark_pairs_words_with_the_recordings(fixture_corpus: Path, tmp_path: Path):
    """recipes.bench.word_timing on the fixture corpus' two test sentences: our words paired with Festival's by
    text, boundary errors measured (finite, within a second: the same sentences at a similar pace)."""
    from recipes.bench.word_timing import festival_words, main

    assert main(["--data", str(fixture_corpus), "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "word_timing.json").read_text())
    assert report["sentences"] == 2 and report["words_paired"] >= 0.8 * report["words_reference"] > 0
    for key in ("boundary_error_ms", "pace_fitted_boundary_error_ms"):
        assert 0 <= report[key]["median"] <= report[key]["p90"] < 1000, report
    uid = (fixture_corpus / "splits" / "test.txt").read_text().split()[0]
    words = festival_words(fixture_corpus, uid)
    assert all(a < b for _, a, b in words) and all(w[2] <= v[1] + 1e-9 for w, v in zip(words, words[1:]))

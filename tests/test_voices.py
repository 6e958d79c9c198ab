"""The shipped voices (checkpoints/default.json "voices"): listed, chosen and refused by name in the CLI, the
Python API, the server, the evaluation and listening specs, and each one's NAR models in the ONNX export.
Every test runs over whatever voices the release ships (slt; joe once released)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

import tts
from recipes.bench.speech_server import SpeechServer
from tts.paths import REPO_ROOT
from tts.runtime.release import UnknownVoiceError, model_voice, shipped_defaults, voice_model, voice_vocoder

VOICES = shipped_defaults()["voices"]
DEFAULT = shipped_defaults()["voice"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)


def test_list_voices_needs_no_other_option_and_names_every_voice_and_model():
    r = cli("--list-voices")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(VOICES)
    for line, (voice, models) in zip(lines, VOICES.items()):
        assert line == f"{voice}{' (default)' if voice == DEFAULT else ''}: {', '.join(models)}"
    assert tts.voices() == VOICES


def test_voice_model_resolution_and_its_errors():
    for voice, models in VOICES.items():
        assert voice_model(voice) == models[0]
        assert all(voice_model(voice, m) == m and model_voice(m) == voice for m in models)
    assert voice_model() == VOICES[DEFAULT][0]
    with pytest.raises(UnknownVoiceError, match=r"unknown voice 'nobody'; this release ships the voices " + DEFAULT):
        voice_model("nobody")
    other = next((m for v, ms in VOICES.items() if v != DEFAULT for m in ms), "nar_nobody")
    with pytest.raises(UnknownVoiceError, match=f"voice '{DEFAULT}' has the models"):
        voice_model(DEFAULT, other)
    with pytest.raises(UnknownVoiceError, match="no shipped model 'tacotron9'"):
        voice_model(None, "tacotron9")


@pytest.mark.parametrize("voice", list(VOICES))
def test_each_voice_speaks_in_the_cli_and_the_api_the_same_audio(voice, tmp_path: Path):
    out = tmp_path / f"{voice}.wav"
    r = cli("--voice", voice, "--text", "Every voice can say this.", "--out", str(out), "--runtime", "torch",
            "--quiet")
    assert r.returncode == 0, r.stderr
    wave, rate = sf.read(str(out), dtype="float32")
    loaded = tts.load(voice=voice, runtime="torch")
    assert loaded.voice == voice and loaded.name.startswith(VOICES[voice][0] + "+")
    audio = loaded.synthesize("Every voice can say this.")
    assert rate == audio.sample_rate and wave.size == audio.samples.size
    # a 16-bit file: quantisation, 32767 vs 32768 scaling, and one more step for float rounding: the CLI process
    # runs torch at its own thread count, this process at whatever an earlier test set (measured 3.004 steps)
    assert np.abs(wave - audio.samples).max() <= 4 / 32768
    # a seed gives the same audio, and streaming gives it too
    again = np.concatenate(list(loaded.stream("Every voice can say this.")))
    assert again.size == audio.samples.size and np.abs(again - audio.samples).max() < 1e-3


def test_voices_differ_when_more_than_one_is_shipped():
    if len(VOICES) < 2:
        pytest.skip("this release ships one voice")
    a, b = (tts.load(voice=v, runtime="torch").synthesize("Two voices.").samples for v in list(VOICES)[:2])
    assert a.size != b.size or np.abs(a - b).max() > 0.05


def test_unknown_voice_is_a_clear_error_everywhere(tmp_path: Path):
    r = cli("--voice", "nobody", "--text", "Hi.", "--out", str(tmp_path / "x.wav"))
    assert r.returncode == 2 and "unknown voice 'nobody'" in r.stderr and DEFAULT in r.stderr
    assert not (tmp_path / "x.wav").exists()
    r = cli("--voice", DEFAULT, "--checkpoint", "checkpoints/nar.pt", "--text", "Hi.", "--out", str(tmp_path / "x.wav"))
    assert r.returncode == 2 and "--voice and --checkpoint" in r.stderr
    r = cli("--voice", "", "--text", "Hi.", "--out", str(tmp_path / "x.wav"))
    assert r.returncode == 2 and "--voice is empty" in r.stderr
    with pytest.raises(ValueError, match="unknown voice 'nobody'"):
        tts.load(voice="nobody")
    with pytest.raises(TypeError, match="voice must be"):
        tts.load(voice=3)  # type: ignore[arg-type]


def test_evaluation_and_listening_specs_name_a_voice():
    from recipes.evaluate import EvaluationConfigError, parse_systems
    from tts.listening.synth import parse_synth

    for voice, models in VOICES.items():
        (spec,) = parse_systems({"s": {"kind": "acoustic", "voice": voice}})
        assert spec.voice == voice and Path(spec.checkpoint).name == f"{models[0]}.pt"
        assert spec.vocoder == voice_vocoder(voice) and spec.spec()["voice"] == voice
        assert parse_synth(f"s=voice:{voice},k=2").checkpoint == spec.checkpoint
    with pytest.raises(EvaluationConfigError, match="unknown voice 'nobody'"):
        parse_systems({"s": {"kind": "acoustic", "voice": "nobody"}})
    with pytest.raises(EvaluationConfigError, match="`model` picks one of a shipped `voice`'s models"):
        parse_systems({"s": {"kind": "acoustic", "checkpoint": "checkpoints/nar.pt", "model": "nar"}})


def test_the_onnx_export_holds_every_voice_s_nar_models():
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from tts.checkpoint import read_raw
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current, read_manifest
    from tts.runtime.release import shipped_checkpoint

    manifest = read_manifest(DEFAULT_ONNX_DIR, verify=False)
    for voice, models in VOICES.items():
        nars = [m for m in models if read_raw(shipped_checkpoint(m))["tts"]["model_config"]["_target_"].endswith("FastSpeech2")]
        assert nars, f"voice {voice} has no NAR model to export"
        for model in nars:
            assert model in manifest["voices"] and export_is_current(DEFAULT_ONNX_DIR, model), model
        onnx = tts.load(voice=voice, runtime="onnx")
        assert onnx.runtime == "onnx" and onnx.name == f"onnx:{models[0]}"
        torch_audio = tts.load(voice=voice, runtime="torch").synthesize("The export speaks too.").samples
        onnx_audio = onnx.synthesize("The export speaks too.").samples
        assert onnx_audio.size == torch_audio.size
        # the engines agree (tests/test_pipeline.py holds the tight bounds; this checks the voice is the same one)
        assert np.sqrt(np.mean((onnx_audio - torch_audio) ** 2)) < 1e-2 * np.sqrt(np.mean(torch_audio**2))


def test_the_server_speaks_every_voice_and_lists_them():
    with SpeechServer("--runtime", "torch", "--rate-limit", "0", threads=1) as server:
        listed = httpx.get(server.url + "/v1/voices").json()
        assert listed["default"] == DEFAULT and [v["id"] for v in listed["data"]] == [DEFAULT, *(v for v in VOICES if v != DEFAULT)]
        health = httpx.get(server.url + "/health").json()
        assert set(health["voices"]) == set(VOICES) and health["default_voice"] == DEFAULT
        sizes = {}
        for voice in [*VOICES, "default"]:
            r = httpx.post(server.url + "/v1/audio/speech", timeout=120,
                           json={"model": "tts-1", "voice": voice, "input": "Hello from the server.", "response_format": "wav"})
            assert r.status_code == 200, r.text
            sizes[voice] = len(r.content)
        assert sizes["default"] == sizes[DEFAULT]
        r = httpx.post(server.url + "/v1/audio/speech", json={"model": "tts-1", "voice": "nobody", "input": "Hi."})
        assert r.status_code == 400 and r.json()["error"]["param"] == "voice"
        assert "unknown voice 'nobody'" in r.json()["error"]["message"] and DEFAULT in r.json()["error"]["message"]


def test_a_release_of_two_voices_speaks_each_through_the_api_and_the_server(tmp_path: Path, monkeypatch):
    """Two voices end to end on a real release (recipes.release of two NAR checkpoints into a new folder, whose
    default.json names the voices), read as the shipped one: tts.voices / tts.load(voice=...) and the server's
    voice field pick the right model, and the two voices sound different.  (The shipped release may hold one.)"""
    from fastapi.testclient import TestClient

    from recipes.release import release
    from tests.helpers import TINY, tiny_checkpoint
    from tts.runtime import release as shipped
    from tts.serve.app import Speaker, create_app
    from tts.serve.batcher import Batcher

    sources = {"nar": str(tiny_checkpoint(tmp_path / "a.ckpt", "nonautoregressive", **TINY["nonautoregressive"])),
               "other": str(tiny_checkpoint(tmp_path / "b.ckpt", "nonautoregressive",
                                            **{**TINY["nonautoregressive"], "d_model": 48}))}
    out = tmp_path / "release"
    release(sources, {}, {"voice": "first", "vocoder": "griffin-lim",
                          "voices": {"first": ["nar"], "second": ["other"], "absent": ["not_released"]}}, out)
    monkeypatch.setattr(shipped, "CHECKPOINT_DIR", out)
    monkeypatch.setattr(shipped, "DEFAULTS_FILE", out / "default.json")
    assert tts.voices() == {"first": ["nar"], "second": ["other"]}  # a voice with no released model is left out
    first, second = tts.load(runtime="torch"), tts.load(voice="second", runtime="torch")
    assert (first.voice, second.voice) == ("first", "second") and second.name == "other+griffin-lim"
    a, b = first.synthesize("Two voices.").samples, second.synthesize("Two voices.").samples
    assert a.size != b.size or np.abs(a - b).max() > 1e-3
    batchers = {name: Batcher(v.pipeline, max_batch=2) for name, v in (("first", first), ("second", second))}
    try:
        client = TestClient(create_app({n: Speaker(v, batchers[n]) for n, v in (("first", first), ("second", second))}))
        assert [v["id"] for v in client.get("/v1/voices").json()["data"]] == ["first", "second"]
        for name, expected in (("second", b), ("default", a), ("first", a)):
            r = client.post("/v1/audio/speech", json={"model": "tts-1", "voice": name, "input": "Two voices.",
                                                      "response_format": "pcm"})
            assert r.status_code == 200 and len(r.content) == 2 * expected.size, name
        assert client.post("/v1/audio/speech", json={"model": "tts-1", "voice": "third", "input": "Hi."}).status_code == 400
    finally:
        for batcher in batchers.values():
            batcher.stop()

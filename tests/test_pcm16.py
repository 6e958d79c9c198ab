"""One float -> int16 rule for every output (issue 35 follow-up item 5): the speech server's encoder
(tts.serve.formats) and the CLI's writers (tts.synthesize: files and `--out -`) give the same 16-bit samples for the
same audio (tts.pcm.pcm16, libsndfile's rule); the server rounded `x * 32767` and differed by a step in about half
the samples of speech."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tts.paths import REPO_ROOT
from tts.pcm import pcm16
from tts.serve.formats import encoder, to_int16, wav_stream_header
from tts.synthesize import pcm16 as cli_pcm16

TEXT = "Rounding is the same everywhere. Two sentences, with a pause between them!"


def hostile_floats() -> np.ndarray:
    """Every 16-bit step and its half-way points, values past full scale, tiny and signed zeros, random speech-like
    and uniform values."""
    rng = np.random.default_rng(0)
    steps = np.arange(-32768, 32769, dtype=np.float64)
    return np.concatenate([
        (steps / 32768).astype(np.float32), ((steps + 0.5) / 32768).astype(np.float32),
        ((steps + 0.5) / 32767).astype(np.float32),
        np.array([1.0, -1.0, 1.5, -1.5, 1e9, -1e9, 1e-30, -1e-30, 0.0, -0.0, 0.99999994, -0.99999994], np.float32),
        rng.uniform(-1.2, 1.2, 200_000).astype(np.float32), (rng.standard_normal(200_000) * 0.05).astype(np.float32)])


def test_the_server_and_the_cli_convert_floats_alike():
    x = hostile_floats()
    want = cli_pcm16(x)
    assert want.dtype == np.dtype("<i2")
    np.testing.assert_array_equal(to_int16(x), want)
    np.testing.assert_array_equal(pcm16(x), want)
    np.testing.assert_array_equal(to_int16(x.astype(np.float64)), want)  # any float dtype is taken as float32
    assert to_int16(np.zeros(0, np.float32)).size == 0
    assert to_int16(want) is want  # int16 (the server's waiting parts) passes as it is
    # full scale: 1.0 -> 32767, -1.0 -> -32768, past it clipped
    assert to_int16(np.array([1.0, -1.0, 3.0, -3.0], np.float32)).tolist() == [32767, -32768, 32767, -32768]
    old = (np.clip(x, -1.0, 1.0) * 32767.0).round().astype("<i2")  # the server's rule before
    assert np.mean(old != want) > 0.3


@pytest.mark.parametrize("runtime", ["onnx", "torch"])
def test_the_same_text_gives_the_same_pcm_bytes_from_the_server_encoder_and_cli_stdout(runtime):
    import tts

    if runtime == "onnx":
        pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
        from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current

        if not export_is_current(DEFAULT_ONNX_DIR):
            pytest.skip(f"no current ONNX export at {DEFAULT_ONNX_DIR}: run python -m tts.export")
    r = subprocess.run([sys.executable, "-m", "tts.synthesize", "--runtime", runtime, "--threads", "1", "--quiet",
                        "--text", TEXT, "--out", "-"], cwd=REPO_ROOT, capture_output=True, timeout=300,
                       env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr.decode()
    cli = r.stdout
    import torch

    torch.set_num_threads(1)
    voice = tts.load(runtime=runtime, threads=1)
    audio = voice.synthesize(TEXT).samples
    pcm = encoder("pcm", voice.sample_rate)
    served = pcm.start() + pcm.piece(audio) + pcm.finish()
    assert len(served) == len(cli) == 2 * audio.size
    assert served == cli
    wav = encoder("wav", voice.sample_rate)
    assert wav.start() + wav.piece(audio) == wav_stream_header(voice.sample_rate) + cli
    old = (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2")  # the server's rule before: not these bytes
    speech = np.abs(audio) > 1e-3
    assert np.mean(old[speech] != np.frombuffer(cli, "<i2")[speech]) > 0.2

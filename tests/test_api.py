"""The Python API (tts.api, `tts.load`): import cost, Audio, the streaming iterator, errors, runtimes."""

import inspect
import time
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

import tts
from tts.paths import REPO_ROOT
from tts.text.errors import TextError

TEXT = "The quick brown fox jumps over the lazy dog. It was not amused. Neither was the cat."


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py says why


def test_import_tts_is_cheap():
    """`import tts` loads no torch, numpy, Hydra or FastAPI: tts.load imports them when called."""
    code = ("import sys, tts; heavy = ('torch', 'numpy', 'hydra', 'fastapi', 'soundfile'); "
            "print(sorted(m for m in heavy if m in sys.modules)); print(callable(tts.load))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out
    from tts import api

    assert tts.load is api.load and tts.Audio is api.Audio
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        tts.nonsense  # noqa: B018


def test_synthesize_returns_numpy_audio_of_the_one_path(voice):
    audio = voice.synthesize(TEXT)
    assert isinstance(audio, tts.Audio) and audio.sample_rate == voice.sample_rate == 22050
    assert audio.samples.dtype == np.float32 and audio.samples.ndim == 1 and audio.seconds > 3
    assert audio.sentences == ("The quick brown fox jumps over the lazy dog.", "It was not amused.",
                               "Neither was the cat.")
    same = voice.pipeline.synthesize(TEXT)  # the Pipeline itself: the API adds nothing to the audio
    assert np.array_equal(audio.samples, same.wave)
    assert np.array_equal(voice.synthesize(TEXT).samples, audio.samples)  # seeded: repeatable
    assert not np.array_equal(voice.synthesize(TEXT, seed=1).samples, audio.samples)


def test_stream_yields_audio_as_it_is_made(voice):
    from tts.runtime.pipeline import STREAM_TOLERANCE

    chunks = voice.stream(TEXT)
    assert inspect.isgenerator(chunks)
    first = next(chunks)  # made before the later sentences are spoken
    rest = list(chunks)
    assert all(c.dtype == np.float32 and c.ndim == 1 for c in [first, *rest]) and first.any()
    joined = np.concatenate([first, *rest])
    whole = voice.synthesize(TEXT, batch_size=1).samples
    assert joined.shape == whole.shape and np.abs(joined - whole).max() <= STREAM_TOLERANCE
    # the two sentence pauses come as chunks of their own
    pause = int(voice.pipeline.pause_s * voice.sample_rate)
    assert sum(1 for c in rest if c.size == pause and not c.any()) == 2


def test_bad_input_is_an_error_before_the_first_chunk(voice):
    with pytest.raises(TextError):
        voice.stream("")
    with pytest.raises(ValueError, match="speed"):
        voice.stream("Hello.", speed=100.0)
    with pytest.raises(ValueError, match="speed"):
        voice.synthesize("Hello.", speed=0.0)


def test_audio_save_writes_a_16_bit_wav(voice, tmp_path):
    audio = voice.synthesize("Saved to a file.")
    path = audio.save(tmp_path / "out.wav")
    info = sf.info(str(path))
    assert info.subtype == "PCM_16" and info.samplerate == audio.sample_rate and info.frames == audio.samples.size
    back, _ = sf.read(str(path), dtype="float32")
    assert np.abs(back - audio.samples).max() < 1e-4


def test_runtime_choices_and_a_missing_onnx_export(tmp_path):
    with pytest.raises(ValueError, match="runtime must be one of"):
        tts.load(runtime="tensorflow")
    with pytest.raises(ValueError, match="holds nar.*, not .ar."):
        tts.load("ar", runtime="onnx")
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    with pytest.raises(Exception, match="python -m tts.export"):
        tts.load(runtime="onnx", onnx_dir=tmp_path / "no-export")


def test_onnx_voice(voice):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current

    if not export_is_current(DEFAULT_ONNX_DIR):
        pytest.skip(f"no current ONNX export at {DEFAULT_ONNX_DIR}: run python -m tts.export")
    onnx = tts.load(runtime="onnx")
    assert onnx.runtime == "onnx" and voice.runtime == "torch"
    assert tts.load().runtime == "onnx"  # runtime="auto" (the default) takes the current export of the default voice
    audio = onnx.synthesize(TEXT)
    assert audio.sample_rate == voice.sample_rate and audio.samples.dtype == np.float32
    assert audio.sentences == voice.synthesize(TEXT).sentences
    chunks = list(onnx.stream(TEXT))
    assert len(chunks) == 5  # three sentences, two pauses
    assert np.array_equal(np.concatenate(chunks), onnx.synthesize(TEXT, batch_size=1).samples)


# --- issue 35 item 9: every argument checked before any work ------------------------------------------------
LONG = "This sentence would take a while to speak. " * 2000  # minutes of work if anything ran


@pytest.mark.parametrize("kwargs,error,message", [
    ({"batch_size": -1}, ValueError, "batch_size must be in"),
    ({"batch_size": 0}, ValueError, "batch_size must be in"),
    ({"batch_size": 10**6}, ValueError, "batch_size must be in"),
    ({"batch_size": 1.5}, TypeError, "batch_size must be an int"),
    ({"batch_size": True}, TypeError, "batch_size must be an int"),
    ({"speed": "2"}, TypeError, "speed must be a number"),
    ({"speed": True}, TypeError, "speed must be a number"),
    ({"speed": 3.0}, ValueError, r"speed must be a finite number in \[0.1, 2.0\]"),
    ({"speed": float("nan")}, ValueError, "speed"),
    ({"seed": None}, TypeError, "seed must be an int"),
    ({"seed": 1.5}, ValueError, "seed must be a whole number"),
    ({"seed": "1"}, TypeError, "seed must be an int"),
    ({"seed": -1}, ValueError, "seed must be"),
    ({"refine_steps": 1.5}, ValueError, "refine_steps must be a whole number"),
    ({"refine_steps": "2"}, TypeError, "refine_steps must be an int"),
    ({"refine_steps": 100_000}, ValueError, r"refine_steps must be a finite number in \[0, 32\]"),
    ({"temperature": "hot"}, TypeError, "temperature must be a number"),
    ({"pitch_shift": [1]}, TypeError, "pitch_shift must be a number"),
], ids=lambda v: repr(v) if isinstance(v, dict) else "")
def test_synthesize_checks_its_arguments_before_any_work(voice, kwargs, error, message):
    t0 = time.perf_counter()
    with pytest.raises(error, match=message):
        voice.synthesize(LONG, **kwargs)
    with pytest.raises(error, match=message):
        voice.stream(LONG, **kwargs) if "batch_size" not in kwargs else voice.synthesize(LONG, **kwargs)
    assert time.perf_counter() - t0 < 2.0  # refused, not spoken (the text is minutes of audio)


@pytest.mark.parametrize("text", [123, None, b"Hello."])
def test_text_must_be_a_str(voice, text):
    with pytest.raises(TypeError, match="text must be a str"):
        voice.synthesize(text)
    with pytest.raises(TypeError, match="text must be a str"):
        voice.stream(text)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"device": "banana"}, ValueError, "device 'banana': expected cpu, cuda or cuda:N"),
    ({"device": 3}, TypeError, "device must be a str"),
    ({"device": "cuda:99"}, ValueError, "device 'cuda:99'"),
    ({"runtime": 5}, TypeError, "runtime must be one of"),
    ({"threads": 0}, ValueError, "threads must be in"),
    ({"threads": 1.5}, TypeError, "threads must be an int"),
    ({"model": ""}, ValueError, "model must be a non-empty str"),
    ({"model": 3}, TypeError, "model must be a non-empty str"),
    ({"vocoder": ""}, ValueError, "vocoder must be a non-empty str"),
    ({"checkpoint": ""}, ValueError, "checkpoint must be a non-empty path"),
], ids=lambda v: repr(v) if isinstance(v, dict) else "")
def test_load_checks_its_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        tts.load(**kwargs)


def test_the_fastest_speed_is_still_audible(voice):
    """Item 8: speed 8-10 made 0.1 s at -44 to -73 dBFS.  At the maximum every sentence of more than one phone is
    speech (measured -26 to -34 dBFS at 2; at 2.5 "Hi." fell to -55, at 4 "Hello there." to -48)."""
    from recipes.bench.short_utterances import level_db
    from tts.runtime.controls import RANGES

    fastest = RANGES["speed"][1]
    for text in ("Hello there.", "Hi.", "Yes, it is.", "Go!"):
        audio = voice.synthesize(text, speed=fastest)
        dbfs = level_db(audio.samples)
        assert dbfs > -40 and audio.seconds > 0.25, (text, dbfs, audio.seconds)

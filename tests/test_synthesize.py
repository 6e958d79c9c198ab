"""The synthesis CLI end to end (real subprocess, real wav files) with a small checkpoint made here."""

import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from helpers import TINY, tiny_checkpoint
from tts import checkpoint
from tts.audio import MelConfig
from tts.paths import REPO_ROOT
from tts.runtime import Pipeline
from tts.runtime.torch_engine import TorchEngine
from tts.vocoder.registry import load_vocoder


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ckpt")
    return {name: tiny_checkpoint(d / f"{name}.pt", name, **kw) for name, kw in TINY.items()}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", *args], cwd=REPO_ROOT, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["autoregressive", "nonautoregressive"])
def test_cli_writes_a_wav(ckpts, tmp_path: Path, name: str):
    out = tmp_path / "a.wav"
    # --keep-failed: the tiny AR has random weights, so its attention never stops (item 10's exit 7 otherwise)
    r = run("--text", "Hello world. This is a test.", "--checkpoint", str(ckpts[name]), "--vocoder", "griffin-lim",
            "--out", str(out), "--keep-failed")
    assert r.returncode == 0, r.stderr
    info = sf.info(str(out))
    assert info.samplerate == 22050 and info.channels == 1 and info.frames > 0
    assert "RTF" in r.stdout and "2 sentence(s)" in r.stdout


def test_cli_stdin_and_nar_controls(ckpts, tmp_path: Path):
    out = tmp_path / "s.wav"
    r = run("--checkpoint", str(ckpts["nonautoregressive"]), "--vocoder", "griffin-lim", "--out", str(out),
            "--refine-steps", "2", "--speed", "1.5", "--pitch", "2", "--temperature", "0.5", stdin="Piped text, read from standard input.")
    assert r.returncode == 0, r.stderr and out.is_file()


def test_speed_control_changes_length(ckpts):
    pipeline = Pipeline(TorchEngine.from_paths(ckpts["nonautoregressive"], "griffin-lim"))
    text = "A sentence long enough to have many frames in it."
    slow = pipeline.synthesize(text, pipeline.controls(speed=0.5, refine_steps=0)).wave.size
    normal = pipeline.synthesize(text, pipeline.controls(speed=1.0, refine_steps=0)).wave.size
    fast = pipeline.synthesize(text, pipeline.controls(speed=2.0, refine_steps=0)).wave.size
    # the tiny model's random durations give most tokens 0 or 1 frame, and speeding up keeps a heard token's one
    # frame and the first token's frames (tts.models.layers.length_regulator.speed_durations): fast is shorter,
    # not half
    assert slow > 1.8 * normal and fast < normal


def test_long_text_is_split_and_batched(ckpts):
    pipeline = Pipeline(TorchEngine.from_paths(ckpts["nonautoregressive"], "griffin-lim"))
    text = " ".join(f"This is sentence number {i}." for i in range(1, 13))
    seen = []
    result = pipeline.synthesize(text, batch_size=5, progress=lambda d, t: seen.append((d, t)))
    # the parts are made as they are spoken (issue 35): the total is known only at the last batch
    assert len(result.sentences) == 12 and seen == [(5, None), (10, None), (12, 12)]
    assert result.seconds > 11 * pipeline.pause_s  # pauses between sentences


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["--text", "   "], 3, "empty"),
        (["--text", "??? !!!"], 3, "speakable"),
        (["--text-file", "/nonexistent.txt"], 3, "not found"),
        (["--text", "hi", "--checkpoint", "/nonexistent.pt"], 4, "not found"),
        (["--text", "hi", "--vocoder", "no-such-vocoder"], 2, "unknown vocoder"),
        (["--text", "hi", "--speed", "0"], 2, "speed"),
        (["--text", "hi", "--temperature", "-1"], 2, "temperature"),
    ],
)
def test_bad_input_exit_codes(ckpts, tmp_path: Path, args, code, message):
    base = ["--checkpoint", str(ckpts["nonautoregressive"]), "--vocoder", "griffin-lim"]
    r = run(*base, *args, "--out", str(tmp_path / "x.wav"))
    assert r.returncode == code, (r.returncode, r.stderr)
    assert message in r.stderr.lower()
    assert not (tmp_path / "x.wav").exists()


def test_corrupt_checkpoint_and_ar_rejects_nar_controls(ckpts, tmp_path: Path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(ckpts["autoregressive"].read_bytes()[:1000])
    r = run("--text", "hi", "--checkpoint", str(bad), "--vocoder", "griffin-lim", "--out", str(tmp_path / "x.wav"))
    assert r.returncode == 4 and "corrupt" in r.stderr
    r = run("--text", "hi", "--checkpoint", str(ckpts["autoregressive"]), "--vocoder", "griffin-lim", "--speed", "2",
            "--out", str(tmp_path / "x.wav"))
    assert r.returncode == 2 and "speed" in r.stderr


def test_mel_config_mismatch_is_refused(tmp_path: Path):
    import dataclasses

    other = dataclasses.replace(MelConfig.default(), f_max=11025.0)
    path = tiny_checkpoint(tmp_path / "m.pt", "nonautoregressive", mel_config=other, **TINY["nonautoregressive"])
    r = run("--text", "hi", "--checkpoint", str(path), "--vocoder", "griffin-lim", "--out", str(tmp_path / "x.wav"))
    # griffin-lim is built for the acoustic model's config, so it accepts it; a trained vocoder must refuse
    assert r.returncode == 0, r.stderr
    from tts.audio import MelConfigMismatchError

    with pytest.raises(MelConfigMismatchError, match="f_max"):
        TorchEngine(checkpoint.load(path), load_vocoder("griffin-lim"))

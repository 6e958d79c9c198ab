"""The shipped default (checkpoints/, made by `python -m recipes.release`): what a new user runs first.

These run the real CLI on the committed checkpoints, offline, exactly as the README's first command does.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from tts import checkpoint
from tts.checkpoint import CheckpointError
from tts.paths import CHECKPOINT_DIR, REPO_ROOT
from tts.runtime.release import DEFAULTS_FILE, shipped_checkpoint, shipped_defaults
from tts.vocoder.registry import load_vocoder

# Festival SLT reads ~2.5-3.5 words per second (data/slt); the shipped model must land in a wide band
# around that, so a model that babbles on or stops early fails.
WORDS_PER_S = (1.2, 6.0)


def shipped_models() -> list[str]:
    """The acoustic models this release ships (checkpoints/release.json), e.g. ["nar"]."""
    files = json.loads((CHECKPOINT_DIR / "release.json").read_text())["files"]
    return sorted(Path(rel).stem for rel in files if "/" not in rel)


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", *args], cwd=REPO_ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600)


def test_release_is_complete_and_within_budget():
    defaults = shipped_defaults()
    # every model of every shipped voice is shipped, and the default voice is one of them
    assert defaults["voice"] in defaults["voices"]
    assert {m for models in defaults["voices"].values() for m in models} <= set(shipped_models())
    release = json.loads((CHECKPOINT_DIR / "release.json").read_text())
    total_mb = sum(p.stat().st_size for p in CHECKPOINT_DIR.rglob("*.pt")) / 2**20
    assert total_mb < 60, f"shipped weights {total_mb:.1f} MB exceed the 60 MB budget"
    assert total_mb == sum(f["mb"] for f in release["files"].values())
    vocoder = load_vocoder(defaults["vocoder"])
    assert defaults["acoustic"] in shipped_models()
    for model in shipped_models():
        loaded = checkpoint.load(shipped_checkpoint(model))
        vocoder.check_mel_config(loaded.mel_config, f"shipped {model}")
        assert loaded.meta.info["global_step"] > 0
    # a voice with its own vocoder: shipped, and it speaks the voice's models' mel definition
    for voice, name in defaults["voice_vocoders"].items():
        own = load_vocoder(name)
        for model in defaults["voices"][voice]:
            own.check_mel_config(checkpoint.load(shipped_checkpoint(model)).mel_config, f"shipped {model}")
    assert (CHECKPOINT_DIR / "README.md").is_file()
    assert DEFAULTS_FILE.is_file()


def test_default_voice_speaks_a_sentence(tmp_path: Path):
    text = "The quick brown fox jumps over the lazy dog."
    out = tmp_path / "out.wav"
    r = run("--text", text, "--out", str(out))
    assert r.returncode == 0, r.stderr
    info = sf.info(str(out))
    assert info.samplerate == 22050 and info.channels == 1
    seconds = info.frames / info.samplerate
    words = len(text.split())
    assert words / WORDS_PER_S[1] < seconds < words / WORDS_PER_S[0] + 1.0, seconds
    assert str(out) in r.stdout and "RTF" in r.stdout


def test_every_shipped_model_reads_long_text(tmp_path: Path):
    sentences = [f"This is sentence number {n}, read by the shipped model." for n in ("one", "two", "three", "four", "five")]
    for model in shipped_models():
        out = tmp_path / f"{model}.wav"
        r = run("--model", model, "--text", " ".join(sentences), "--out", str(out))
        assert r.returncode == 0, r.stderr
        assert "5 sentence(s)" in r.stdout
        seconds = sf.info(str(out)).duration
        words = sum(len(s.split()) for s in sentences)
        assert words / WORDS_PER_S[1] < seconds < words / WORDS_PER_S[0] + 5.0, (model, seconds)


def test_bad_input_with_shipped_default(tmp_path: Path):
    out = tmp_path / "x.wav"
    assert run("--text", "   ", "--out", str(out)).returncode == 3
    assert run("--text", "... !!! ???", "--out", str(out)).returncode == 3
    assert not out.exists()


def test_a_model_not_shipped_is_a_clear_error(tmp_path: Path):
    with pytest.raises(CheckpointError, match=r"no shipped 'tacotron9' model.*ships \["):
        shipped_checkpoint("tacotron9")
    missing = [m for m in ("nar", "ar") if m not in shipped_models()]
    for model in missing:  # the CLI says so with the checkpoint exit code and writes nothing
        out = tmp_path / f"{model}.wav"
        r = run("--model", model, "--text", "Hello.", "--out", str(out))
        assert r.returncode == 4 and f"no shipped '{model}' model" in r.stderr and not out.exists()


def test_a_shipped_model_speaks_with_its_own_checkpoint_config(tmp_path: Path):
    """K and temperature of the shipped voice live in the shipped checkpoint's own config (written there by
    recipes.release's `overrides`): every engine built on it speaks with them, wherever the file lives;
    checkpoints/default.json names only the default model and vocoder; a caller's control still wins."""
    from tts.runtime import Controls, Pipeline
    from tts.runtime.release import open_pipeline
    from tts.runtime.torch_engine import TorchEngine

    defaults = shipped_defaults()
    assert defaults["vocoder"] in ("source-filter", "griffin-lim", "hifigan")
    # no second home for controls (voice_vocoders: only where a voice has its own vocoder)
    assert set(json.loads(DEFAULTS_FILE.read_text())) - {"voice_vocoders"} == {"voice", "vocoder", "voices"}
    nar_path = CHECKPOINT_DIR / "nar.pt"
    own = checkpoint.load(nar_path)
    pipeline = Pipeline(TorchEngine.from_paths(nar_path, "griffin-lim"))
    assert pipeline.engine.defaults == Controls(**own.model.inference_spec().defaults)
    # the release wrote them into the file's own config
    cfg = own.meta.model_config
    assert (cfg["refine_steps"], cfg["refine_temperature"]) == (pipeline.engine.defaults.refine_steps,
                                                                 pipeline.engine.defaults.temperature)
    assert pipeline.engine.defaults.refine_steps > 0  # the shipped NAR refines by default
    if defaults["acoustic"] == "nar":  # the default voice, as the CLI and tts.load open it, speaks so too
        assert open_pipeline(runtime="torch").engine.defaults == pipeline.engine.defaults
    # the defaults drive the model; a caller's control still wins
    ids = [pipeline.engine.encode("Hello there.")]
    assert pipeline.engine.mels(ids, [0], pipeline.controls()).refine_steps_taken == cfg["refine_steps"]
    assert pipeline.engine.mels(ids, [0], pipeline.controls(refine_steps=1)).refine_steps_taken == 1
    # editing the file's config changes what the model does
    own.meta.model_config["refine_steps"] = own.model.refine_steps = 0
    checkpoint.save(tmp_path / "nar_k0.pt", own.model, own.meta)
    k0 = Pipeline(TorchEngine.from_paths(tmp_path / "nar_k0.pt", "griffin-lim"))
    assert k0.engine.defaults.refine_steps == 0 and k0.engine.mels(ids, [0], k0.controls()).refine_steps_taken == 0
    # a checkpoint outside checkpoints/ speaks with its own stored defaults: the same as in checkpoints/
    copy = tmp_path / "nar.pt"
    copy.write_bytes(nar_path.read_bytes())
    assert TorchEngine.from_paths(copy, "griffin-lim").defaults == pipeline.engine.defaults

"""docs/training.md walked end to end at tiny size (issue 32): the fixture corpus, a few training steps, one
thread, everything in a temporary folder, each step by the guide's own command, then speaking with the
released voice.  So the documented path cannot rot: every command here must appear in the guide."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import soundfile as sf

from tts.paths import CHECKPOINT_DIR, REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "training.md"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "slt20"

# tiny sizes: the guide's commands plus these overrides (the model and the run shrink, the path stays)
TINY_RUN = ["trainer=cpu", "trainer.max_steps=2", "trainer.val_check_interval=2", "trainer.limit_val_batches=1",
            "trainer.enable_progress_bar=false", "checkpoint_every_n_steps=2", "threads=1"]
TINY_NAR = ["model.d_model=32", "model.encoder_layers=1", "model.decoder_layers=1", "model.ffn_channels=64",
            "model.predictor_channels=32", "model.refiner.channels=16", "model.refiner.n_layers=2",
            "data.batch_size=4", "data.num_workers=0", "log_audio=false"]


def guide_commands() -> list[str]:
    """The commands of the guide's code blocks, continuation lines joined."""
    blocks = re.findall(r"```\n(.*?)```", GUIDE.read_text(), flags=re.S)
    return [c for block in blocks for c in block.replace("\\\n", " ").splitlines() if c.startswith("python -m ")]


def documented(module: str, *args: str) -> None:
    """The step is the guide's: a command of that module with these arguments (data paths aside)."""
    assert any(c.split()[2] == module and all(a in c.split() for a in args) for c in guide_commands()), \
        f"docs/training.md has no `python -m {module} {' '.join(args)} ...`"


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"python -m {module} {' '.join(args)}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def shipped_files() -> dict[Path, int]:
    """The shipped voice (checkpoints/onnx is derived from it and remade by `tts.export`: not counted)."""
    return {p: p.stat().st_mtime_ns for p in CHECKPOINT_DIR.rglob("*") if p.is_file() and "onnx" not in p.parts}


def test_the_guide_walked_end_to_end(tmp_path):
    shipped_before = shipped_files()
    # 1. corpus: the committed fixture stands for the builders' output (same layout, Festival segments)
    corpus = tmp_path / "data" / "slt"
    shutil.copytree(FIXTURE, corpus, ignore=shutil.ignore_patterns("cache"))
    exp = tmp_path / "exp"

    # 2. features
    documented("data_prep.features", "--data")
    run("data_prep.features", "--data", str(corpus))
    assert (corpus / "features" / "stats.json").is_file()

    # 3. acoustic model refused before durations exist, naming the command; then the durations
    documented("recipes.train", "experiment=nar_cpu_small", "name=my_nar")
    refused = subprocess.run([sys.executable, "-m", "recipes.train", "experiment=nar_cpu_small", f"data.root={corpus}",
                              f"exp_dir={exp / 'my_nar'}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert refused.returncode == 2 and "python -m recipes.extract_durations source=festival" in refused.stderr
    documented("recipes.extract_durations", "source=festival")
    durations = run("recipes.extract_durations", "source=festival", f"data_root={corpus}")
    assert durations.stdout.count('"phones_with_zero_frames"') == 3  # the report once (3 splits), not twice
    assert f"to {corpus / 'durations' / 'festival'}" in durations.stdout

    # 4. acoustic model: the durations are found by the data config, not passed
    run("recipes.train", "experiment=nar_cpu_small", f"data.root={corpus}", f"exp_dir={exp / 'my_nar'}",
        *TINY_RUN, *TINY_NAR)
    nar_ckpt = exp / "my_nar" / "checkpoints" / "last.ckpt"
    assert nar_ckpt.is_file()

    # 5. vocoder
    documented("recipes.train_vocoder", "vocoder=source_filter", "name=my_vocoder")
    run("recipes.train_vocoder", "vocoder=source_filter", "vocoder_debug=tiny", f"data.root={corpus}",
        f"exp_dir={exp / 'my_vocoder'}", "trainer.max_steps=2", "vocoder.hidden_channels=16")
    voc_ckpt = exp / "my_vocoder" / "checkpoints" / "last.ckpt"
    assert voc_ckpt.exists()

    # 6. release into a new folder
    documented("recipes.release", "acoustic.ar=null")
    voice = tmp_path / "voices" / "mine"
    released = run("recipes.release", "acoustic.ar=null", f"acoustic.nar={nar_ckpt}",
                   f"vocoders.source-filter={voc_ckpt}", f"out_dir={voice}")
    assert sorted(json.loads((voice / "release.json").read_text())["files"]) == ["nar.pt", "vocoder/source_filter.pt"]
    vocoder = voice / "vocoder" / "source_filter.pt"

    # 7. synthesise with it, by the command the release printed
    documented("tts.synthesize", "--checkpoint", "--vocoder")
    printed = released.stdout.strip().splitlines()[-1]
    assert printed == (f"speak with it: python -m tts.synthesize --checkpoint {voice / 'nar.pt'} --vocoder {vocoder} "
                       f'--text "Hello there." --out hello.wav')
    wav = tmp_path / "mine.wav"
    run("tts.synthesize", "--checkpoint", str(voice / "nar.pt"), "--vocoder", str(vocoder),
        "--text", "My own voice, at last.", "--out", str(wav), "--threads", "1")
    audio, rate = sf.read(wav)
    assert rate == 22050 and len(audio) > 0

    # 8. evaluate it beside the recordings
    documented("recipes.evaluate", "'~systems.ar'", "'~systems.nar'")
    evaluation = exp / "eval" / "mine"
    run("recipes.evaluate", f"data_root={corpus}", f"out_dir={evaluation}", "~systems.ar", "~systems.nar",
        "~systems.copy_griffin_lim", f"+systems.mine={{kind:acoustic,checkpoint:{voice / 'nar.pt'},vocoder:{vocoder}}}",
        "limit=2", "metrics.asr=false", "metrics.mos=false", "metrics.f0=false", "threads=1")
    assert "| mine |" in (evaluation / "report.md").read_text()

    # 9. a listening test of its audio against the recordings
    documented("recipes.listening_test", "build", "--mos")
    test_dir = exp / "listening" / "mine"
    run("recipes.listening_test", "build", "--systems", f"mine={evaluation / 'mine'}",
        f"gt={evaluation / 'ground_truth'}", "--out", str(test_dir), "--mos", "--n", "2")
    assert (test_dir / "test.json").is_file()

    # nothing shipped was touched on the way
    assert shipped_files() == shipped_before

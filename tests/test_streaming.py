"""Streaming end to end (issue 22): Pipeline.stream block by block through the source-filter vocoder's
stream, equal to synthesize within STREAM_TOLERANCE; Griffin-Lim per sentence; the CLI's --stream (a wav
growing at --out) and --out - (raw PCM on stdout), equal to the non-streamed wav."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from test_nonautoregressive import _one_thread  # noqa: F401 (autouse: one thread, the same float sums run after run)
from tts import checkpoint
from tts.audio import MelConfig
from tts.checkpoint import CheckpointMeta
from tts.runtime import Pipeline
from tts.runtime.pipeline import STREAM_TOLERANCE
from tts.runtime.torch_engine import TorchEngine
from tts.paths import CHECKPOINT_DIR, CONF_DIR, REPO_ROOT
from tts.synthesize import main
from tts.text import TextFrontend
from tts.vocoder.registry import load_vocoder

TEXT = "The quick brown fox jumps over the lazy dog. Streaming starts before the end! A third, short one."
SOURCE_FILTER = CHECKPOINT_DIR / "vocoder" / "source_filter.pt"


@pytest.fixture(scope="module")
def block_ckpt(tmp_path_factory) -> Path:
    """A tiny random block-mode NAR (with refiner) whose prenet really feeds back (its output layer is
    zero-initialised, so it is set at random here), saved as a real checkpoint."""
    mel_config = MelConfig.default()
    frontend = TextFrontend(max_symbols=400)
    node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / "nonautoregressive.yaml"))
    node.update(d_model=32, encoder_layers=1, decoder_layers=2, ffn_channels=64, predictor_channels=32,
                min_token_frames=2, block_sizes=[8, 0], block_past_frames=16, block_frames=8, refine_steps=2)
    node["refiner"].update(channels=16, n_layers=2)
    kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    torch.manual_seed(0)
    model = instantiate(node, **kwargs)
    torch.nn.init.normal_(model.block_prenet.out.weight, std=0.1)
    path = tmp_path_factory.mktemp("block") / "nar_block.pt"
    checkpoint.save(path, model, CheckpointMeta("acoustic", node, kwargs, mel_config, frontend.to_dict(), {}))
    return path


@pytest.fixture(scope="module")
def corrected_vocoder(tmp_path_factory) -> Path:
    """The shipped source-filter vocoder with a magnitude correction that is not the identity, as a checkpoint."""
    from tts.vocoder.registry import build_vocoder, vocoder_meta

    node = checkpoint.read_raw(SOURCE_FILTER)["tts"]["model_config"] | {"correction_channels": 16,
                                                                          "correction_blocks": 2}
    model = build_vocoder(node, MelConfig.default())
    plain = {k: v for k, v in load_vocoder(str(SOURCE_FILTER), MelConfig.default()).state_dict().items()
             if not k.startswith("correction.")}  # the shipped network and filters, a correction of our own
    missing = model.load_state_dict(plain, strict=False)
    assert missing.missing_keys and all(k.startswith("correction.") for k in missing.missing_keys)
    torch.manual_seed(1)
    with torch.no_grad():
        model.correction.head.weight.normal_(0, 0.02)
        model.correction.head.bias.normal_(0, 0.3)
    path = tmp_path_factory.mktemp("vocoder") / "corrected.pt"
    checkpoint.save(path, model, vocoder_meta(node, MelConfig.default()))
    return path


def test_the_magnitude_corrected_vocoder_streams_end_to_end(block_ckpt: Path, corrected_vocoder: Path):
    s = synth(block_ckpt, str(corrected_vocoder))
    assert s.engine.capabilities.streaming
    c = s.controls(seed=3, block_frames=8)
    whole = s.synthesize(TEXT, c)
    streamed = np.concatenate(list(s.stream_utterance(s.utterance(TEXT, c))))
    assert streamed.shape == whole.wave.shape and np.abs(whole.wave).max() > 0.01
    assert np.abs(streamed - whole.wave).max() <= STREAM_TOLERANCE


def synth(path: Path, vocoder: str) -> Pipeline:
    return Pipeline(TorchEngine(checkpoint.load(path), load_vocoder(vocoder, MelConfig.default())))


@pytest.mark.parametrize("block_frames", [8, 0])
def test_stream_equals_synthesize_and_comes_in_blocks(block_ckpt: Path, block_frames: int):
    s = synth(block_ckpt, str(SOURCE_FILTER))
    c = s.controls(seed=3, block_frames=block_frames)
    whole = s.synthesize(TEXT, c)
    utt = s.utterance(TEXT, c)
    chunks = list(s.stream_utterance(utt))
    streamed = np.concatenate(chunks)
    assert streamed.shape == whole.wave.shape
    assert np.abs(streamed - whole.wave).max() <= STREAM_TOLERANCE
    n_parts = len(utt.parts)
    if block_frames:  # block by block inside a sentence: a sentence longer than the vocoder's lookahead comes in
        # several pieces, so there are more chunks than sentences and pauses
        voc = s.engine.vocoder
        lookahead = voc.lookahead_frames * voc.mel_config.hop_length
        assert len(chunks) > 2 * n_parts - 1 and any(c.size < lookahead for c in chunks)
    assert utt.run.timings.first_audio_s is not None and utt.run.timings.first_audio_s < utt.run.timings.total_s + 1


def test_griffin_lim_streams_a_sentence_at_a_time(block_ckpt: Path):
    s = synth(block_ckpt, "griffin-lim")
    # batch 1 as the stream speaks: Griffin-Lim's 32 iterations amplify the ~2e-6 a batch of 8 changes in
    # the mel (float sums in another order) to ~4e-3 in samples
    c = s.controls(seed=1)
    whole = s.synthesize(TEXT, c, batch_size=1)
    chunks = list(s.stream(TEXT, c))
    assert len(chunks) == 2 * 3 - 1  # three sentences and the two pauses between them
    assert np.abs(np.concatenate(chunks) - whole.wave).max() <= STREAM_TOLERANCE


def test_cli_stream_wav_and_stdout_pcm_equal_the_plain_wav(block_ckpt: Path, tmp_path: Path, capsysbinary):
    common = ["--checkpoint", str(block_ckpt), "--vocoder", str(SOURCE_FILTER), "--text", TEXT, "--seed", "2",
              "--runtime", "torch", "--quiet"]
    assert main(common + ["--out", str(tmp_path / "plain.wav")]) == 0
    assert main(common + ["--out", str(tmp_path / "stream.wav"), "--stream"]) == 0
    plain, sr = sf.read(tmp_path / "plain.wav", dtype="int16")
    streamed, sr2 = sf.read(tmp_path / "stream.wav", dtype="int16")
    assert sr == sr2 == 22050 and plain.shape == streamed.shape
    assert np.abs(plain.astype(int) - streamed.astype(int)).max() <= 1  # one 16-bit step: STREAM_TOLERANCE
    assert not list(tmp_path.glob(".tts-*"))  # no temp file left
    capsysbinary.readouterr()
    assert main(common + ["--out", "-", "--stream", "--block-frames", "16"]) == 0
    out = capsysbinary.readouterr()
    pcm = np.frombuffer(out.out, dtype="<i2")
    assert pcm.shape == plain.shape and b"wrote -" in out.err
    # B = 16 is another model output than the checkpoint's B = 8, but as long and of the same voice
    assert main(common + ["--out", str(tmp_path / "b16.wav"), "--block-frames", "16"]) == 0
    b16, _ = sf.read(tmp_path / "b16.wav", dtype="int16")
    assert np.abs(pcm.astype(int) - b16.astype(int)).max() <= 1


def test_cli_out_dash_is_a_real_pipe_and_a_parallel_checkpoint_refuses_blocks(block_ckpt: Path, tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "tts.synthesize", "--checkpoint", str(block_ckpt), "--vocoder", "griffin-lim",
         "--text", "Piped audio.", "--out", "-", "--stream", "--runtime", "torch", "--quiet"],
        capture_output=True, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout) % 2 == 0 and len(proc.stdout) > 22050 * 2 * 0.2
    bad = main(["--checkpoint", str(CHECKPOINT_DIR / "nar.pt"), "--text", "Hi.", "--out", str(tmp_path / "x.wav"),
                "--block-frames", "16", "--runtime", "torch"])
    assert bad == 2 and not (tmp_path / "x.wav").exists()


def test_blocks_benchmark_writes_the_curve(block_ckpt: Path, tmp_path: Path):
    """python -m recipes.benchmark blocks on the tiny model: speed rows for every system and length, the paragraph
    first audio, quality joined from a recipes.evaluate-shaped report, a table and a plot."""
    import json

    from recipes.benchmark import main as bench_main

    report = tmp_path / "report.json"
    summary = {name: {"cer": {"mean": 0.1, "ci_low": 0.05, "ci_high": 0.2}} for name in ("nar", "nar_block_b8", "nar_block_bwhole")}
    report.write_text(json.dumps({"summary": summary}))
    out = tmp_path / "bench"
    assert bench_main(["blocks", "--block", str(block_ckpt), "--nar", str(block_ckpt), "--vocoder", "griffin-lim",
                       "--blocks", "8,0", "--lengths", "10,30", "--repeats", "1", "--threads", "1",
                       "--quality", str(report), "--out", str(out)]) == 0
    r = json.loads((out / "blocks.json").read_text())
    rows = {(row["system"], row["symbols"]) for row in r["speed"]}
    assert rows == {(s, n) for s in ("nar", "b8", "bwhole") for n in (10, 30, "paragraph")}
    assert all(row["first_audio_s"] > 0 for row in r["speed"])
    assert all(row["total_s"] >= row["first_audio_s"] for row in r["speed"] if row["symbols"] != "paragraph")
    assert r["quality"]["b8"]["cer"]["mean"] == 0.1 and "b16" not in r["quality"]
    assert (out / "blocks.png").stat().st_size > 1000 and "| b8 | 8 |" in (out / "blocks.md").read_text()

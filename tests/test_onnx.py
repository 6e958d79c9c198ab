"""ONNX export of the default voice and its torch-free runtime (tts.export, tts.onnx_runtime).

Parity is measured on the shipped checkpoints (the real default voice), exported once per module:
  * mel: onnxruntime against eager torch within 1e-3 (absolute, natural-log units), the same lengths;
  * wave: max |difference| <= WAVE_MAX_ABS and relative RMS error <= WAVE_REL_RMS.  Not bit-exact because the
    vocoder's F0 is decoded in float32 in both runtimes with a different summation order (~1e-7 relative),
    and the oscillator integrates F0 into a phase over the utterance: a 1-ulp F0 difference becomes a
    phase drift of ~1e-3 rad in high harmonics after a second.  The DSP itself, fed the same parameters,
    agrees to 1e-5 (test_render_matches_torch).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tts.errors import CheckpointError
from tts.export import MANIFEST, export, sha256_file
from tts.inference import Synthesizer, shipped_checkpoint, shipped_controls
from tts.onnx_runtime import (
    OnnxExportError, OnnxSynthesizer, export_is_current, hash_noise, read_manifest, render_whole, torch_randn)
from tts.paths import REPO_ROOT

MEL_ATOL = 1e-3
WAVE_MAX_ABS = 1e-2
WAVE_REL_RMS = 1e-2
TEXTS = ["Hello world.", "The quick brown fox jumps over the lazy dog; then it sleeps, twice."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    pytest.importorskip("onnx", reason="making an export needs the `export` extra (pip install -e '.[export]')")
    out = tmp_path_factory.mktemp("onnx")
    export(out)
    return out


@pytest.fixture(scope="module")
def eager() -> Synthesizer:
    return Synthesizer.from_paths(shipped_checkpoint("nar"), "source-filter")


@pytest.fixture(scope="module")
def onnx(exported: Path) -> OnnxSynthesizer:
    return OnnxSynthesizer.load(exported, threads=1)


def rel_rms(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)) / max(np.sqrt(np.mean(a**2)), 1e-9))


@pytest.mark.parametrize("seed, shape", [(0, (80, 50)), (123456789, (80, 7)), (2**32 - 1, (3, 7)), (7, (16,))])
def test_torch_randn_is_torch_randn(seed: int, shape: tuple[int, ...]):
    """The refiner's start noise in numpy equals torch's generator (whole 16-blocks and the recomputed tail)."""
    expected = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).numpy()
    np.testing.assert_allclose(torch_randn(seed, shape), expected, rtol=0, atol=1e-6)


def test_hash_noise_matches_the_torch_table():
    from tts.vocoder.dsp import NOISE_PERIOD
    from tts.vocoder.dsp import hash_noise as torch_hash_noise

    for s0, s1 in ((-384, 1000), (NOISE_PERIOD - 50, NOISE_PERIOD + 50)):  # negative samples and the wrap
        np.testing.assert_array_equal(hash_noise(0, s0, s1), torch_hash_noise(0, s0, s1, 1)[0].numpy())


def test_render_matches_torch(eager: Synthesizer, onnx: OnnxSynthesizer):
    """The numpy DSP on the torch vocoder's own frame parameters: the same wave to float rounding."""
    voc = eager.vocoder
    mel = eager.mels(eager.pad([eager.encode(TEXTS[0])]), seed=1).mels
    with torch.inference_mode():
        params = voc.frame_params(mel)
        f0, voiced = voc.decode(params)
        expected = voc._render_whole(params, f0, voiced).numpy()
    got = render_whole(f0.numpy(), voiced.numpy(), params.harmonic_cepstrum.numpy(), params.noise_cepstrum.numpy(),
                       onnx.voc, onnx.window)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_manifest_describes_the_export(exported: Path):
    manifest = read_manifest(exported)
    nar = shipped_checkpoint("nar")
    assert manifest["sources"]["acoustic"]["sha256"] == sha256_file(nar)
    assert manifest["controls"] == {k: shipped_controls(nar)[k] for k in ("refine_steps", "temperature")}
    assert manifest["frontend"]["symbols"] and manifest["mel_config"]["n_mels"] == 80
    assert all((exported / g["file"]).is_file() for g in manifest["graphs"].values())
    assert export_is_current(exported)


@pytest.mark.parametrize("controls", [{}, {"refine_steps": 0}, {"refine_steps": 3, "temperature": 1.0},
                                      {"speed": 1.3, "pitch_shift": 2.0}])
def test_mel_parity(eager: Synthesizer, onnx: OnnxSynthesizer, controls: dict):
    """A padded batch of two texts, the shipped K=2/T=0.667 or other controls, seeded noise: mels within 1e-3."""
    ids = [eager.encode(t) for t in TEXTS]
    expected = eager.mels(eager.pad(ids), seed=5, **controls)
    got = onnx.mels(ids, seed=5, **controls)
    assert got.mel_lengths.tolist() == expected.mel_lengths.tolist()
    assert got.refine_steps_taken == expected.refine_steps_taken
    np.testing.assert_allclose(got.mels, expected.mels.numpy(), rtol=0, atol=MEL_ATOL)


def test_wave_parity(eager: Synthesizer, onnx: OnnxSynthesizer):
    [a] = eager.synthesize_items([TEXTS[1]], seed=2)
    [b] = onnx.synthesize_items([TEXTS[1]], seed=2)
    assert (b.frames, b.n_tokens, b.refine_steps_taken) == (a.frames, a.n_tokens, a.refine_steps_taken)
    wa, wb = a.wave.numpy(), b.wave
    assert wb.shape == wa.shape and wb.dtype == np.float32
    assert np.abs(wa - wb).max() <= WAVE_MAX_ABS and rel_rms(wa, wb) <= WAVE_REL_RMS


def test_synthesize_keeps_the_torch_contract(eager: Synthesizer, onnx: OnnxSynthesizer):
    """Sentence split, pauses, per-sentence seeds, the sink: the same audio layout as the torch path."""
    text = "First sentence here. And a second one"
    a = eager.synthesize(text, seed=4, batch_size=1)
    streamed: list[np.ndarray] = []
    b = onnx.synthesize(text, seed=4, batch_size=2, sink=streamed.append)
    assert b.sentences == a.sentences and b.wave.size == 0
    wb = np.concatenate(streamed)
    assert b.streamed_samples == wb.size == a.wave.numel() and b.sample_rate == a.sample_rate
    assert rel_rms(a.wave.numpy(), wb) <= WAVE_REL_RMS
    with pytest.raises(ValueError, match="pitch_shift"):
        onnx.synthesize("Hi.", pitch_shift=20)


def test_missing_or_corrupt_export_is_a_clear_error(exported: Path, tmp_path: Path):
    with pytest.raises(OnnxExportError, match="folder missing.*python -m tts.export"):
        OnnxSynthesizer.load(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    graph = broken / "refiner_velocity.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the weights
    graph.write_bytes(bytes(data))
    with pytest.raises(OnnxExportError, match="does not match its manifest hash"):
        OnnxSynthesizer.load(broken)
    graph.write_bytes(b"not an onnx file")
    with pytest.raises(OnnxExportError, match="cannot be loaded"):
        OnnxSynthesizer.load(broken, verify=False)
    (broken / MANIFEST).write_text("{ truncated")
    with pytest.raises(OnnxExportError, match="corrupt"):
        OnnxSynthesizer.load(broken)
    (broken / MANIFEST).unlink()
    with pytest.raises(OnnxExportError, match="manifest.json missing"):
        OnnxSynthesizer.load(broken)
    assert issubclass(OnnxExportError, CheckpointError)  # the CLI's exit 4


def test_a_stale_export_is_detected(exported: Path, tmp_path: Path):
    stale = tmp_path / "stale"
    shutil.copytree(exported, stale)
    manifest = json.loads((stale / MANIFEST).read_text())
    manifest["sources"]["acoustic"]["mtime_ns"] = 1  # another file time (a checkout): same bytes, still current
    (stale / MANIFEST).write_text(json.dumps(manifest))
    assert export_is_current(stale)
    manifest["sources"]["acoustic"]["sha256"] = "0" * 64  # as if nar.pt had been re-released since
    (stale / MANIFEST).write_text(json.dumps(manifest))
    assert not export_is_current(stale)


def test_the_onnx_cli_runs_without_torch(exported: Path, tmp_path: Path):
    """`--runtime onnx` end to end in a fresh interpreter: a wav, and torch, Hydra, Lightning, SpeechBrain
    never imported (a sys.modules check after main() returns)."""
    out = tmp_path / "hi.wav"
    code = ("import sys; from tts.synthesize import main; rc = main(['--runtime', 'onnx', '--onnx-dir', sys.argv[1], "
            "'--text', 'Hi there.', '--out', sys.argv[2], '--quiet']); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'hydra', 'lightning', "
            "'pytorch_lightning', 'speechbrain', 'torchaudio', 'librosa'}); print('HEAVY', heavy); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(exported), str(out)], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout and "runtime onnx" in r.stdout
    import soundfile as sf

    wave, sr = sf.read(out)
    assert sr == 22050 and wave.size > 0.3 * sr and np.abs(wave).max() > 0.01


def test_cli_runtime_choice(exported: Path, tmp_path: Path, capsys):
    from tts.synthesize import main

    def run(*args: str) -> tuple[int, str]:
        try:
            code = main([*args, "--text", "Hi.", "--out", str(tmp_path / "x.wav"), "--quiet"])
        except SystemExit as e:
            code = e.code
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    code, out = run("--runtime", "onnx", "--onnx-dir", str(exported), "--model", "ar")
    assert code == 2 and "--runtime torch" in out
    code, out = run("--runtime", "onnx", "--onnx-dir", str(tmp_path / "none"))
    assert code == 4 and "python -m tts.export" in out
    code, out = run("--onnx-dir", str(tmp_path / "none"), "--vocoder", "griffin-lim")  # auto: torch
    assert code == 0 and "runtime torch" in out
    code, out = run("--onnx-dir", str(exported))  # auto with a current export of the default voice: onnx
    assert code == 0 and "runtime onnx" in out


# --- the benchmark commands (smoke runs: outputs and their meaning, no timed assertions) -------------------
def test_cold_start_counts_only_the_cli_process():
    """A child's peak RSS must not include this (torch-importing) process: a bare interpreter stays small."""
    from tts.bench.cold_start import run_once

    wall, rss_mb, _ = run_once([sys.executable, "-c", "pass"], REPO_ROOT, dict(__import__("os").environ))
    assert wall > 0 and 1 < rss_mb < 100, rss_mb


def test_cold_start_command(exported: Path, tmp_path: Path):
    from tts import benchmark

    out = tmp_path / "cs"
    assert benchmark.main(["cold-start", "--repeats", "1", "--runtimes", "onnx", "--onnx-dir", str(exported),
                           "--no-export", "--importtime", "--out", str(out)]) == 0
    r = json.loads((out / "cold_start.json").read_text())["results"]["onnx"]
    [run] = r["runs"]
    assert run["runtime"] == "onnx" and run["wall_s"] > 0 and run["peak_rss_mb"] > 0
    assert r["meets_targets"] == (r["wall_s_median"] <= 1.0 and r["peak_rss_mb_max"] <= 400)
    assert {"numpy", "onnxruntime"} <= {i["package"] for i in r["imports"]}
    assert "torch" not in {i["package"] for i in r["imports"]}
    assert "| onnx | onnx |" in (out / "cold_start.md").read_text()


def test_onnx_benchmark_command(exported: Path, tmp_path: Path):
    from tts import benchmark

    out = tmp_path / "ob"
    assert benchmark.main(["onnx", "--onnx-dir", str(exported), "--lengths", "12", "--threads", "1", "--repeats", "1",
                           "--out", str(out)]) == 0
    r = json.loads((out / "onnx_benchmark.json").read_text())
    [parity] = r["parity"]
    assert parity["frames_eager"] == parity["frames_onnx"] and parity["mel_max_abs"] <= MEL_ATOL
    [speed] = r["speed"]
    assert speed["threads"] == 1 and speed["eager_total_s"] > 0 and speed["onnx_total_s"] > 0
    assert speed["speedup_total"] == pytest.approx(speed["eager_total_s"] / speed["onnx_total_s"])
    assert "Parity" in (out / "onnx_benchmark.md").read_text()

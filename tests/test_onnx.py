"""ONNX export of the shipped voices (tts.export: the default parallel NAR and the block-wise NAR) and what the
ONNX engine needs around it: the manifest, a corrupt, stale or old-format export refused, the CLI without torch,
the runtime choice, the benchmark commands.  The engine's behaviour and its parity with torch are
tests/test_pipeline.py's (every test on both engines, block mode and streaming included).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tts import checkpoint
from tts.errors import CheckpointError
from tts.export import MANIFEST, export, sha256_file
from tts.noise import NOISE_PERIOD, hash_noise
from tts.paths import CHECKPOINT_DIR, REPO_ROOT
from tts.runtime.onnx_engine import FORMAT, OnnxEngine, OnnxExportError, export_is_current, read_manifest
from tts.runtime.release import shipped_checkpoint
from tts.runtime.torch_engine import TorchEngine
from tts.vocoder.render import RenderInput, Synthesis, hann_window, render

MEL_ATOL = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    pytest.importorskip("onnx", reason="making an export needs the `export` extra (pip install -e '.[export]')")
    out = tmp_path_factory.mktemp("onnx")
    # the slt voice's two NARs, as `python -m tts.export` exports them (every shipped voice's: tests/test_voices.py)
    export(out, [shipped_checkpoint("nar"), shipped_checkpoint("nar_block")])
    return out


def test_hash_noise_matches_the_torch_table():
    from tts.vocoder.dsp import hash_noise as torch_hash_noise

    for s0, s1 in ((-384, 1000), (NOISE_PERIOD - 50, NOISE_PERIOD + 50)):  # negative samples and the wrap
        np.testing.assert_array_equal(hash_noise(0, s0, s1), torch_hash_noise(0, s0, s1, 1)[0].numpy())


def test_render_matches_torch(exported: Path):
    """The one render on numpy operations (the ONNX engine's) and on torch's (the vocoder's), fed the torch
    vocoder's own frame parameters: the same wave to float rounding."""
    engine = TorchEngine.from_paths(shipped_checkpoint("nar"), "source-filter")
    voc = engine.vocoder
    mel = engine.mels([engine.encode("Hello world.")], [0], engine.defaults.replace(seed=1)).mels
    with torch.inference_mode():
        params = voc.frame_params(mel)
        f0, voiced = voc.decode(params)
        expected = voc._render_whole(params, f0, voiced).numpy()
    syn = Synthesis(**read_manifest(exported)["vocoders"]["source-filter"]["synthesis"])
    assert syn == voc.synthesis
    t = f0.shape[1]
    got, _ = render(RenderInput(f0.numpy(), voiced.numpy(), params.harmonic_cepstrum.numpy(), params.noise_cepstrum.numpy(),
                                0), 0, t * syn.hop_length, np.zeros(1), t, syn, hann_window(syn.window))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def test_manifest_describes_the_export(exported: Path):
    """Self-describing: each voice's decoding, controls (its checkpoint's own), frontend, source hash and graphs;
    each voice's vocoder, exported once for the voices that share it; the noise table stored once for every
    graph that reads it."""
    manifest = read_manifest(exported)
    assert manifest["default_voice"] == "nar" and set(manifest["voices"]) == {"nar", "nar_block"}
    for name, decoding, parts in (("nar", "parallel", {"acoustic"}), ("nar_block", "block", {"front", "block", "refine"})):
        voice, path = manifest["voices"][name], shipped_checkpoint(name)
        assert voice["decoding"] == decoding and set(voice["graphs"]) == parts
        assert manifest["sources"][voice["source"]]["sha256"] == sha256_file(path)
        # the voice's own controls, copied from the checkpoint (the ONNX engine's defaults)
        assert voice["controls"] == checkpoint.load(path).model.inference_spec().defaults
        assert OnnxEngine.load(exported, voice=name).defaults == TorchEngine.from_paths(path, "source-filter").defaults
        assert voice["frontend"]["symbols"] and export_is_current(exported, name)
    assert manifest["voices"]["nar_block"]["controls"]["block_frames"] > 0
    # both slt models speak through the shipped default vocoder: one entry, its graphs and its source's hash
    assert {v["vocoder"] for v in manifest["voices"].values()} == set(manifest["vocoders"]) == {"source-filter"}
    vocoder = manifest["vocoders"]["source-filter"]
    assert manifest["sources"][vocoder["source"]]["sha256"] == sha256_file(CHECKPOINT_DIR / "vocoder" / "source_filter.pt")
    assert vocoder["graph"] in manifest["graphs"] and vocoder["receptive_frames"] > 0
    assert manifest["mel_config"]["n_mels"] == 80
    assert all((exported / g["file"]).is_file() for g in manifest["graphs"].values())
    assert export_is_current(exported) and not export_is_current(exported, "no_such_voice")
    # the 4.2 MB noise table: one file, read by the two graphs that draw start noise, in none of the graphs
    [table] = manifest["external_data"]
    readers = {name for name, g in manifest["graphs"].items() if table in g.get("external_data", [])}
    assert readers == {"nar.acoustic", "nar_block.refine"}
    assert (exported / table).stat().st_size == 4 * 2**20
    # Weights stored in their smallest exact form (tts.export.exact_int8, float16): the int8 NARs' weights as int8
    # codes and scales, as in their checkpoints.  Two voices and the vocoder: 23.8 MB (67.9 MB when the int8
    # weights were stored as the float32 values they dequantise to).
    assert all((exported / g["file"]).stat().st_size < 10e6 for g in manifest["graphs"].values())
    total = sum(f.stat().st_size for f in exported.iterdir())
    assert total < 30e6, total


def test_int8_weights_are_stored_as_int8_in_the_graphs_exactly():
    """exact_int8 finds a checkpoint's int8 weights (tts.checkpoint.pack_weights) in the float32 values they
    dequantise to, transposed or not, and gives codes and scales whose float32 product is each value bit for bit;
    a tensor that is not such a product is left alone (None)."""
    from tts.checkpoint import pack_weights, unpack_weights
    from tts.export import exact_int8

    torch.manual_seed(0)
    weight = torch.randn(48, 64, 3) * torch.rand(48, 1, 1)
    weight[5] = 0.0  # an all-zero channel
    values = unpack_weights(pack_weights({"w": weight}, "int8"))["w"].numpy()
    for tensor in (values, values.transpose(2, 1, 0).copy(), values.reshape(48, -1).T.copy()):
        codes, scale = exact_int8(tensor)
        assert codes.dtype == np.int8 and np.abs(codes).max() <= 127
        np.testing.assert_array_equal(codes.astype(np.float32) * scale, tensor)
    assert exact_int8(weight.numpy()) is None
    assert exact_int8(weight.half().float().numpy()) is None  # float16 values: stored as float16 instead


def test_an_old_export_format_is_refused_with_the_command(exported: Path, tmp_path: Path):
    old = tmp_path / "old"
    shutil.copytree(exported, old)
    manifest = json.loads((old / MANIFEST).read_text())
    manifest["format"] = "tts-onnx-v2"
    (old / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(OnnxExportError, match=f"format .tts-onnx-v2.*reads {FORMAT}.*python -m tts.export"):
        OnnxEngine.load(old)
    assert not export_is_current(old)  # the CLI's auto then takes torch
    with pytest.raises(ValueError, match="no voice 'nar_fast'.*nar, nar_block"):
        OnnxEngine.load(exported, voice="nar_fast")


def test_the_refiner_steps_run_inside_the_graph(exported: Path):
    """K is an input of the one acoustic graph (an ONNX Loop), not a loop of the engine: any K in one call,
    K = 0 the coarse mel, and the noise offsets change the mel only when K > 0."""
    engine = OnnxEngine.load(exported)
    ids = [engine.encode("Hello world.")]
    c = engine.defaults
    k0 = [engine.mels(ids, [i], c.replace(refine_steps=0)).mels for i in (0, 1)]
    np.testing.assert_array_equal(k0[0], k0[1])  # no noise at K = 0
    k5 = [engine.mels(ids, [i], c.replace(refine_steps=5)).mels for i in (0, 1)]
    assert np.abs(k5[0] - k5[1]).max() > 1e-2 and np.abs(k5[0] - k0[0]).max() > 1e-2
    import onnx

    ops = {n.op_type for n in onnx.load(str(exported / "nar.acoustic.onnx"), load_external_data=False).graph.node}
    assert "Loop" in ops


def test_missing_or_corrupt_export_is_a_clear_error(exported: Path, tmp_path: Path):
    with pytest.raises(OnnxExportError, match="folder missing.*python -m tts.export"):
        OnnxEngine.load(tmp_path / "nowhere")
    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    graph = broken / "nar.acoustic.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside the weights
    graph.write_bytes(bytes(data))
    with pytest.raises(OnnxExportError, match="does not match its manifest hash"):
        OnnxEngine.load(broken)
    graph.write_bytes(b"not an onnx file")
    with pytest.raises(OnnxExportError, match="cannot be loaded"):
        OnnxEngine.load(broken, verify=False)
    shutil.copy(exported / graph.name, graph)
    table = broken / "noise_table.f32"
    table.write_bytes(table.read_bytes()[:-4] + b"\0\0\0\0")  # the graphs' shared noise table
    with pytest.raises(OnnxExportError, match="noise_table.f32 does not match its manifest hash"):
        OnnxEngine.load(broken, voice="nar_block")
    table.unlink()
    with pytest.raises(OnnxExportError, match="noise_table.f32 is missing"):
        OnnxEngine.load(broken, verify=False)
    (broken / MANIFEST).write_text("{ truncated")
    with pytest.raises(OnnxExportError, match="corrupt"):
        OnnxEngine.load(broken)
    (broken / MANIFEST).unlink()
    with pytest.raises(OnnxExportError, match="manifest.json missing"):
        OnnxEngine.load(broken)
    assert issubclass(OnnxExportError, CheckpointError)  # the CLI's exit 4


def test_a_stale_export_is_detected(exported: Path, tmp_path: Path):
    stale = tmp_path / "stale"
    shutil.copytree(exported, stale)
    manifest = json.loads((stale / MANIFEST).read_text())
    manifest["sources"]["nar"]["mtime_ns"] = 1  # another file time (a checkout): same bytes, still current
    (stale / MANIFEST).write_text(json.dumps(manifest))
    assert export_is_current(stale)
    manifest["sources"]["nar"]["sha256"] = "0" * 64  # as if nar.pt had been re-released since
    (stale / MANIFEST).write_text(json.dumps(manifest))
    assert not export_is_current(stale) and export_is_current(stale, "nar_block")  # each voice on its own


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
    assert code == 2 and "torch runtime" in out
    code, out = run("--runtime", "onnx", "--onnx-dir", str(tmp_path / "none"))
    assert code == 4 and "python -m tts.export" in out
    code, out = run("--onnx-dir", str(tmp_path / "none"), "--vocoder", "griffin-lim")  # auto: torch
    assert code == 0 and "runtime torch" in out
    code, out = run("--onnx-dir", str(exported))  # auto with a current export of the default voice: onnx
    assert code == 0 and "runtime onnx" in out


# --- the benchmark commands (smoke runs: outputs and their meaning, no timed assertions) -------------------
def test_cold_start_counts_only_the_cli_process():
    """A child's peak RSS must not include this (torch-importing) process: a bare interpreter stays small."""
    from recipes.bench.cold_start import run_once

    wall, rss_mb, _ = run_once([sys.executable, "-c", "pass"], REPO_ROOT, dict(__import__("os").environ))
    assert wall > 0 and 1 < rss_mb < 100, rss_mb


def test_cold_start_command(exported: Path, tmp_path: Path):
    from recipes import benchmark

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
    from recipes import benchmark

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


def test_exporting_a_training_checkpoint_says_where_its_controls_come_from(tmp_path, capsys):
    """A training checkpoint carries its training controls (issue 32 item 9): the export says so; a released
    (shipped) one does not need the note."""
    import torch

    from tts.export import warn_training_checkpoint
    from tts.paths import CHECKPOINT_DIR

    raw = torch.load(CHECKPOINT_DIR / "nar.pt", map_location="cpu", weights_only=True)
    warn_training_checkpoint(CHECKPOINT_DIR / "nar.pt")
    assert capsys.readouterr().err == ""
    trained = tmp_path / "step.ckpt"
    torch.save({**raw, "optimizer_states": [{}]}, trained)
    warn_training_checkpoint(trained)
    err = capsys.readouterr().err
    assert "training checkpoint" in err and "recipes.release" in err


def test_each_vocoder_gets_its_own_key():
    """A shipped vocoder is keyed by its name, a file by its stem; a file whose stem is another vocoder's key is
    kept apart (its graphs must not overwrite the other's)."""
    from tts.export import vocoder_key

    assert vocoder_key("source-filter") == "source-filter" and vocoder_key("/x/my voc.pt") == "my_voc"
    taken = {"source-filter": "source-filter"}
    assert vocoder_key("source-filter", taken) == "source-filter"  # the same vocoder again: its key
    assert vocoder_key("/x/source-filter.pt", taken) == "source-filter_"
    assert vocoder_key("/y/source-filter.pt", {**taken, "source-filter_": "/x/source-filter.pt"}) == "source-filter__"


def test_a_vocoder_file_named_like_a_shipped_vocoder_is_exported_apart(tmp_path: Path):
    """Two voices, one with the shipped "source-filter", one with a file /x/source-filter.pt: two vocoder entries
    with their own graph files and sources, neither overwriting the other, each voice running its own."""
    pytest.importorskip("onnx", reason="making an export needs the `export` extra (pip install -e '.[export]')")
    own = tmp_path / "x" / "source-filter.pt"
    own.parent.mkdir()
    shutil.copy(CHECKPOINT_DIR / "vocoder" / "source_filter.pt", own)
    export(tmp_path / "onnx", [shipped_checkpoint("nar"), shipped_checkpoint("nar_block")], vocoder={"nar": str(own)})
    manifest = read_manifest(tmp_path / "onnx")
    keys = [manifest["voices"][v]["vocoder"] for v in ("nar", "nar_block")]
    assert len(set(keys)) == 2 and set(keys) == set(manifest["vocoders"])
    files = {manifest["graphs"][manifest["vocoders"][k]["graph"]]["file"] for k in keys}
    assert len(files) == 2 and all((tmp_path / "onnx" / f).is_file() for f in files)
    assert manifest["sources"][manifest["vocoders"][keys[0]]["source"]]["name"] == str(own)
    assert manifest["sources"][manifest["vocoders"][keys[1]]["source"]]["name"] == "source-filter"
    for voice, key in zip(("nar", "nar_block"), keys):
        assert OnnxEngine.load(tmp_path / "onnx", voice=voice).vocoder == manifest["vocoders"][key]

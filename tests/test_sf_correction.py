"""The source-filter vocoder's magnitude correction (tts/vocoder/source_filter.py, "Magnitude correction")."""

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.helpers import check_frame_stream
from tts import checkpoint
from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.paths import CHECKPOINT_DIR, CONF_DIR
from tts.vocoder.registry import build_vocoder, config_node, load_vocoder, vocoder_meta
from tts.vocoder.source_filter import SourceFilterVocoder

SMALL = dict(hidden_channels=32, correction_channels=16, correction_blocks=2)


@pytest.fixture(scope="module")
def mel_config() -> MelConfig:
    return MelConfig.default()


def corrected_node() -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train_vocoder", overrides=["vocoder=source_filter_corrected"])
    return OmegaConf.to_container(cfg.vocoder, resolve=True)


def test_config_extends_the_plain_vocoder_and_starts_as_its_identity(mel_config: MelConfig):
    node = corrected_node()
    plain_node = config_node("source_filter")
    assert {k: node[k] for k in plain_node} == plain_node and node["correction_channels"] > 0
    torch.manual_seed(0)
    corrected = build_vocoder(node, mel_config).eval()
    plain = build_vocoder(plain_node, mel_config).eval()
    missing = corrected.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(k.startswith("correction.") for k in missing)
    mel = torch.randn(2, 80, 90) - 5.0
    lengths = torch.tensor([90, 41])
    # the zero head: gain 1, and the inverse of the STFT of the rendered wave is that wave
    assert (corrected(mel, lengths).wave - plain(mel, lengths).wave).abs().max() < 1e-6


def test_every_parameter_gets_a_gradient(mel_config: MelConfig, real_wav: Path):
    from tts.data.features import compute_pitch
    from tts.training.source_filter_module import SourceFilterModule
    from tts.vocoder.data import VocoderBatch

    torch.manual_seed(0)
    model = SourceFilterVocoder(mel_config, **SMALL)
    with torch.no_grad():  # off the identity: a zero head passes no gradient to the layers below it
        model.correction.head.weight.normal_(0, 0.01)
    module = SourceFilterModule(model, vocoder_meta({}, mel_config), optimizer=torch.optim.Adam)
    wave = load_wav(real_wav, 22050)[: 40 * 256]
    mel = MelSpectrogram(mel_config)(wave[None])[:, :, :40]
    pitch = torch.from_numpy(compute_pitch(wave.numpy(), mel_config, 40))[None]
    module.reconstruction_loss(VocoderBatch(["x"], mel, wave[None], torch.tensor([40]), pitch)).backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]


@pytest.mark.parametrize("chunk", [1, 7, 50, 400])
def test_the_corrected_vocoder_streams_as_it_synthesises(mel_config: MelConfig, chunk: int):
    """CorrectedStream: the plain stream's raw wave, then the correction over the frames it covers, equals the
    whole-utterance synthesis, returns all but its lookahead at once, and holds a bounded window."""
    torch.manual_seed(0)
    model = SourceFilterVocoder(mel_config, **SMALL).eval()
    with torch.no_grad():  # a correction that is not the identity, and loud (the fresh filters are quiet)
        model.correction.head.weight.normal_(0, 0.05)
        model.correction.head.bias.normal_(3.0, 0.2)
    assert model(torch.randn(1, 80, 40) - 5.0).wave.abs().max() > 0.05
    c = model.correction
    # the second stage holds mel from its oldest needed frame: its reach and context behind, plus its lookahead
    check_frame_stream(model, chunk, 1e-5, held_frames=model.lookahead_frames + c.receptive_frames + c.context_frames + 1)


def test_a_narrower_correction_kernel_shortens_the_reach_and_still_streams_exactly(mel_config: MelConfig):
    """correction_kernel (the input convolution's width, most of the correction's cost): the reach, and so the
    stream's lookahead, follows from it; a bad kernel is refused."""
    torch.manual_seed(0)
    wide = SourceFilterVocoder(mel_config, **SMALL)
    narrow = SourceFilterVocoder(mel_config, **SMALL, correction_kernel=3).eval()
    assert wide.correction.receptive_frames - narrow.correction.receptive_frames == 2  # (7 - 3) / 2
    assert narrow.correction.conv_in.weight.shape[-1] == 3
    with torch.no_grad():
        narrow.correction.head.weight.normal_(0, 0.05)
        narrow.correction.head.bias.normal_(3.0, 0.2)
    c = narrow.correction
    check_frame_stream(narrow, 7, 1e-5, held_frames=narrow.lookahead_frames + c.receptive_frames + c.context_frames + 1)
    with pytest.raises(ValueError, match="correction_kernel must be odd"):
        SourceFilterVocoder(mel_config, **SMALL, correction_kernel=4)


def test_the_onnx_engine_runs_the_corrected_vocoder_as_torch_does(mel_config: MelConfig, tmp_path: Path,
                                                                    real_wav: Path):
    """The export holds the correction's gain network; the ONNX engine runs the same DSP around it (tts.vocoder.
    correction on numpy), whole and streamed, and speaks as the torch vocoder does."""
    pytest.importorskip("onnx", reason="making an export needs the `export` extra (pip install -e '.[export]')")
    from tts.export import export
    from tts.runtime.engine import MelBatch
    from tts.runtime.onnx_engine import OnnxEngine, read_manifest
    from tts.runtime.pipeline import STREAM_TOLERANCE

    shipped = CHECKPOINT_DIR / "vocoder" / "source_filter.pt"
    node = checkpoint.read_raw(shipped)["tts"]["model_config"] | {"correction_channels": 16, "correction_blocks": 2}
    model = build_vocoder(node, mel_config)
    model.load_state_dict({k: v for k, v in load_vocoder(str(shipped), mel_config).state_dict().items()
                           if not k.startswith("correction.")}, strict=False)  # a correction of our own
    torch.manual_seed(1)
    with torch.no_grad():  # a correction that is not the identity
        model.correction.head.weight.normal_(0, 0.02)
        model.correction.head.bias.normal_(0, 0.3)
    path = tmp_path / "corrected.pt"
    checkpoint.save(path, model.eval(), vocoder_meta(node, mel_config))
    # two voices, each with its own vocoder: nar_block with this one, nar with its voice's (the shipped default)
    export(tmp_path / "onnx", acoustic=[CHECKPOINT_DIR / "nar.pt", CHECKPOINT_DIR / "nar_block.pt"],
           vocoder={"nar_block": str(path)})
    manifest = read_manifest(tmp_path / "onnx")
    assert manifest["voices"]["nar_block"]["vocoder"] == "corrected"  # a vocoder file's key: its stem
    assert manifest["voices"]["nar"]["vocoder"] == "source-filter"
    assert manifest["vocoders"]["corrected"]["correction"]["graph"] == "corrected.vocoder_correction"
    engine = OnnxEngine.load(tmp_path / "onnx", voice="nar_block")
    plain = OnnxEngine.load(tmp_path / "onnx", voice="nar")
    assert plain.vocoder["graph"] == "source-filter.vocoder" and engine.vocoder["graph"] == "corrected.vocoder"

    vocoder = load_vocoder(path, mel_config=mel_config)
    wave = load_wav(real_wav, 22050)[: 120 * 256]
    mel = MelSpectrogram(mel_config)(wave[None])[:, :, :120]
    ref = vocoder(mel).wave[0].numpy()
    assert abs(ref).max() > 0.05
    [whole] = engine.vocode(MelBatch(mel.numpy(), np.array([120]), np.array([False])))
    assert np.abs(whole - ref).max() < 1e-3
    [other] = plain.vocode(MelBatch(mel.numpy(), np.array([120]), np.array([False])))  # the other voice's vocoder
    shipped_ref = load_vocoder(str(shipped), mel_config=mel_config)(mel).wave[0].numpy()
    assert np.abs(other - shipped_ref).max() < 1e-3 and np.abs(other - whole).max() > 1e-2
    stream = engine.vocoder_stream()
    parts = [stream.push(mel[..., i : i + 17].numpy()) for i in range(0, 120, 17)] + [stream.finish()]
    assert np.abs(np.concatenate(parts) - whole).max() <= STREAM_TOLERANCE  # onnxruntime's sums over other windows


def test_fine_tuned_from_a_plain_vocoder(fixture_corpus: Path, tmp_path: Path, mel_config: MelConfig):
    """The recipe: init_from a plain source-filter checkpoint (the correction fresh), a tiny run, a checkpoint that
    rebuilds the corrected vocoder; a checkpoint of another shape is refused."""
    from recipes.train_vocoder import train

    plain = tmp_path / "plain.pt"
    checkpoint.save(plain, SourceFilterVocoder(mel_config, hidden_channels=32),
                    vocoder_meta(config_node("source_filter") | {"hidden_channels": 32}, mel_config))
    base = ["vocoder=source_filter_corrected", "vocoder_debug=tiny", f"data.root={fixture_corpus}", "name=test_sfc",
            "vocoder.hidden_channels=32", "vocoder.correction_channels=16", "vocoder.correction_blocks=2",
            "trainer.max_steps=3", "checkpoint_every_n_steps=3", "trainer.val_check_interval=3"]
    n = torch.get_num_threads()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("train_vocoder", overrides=base + [f"exp_dir={tmp_path / 'run'}", f"init_from={plain}"])
            wrong = compose("train_vocoder", overrides=base + [f"exp_dir={tmp_path / 'wrong'}", f"init_from={plain}",
                                                               "vocoder.hidden_channels=48"])
        trainer = train(cfg)
        with pytest.raises(Exception, match="size mismatch|does not fit"):
            train(wrong)
    finally:
        torch.set_num_threads(n)
    assert trainer.global_step == 3
    vocoder = load_vocoder(tmp_path / "run" / "checkpoints" / "last.ckpt", mel_config=mel_config)
    assert vocoder.correction is not None
    info = checkpoint.read_raw(tmp_path / "run" / "checkpoints" / "last.ckpt")["tts"]["info"]
    assert info["init_from"] == str(plain)  # the provenance of a fine-tuned vocoder
    out = vocoder(torch.randn(1, 80, 30) - 5.0)
    assert out.wave.shape == (1, 30 * 256) and torch.isfinite(out.wave).all()


def test_vocoder_headroom_bench_scores_every_condition(featurised_corpus: Path, tmp_path: Path, mel_config: MelConfig):
    """recipes.bench.vocoder_headroom: the swaps, and the report (DistillMOS, real model, two utterances)."""
    import json

    from recipes.bench import vocoder_headroom

    torch.manual_seed(0)
    plain = tmp_path / "sf.pt"
    checkpoint.save(plain, SourceFilterVocoder(mel_config, hidden_channels=32),
                    vocoder_meta(config_node("source_filter") | {"hidden_channels": 32}, mel_config))
    vocoder = load_vocoder(plain)
    wave = load_wav(sorted((featurised_corpus / "wavs").glob("*.wav"))[0], 22050)
    mel = MelSpectrogram(mel_config)(wave[None])[0]
    waves = vocoder_headroom.conditions(vocoder, mel, wave, pitch=None)
    assert set(waves) == set(vocoder_headroom.CONDITIONS) - {"oracle_f0"}  # no pitch given: no oracle
    assert torch.equal(waves["vocoder"], vocoder(mel[None]).wave[0])
    # the recording's magnitude with its own phase is the recording: the swap's STFT round trip is exact
    n = waves["recording"].shape[0]
    window = torch.hann_window(vocoder_headroom.FFT)
    spec = torch.stft(waves["recording"], vocoder_headroom.FFT, 256, window=window, return_complex=True)
    back = torch.istft(spec.abs() * torch.exp(1j * spec.angle()), vocoder_headroom.FFT, 256, window=window, length=n)
    assert torch.allclose(back, waves["recording"], atol=1e-5)

    assert vocoder_headroom.main(["--data", str(featurised_corpus), "--limit", "2", "--vocoder", str(plain),
                                  "--out", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    same = vocoder_headroom.paired_difference(report, report)
    assert same["mean"] == 0 and same["wins"] == 0 and same["n"] == 2
    other = {**report, "per_utterance": {**report["per_utterance"], "ids": report["per_utterance"]["ids"][::-1]}}
    with pytest.raises(SystemExit, match="different utterances"):
        vocoder_headroom.paired_difference(report, other)
    assert set(report["conditions"]) == set(vocoder_headroom.CONDITIONS)
    for c in report["conditions"].values():
        assert c["n"] == 2 and 1.0 <= c["distillmos"] <= 5.0
    # an untrained vocoder is far below its recordings
    assert report["conditions"]["vocoder"]["distillmos"] < report["conditions"]["recording"]["distillmos"]


def test_checkpoints_are_chosen_on_validation(featurised_corpus: Path, tmp_path: Path, mel_config: MelConfig):
    """recipes.bench.vocoder_select: every step checkpoint of a run scored on val, paired against a reference of
    the same utterances; reports cached for a rerun; a reference of another split is refused."""
    import json

    from recipes.bench import vocoder_headroom, vocoder_select

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    node = config_node("source_filter") | {"hidden_channels": 32}
    for step, seed in ((1000, 0), (2000, 1)):
        torch.manual_seed(seed)
        checkpoint.save(run / "checkpoints" / f"step{step:07d}.ckpt", SourceFilterVocoder(mel_config, hidden_channels=32),
                        vocoder_meta(node, mel_config))
    first = str(run / "checkpoints" / "step0001000.ckpt")
    assert vocoder_headroom.main(["--data", str(featurised_corpus), "--split", "val", "--limit", "2",
                                  "--vocoder", first, "--out", str(tmp_path / "ref")]) == 0
    args = [str(run), "--data", str(featurised_corpus), "--limit", "2", "--against", str(tmp_path / "ref" / "report.json"),
            "--out", str(tmp_path / "sel")]
    assert vocoder_select.main(args) == 0
    selection = json.loads((tmp_path / "sel" / "selection.json").read_text())
    assert [r["step"] for r in selection["rows"]] == [1000, 2000]
    assert selection["rows"][0]["paired"]["mean"] == 0  # the reference itself
    assert selection["chosen"] == max(selection["rows"], key=lambda r: r["paired"]["mean"])
    cached = (tmp_path / "sel" / "step0002000.json").stat().st_mtime_ns
    assert vocoder_select.main(args) == 0 and (tmp_path / "sel" / "step0002000.json").stat().st_mtime_ns == cached
    with pytest.raises(SystemExit, match="must be the val split"):
        vocoder_select.main([*args[:4], "1", *args[5:]])

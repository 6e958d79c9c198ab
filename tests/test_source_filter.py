"""Source-filter vocoder: DSP correctness, streaming equality, batch invariance, gradients, tiny training."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import pyworld
import torch
from hydra import compose, initialize_config_dir

from tests.helpers import check_batch_independent, check_frame_stream
from tts import checkpoint
from tts.audio import MelConfig, MelConfigMismatchError, MelSpectrogram, load_wav
from tts.paths import CONF_DIR
from tts.vocoder import dsp
from tts.vocoder.registry import build_vocoder, config_node, load_vocoder
from tts.vocoder.source_filter import SourceFilterVocoder

# Streaming renders the same absolute samples with the same float64 phase; what differs is only the
# order of float operations in convolutions over windows of other lengths (measured ~1e-9).
STREAM_ATOL = 1e-5


@pytest.fixture(scope="module")
def mel_config() -> MelConfig:
    return MelConfig.default()


@pytest.fixture(scope="module")
def vocoder(mel_config: MelConfig) -> SourceFilterVocoder:
    torch.manual_seed(0)
    v = SourceFilterVocoder(mel_config, hidden_channels=32)
    with torch.no_grad():  # a louder random filter than the quiet initialisation: differences show
        v.head.bias[v.bins.n_bins + 1] = 0.0
    return v.eval()


def test_config_instantiates_and_interface(mel_config: MelConfig):
    v = build_vocoder(config_node("source_filter"), mel_config).eval()
    assert isinstance(v, SourceFilterVocoder) and v.sample_rate == 22050
    n_params = sum(p.numel() for p in v.parameters())
    assert 0.5e6 < n_params < 2e6
    mel = torch.randn(3, 80, 20) - 5.0
    out = v(mel, torch.tensor([20, 13, 1]))
    assert out.wave.shape == (3, 20 * 256) and out.lengths.tolist() == [5120, 3328, 256]
    for b, n in enumerate(out.lengths.tolist()):
        assert out.wave[b, n:].abs().sum() == 0 and out.wave[b, :n].abs().max() > 0
    assert torch.isfinite(out.wave).all() and out.wave.abs().max() <= 1


def test_pulse_train_follows_a_synthetic_f0_sweep_within_one_percent():
    """Flat filters, a 110 -> 330 Hz sweep: pyworld's F0 of the output matches the sweep within 1 %."""
    sr, hop = 22050, 256
    syn = dsp.Synthesis(sr, hop, 128, 512, 10000.0)
    t = 200  # frames, 2.3 s
    f0 = torch.linspace(110, 330, t)[None]
    voiced = torch.ones(1, t)
    flat_h = torch.zeros(1, t, 8)
    flat_h[..., 0] = math.log(0.02)  # every harmonic at amplitude 0.02
    silent_n = torch.full((1, t, 4), 0.0)
    silent_n[..., 0] = -30.0  # no noise
    inp = dsp.RenderInput(f0, voiced, flat_h, silent_n, 0)
    wave, _ = dsp.render(inp, 0, t * hop, torch.zeros(1, dtype=torch.float64), t, syn, torch.hann_window(512))
    x = wave[0].double().numpy()
    est, times = pyworld.harvest(x, sr, f0_floor=80, f0_ceil=400, frame_period=hop / sr * 1000)
    est = est[: t - 1]
    ref = f0[0, : len(est)].numpy()
    inner = slice(10, len(est) - 10)  # harvest's edge frames
    rel = np.abs(est[inner] / ref[inner] - 1)
    assert (est[inner] > 0).all() and np.median(rel) < 0.01 and rel.max() < 0.02, rel.max()


def test_pulse_train_is_flat_and_band_limited():
    sr = 22050
    n = 2**15
    f0 = torch.full((1, n), 200.0, dtype=torch.float64)
    phase = 2 * math.pi * torch.cumsum(f0, 1) / sr
    p = dsp.pulse_train(phase, f0, sr, cutoff_hz=5000.0)[0].double()
    spec = torch.fft.rfft(p * torch.hann_window(n, dtype=torch.float64)).abs()
    freqs = torch.fft.rfftfreq(n, 1 / sr)
    # harmonics 200..5000 Hz: the energy within 5 Hz of each (they fall between FFT bins, so a single
    # bin would show the window's scalloping, not the signal)
    peaks = [float(spec[(freqs - k * 200).abs() < 5].pow(2).sum().sqrt()) for k in range(1, 26)]
    assert max(peaks) / min(peaks) < 1.05  # all harmonics at one amplitude
    above = spec[freqs > 5300].max()
    assert above < 1e-3 * max(peaks)  # nothing above the cutoff
    assert dsp.pulse_train(phase, f0, sr, 5000.0).dtype == torch.float32
    with pytest.raises(ValueError, match="Nyquist"):
        dsp.pulse_train(phase, f0, sr, 12000.0)


def test_noise_is_counter_based_and_white():
    a = dsp.hash_noise(0, 0, 50000, 2)
    assert torch.equal(a[0], a[1])  # same for every batch item
    assert torch.equal(torch.cat([dsp.hash_noise(0, 0, 1234, 1), dsp.hash_noise(0, 1234, 50000, 1)], 1), a[:1])
    assert not torch.equal(dsp.hash_noise(1, 0, 50000, 1), a[:1])  # the seed matters
    assert abs(float(a.mean())) < 0.02 and abs(float(a.var()) - 1) < 0.02
    x = a[0] - a[0].mean()
    assert abs(float((x[1:] * x[:-1]).mean())) < 0.02  # no lag-1 correlation


def test_f0_bins_round_trip_and_fill_unvoiced():
    bins = dsp.F0Bins(60.0, 500.0, 20.0)
    f0 = torch.tensor([[70.0, 123.4, 200.0, 333.3, 480.0]])
    targets = bins.soft_targets(f0, sigma_cents=25.0)  # [1, n_bins, 5]
    assert targets.shape == (1, bins.n_bins, 5) and torch.allclose(targets.sum(1), torch.ones(1, 5))
    decoded = bins.decode(torch.log(targets + 1e-12))
    cents = 1200 * torch.log2(decoded / f0)
    assert cents.abs().max() < 2.0
    filled = dsp.fill_unvoiced(torch.tensor([0.0, 100.0, 0.0, 0.0, 130.0, 0.0]), 150.0)
    assert filled.tolist() == pytest.approx([100.0, 100.0, 110.0, 120.0, 130.0, 130.0])
    assert dsp.fill_unvoiced(torch.zeros(4), 150.0).tolist() == [150.0] * 4


@pytest.mark.parametrize("chunk", [1, 7, 50, 400])
def test_streamed_chunks_equal_whole_utterance(vocoder: SourceFilterVocoder, chunk: int):
    check_frame_stream(vocoder, chunk, STREAM_ATOL)


def test_an_items_audio_does_not_depend_on_its_batch(vocoder: SourceFilterVocoder):
    check_batch_independent(vocoder)


def test_every_parameter_gets_a_gradient(mel_config: MelConfig, real_wav: Path):
    from tts.data.features import compute_pitch
    from tts.training.source_filter_module import SourceFilterModule, teacher_f0
    from tts.vocoder.data import VocoderBatch
    from tts.vocoder.registry import vocoder_meta

    torch.manual_seed(0)
    model = SourceFilterVocoder(mel_config, hidden_channels=32)
    module = SourceFilterModule(model, vocoder_meta({}, mel_config), optimizer=torch.optim.Adam)
    wave = load_wav(real_wav, 22050)[: 40 * 256]
    mel = MelSpectrogram(mel_config)(wave[None])[:, :, :40]
    pitch = torch.from_numpy(compute_pitch(wave.numpy(), mel_config, 40))[None]
    assert (pitch > 0).any() and (pitch == 0).any()
    batch = VocoderBatch(["x"], mel, wave[None], torch.tensor([40]), pitch)
    loss = module.reconstruction_loss(batch)  # what training_step optimises (plus the GAN terms, if any)
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
    # the optional adversarial stage: every discriminator parameter learns from the LSGAN loss
    from tts.training.discriminators import LightDiscriminator, discriminator_loss

    disc = LightDiscriminator()
    discriminator_loss(disc(wave[None]), disc(module._last_wave.detach())).backward()
    assert not [n for n, p in disc.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    f0, voiced = teacher_f0(pitch, 150.0)
    assert (f0 > 0).all() and torch.equal(voiced, (pitch > 0).float())


def test_mel_config_mismatch_is_an_error(mel_config: MelConfig, tmp_path: Path):
    from tts.vocoder.registry import vocoder_meta

    v = SourceFilterVocoder(mel_config, hidden_channels=16)
    path = tmp_path / "sf.pt"
    checkpoint.save(path, v, vocoder_meta(config_node("source_filter") | {"hidden_channels": 16}, mel_config))
    other = dataclasses.replace(mel_config, f_max=11025.0)
    with pytest.raises(MelConfigMismatchError, match="f_max"):
        load_vocoder(path, mel_config=other)
    loaded = load_vocoder(path, mel_config=mel_config)
    mel = torch.randn(1, 80, 10) - 5
    assert torch.equal(loaded(mel).wave, v.eval()(mel).wave)
    with pytest.raises(ValueError, match="multiples of frame_hop"):
        SourceFilterVocoder(mel_config, frame_hop=96)


def test_tiny_training_run_and_its_checkpoint(fixture_corpus: Path, tmp_path: Path):
    from recipes.train_vocoder import train

    n = torch.get_num_threads()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("train_vocoder", overrides=[
                "vocoder=source_filter", "vocoder_debug=tiny", f"data.root={fixture_corpus}",
                f"exp_dir={tmp_path}", "name=test_sf", "vocoder.hidden_channels=32", "trainer.max_steps=6",
                "checkpoint_every_n_steps=3", "trainer.val_check_interval=3",
            ])
        trainer = train(cfg)
    finally:
        torch.set_num_threads(n)
    assert trainer.global_step == 6
    last = tmp_path / "checkpoints" / "last.ckpt"
    vocoder = load_vocoder(last, mel_config=MelConfig.default())
    assert isinstance(vocoder, SourceFilterVocoder) and vocoder.n_harmonic == 64
    out = vocoder(torch.randn(1, 80, 30) - 5.0)
    assert out.wave.shape == (1, 30 * 256) and torch.isfinite(out.wave).all()
    metrics = trainer.callback_metrics
    assert {"train/loss", "val/mel_l1", "val/vuv_error"} <= set(metrics)
    assert math.isfinite(float(metrics["val/mel_l1"]))

"""The iSTFT-head vocoder (tts/vocoder/istft.py): its inverse STFT, streaming, batching, gradients, training."""

import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests.helpers import check_batch_independent, check_frame_stream
from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.paths import CONF_DIR
from tts.vocoder.istft import IstftVocoder
from tts.vocoder.registry import build_vocoder, config_node, load_vocoder, vocoder_meta

# Streaming re-runs the network over windows of other lengths: float rounding of the convolutions only.
STREAM_ATOL = 1e-5


@pytest.fixture(scope="module")
def mel_config() -> MelConfig:
    return MelConfig.default()


@pytest.fixture(scope="module")
def vocoder(mel_config: MelConfig) -> IstftVocoder:
    torch.manual_seed(0)
    return IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=3).eval()


def test_config_instantiates_and_interface(mel_config: MelConfig):
    v = build_vocoder(config_node("istft"), mel_config).eval()
    assert isinstance(v, IstftVocoder) and v.sample_rate == 22050
    assert 1e6 < sum(p.numel() for p in v.parameters()) < 4e6
    mel = torch.randn(3, 80, 20) - 5.0
    out = v(mel, torch.tensor([20, 13, 1]))
    assert out.wave.shape == (3, 20 * 256) and out.lengths.tolist() == [5120, 3328, 256]
    for b, n in enumerate(out.lengths.tolist()):
        assert out.wave[b, n:].abs().sum() == 0 and out.wave[b, :n].abs().max() > 0
    assert torch.isfinite(out.wave).all() and out.wave.abs().max() <= 1
    with pytest.raises(ValueError, match="multiple of 2 x the mel hop"):
        IstftVocoder(mel_config, fft_size=768)


def test_render_is_torch_istft(vocoder: IstftVocoder):
    """The overlap-add in absolute indices is torch.istft (center=True, Hann, the mel's hop), edges included."""
    torch.manual_seed(3)
    mel = torch.randn(2, 80, 37) - 5.0
    with torch.no_grad():
        frames = vocoder.frame_spectra(mel)
        ours = vocoder.render(frames, 0, 37 * 256, 37)
        ref = torch.istft(frames.spectra, 1024, 256, window=torch.hann_window(1024), center=True, length=37 * 256)
        assert (ours - ref).abs().max() < 1e-6 * ref.abs().max()
        # any sample range of it, from the frames that reach it alone
        part = vocoder.render(frames.crop(9, 20), 11 * 256 + 5, 17 * 256 + 3, 37)
        assert torch.allclose(part, ours[:, 11 * 256 + 5 : 17 * 256 + 3], atol=1e-7)
        with pytest.raises(ValueError, match="need frames"):
            vocoder.render(frames.crop(11, 20), 11 * 256, 17 * 256, 37)  # frame 10 reaches 11 * 256


@pytest.mark.parametrize("chunk", [1, 7, 50, 400])
def test_streamed_chunks_equal_whole_utterance(vocoder: IstftVocoder, chunk: int):
    check_frame_stream(vocoder, chunk, STREAM_ATOL)


def test_an_items_audio_does_not_depend_on_its_batch(vocoder: IstftVocoder):
    check_batch_independent(vocoder)


def test_every_parameter_gets_a_gradient(mel_config: MelConfig, real_wav: Path):
    from tts.training.discriminators import LightDiscriminator, discriminator_loss
    from tts.training.source_filter_module import SourceFilterModule
    from tts.vocoder.data import VocoderBatch

    torch.manual_seed(0)
    model = IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=2)
    module = SourceFilterModule(model, vocoder_meta({}, mel_config), optimizer=torch.optim.Adam)
    wave = load_wav(real_wav, 22050)[: 40 * 256]
    mel = MelSpectrogram(mel_config)(wave[None])[:, :, :40]
    batch = VocoderBatch(["x"], mel, wave[None], torch.tensor([40]), None)  # no pitch: none needed
    module.reconstruction_loss(batch).backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    disc = LightDiscriminator()
    discriminator_loss(disc(wave[None]), disc(module._last_wave.detach())).backward()
    assert not [n for n, p in disc.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]


def test_tiny_adversarial_training_run_and_its_checkpoint(fixture_corpus: Path, tmp_path: Path):
    from recipes.train_vocoder import train

    n = torch.get_num_threads()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("train_vocoder", overrides=[
                "vocoder=istft", "sf_discriminator=light", "vocoder_debug=tiny", f"data.root={fixture_corpus}",
                f"exp_dir={tmp_path}", "name=test_istft", "vocoder.channels=32", "vocoder.hidden_channels=64",
                "vocoder.n_blocks=2", "trainer.max_steps=6", "checkpoint_every_n_steps=2",
                "trainer.val_check_interval=3"])
        trainer = train(cfg)
    finally:
        torch.set_num_threads(n)
    assert trainer.global_step == 6  # 3 batches, each a discriminator and a generator step
    vocoder = load_vocoder(tmp_path / "checkpoints" / "last.ckpt", mel_config=MelConfig.default())
    assert isinstance(vocoder, IstftVocoder) and vocoder.fft_size == 1024
    out = vocoder(torch.randn(1, 80, 30) - 5.0)
    assert out.wave.shape == (1, 30 * 256) and torch.isfinite(out.wave).all()
    metrics = trainer.callback_metrics
    assert {"train/loss", "train/d_loss", "val/mel_l1"} <= set(metrics) and "val/vuv_error" not in metrics
    assert math.isfinite(float(metrics["val/mel_l1"]))

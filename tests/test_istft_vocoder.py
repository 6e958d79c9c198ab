"""The iSTFT-head vocoder (tts/vocoder/istft.py): its inverse STFT, streaming, batching, gradients, training."""

import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests.helpers import check_batch_independent, check_frame_stream
from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.paths import CONF_DIR
from tts.vocoder.istft import PHASE_HEADS, IstftVocoder
from tts.vocoder.registry import build_vocoder, config_node, load_vocoder, vocoder_meta

# Streaming re-runs the network over windows of other lengths: float rounding of the convolutions only.
STREAM_ATOL = 1e-5


@pytest.fixture(scope="module")
def mel_config() -> MelConfig:
    return MelConfig.default()


@pytest.fixture(scope="module", params=PHASE_HEADS)
def vocoder(mel_config: MelConfig, request: pytest.FixtureRequest) -> IstftVocoder:
    torch.manual_seed(0)
    return IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=3, phase_head=request.param).eval()


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
    with pytest.raises(ValueError, match="phase_head must be one of angle, parallel"):
        IstftVocoder(mel_config, phase_head="complex")


def test_the_parallel_head_gives_principal_phases(mel_config: MelConfig):
    torch.manual_seed(1)
    v = IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=2, phase_head="parallel")
    with torch.no_grad():
        frames = v.frame_outputs(torch.randn(2, 80, 9) - 5.0)
    assert frames.phase.shape == frames.log_magnitude.shape == (2, 513, 9)
    assert frames.phase.abs().max() <= math.pi and frames.phase.std() > 1.0  # spread over the circle


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


def test_the_shared_stft_pair_is_torchs_in_both_array_libraries():
    """tts.vocoder.render.stft / inverse_stft (the one STFT pair of the iSTFT vocoder and the magnitude
    correction, numpy for the ONNX engine) equal torch.stft(center=True, constant padding) / torch.istft."""
    import numpy as np

    from tts.vocoder.dsp import TORCH
    from tts.vocoder.render import NUMPY, hann_window, inverse_stft, stft

    torch.manual_seed(0)
    wave, window = torch.randn(2, 37 * 256), torch.hann_window(1024)
    ref = torch.stft(wave, 1024, 256, window=window, center=True, pad_mode="constant", return_complex=True)
    assert torch.allclose(stft(wave, 256, window, TORCH), ref, atol=1e-4)
    assert np.abs(stft(wave.numpy(), 256, hann_window(1024), NUMPY) - ref.numpy()).max() < 1e-3
    back = torch.istft(ref, 1024, 256, window=window, center=True, length=37 * 256)
    assert (back - wave).abs().max() < 1e-5
    assert (inverse_stft(ref, 0, 0, 37 * 256, 38, 256, window, TORCH) - back).abs().max() < 1e-5
    part = inverse_stft(ref.numpy()[..., 8:22], 8, 11 * 256 + 5, 17 * 256 + 3, 38, 256, hann_window(1024), NUMPY)
    assert np.abs(part - back.numpy()[:, 11 * 256 + 5 : 17 * 256 + 3]).max() < 1e-5
    with pytest.raises(ValueError, match="need frames"):
        inverse_stft(ref.numpy()[..., 11:22], 11, 11 * 256, 17 * 256, 38, 256, hann_window(1024), NUMPY)  # frame 10 reaches it


@pytest.mark.parametrize("chunk", [1, 7, 50, 400])
def test_streamed_chunks_equal_whole_utterance(vocoder: IstftVocoder, chunk: int):
    check_frame_stream(vocoder, chunk, STREAM_ATOL)


def test_an_items_audio_does_not_depend_on_its_batch(vocoder: IstftVocoder):
    check_batch_independent(vocoder)


def test_phase_losses_ignore_whole_turns_and_measure_offsets():
    from tts.training.losses import anti_wrapped, phase_losses

    torch.manual_seed(0)
    x = (torch.rand(1000) - 0.5) * 40
    turns = torch.randint(-5, 6, (1000,)) * 2 * math.pi
    assert torch.allclose(anti_wrapped(x + turns), anti_wrapped(x), atol=1e-4)
    assert anti_wrapped(x).max() <= math.pi + 1e-6
    phase = (torch.rand(2, 9, 7) - 0.5) * 2 * math.pi
    same = phase_losses(phase + torch.randint(-3, 4, phase.shape) * 2 * math.pi, phase)
    assert float(same.total) < 1e-5
    shifted = phase_losses(phase + 0.5, phase)  # a constant offset: the phase is off, its derivatives are not
    assert abs(float(shifted.instantaneous) - 0.5) < 1e-5
    assert float(shifted.group_delay) < 1e-5 and float(shifted.angular_frequency) < 1e-5
    delayed = phase_losses(phase + torch.arange(9.0)[:, None] * 0.3, phase)  # linear in frequency: a delay
    assert abs(float(delayed.group_delay) - 0.3) < 1e-5 and float(delayed.angular_frequency) < 1e-5


def test_the_phase_loss_reads_the_recordings_frames_at_the_vocoders_centres(mel_config: MelConfig, real_wav: Path):
    """Frame t of the vocoder is centred on sample t * hop (as its inverse STFT): the reference phase of the
    loss is the recording's frame at the same centre, so the recording's own phases score 0, and the same
    phases one frame off do not; frames whose window leaves the segment are not scored."""
    from tts.training.source_filter_module import SourceFilterModule
    from tts.vocoder.data import VocoderBatch

    model = IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=2)
    module = SourceFilterModule(model, vocoder_meta({}, mel_config), optimizer=torch.optim.Adam, phase_weight=1.0)
    wave = load_wav(real_wav, 22050)[5000 : 5000 + 40 * 256]
    batch = VocoderBatch(["x"], torch.zeros(1, 80, 40), wave[None], torch.tensor([40]), None)
    # the true phases of frames [0, 40) centred on samples 5000 + t * hop of the whole recording
    whole = load_wav(real_wav, 22050)
    centred = torch.stft(whole[5000 - 512 : 5000 + 40 * 256 + 512], 1024, 256, window=torch.hann_window(1024),
                         center=False, return_complex=True)[None, :, :40].angle()  # [1, 513, 40]
    assert float(module.phase_loss(centred, batch)) < 1e-3
    assert float(module.phase_loss(torch.roll(centred, 1, dims=-1), batch)) > 0.5
    outside = centred.clone()
    outside[..., :2] += 1.0  # frames 0 and 1 reach before the segment (context_frames = 2): not scored
    outside[..., 39:] += 1.0
    assert float(module.phase_loss(outside, batch)) < 1e-3
    with pytest.raises(ValueError, match="applies to the iSTFT vocoder"):
        SourceFilterModule(build_vocoder(config_node("source_filter") | {"hidden_channels": 16}, mel_config),
                           vocoder_meta({}, mel_config), optimizer=torch.optim.Adam, phase_weight=1.0)


@pytest.mark.parametrize("phase_head", PHASE_HEADS)
def test_every_parameter_gets_a_gradient(mel_config: MelConfig, real_wav: Path, phase_head: str):
    from tts.training.discriminators import LightDiscriminator, discriminator_loss
    from tts.training.source_filter_module import SourceFilterModule
    from tts.vocoder.data import VocoderBatch

    torch.manual_seed(0)
    model = IstftVocoder(mel_config, channels=32, hidden_channels=64, n_blocks=2, phase_head=phase_head)
    module = SourceFilterModule(model, vocoder_meta({}, mel_config), optimizer=torch.optim.Adam, phase_weight=1.0)
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
                "vocoder.n_blocks=2", "vocoder.phase_head=parallel", "frame_vocoder.loss.phase_weight=1.0",
                "trainer.max_steps=6", "checkpoint_every_n_steps=2",
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
    assert {"train/loss", "train/d_loss", "train/phase_gd", "val/mel_l1", "val/phase_ip"} <= set(metrics)
    assert "val/vuv_error" not in metrics and vocoder.phase_head == "parallel"
    assert math.isfinite(float(metrics["val/mel_l1"]))

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from speechbrain.lobes.models.HifiGAN import mel_spectrogram as sb_mel_spectrogram

from tts.audio import (
    AudioFileError,
    MelConfig,
    MelConfigMismatchError,
    MelSpectrogram,
    load_wav,
    save_wav,
)


@pytest.fixture(scope="module")
def config() -> MelConfig:
    return MelConfig.default()


def test_default_config_is_the_design(config: MelConfig):
    # DESIGN.md section 2; if this changes, every shipped checkpoint and the public vocoder break.
    assert (config.sample_rate, config.n_fft, config.hop_length, config.n_mels) == (22050, 1024, 256, 80)
    assert (config.f_min, config.f_max, config.norm, config.mel_scale) == (0.0, 8000.0, "slaney", "slaney")


def test_parity_with_speechbrain_on_real_audio(config: MelConfig, real_wav: Path):
    wave = load_wav(real_wav, config.sample_rate)
    ours = MelSpectrogram(config)(wave[None])
    theirs = sb_mel_spectrogram(
        sample_rate=config.sample_rate,
        hop_length=config.hop_length,
        win_length=config.win_length,
        n_fft=config.n_fft,
        n_mels=config.n_mels,
        f_min=config.f_min,
        f_max=config.f_max,
        power=config.power,
        normalized=False,
        norm=config.norm,
        mel_scale=config.mel_scale,
        compression=True,
        audio=wave[None],
    )
    assert ours.shape == theirs.shape
    assert (ours - theirs).abs().max().item() < 1e-4
    # and it is real speech, not silence: a wide dynamic range
    assert ours.max() - ours.min() > 8


@pytest.mark.parametrize("n", [513, 767, 768, 769, 22050, 12345])
def test_frame_count(config: MelConfig, n: int):
    mel = MelSpectrogram(config)(torch.randn(2, n) * 0.1)
    assert mel.shape == (2, config.n_mels, 1 + n // config.hop_length) == (2, 80, config.n_frames(n))


def test_too_short_audio_is_a_clear_error(config: MelConfig):
    with pytest.raises(ValueError, match="too short"):
        MelSpectrogram(config)(torch.zeros(1, 100))


def test_silence_is_log_floor(config: MelConfig):
    mel = MelSpectrogram(config)(torch.zeros(1, 4096))
    assert torch.allclose(mel, torch.full_like(mel, config.log_floor))


def test_round_trip(config: MelConfig, tmp_path: Path):
    assert MelConfig.from_dict(config.to_dict()) == config
    import yaml

    p = tmp_path / "a.yaml"
    p.write_text(yaml.safe_dump(config.to_dict()))
    assert MelConfig.from_yaml(p) == config


def test_bad_configs_rejected(config: MelConfig):
    with pytest.raises(ValueError, match="missing keys"):
        MelConfig.from_dict({"sample_rate": 22050})
    with pytest.raises(ValueError, match="unknown keys"):
        MelConfig.from_dict({**config.to_dict(), "fmax": 1})
    with pytest.raises(ValueError, match="f_max"):
        dataclasses.replace(config, f_max=20000.0)


def test_mismatch_names_both_configs(config: MelConfig):
    other = dataclasses.replace(config, hop_length=275, n_fft=2048, win_length=2048)
    config.check_compatible(MelConfig.from_dict(config.to_dict()))  # equal: fine
    with pytest.raises(MelConfigMismatchError) as e:
        config.check_compatible(other, "acoustic model", "vocoder")
    msg = str(e.value)
    assert "acoustic model" in msg and "vocoder" in msg and "hop_length" in msg and "275" in msg and "256" in msg


def test_wav_io(config: MelConfig, tmp_path: Path):
    wave = torch.sin(torch.linspace(0, 2000, 22050)) * 0.5
    p = tmp_path / "x.wav"
    save_wav(p, wave, config.sample_rate)
    info = sf.info(str(p))
    assert (info.samplerate, info.channels, info.subtype) == (22050, 1, "PCM_16")
    back = load_wav(p, config.sample_rate)
    assert np.abs(back.numpy() - wave.numpy()).max() < 1e-4
    with pytest.raises(AudioFileError, match="sample rate"):
        load_wav(p, 16000)
    with pytest.raises(AudioFileError, match="not found"):
        load_wav(tmp_path / "missing.wav", 22050)
    (tmp_path / "bad.wav").write_bytes(b"RIFF....not a wav")
    with pytest.raises(AudioFileError, match="cannot read"):
        load_wav(tmp_path / "bad.wav", 22050)

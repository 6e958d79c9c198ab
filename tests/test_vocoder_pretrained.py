"""SpeechBrain pretrained HiFi-GAN loader: fast offline failure, and the real loading code on a local folder."""

import dataclasses
import time
from pathlib import Path

import pytest
import torch
from speechbrain.lobes.models.HifiGAN import HifiganGenerator

from tts.audio import MelConfig, MelConfigMismatchError
from tts.vocoder.pretrained import (
    SPEECHBRAIN_LJSPEECH,
    SPEECHBRAIN_LJSPEECH_MEL,
    PretrainedVocoderError,
    SpeechBrainHifiGan,
    load_speechbrain_hifigan,
    offline_reason,
)
from tts.vocoder.registry import load_vocoder

# A small generator with the V3 geometry (x256 upsampling) so the folder is tiny and fast.
GENERATOR_ARGS = dict(
    in_channels=80,
    out_channels=1,
    resblock_type="2",
    resblock_dilation_sizes=[[1, 2], [2, 6]],
    resblock_kernel_sizes=[3, 5],
    upsample_kernel_sizes=[16, 16, 8],
    upsample_initial_channel=32,
    upsample_factors=[8, 8, 4],
    inference_padding=5,
    cond_channels=0,
    conv_post_bias=True,
)

# The layout of speechbrain/tts-hifigan-ljspeech's hyperparams.yaml (audio parameters of SpeechBrain's
# LJSpeech recipe, the generator built with !new:, a Pretrainer whose loadable "generator" is read from
# generator.ckpt next to it).
HYPERPARAMS = """\
# Audio parameters (as in recipes/LJSpeech/TTS/vocoder/hifigan/hparams/train.yaml)
sample_rate: 22050
hop_length: {hop_length}
win_length: 1024
n_mel_channels: 80
n_fft: 1024
mel_fmin: 0.0
mel_fmax: 8000.0
mel_normalized: False
power: 1
norm: "slaney"
mel_scale: "slaney"
dynamic_range_compression: True

# Generator parameters
in_channels: {in_channels}
out_channels: {out_channels}
resblock_type: "{resblock_type}"
resblock_dilation_sizes: {resblock_dilation_sizes}
resblock_kernel_sizes: {resblock_kernel_sizes}
upsample_kernel_sizes: {upsample_kernel_sizes}
upsample_initial_channel: {upsample_initial_channel}
upsample_factors: {upsample_factors}
inference_padding: {inference_padding}
cond_channels: {cond_channels}
conv_post_bias: {conv_post_bias}

generator: !new:speechbrain.lobes.models.HifiGAN.HifiganGenerator
    in_channels: !ref <in_channels>
    out_channels: !ref <out_channels>
    resblock_type: !ref <resblock_type>
    resblock_dilation_sizes: !ref <resblock_dilation_sizes>
    resblock_kernel_sizes: !ref <resblock_kernel_sizes>
    upsample_kernel_sizes: !ref <upsample_kernel_sizes>
    upsample_initial_channel: !ref <upsample_initial_channel>
    upsample_factors: !ref <upsample_factors>
    inference_padding: !ref <inference_padding>
    cond_channels: !ref <cond_channels>
    conv_post_bias: !ref <conv_post_bias>

modules:
    generator: !ref <generator>

pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        generator: !ref <generator>
"""


def make_folder(folder: Path, hop_length: int = 256, state_dict: dict | None = None) -> HifiganGenerator:
    """A SpeechBrain vocoder folder (hyperparams.yaml + generator.ckpt) of a random generator."""
    torch.manual_seed(0)
    generator = HifiganGenerator(**GENERATOR_ARGS)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(HYPERPARAMS.format(hop_length=hop_length, **GENERATOR_ARGS))
    torch.save(state_dict if state_dict is not None else generator.state_dict(), folder / "generator.ckpt")
    return generator


def test_recipe_mel_is_the_project_mel():
    # SpeechBrain's LJSpeech recipe mel == conf/audio/lj22k.yaml (numerical parity: tests/test_audio.py).
    assert SPEECHBRAIN_LJSPEECH_MEL == MelConfig.default()


def test_hub_model_fails_fast_offline_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TTS_OFFLINE", "1")  # deterministic even where the network exists
    start = time.perf_counter()
    with pytest.raises(PretrainedVocoderError) as e:
        load_vocoder("speechbrain-lj", mel_config=MelConfig.default(), savedir=tmp_path / "sb")
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"offline failure took {elapsed:.1f} s (the Hub's retries take ~24 s)"
    msg = str(e.value)
    assert SPEECHBRAIN_LJSPEECH in msg and "TTS_OFFLINE" in msg
    assert "--vocoder griffin-lim" in msg and "--vocoder hifigan" in msg


def test_unreachable_hub_counts_as_offline(monkeypatch: pytest.MonkeyPatch):
    for var in ("TTS_OFFLINE", "HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused at once
    start = time.perf_counter()
    assert "not reachable" in offline_reason(None)
    assert time.perf_counter() - start < 3.0
    assert offline_reason(True) is not None and offline_reason(False) is None


def test_local_folder_loads_offline_through_speechbrain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TTS_OFFLINE", "1")
    generator = make_folder(tmp_path / "vocoder").eval()
    vocoder = load_vocoder(tmp_path / "vocoder", mel_config=MelConfig.default())
    assert isinstance(vocoder, SpeechBrainHifiGan) and not vocoder.training
    assert not any("parametrizations" in k for k in vocoder.state_dict())  # weight norm removed
    mel = torch.randn(2, 80, 16) - 5.0
    out = vocoder(mel, torch.tensor([16, 9]))
    assert out.wave.shape == (2, 16 * 256) and out.lengths.tolist() == [16 * 256, 9 * 256]
    assert out.wave[1, 9 * 256 :].abs().max() == 0
    # Same numbers as the original (weight-normed) generator: pad 5 frames, run, crop 5 frames.
    with torch.no_grad():
        ref = generator(torch.nn.functional.pad(mel[:1], (5, 5), mode="replicate"))[0, 0, 5 * 256 : 21 * 256]
    assert torch.allclose(out.wave[0], ref.clamp(-1, 1), atol=1e-5)


def test_local_folder_with_other_mel_is_refused(tmp_path: Path):
    make_folder(tmp_path / "hop275", hop_length=275)
    with pytest.raises(MelConfigMismatchError) as e:
        load_speechbrain_hifigan(tmp_path / "hop275")
    assert "'hop_length': 275" in str(e.value) and "'hop_length': 256" in str(e.value)
    # ...and a project mel config other than the vocoder's is refused too
    make_folder(tmp_path / "ok")
    with pytest.raises(MelConfigMismatchError):
        load_speechbrain_hifigan(tmp_path / "ok", mel_config=dataclasses.replace(MelConfig.default(), f_max=7600.0))


def test_broken_local_folders_give_clear_errors(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PretrainedVocoderError, match="generator.ckpt"):
        load_speechbrain_hifigan(tmp_path / "empty")
    with pytest.raises(PretrainedVocoderError, match="not found"):
        load_speechbrain_hifigan(tmp_path / "missing")
    # weights of another architecture: SpeechBrain would only warn, we refuse
    make_folder(tmp_path / "wrong", state_dict={"conv_pre.conv.bias": torch.zeros(3)})
    with pytest.raises(PretrainedVocoderError, match="does not fit"):
        load_speechbrain_hifigan(tmp_path / "wrong")
    # a missing tensor: SpeechBrain's non-strict transfer only logs a warning; the strict re-check refuses
    partial = HifiganGenerator(**GENERATOR_ARGS).state_dict()
    partial.pop("conv_post.conv.bias")
    make_folder(tmp_path / "partial", state_dict=partial)
    with pytest.raises(PretrainedVocoderError, match="(?s)does not fit.*conv_post.conv.bias"):
        load_speechbrain_hifigan(tmp_path / "partial")

"""Small models made on the spot for tests (random weights, real checkpoint files)."""

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tts import checkpoint
from tts.audio import MelConfig
from tts.checkpoint import CheckpointMeta
from tts.paths import CONF_DIR
from tts.text import TextFrontend


def tiny_checkpoint(path: Path, model_name: str, mel_config: MelConfig | None = None, **overrides) -> Path:
    mel_config = mel_config or MelConfig.default()
    frontend = TextFrontend(max_symbols=400)
    node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{model_name}.yaml"))
    node.update(overrides)
    kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    torch.manual_seed(0)
    model = instantiate(node, **kwargs)
    meta = CheckpointMeta("acoustic", node, kwargs, mel_config, frontend.to_dict(), {"note": "random test model"})
    checkpoint.save(path, model, meta)
    return path


def tiny_vocoder_checkpoint(path: Path, mel_config: MelConfig | None = None) -> Path:
    """A random HiFi-GAN V3 generator with 8 initial channels, saved as recipes.train_vocoder would."""
    from tts.vocoder.registry import build_vocoder, config_node, vocoder_meta

    mel_config = mel_config or MelConfig.default()
    node = {**config_node("hifigan_v3"), "upsample_initial_channel": 8}
    torch.manual_seed(0)
    model = build_vocoder(node, mel_config)
    checkpoint.save(path, model, vocoder_meta(node, mel_config, {"note": "random test vocoder"}))
    return path


TINY = {
    "autoregressive": dict(embedding_dim=32, encoder_dim=32, prenet_dim=16, attention_rnn_dim=32, decoder_rnn_dim=32,
                           attention_dim=16, postnet_channels=16, location_filters=4, max_frames_per_token=3.0),
    "nonautoregressive": dict(d_model=32, encoder_layers=1, decoder_layers=1, ffn_channels=64, predictor_channels=32),
}


def check_frame_stream(vocoder, chunk: int, atol: float, held_frames: int | None = None) -> None:
    """A frame-rate vocoder's `stream()` (tts.vocoder.stream.FrameStream) fed 300 random mel frames in chunks equals
    its whole-utterance synthesis within `atol`, holds a bounded mel window (at most chunk + `held_frames`,
    default the network's reach + twice the synthesis context + 1), and returns all but its lookahead as soon as
    it is determined."""
    import torch

    torch.manual_seed(1)
    mel = torch.randn(1, 80, 300) - 5.0
    whole = vocoder(mel).wave
    stream = vocoder.stream()
    parts = [stream.push(mel[..., i : i + chunk]) for i in range(0, 300, chunk)] + [stream.finish()]
    streamed = torch.cat(parts, dim=-1)
    assert streamed.shape == whole.shape
    assert (streamed - whole).abs().max() < atol
    if held_frames is None:
        held_frames = vocoder.receptive_frames + 2 * stream.frames.context + 1
    assert stream.mel.shape[-1] <= chunk + held_frames
    if chunk == 50:
        assert parts[-1].shape[-1] == vocoder.lookahead_frames * vocoder.mel_config.hop_length


def check_batch_independent(vocoder, atol: float = 1e-6) -> None:
    """An item's audio does not depend on the batch it came in (items of 120, 77, 30, 101 frames)."""
    import torch

    torch.manual_seed(2)
    mel = torch.randn(4, 80, 120) - 5.0
    lengths = torch.tensor([120, 77, 30, 101])
    batched = vocoder(mel, lengths).wave
    hop = vocoder.mel_config.hop_length
    for b in range(4):
        n = int(lengths[b])
        assert torch.allclose(batched[b, : n * hop], vocoder(mel[b : b + 1, :, :n]).wave[0], atol=atol)

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

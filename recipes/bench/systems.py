"""Building/loading the AR/NAR/vocoder systems under test and random models.  The synthesis itself, forced
output lengths included, is THE inference path's (tts.runtime.torch_engine.TorchEngine stages)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tts.runtime.engine import MelBatch
from tts.runtime.torch_engine import TorchEngine

DEFAULT_FRAMES_PER_SYMBOL = 6.0  # ~86 frames/s (hop 256 @ 22.05 kHz) over ~14 symbols/s of speech


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
def build_random_checkpoint(path: Path, model_name: str, overrides: dict[str, Any] | None = None) -> Path:
    """A random-weight acoustic checkpoint at conf/model/<name>.yaml size (speed measurements only)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tts import checkpoint
    from tts.audio import MelConfig
    from tts.checkpoint import CheckpointMeta
    from tts.paths import CONF_DIR
    from tts.text import TextFrontend

    mel_config = MelConfig.default()
    frontend = TextFrontend()
    node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{model_name}.yaml"))
    node.update(overrides or {})
    kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    torch.manual_seed(0)
    model = instantiate(node, **kwargs)
    meta = CheckpointMeta("acoustic", node, kwargs, mel_config, frontend.to_dict(),
                          {"note": "random benchmark model (speed only)"})
    checkpoint.save(path, model, meta)
    return path


def is_random_checkpoint(meta) -> bool:
    return "random" in json.dumps(meta.info).lower()


def build_vocoder(name: str, mel_config, device: str):
    from tts.vocoder import registry

    if name == "hifigan_v3-random":
        torch.manual_seed(0)
        voc = registry.build_vocoder(registry.config_node("hifigan_v3"), mel_config)
        if hasattr(voc, "remove_weight_norm"):
            voc.remove_weight_norm()
        return voc.to(device).eval()
    return registry.load_vocoder(name, mel_config, device=device)


@dataclass
class System:
    """One mel generator under test: a TorchEngine at NAR refine steps `k` (None for the AR: its model takes no
    controls), its output length forced (random weights) or free."""

    name: str
    kind: str  # "ar" | "nar"
    k: int | None
    synth: TorchEngine
    forced: bool

    def run(self, ids: list[list[int]], frames: list[int] | None, seed: int = 0) -> MelBatch:
        """The engine's mel stage on token id lists (padded inside); `frames` [B] are the forced output
        lengths when `forced`.  The controls are the model's own defaults with refine steps `k`."""
        if self.forced and frames is None:
            raise ValueError(f"system {self.name}: forced output length but no frames given")
        controls = self.synth.defaults.replace(refine_steps=self.k, seed=seed)
        return self.synth.mels(ids, list(range(len(ids))), controls, forced_frames=frames if self.forced else None)

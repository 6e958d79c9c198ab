"""Building/loading the AR/NAR/vocoder systems under test, random models and forced output lengths."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DEFAULT_FRAMES_PER_SYMBOL = 6.0  # ~86 frames/s (hop 256 @ 22.05 kHz) over ~14 symbols/s of speech


def forced_durations(n_symbols: int, fps: float) -> list[int]:
    """Integer frames per symbol summing to round(n * fps), spread evenly."""
    edges = [round(i * fps) for i in range(n_symbols + 1)]
    return [max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]


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
    """One mel generator under test: `run(tokens, lengths, frames|None) -> (mels, mel_lengths)`."""

    name: str
    kind: str  # "ar" | "nar"
    k: int | None
    model: torch.nn.Module
    forced: bool

    def run(self, tokens: torch.Tensor, lengths: torch.Tensor, frames: list[int] | None):
        if self.kind == "ar":
            if self.forced:
                assert frames is not None
                steps = math.ceil(max(frames) / self.model.r)
                out = self.model.infer(tokens, lengths, max_decoder_steps=steps, stop_threshold=1.1)  # never stops
            else:
                out = self.model.infer(tokens, lengths)
            return out.mels, out.mel_lengths
        kwargs: dict[str, Any] = {"refine_steps": self.k}
        if self.forced:
            assert frames is not None
            d = torch.zeros_like(tokens)
            for b in range(tokens.shape[0]):
                n = int(lengths[b])
                d[b, :n] = torch.tensor(forced_durations(n, frames[b] / max(n, 1)), device=tokens.device)
            kwargs["durations"] = d
        out = self.model.infer(tokens, lengths, **kwargs)
        return out.mels, out.mel_lengths


def pad_batch(ids_list: list[list[int]], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(x) for x in ids_list], device=device)
    tokens = torch.zeros(len(ids_list), int(lengths.max()), dtype=torch.long, device=device)
    for b, ids in enumerate(ids_list):
        tokens[b, : len(ids)] = torch.tensor(ids, device=device)
    return tokens, lengths

"""Self-describing checkpoints: weights + model config + mel config + text frontend (symbol table).

One format serves both training checkpoints (written by Lightning, with optimizer state, weights under
the `model.` prefix) and exported release checkpoints (weights only, optionally fp16).  Both carry a
`tts` entry:

    {"format": "tts-checkpoint-v1", "kind": "acoustic" | "vocoder",
     "model_config": {"_target_": ..., ...},   # the Hydra node that built the model
     "build_kwargs": {"n_symbols": 84, "n_mels": 80},  # the derived arguments it was given
     "mel_config": {...}, "frontend": {...} | None, "info": {...}}

`load(path)` rebuilds the model from the file alone.  Writes are atomic (temp file + os.replace), so a
run killed mid-save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts.audio import MelConfig, MelConfigMismatchError
from tts.errors import CheckpointError  # defined torch-free: the ONNX runtime raises it too

FORMAT = "tts-checkpoint-v1"
LIGHTNING_PREFIX = "model."


@dataclass
class CheckpointMeta:
    kind: str
    model_config: dict[str, Any]
    build_kwargs: dict[str, Any]
    mel_config: MelConfig
    frontend: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": self.kind,
            "model_config": self.model_config,
            "build_kwargs": self.build_kwargs,
            "mel_config": self.mel_config.to_dict(),
            "frontend": self.frontend,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CheckpointMeta":
        if d.get("format") != FORMAT:
            raise CheckpointError(f"unsupported checkpoint format {d.get('format')!r} (expected {FORMAT})")
        return cls(
            kind=d["kind"],
            model_config=d["model_config"],
            build_kwargs=d["build_kwargs"],
            mel_config=MelConfig.from_dict(d["mel_config"]),
            frontend=d.get("frontend"),
            info=d.get("info", {}),
        )

    def build_model(self) -> nn.Module:
        return instantiate_node(self.model_config, **self.build_kwargs)


# The Hydra node keys `instantiate_node` builds itself; any other "_..." key goes to Hydra.
_PLAIN_KEYS = {"_target_", "_partial_", "_convert_"}


def _is_plain(node: Any) -> bool:
    """A node of plain values, "_target_" dicts (with _partial_ / _convert_: "all") and lists, without
    interpolations: what a stored (resolved) model config is."""
    if isinstance(node, dict):
        special = {k for k in node if isinstance(k, str) and k.startswith("_") and k.endswith("_")}
        if not special <= _PLAIN_KEYS or node.get("_convert_", "all") not in ("all", "partial", "object"):
            return False
        return all(_is_plain(v) for v in node.values())
    if isinstance(node, (list, tuple)):
        return all(_is_plain(v) for v in node)
    return not (isinstance(node, str) and "${" in node)


def _build(node: Any) -> Any:
    if isinstance(node, (list, tuple)):
        return [_build(v) for v in node]
    if not isinstance(node, dict):
        return node
    args = {k: _build(v) for k, v in node.items() if k not in _PLAIN_KEYS}
    if "_target_" not in node:
        return args
    module, _, name = node["_target_"].rpartition(".")
    target = getattr(importlib.import_module(module), name)
    return functools.partial(target, **args) if node.get("_partial_") else target(**args)


def instantiate_node(node: dict[str, Any], **kwargs: Any) -> Any:
    """`hydra.utils.instantiate(node, **kwargs)` for the plain nodes checkpoints store (resolved configs whose
    containers become plain dicts and lists, as with `_convert_: all`), without importing Hydra (~0.2 s of
    start-up on the inference path); any other node is built by Hydra itself."""
    if not (_is_plain(node) and _is_plain(kwargs)):
        from hydra.utils import instantiate

        return instantiate(node, **kwargs)
    return _build({**node, **kwargs})


@dataclass
class LoadedCheckpoint:
    model: nn.Module
    meta: CheckpointMeta

    @property
    def mel_config(self) -> MelConfig:
        return self.meta.mel_config

    def frontend(self):
        """The text frontend (with its symbol table) the model was trained with."""
        from tts.text import TextFrontend

        if self.meta.frontend is None:
            raise CheckpointError(f"a {self.meta.kind} checkpoint has no text frontend")
        return TextFrontend.from_dict(self.meta.frontend)


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_raw(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        raw = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # truncated zip, pickle garbage, ...
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch file: {e}") from e
    if not isinstance(raw, dict) or "tts" not in raw or "state_dict" not in raw:
        raise CheckpointError(f"{path} is not a tts checkpoint (no 'tts' description)")
    return raw


def model_state_dict(raw: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Weights of the model alone, whether the file came from Lightning or from `export`."""
    sd = raw["state_dict"]
    if any(k.startswith(LIGHTNING_PREFIX) for k in sd):
        sd = {k[len(LIGHTNING_PREFIX) :]: v for k, v in sd.items() if k.startswith(LIGHTNING_PREFIX)}
    return sd


def global_step(raw: dict[str, Any]) -> int | None:
    """Training step of a checkpoint: Lightning's own count, or the one a release file recorded."""
    return raw.get("global_step", raw["tts"].get("info", {}).get("global_step"))


def load_weights(model: nn.Module, raw: dict[str, Any], error: str, fresh_prefixes: tuple[str, ...] = ()) -> None:
    """Copy a checkpoint's weights into `model` as float32 (release files store fp16); a weight that
    does not fit raises CheckpointError(`error`: details).  fresh_prefixes: parameters under these names
    may be absent from the checkpoint and keep their fresh initialisation (a warm start into a model
    with new parts, e.g. the NAR's block-mode prenet)."""
    sd = {k: v.float() if v.is_floating_point() else v for k, v in model_state_dict(raw).items()}
    # A NaN/inf weight (a flipped byte, a diverged run) makes NaN audio that a wav writer turns into a
    # full-scale DC click in every sample: such a file is corrupt, whatever its structure says.
    bad = [k for k, v in sd.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise CheckpointError(f"{error}: corrupt: non-finite (NaN/inf) values in {len(bad)} weight tensor(s): {shown}")
    if fresh_prefixes:
        sd = {**{k: v for k, v in model.state_dict().items() if k.startswith(fresh_prefixes) and k not in sd}, **sd}
    try:
        model.load_state_dict(sd)
    except RuntimeError as e:
        raise CheckpointError(f"{error}: {e}") from e


def load(path: str | Path, device: str | torch.device = "cpu") -> LoadedCheckpoint:
    """Rebuild the model described by a checkpoint, in eval mode, in float32."""
    raw = read_raw(path)
    meta = CheckpointMeta.from_dict(raw["tts"])
    model = meta.build_model()
    load_weights(model, raw, f"{path}: weights do not fit the model its config describes")
    return LoadedCheckpoint(model=model.to(device).eval(), meta=meta)


def warm_start(model: nn.Module, path: str | Path, mel_config: MelConfig, frontend: dict[str, Any] | None) -> dict[str, Any]:
    """Copy the weights of checkpoint `path` into `model` (a fresh run initialised from an earlier one).

    Only weights travel: optimizer state, step count and LR schedule start anew (use `ckpt_path` to
    resume a run instead).  The source must describe the same mel and the same symbol table, because
    weights learnt for other symbol ids or another mel would load without error and mean nothing.
    Returns the source's `info` (its step, experiment) for the log.
    """
    raw = read_raw(path)
    meta = CheckpointMeta.from_dict(raw["tts"])
    try:
        meta.mel_config.check_compatible(mel_config, f"init_from {path}", "this run")
    except MelConfigMismatchError as e:
        raise CheckpointError(f"init_from {path}: its mel config differs from this run's: {e}") from e
    if frontend is not None and meta.frontend is not None:
        old, new = meta.frontend.get("symbols"), frontend.get("symbols")
        if old != new:
            raise CheckpointError(f"init_from {path}: its symbol table differs from this run's text frontend")
    load_weights(model, raw, f"init_from {path}: weights do not fit this run's model",
                 tuple(getattr(model, "fresh_parameter_prefixes", ())))
    return {**meta.info, "global_step": global_step(raw)}


def save(path: str | Path, model: nn.Module, meta: CheckpointMeta, half: bool = False) -> None:
    """Write an exported (weights-only) checkpoint; `half` stores float weights as fp16."""
    sd = {k: (v.half() if half and v.is_floating_point() else v).detach().cpu().clone() for k, v in model.state_dict().items()}
    atomic_torch_save({"tts": meta.to_dict(), "state_dict": sd}, path)


def export(src: str | Path, dst: str | Path, half: bool = True, info: dict[str, Any] | None = None) -> None:
    """Training checkpoint -> small release checkpoint (no optimizer state, fp16 by default)."""
    loaded = load(src)
    meta = loaded.meta
    if info:
        meta.info = {**meta.info, **info}
    save(dst, loaded.model, meta, half=half)

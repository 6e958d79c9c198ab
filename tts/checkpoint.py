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

A checkpoint is data, never a program (a model file from the internet must not run code when it is loaded):
the file is unpickled with torch's weights-only unpickler (tensors, numbers, strings and containers; a pickle
that names any other global is refused before anything is called), and the model is built only from the
classes in ALLOWED_TARGETS, never by importing what a config names.  Both refusals are an
UntrustedCheckpointError (a CheckpointError: the CLI's exit 4).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts.audio import MelConfig, MelConfigMismatchError
from tts.errors import CheckpointError, UntrustedCheckpointError  # torch-free: the ONNX runtime raises them too

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
    def from_dict(cls, d: Any) -> "CheckpointMeta":
        """The `tts` entry of a file; anything malformed (a file's bytes decide it) is a CheckpointError."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            found = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise CheckpointError(f"unsupported checkpoint format {found!r} (expected {FORMAT})")
        for key, kinds in (("kind", str), ("model_config", dict), ("build_kwargs", dict), ("mel_config", dict),
                           ("frontend", (dict, type(None))), ("info", dict)):
            if key in d or key not in ("frontend", "info"):
                if not isinstance(d.get(key), kinds):
                    raise CheckpointError(f"malformed checkpoint description: {key!r} is {type(d.get(key)).__name__}")
        if d["kind"] not in KINDS:
            raise CheckpointError(f"unknown checkpoint kind {d['kind']!r} (expected one of {list(KINDS)})")
        try:
            mel_config = MelConfig.from_dict(d["mel_config"])
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"malformed checkpoint description: its mel config: {e}") from e
        return cls(
            kind=d["kind"],
            model_config=d["model_config"],
            build_kwargs=d["build_kwargs"],
            mel_config=mel_config,
            frontend=d.get("frontend"),
            info=d.get("info", {}),
        )

    def build_model(self, max_elements: int | None = None) -> nn.Module:
        """The model this description names, built from ALLOWED_TARGETS only (the description comes from a file);
        max_elements: refuse (CheckpointError) a model of more parameter and buffer elements, before allocating
        it (`build_untrusted`)."""
        return build_untrusted(self.model_config, self.build_kwargs, max_elements)


KINDS = ("acoustic", "vocoder")

# The only callables a checkpoint's config may name (a `_target_` string is compared with these before
# anything is imported: importing a module a file names already runs code).  A new model or vocoder class
# that checkpoints should rebuild is added here.
ALLOWED_TARGETS = frozenset({
    "tts.audio.MelConfig",
    "tts.models.aligner.UnsupervisedAligner",
    "tts.models.autoregressive.Tacotron2",
    "tts.models.nonautoregressive.FastSpeech2",
    "tts.models.refiner.FlowMatchingRefiner",
    "tts.models.transformer_ar.TransformerAR",
    "tts.vocoder.griffin_lim.GriffinLimVocoder",
    "tts.vocoder.hifigan.HifiGanVocoder",
    "tts.vocoder.istft.IstftVocoder",
    "tts.vocoder.source_filter.SourceFilterVocoder",
})


def build_untrusted(node: dict[str, Any], kwargs: dict[str, Any] | None = None,
                    max_elements: int | None = None) -> nn.Module:
    """`instantiate_node` for a config read from a file: a plain node (no interpolation, no Hydra key beyond
    _target_/_partial_/_convert_) whose every `_target_` is in ALLOWED_TARGETS and whose result is a module;
    otherwise UntrustedCheckpointError, before anything is imported or called.  kwargs: the file's build_kwargs
    (a dict, never spread into this call: a file's key must not meet this function's own parameters).

    max_elements: the most parameter and buffer elements the model may have (`load`: what the file holds, with
    slack).  The config decides the sizes of what is built (d_model=10**6 is a 4 TB weight; 10**4 layers an
    endless build): the build checks every allocation against the bound before it is made (`_BoundedBuild`);
    over it is a CheckpointError, before the allocation that would pass it."""
    kwargs = kwargs or {}
    if not (_is_plain(node) and _is_plain(kwargs)):
        raise UntrustedCheckpointError("its model config is not plain data (interpolations or Hydra keys): refused")
    foreign = sorted(_targets({**node, **kwargs}) - ALLOWED_TARGETS)
    if foreign:
        raise UntrustedCheckpointError(f"its model config names {', '.join(foreign)}, which is not one of this "
                                       "project's model classes: refused (a checkpoint may only name its models)")
    try:
        with _bounded_build(max_elements):
            model = _build({**node, **kwargs})
    except _TooLarge as e:
        raise CheckpointError(str(e)) from None
    except Exception as e:  # wrong argument names or values for a real class: the file is broken, not a bug here
        raise CheckpointError(f"its model config does not build a model ({type(e).__name__}: {e})") from e
    if not isinstance(model, nn.Module):
        raise CheckpointError(f"its model config builds a {type(model).__name__}, not a model")
    return model


# Elements a model's build may allocate beyond the weights its file holds: buffers a model makes itself and does not
# store (windows, filterbanks) and the constructors' temporaries.  A file holds every weight of its model
# (`load_weights` is strict), so a config asking for more than the file holds with this slack is a hostile or
# broken file (measured: the shipped models allocate their weights plus < 0.1%).
BUILD_SLACK_ELEMENTS = 1 << 22


class _TooLarge(Exception):
    """A build passed its element bound (raised inside a module's constructor, before the allocation)."""


_WINDOWS = frozenset({"hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window"})
_SIZED = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "randint", "normal", "new_empty", "new_zeros",
                    "new_ones", "new_full", "empty_strided", "randperm", "eye"})


def _requested_elements(name: str, args: tuple, kwargs: dict) -> int:
    """Elements a torch factory call (torch.empty(3, 4), torch.full((3, 4), 0.), x.new_zeros(5),
    torch.arange(0, n, 2), torch.hann_window(n), ...) is about to allocate, from its arguments alone; 0 for
    any other call (an op on tensors that exist is bounded by them)."""
    def count(size: Any) -> int:
        if isinstance(size, int):
            return max(size, 0)
        if isinstance(size, (tuple, list, torch.Size)) and all(isinstance(d, int) for d in size):
            return math.prod(max(d, 0) for d in size)
        return 0

    if name in _WINDOWS or name == "randperm":
        return count(args[0] if args else kwargs.get("window_length", kwargs.get("n", 0)))
    if name in ("linspace", "logspace"):
        return count(args[2] if len(args) > 2 else kwargs.get("steps", 0))
    if name == "arange":
        numbers = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)][:3]
        given = dict(zip(("end",) if len(numbers) == 1 else ("start", "end", "step"), numbers))
        start, end, step = (kwargs.get(k, given.get(k, default)) for k, default in (("start", 0), ("end", 0), ("step", 1)))
        try:
            return max(math.ceil((end - start) / step), 0)
        except (TypeError, ZeroDivisionError, ValueError, OverflowError):
            return 0
    if name not in _SIZED:
        return 0
    if "size" in kwargs:
        return count(kwargs["size"])
    if name.startswith("new_"):
        args = args[1:]  # the tensor it is called on
    if name == "eye":
        return count(args[0]) * count(args[1] if len(args) > 1 and isinstance(args[1], int) else args[0])
    if name == "randint":  # randint([low,] high, size)
        sized = [a for a in args if isinstance(a, (tuple, list, torch.Size))]
        return count(sized[0]) if sized else 0
    if args and isinstance(args[0], (tuple, list, torch.Size)):
        return count(args[0])
    return math.prod(max(a, 0) for a in args if isinstance(a, int)) if args and isinstance(args[0], int) else 0


class _BoundedBuild(torch.overrides.TorchFunctionMode):
    """While a model is built on this thread: every torch factory call is checked against the bound before it
    allocates (the elements it asks for, added up), and every parameter and buffer registered is counted (a
    tensor made another way): past `limit` is _TooLarge, before the allocation that would pass it.  So a
    config's d_model=10**6 stops at its first weight (a 4 TB tensor never asked of the allocator) and 10**4
    layers after the few that the file's weights could fill."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.allocated, self.registered = limit, 0, 0
        self.owner = threading.get_ident()

    def _over(self, what: str) -> _TooLarge:
        return _TooLarge(f"its model config asks for a model of more than {self.limit:,} elements (stopped at {what}), "
                         "far more than the weights the file holds: refused before allocating it (a config naming absurd "
                         "sizes)")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        n = _requested_elements(getattr(func, "__name__", ""), args, kwargs)
        if n:
            self.allocated += n
            if self.allocated > self.limit:
                sizes = ", ".join(str(list(a) if isinstance(a, (tuple, torch.Size)) else a) for a in args
                                  if isinstance(a, (int, tuple, list, torch.Size)) and not isinstance(a, bool))
                raise self._over(f"{getattr(func, '__name__', func)}({sizes[:80]}): {n:,} elements")
        return func(*args, **kwargs)

    def registered_tensor(self, module: nn.Module, name: str, tensor: torch.Tensor | None) -> None:
        if tensor is None or threading.get_ident() != self.owner:
            return
        self.registered += tensor.numel()
        if self.registered > 2 * self.limit:  # weight_norm registers a weight again as its two factors
            raise self._over(f"at {type(module).__name__}.{name} {tuple(tensor.shape)}")


@contextlib.contextmanager
def _bounded_build(limit: int | None):
    """`_BoundedBuild` around a build (None: no bound).  The registration hooks are global to torch; only this
    thread's registrations count."""
    if limit is None:
        yield
        return
    from torch.nn.modules.module import (register_module_buffer_registration_hook,
                                         register_module_parameter_registration_hook)

    mode = _BoundedBuild(limit)
    handles = [register_module_parameter_registration_hook(mode.registered_tensor),
               register_module_buffer_registration_hook(mode.registered_tensor)]
    try:
        with mode:
            yield
    finally:
        for handle in handles:
            handle.remove()


def _targets(node: Any) -> set[str]:
    """Every `_target_` value in a node, however deep (as a string: a non-string target is never allowed)."""
    if isinstance(node, dict):
        target = node.get("_target_")
        found = {target if isinstance(target, str) else repr(target)} if "_target_" in node else set()
        return found.union(*(_targets(v) for v in node.values()))
    if isinstance(node, (list, tuple)):
        return set().union(*(_targets(v) for v in node))
    return set()


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
    start-up on the inference path); any other node is built by Hydra itself.  For the project's own configs
    (conf/): it imports whatever the node names, so a node read from a file goes to `build_untrusted`."""
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

        from tts.text.errors import TextError

        if self.meta.frontend is None:
            raise CheckpointError(f"a {self.meta.kind} checkpoint has no text frontend")
        try:
            return TextFrontend.from_dict(self.meta.frontend)
        except (TextError, TypeError, ValueError, KeyError) as e:  # the file's description, not the user's text
            raise CheckpointError(f"its text frontend description is unusable: {e}") from e


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


# Where torch's weights-only unpickler names the global it refused ("GLOBAL posix.system ...").
_REFUSED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")
_UNPICKLER_DETAIL = re.compile(r"WeightsUnpickler error:\s*(\S[^\n]*)")


def read_raw(path: str | Path) -> dict[str, Any]:
    """The file's dict, read as data only: torch's weights-only unpickler (tensors, numbers, strings, containers;
    Lightning's training checkpoints with optimizer state are such data too) never calls what a pickle names,
    so a file that needs code to load is refused (UntrustedCheckpointError) without running any of it."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint not found: {path}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a regular file")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the one-line error says what matters
            warnings.simplefilter("ignore")
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip, pickle garbage, code in the pickle, ...
        refused = _REFUSED_GLOBAL.search(str(e))
        if refused:
            raise UntrustedCheckpointError(
                f"checkpoint {path} is not safe to load: its pickle calls {refused.group(1)}, and a checkpoint may "
                "only hold weights and plain values (refused without running it)") from None
        # the weights-only unpickler's own detail ("Unsupported operand 149") follows its multi-line preamble
        detail = _UNPICKLER_DETAIL.search(str(e))
        first = detail.group(1) if detail else (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CheckpointError(f"checkpoint {path} is corrupt or not a torch file of plain data: {first}") from None
    if not isinstance(raw, dict) or "tts" not in raw or not isinstance(raw.get("state_dict"), dict):
        raise CheckpointError(f"{path} is not a tts checkpoint (no 'tts' description)")
    sd = raw["state_dict"]
    if not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in sd.items()):
        raise CheckpointError(f"{path} is not a tts checkpoint: its state_dict holds more than named tensors")
    return raw


def read_meta(raw: dict[str, Any], path: str | Path) -> CheckpointMeta:
    """The `tts` description of a file read by `read_raw`, errors naming the file."""
    try:
        return CheckpointMeta.from_dict(raw["tts"])
    except CheckpointError as e:
        raise type(e)(f"checkpoint {path}: {e}") from None


def model_state_dict(raw: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Weights of the model alone, whether the file came from Lightning or from `export` (int8 ones read back as
    float32: `unpack_weights`)."""
    sd = raw["state_dict"]
    if any(k.startswith(LIGHTNING_PREFIX) for k in sd):
        sd = {k[len(LIGHTNING_PREFIX) :]: v for k, v in sd.items() if k.startswith(LIGHTNING_PREFIX)}
    return unpack_weights(sd)


# How a release file stores its float weights: fp32 (as trained), fp16 (half the bytes) or int8: each weight
# tensor of at least INT8_MIN_ELEMENTS values as int8 with one fp16 scale per output channel (dim 0; symmetric,
# round to nearest: |error| <= scale / 2), a quarter of fp32's bytes; smaller tensors (biases, norms, gains) fp16.
PRECISIONS = ("fp32", "fp16", "int8")
INT8_MIN_ELEMENTS = 1024
INT8_SCALE = ".int8_scale"  # key suffix of a quantised tensor's scales [C_out] (fp16)


def pack_weights(sd: dict[str, torch.Tensor], precision: str) -> dict[str, torch.Tensor]:
    """A state dict's float tensors stored at `precision` (PRECISIONS); other tensors as they are."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        v = v.detach().cpu()
        if not v.is_floating_point() or precision == "fp32":
            out[k] = v.clone()
        elif precision == "int8" and v.dim() >= 2 and v.numel() >= INT8_MIN_ELEMENTS:
            rows = v.float().reshape(v.shape[0], -1)  # [C_out, rest]
            scale = (rows.abs().amax(dim=1) / 127).clamp_min(1e-12).half()  # [C_out], kept as stored
            out[k] = torch.round(rows / scale.float()[:, None]).clamp(-127, 127).to(torch.int8).reshape(v.shape)
            out[k + INT8_SCALE] = scale
        else:
            out[k] = v.half()
    return out


def unpack_weights(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`pack_weights` undone: int8 tensors times their per-channel scales, as float32.  A scale without its
    tensor, a tensor without its scale or shapes that do not match is a corrupt file (CheckpointError)."""
    scales = {k[: -len(INT8_SCALE)]: v for k, v in sd.items() if k.endswith(INT8_SCALE)}
    if not scales and not any(v.dtype == torch.int8 for v in sd.values()):
        return sd
    out = {k: v for k, v in sd.items() if not k.endswith(INT8_SCALE)}
    for k, v in out.items():
        if v.dtype == torch.int8 or k in scales:
            scale = scales.get(k)
            if scale is None or v.dtype != torch.int8 or v.dim() < 1 or scale.shape != (v.shape[0],) \
                    or not scale.is_floating_point():
                raise CheckpointError(f"corrupt int8 weight {k!r}: {tuple(v.shape)} {v.dtype} with scales "
                                      f"{None if scale is None else (tuple(scale.shape), scale.dtype)}")
            out[k] = v.float() * scale.float().reshape(-1, *[1] * (v.dim() - 1))  # [C_out, ...] * [C_out, 1, ...]
    return out


def global_step(raw: dict[str, Any]) -> int | None:
    """Training step of a checkpoint: Lightning's own count, or the one a release file recorded."""
    return raw.get("global_step", raw["tts"].get("info", {}).get("global_step"))


def steps_behind(raw: dict[str, Any]) -> int:
    """Training steps behind a checkpoint's weights: its own count plus those behind the weights it was
    warm-started from (`info.steps_before`), summed over a chain of warm starts."""
    return int(raw["tts"].get("info", {}).get("steps_before") or 0) + int(global_step(raw) or 0)


def load_weights(model: nn.Module, raw: dict[str, Any], error: str, fresh_prefixes: tuple[str, ...] = (),
                 only_prefixes: tuple[str, ...] = ()) -> None:
    """Copy a checkpoint's weights into `model` as float32 (release files store fp16); a weight that
    does not fit raises CheckpointError(`error`: details).  fresh_prefixes: parameters under these names
    may be absent from the checkpoint and keep their fresh initialisation (a warm start into a model
    with new parts, e.g. the NAR's block-mode prenet).  only_prefixes: copy ONLY the model's entries under
    these names (each must be in the checkpoint and fit), the rest keep their fresh initialisation, and the
    checkpoint's other entries are ignored (a part of another architecture, e.g. Tacotron 2's encoder and
    postnet into the Transformer AR)."""
    sd = {k: v.float() if v.is_floating_point() else v for k, v in model_state_dict(raw).items()}
    if only_prefixes:
        own = model.state_dict()
        wanted = [k for k in own if k.startswith(only_prefixes)]
        missing = [k for k in wanted if k not in sd]
        if not wanted or missing:
            shown = ", ".join(missing[:3]) or f"nothing under {list(only_prefixes)} in the model"
            raise CheckpointError(f"{error}: the checkpoint lacks {len(missing)} of the {len(wanted)} weights "
                                  f"asked for: {shown}")
        sd = {**own, **{k: sd[k] for k in wanted}}
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
    meta = read_meta(raw, path)
    held = sum(v.numel() for v in model_state_dict(raw).values())
    try:
        model = meta.build_model(max_elements=held + max(held, BUILD_SLACK_ELEMENTS))
    except CheckpointError as e:
        raise type(e)(f"checkpoint {path}: {e}") from None
    load_weights(model, raw, f"{path}: weights do not fit the model its config describes")
    return LoadedCheckpoint(model=model.to(device).eval(), meta=meta)


def warm_start(model: nn.Module, path: str | Path, mel_config: MelConfig, frontend: dict[str, Any] | None,
               only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Copy the weights of checkpoint `path` into `model` (a fresh run initialised from an earlier one).

    Only weights travel: optimizer state, step count and LR schedule start anew (use `ckpt_path` to
    resume a run instead).  The source must describe the same mel and the same symbol table, because
    weights learnt for other symbol ids or another mel would load without error and mean nothing.
    `only`: copy just the weights under these name prefixes (`load_weights` only_prefixes), e.g. a model
    of another architecture that shares its encoder.  Returns the source's `info` (its step, experiment) and its `steps_behind`.
    """
    raw = read_raw(path)
    meta = read_meta(raw, path)
    try:
        meta.mel_config.check_compatible(mel_config, f"init_from {path}", "this run")
    except MelConfigMismatchError as e:
        raise CheckpointError(f"init_from {path}: its mel config differs from this run's: {e}") from e
    if frontend is not None and meta.frontend is not None:
        old, new = meta.frontend.get("symbols"), frontend.get("symbols")
        if old != new:
            raise CheckpointError(f"init_from {path}: its symbol table differs from this run's text frontend")
    load_weights(model, raw, f"init_from {path}: weights do not fit this run's model",
                 tuple(getattr(model, "fresh_parameter_prefixes", ())), tuple(only))
    return {**meta.info, "global_step": global_step(raw), "steps_behind": steps_behind(raw)}


def save(path: str | Path, model: nn.Module, meta: CheckpointMeta, precision: str = "fp32") -> None:
    """Write an exported (weights-only) checkpoint, its float weights stored at `precision` (PRECISIONS)."""
    atomic_torch_save({"tts": meta.to_dict(), "state_dict": pack_weights(model.state_dict(), precision)}, path)


def export(src: str | Path, dst: str | Path, precision: str = "fp16", info: dict[str, Any] | None = None) -> None:
    """Training checkpoint -> small release checkpoint (no optimizer state, fp16 by default)."""
    loaded = load(src)
    meta = loaded.meta
    if info:
        meta.info = {**meta.info, **info}
    save(dst, loaded.model, meta, precision)

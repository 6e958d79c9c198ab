"""The shipped release (checkpoints/) and THE choice of engine for a voice: `open_pipeline`, which the CLI,
the Python API and the server call.  Torch-free until the torch engine is chosen.

checkpoints/default.json names the default acoustic model and vocoder (written by recipes.release); every
other inference setting of a shipped model lives in the model's own checkpoint (its config's K and
temperature: tts.runtime.controls), which the ONNX export copies into its manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tts.errors import CheckpointError
from tts.paths import CHECKPOINT_DIR
from tts.runtime.pipeline import Pipeline

DEFAULTS_FILE = CHECKPOINT_DIR / "default.json"
RUNTIMES = ("auto", "torch", "onnx")


def shipped_defaults() -> dict[str, Any]:
    """checkpoints/default.json: "acoustic" (the default shipped model, e.g. "nar") and "vocoder"."""
    if not DEFAULTS_FILE.is_file():
        raise CheckpointError(f"no shipped defaults: {DEFAULTS_FILE} is missing")
    try:
        defaults = json.loads(DEFAULTS_FILE.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"shipped defaults {DEFAULTS_FILE} are not valid JSON: {e}") from e
    if not isinstance(defaults, dict) or not {"acoustic", "vocoder"} <= set(defaults):
        raise CheckpointError(f"shipped defaults {DEFAULTS_FILE} must name 'acoustic' and 'vocoder'")
    return defaults


def shipped_checkpoint(model: str) -> Path:
    """checkpoints/MODEL.pt; a model the release does not ship is a clear error naming what it does ship."""
    path = CHECKPOINT_DIR / f"{model}.pt"
    if not path.is_file():
        shipped = sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt"))
        raise CheckpointError(f"no shipped {model!r} model ({path} is missing); this release ships "
                              f"{shipped or 'none'}: train one (recipes.train) and pass --checkpoint PATH")
    return path


def device_problem(device: str) -> str | None:
    """Why `device` cannot run here (None when it can), to follow the option's name: a name torch does not know,
    or a GPU that is absent.  "cpu" is answered without importing torch (start-up time)."""
    if device == "cpu":
        return None
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        return f"{device!r}: expected cpu, cuda or cuda:N"
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        return f"{device!r}: expected cpu, cuda or cuda:N"
    if not torch.cuda.is_available():
        return f"{device!r}: no CUDA GPU is available here; use cpu"
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        return f"{device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
    return None


def non_default_choices(model: str | None, checkpoint: str | Path | None, vocoder: str | None,
                        device: str) -> list[str]:
    """What, in a request for a voice, the ONNX export of the default voice does not hold."""
    defaults = shipped_defaults()
    wanted = []
    if checkpoint is not None:
        wanted.append(f"checkpoint {checkpoint}")
    if model not in (None, defaults["acoustic"]):
        wanted.append(f"model {model}")
    if vocoder not in (None, defaults["vocoder"]):
        wanted.append(f"vocoder {vocoder}")
    if device != "cpu":
        wanted.append(f"device {device}")
    return wanted


def choose_runtime(runtime: str, model: str | None = None, checkpoint: str | Path | None = None,
                   vocoder: str | None = None, device: str = "cpu", onnx_dir: str | Path | None = None) -> str:
    """"torch" or "onnx": "auto" takes the ONNX engine when the request is the default voice on the CPU and
    its export is current (its source checkpoints' hashes unchanged); "onnx" for anything else is a
    ValueError naming what the export lacks; a missing export is an OnnxExportError."""
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current, read_manifest

    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {list(RUNTIMES)}, got {runtime!r}")
    if runtime == "torch":
        return "torch"
    onnx_dir = onnx_dir or DEFAULT_ONNX_DIR
    wanted = non_default_choices(model, checkpoint, vocoder, device)
    if runtime == "auto":
        return "onnx" if not wanted and export_is_current(onnx_dir) else "torch"
    if wanted:
        raise ValueError(f"the onnx runtime runs the exported default voice on the CPU only; not {', '.join(wanted)} "
                         "(use the torch runtime)")
    read_manifest(onnx_dir, verify=False)  # a missing export: exit 4 naming the export command
    return "onnx"


def open_pipeline(model: str | None = None, checkpoint: str | Path | None = None, vocoder: str | None = None,
                  runtime: str = "auto", device: str = "cpu", onnx_dir: str | Path | None = None,
                  threads: int | None = None) -> Pipeline:
    """The pipeline of a voice: `model` a shipped acoustic model ("nar", "ar", ...; default: default.json's)
    or an acoustic `checkpoint` file, with `vocoder` (default: default.json's), on the engine `runtime`
    chooses (`choose_runtime`).  threads: CPU threads of torch or onnxruntime (None: torch's default, 1 for
    onnxruntime, whose start is fastest so)."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if choose_runtime(runtime, model, checkpoint, vocoder, device, onnx_dir) == "onnx":
        from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, OnnxEngine

        return Pipeline(OnnxEngine.load(onnx_dir or DEFAULT_ONNX_DIR, threads=threads or 1))
    import torch

    from tts.runtime.torch_engine import TorchEngine

    if threads is not None:
        torch.set_num_threads(threads)
    defaults = shipped_defaults() if checkpoint is None or vocoder is None else {}
    acoustic = Path(checkpoint) if checkpoint is not None else shipped_checkpoint(model or defaults["acoustic"])
    return Pipeline(TorchEngine.from_paths(acoustic, vocoder or defaults["vocoder"], device=device))

"""The shipped release (checkpoints/) and THE choice of engine for a voice: `open_pipeline`, which the CLI,
the Python API and the server call.  Torch-free until the torch engine is chosen.

checkpoints/default.json (written by recipes.release) names the shipped voices, each with its shipped acoustic
models (the first speaks for the voice unless a model is asked for), the default voice, the default vocoder and
(optional "voice_vocoders") the vocoder of a voice that speaks through its own (a vocoder fine-tuned on the
voice's recordings: issue 31); every other inference setting of a shipped model lives in the model's own
checkpoint (its config's K and temperature: tts.runtime.controls), which the ONNX export copies into its manifest.
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


class UnknownVoiceError(ValueError):
    """A voice (or a model of a voice) the release does not ship; the message names what it ships."""


def shipped_defaults() -> dict[str, Any]:
    """checkpoints/default.json: "voices" (voice -> its shipped acoustic models, e.g. {"slt": ["nar", ...]}),
    "voice" (the default one), "vocoder" (every voice's unless "voice_vocoders" names another: voice -> vocoder);
    plus "acoustic", derived: the default voice's first model."""
    if not DEFAULTS_FILE.is_file():
        raise CheckpointError(f"no shipped defaults: {DEFAULTS_FILE} is missing")
    try:
        defaults = json.loads(DEFAULTS_FILE.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"shipped defaults {DEFAULTS_FILE} are not valid JSON: {e}") from e
    voices = defaults.get("voices") if isinstance(defaults, dict) else None
    if not isinstance(voices, dict) or not voices or not all(
            isinstance(m, list) and m and all(isinstance(x, str) for x in m) for m in voices.values()) \
            or defaults.get("voice") not in voices or not isinstance(defaults.get("vocoder"), str):
        raise CheckpointError(f"shipped defaults {DEFAULTS_FILE} must name 'voices' (voice -> [model, ...]), "
                              "the default 'voice' among them and the 'vocoder'")
    own = defaults.setdefault("voice_vocoders", {})
    if not isinstance(own, dict) or not all(v in voices and isinstance(name, str) for v, name in own.items()):
        raise CheckpointError(f"shipped defaults {DEFAULTS_FILE}: 'voice_vocoders' must map shipped voices "
                              f"({', '.join(voices)}) to vocoder names")
    return {**defaults, "acoustic": voices[defaults["voice"]][0]}


def voice_vocoder(voice: str | None = None) -> str:
    """The vocoder a shipped `voice` speaks with (None, or not a shipped voice: the default vocoder)."""
    defaults = shipped_defaults()
    return defaults["voice_vocoders"].get(voice, defaults["vocoder"])


def model_vocoder(model: str | None) -> str:
    """The vocoder a shipped acoustic `model` speaks with: its voice's (None, or an acoustic checkpoint file of
    no shipped voice: the default vocoder)."""
    return voice_vocoder(model_voice(model) if model is not None else None)


def voice_model(voice: str | None = None, model: str | None = None) -> str:
    """The shipped acoustic model that speaks for `voice` (None: the default voice): `model` when given (one of
    that voice's models; with no voice, any shipped model), else the voice's first.  UnknownVoiceError names the
    shipped voices and models."""
    defaults = shipped_defaults()
    voices: dict[str, list[str]] = defaults["voices"]
    if voice is None:
        shipped = [m for models in voices.values() for m in models]
        if model is not None and model not in shipped:
            raise UnknownVoiceError(f"no shipped model {model!r}; this release ships {', '.join(shipped)} "
                                    "(python -m tts.synthesize --list-voices), or pass --checkpoint PATH")
        return model or defaults["acoustic"]
    if voice not in voices:
        raise UnknownVoiceError(f"unknown voice {voice!r}; this release ships the voices {', '.join(voices)} "
                                "(python -m tts.synthesize --list-voices)")
    if model is not None and model not in voices[voice]:
        raise UnknownVoiceError(f"voice {voice!r} has the models {', '.join(voices[voice])}, not {model!r}")
    return model or voices[voice][0]


def model_voice(model: str) -> str | None:
    """The shipped voice a shipped acoustic model speaks with (None: not a shipped model)."""
    return next((v for v, models in shipped_defaults()["voices"].items() if model in models), None)


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


def non_default_choices(checkpoint: str | Path | None, vocoder: str | None, device: str,
                        model: str | None = None) -> list[str]:
    """What, in a request for a shipped `model`, no ONNX export holds (it holds shipped models, each with its
    voice's vocoder)."""
    wanted = []
    if checkpoint is not None:
        wanted.append(f"checkpoint {checkpoint}")
    if vocoder not in (None, model_vocoder(model)):
        wanted.append(f"vocoder {vocoder}")
    if device != "cpu":
        wanted.append(f"device {device}")
    return wanted


def choose_runtime(runtime: str, model: str | None = None, checkpoint: str | Path | None = None,
                   vocoder: str | None = None, device: str = "cpu", onnx_dir: str | Path | None = None,
                   voice: str | None = None) -> str:
    """"torch" or "onnx": "auto" takes the ONNX engine when the request is a shipped model (`voice_model`) with
    its voice's vocoder on the CPU and the export holds it, current (its source checkpoints' hashes
    unchanged); "onnx" for anything else is a ValueError naming what the export lacks; a missing export is an
    OnnxExportError.  An unknown voice is an UnknownVoiceError whatever the runtime."""
    from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, export_is_current, read_manifest

    if runtime not in RUNTIMES:
        raise ValueError(f"runtime must be one of {list(RUNTIMES)}, got {runtime!r}")
    name = voice_model(voice, model) if checkpoint is None else None
    if runtime == "torch":
        return "torch"
    onnx_dir = onnx_dir or DEFAULT_ONNX_DIR
    wanted = non_default_choices(checkpoint, vocoder, device, name)
    if runtime == "auto":
        return "onnx" if not wanted and export_is_current(onnx_dir, name) else "torch"
    if wanted:
        raise ValueError(f"the onnx runtime runs the exported shipped models on the CPU only; not {', '.join(wanted)} "
                         "(use the torch runtime)")
    manifest = read_manifest(onnx_dir, verify=False)  # a missing export: exit 4 naming the export command
    if name not in manifest["voices"]:
        raise ValueError(f"the ONNX export at {onnx_dir} holds {', '.join(manifest['voices'])}, not {name!r} "
                         "(python -m tts.export, or use the torch runtime)")
    return "onnx"


def open_pipeline(model: str | None = None, checkpoint: str | Path | None = None, vocoder: str | None = None,
                  runtime: str = "auto", device: str = "cpu", onnx_dir: str | Path | None = None,
                  threads: int | None = None, voice: str | None = None) -> Pipeline:
    """The pipeline of a voice: `voice` a shipped voice (default: default.json's) and `model` one of its shipped
    acoustic models (`voice_model`), or an acoustic `checkpoint` file, with `vocoder` (default: the voice's,
    `model_vocoder`), on the engine `runtime` chooses (`choose_runtime`).  threads: CPU threads of torch or onnxruntime (None:
    torch's default, 1 for onnxruntime, whose start is fastest so)."""
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if checkpoint is not None and voice is not None:
        raise ValueError("give a voice or a checkpoint, not both (a checkpoint speaks with its own voice)")
    # the shipped model asked for, resolved once (None: a checkpoint file); an unknown voice fails here
    name = voice_model(voice, model) if checkpoint is None else None
    if choose_runtime(runtime, name, checkpoint, vocoder, device, onnx_dir) == "onnx":
        from tts.runtime.onnx_engine import DEFAULT_ONNX_DIR, OnnxEngine

        return Pipeline(OnnxEngine.load(onnx_dir or DEFAULT_ONNX_DIR, threads=threads or 1, voice=name))
    import torch

    from tts.runtime.torch_engine import TorchEngine

    if threads is not None:
        torch.set_num_threads(threads)
    acoustic = Path(checkpoint) if checkpoint is not None else shipped_checkpoint(name)
    return Pipeline(TorchEngine.from_paths(acoustic, vocoder or model_vocoder(name), device=device))

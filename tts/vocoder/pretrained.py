"""SpeechBrain's public LJSpeech HiFi-GAN (`speechbrain/tts-hifigan-ljspeech`) as a project `Vocoder`.

Loaded with SpeechBrain's own `HIFIGAN.from_hparams(source=..., savedir=...)`, so a Hugging Face model
id, a previously downloaded `savedir`, or a local folder (`hyperparams.yaml` + `generator.ckpt`) all work.
Only the generator is kept; it runs behind the same (mel, lengths) -> (wave, lengths) interface as our
own HiFi-GAN.

Mel definition.  The model was trained by SpeechBrain's recipe
`recipes/LJSpeech/TTS/vocoder/hifigan/hparams/train.yaml` (22050 Hz, n_fft = win = 1024, hop 256, 80
slaney mels over 0-8000 Hz, magnitude, not normalised, `dynamic_range_compression` = log(clamp(x, 1e-5))),
which is exactly `conf/audio/lj22k.yaml` (tests/test_audio.py checks numerical parity with SpeechBrain's
`mel_spectogram`).  Audio keys present in the loaded hyperparams.yaml override those recipe values, and
the result must equal the caller's mel config: a mismatch is an error, never a resample.

Offline.  Hugging Face Hub retries for ~24 s before failing when there is no network (measured).  When
offline is requested (`offline=True`, `TTS_OFFLINE=1` or `HF_HUB_OFFLINE=1`) or huggingface.co cannot
be reached within ~1.5 s, fetching runs with network disabled (`FetchConfig(allow_network=False)`, the
Hub's `local_files_only`, plus `HF_HUB_OFFLINE=1` for the call): a cached copy still loads, anything
else fails in well under a second with `PretrainedVocoderError` naming the model and the fallbacks.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from torch import nn

from tts.audio import MelConfig
from tts.paths import CHECKPOINT_DIR
from tts.vocoder.base import Vocoder

log = logging.getLogger(__name__)

SPEECHBRAIN_LJSPEECH = "speechbrain/tts-hifigan-ljspeech"
DEFAULT_SAVEDIR = CHECKPOINT_DIR / "pretrained" / "speechbrain-tts-hifigan-ljspeech"

# SpeechBrain's LJSpeech HiFi-GAN recipe mel (see module docstring), in our terms.
SPEECHBRAIN_LJSPEECH_MEL = MelConfig(
    sample_rate=22050,
    n_fft=1024,
    win_length=1024,
    hop_length=256,
    n_mels=80,
    f_min=0.0,
    f_max=8000.0,
    power=1.0,
    norm="slaney",
    mel_scale="slaney",
    log_clamp=1e-5,
)
# SpeechBrain hyperparams.yaml key -> MelConfig field.
_SB_AUDIO_KEYS = {
    "sample_rate": "sample_rate",
    "n_fft": "n_fft",
    "win_length": "win_length",
    "hop_length": "hop_length",
    "n_mel_channels": "n_mels",
    "mel_fmin": "f_min",
    "mel_fmax": "f_max",
    "power": "power",
    "norm": "norm",
    "mel_scale": "mel_scale",
}

FALLBACK_HINT = (
    "Fallbacks: `--vocoder griffin-lim` (no weights needed), or the project's own HiFi-GAN "
    "(`--vocoder hifigan`, i.e. checkpoints/vocoder/hifigan_v3.pt, or `--vocoder PATH.ckpt` for any checkpoint "
    "written by `python -m recipes.train_vocoder`)."
)


class PretrainedVocoderError(RuntimeError):
    """The pretrained vocoder could not be fetched, or does not fit the project's mel definition."""


# --- offline detection ----------------------------------------------------------------------------
def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def hub_reachable(timeout: float = 1.5) -> bool:
    """Can a TCP connection to the Hub (or $HF_ENDPOINT) be opened within `timeout` seconds?

    Name resolution ignores socket timeouts, so the probe runs in a daemon thread that is abandoned
    after `timeout`.  Behind an HTTPS proxy a direct connection says nothing: assume reachable.
    """
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    ok = threading.Event()

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            ok.set()
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return ok.is_set()


def offline_reason(offline: bool | None) -> str | None:
    """Why the Hub must not be contacted (None = go online)."""
    if offline is not None:
        return "offline=True was requested" if offline else None
    for var in ("TTS_OFFLINE", "HF_HUB_OFFLINE"):
        if _truthy(os.environ.get(var)):
            return f"{var}={os.environ[var]} is set"
    if not hub_reachable():
        return "huggingface.co is not reachable (no network)"
    return None


@contextlib.contextmanager
def _hub_offline_env() -> Iterator[None]:
    # huggingface_hub reads HF_HUB_OFFLINE at import time, so this only helps code that has not imported
    # it yet; `allow_network=False` (local_files_only) is what makes the already-imported Hub fail fast.
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


# --- mel definition and generator checks ---------------------------------------------------------
def speechbrain_mel_config(hparams: Any, default: MelConfig = SPEECHBRAIN_LJSPEECH_MEL) -> MelConfig:
    """Our MelConfig for a SpeechBrain vocoder: audio keys of its hyperparams over the recipe values."""
    if getattr(hparams, "mel_normalized", False):
        raise PretrainedVocoderError("the vocoder expects magnitude-normalised mels (mel_normalized: True)")
    if getattr(hparams, "dynamic_range_compression", True) is False:
        raise PretrainedVocoderError("the vocoder expects linear mels (dynamic_range_compression: False)")
    values = default.to_dict()
    for sb_key, field in _SB_AUDIO_KEYS.items():
        value = getattr(hparams, sb_key, None)
        if value is not None:
            values[field] = type(values[field])(value) if values[field] is not None else value
    return MelConfig.from_dict(values)


def _generator_geometry(generator: nn.Module) -> tuple[int, int]:
    """(input channels, total upsampling) of a SpeechBrain HifiganGenerator."""
    in_channels = generator.conv_pre.conv.in_channels
    upsampling = math.prod(int(layer.conv.stride[0]) for layer in generator.ups)
    return in_channels, upsampling


class SpeechBrainHifiGan(Vocoder):
    """A SpeechBrain-trained HifiganGenerator (weight norm removed) behind the project interface."""

    def __init__(self, mel_config: MelConfig, generator: nn.Module, source: str) -> None:
        super().__init__(mel_config)
        in_channels, upsampling = _generator_geometry(generator)
        if in_channels != mel_config.n_mels or upsampling != mel_config.hop_length:
            raise PretrainedVocoderError(
                f"{source}: generator takes {in_channels} mel channels and upsamples x{upsampling}, but the mel "
                f"config has n_mels={mel_config.n_mels}, hop_length={mel_config.hop_length}"
            )
        self.generator = generator
        self.source = source
        self.inference_padding = int(getattr(generator, "inference_padding", 5))

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        # Same replicate padding as SpeechBrain's `inference()`, but cropped back so that the output is
        # [B, T * hop] with sample t*hop belonging to frame t (SpeechBrain keeps the 2*pad extra frames).
        p, hop, t = self.inference_padding, self.mel_config.hop_length, mel.shape[-1]
        padded = nn.functional.pad(mel, (p, p), mode="replicate") if p else mel  # [B, M, T + 2p]
        wave = self.generator(padded)[:, 0]  # [B, (T + 2p) * hop]
        return wave[:, p * hop : (p + t) * hop]


# --- loading --------------------------------------------------------------------------------------
# What a local folder's hyperparams.yaml may build.  SpeechBrain reads it with HyperPyYAML, whose tags call any
# Python callable they name (`!new:os.system`, `!apply:`, `!name:`, `!module:`); a folder from anywhere is data,
# so its tags are checked before SpeechBrain sees the file: only these classes, references and tuples.
SPEECHBRAIN_CLASSES = ("speechbrain.lobes.models.HifiGAN.HifiganGenerator", "speechbrain.utils.parameter_transfer.Pretrainer")
_PLAIN_TAGS = ("!ref", "!copy", "!tuple")


def check_hyperparams(path: Path) -> None:
    """Refuse (UntrustedCheckpointError) a hyperparams.yaml whose tags would build or call anything but
    SPEECHBRAIN_CLASSES; bad YAML is a PretrainedVocoderError.  Parsed with a safe loader that only records tags."""
    import yaml

    from tts.errors import UntrustedCheckpointError

    tags: set[str] = set()

    class TagRecorder(yaml.SafeLoader):
        pass

    def record(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> None:
        tags.add(node.tag)

    TagRecorder.add_multi_constructor("!", record)
    try:
        yaml.load(path.read_text(encoding="utf-8"), Loader=TagRecorder)  # noqa: S506 -- a safe loader subclass
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise PretrainedVocoderError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    allowed = {*_PLAIN_TAGS, *(f"!new:{c}" for c in SPEECHBRAIN_CLASSES)}
    foreign = sorted(tags - allowed)
    if foreign:
        raise UntrustedCheckpointError(f"{path} names {', '.join(foreign)}: a vocoder folder may only build "
                                       f"{' and '.join(SPEECHBRAIN_CLASSES)} (refused without running it)")


def _looks_like_path(source: str) -> bool:
    # Hub ids are "owner/name"; anything absolute, relative-dotted or deeper is meant as a folder.
    return source.startswith(("/", ".", "~")) or source.count("/") > 1 or (os.sep != "/" and os.sep in source)


def _strict_reload(generator: nn.Module, hparams: Any, source: str) -> None:
    """SpeechBrain's parameter transfer is non-strict (only warns); refuse weights that do not fit."""
    from speechbrain.utils.checkpoints import torch_patched_state_dict_load

    path = getattr(hparams.pretrainer, "paths", {}).get("generator")
    if path is None:
        raise PretrainedVocoderError(f"{source}: hyperparams.yaml has no pretrainer loadable 'generator'")
    try:
        generator.load_state_dict(torch_patched_state_dict_load(path, "cpu"), strict=True)
    except RuntimeError as e:
        raise PretrainedVocoderError(f"{source}: generator.ckpt does not fit the generator its hyperparams describe: {e}") from e


def load_speechbrain_hifigan(
    source: str | Path = SPEECHBRAIN_LJSPEECH,
    mel_config: MelConfig | None = None,
    savedir: str | Path | None = None,
    offline: bool | None = None,
    device: str | torch.device = "cpu",
) -> SpeechBrainHifiGan:
    """Load a SpeechBrain HiFi-GAN (Hub id or local folder) for mels of `mel_config` (default: project's).

    `savedir` (Hub sources only, default checkpoints/pretrained/...) keeps the downloaded files, so a
    later offline call finds them.  `offline`: None = decide from TTS_OFFLINE / HF_HUB_OFFLINE and a
    quick reachability probe; True/False force it.
    """
    from speechbrain.inference.vocoders import HIFIGAN
    from speechbrain.utils.fetching import FetchConfig

    mel_config = mel_config or MelConfig.default()
    source = str(source)
    local = Path(source).expanduser()
    if local.is_dir():
        missing = [f for f in ("hyperparams.yaml", "generator.ckpt") if not (local / f).is_file()]
        if missing:
            raise PretrainedVocoderError(f"local vocoder folder {local} lacks {missing} (needs hyperparams.yaml + generator.ckpt)")
        check_hyperparams(local / "hyperparams.yaml")
        # A local folder needs no collection directory: SpeechBrain reads the files in place.
        kwargs: dict[str, Any] = {"source": str(local), "savedir": None}
        reason = None
    elif _looks_like_path(source):
        raise PretrainedVocoderError(f"vocoder folder not found: {source}")
    else:
        reason = offline_reason(offline)
        kwargs = {
            "source": source,
            "savedir": str(savedir if savedir is not None else DEFAULT_SAVEDIR),
            "fetch_config": FetchConfig(allow_network=reason is None),
        }
    env = _hub_offline_env() if reason is not None else contextlib.nullcontext()
    try:
        with env:
            interface = HIFIGAN.from_hparams(**kwargs, run_opts={"device": "cpu"})
    except Exception as e:  # LocalEntryNotFoundError, HTTP errors, ValueError from fetch, load errors, ...
        first_line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if kwargs["savedir"] is None:  # local folder: nothing was fetched, the files themselves are bad
            raise PretrainedVocoderError(
                f"cannot load the SpeechBrain vocoder folder {source} (invalid hyperparams.yaml, or generator.ckpt "
                f"does not fit the generator it describes): {first_line}"
            ) from e
        where = f"not found in {kwargs['savedir']} or the Hugging Face cache" if reason else "download failed"
        raise PretrainedVocoderError(
            f"cannot load the pretrained vocoder '{source}' ({reason or 'online'}; {where}: {first_line}).\n"
            f"{FALLBACK_HINT}\nTo use it offline later, run once with network (it is kept in savedir), or pass "
            "a local folder holding its hyperparams.yaml + generator.ckpt."
        ) from e
    hparams = interface.hparams
    generator = hparams.generator
    _strict_reload(generator, hparams, source)
    mel_config.check_compatible(speechbrain_mel_config(hparams), "the project's mel config", f"vocoder {source}")
    generator.remove_weight_norm()  # inference only: fold weight norm into plain conv weights
    vocoder = SpeechBrainHifiGan(mel_config, generator, source)
    log.info("loaded SpeechBrain HiFi-GAN from %s", source)
    return vocoder.to(device).eval()

"""The one mel definition of the project.

Every mel in the project (training targets, vocoder inputs, evaluation) is computed by
`MelSpectrogram` from a `MelConfig`.  The numbers live only in `conf/audio/*.yaml`; checkpoints store
the config they were trained with and `MelConfig.check_compatible` refuses a mismatch (a silent
resample/interpolation between two mel definitions is a classic source of muffled audio).

Definition (DESIGN.md section 2): torchaudio MelSpectrogram with center=True and reflect padding, so a
signal of N samples gives 1 + N // hop_length frames; magnitude (power 1) slaney mel filterbank;
natural log of the magnitude clamped at `log_clamp`.  No mean/std normalisation here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch
import torchaudio
from torch import nn

from tts.errors import MelConfigMismatchError  # noqa: F401  (torch-free home; re-exported here)
from tts.paths import CONF_DIR


@dataclass(frozen=True)
class MelConfig:
    sample_rate: int
    n_fft: int
    win_length: int
    hop_length: int
    n_mels: int
    f_min: float
    f_max: float
    power: float
    norm: str | None
    mel_scale: str
    log_clamp: float

    def __post_init__(self) -> None:
        if self.win_length > self.n_fft:
            raise ValueError(f"win_length {self.win_length} > n_fft {self.n_fft}")
        if not 0 <= self.f_min < self.f_max <= self.sample_rate / 2:
            raise ValueError(f"need 0 <= f_min < f_max <= sample_rate/2, got {self.f_min}, {self.f_max}")

    # --- derived numbers -------------------------------------------------------------------------
    def n_frames(self, n_samples: int) -> int:
        """Frames produced for a signal of `n_samples` samples (center=True)."""
        return 1 + n_samples // self.hop_length

    def n_samples(self, n_frames: int) -> int:
        """Samples a vocoder produces for `n_frames` frames (hop_length per frame)."""
        return n_frames * self.hop_length

    @property
    def min_samples(self) -> int:
        """The shortest signal a mel can be computed from: reflect padding by n_fft // 2 needs this many."""
        return self.n_fft // 2 + 1

    @property
    def frame_seconds(self) -> float:
        return self.hop_length / self.sample_rate

    @property
    def log_floor(self) -> float:
        """Value of a silent (all-zero) frame; also the padding value of mel batches."""
        return math.log(self.log_clamp)

    # --- (de)serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MelConfig":
        d = {k: v for k, v in d.items() if k != "_target_"}
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        missing = fields - set(d)
        if unknown or missing:
            raise ValueError(f"bad mel config: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
        return cls(**d)

    @classmethod
    def from_yaml(cls, path: str | Path) -> "MelConfig":
        import yaml

        with open(path) as f:
            return cls.from_dict(yaml.safe_load(f))

    @classmethod
    def default(cls) -> "MelConfig":
        """The project's default mel definition, read from conf/audio/lj22k.yaml."""
        return cls.from_yaml(CONF_DIR / "audio" / "lj22k.yaml")

    def check_compatible(self, other: "MelConfig", what: str = "component", other_what: str = "other") -> None:
        """Raise `MelConfigMismatchError` naming both configs if `other` differs from `self`."""
        if self != other:
            a, b = self.to_dict(), other.to_dict()
            diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
            raise MelConfigMismatchError(
                f"mel config mismatch between {what} and {other_what}: differing fields {diff}.\n"
                f"  {what}: {a}\n  {other_what}: {b}\n"
                "Mels are never resampled or interpolated between definitions; retrain or pick a "
                "matching component."
            )


class MelSpectrogram(nn.Module):
    """wave [B, N] or [N] (float, -1..1) -> log-mel [B, n_mels, 1 + N // hop] (or [n_mels, T])."""

    def __init__(self, config: MelConfig) -> None:
        super().__init__()
        self.config = config
        self.transform = torchaudio.transforms.MelSpectrogram(
            sample_rate=config.sample_rate,
            n_fft=config.n_fft,
            win_length=config.win_length,
            hop_length=config.hop_length,
            n_mels=config.n_mels,
            f_min=config.f_min,
            f_max=config.f_max,
            power=config.power,
            norm=config.norm,
            mel_scale=config.mel_scale,
            center=True,
            pad_mode="reflect",
        )

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        min_samples = self.config.min_samples
        if wave.shape[-1] < min_samples:
            raise ValueError(f"audio of {wave.shape[-1]} samples is too short for a mel (need >= {min_samples})")
        mel = self.transform(wave)
        return torch.log(torch.clamp(mel, min=self.config.log_clamp))

    def magnitude(self, wave: torch.Tensor) -> torch.Tensor:
        """Linear STFT magnitude [B, n_fft//2+1, T] with the same framing (used for energy)."""
        spec = self.transform.spectrogram(wave)  # power=config.power
        return spec ** (1.0 / self.config.power)


class AudioFileError(OSError):
    """A missing, unreadable or wrongly-formatted audio file."""


def load_wav(path: str | Path, sample_rate: int) -> torch.Tensor:
    """Read a mono wav as float32 [N]; a different sample rate is an error (resample in data prep)."""
    path = Path(path)
    if not path.is_file():
        raise AudioFileError(f"audio file not found: {path}")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError for corrupt files
        raise AudioFileError(f"cannot read audio file {path}: {e}") from e
    if sr != sample_rate:
        raise AudioFileError(f"{path} has sample rate {sr}, expected {sample_rate}")
    return torch.from_numpy(data.mean(axis=1))


def save_wav(path: str | Path, wave: torch.Tensor | np.ndarray, sample_rate: int) -> None:
    """Write float audio [N] as 16-bit PCM, atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(wave, torch.Tensor):
        wave = wave.detach().cpu().float().numpy()
    wave = np.clip(np.asarray(wave, dtype=np.float32).reshape(-1), -1.0, 1.0)
    tmp = path.with_name(path.name + ".tmp")
    sf.write(str(tmp), wave, sample_rate, subtype="PCM_16", format="WAV")
    tmp.replace(path)

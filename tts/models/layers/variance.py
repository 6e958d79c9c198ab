"""FastSpeech 2's variance adaptor: duration, pitch and energy predictors plus pitch/energy embeddings.

Choices (and why):
- **Phoneme-level pitch and energy** (FastPitch; FastSpeech 2's phoneme-level variant): frame targets
  are averaged per token with the durations, and predicted/embedded per token before length
  regulation.  A per-token value is far easier to predict from text than a frame contour, and the
  decoder still shapes the within-token contour; inference controls (shift/scale) act on a few
  numbers per phoneme.
- Pitch is handled in **log-Hz**, normalised with the corpus's voiced-frame log mean/std; a token's
  target is the mean log-F0 of its voiced frames, and a token with no voiced frame gets the
  normalised value 0 (the speaker's mean; FastPitch does the same).  Energy (L2 norm of the STFT
  magnitude) is averaged over all the token's frames and normalised with mean/std.  Zero-duration
  tokens get target 0 for both.
- **Embedding**: FastPitch's Conv1d(1 -> D, k=3) of the normalised value, added to the encoder
  output -- smooth in the value, so pitch_shift moves the embedding continuously (quantised bins
  would make small shifts a no-op).
- Pitch and energy are predicted **in parallel from the encoder output** (FastPitch), not energy
  after pitch (FastSpeech 2), so the inference controls are independent: shifting the pitch does not
  change the predicted energy.
- The duration predictor works on log(d + 1) (FastSpeech 2), so long pauses do not dominate the MSE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tts.models.layers.length_regulator import average_by_durations


class VariancePredictor(nn.Module):
    """FastSpeech 2 predictor: 2 x (Conv1d k -> ReLU -> LayerNorm -> Dropout) -> Linear(1).

    x [B, L, D], mask [B, L] -> prediction [B, L], zero on padded tokens.
    """

    def __init__(self, d_model: int, channels: int = 256, kernel_size: int = 3, n_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError(f"predictor kernel size must be odd, got {kernel_size}")
        self.convs = nn.ModuleList(
            nn.Conv1d(d_model if i == 0 else channels, channels, kernel_size, padding=kernel_size // 2) for i in range(n_layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in range(n_layers))
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(channels, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask[:, :, None].to(x.dtype)  # [B, L, 1]
        h = x
        for conv, norm in zip(self.convs, self.norms):
            h = (h * keep).transpose(1, 2)  # [B, C, L]; zero padding before the "same" conv
            h = self.dropout(norm(F.relu(conv(h)).transpose(1, 2)))  # [B, L, C]
        return self.proj(h).squeeze(-1) * mask.to(x.dtype)


class VarianceEmbedding(nn.Module):
    """FastPitch-style embedding of a normalised scalar per token: [B, L] -> [B, L, D] (zero on padding)."""

    def __init__(self, d_model: int, kernel_size: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, d_model, kernel_size, padding=kernel_size // 2)

    def forward(self, value: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.to(value.dtype)
        return self.conv((value * m)[:, None, :]).transpose(1, 2) * m[:, :, None]


@dataclass
class VarianceTargets:
    """Token-level training targets, all [B, L] and zero on padded tokens."""

    log_durations: torch.Tensor  # log(d + 1)
    pitch: torch.Tensor  # normalised log-F0 per token (0 for tokens without voiced frames)
    energy: torch.Tensor  # normalised mean energy per token


@dataclass
class VarianceOutput:
    hidden: torch.Tensor  # [B, L, D] encoder output + pitch and energy embeddings
    log_durations: torch.Tensor  # [B, L] predicted log(d + 1)
    pitch: torch.Tensor  # [B, L] predicted normalised pitch (before any control)
    energy: torch.Tensor  # [B, L] predicted normalised energy (before any control)
    pitch_used: torch.Tensor  # [B, L] normalised pitch that was embedded (target or controlled prediction)
    energy_used: torch.Tensor  # [B, L] normalised energy that was embedded


class VarianceAdaptor(nn.Module):
    """Predictors + embeddings + the corpus statistics (buffers, saved in checkpoints).

    Default statistics are rough values for a female voice (F0 ~ 200 Hz, log-std 0.2) and unit energy
    scaling; `set_statistics` installs the corpus's own.
    """

    def __init__(
        self,
        d_model: int,
        predictor_channels: int = 256,
        predictor_kernel_size: int = 3,
        predictor_layers: int = 2,
        predictor_dropout: float = 0.5,
        embedding_kernel_size: int = 3,
        pitch_log_mean: float = math.log(200.0),
        pitch_log_std: float = 0.2,
        energy_mean: float = 0.0,
        energy_std: float = 1.0,
    ) -> None:
        super().__init__()

        def predictor() -> VariancePredictor:
            return VariancePredictor(d_model, predictor_channels, predictor_kernel_size, predictor_layers, predictor_dropout)

        self.duration_predictor = predictor()
        self.pitch_predictor = predictor()
        self.energy_predictor = predictor()
        self.pitch_embedding = VarianceEmbedding(d_model, embedding_kernel_size)
        self.energy_embedding = VarianceEmbedding(d_model, embedding_kernel_size)
        self.register_buffer("pitch_log_mean", torch.tensor(float(pitch_log_mean)))
        self.register_buffer("pitch_log_std", torch.tensor(float(pitch_log_std)))
        self.register_buffer("energy_mean", torch.tensor(float(energy_mean)))
        self.register_buffer("energy_std", torch.tensor(float(energy_std)))

    # --- statistics --------------------------------------------------------------------------------
    def set_statistics(
        self,
        pitch_log_mean: float | None = None,
        pitch_log_std: float | None = None,
        energy_mean: float | None = None,
        energy_std: float | None = None,
    ) -> None:
        """Set any subset of the statistics; None keeps the current value.  Stds are floored at 1e-5."""
        for name, value, is_std in (
            ("pitch_log_mean", pitch_log_mean, False),
            ("pitch_log_std", pitch_log_std, True),
            ("energy_mean", energy_mean, False),
            ("energy_std", energy_std, True),
        ):
            if value is None:
                continue
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"non-finite statistic {name}={value}")
            getattr(self, name).fill_(max(value, 1e-5) if is_std else value)

    # --- targets -----------------------------------------------------------------------------------
    def targets(
        self, durations: torch.Tensor, pitch_hz: torch.Tensor, energy: torch.Tensor, token_mask: torch.Tensor
    ) -> VarianceTargets:
        """durations [B, L] long, frame pitch [B, T] Hz (0 = unvoiced), frame energy [B, T] -> targets."""
        m = token_mask.to(pitch_hz.dtype)
        voiced = pitch_hz > 0
        log_f0 = torch.log(pitch_hz.clamp_min(1e-3)) * voiced  # [B, T], 0 where unvoiced
        token_log_f0, n_voiced = average_by_durations(log_f0, durations, voiced)
        pitch = torch.where(n_voiced > 0, (token_log_f0 - self.pitch_log_mean) / self.pitch_log_std, 0.0) * m
        token_energy, n_frames = average_by_durations(energy, durations)
        energy_norm = torch.where(n_frames > 0, (token_energy - self.energy_mean) / self.energy_std, 0.0) * m
        log_d = torch.log1p(durations.to(pitch_hz.dtype)) * m
        return VarianceTargets(log_d, pitch, energy_norm)

    # --- controls ----------------------------------------------------------------------------------
    def control_pitch(
        self, pitch: torch.Tensor, mask: torch.Tensor, shift_semitones: float = 0.0, scale: float = 1.0
    ) -> torch.Tensor:
        """Normalised pitch [B, L] -> controlled normalised pitch.

        `scale` multiplies each utterance's log-F0 deviation from its own mean (1 = as predicted,
        0 = monotone, > 1 = exaggerated intonation; FastPitch's "amplify" transform); `shift_semitones`
        then adds 12 * log2 steps: +12 doubles every F0.  Both act in log-Hz, so in normalised units
        the shift is shift * ln(2) / 12 / log_std.
        """
        m = mask.to(pitch.dtype)
        if scale != 1.0:
            mean = (pitch * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp_min(1.0)  # [B, 1]
            pitch = mean + scale * (pitch - mean)
        # no branch on the shift (adding 0 is exact): the exported graph takes it as an input (tts/export.py)
        pitch = pitch + shift_semitones * (math.log(2.0) / 12.0) / self.pitch_log_std
        return pitch * m

    def control_energy(self, energy: torch.Tensor, mask: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        """Normalised energy [B, L] -> normalised energy of (raw energy * scale), floored at raw 0."""
        if scale == 1.0:
            return energy
        raw = (energy * self.energy_std + self.energy_mean).clamp_min(0.0) * scale
        return (raw - self.energy_mean) / self.energy_std * mask.to(energy.dtype)

    def pitch_to_hz(self, pitch: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Normalised pitch [B, L] -> Hz (0 on padding)."""
        return torch.exp(pitch * self.pitch_log_std + self.pitch_log_mean) * mask.to(pitch.dtype)

    def energy_to_raw(self, energy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (energy * self.energy_std + self.energy_mean) * mask.to(energy.dtype)

    # --- forward -----------------------------------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor,
        pitch_target: torch.Tensor | None = None,
        energy_target: torch.Tensor | None = None,
        pitch_shift: float = 0.0,
        pitch_scale: float = 1.0,
        energy_scale: float = 1.0,
    ) -> VarianceOutput:
        """x [B, L, D] encoder output, mask [B, L].  With targets (teacher forcing) the embeddings use
        them; otherwise the controlled predictions.  Durations are regulated by the caller."""
        log_d = self.duration_predictor(x, mask)
        pitch = self.pitch_predictor(x, mask)
        energy = self.energy_predictor(x, mask)
        if pitch_target is not None:
            pitch_used = pitch_target
        else:
            pitch_used = self.control_pitch(pitch, mask, pitch_shift, pitch_scale)
        energy_used = energy_target if energy_target is not None else self.control_energy(energy, mask, energy_scale)
        hidden = x + self.pitch_embedding(pitch_used, mask) + self.energy_embedding(energy_used, mask)
        return VarianceOutput(hidden, log_d, pitch, energy, pitch_used, energy_used)

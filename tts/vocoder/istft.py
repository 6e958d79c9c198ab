"""iSTFT-head vocoder (Vocos style, Siuzdak 2023; iSTFTNet, Kaneko et al. 2022): a frame-rate ConvNeXt predicts
each mel frame's complex STFT (log-magnitude and phase), and an inverse STFT makes the wave.

Why beside the source-filter vocoder (issue 31). The source-filter vocoder models speech as pulses and noise
through minimum-phase filters; its copy synthesis loses ~0.3 DistillMOS to slt's recordings, and given the
recordings' own F0 and voicing it gains 0.02 (docs/results/vocoder_headroom: 40 test utterances); on the Piper
voice (a VITS decoder's output, not a source-filter signal) it loses in magnitude and phase alike (1.87
against the recordings' 4.13 for the slt-trained vocoder). A network that predicts magnitude AND phase per
frequency bin assumes no production model, at the same frame rate (no upsampling stack as in HiFi-GAN: the
inverse FFT does it), so it stays cheap.

Conventions (mel hop H, STFT size N = `fft_size`, a multiple of 2 H):
- mel frame t's spectrum is the windowed segment centred on sample t * H (torch.stft center=True, as the mel);
- the wave is tts.vocoder.render.inverse_stft of the frames (the one STFT pair, torch or numpy): the weighted
  overlap-add of frames [0, T) divided by the sum of squared windows of the frames PRESENT at each sample
  (torch.istft's rule), so the utterance edges need no padding frames;
- everything is in absolute sample and frame indices: `render(spectra of frames [f, f + n), s0, s1)` gives
  the same samples whole or in chunks, which is what `stream()` relies on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tts.audio import MelConfig
from tts.vocoder.base import Vocoder, unit_log_mel
from tts.vocoder.dsp import TORCH
from tts.vocoder.render import StreamStep, inverse_stft
from tts.vocoder.stream import FrameStream

LOG_MAG_MAX = math.log(100.0)  # Vocos clips the magnitude at 1e2: an early huge output cannot blow up the wave


class ConvNeXtBlock(nn.Module):
    """x + scale * pw2(gelu(pw1(LN(dwconv_k(x))))): [B, C, T] -> [B, C, T], receptive half-width (k - 1) / 2."""

    def __init__(self, channels: int, hidden: int, kernel_size: int, layer_scale: float) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(channels, channels, kernel_size, padding=(kernel_size - 1) // 2, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.pw1 = nn.Linear(channels, hidden)
        self.pw2 = nn.Linear(hidden, channels)
        # layer scale (ConvNeXt): each residual branch starts small, so a deep stack trains from the identity
        self.scale = nn.Parameter(torch.full((channels,), float(layer_scale)))
        self.reach = (kernel_size - 1) // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x).transpose(1, 2))  # [B, T, C]
        y = self.pw2(nn.functional.gelu(self.pw1(y))) * self.scale
        return x + y.transpose(1, 2)


PHASE_HEADS = ("angle", "parallel")


@dataclass
class FrameOutputs:
    """The network's per-frame prediction, [B, N/2 + 1, T] each: log-magnitude (unclipped) and phase in radians
    (any real number for the `angle` head, (-pi, pi] for the `parallel` one). Training reads both (the phase
    losses); inference their polar form."""

    log_magnitude: torch.Tensor
    phase: torch.Tensor


@dataclass
class IstftTrainOutput:
    wave: torch.Tensor  # [B, T * hop], unclamped
    frames: FrameOutputs  # the T frames the wave was rendered from


@dataclass
class FrameSpectra:
    """Complex spectra [B, N/2 + 1, n] of frames [first_frame, first_frame + n)."""

    spectra: torch.Tensor
    first_frame: int = 0

    def crop(self, start: int, stop: int) -> "FrameSpectra":
        a, b = start - self.first_frame, stop - self.first_frame
        return FrameSpectra(self.spectra[..., a:b], start)


class IstftVocoder(Vocoder):
    """log-mel [B, M, T] -> wave [B, T * hop]: ConvNeXt over frames, log-magnitude and phase heads, inverse STFT."""

    def __init__(
        self,
        mel_config: MelConfig,
        channels: int = 192,
        hidden_channels: int = 576,
        n_blocks: int = 8,
        kernel_size: int = 7,
        fft_size: int = 1024,
        phase_head: str = "angle",
    ) -> None:
        if not isinstance(mel_config, MelConfig):
            raise TypeError(f"mel_config must be a tts.audio.MelConfig, got {type(mel_config).__name__}")
        super().__init__(mel_config)
        hop = mel_config.hop_length
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (centred convolutions), got {kernel_size}")
        if fft_size % (2 * hop):
            raise ValueError(f"fft_size {fft_size} must be a multiple of 2 x the mel hop {hop} (whole hops each side)")
        if phase_head not in PHASE_HEADS:
            raise ValueError(f"phase_head must be one of {', '.join(PHASE_HEADS)}, got {phase_head!r}")
        self.phase_head = phase_head
        self.fft_size = int(fft_size)
        self.n_bins = self.fft_size // 2 + 1
        c = int(channels)
        self.conv_in = nn.Conv1d(mel_config.n_mels, c, kernel_size, padding=(kernel_size - 1) // 2)
        self.norm_in = nn.LayerNorm(c)
        self.blocks = nn.ModuleList(ConvNeXtBlock(c, int(hidden_channels), kernel_size, 1.0 / n_blocks)
                                    for _ in range(int(n_blocks)))
        self.norm_out = nn.LayerNorm(c)
        # Per bin: log-magnitude, then the phase as one angle (Vocos) or as the two parallel outputs (R, I) whose
        # angle atan2(I, R) is the phase (APNet's parallel estimation: the output lies in (-pi, pi] by
        # construction, so the anti-wrapping phase losses of the training recipe compare principal values).
        self.head = nn.Linear(c, (2 if phase_head == "angle" else 3) * self.n_bins)
        # Mel frames each side that influence one frame's spectrum; frames each side of a sample's own frame
        # whose windows reach it (the overlap-add's context).
        self.receptive_frames = (kernel_size - 1) // 2 + sum(b.reach for b in self.blocks)
        self.context_frames = self.fft_size // (2 * hop)
        self.register_buffer("window", torch.hann_window(self.fft_size), persistent=False)

    @property
    def lookahead_frames(self) -> int:
        """Mel frames a stream must have received beyond the audio it returns."""
        return self.receptive_frames + self.context_frames

    # --- the network ------------------------------------------------------------------------------
    def frame_outputs(self, mel: torch.Tensor) -> FrameOutputs:
        """mel [B, M, T] -> log-magnitude and phase [B, N/2 + 1, T] (edges zero-padded inside the network)."""
        x = self.conv_in(unit_log_mel(mel, self.mel_config))
        x = self.norm_in(x.transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        out = self.head(self.norm_out(x.transpose(1, 2))).transpose(1, 2)  # [B, (2 or 3) (N/2 + 1), T]
        log_mag, rest = out[:, : self.n_bins], out[:, self.n_bins :]
        if self.phase_head == "angle":
            return FrameOutputs(log_mag, rest)  # read as an angle: any real output is a valid phase
        real, imag = rest[:, : self.n_bins], rest[:, self.n_bins :]
        return FrameOutputs(log_mag, torch.atan2(imag, real))

    def frame_spectra(self, mel: torch.Tensor, first_frame: int = 0) -> FrameSpectra:
        """mel [B, M, T] -> complex spectra [B, N/2 + 1, T] (edges zero-padded inside the network)."""
        return self.spectra_of(self.frame_outputs(mel), first_frame)

    @staticmethod
    def spectra_of(frames: FrameOutputs, first_frame: int = 0) -> FrameSpectra:
        mag = frames.log_magnitude.clamp(max=LOG_MAG_MAX).exp()
        return FrameSpectra(torch.polar(mag, frames.phase), first_frame)

    # --- the inverse STFT, in absolute indices -------------------------------------------------------
    def render(self, frames: FrameSpectra, s0: int, s1: int, n_frames_total: int | None) -> torch.Tensor:
        """Samples [s0, s1) of the overlap-add of the frames held (absolute indices) -> [B, s1 - s0]
        (tts.vocoder.render.inverse_stft: every frame whose window reaches [s0, s1) and lies in
        [0, n_frames_total) must be held; n_frames_total None: the utterance's end is not known yet)."""
        return inverse_stft(frames.spectra, frames.first_frame, s0, s1, n_frames_total,
                            self.mel_config.hop_length, self.window, TORCH)

    # --- training and inference ---------------------------------------------------------------------
    def train_outputs(self, mel: torch.Tensor) -> IstftTrainOutput:
        """mel [B, M, T] of a segment, as if it were a whole utterance -> its wave [B, T * hop] (unclamped) and
        the frames it was rendered from."""
        t = mel.shape[-1]
        frames = self.frame_outputs(mel)
        return IstftTrainOutput(self.render(self.spectra_of(frames), 0, t * self.mel_config.hop_length, t), frames)

    def train_forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel [B, M, T] of a segment, as if it were a whole utterance -> wave [B, T * hop] (unclamped)."""
        return self.train_outputs(mel).wave

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        return self.train_forward(mel).clamp(-1, 1)

    def stream(self) -> "IstftStream":
        return IstftStream(self)


class IstftStream(FrameStream):
    """Incremental synthesis (tts.vocoder.stream.FrameStream): the network re-run over the held frames, a
    sample emitted once every frame whose window reaches it is known."""

    def __init__(self, vocoder: IstftVocoder) -> None:
        super().__init__(vocoder, vocoder.context_frames)

    def render_step(self, step: StreamStep, final: bool) -> torch.Tensor:
        v, w, hop = self.vocoder, self.frames, self.vocoder.mel_config.hop_length
        assert self.mel is not None
        spectra = v.frame_spectra(self.mel, first_frame=w.mel_start).crop(step.need_from, step.valid_end)
        return v.render(spectra, w.done * hop, step.target * hop, w.received if final else None)

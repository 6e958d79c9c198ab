"""Source-filter neural vocoder: a small frame-rate network drives a differentiable DSP synthesiser.

Design (DESIGN.md section 1; anchors: the neural homomorphic vocoder, Liu et al. 2020; Agrawal et al.
2024's ultra-lightweight DDSP vocoder; DDSP, Engel et al. 2020).  Per mel frame, a dilated 1-D conv
network reads the log-mel and predicts
  - F0 as a class over log-frequency bins (CREPE-style; trained with cross-entropy against the corpus's
    own pyworld F0), decoded by a local weighted mean around the most likely bin;
  - voicing (a logit; trained with binary cross-entropy), which gates the harmonic source;
  - two causal cepstra: the minimum-phase filters of the harmonic (pulse-train) source and of the noise
    source (HTS, which made our corpus, synthesises the same way: pulse/noise through an MLSA filter).
The waveform is made by `tts.vocoder.dsp.render`: band-limited pulse train with float64 cumulative
phase + counter-based noise, filtered frame by frame in the STFT domain, overlap-added.  Training
(tts.training.source_filter_module) feeds the ground-truth F0 to the oscillator and fits the filters
with multi-resolution STFT + mel losses; no GAN is needed for the filters to be learned.

Magnitude correction (optional, `correction_channels` > 0; issue 31). Measured on 40 slt test utterances
(DistillMOS, docs/results/vocoder_headroom): the rendered wave 3.52, its phase with the recording's STFT
magnitude 3.73, its magnitude with the recording's phase 3.53, the recording 3.78: what the filters cannot
draw is in the magnitude, and the rendered phase is good. So a small ConvNeXt
(tts.vocoder.istft.ConvNeXtBlock) reads each frame's mel and the rendered wave's log-magnitude (STFT of
`correction_fft`, the mel's hop, frames centred on the mel frames) and predicts a per-bin log-gain; the wave
is the inverse STFT of the rendered spectrum times the gain (the rendered phase kept). Its head starts at
zero: an exact identity, so training starts at the plain vocoder's quality. It streams (`CorrectedStream`: a
second stage over the rendered wave's frames) and exports (its gain network as a graph; the STFT stage around
it is tts.vocoder.correction, shared by both engines).

Streaming.  `stream()` returns a `SourceFilterStream` that takes mel chunks and returns audio as soon
as it is determined: it lags the input by `lookahead_frames` (the network's receptive half-width plus
the DSP's context), carries the oscillator phase, and equals whole-utterance synthesis to float
rounding (tests/test_source_filter.py states the tolerance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from tts.audio import MelConfig
from tts.vocoder.base import Vocoder, unit_log_mel, unit_log_scale
from tts.vocoder.dsp import TORCH, F0Bins, RenderInput, Synthesis, render
from tts.vocoder.correction import CorrectionStage, correct_whole
from tts.vocoder.render import StreamStep
from tts.vocoder.stream import FrameStream


@dataclass
class FrameParams:
    """Network outputs per mel frame, for frames [first_frame, first_frame + T)."""

    f0_logits: torch.Tensor  # [B, n_bins, T]
    voicing_logits: torch.Tensor  # [B, T]
    harmonic_cepstrum: torch.Tensor  # [B, T, Lh]
    noise_cepstrum: torch.Tensor  # [B, T, Ln]
    first_frame: int = 0

    def crop(self, start: int, stop: int) -> "FrameParams":
        """Absolute frames [start, stop)."""
        a, b = start - self.first_frame, stop - self.first_frame
        return FrameParams(self.f0_logits[..., a:b], self.voicing_logits[:, a:b],
                           self.harmonic_cepstrum[:, a:b], self.noise_cepstrum[:, a:b], start)


@dataclass
class SourceFilterOutput:
    """What training needs: the wave made with the given F0, and the F0/voicing predictions."""

    wave: torch.Tensor  # [B, T * hop]
    f0_logits: torch.Tensor  # [B, n_bins, T]
    voicing_logits: torch.Tensor  # [B, T]


class ResidualBlock(nn.Module):
    """x + conv1x1(act(conv_k,d(act(x)))): [B, C, T] -> [B, C, T], receptive half-width d (k - 1) / 2."""

    def __init__(self, channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, dilation=dilation, padding=dilation * (kernel_size - 1) // 2)
        self.mix = nn.Conv1d(channels, channels, 1)
        self.act = nn.LeakyReLU(0.1)
        self.reach = dilation * (kernel_size - 1) // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mix(self.act(self.conv(self.act(x))))


class SourceFilterVocoder(Vocoder):
    """log-mel [B, M, T] -> wave [B, T * hop] by a learned source-filter model (module docstring)."""

    def __init__(
        self,
        mel_config: MelConfig,
        hidden_channels: int = 192,
        kernel_size: int = 3,
        dilations: Sequence[int] = (1, 2, 4, 1, 2, 4),
        harmonic_cepstrum: int = 64,
        noise_cepstrum: int = 24,
        f0_min: float = 60.0,
        f0_max: float = 500.0,
        cents_per_bin: float = 20.0,
        frame_hop: int = 128,
        window: int = 512,
        cutoff_hz: float = 10000.0,
        voicing_threshold: float = 0.5,
        seed: int = 0,
        correction_channels: int = 0,
        correction_blocks: int = 4,
        correction_fft: int = 1024,
        correction_kernel: int = 7,
    ) -> None:
        if not isinstance(mel_config, MelConfig):
            raise TypeError(f"mel_config must be a tts.audio.MelConfig, got {type(mel_config).__name__}")
        super().__init__(mel_config)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (centred convolutions), got {kernel_size}")
        dilations = [int(d) for d in dilations]
        self.bins = F0Bins(float(f0_min), float(f0_max), float(cents_per_bin))
        self.synthesis = Synthesis(mel_config.sample_rate, mel_config.hop_length, int(frame_hop), int(window),
                                   float(cutoff_hz), int(seed))
        if max(harmonic_cepstrum, noise_cepstrum) > window // 2:
            raise ValueError(f"cepstra of {harmonic_cepstrum}/{noise_cepstrum} coefficients need window >= "
                             f"{2 * max(harmonic_cepstrum, noise_cepstrum)}")
        self.n_harmonic, self.n_noise = int(harmonic_cepstrum), int(noise_cepstrum)
        self.voicing_threshold = float(voicing_threshold)
        c = int(hidden_channels)
        self.conv_in = nn.Conv1d(mel_config.n_mels, c, kernel_size, padding=(kernel_size - 1) // 2)
        self.blocks = nn.ModuleList(ResidualBlock(c, kernel_size, d) for d in dilations)
        self.head = nn.Conv1d(c, self.bins.n_bins + 1 + self.n_harmonic + self.n_noise, 1)
        # Frames of mel on each side that influence one output frame of the network.
        self.receptive_frames = (kernel_size - 1) // 2 + sum(b.reach for b in self.blocks)
        # The synthesis window, made once (render runs per chunk when streaming); not saved in checkpoints.
        self.register_buffer("synthesis_window", torch.hann_window(int(window)), persistent=False)
        self._init_head()
        self.correction = (MagnitudeCorrection(mel_config, int(correction_channels), int(correction_blocks),
                                               int(correction_fft), int(correction_kernel))
                           if correction_channels else None)

    def _init_head(self) -> None:
        """Start quiet and flat: cepstra 0 except the log gains (c[0]), a -40 dB-ish harmonic filter and
        a quieter noise filter, so early training does not fight huge random spectra."""
        nb = self.bins.n_bins + 1
        with torch.no_grad():
            self.head.weight[nb:].mul_(0.01)
            self.head.bias[nb:].zero_()
            self.head.bias[nb] = -4.0
            self.head.bias[nb + self.n_harmonic] = -6.0

    @property
    def lookahead_frames(self) -> int:
        """Mel frames a stream must have received beyond the audio it returns.  With the correction (context
        c, reach R): its frame j reads rendered samples before (j + c) * hop, its gain frames to j + R, and a
        sample of frame f needs the gains of frames to f + c: (c - 1) + R + c frames beyond the plain stream."""
        plain = self.receptive_frames + self.synthesis.context_frames
        c = self.correction
        return plain if c is None else plain + c.receptive_frames + 2 * c.context_frames - 1

    # --- the network ------------------------------------------------------------------------------
    def frame_params(self, mel: torch.Tensor, first_frame: int = 0) -> FrameParams:
        """mel [B, M, T] -> FrameParams for the same frames (edges zero-padded inside the network)."""
        x = self.conv_in(unit_log_mel(mel, self.mel_config))
        for block in self.blocks:
            x = block(x)
        out = self.head(nn.functional.leaky_relu(x, 0.1))  # [B, n_bins + 1 + Lh + Ln, T]
        nb = self.bins.n_bins
        harmonic = out[:, nb + 1 : nb + 1 + self.n_harmonic].transpose(1, 2)
        noise = out[:, nb + 1 + self.n_harmonic :].transpose(1, 2)
        return FrameParams(out[:, :nb], out[:, nb], harmonic, noise, first_frame)

    def decode(self, params: FrameParams) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (f0 [B, T] Hz, voiced [B, T] in {0, 1}) at inference."""
        f0 = self.bins.decode(params.f0_logits)
        voiced = (torch.sigmoid(params.voicing_logits.float()) > self.voicing_threshold).float()
        return f0, voiced

    def _render(self, params: FrameParams, f0: torch.Tensor, voiced: torch.Tensor, s0: int, s1: int,
                phase0: torch.Tensor, n_frames_total: int | None, phase_at: int | None = None):
        inp = RenderInput(f0, voiced, params.harmonic_cepstrum, params.noise_cepstrum, params.first_frame)
        return render(inp, s0, s1, phase0, n_frames_total, self.synthesis, self.synthesis_window, phase_at)

    def _start_phase(self, batch: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(batch, dtype=torch.float64, device=device)

    def _render_whole(self, params: FrameParams, f0: torch.Tensor, voiced: torch.Tensor) -> torch.Tensor:
        """All T frames of params as one utterance: -> wave [B, T * hop] (unclamped)."""
        t = f0.shape[-1]
        wave, _ = self._render(params, f0, voiced, 0, t * self.mel_config.hop_length,
                               self._start_phase(f0.shape[0], f0.device), t)
        return wave

    # --- training ---------------------------------------------------------------------------------
    def train_forward(self, mel: torch.Tensor, f0: torch.Tensor, voiced: torch.Tensor) -> SourceFilterOutput:
        """Teacher-forced: mel [B, M, T], f0 [B, T] Hz (> 0, interpolated through unvoiced frames),
        voiced [B, T] 0/1 -> the wave of the T frames as if they were a whole utterance (corrected, if on)."""
        params = self.frame_params(mel)
        wave = self._render_whole(params, f0, voiced)
        if self.correction is not None:
            wave = self.correction(wave, mel)
        return SourceFilterOutput(wave, params.f0_logits, params.voicing_logits)

    # --- inference ----------------------------------------------------------------------------------
    def synthesize(self, mel: torch.Tensor) -> torch.Tensor:
        """One utterance (or a batch of equal length): mel [B, M, T] -> wave [B, T * hop]."""
        params = self.frame_params(mel)
        wave = self._render_whole(params, *self.decode(params))
        if self.correction is not None:
            wave = self.correction(wave, mel)
        return wave.clamp(-1, 1)

    def _generate(self, mel: torch.Tensor) -> torch.Tensor:
        return self.synthesize(mel)

    def stream(self) -> "SourceFilterStream | CorrectedStream":
        return SourceFilterStream(self) if self.correction is None else CorrectedStream(self)


class MagnitudeCorrection(nn.Module):
    """wave [B, T * hop] (rendered), mel [B, M, T] -> wave [B, T * hop]: the STFT's magnitude times a learned
    per-bin gain, its phase kept (module docstring).  Frames centred on samples j * hop, j in [0, T]
    (torch.stft center=True, zero padding: samples outside the utterance are silence)."""

    def __init__(self, mel_config: MelConfig, channels: int, n_blocks: int, fft_size: int, kernel_size: int) -> None:
        super().__init__()
        from tts.vocoder.istft import ConvNeXtBlock

        hop = mel_config.hop_length
        if fft_size % (2 * hop):
            raise ValueError(f"correction_fft {fft_size} must be a multiple of 2 x the mel hop {hop}")
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f"correction_kernel must be odd (a centred convolution), got {kernel_size}")
        self.hop, self.fft_size, n_bins = hop, fft_size, fft_size // 2 + 1
        # the input convolution reads mel + magnitude [B, M + N/2 + 1, F]: most of the correction's cost (its
        # weights are (M + N/2 + 1) x channels x kernel_size), so its kernel is the knob for speed
        self.conv_in = nn.Conv1d(mel_config.n_mels + n_bins, channels, kernel_size, padding=(kernel_size - 1) // 2)
        self.blocks = nn.ModuleList(ConvNeXtBlock(channels, 3 * channels, 7, 1.0 / n_blocks) for _ in range(n_blocks))
        self.norm = nn.LayerNorm(channels)
        self.head = nn.Linear(channels, n_bins)
        nn.init.zeros_(self.head.weight)  # gain 1 everywhere: the identity at the start of training
        nn.init.zeros_(self.head.bias)
        self.register_buffer("window", torch.hann_window(fft_size), persistent=False)
        self.mel_config = mel_config

    @property
    def receptive_frames(self) -> int:
        """Frames each side of a frame whose spectrum and mel its gain reads (conv_in and the blocks)."""
        return (self.conv_in.kernel_size[0] - 1) // 2 + sum(b.reach for b in self.blocks)

    @property
    def context_frames(self) -> int:
        """Frames each side of a sample's own frame whose windows reach it."""
        return self.fft_size // (2 * self.hop)

    def gains(self, mel: torch.Tensor, magnitude: torch.Tensor) -> torch.Tensor:
        """mel [B, M, F] and the rendered wave's STFT magnitude [B, N/2 + 1, F] of the same frames -> log-gains
        [B, N/2 + 1, F] (edges zero-padded inside the network)."""
        x = torch.cat([unit_log_mel(mel, self.mel_config),
                       magnitude.float().clamp_min(1e-5).log() / unit_log_scale(self.mel_config)], dim=1)
        x = self.conv_in(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x.transpose(1, 2))).transpose(1, 2)

    def forward(self, wave: torch.Tensor, mel: torch.Tensor) -> torch.Tensor:
        """Rendered wave [B, T * hop] (unclamped), mel [B, M, T] -> corrected wave [B, T * hop]
        (tts.vocoder.correction.correct_whole: the DSP around `gains`, shared with the ONNX engine)."""
        return correct_whole(wave.float(), mel.float(), self.gains, self.hop, self.window, TORCH)

    def stage(self) -> CorrectionStage:
        """The correction streamed behind a stream of the rendered wave."""
        return CorrectionStage(self.gains, self.receptive_frames, self.hop, self.window, TORCH)


class SourceFilterStream(FrameStream):
    """Incremental synthesis (tts.vocoder.stream.FrameStream) that also carries the oscillator phase; the
    network is re-run over the held window for each chunk (its outputs are exact away from the cut edges)."""

    def __init__(self, vocoder: SourceFilterVocoder, clamp: bool = True) -> None:
        super().__init__(vocoder, vocoder.synthesis.context_frames, clamp)
        self.phase: torch.Tensor | None = None  # [B] float64 at sample done * hop - margin

    def render_step(self, step: StreamStep, final: bool) -> torch.Tensor:
        v, w, hop = self.vocoder, self.frames, self.vocoder.mel_config.hop_length
        assert self.mel is not None
        if self.phase is None:
            self.phase = v._start_phase(self.mel.shape[0], self.mel.device)
        params = v.frame_params(self.mel, first_frame=w.mel_start).crop(step.need_from, step.valid_end)
        f0, voiced = v.decode(params)
        s0, s1 = w.done * hop, step.target * hop
        wave, phase = v._render(params, f0, voiced, s0, s1, self.phase, w.received if final else None,
                                phase_at=None if final else s1 - v.synthesis.margin)
        if phase is not None:
            self.phase = phase
        return wave


class CorrectedStream:
    """The magnitude-corrected vocoder streamed: the plain source-filter stream renders the wave (exact,
    unclamped), and the correction's stage (tts.vocoder.correction.CorrectionStage, the ONNX engine's too) runs
    behind it over the frames that wave covers.  Equals `synthesize` to float rounding (tests/test_sf_correction.py)."""

    def __init__(self, vocoder: SourceFilterVocoder) -> None:
        assert vocoder.correction is not None
        self.vocoder = vocoder
        self.source = SourceFilterStream(vocoder, clamp=False)
        self.stage = vocoder.correction.stage()
        self.finished = False

    @property
    def mel(self) -> torch.Tensor | None:
        """The mel frames the second stage holds (it holds the most)."""
        return self.stage.mel

    @torch.inference_mode()
    def push(self, mel: torch.Tensor) -> torch.Tensor:
        if self.finished:
            raise RuntimeError("stream already finished")
        rendered = self.source.push(mel)  # checks the shape
        return self.stage.push(mel.float(), rendered).clamp(-1, 1)

    @torch.inference_mode()
    def finish(self) -> torch.Tensor:
        if self.finished:
            raise RuntimeError("stream already finished")
        self.finished = True
        rendered = self.source.finish()
        if self.stage.mel is None:
            return torch.zeros(1, 0)
        return self.stage.finish(rendered).clamp(-1, 1)

"""Differentiable DSP for the source-filter vocoder: excitation, minimum-phase filters, overlap-add.

Everything here works in ABSOLUTE sample and frame indices, so that rendering an utterance in chunks
(streaming) computes exactly what rendering it whole computes (see `render`).

Conventions (mel hop H, e.g. 256; synthesis frame hop h = H / r, e.g. 128; synthesis window W = 4 h):
- mel frame t sits at sample t * H (torch.stft center=True) and the vocoder owns samples
  [t * H, (t + 1) * H) for it;
- per-sample F0 and voicing interpolate linearly between frame t (at t * H) and frame t + 1; frames
  outside [0, T) hold the edge value (the utterance edges), samples outside [0, T * H) carry no
  excitation;
- the harmonic source is a band-limited pulse train with every harmonic at amplitude 1 up to
  `cutoff_hz`, so that a filter's magnitude IS the harmonic amplitude at that frequency;
- the noise source is counter-based (a hash of seed and absolute sample index): the same sample gets the
  same noise whatever the chunking or the batch;
- synthesis frame j is centred at sample j * h (window [j h - W/2, j h + W/2)), its filter interpolates
  the filters of mel frames floor(j / r) and floor(j / r) + 1.  The overlap-add divides by the constant
  sum of squared windows, exact because every output sample is covered by all W / h frames around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tts import noise as noise_hash
from tts.noise import NOISE_PERIOD

TWO_PI = 2.0 * math.pi


# --- F0 as classes over log-frequency bins (CREPE-style) ----------------------------------------
@dataclass(frozen=True)
class F0Bins:
    """Bins of equal width in cents between f0_min and f0_max (centres; bin 0 at f0_min)."""

    f0_min: float
    f0_max: float
    cents_per_bin: float

    def __post_init__(self) -> None:
        if not 0 < self.f0_min < self.f0_max or self.cents_per_bin <= 0:
            raise ValueError(f"bad F0 bins: {self}")

    @property
    def n_bins(self) -> int:
        return int(math.ceil(1200.0 * math.log2(self.f0_max / self.f0_min) / self.cents_per_bin)) + 1

    def cents(self, f0_hz: torch.Tensor) -> torch.Tensor:
        """Hz -> cents above f0_min (any shape; f0 > 0)."""
        return 1200.0 * torch.log2(f0_hz / self.f0_min)

    def soft_targets(self, f0_hz: torch.Tensor, sigma_cents: float) -> torch.Tensor:
        """f0 [..., T] Hz (> 0) -> Gaussian-blurred class targets [..., n_bins, T] summing to 1."""
        centres = torch.arange(self.n_bins, device=f0_hz.device, dtype=torch.float32) * self.cents_per_bin
        c = self.cents(f0_hz.float().clamp(self.f0_min, self.f0_max))  # [..., T]
        logits = -0.5 * ((c.unsqueeze(-2) - centres[:, None]) / sigma_cents) ** 2  # [..., n_bins, T]
        return torch.softmax(logits, dim=-2)

    def decode(self, logits: torch.Tensor, neighbourhood: int = 4) -> torch.Tensor:
        """logits [B, n_bins, T] -> f0 [B, T] Hz: probability-weighted mean of the bins within
        `neighbourhood` of the most likely one (CREPE's local average: sub-bin resolution, and never
        the half-way average of two octave candidates that a global mean would give)."""
        probs = torch.softmax(logits.float(), dim=1)
        peak = probs.argmax(dim=1, keepdim=True)  # [B, 1, T]
        idx = torch.arange(self.n_bins, device=logits.device)[None, :, None]
        near = ((idx - peak).abs() <= neighbourhood).float()
        w = probs * near
        cents = (w * idx.float()).sum(1) / w.sum(1).clamp_min(1e-12) * self.cents_per_bin  # [B, T]
        return self.f0_min * torch.pow(2.0, cents / 1200.0)


def fill_unvoiced(f0: torch.Tensor, default_hz: float) -> torch.Tensor:
    """f0 [T] Hz with 0 = unvoiced -> [T] > 0: linear interpolation between voiced neighbours, edges
    held, `default_hz` if nothing is voiced.  The oscillator then runs on through unvoiced stretches
    (its phase stays continuous; voicing gates it), as the training target's frames expect."""
    f0 = f0.float()
    voiced = torch.nonzero(f0 > 0).flatten()
    if voiced.numel() == 0:
        return torch.full_like(f0, default_hz)
    if voiced.numel() == 1:
        return torch.full_like(f0, float(f0[voiced[0]]))
    t = torch.arange(f0.shape[0], dtype=torch.float32)
    idx = torch.searchsorted(voiced, torch.arange(f0.shape[0])).clamp(1, voiced.numel() - 1)
    left, right = voiced[idx - 1], voiced[idx]
    w = ((t - left.float()) / (right - left).float()).clamp(0, 1)
    filled = f0[left] * (1 - w) + f0[right] * w
    return torch.where(f0 > 0, f0, filled)


# --- frame -> sample interpolation ----------------------------------------------------------------
def frame_to_samples(x: torch.Tensor, first_frame: int, n_frames_total: int | None, s0: int, s1: int,
                     hop: int) -> torch.Tensor:
    """Linear interpolation of frame values to samples [s0, s1), frame t sitting at sample t * hop.

    x [B, F, ...]: values of frames [first_frame, first_frame + F).  n_frames_total: the utterance's
    frame count T when known (frames >= T hold frame T - 1), None in the middle of a stream (then every
    frame needed must be in x).  Frames < 0 hold frame 0 (only ever needed at the utterance start, which
    x then contains).  Returns [B, s1 - s0, ...] in x's dtype.  "Samples" may be any finer grid: the
    synthesis frames use it with hop = the mel hop / the synthesis hop.
    """
    t0 = s0 // hop  # frame at or before the first sample
    t1 = (s1 - 1) // hop + 1  # one past the frame after the last sample's
    last = first_frame + x.shape[1] - 1 if n_frames_total is None else n_frames_total - 1
    frames = torch.arange(t0, t1 + 1).clamp(0, last) - first_frame  # [t1 - t0 + 1]
    if int(frames.min()) < 0 or int(frames.max()) >= x.shape[1]:
        raise ValueError(f"frames {t0}..{t1} needed (clamped to 0..{last}), have {first_frame}.."
                         f"{first_frame + x.shape[1] - 1}")
    v = x[:, frames]  # [B, n + 1, ...]
    rest = x.shape[2:]
    ramp = (torch.arange(hop, device=x.device, dtype=x.dtype) / hop).view(hop, *([1] * len(rest)))  # [hop, 1...]
    # sample t * hop + k = v[t] + k / hop * (v[t + 1] - v[t]), built per frame then flattened
    per_frame = v[:, :-1, None] + (v[:, 1:] - v[:, :-1])[:, :, None] * ramp  # [B, n, hop, ...]
    flat = per_frame.reshape(x.shape[0], -1, *rest)
    return flat[:, s0 - t0 * hop : s1 - t0 * hop]


# --- sources ----------------------------------------------------------------------------------------
_noise_tables: dict[int, torch.Tensor] = {}


def _noise_table(seed: int) -> torch.Tensor:
    """[NOISE_PERIOD] float32: one period of tts.noise.s hashed noise, made once per seed."""
    table = _noise_tables.get(seed)
    if table is None:
        table = _noise_tables[seed] = torch.from_numpy(noise_hash.hash_noise(seed, 0, NOISE_PERIOD))
    return table


def hash_noise(seed: int, s0: int, s1: int, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """White noise for absolute samples [s0, s1): [batch, s1 - s0] float32, sample n always the same
    value (whatever the chunking, batch or run).  Every item of a batch gets the same sequence: an
    item's audio must not depend on its position in the batch."""
    idx = torch.remainder(torch.arange(s0, s1), NOISE_PERIOD)
    return _noise_table(seed)[idx].to(device).expand(batch, -1)


def pulse_train(phase: torch.Tensor, f0: torch.Tensor, sample_rate: int, cutoff_hz: float) -> torch.Tensor:
    """Band-limited pulse train sum_{k=1..K} cos(k * phase), K = floor(cutoff / f0), in closed form
    (Dirichlet kernel: sin((K + 1/2) phase) / (2 sin(phase / 2)) - 1/2), O(1) per sample whatever K.

    phase [B, N] float64 radians (wrapped or not), f0 [B, N] Hz -> [B, N] float32.  Every harmonic has amplitude 1, so the
    spectrum is flat up to the cutoff (harmonics above it, and above Nyquist, are absent).
    """
    if not 0 < cutoff_hz < sample_rate / 2:
        raise ValueError(f"cutoff {cutoff_hz} Hz must lie in (0, Nyquist {sample_rate / 2})")
    k = torch.floor(cutoff_hz / f0.clamp_min(1.0)).clamp_min(1).float()
    # Wrap to [-pi, pi) in float64, then float32 is enough: the pulse peak (phase ~ 0) is where float32
    # is most precise, and |(K + 1/2) phase| < ~200 rad keeps the numerator's error ~1e-5.
    phase = (torch.remainder(phase + math.pi, TWO_PI) - math.pi).float()
    half = torch.sin(phase / 2)
    small = half.abs() < 1e-6  # phase ~ 0: the limit K
    ratio = torch.sin((k + 0.5) * phase) / (2 * torch.where(small, torch.ones_like(half), half))
    return torch.where(small, k, ratio - 0.5)


# --- filters ------------------------------------------------------------------------------------------
def _log_response(cepstrum: torch.Tensor, n_fft: int) -> torch.Tensor:
    """Cepstrum [..., L] -> complex log frequency response FFT(c) [..., n_fft // 2 + 1]."""
    if cepstrum.shape[-1] > n_fft // 2:
        raise ValueError(f"cepstrum of {cepstrum.shape[-1]} coefficients needs n_fft >= {2 * cepstrum.shape[-1]}")
    return torch.fft.rfft(cepstrum.float(), n=n_fft)


def magnitude_response(cepstrum: torch.Tensor, n_fft: int) -> torch.Tensor:
    """Cepstrum [..., L] -> real, zero-phase magnitude response [..., n_fft // 2 + 1] with the same
    log-magnitude as `minimum_phase_response` (enough for noise, whose phase is random anyway)."""
    return torch.exp(_log_response(cepstrum, n_fft).real)


def minimum_phase_response(cepstrum: torch.Tensor, n_fft: int) -> torch.Tensor:
    """Causal (minimum-phase) cepstrum [..., L] -> complex frequency response [..., n_fft // 2 + 1].

    c[0] is the log gain; the response is exp(FFT(c)): log-magnitude = Re, phase = Im.  A causal
    cepstrum gives a minimum-phase filter (as HTS's MLSA filter is); L < n_fft / 2 bounds how fine a
    spectral detail it can draw (L samples of quefrency ~ smoothing over sample_rate / L Hz).
    """
    log_response = _log_response(cepstrum, n_fft)
    # polar(exp(re), im): the same as exp() of the complex log, several times cheaper on CPU
    return torch.polar(torch.exp(log_response.real), log_response.imag)


@dataclass
class RenderInput:
    """What `render` needs for one stretch of an utterance (batch B, frames of the mel hop).

    Frame-rate tensors cover frames [first_frame, first_frame + F):
      f0 [B, F] Hz (> 0 everywhere: interpolated through unvoiced frames), voiced [B, F] in 0..1,
      harmonic_cepstrum [B, F, Lh], noise_cepstrum [B, F, Ln].
    """

    f0: torch.Tensor
    voiced: torch.Tensor
    harmonic_cepstrum: torch.Tensor
    noise_cepstrum: torch.Tensor
    first_frame: int


@dataclass(frozen=True)
class Synthesis:
    """The fixed DSP settings of a source-filter vocoder."""

    sample_rate: int
    hop_length: int  # mel hop H
    frame_hop: int  # synthesis hop h (H / h integer)
    window: int  # synthesis window W (a multiple of h)
    cutoff_hz: float
    seed: int = 0

    def __post_init__(self) -> None:
        if self.hop_length % self.frame_hop or self.window % self.frame_hop:
            raise ValueError(f"hop_length and window must be multiples of frame_hop: {self}")
        # Periodic Hann squared overlap-adds to a constant only with >= 4 frames per window (its
        # cos(2x) term); an even count keeps frame centres on multiples of frame_hop.
        if (self.window // self.frame_hop) % 2 or self.window // self.frame_hop < 4:
            raise ValueError(f"window / frame_hop must be even and >= 4, got {self.window}/{self.frame_hop}")

    @property
    def ratio(self) -> int:
        return self.hop_length // self.frame_hop

    @property
    def margin(self) -> int:
        """Excitation samples needed beyond each side of an output stretch [s0, s1): the synthesis
        frames overlapping it are centred at s0 - W/2 + h .. s1 + W/2 - h, their windows reach W - h."""
        return self.window - self.frame_hop

    @property
    def context_frames(self) -> int:
        """Mel frames of parameters needed beyond an output stretch of whole mel frames [a, b): frames
        a - c .. b + c cover the excitation margin and the next-frame interpolation."""
        return -(-self.margin // self.hop_length) + 1


def render(inp: RenderInput, s0: int, s1: int, phase0: torch.Tensor, n_frames_total: int | None,
           syn: Synthesis, window: torch.Tensor, phase_at: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Samples [s0, s1) (multiples of h) of the utterance -> (wave [B, s1 - s0], phase at `phase_at`).

    phase0 [B] float64: the oscillator phase at sample e0 = s0 - margin, the first excitation sample
    this call makes (0 at e0 = -margin for an utterance start).  `phase_at` (e0 <= phase_at <= s1 +
    margin) asks for the phase at another sample, to continue in a later call.  The cepstra carry the
    gradient; F0 and voicing do not (the oscillator is fixed DSP).
    """
    h, w_len, hop, sr = syn.frame_hop, syn.window, syn.hop_length, syn.sample_rate
    if s0 % h or s1 % h or s1 <= s0:
        raise ValueError(f"render range [{s0}, {s1}) must be non-empty multiples of {h}")
    e0, e1 = s0 - syn.margin, s1 + syn.margin
    b = inp.f0.shape[0]
    with torch.no_grad():
        f0 = frame_to_samples(inp.f0.double(), inp.first_frame, n_frames_total, e0, e1, hop)  # [B, E]
        voiced = frame_to_samples(inp.voiced.float(), inp.first_frame, n_frames_total, e0, e1, hop)
        # phase(n) for n = e0.. : phase0 + 2 pi sum_{m < n} f0(m) / sr   (float64: no drift on long input)
        increments = TWO_PI * f0 / sr
        phase = phase0[:, None] + torch.cumsum(increments, dim=1) - increments
        phase = torch.remainder(phase, TWO_PI)
        n = torch.arange(e0, e1, device=f0.device)
        inside = (n >= 0) if n_frames_total is None else (n >= 0) & (n < n_frames_total * hop)
        harmonic = pulse_train(phase, f0, sr, syn.cutoff_hz).float() * voiced * inside
        noise = hash_noise(syn.seed, e0, e1, b, f0.device) * inside
        out_phase = None
        if phase_at is not None:
            out_phase = phase[:, phase_at - e0] if phase_at < e1 else torch.remainder(
                phase[:, -1] + increments[:, -1], TWO_PI)
    # Synthesis frames j = s0/h - W/(2h) + 1 .. s1/h + W/(2h) - 1: all that overlap [s0, s1); the
    # first one's window starts at e0.
    j0 = (e0 + w_len // 2) // h
    frames_h = torch.stack([harmonic, noise], 1).float().unfold(-1, w_len, h)  # [B, 2, J, W]
    n_j = frames_h.shape[2]
    spectra = torch.fft.rfft(frames_h * window, dim=-1)  # [B, 2, J, W/2+1]
    # Filter of synthesis frame j: cepstra interpolated at mel-frame position j / r (the same linear
    # interpolation as F0, on the grid of synthesis frames).
    def at_frames(c: torch.Tensor) -> torch.Tensor:  # [B, F, L] -> [B, J, L]
        return frame_to_samples(c, inp.first_frame, n_frames_total, j0, j0 + n_j, syn.ratio)

    resp_h = minimum_phase_response(at_frames(inp.harmonic_cepstrum), w_len)  # [B, J, W/2+1]
    resp_n = magnitude_response(at_frames(inp.noise_cepstrum), w_len)
    filtered = spectra[:, 0] * resp_h + spectra[:, 1] * resp_n  # [B, J, W/2+1]
    frames = torch.fft.irfft(filtered, n=w_len, dim=-1) * window  # [B, J, W]
    # Overlap-add: frame j covers blocks j .. j + q - 1 of h samples (q = W / h) counted from e0; the
    # result spans [e0, e1).  q shifted adds, much cheaper than nn.functional.fold on CPU.
    q = w_len // h
    blocks = frames.reshape(b, n_j, q, h)
    wave = blocks.new_zeros(b, n_j + q - 1, h)
    for k in range(q):
        wave[:, k : k + n_j] += blocks[:, :, k]
    wave = wave.reshape(b, -1)
    # Every sample of [s0, s1) is covered by all q frames around it, whose squared windows sum to the
    # constant sum(w^2) / h (periodic Hann, q >= 4): divide by it (torch.istft's envelope, interior).
    wave = wave * (h / (window**2).sum())
    start = s0 - e0
    return wave[:, start : start + (s1 - s0)], out_phase

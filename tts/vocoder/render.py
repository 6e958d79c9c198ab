"""THE source-filter vocoder's DSP render, written once for two array libraries: torch (training, with
gradients through the cepstra, and the torch engine, whole or streamed) and numpy (the ONNX engine, which
must not import torch).  The maths is one function, `render`; `ArrayOps` names the dozen operations whose
spelling differs between the libraries (`NUMPY` here, `TORCH` in tts.vocoder.dsp), nothing else.

Conventions (mel hop H, e.g. 256; synthesis frame hop h = H / r, e.g. 128; synthesis window W = 4 h):
- mel frame t sits at sample t * H (torch.stft center=True) and the vocoder owns samples
  [t * H, (t + 1) * H) for it;
- per-sample F0 and voicing interpolate linearly between frame t (at t * H) and frame t + 1; frames
  outside [0, T) hold the edge value (the utterance edges), samples outside [0, T * H) carry no
  excitation;
- the harmonic source is a band-limited pulse train with every harmonic at amplitude 1 up to
  `cutoff_hz`, so that a filter's magnitude IS the harmonic amplitude at that frequency;
- the noise source is counter-based (tts.noise: a hash of seed and absolute sample index): the same
  sample gets the same noise whatever the chunking, the batch or the library;
- synthesis frame j is centred at sample j * h (window [j h - W/2, j h + W/2)), its filter interpolates
  the filters of mel frames floor(j / r) and floor(j / r) + 1.  The overlap-add divides by the constant
  sum of squared windows, exact because every output sample is covered by all W / h frames around it.
Everything works in ABSOLUTE sample and frame indices, so rendering an utterance in chunks (streaming)
computes exactly what rendering it whole computes.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tts import noise as noise_hash

TWO_PI = 2.0 * math.pi


class ArrayOps:
    """The operations `render` needs whose spelling differs between numpy and torch (numpy's here)."""

    def no_grad(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def f32(self, x: Any) -> Any:
        return x.astype(np.float32)

    def f64(self, x: Any) -> Any:
        return x.astype(np.float64)

    def arange(self, start: int, stop: int, like: Any) -> Any:
        return np.arange(start, stop)

    def ramp(self, hop: int, like: Any) -> Any:
        """[hop] values k / hop in like's dtype (exact: hop is a power of two or a small integer ratio)."""
        return (np.arange(hop) / hop).astype(like.dtype)

    def clip(self, x: Any, low: float | None, high: float | None) -> Any:
        return np.clip(x, low, high)

    def cumsum(self, x: Any, axis: int) -> Any:
        return np.cumsum(x, axis=axis)

    def stack(self, xs: list, axis: int) -> Any:
        return np.stack(xs, axis)

    def concat(self, xs: list, axis: int) -> Any:
        return np.concatenate(xs, axis)

    def frames(self, x: Any, size: int, step: int) -> Any:
        """[..., N] -> [..., (N - size) // step + 1, size] overlapping frames (torch's unfold)."""
        return np.lib.stride_tricks.sliding_window_view(x, size, axis=-1)[..., ::step, :]

    def rfft(self, x: Any, n: int) -> Any:
        return np.fft.rfft(x, n=n, axis=-1)

    def irfft(self, x: Any, n: int) -> Any:
        return np.fft.irfft(x, n=n, axis=-1).astype(np.float32)

    def polar(self, magnitude: Any, angle: Any) -> Any:
        """magnitude * (cos + i sin) in complex64 (faster than exp(1j * angle))."""
        out = np.empty(magnitude.shape, np.complex64)
        out.real = magnitude * np.cos(angle)
        out.imag = magnitude * np.sin(angle)
        return out

    def zeros(self, shape: tuple, like: Any) -> Any:
        return np.zeros(shape, dtype=like.dtype)

    def noise(self, seed: int, s0: int, s1: int, batch: int, like: Any) -> Any:
        """[batch, s1 - s0] of tts.noise's hashed noise (every item the same sequence)."""
        return np.broadcast_to(noise_hash.hash_noise(seed, s0, s1)[None, :], (batch, s1 - s0))


NUMPY = ArrayOps()


@dataclass
class RenderInput:
    """What `render` needs for one stretch of an utterance (batch B, frames of the mel hop).

    Frame-rate arrays cover frames [first_frame, first_frame + F):
      f0 [B, F] Hz (> 0 everywhere: interpolated through unvoiced frames), voiced [B, F] in 0..1,
      harmonic_cepstrum [B, F, Lh], noise_cepstrum [B, F, Ln].
    """

    f0: Any
    voiced: Any
    harmonic_cepstrum: Any
    noise_cepstrum: Any
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

    def to_dict(self) -> dict[str, Any]:
        return {"sample_rate": self.sample_rate, "hop_length": self.hop_length, "frame_hop": self.frame_hop,
                "window": self.window, "cutoff_hz": self.cutoff_hz, "seed": self.seed}


@dataclass(frozen=True)
class StreamStep:
    """One emission of a streamed vocoder: run the network over the held mel, render frames [done, target)
    from parameters of frames [need_from, valid_end)."""

    need_from: int
    valid_end: int
    target: int


class StreamWindow:
    """The frame bookkeeping of a streamed frame-rate vocoder, written once for both engines (the torch
    FrameStream of tts.vocoder.stream and the ONNX engine's VocoderStream; each holds its own mel array and
    renders).

    The network's outputs are exact for frames at least `reach` (its receptive field, one side) from a cut edge
    of the mel it is run over; the render of frames [done, target) needs parameters `context` (Synthesis.
    context_frames) frames either side.  The stream holds mel frames [mel_start, received)."""

    def __init__(self, reach: int, context: int) -> None:
        self.reach, self.context = reach, context
        self.mel_start = self.received = self.done = 0

    def step(self, final: bool) -> StreamStep | None:
        """What to run and render now (None: no frame became final)."""
        valid_end = self.received if final else self.received - self.reach
        target = self.received if final else valid_end - self.context  # frames whose audio is determined
        if target <= self.done:
            return None
        return StreamStep(max(0, self.done - self.context), valid_end, target)

    def advance(self, step: StreamStep) -> int:
        """Frames [done, step.target) rendered -> how many mel frames to drop from the front of the held mel (only
        what the next step needs is kept: from done - context - reach on)."""
        self.done = step.target
        keep_from = max(self.mel_start, self.done - self.context - self.reach)
        drop, self.mel_start = keep_from - self.mel_start, keep_from
        return drop


def hann_window(n: int) -> np.ndarray:
    """== torch.hann_window(n) (periodic), float32."""
    return (0.5 - 0.5 * np.cos(TWO_PI * np.arange(n) / n)).astype(np.float32)


def frame_to_samples(x: Any, first_frame: int, n_frames_total: int | None, s0: int, s1: int, hop: int,
                     ops: ArrayOps = NUMPY) -> Any:
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
    frames = ops.clip(ops.arange(t0, t1 + 1, x), 0, last) - first_frame  # [t1 - t0 + 1]
    if int(frames.min()) < 0 or int(frames.max()) >= x.shape[1]:
        raise ValueError(f"frames {t0}..{t1} needed (clamped to 0..{last}), have {first_frame}.."
                         f"{first_frame + x.shape[1] - 1}")
    v = x[:, frames]  # [B, n + 1, ...]
    rest = tuple(x.shape[2:])
    ramp = ops.ramp(hop, x).reshape(hop, *([1] * len(rest)))  # [hop, 1...]
    # sample t * hop + k = v[t] + k / hop * (v[t + 1] - v[t]), built per frame then flattened
    per_frame = v[:, :-1, None] + (v[:, 1:] - v[:, :-1])[:, :, None] * ramp  # [B, n, hop, ...]
    flat = per_frame.reshape(x.shape[0], -1, *rest)
    return flat[:, s0 - t0 * hop : s1 - t0 * hop]


def pulse_train(phase: Any, f0: Any, sample_rate: int, cutoff_hz: float, ops: ArrayOps = NUMPY) -> Any:
    """Band-limited pulse train sum_{k=1..K} cos(k * phase), K = floor(cutoff / f0), in closed form
    (Dirichlet kernel: sin((K + 1/2) phase) / (2 sin(phase / 2)) - 1/2), O(1) per sample whatever K.

    phase [B, N] float64 radians (wrapped or not), f0 [B, N] Hz -> [B, N] float32.  Every harmonic has
    amplitude 1, so the spectrum is flat up to the cutoff (harmonics above it, and above Nyquist, are absent).
    """
    if not 0 < cutoff_hz < sample_rate / 2:
        raise ValueError(f"cutoff {cutoff_hz} Hz must lie in (0, Nyquist {sample_rate / 2})")
    k = ops.f32(ops.clip(xp(f0).floor(cutoff_hz / ops.clip(f0, 1.0, None)), 1, None))
    # Wrap to [-pi, pi) in float64, then float32 is enough: the pulse peak (phase ~ 0) is where float32
    # is most precise, and |(K + 1/2) phase| < ~200 rad keeps the numerator's error ~1e-5.
    phase = ops.f32(xp(phase).remainder(phase + math.pi, TWO_PI) - math.pi)
    m = xp(phase)
    half = m.sin(phase / 2)
    small = m.abs(half) < 1e-6  # phase ~ 0: the limit K
    ratio = m.sin((k + 0.5) * phase) / (2 * m.where(small, m.ones_like(half), half))
    return m.where(small, k, ratio - 0.5)


def xp(x: Any):
    """The module whose elementwise functions (sin, abs, where, floor, remainder, exp, ones_like) take `x`."""
    if isinstance(x, np.ndarray):
        return np
    import torch

    return torch


def overlap_add(frames: Any, hop: int, ops: ArrayOps = NUMPY) -> Any:
    """Segments [B, J, W] (windowed already), segment j starting at sample j * hop, W a multiple of hop ->
    their sum [B, (J + q - 1) * hop], q = W / hop: segment j covers hop-blocks j .. j + q - 1, so the sum is q
    shifted adds of blocks (much cheaper than a fold on CPU)."""
    b, n_j, w = frames.shape
    if w % hop:
        raise ValueError(f"segment length {w} must be a multiple of the hop {hop}")
    q = w // hop
    blocks = frames.reshape(b, n_j, q, hop)
    out = ops.zeros((b, n_j + q - 1, hop), blocks)
    for k in range(q):
        out[:, k : k + n_j] += blocks[:, :, k]
    return out.reshape(b, -1)


def stft(wave: Any, hop: int, window: Any, ops: ArrayOps = NUMPY) -> Any:
    """wave [B, S] -> complex spectra [B, N/2 + 1, S // hop + 1] (N = len(window)): frame t's window centred on
    sample t * hop, silence outside the wave (== torch.stft(center=True, pad_mode="constant"))."""
    return stft_frames(wave, 0, 0, wave.shape[-1] // hop + 1, hop, window, ops)


def stft_frames(wave: Any, wave_start: int, f0: int, f1: int, hop: int, window: Any, ops: ArrayOps = NUMPY) -> Any:
    """Spectra [B, N/2 + 1, f1 - f0] of frames [f0, f1) (frame t's window centred on sample t * hop) of the
    samples [wave_start, wave_start + S) held in wave [B, S]; samples outside them are silence (before the
    utterance, after its end), so a stream gets the whole utterance's frames as long as it holds every sample
    of the utterance that their windows reach."""
    n, half = window.shape[0], window.shape[0] // 2
    lo, hi = f0 * hop - half, (f1 - 1) * hop + half  # the samples the frames read
    b, length = wave.shape
    padded = ops.zeros((b, hi - lo), wave)
    a0, a1 = max(lo, wave_start), min(hi, wave_start + length)
    if a1 > a0:
        padded[:, a0 - lo : a1 - lo] = wave[:, a0 - wave_start : a1 - wave_start]
    frames = ops.frames(padded, n, hop)  # [B, f1 - f0, N]
    return ops.rfft(frames * window, n).swapaxes(-1, -2)


def inverse_stft(spectra: Any, first_frame: int, s0: int, s1: int, n_frames_total: int | None, hop: int,
                 window: Any, ops: ArrayOps = NUMPY) -> Any:
    """Samples [s0, s1) of the inverse STFT of complex spectra [B, N/2 + 1, F] of frames [first_frame,
    first_frame + F), frame t's window (N = len(window)) centred on sample t * hop: the weighted overlap-add
    divided by the sum of the squared windows of the frames PRESENT at each sample (torch.istft's rule,
    center=True), so the utterance edges need no padding frames.  Every frame whose window reaches [s0, s1)
    and lies in [0, n_frames_total) must be held (n_frames_total None: the utterance's end is not known yet,
    every such frame must be held).  In absolute indices: any range, whole or in chunks, gives the same samples."""
    n = window.shape[0]
    half = n // 2
    j0 = max(0, -((half - 1 - s0) // hop))  # first frame with j * hop + half > s0
    j1 = (s1 - 1 + half) // hop  # last frame with j * hop - half <= s1 - 1
    if n_frames_total is not None:
        j1 = min(j1, n_frames_total - 1)
    have0, have1 = first_frame, first_frame + spectra.shape[-1] - 1
    if j0 < have0 or j1 > have1:
        raise ValueError(f"samples {s0}..{s1} need frames {j0}..{j1}, have {have0}..{have1}")
    spec = spectra[..., j0 - have0 : j1 - have0 + 1].swapaxes(-1, -2)  # [B, k, N/2 + 1]
    k = spec.shape[1]
    wave = overlap_add(ops.irfft(spec, n) * window, hop, ops)  # [B, (k - 1) hop + N] from j0 hop - half
    envelope = overlap_add(ops.zeros((1, k, n), window) + window**2, hop, ops)[0]
    a = s0 - (j0 * hop - half)
    return wave[:, a : a + s1 - s0] / ops.clip(envelope[a : a + s1 - s0], 1e-8, None)


def render(inp: RenderInput, s0: int, s1: int, phase0: Any, n_frames_total: int | None, syn: Synthesis,
           window: Any, phase_at: int | None = None, ops: ArrayOps = NUMPY) -> tuple[Any, Any]:
    """Samples [s0, s1) (multiples of h) of the utterance -> (wave [B, s1 - s0], phase at `phase_at`).

    phase0 [B] float64: the oscillator phase at sample e0 = s0 - margin, the first excitation sample
    this call makes (0 at e0 = -margin for an utterance start).  `phase_at` (e0 <= phase_at <= s1 +
    margin) asks for the phase at another sample, to continue in a later call.  With torch the cepstra
    carry the gradient; F0 and voicing do not (the oscillator is fixed DSP).
    """
    h, w_len, hop, sr = syn.frame_hop, syn.window, syn.hop_length, syn.sample_rate
    if s0 % h or s1 % h or s1 <= s0:
        raise ValueError(f"render range [{s0}, {s1}) must be non-empty multiples of {h}")
    e0, e1 = s0 - syn.margin, s1 + syn.margin
    b = inp.f0.shape[0]
    m = xp(inp.f0)
    with ops.no_grad():
        f0 = frame_to_samples(ops.f64(inp.f0), inp.first_frame, n_frames_total, e0, e1, hop, ops)  # [B, E]
        voiced = frame_to_samples(ops.f32(inp.voiced), inp.first_frame, n_frames_total, e0, e1, hop, ops)
        # phase(n) for n = e0.. : phase0 + 2 pi sum_{m < n} f0(m) / sr   (float64: no drift on long input)
        increments = TWO_PI * f0 / sr
        phase = m.remainder(phase0[:, None] + ops.cumsum(increments, 1) - increments, TWO_PI)
        n = ops.arange(e0, e1, f0)
        inside = (n >= 0) if n_frames_total is None else (n >= 0) & (n < n_frames_total * hop)
        harmonic = pulse_train(phase, f0, sr, syn.cutoff_hz, ops) * voiced * ops.f32(inside)
        source_noise = ops.noise(syn.seed, e0, e1, b, f0) * ops.f32(inside)
        out_phase = None
        if phase_at is not None:
            out_phase = phase[:, phase_at - e0] if phase_at < e1 else m.remainder(
                phase[:, -1] + increments[:, -1], TWO_PI)
    # Synthesis frames j = s0/h - W/(2h) + 1 .. s1/h + W/(2h) - 1: all that overlap [s0, s1); the
    # first one's window starts at e0.
    j0 = (e0 + w_len // 2) // h
    frames_h = ops.frames(ops.f32(ops.stack([harmonic, source_noise], 1)), w_len, h)  # [B, 2, J, W]
    n_j = frames_h.shape[2]
    spectra = ops.rfft(frames_h * window, w_len)  # [B, 2, J, W/2+1]

    # Filter of synthesis frame j: cepstra interpolated at mel-frame position j / r (the same linear
    # interpolation as F0, on the grid of synthesis frames).
    def log_response(c: Any) -> Any:  # [B, F, L] -> complex log frequency response [B, J, W/2+1]
        if c.shape[-1] > w_len // 2:
            raise ValueError(f"cepstrum of {c.shape[-1]} coefficients needs n_fft >= {2 * c.shape[-1]}")
        return ops.rfft(ops.f32(frame_to_samples(c, inp.first_frame, n_frames_total, j0, j0 + n_j, syn.ratio, ops)),
                        w_len)

    # harmonic: minimum-phase (c[0] the log gain; exp(FFT(c)): log-magnitude = Re, phase = Im, as HTS's MLSA
    # filter); noise: zero-phase magnitude with the same log-magnitude (its phase is random anyway)
    log_h = log_response(inp.harmonic_cepstrum)
    resp_h = ops.polar(m.exp(log_h.real), log_h.imag)
    resp_n = m.exp(log_response(inp.noise_cepstrum).real)
    filtered = spectra[:, 0] * resp_h + spectra[:, 1] * resp_n  # [B, J, W/2+1]
    frames = ops.irfft(filtered, w_len) * window  # [B, J, W]
    wave = overlap_add(frames, h, ops)  # [B, (J + q - 1) h] from e0: spans [e0, e1)
    # Every sample of [s0, s1) is covered by all q frames around it, whose squared windows sum to the
    # constant sum(w^2) / h (periodic Hann, q >= 4): divide by it (torch.istft's envelope, interior).
    wave = wave * (h / (window**2).sum())
    start = s0 - e0
    return wave[:, start : start + (s1 - s0)], out_phase

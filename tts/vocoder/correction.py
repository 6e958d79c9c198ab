"""The magnitude correction's DSP around its network (tts/vocoder/source_filter.py, "Magnitude correction"), written
once for numpy and torch as tts.vocoder.render is: the torch vocoder trains and speaks with it, the ONNX engine
runs it on numpy around the exported gain network.

The correction of a rendered wave [B, S] (S = T * hop for T mel frames): its STFT frames j = 0 .. T (window N
centred on sample j * hop, silence outside the utterance), each bin's magnitude times exp(log-gain) from the
network, the phase kept, and the inverse STFT (tts.vocoder.render.inverse_stft).  Frame T, one past the last
mel frame, reads the last mel frame.  `gains(mel [B, M, F], magnitude [B, N/2 + 1, F]) -> log-gain
[B, N/2 + 1, F]` is the network (zero-padded at the edges of what it is given); everything else is here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tts.vocoder.render import NUMPY, ArrayOps, StreamWindow, inverse_stft, stft, stft_frames, xp

Gains = Callable[[Any, Any], Any]


def with_last_frame(mel: Any, ops: ArrayOps) -> Any:
    """mel [B, M, F] -> [B, M, F + 1]: frame F repeats frame F - 1 (the STFT's frame one past the mel)."""
    return ops.concat([mel, mel[..., -1:]], 2)


def apply_gains(spec: Any, mel: Any, gains: Gains) -> Any:
    """Spectra [B, N/2 + 1, F] of the rendered wave and the mel [B, M, F] of the same frames -> the spectra with
    each bin's magnitude times exp(log-gain) (the phase kept)."""
    m = xp(spec)
    return spec * m.exp(gains(mel, m.abs(spec)))


def correct_whole(wave: Any, mel: Any, gains: Gains, hop: int, window: Any, ops: ArrayOps = NUMPY) -> Any:
    """A whole utterance: rendered wave [B, T * hop] (unclamped), mel [B, M, T] -> corrected wave [B, T * hop]."""
    spec = stft(wave, hop, window, ops)  # [B, N/2 + 1, T + 1]
    corrected = apply_gains(spec, with_last_frame(mel, ops), gains)
    return inverse_stft(corrected, 0, 0, wave.shape[-1], spec.shape[-1], hop, window, ops)


class CorrectionStage:
    """The correction streamed behind a stream of the rendered wave: `push(mel, rendered)` with the mel frames
    received and the rendered samples that came of them (in order; unclamped), -> the corrected samples now
    determined (unclamped); `finish(rendered)` with the last rendered samples -> the rest.  A frame is computed
    once the rendered wave covers its window (or the utterance ended), and a sample is emitted once every frame
    reaching it has its gain from a whole receptive field (`reach` frames each side: StreamWindow, the first
    stage's bookkeeping).  Joined, the output equals `correct_whole` of the whole wave to float rounding."""

    def __init__(self, gains: Gains, reach: int, hop: int, window: Any, ops: ArrayOps = NUMPY) -> None:
        self.gains, self.hop, self.window, self.ops = gains, hop, window, ops
        self.half = window.shape[0] // 2
        if self.half % hop:
            raise ValueError(f"the correction's window {window.shape[0]} must be a multiple of 2 x the hop {hop}")
        self.frames = StreamWindow(reach, self.half // hop)
        self.mel: Any = None  # [B, M, n]: mel frames [frames.mel_start, mel_received)
        self.mel_received = 0
        self.wave: Any = None  # [B, S]: rendered samples [wave_start, wave_start + S)
        self.wave_start = 0

    def push(self, mel: Any, rendered: Any) -> Any:
        self.mel = mel if self.mel is None else self.ops.concat([self.mel, mel], 2)
        self.mel_received += mel.shape[-1]
        self.wave = rendered if self.wave is None else self.ops.concat([self.wave, rendered], 1)
        return self._emit(final=False)

    def finish(self, rendered: Any) -> Any:
        if self.mel is None:
            raise ValueError("nothing to finish: no mel was pushed")
        self.wave = self.ops.concat([self.wave, rendered], 1)
        return self._emit(final=True)

    def _emit(self, final: bool) -> Any:
        w, hop, t = self.frames, self.hop, self.mel_received
        rendered_end = self.wave_start + self.wave.shape[-1]
        # frames whose window the rendered wave covers and whose mel is held; at the end, frame T too
        w.received = t + 1 if final else max(0, min(t, (rendered_end - self.half) // hop + 1))
        step = w.step(final)
        if step is None:
            return self.wave[:, :0]
        a, b = w.mel_start, w.received
        mel = with_last_frame(self.mel, self.ops) if final else self.mel[..., : b - a]
        spec = stft_frames(self.wave, self.wave_start, a, b, hop, self.window, self.ops)  # [B, N/2 + 1, b - a]
        corrected = apply_gains(spec, mel, self.gains)[..., step.need_from - a : step.valid_end - a]
        s0, s1 = w.done * hop, min(step.target, t) * hop
        out = inverse_stft(corrected, step.need_from, s0, s1, b if final else None, hop, self.window, self.ops)
        self.mel = self.mel[..., w.advance(step):]
        keep = max(self.wave_start, w.mel_start * hop - self.half)  # the first sample the next step's frames read
        self.wave, self.wave_start = self.wave[:, keep - self.wave_start :], keep
        return out

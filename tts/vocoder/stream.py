"""Incremental synthesis for the frame-rate vocoders (source-filter, iSTFT head): the chunk bookkeeping written once.

A vocoder whose network reads a bounded window of mel frames (`receptive_frames` each side) and whose
synthesis needs `context` frames each side of a sample's own frame streams the same way: hold a bounded
window of the mel received (tts.vocoder.render.StreamWindow), re-run the network over it, and emit the
samples whose every influence has arrived.  Each vocoder supplies `render_step`, what it renders for one
step (and any state it carries, e.g. the oscillator phase).
"""

from __future__ import annotations

import torch

from tts.vocoder.render import StreamStep, StreamWindow


class FrameStream:
    """`push(mel_chunk)` -> new audio (possibly empty), `finish()` -> the rest; equals the vocoder's whole-utterance
    synthesis of the concatenated mel to float rounding (each vocoder's tests state the tolerance)."""

    def __init__(self, vocoder, context: int, clamp: bool = True) -> None:
        self.vocoder = vocoder
        self.clamp = clamp  # False: the raw wave, for a later stage that clamps (the magnitude correction)
        self.frames = StreamWindow(vocoder.receptive_frames, context)
        self.mel: torch.Tensor | None = None  # [B, M, n] frames [frames.mel_start, frames.received)
        self.finished = False

    @torch.inference_mode()
    def push(self, mel: torch.Tensor) -> torch.Tensor:
        if self.finished:
            raise RuntimeError("stream already finished")
        n_mels = self.vocoder.mel_config.n_mels
        if mel.dim() != 3 or mel.shape[1] != n_mels:
            raise ValueError(f"expected mel [B, {n_mels}, n], got {tuple(mel.shape)}")
        self.mel = mel.float() if self.mel is None else torch.cat([self.mel, mel.float()], dim=-1)
        self.frames.received += mel.shape[-1]
        return self._emit(final=False)

    @torch.inference_mode()
    def finish(self) -> torch.Tensor:
        if self.finished:
            raise RuntimeError("stream already finished")
        self.finished = True
        if self.mel is None:
            return torch.zeros(1, 0)
        return self._emit(final=True)

    def _emit(self, final: bool) -> torch.Tensor:
        assert self.mel is not None
        step = self.frames.step(final)
        if step is None:
            return self.mel.new_zeros(self.mel.shape[0], 0)
        wave = self.render_step(step, final)
        self.mel = self.mel[..., self.frames.advance(step):]
        return wave.clamp(-1, 1) if self.clamp else wave

    def render_step(self, step: StreamStep, final: bool) -> torch.Tensor:
        """Samples [frames.done * hop, step.target * hop) from the held mel -> [B, n]."""
        raise NotImplementedError

"""The block-wise voice on onnxruntime (no torch): its three exported graphs strung together block by block, and
the source-filter vocoder streamed on the exported vocoder graph.  tts.runtime.onnx_engine.OnnxEngine uses it
for a voice whose manifest entry says "decoding": "block".

The graphs are the model's own modules (tts/export.py):
    front   tokens [B, L], token_lengths [B], speed [], pitch_shift [] -> frames [B, T, D], frame_mask [B, T],
            mel_lengths [B], truncated [B]  (encoder, variance adaptor, length regulation: FastSpeech2.prepare)
    block   frames [B, n, D], mask [B, n], start [], the cache (manifest "state" names) -> cond [B, D, n],
            coarse [B, M, n] normalised, next_<state>  (ONE block: tts.models.blockwise.BlockStep)
    refine  coarse [B, M, w], cond [B, D, w], frame_mask [B, w], noise_offsets [B], first_frame [],
            temperature [], refine_steps [] -> mels [B, M, w] raw log-mel  (start noise, Euler loop, denormalise)
What runs here is only the order of those calls, which is FastSpeech2.infer's (all blocks, then the refiner over
the whole coarse mel) and FastSpeech2.stream_mels' (each block, the refiner over windows as frames become final:
tts.models.refine_windows, the one bookkeeping both engines use), and SourceFilterStream's windowing of the
vocoder network (`VocoderStream`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tts.models.refine_windows import RefineWindows
from tts.noise import item_noise_seed
from tts.runtime.controls import Controls
from tts.runtime.engine import MelBatch, StreamPiece, timed_pieces
from tts.vocoder.correction import CorrectionStage
from tts.vocoder.render import RenderInput, StreamWindow, Synthesis, render

FRONT_INPUTS = ("tokens", "token_lengths", "speed", "pitch_shift")
FRONT_OUTPUTS = ("frames", "frame_mask", "mel_lengths", "truncated", "durations")
REFINE_INPUTS = ("coarse", "cond", "frame_mask", "noise_offsets", "first_frame", "temperature", "refine_steps")
# the refiner's smallest window of new frames when streaming (FastSpeech2.stream_mels' refine_chunk_frames)
REFINE_CHUNK_FRAMES = 32
_DTYPES = {"tensor(float)": np.float32, "tensor(bool)": np.bool_, "tensor(int64)": np.int64}


def pad_ids(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists -> (tokens [B, L] int64, zero-padded; lengths [B] int64)."""
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    tokens = np.zeros((len(ids), int(lengths.max())), dtype=np.int64)
    for k, seq in enumerate(ids):
        tokens[k, : len(seq)] = seq
    return tokens, lengths


def stack_items(items: Sequence[Sequence[np.ndarray]], pads: Sequence[float]) -> list[np.ndarray]:
    """Per-item graph outputs (each [1, ...], lengths differing in any dim) -> one batch per output, each item
    padded at the end of every dim with that output's pad value (`pads[j]` for output j)."""
    out = []
    for j, pad in enumerate(pads):
        xs = [item[j] for item in items]
        shape = [len(xs)] + [max(x.shape[d] for x in xs) for d in range(1, xs[0].ndim)]
        batch = np.full(shape, pad, dtype=xs[0].dtype)
        for k, x in enumerate(xs):
            batch[(k, *(slice(0, n) for n in x.shape[1:]))] = x[0]
        out.append(batch)
    return out


def per_item(run: Any, ids: Sequence[Sequence[int]], feeds: dict[str, np.ndarray],
             pads: Sequence[float], item_feeds: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """A graph whose outputs decide an item's LENGTHS run item by item, stacked (`stack_items`): an item then gets
    exactly what it gets alone, whatever its batch (a batched run rounds ~1e-6 differently, and a duration that
    close to x.5 frames would round the other way: FastSpeech2._front, docs/results/batching).  `run(feeds)`
    runs the graph; `feeds` are shared, `item_feeds` [B, ...] are sliced per item."""
    outs = []
    for k, seq in enumerate(ids):
        tokens, lengths = pad_ids([seq])
        own = {name: x[k : k + 1] for name, x in (item_feeds or {}).items()}
        outs.append(run(dict(tokens=tokens, token_lengths=lengths, **feeds, **own)))
    return stack_items(outs, pads)


@dataclass
class Plan:
    """The front graph's output for a batch: the regulated frames before the decoder (FastSpeech2's NARPlan)."""

    frames: np.ndarray  # [B, T, D] float32
    frame_mask: np.ndarray  # [B, T] bool
    lengths: np.ndarray  # [B] int64
    truncated: np.ndarray  # [B] bool
    durations: np.ndarray  # [B, L] int64 frames per token


class BlockVoice:
    """A block-mode voice's graphs (sessions "front", "block", "refine") -> mel batches and streamed parts."""

    def __init__(self, sessions: dict[str, Any], spec: dict[str, Any], run_options: Any) -> None:
        self.sessions, self.run_options = sessions, run_options
        self.state_names: list[str] = list(spec["state"])
        self.refiner_half_width = int(spec["refiner_half_width"])
        # the cache's initial shapes and types, read from the block graph itself: batch dims named "B", the
        # cached-frames dim symbolic (empty at the start), every other dim fixed by the model.  A part of the
        # state the model never reads (the left context of a 1-wide conv: 0 frames) is no input of the graph.
        inputs = {i.name: i for i in sessions["block"].get_inputs()}
        self.state_inputs = [(name, inputs[name].shape, _DTYPES[inputs[name].type])
                             for name in self.state_names if name in inputs]

    def _run(self, graph: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.sessions[graph].run(None, feeds, self.run_options)

    def plan(self, ids: Sequence[Sequence[int]], controls: Controls) -> Plan:
        frames, frame_mask, mel_lengths, truncated, durations = per_item(
            lambda feeds: self._run("front", feeds), ids,
            dict(speed=np.array(controls.speed, np.float32), pitch_shift=np.array(controls.pitch_shift, np.float32)),
            pads=(0.0, False, 0, False, 0))
        return Plan(frames, frame_mask.astype(bool), mel_lengths.astype(np.int64), truncated.astype(bool),
                    durations.astype(np.int64))

    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros before frame 0 (BlockStep.initial_state): no cached frames, zero conv contexts and go frames."""
        return {name: np.zeros([batch if d == "B" else d if isinstance(d, int) else 0 for d in shape], dtype)
                for name, shape, dtype in self.state_inputs}

    def blocks(self, plan: Plan, block_frames: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(start, cond [B, D, n], coarse [B, M, n]) per block of `block_frames` frames (0: one block), in order."""
        t_total = plan.frames.shape[1]
        step = block_frames or t_total
        state = self.initial_state(plan.frames.shape[0])
        for start in range(0, t_total, step):
            stop = min(start + step, t_total)
            cond, coarse, *next_state = self._run("block", dict(
                frames=np.ascontiguousarray(plan.frames[:, start:stop]),
                mask=np.ascontiguousarray(plan.frame_mask[:, start:stop]), start=np.array(start, np.int64), **state))
            state = {name: x for name, x in zip(self.state_names, next_state) if name in state}
            yield start, cond, coarse

    def refine(self, coarse: np.ndarray, cond: np.ndarray, frame_mask: np.ndarray, offsets: np.ndarray, first: int,
               controls: Controls) -> np.ndarray:
        """Frames [first, first + w) refined (K = 0: the coarse mel) and denormalised -> [B, M, w] raw log-mel."""
        [mels] = self._run("refine", dict(
            coarse=np.ascontiguousarray(coarse), cond=np.ascontiguousarray(cond),
            frame_mask=np.ascontiguousarray(frame_mask), noise_offsets=offsets, first_frame=np.array(first, np.int64),
            temperature=np.array(controls.temperature, np.float32), refine_steps=np.array(controls.refine_steps, np.int64)))
        return mels

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls) -> MelBatch:
        """FastSpeech2.infer(block_frames=B): every block in order, then the refiner over the whole coarse mel."""
        plan = self.plan(ids, controls)
        decoded = list(self.blocks(plan, controls.block_frames))
        cond = np.concatenate([c for _, c, _ in decoded], axis=2)
        coarse = np.concatenate([m for _, _, m in decoded], axis=2)
        offsets = np.array([item_noise_seed(controls.seed, i) for i in indices], np.int64)
        mels = self.refine(coarse, cond, plan.frame_mask, offsets, 0, controls)
        return MelBatch(mels, plan.lengths, plan.truncated, None, controls.refine_steps, plan.durations)

    def stream_part(self, ids: Sequence[int], index: int, controls: Controls,
                    vocoder: "VocoderStream") -> Iterator[StreamPiece] | None:
        """FastSpeech2.stream_mels + the vocoder's stream, as TorchEngine.stream_part: None for a part the frame
        guard cut (the pipeline speaks it whole, which repairs it)."""
        t0 = time.perf_counter()
        plan = self.plan([ids], controls)
        if bool(plan.truncated[0]):
            return None
        return self._stream(plan, index, controls, vocoder, time.perf_counter() - t0)

    def _stream(self, plan: Plan, index: int, controls: Controls, vocoder: "VocoderStream",
                prepare_s: float) -> Iterator[StreamPiece]:
        return timed_pieces(self.stream_mels(plan, index, controls), vocoder.push, vocoder.finish, prepare_s,
                            plan.durations[0])

    def stream_mels(self, plan: Plan, index: int, controls: Controls) -> Iterator[np.ndarray]:
        """FastSpeech2.stream_mels of one part (plan of batch 1, item `index`): the final raw log-mel [1, M, n]
        in order, each chunk as soon as it is determined (a block; with K refiner steps, once the coarse mel is
        known K * R frames past it, in windows of at least REFINE_CHUNK_FRAMES new frames)."""
        t_total = plan.frames.shape[1]
        offsets = np.array([item_noise_seed(controls.seed, index)], np.int64)
        windows = RefineWindows(controls.refine_steps * self.refiner_half_width, REFINE_CHUNK_FRAMES)

        def refine(coarse: np.ndarray, cond: np.ndarray, lo: int, hi: int) -> np.ndarray:
            return self.refine(coarse, cond, plan.frame_mask[:, lo:hi], offsets, lo, controls)

        for start, cond, coarse in self.blocks(plan, controls.block_frames):
            stop = start + coarse.shape[2]
            if controls.refine_steps:
                ready = windows.push(coarse, cond, stop >= t_total, refine)
            else:  # K = 0: each block's coarse mel is final as it comes (no window)
                ready = refine(coarse, cond, start, stop)
            if ready.shape[2]:
                yield ready


class VocoderStream:
    """The source-filter vocoder streamed on its exported graph: push mel chunks [1, M, n] in order, get the
    audio each made final; `finish` gives the rest.  SourceFilterStream's windowing (tts/vocoder/source_filter.py):
    the network is re-run over a window holding `receptive_frames` of context either side of the frames whose
    parameters are exact, and the one render (tts.vocoder.render) continues from the carried oscillator phase,
    so the joined audio equals the whole utterance's to float rounding."""

    def __init__(self, session: Any, run_options: Any, synthesis: Synthesis, window: np.ndarray,
                 receptive_frames: int, correction: CorrectionStage | None = None) -> None:
        self.session, self.run_options = session, run_options
        self.correction = correction  # the magnitude correction's stage behind the render (CorrectedStream's)
        self.syn, self.window = synthesis, window
        self.frames = StreamWindow(receptive_frames, synthesis.context_frames)
        self.mel: np.ndarray | None = None  # [1, M, n] frames [frames.mel_start, frames.received)
        self.phase = np.zeros(1)  # [1] float64 oscillator phase at sample done * hop - margin

    def push(self, mel: np.ndarray) -> np.ndarray:
        self.mel = mel if self.mel is None else np.concatenate([self.mel, mel], axis=2)
        self.frames.received += mel.shape[2]
        wave = self._emit(final=False)
        if self.correction is not None:
            wave = self.correction.push(mel, wave[None])[0]
        return np.clip(wave, -1.0, 1.0).astype(np.float32)

    def finish(self) -> np.ndarray:
        if self.mel is None:
            return np.zeros(0, np.float32)
        wave = self._emit(final=True)
        if self.correction is not None:
            wave = self.correction.finish(wave[None])[0]
        return np.clip(wave, -1.0, 1.0).astype(np.float32)

    def _emit(self, final: bool) -> np.ndarray:
        """-> [n] float32 samples of the frames that became final (unclipped)."""
        w, hop = self.frames, self.syn.hop_length
        step = w.step(final)
        if step is None:
            return np.zeros(0, np.float32)
        params = self.session.run(None, {"mel": np.ascontiguousarray(self.mel)}, self.run_options)
        a, z = step.need_from - w.mel_start, step.valid_end - w.mel_start
        f0, voiced, harmonic, noise = (p[:, a:z] for p in params)  # [1, F(, L)] frames [need_from, valid_end)
        s0, s1 = w.done * hop, step.target * hop
        wave, phase = render(RenderInput(f0, voiced, harmonic, noise, step.need_from), s0, s1, self.phase,
                             w.received if final else None, self.syn, self.window,
                             phase_at=None if final else s1 - self.syn.margin)
        if phase is not None:
            self.phase = phase
        self.mel = self.mel[:, :, w.advance(step):]
        return wave[0].astype(np.float32)

"""ONNX export of the shipped voices: `python -m tts.export --out DIR`.

Writes every shipped NAR of every shipped voice (checkpoints/default.json; the default voice's model first:
the NAR with its flow-matching refiner, the block-wise NAR checkpoints/nar_block.pt, another voice's model)
and each voice's vocoder (the source-filter vocoder: the default one, or a voice's own) as ONNX graphs plus
`manifest.json` (format tts-onnx-v5), which `tts.runtime.onnx_engine.OnnxEngine` runs with onnxruntime (no torch).  The
manifest's "voices" are these models, each named by its checkpoint's stem (the shipped voice that a model
speaks with is default.json's business); `--checkpoint` (repeatable) exports others.

A parallel voice, ONE graph:
    VOICE.acoustic  tokens [B, L] int64, token_lengths [B] int64, speed [] float, pitch_shift [] float,
                    temperature [] float, refine_steps [] int64, noise_offsets [B] int64
                    -> mels [B, M, T] raw log-mel (padding = the model's pad value), mel_lengths [B] int64,
                       truncated [B] bool
A block-wise voice, three graphs the engine strings together block by block (tts.runtime.onnx_blocks):
    VOICE.front     tokens, token_lengths, speed, pitch_shift -> frames [B, T, D], frame_mask [B, T],
                    mel_lengths [B], truncated [B]
    VOICE.block     frames [B, n, D], mask [B, n], start [] int64, the cache (tts.models.blockwise.BlockState:
                    prev_mel, keys, values, key_mask, conv1, conv2) -> cond [B, D, n], coarse [B, M, n],
                    next_<cache>
    VOICE.refine    coarse [B, M, w], cond [B, D, w], frame_mask [B, w], noise_offsets [B], first_frame [] int64,
                    temperature [], refine_steps [] -> mels [B, M, w] raw log-mel
and for every vocoder a voice speaks with (manifest "vocoders", named KEY: "source-filter", "source-filter-joe";
a voice's entry names its own)
    KEY.vocoder     mel [B, M, T] raw log-mel -> f0 [B, T] Hz, voiced [B, T] 0/1,
                    harmonic_cepstrum [B, T, Lh], noise_cepstrum [B, T, Ln]
    KEY.vocoder_correction   (a vocoder with its magnitude correction only) mel [B, M, F], the rendered wave's
                    STFT magnitude [B, N/2 + 1, F] -> log_gain [B, N/2 + 1, F]

The graphs are the models' own inference maths, traced and scripted, not re-written: the encoder and variance
adaptor, `durations_from_log`, the length regulator (`clip_durations`, `expand_frames`), the decoder (parallel,
or one block of it: `BlockStep`), the refiner's start noise (`gather_noise` from tts.noise's table) and its
sampling loop (`EulerLoop`, scripted into one ONNX Loop over K = refine_steps), and `denormalise_mel`.  The
controls and the noise offsets (tts.noise.item_noise_seed of the run's seed and each item's index) are inputs,
so the ONNX engine computes nothing of the model.  The vocoder graph is the network and its F0 / voicing
decoding; the DSP render (oscillator, filters, overlap-add) is tts.vocoder.render, the one render the torch
vocoder trains and speaks with, run on numpy, and so is the correction's STFT stage (tts.vocoder.correction).

Size: the checkpoints hold int8 or float16 weights; a graph stores each float32 weight in the smallest form that
holds it exactly (`_store_exact_small`): int8 codes times a scale per channel (a quarter of the bytes), else
float16 (half), cast back at load; and the refiner's 4.2 MB noise table is one external-data file that every graph
drawing noise reads (`_share_noise_table`).  The two slt models and the vocoder: 23.8 MB (67.9 MB with the int8
weights stored as float32).

The manifest records what a runtime needs and nothing it could get wrong silently: the mel config, per voice
its decoding, text frontend (symbol table, length limit), default controls (the checkpoint's own) and graphs,
the DSP settings, the sha256 of each source checkpoint (so a stale export is detected) and of each graph and
data file (so a corrupt one is refused).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts.models.layers.length_regulator import clip_durations, durations_from_log, expand_frames
from tts.models.nonautoregressive import denormalise_mel
from tts.models.refiner import gather_noise, start_point
# the engine's (torch-free) names of what it reads
from tts.runtime.onnx_blocks import FRONT_INPUTS, FRONT_OUTPUTS, REFINE_INPUTS
from tts.runtime.onnx_engine import ACOUSTIC_INPUTS, ACOUSTIC_OUTPUTS, FORMAT, MANIFEST

OPSET = 17


def file_entry(file: str | Path, **extra: Any) -> dict[str, Any]:
    """A manifest's record of a file: sha256 (the identity) plus size and mtime_ns (a runtime that finds both
    unchanged skips hashing; tts.runtime.onnx_engine.file_matches)."""
    st = Path(file).stat()
    return {**extra, "sha256": sha256_file(file), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- the graphs: the models' own modules and functions, traced and scripted ---------------------------
class _Front(nn.Module):
    """FastSpeech2's encoder and variance adaptor at inference (pitch_shift a tensor input; pitch/energy
    scale 1): -> (hidden [B, L, D] with pitch/energy embeddings, log-durations [B, L], token mask [B, L])."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, token_lengths: torch.Tensor, pitch_shift: torch.Tensor):
        mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < token_lengths[:, None]  # [B, L]
        var = self.model.variance(self.model.encode(tokens, mask), mask, pitch_shift=pitch_shift)
        return var.hidden, var.log_durations, mask


class _Decoder(nn.Module):
    """Regulated frames [B, T, D], frame mask [B, T] -> (normalised coarse mel [B, M, T], decoder hidden
    [B, D, T], the refiner's condition)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, frames: torch.Tensor, frame_mask: torch.Tensor):
        hidden, coarse = self.model.decode(frames, frame_mask)
        return coarse, hidden.transpose(1, 2)


class RegulatedFront(nn.Module):
    """The parallel part of FastSpeech2's inference (`FastSpeech2.prepare`'s maths): the traced encoder and
    variance adaptor, then `durations_from_log` and the length regulator (`clip_durations`, `expand_frames`)
    -> (frames [B, T, D], frame_mask [B, T] bool, mel_lengths [B], truncated [B] bool, durations [B, L] int64:
    the frames each token got, the word timestamps' source), T >= 1."""

    def __init__(self, front: nn.Module, min_frames: int, max_frames: int) -> None:
        super().__init__()
        self.front = front
        self.min_frames, self.max_frames = min_frames, max_frames

    def forward(self, tokens: torch.Tensor, token_lengths: torch.Tensor, speed: torch.Tensor,
                pitch_shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden, log_d, token_mask = self.front(tokens, token_lengths, pitch_shift)
        d = durations_from_log(log_d, token_mask, float(speed), self.min_frames)
        d, truncated = clip_durations(d, self.max_frames)
        lengths = d.sum(1)  # [B]
        n = max(int(lengths.max()), 1)
        frames, _ = expand_frames(hidden, d, n)
        frame_mask = torch.arange(n, device=tokens.device)[None, :] < lengths[:, None]  # [B, T]
        return frames, frame_mask, lengths, truncated, d


class Refine(nn.Module):
    """FlowMatchingRefiner.sample (no early stop) + denormalisation on frames [first_frame, first_frame + w) of
    the items: the start noise gathered at those frames (`gather_noise` from tts.noise's table, which the graph
    carries), `start_point`, the sampling loop (`EulerLoop`, scripted into one ONNX Loop over K) and
    `denormalise_mel`.  coarse [B, M, w] normalised, cond [B, C, w], frame_mask [B, w] -> raw log-mel [B, M, w].
    A whole utterance is the window from frame 0; the block-wise voice refines windows of it
    (tts.models.refine_windows), which gives the same frames (the noise is a function of the absolute frame)."""

    def __init__(self, loop: nn.Module, table: torch.Tensor, mel_mean: torch.Tensor, mel_std: torch.Tensor,
                 pad_value: float, sigma: float, n_mels: int) -> None:
        super().__init__()
        self.loop = loop
        self.register_buffer("table", table)
        self.register_buffer("mel_mean", mel_mean)
        self.register_buffer("mel_std", mel_std)
        self.pad_value, self.sigma, self.n_mels = pad_value, sigma, n_mels

    def forward(self, coarse: torch.Tensor, cond: torch.Tensor, frame_mask: torch.Tensor, noise_offsets: torch.Tensor,
                first_frame: torch.Tensor, temperature: torch.Tensor, refine_steps: torch.Tensor) -> torch.Tensor:
        m = frame_mask[:, None, :].to(coarse.dtype)
        steps = int(refine_steps)
        # K = 0 is the coarse mel exactly (FlowMatchingRefiner.sample): no noise then
        temp = float(temperature) * float(min(steps, 1))
        # table offset of frame first_frame: gather_noise reads offset + t * n_mels + m
        eps = gather_noise(self.table, noise_offsets + first_frame * self.n_mels, self.n_mels, coarse.shape[2])
        x0 = start_point(coarse, eps, m, temp, self.sigma)
        x, _ = self.loop(x0, torch.cat([cond, coarse * m], dim=1), m, steps)  # == FlowMatchingRefiner.condition
        return denormalise_mel(x, frame_mask, self.mel_mean, self.mel_std, self.pad_value)


class AcousticGraph(nn.Module):
    """FastSpeech2.infer (parallel decoding, no early stop) as one scriptable module over traced parts."""

    def __init__(self, front: RegulatedFront, decoder: nn.Module, refine: Refine) -> None:
        super().__init__()
        self.front, self.decoder, self.refine = front, decoder, refine

    def forward(self, tokens: torch.Tensor, token_lengths: torch.Tensor, speed: torch.Tensor,
                pitch_shift: torch.Tensor, temperature: torch.Tensor, refine_steps: torch.Tensor,
                noise_offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        frames, frame_mask, lengths, truncated, durations = self.front(tokens, token_lengths, speed, pitch_shift)
        coarse, cond = self.decoder(frames, frame_mask)
        first = torch.zeros((), dtype=torch.long, device=tokens.device)
        mels = self.refine(coarse, cond, frame_mask, noise_offsets, first, temperature, refine_steps)
        return mels, lengths, truncated, durations


class BlockGraph(nn.Module):
    """tts.models.blockwise.BlockStep (one block of the block-wise decoder with its cache) with the refiner's
    condition transposed as the refine graph takes it: (frames [B, n, D], mask [B, n], start [], *BlockState)
    -> (cond [B, D, n], coarse [B, M, n] normalised, *next BlockState)."""

    def __init__(self, step: nn.Module) -> None:
        super().__init__()
        self.step = step

    def forward(self, frames: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, *state: torch.Tensor):
        hidden, coarse, next_state = self.step(frames, mask, start, *state)
        return (hidden.transpose(1, 2), coarse, *next_state)


class VocoderFrames(nn.Module):
    """SourceFilterVocoder.frame_params + decode: mel -> (f0, voiced, harmonic / noise cepstra [B, T, L])."""

    def __init__(self, vocoder: nn.Module) -> None:
        super().__init__()
        self.vocoder = vocoder

    def forward(self, mel: torch.Tensor):
        p = self.vocoder.frame_params(mel)
        f0, voiced = self.vocoder.decode(p)
        return f0, voiced, p.harmonic_cepstrum, p.noise_cepstrum


class CorrectionGains(nn.Module):
    """MagnitudeCorrection.gains: mel [B, M, F], the rendered wave's STFT magnitude [B, N/2 + 1, F] -> log-gains
    [B, N/2 + 1, F] (the STFT, inverse STFT and streaming around it are tts.vocoder.correction, run on numpy)."""

    def __init__(self, correction: nn.Module) -> None:
        super().__init__()
        self.correction = correction

    def forward(self, mel: torch.Tensor, magnitude: torch.Tensor) -> torch.Tensor:
        return self.correction.gains(mel, magnitude)


def _portable(path: Path) -> str:
    """A source's path relative to the repository when inside it (the checkout may move), else absolute."""
    from tts.paths import REPO_ROOT

    path = Path(path).resolve()
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


@dataclass
class ExportResult:
    out_dir: Path
    manifest: dict[str, Any]


def _attention_for_export(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, **kwargs) -> torch.Tensor:
    """F.scaled_dot_product_attention (inference, default scale) as the exporter should see it: a bool mask
    becomes an additive bias (0 / -inf) at the MASK's shape, added to the scores once.  The exporter's own
    decomposition applies Where to the whole [B, H, T, T] score matrix and then an IsNaN/Where pass over
    it again: on a 1,651-frame utterance that was 0.28 of the decoder's 0.95 s in onnxruntime."""
    if dropout_p or kwargs.get("is_causal") or kwargs.get("scale") is not None:
        raise ValueError("export attention: inference only (no dropout, causal flag or custom scale)")
    scores = torch.matmul(query * query.shape[-1] ** -0.5, key.transpose(-2, -1))  # [B, H, T, T]
    if attn_mask is not None:
        bias = attn_mask if attn_mask.dtype != torch.bool else torch.where(
            attn_mask, torch.zeros((), dtype=query.dtype), torch.full((), float("-inf"), dtype=query.dtype))
        scores = scores + bias
    return torch.matmul(torch.softmax(scores, dim=-1), value)


@contextlib.contextmanager
def _export_attention() -> Iterator[None]:
    """F.scaled_dot_product_attention traced as `_attention_for_export` (the same maths, a lighter graph)
    while the graphs are traced and exported; restored afterwards."""
    import torch.nn.functional as F

    sdpa = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _attention_for_export
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about shape-derived Python values (exact here)
            yield
    finally:
        F.scaled_dot_product_attention = sdpa


def _export_graph(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
                  dynamic: dict[str, dict[int, str]]) -> None:
    # The TorchScript exporter: it needs neither `onnxscript` nor the dynamo stack; a scripted module's
    # loops become ONNX Loops (the refiner's K steps), its traced parts are exact (their only Python
    # branches depend on shapes and configuration, never on values).
    raw = path.with_name(f".{path.name}.raw")
    torch.onnx.export(module.eval(), args, str(raw), input_names=inputs, output_names=outputs,
                      dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)
    _ort_optimised(raw, path)
    raw.unlink()
    _store_exact_small(path)


# How the graphs store their weights (recorded in the manifest): the checkpoints hold float16 or int8 weights
# (recipes.release precisions), which the models compute with in float32, so most float32 initializers of a graph
# are exactly int8 values times one scale per channel, or float16 values.
WEIGHT_STORAGE = "int8 x per-channel scale, else float16, where exact; float32 at load"
_MIN_STORED_SMALL = 1024  # values: smaller initializers (shapes, scalars) are not worth the extra nodes


def exact_int8(values: "np.ndarray") -> "tuple[np.ndarray, np.ndarray] | None":
    """float32 `values` as int8 codes times one float32 scale per slice along some axis, exactly (every value
    equal, bit for bit, to code * scale in float32), or None.  An int8 checkpoint (tts.checkpoint.pack_weights:
    codes in [-127, 127], a float16 scale per output channel, the channel's largest |value| = 127 * scale) gives
    such tensors; the export may have transposed them, so each axis is tried.  -> (codes, scale broadcastable)."""
    import numpy as np

    for axis in range(values.ndim):
        others = tuple(i for i in range(values.ndim) if i != axis)
        peak = np.abs(values).max(axis=others, keepdims=True)
        scale = (peak / 127).astype(np.float16).astype(np.float32)
        scale[scale == 0] = 1.0  # an all-zero channel: codes 0
        codes = np.round(values / scale)
        if np.abs(codes).max() <= 127:
            codes = codes.astype(np.int8)
            if np.array_equal(codes.astype(np.float32) * scale, values):
                return codes, scale
    return None


def _store_exact_small(path: Path) -> None:
    """Rewrite, in place, every float32 initializer of `path` (>= _MIN_STORED_SMALL values, in the main graph and
    in Loop bodies) in the smallest form that holds it exactly: int8 codes and a float32 scale per channel
    (`exact_int8`) with Cast + Mul back to float32 (a quarter of the bytes), else float16 with a Cast back (half).
    The same values, so the same results bit for bit: float32(code) * scale is the one float32 product that
    tts.checkpoint.unpack_weights computes.  onnxruntime folds the Casts and Muls into float32 initializers when
    it loads the graph (constant folding), so a run computes exactly as before."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))

    def shrink(graph: onnx.GraphProto) -> None:
        kept, nodes = [], []
        for init in graph.initializer:
            if init.data_type == TensorProto.FLOAT and int(np.prod(init.dims)) >= _MIN_STORED_SMALL:
                values = numpy_helper.to_array(init)
                quantised = exact_int8(values)
                if quantised is not None:
                    codes, scale = quantised
                    kept += [numpy_helper.from_array(codes, f"{init.name}.int8"),
                             numpy_helper.from_array(scale, f"{init.name}.int8_scale")]
                    nodes += [helper.make_node("Cast", [f"{init.name}.int8"], [f"{init.name}.int8_float"], to=TensorProto.FLOAT),
                              helper.make_node("Mul", [f"{init.name}.int8_float", f"{init.name}.int8_scale"], [init.name])]
                    continue
                half = values.astype(np.float16)
                if np.array_equal(half.astype(np.float32), values):
                    kept.append(numpy_helper.from_array(half, f"{init.name}.float16"))
                    nodes.append(helper.make_node("Cast", [f"{init.name}.float16"], [init.name], to=TensorProto.FLOAT))
                    continue
            kept.append(init)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    shrink(attr.g)
        if nodes:
            del graph.initializer[:]
            graph.initializer.extend(kept)
            nodes += list(graph.node)
            del graph.node[:]
            graph.node.extend(nodes)

    shrink(model.graph)
    onnx.save(model, str(path))


def _ort_optimised(src: Path, dst: Path) -> None:
    """`src` as onnxruntime optimises it (constant folding, fusions: the "extended" level, which is the same
    on every CPU, unlike the layout level that the runtime still applies at load), written to `dst`.  A
    session then starts without redoing that work: 0.13-0.17 s instead of 0.32 s for the acoustic graph."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])


@dataclass
class GraphSpec:
    """One graph to export: the module, example inputs to trace / export it with, and its named I/O."""

    module: nn.Module
    args: tuple
    inputs: list[str]
    outputs: list[str]
    dynamic: dict[str, dict[int, str]]


_TOKENS = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 0, 0, 0, 0]])  # [B, L] example batch, padded
_TOKEN_LENGTHS = torch.tensor([7, 3])
_CONTROLS = (torch.tensor(1.0), torch.tensor(0.0))  # speed, pitch_shift
_REFINE_CONTROLS = (torch.tensor(0.667), torch.tensor(2))  # temperature, refine_steps


def _scripted_parts(model: nn.Module) -> tuple[RegulatedFront, Refine]:
    """The front (traced encoder/variance + scripted length regulation) and the refiner (traced velocity network
    in the scripted Euler loop), shared by both kinds of voice."""
    from tts.models.refiner import EulerLoop, noise_table

    d, m, t = model.mel_proj.in_features, model.n_mels, 23
    mask = (torch.arange(t)[None, :] < torch.tensor([t, 15])[:, None])[:, None, :].float()  # [B, 1, T]
    # traced with a non-zero shift so that the shift's addition is in the graph (adding 0.0 is exact)
    front = torch.jit.trace(_Front(model), (_TOKENS, _TOKEN_LENGTHS, torch.tensor(0.5)))
    net = torch.jit.trace(model.refiner.net, (torch.randn(2, m, t), torch.tensor([0.0, 0.5]), torch.randn(2, d + m, t), mask))
    refine = Refine(EulerLoop(net), noise_table(), model.mel_mean.float(), model.mel_std.float(),
                    float(model.mel_pad_value), float(model.refiner.sigma), m)
    return RegulatedFront(front, int(model.min_token_frames), int(model.max_frames)), refine


def acoustic_graph(model: nn.Module) -> torch.jit.ScriptModule:
    """The parallel NAR's inference as one scripted module: traced encoder/variance, decoder and velocity
    network, glued by the model's own scriptable functions (length regulation, noise, the Euler loop)."""
    front, refine = _scripted_parts(model)
    t = 23
    frame_mask = torch.arange(t)[None, :] < torch.tensor([t, 15])[:, None]
    decoder = torch.jit.trace(_Decoder(model), (torch.randn(2, t, model.mel_proj.in_features), frame_mask))
    return torch.jit.script(AcousticGraph(front, decoder, refine))


def parallel_graphs(model: nn.Module) -> dict[str, GraphSpec]:
    """A parallel voice: ONE acoustic graph (tokens and controls -> mels)."""
    return {"acoustic": GraphSpec(
        acoustic_graph(model), (_TOKENS, _TOKEN_LENGTHS, *_CONTROLS, *_REFINE_CONTROLS, torch.tensor([123, 4567])),
        list(ACOUSTIC_INPUTS), list(ACOUSTIC_OUTPUTS),
        {"tokens": {0: "B", 1: "L"}, "token_lengths": {0: "B"}, "noise_offsets": {0: "B"},
         "mels": {0: "B", 2: "T"}, "mel_lengths": {0: "B"}, "truncated": {0: "B"}, "durations": {0: "B", 1: "L"}})}


def block_graphs(model: nn.Module) -> dict[str, GraphSpec]:
    """A block-mode voice: three graphs that the engine strings together block by block (tts.runtime.onnx_blocks):
    front (tokens -> regulated frames), block (one decoder block with its cache: BlockStep) and refine (a window
    of coarse frames -> raw mel: Refine)."""
    from tts.models.blockwise import BLOCK_STATE, BlockStep

    front, refine = _scripted_parts(model)
    d, m = model.mel_proj.in_features, model.n_mels
    step = BlockStep(model.decoder, model.mel_proj, model.block_prenet, int(model.block_past_frames)).eval()
    # traced on a block of n = 5 frames at start 16 after a cache of P' = 7 frames: every size distinct, so that
    # none is mistaken for another (the graph is general in B, n and P')
    b, n, past = 2, 5, 7
    mask = torch.arange(n)[None, :] < torch.tensor([n, 3])[:, None]
    state = step.initial_state(b, torch.zeros(()))
    state = state._replace(prev_mel=torch.randn_like(state.prev_mel), keys=torch.randn(*state.keys.shape[:3], past, state.keys.shape[4]),
                           values=torch.randn(*state.values.shape[:3], past, state.values.shape[4]),
                           key_mask=torch.arange(past)[None, :] < torch.tensor([past, 4])[:, None],
                           conv1=torch.randn_like(state.conv1), conv2=torch.randn_like(state.conv2))
    block_args = (torch.randn(b, n, d), mask, torch.tensor(16), *state)
    state_axes = {"prev_mel": {0: "B"}, "keys": {1: "B", 3: "P"}, "values": {1: "B", 3: "P"}, "key_mask": {0: "B", 1: "P"},
                  "conv1": {1: "B"}, "conv2": {1: "B"}}
    t = 23
    frame_mask = torch.arange(t)[None, :] < torch.tensor([t, 15])[:, None]
    return {
        "front": GraphSpec(torch.jit.script(front), (_TOKENS, _TOKEN_LENGTHS, *_CONTROLS), list(FRONT_INPUTS),
                           list(FRONT_OUTPUTS),
                           {"tokens": {0: "B", 1: "L"}, "token_lengths": {0: "B"}, "frames": {0: "B", 1: "T"},
                            "frame_mask": {0: "B", 1: "T"}, "mel_lengths": {0: "B"}, "truncated": {0: "B"},
                            "durations": {0: "B", 1: "L"}}),
        "block": GraphSpec(torch.jit.trace(BlockGraph(step), block_args), block_args, ["frames", "mask", "start", *BLOCK_STATE],
                           ["cond", "coarse", *(f"next_{s}" for s in BLOCK_STATE)],
                           {"frames": {0: "B", 1: "n"}, "mask": {0: "B", 1: "n"}, **state_axes, "cond": {0: "B", 2: "n"},
                            "coarse": {0: "B", 2: "n"},
                            **{f"next_{k}": {i: ("P_next" if v == "P" else v) for i, v in axes.items()}
                               for k, axes in state_axes.items()}}),
        "refine": GraphSpec(torch.jit.script(refine), (torch.randn(2, m, t), torch.randn(2, d, t), frame_mask,
                                                       torch.tensor([123, 4567]), torch.tensor(40), *_REFINE_CONTROLS),
                            list(REFINE_INPUTS), ["mels"],
                            {"coarse": {0: "B", 2: "w"}, "cond": {0: "B", 2: "w"}, "frame_mask": {0: "B", 1: "w"},
                             "noise_offsets": {0: "B"}, "mels": {0: "B", 2: "w"}}),
    }


NOISE_TABLE_FILE = "noise_table.f32"  # the refiner's noise table, stored once beside the graphs that read it


def _share_noise_table(out: Path, files: Sequence[Path]) -> list[str]:
    """Move the refiner's noise table (tts.noise's gaussian table, [GAUSSIAN_PERIOD] float32: 4.2 MB, which every
    graph drawing start noise carries) out of `files` into ONE external-data file NOISE_TABLE_FILE that they all
    reference (ONNX external data, read by onnxruntime relative to the graph).  Returns the graphs' names that
    now read it."""
    import numpy as np
    import onnx
    from onnx import external_data_helper, numpy_helper

    from tts.noise import gaussian_table

    table = gaussian_table()
    users = []
    for file in files:
        model = onnx.load(str(file))
        found = [t for t in model.graph.initializer if list(t.dims) == [table.size]
                 and t.data_type == onnx.TensorProto.FLOAT and np.array_equal(numpy_helper.to_array(t), table)]
        for tensor in found:
            tensor.CopyFrom(numpy_helper.from_array(table, tensor.name))  # as raw bytes, which the reference replaces
            external_data_helper.set_external_data(tensor, NOISE_TABLE_FILE, offset=0, length=table.nbytes)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            tensor.ClearField("raw_data")
        if found:
            onnx.save(model, str(file))
            users.append(file.name)
    if users:
        (out / NOISE_TABLE_FILE).write_bytes(table.astype("<f4").tobytes())
    return users


def _load_acoustic(path: Path):
    """A checkpoint that exports: a FastSpeech2 with its refiner, float32, eval mode."""
    from tts import checkpoint
    from tts.models.nonautoregressive import FastSpeech2

    loaded = checkpoint.load(path)
    model = loaded.model.float().eval()
    if not isinstance(model, FastSpeech2):
        raise ValueError(f"{path}: only the non-autoregressive FastSpeech2 exports to ONNX "
                         f"(an autoregressive decoder loop is not a static graph), got {type(model).__name__}")
    if model.refiner is None:
        raise ValueError(f"{path}: the model has no refiner; the ONNX engine expects the default NAR")
    return loaded, model


def default_voices() -> list[Path]:
    """Every shipped non-autoregressive model of every shipped voice (checkpoints/default.json), the default
    voice's first model first: parallel and block-mode NARs alike, so that each voice, block-wise decoding and
    streaming run on ONNX too.  (The AR is not exported: its attention loop runs on torch.)"""
    from tts.checkpoint import read_raw
    from tts.models.nonautoregressive import FastSpeech2
    from tts.runtime.release import shipped_checkpoint, shipped_defaults

    defaults = shipped_defaults()
    names = [defaults["acoustic"]] + [m for models in defaults["voices"].values() for m in models
                                      if m != defaults["acoustic"]]
    paths = [shipped_checkpoint(name) for name in names]
    nar = f"{FastSpeech2.__module__}.{FastSpeech2.__qualname__}"
    return [paths[0]] + [p for p in paths[1:] if read_raw(p)["tts"]["model_config"].get("_target_") == nar]


def shipped_vocoder_of(path: Path) -> str:
    """The vocoder an acoustic checkpoint speaks with: its shipped voice's (tts.runtime.release.model_vocoder)
    when it is a shipped model's file, else the default vocoder."""
    from tts.paths import CHECKPOINT_DIR
    from tts.runtime.release import model_vocoder

    shipped = (CHECKPOINT_DIR / f"{path.stem}.pt").resolve() == path.resolve()
    return model_vocoder(path.stem if shipped else None)


def vocoder_key(name: str, taken: dict[str, str] | None = None) -> str:
    """A vocoder's name in the manifest and its graphs' file names: a shipped name as it is ("source-filter"),
    a checkpoint file by its stem (characters other than letters, digits, '-' and '_' as '_'); `taken` (key ->
    the vocoder it names): a key another vocoder already has gets '_' appended until it is free (a file
    /x/source-filter.pt beside the shipped "source-filter")."""
    from tts.vocoder.registry import SHIPPED

    key = name if name in SHIPPED else "".join(c if c.isalnum() or c in "-_" else "_" for c in Path(name).stem)
    while taken and taken.get(key, name) != name:
        key += "_"
    return key


def export_vocoder(out: Path, name: str, key: str, mel_config: Any) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """One source-filter vocoder (`name`) as its graphs into `out`, named by `key` (`vocoder_key`): -> (its manifest
    entry, its graphs' entries, its file).  Graphs "KEY.vocoder" (network + F0 decoding) and, with a magnitude
    correction, "KEY.vocoder_correction"."""
    from tts.vocoder.registry import SHIPPED, load_vocoder
    from tts.vocoder.source_filter import SourceFilterVocoder

    voc = load_vocoder(name, mel_config)
    if not isinstance(voc, SourceFilterVocoder):
        raise ValueError(f"vocoder {name!r}: only the source-filter vocoder exports (its DSP runs in numpy), "
                         f"got {type(voc).__name__}")
    voc = voc.float().eval()
    graphs = {f"{key}.vocoder": {"file": f"{key}.vocoder.onnx"}}
    with _export_attention():
        _export_graph(VocoderFrames(voc), (torch.randn(1, mel_config.n_mels, 23) - 5.0,), out / f"{key}.vocoder.onnx",
                      ["mel"], ["f0", "voiced", "harmonic_cepstrum", "noise_cepstrum"],
                      {"mel": {0: "B", 2: "T"}, "f0": {0: "B", 1: "T"}, "voiced": {0: "B", 1: "T"},
                       "harmonic_cepstrum": {0: "B", 1: "T"}, "noise_cepstrum": {0: "B", 1: "T"}})
    correction = {}
    if voc.correction is not None:  # the magnitude correction's network; its DSP is tts.vocoder.correction
        c = voc.correction
        with _export_attention():
            _export_graph(CorrectionGains(c), (torch.randn(1, mel_config.n_mels, 23) - 5.0,
                                               torch.rand(1, c.fft_size // 2 + 1, 23)),
                          out / f"{key}.vocoder_correction.onnx", ["mel", "magnitude"], ["log_gain"],
                          {"mel": {0: "B", 2: "F"}, "magnitude": {0: "B", 2: "F"}, "log_gain": {0: "B", 2: "F"}})
        graphs[f"{key}.vocoder_correction"] = {"file": f"{key}.vocoder_correction.onnx"}
        correction = {"correction": {"graph": f"{key}.vocoder_correction", "fft_size": c.fft_size,
                                     "receptive_frames": c.receptive_frames}}
    # Synthesis: the DSP settings; receptive_frames: the network's reach (streaming)
    entry = {"synthesis": voc.synthesis.to_dict(), "source": f"vocoder:{key}", "graph": f"{key}.vocoder",
             "receptive_frames": voc.receptive_frames, **correction}
    return entry, graphs, SHIPPED[name][0] if name in SHIPPED else Path(name)


def export(out_dir: str | Path, acoustic: str | Path | Sequence[str | Path] | None = None,
           vocoder: str | dict[str, str] | None = None) -> ExportResult:
    """Export voices (acoustic checkpoints; default `default_voices()`, the first being the default voice), each
    with its source-filter vocoder (`vocoder`: one for all of them, or voice name -> vocoder; a voice it does not
    name: a shipped model's voice's own, else the shipped default vocoder) into `out_dir`; returns the manifest
    written there.  A voice is named by its checkpoint's file stem; a vocoder several voices share is exported once."""
    from tts.models.blockwise import BLOCK_STATE, receptive_half_width

    paths = default_voices() if acoustic is None else [Path(acoustic)] if isinstance(acoustic, (str, Path)) else \
        [Path(p) for p in acoustic]
    names = [p.stem for p in paths]
    if not paths or len(set(names)) != len(names):
        raise ValueError(f"need one or more acoustic checkpoints with distinct file names, got {[str(p) for p in paths]}")
    if isinstance(vocoder, dict) and set(vocoder) - set(names):
        raise ValueError(f"vocoders for {sorted(set(vocoder) - set(names))}: no such voice (voices: {names})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    voices: dict[str, Any] = {}
    graphs: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    vocoders: dict[str, Any] = {}
    mel_config = None
    for name, path in zip(names, paths):
        loaded, model = _load_acoustic(path)
        if mel_config is not None and loaded.mel_config != mel_config:
            raise ValueError(f"{path}: its mel config differs from {paths[0]}'s (one mel definition serves every voice)")
        mel_config = loaded.mel_config
        block = model.block_prenet is not None
        with _export_attention():  # traced with the export's attention (_attention_for_export)
            specs = block_graphs(model) if block else parallel_graphs(model)
            for part, spec in specs.items():
                _export_graph(spec.module, spec.args, out / f"{name}.{part}.onnx", spec.inputs, spec.outputs, spec.dynamic)
        for part in specs:
            graphs[f"{name}.{part}"] = {"file": f"{name}.{part}.onnx"}
        sources[name] = file_entry(path, path=_portable(path))
        chosen = vocoder.get(name) if isinstance(vocoder, dict) else vocoder
        vocoder_name = chosen or shipped_vocoder_of(path)
        # the vocoders exported so far, by key -> the vocoder each was asked as (its source entry's "name")
        key = vocoder_key(vocoder_name, {k: sources[v["source"]]["name"] for k, v in vocoders.items()})
        if key not in vocoders:
            vocoders[key], vocoder_graphs, vocoder_file = export_vocoder(out, vocoder_name, key, mel_config)
            graphs.update(vocoder_graphs)
            sources[vocoders[key]["source"]] = file_entry(vocoder_file, name=vocoder_name, path=_portable(vocoder_file))
        voices[name] = {
            "decoding": "block" if block else "parallel",
            "source": name,
            "vocoder": key,
            "frontend": loaded.meta.frontend,
            "controls": model.inference_spec().defaults,  # the voice's own: Controls' defaults on the ONNX engine
            "graphs": {part: f"{name}.{part}" for part in specs},
            **({"block": {"state": list(BLOCK_STATE), "past_frames": int(model.block_past_frames),
                          "refiner_half_width": receptive_half_width(model.refiner)}} if block else {}),
        }
    readers = _share_noise_table(out, [out / g["file"] for g in graphs.values()])
    for entry in graphs.values():
        entry.update(file_entry(out / entry["file"]), **({"external_data": [NOISE_TABLE_FILE]} if entry["file"] in readers else {}))
    manifest = {
        "format": FORMAT,
        "default_voice": names[0],
        "mel_config": mel_config.to_dict(),
        "voices": voices,
        "vocoders": vocoders,
        "sources": sources,
        "graphs": graphs,
        "external_data": {NOISE_TABLE_FILE: file_entry(out / NOISE_TABLE_FILE)} if readers else {},
        "exporter": {"torch": torch.__version__, "opset": OPSET, "weights": WEIGHT_STORAGE},
    }
    for stale in set(out.glob("*.onnx")) - {out / g["file"] for g in graphs.values()} - {out / f for f in manifest["external_data"]}:
        stale.unlink()  # a graph of an earlier export (another voice, the v4 layout) that nothing lists now
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(out / MANIFEST)  # the manifest last: a half-written export has none and is refused
    return ExportResult(out, manifest)


def warn_training_checkpoint(path: Path) -> None:
    """A voice's controls (refine steps, temperature) come from its checkpoint's config: a released checkpoint
    carries the shipped ones (recipes.release), a training checkpoint its training values (e.g. K = 4, T = 1.0).
    Say so on stderr when a training checkpoint (one with optimizer state) is exported directly."""
    from tts.checkpoint import read_raw

    raw = read_raw(path)
    if "optimizer_states" in raw:
        print(f"note: {path} is a training checkpoint: the export takes its controls from its training config, "
              f"not the shipped ones; release it first (python -m recipes.release) for the shipped controls",
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the ONNX graphs and manifest.json")
    p.add_argument("--checkpoint", type=Path, action="append", default=None,
                   help="a NAR checkpoint to export as a voice (repeat for more; the first is the default voice; "
                        "default: the shipped default model and the shipped block-mode NAR)")
    p.add_argument("--vocoder", default=None, help="source-filter vocoder name or checkpoint for every voice "
                                                   "(default: each shipped voice's own, else the shipped default)")
    args = p.parse_args(argv)
    from tts.checkpoint import CheckpointError

    try:
        for path in args.checkpoint or []:
            warn_training_checkpoint(path)
        result = export(args.out, args.checkpoint, args.vocoder)
    except (CheckpointError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 4 if isinstance(e, (CheckpointError, FileNotFoundError)) else 2
    graphs = result.manifest["graphs"].values()
    files = [g["file"] for g in graphs] + list(result.manifest["external_data"])
    size = sum((result.out_dir / f).stat().st_size for f in files)
    print(f"wrote {len(graphs)} ONNX graphs ({size / 1e6:.1f} MB) for voices {', '.join(result.manifest['voices'])} "
          f"and {MANIFEST} to {result.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

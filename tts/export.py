"""ONNX export of the default voice: `python -m tts.export --out DIR`.

Writes the shipped default acoustic model (checkpoints/default.json: the NAR with its flow-matching
refiner) and the default vocoder (the source-filter vocoder) as two ONNX graphs plus `manifest.json`,
which `tts.runtime.onnx_engine.OnnxEngine` runs with onnxruntime (no torch):

    acoustic.onnx   tokens [B, L] int64, token_lengths [B] int64, speed [] float, pitch_shift [] float,
                    temperature [] float, refine_steps [] int64, noise_offsets [B] int64
                    -> mels [B, M, T] raw log-mel (padding = the model's pad value), mel_lengths [B] int64,
                       truncated [B] bool
    vocoder.onnx    mel [B, M, T] raw log-mel -> f0 [B, T] Hz, voiced [B, T] 0/1,
                    harmonic_cepstrum [B, T, Lh], noise_cepstrum [B, T, Ln]

The acoustic graph is the model's own inference maths, traced and scripted, not re-written: the encoder
and variance adaptor, `durations_from_log`, the length regulator (`clip_durations`, `expand_frames`), the
decoder, the refiner's start noise (`gather_noise` from tts.noise's table, which the graph carries) and its
sampling loop (`EulerLoop`, scripted into one ONNX Loop over K = refine_steps), and `denormalise_mel`.
The controls and the noise offsets (tts.noise.item_noise_seed of the run's seed and each item's index) are
inputs, so the ONNX engine computes nothing of the model.  The vocoder graph is the network and its F0 /
voicing decoding; the DSP render (oscillator, filters, overlap-add) is tts.vocoder.render, the one render
the torch vocoder trains and speaks with, run on numpy.

The manifest records what a runtime needs and nothing it could get wrong silently: the mel config, the
text frontend (symbol table, length limit), the voice's default controls (the checkpoint's own), the DSP
settings, the sha256 of each source checkpoint (so a stale export is detected) and of each graph (so a
corrupt one is refused).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts.models.layers.length_regulator import clip_durations, durations_from_log, expand_frames
from tts.models.nonautoregressive import denormalise_mel
from tts.models.refiner import gather_noise, start_point
# the engine's (torch-free) names of what it reads
from tts.runtime.onnx_engine import ACOUSTIC_INPUTS, FORMAT, GRAPHS, MANIFEST

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


class AcousticGraph(nn.Module):
    """FastSpeech2.infer (parallel decoding, no early stop) as one scriptable module over traced parts."""

    def __init__(self, front: nn.Module, decoder: nn.Module, loop: nn.Module, table: torch.Tensor,
                 mel_mean: torch.Tensor, mel_std: torch.Tensor, pad_value: float, sigma: float, min_frames: int,
                 max_frames: int, n_mels: int) -> None:
        super().__init__()
        self.front, self.decoder, self.loop = front, decoder, loop
        self.register_buffer("table", table)
        self.register_buffer("mel_mean", mel_mean)
        self.register_buffer("mel_std", mel_std)
        self.pad_value, self.sigma, self.n_mels = pad_value, sigma, n_mels
        self.min_frames, self.max_frames = min_frames, max_frames

    def forward(self, tokens: torch.Tensor, token_lengths: torch.Tensor, speed: torch.Tensor,
                pitch_shift: torch.Tensor, temperature: torch.Tensor, refine_steps: torch.Tensor,
                noise_offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden, log_d, token_mask = self.front(tokens, token_lengths, pitch_shift)
        d = durations_from_log(log_d, token_mask, float(speed), self.min_frames)
        d, truncated = clip_durations(d, self.max_frames)
        lengths = d.sum(1)  # [B]
        n = max(int(lengths.max()), 1)
        frames, _ = expand_frames(hidden, d, n)
        frame_mask = torch.arange(n, device=tokens.device)[None, :] < lengths[:, None]  # [B, T]
        coarse, cond = self.decoder(frames, frame_mask)
        m = frame_mask[:, None, :].to(coarse.dtype)
        steps = int(refine_steps)
        # K = 0 is the coarse mel exactly (FlowMatchingRefiner.sample): no noise then
        temp = float(temperature) * float(min(steps, 1))
        x0 = start_point(coarse, gather_noise(self.table, noise_offsets, self.n_mels, n), m, temp, self.sigma)
        x, _ = self.loop(x0, torch.cat([cond, coarse * m], dim=1), m, steps)  # == FlowMatchingRefiner.condition
        return denormalise_mel(x, frame_mask, self.mel_mean, self.mel_std, self.pad_value), lengths, truncated


class VocoderFrames(nn.Module):
    """SourceFilterVocoder.frame_params + decode: mel -> (f0, voiced, harmonic / noise cepstra [B, T, L])."""

    def __init__(self, vocoder: nn.Module) -> None:
        super().__init__()
        self.vocoder = vocoder

    def forward(self, mel: torch.Tensor):
        p = self.vocoder.frame_params(mel)
        f0, voiced = self.vocoder.decode(p)
        return f0, voiced, p.harmonic_cepstrum, p.noise_cepstrum


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


def _ort_optimised(src: Path, dst: Path) -> None:
    """`src` as onnxruntime optimises it (constant folding, fusions: the "extended" level, which is the same
    on every CPU, unlike the layout level that the runtime still applies at load), written to `dst`.  A
    session then starts without redoing that work: 0.13-0.17 s instead of 0.32 s for the acoustic graph."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])


def acoustic_graph(model: nn.Module) -> torch.jit.ScriptModule:
    """The NAR's inference as one scripted module: traced encoder/variance, decoder and velocity network,
    glued by the model's own scriptable functions (length regulation, noise, the Euler loop)."""
    from tts.models.refiner import EulerLoop, noise_table

    d, m = model.mel_proj.in_features, model.n_mels
    tokens = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 0, 0, 0, 0]])
    lengths = torch.tensor([7, 3])
    t = 23
    frame_mask = torch.arange(t)[None, :] < torch.tensor([t, 15])[:, None]
    mask = frame_mask[:, None, :].float()
    # traced with a non-zero shift so that the shift's addition is in the graph (adding 0.0 is exact)
    front = torch.jit.trace(_Front(model), (tokens, lengths, torch.tensor(0.5)))
    decoder = torch.jit.trace(_Decoder(model), (torch.randn(2, t, d), frame_mask))
    net = torch.jit.trace(model.refiner.net, (torch.randn(2, m, t), torch.tensor([0.0, 0.5]), torch.randn(2, d + m, t), mask))
    graph = AcousticGraph(front, decoder, EulerLoop(net), noise_table(), model.mel_mean.float(), model.mel_std.float(),
                          float(model.mel_pad_value), float(model.refiner.sigma), int(model.min_token_frames),
                          int(model.max_frames), m)
    return torch.jit.script(graph)


def export(out_dir: str | Path, acoustic: str | Path | None = None, vocoder: str | None = None) -> ExportResult:
    """Export the default voice (or the given acoustic checkpoint and source-filter vocoder) into `out_dir`;
    returns the manifest written there."""
    from tts import checkpoint
    from tts.models.nonautoregressive import FastSpeech2
    from tts.runtime.release import shipped_checkpoint, shipped_defaults
    from tts.vocoder.registry import SHIPPED, load_vocoder
    from tts.vocoder.source_filter import SourceFilterVocoder

    defaults = shipped_defaults() if acoustic is None or vocoder is None else {}
    acoustic_path = Path(acoustic) if acoustic is not None else shipped_checkpoint(defaults["acoustic"])
    vocoder_name = vocoder or defaults["vocoder"]
    loaded = checkpoint.load(acoustic_path)
    model = loaded.model.float().eval()
    if not isinstance(model, FastSpeech2):
        raise ValueError(f"{acoustic_path}: only the non-autoregressive FastSpeech2 exports to ONNX "
                         f"(an autoregressive decoder loop is not a static graph), got {type(model).__name__}")
    if model.refiner is None:
        raise ValueError(f"{acoustic_path}: the model has no refiner; the ONNX engine expects the default NAR")
    voc = load_vocoder(vocoder_name, loaded.mel_config)
    if not isinstance(voc, SourceFilterVocoder):
        raise ValueError(f"vocoder {vocoder_name!r}: only the source-filter vocoder exports (its DSP runs in numpy), "
                         f"got {type(voc).__name__}")
    voc = voc.float().eval()
    vocoder_file = SHIPPED[vocoder_name][0] if vocoder_name in SHIPPED else Path(vocoder_name)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    m = model.n_mels
    tokens, lengths = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 0, 0, 0, 0]]), torch.tensor([7, 3])
    with _export_attention():
        _export_graph(acoustic_graph(model), (tokens, lengths, torch.tensor(1.0), torch.tensor(0.0), torch.tensor(0.667),
                                              torch.tensor(2), torch.tensor([123, 4567])),
                      out / "acoustic.onnx", list(ACOUSTIC_INPUTS), ["mels", "mel_lengths", "truncated"],
                      {"tokens": {0: "B", 1: "L"}, "token_lengths": {0: "B"}, "noise_offsets": {0: "B"},
                       "mels": {0: "B", 2: "T"}, "mel_lengths": {0: "B"}, "truncated": {0: "B"}})
        _export_graph(VocoderFrames(voc), (torch.randn(1, m, 23) - 5.0,), out / "vocoder.onnx", ["mel"],
                      ["f0", "voiced", "harmonic_cepstrum", "noise_cepstrum"],
                      {"mel": {0: "B", 2: "T"}, "f0": {0: "B", 1: "T"}, "voiced": {0: "B", 1: "T"},
                       "harmonic_cepstrum": {0: "B", 1: "T"}, "noise_cepstrum": {0: "B", 1: "T"}})

    syn = voc.synthesis  # the DSP settings: tts.vocoder.render.Synthesis
    manifest = {
        "format": FORMAT,
        "mel_config": loaded.mel_config.to_dict(),
        "frontend": loaded.meta.frontend,
        "controls": model.inference_spec().defaults,  # the voice's own: Controls' defaults on the ONNX engine
        "vocoder": syn.to_dict(),
        "sources": {
            "acoustic": file_entry(acoustic_path, path=_portable(acoustic_path)),
            "vocoder": file_entry(vocoder_file, name=vocoder_name, path=_portable(vocoder_file)),
        },
        "graphs": {name: {"file": f"{name}.onnx", **file_entry(out / f"{name}.onnx")} for name in GRAPHS},
        "exporter": {"torch": torch.__version__, "opset": OPSET},
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.replace(out / MANIFEST)  # the manifest last: a half-written export has none and is refused
    return ExportResult(out, manifest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the ONNX graphs and manifest.json")
    p.add_argument("--checkpoint", type=Path, default=None, help="NAR checkpoint (default: the shipped default model)")
    p.add_argument("--vocoder", default=None, help="source-filter vocoder name or checkpoint (default: the shipped one)")
    args = p.parse_args(argv)
    from tts.checkpoint import CheckpointError

    try:
        result = export(args.out, args.checkpoint, args.vocoder)
    except (CheckpointError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 4 if isinstance(e, (CheckpointError, FileNotFoundError)) else 2
    size = sum((result.out_dir / g["file"]).stat().st_size for g in result.manifest["graphs"].values())
    print(f"wrote {len(GRAPHS)} ONNX graphs ({size / 1e6:.1f} MB) and {MANIFEST} to {result.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

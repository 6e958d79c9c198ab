"""ONNX export of the default voice: `python -m tts.export --out DIR`.

Writes the shipped default acoustic model (checkpoints/default.json: the NAR with its flow-matching
refiner) and the default vocoder (the source-filter vocoder) as four ONNX graphs plus `manifest.json`,
which `tts.onnx_runtime.OnnxSynthesizer` runs with onnxruntime alone (no torch):

    acoustic_encoder.onnx  tokens [B, L] int64, token_lengths [B] int64, pitch_shift [] float32
                           -> hidden [B, L, D] (encoder + pitch/energy embeddings), log_durations [B, L]
    acoustic_decoder.onnx  frames [B, T, D], frame_lengths [B] int64
                           -> coarse [B, M, T] (normalised mel, zero on padding), cond [B, D, T]
    refiner_velocity.onnx  x [B, M, T], t [B], coarse [B, M, T], cond [B, D, T], mask [B, 1, T]
                           -> velocity [B, M, T]  (one Euler step's network evaluation)
    vocoder_network.onnx   mel [B, M, T] raw log-mel -> params [B, n_bins + 1 + Lh + Ln, T]

Why this split.  The parts with data-dependent control flow stay outside the graphs, in numpy, as
small exact ports of the torch code: rounding the predicted durations and expanding tokens to frames
(the output length depends on the values), the K Euler steps of the refiner (K and the temperature are
run-time controls; the start noise is torch's per-item seeded normal noise, reproduced bit for bit up
to float rounding by `tts.onnx_runtime.torch_randn`), the vocoder's F0 decoding and its DSP render
(float64 oscillator phase, counter-based noise, STFT filtering, overlap-add).  Every graph is a pure
function of its inputs, so parity with eager torch is a float-rounding question (tests/test_onnx.py).

The manifest records what a runtime needs and nothing it could get wrong silently: the mel config, the
text frontend (symbol table, length limit), the controls (default.json's K and temperature), the model
constants used by the numpy parts (mel mean/std, refiner sigma, F0 bins, DSP settings), the sha256 of
each source checkpoint (so a stale export is detected) and of each graph (so a corrupt one is refused).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tts.onnx_runtime import FORMAT, GRAPHS, MANIFEST  # the runtime's (torch-free) names of what it reads

OPSET = 17


def file_entry(file: str | Path, **extra: Any) -> dict[str, Any]:
    """A manifest's record of a file: sha256 (the identity) plus size and mtime_ns (a runtime that finds both
    unchanged skips hashing; tts.onnx_runtime.file_matches)."""
    st = Path(file).stat()
    return {**extra, "sha256": sha256_file(file), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- the graphs: thin wrappers over the models' own sub-modules (no copied maths) ------------------
class AcousticEncoder(nn.Module):
    """FastSpeech2.infer up to the duration prediction, with pitch_shift as an input (0 = as predicted;
    adding 0.0 is exact, so one graph serves both) and pitch/energy scale 1 (not run-time controls)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor, token_lengths: torch.Tensor, pitch_shift: torch.Tensor):
        m = self.model
        mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < token_lengths[:, None]  # [B, L]
        h = m.encode(tokens, mask)
        var = m.variance
        log_d = var.duration_predictor(h, mask)
        pitch = var.pitch_predictor(h, mask)
        energy = var.energy_predictor(h, mask)
        # VarianceAdaptor.control_pitch's shift, in normalised units (shift * ln 2 / 12 / log_std)
        pitch = (pitch + pitch_shift * (math.log(2.0) / 12.0) / var.pitch_log_std) * mask.to(pitch.dtype)
        hidden = h + var.pitch_embedding(pitch, mask) + var.energy_embedding(energy, mask)
        return hidden, log_d


class AcousticDecoder(nn.Module):
    """Regulated frames -> (normalised coarse mel, the refiner's condition = decoder hidden, channels first)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, frames: torch.Tensor, frame_lengths: torch.Tensor):
        mask = torch.arange(frames.shape[1], device=frames.device)[None, :] < frame_lengths[:, None]  # [B, T]
        hidden, coarse = self.model.decode(frames, mask)
        return coarse, hidden.transpose(1, 2)


class RefinerVelocity(nn.Module):
    def __init__(self, refiner: nn.Module) -> None:
        super().__init__()
        self.refiner = refiner

    def forward(self, x, t, coarse, cond, mask):
        return self.refiner.velocity(x, t, coarse, cond, mask)


class VocoderNetwork(nn.Module):
    """SourceFilterVocoder.frame_params as one tensor (the head's channels, split by the runtime)."""

    def __init__(self, vocoder: nn.Module) -> None:
        super().__init__()
        self.vocoder = vocoder

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        p = self.vocoder.frame_params(mel)
        return torch.cat([p.f0_logits, p.voicing_logits[:, None], p.harmonic_cepstrum.transpose(1, 2),
                          p.noise_cepstrum.transpose(1, 2)], dim=1)


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


def _export_graph(module: nn.Module, args: tuple, path: Path, inputs: list[str], outputs: list[str],
                  dynamic: dict[str, dict[int, str]]) -> None:
    # The TorchScript exporter: it needs neither `onnxscript` nor the dynamo stack and traces these graphs
    # exactly (their only Python branches depend on shapes and configuration, never on values).  Attention is
    # traced through `_attention_for_export` (the same maths, a lighter graph), restored afterwards.
    import torch.nn.functional as F

    sdpa = F.scaled_dot_product_attention
    F.scaled_dot_product_attention = _attention_for_export
    try:
        torch.onnx.export(module.eval(), args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)
    finally:
        F.scaled_dot_product_attention = sdpa


def export(out_dir: str | Path, acoustic: str | Path | None = None, vocoder: str | None = None) -> ExportResult:
    """Export the default voice (or the given shipped/compatible acoustic checkpoint and source-filter
    vocoder) into `out_dir`; returns the manifest written there."""
    import warnings

    from tts import checkpoint
    from tts.inference import shipped_checkpoint, shipped_controls, shipped_defaults
    from tts.models.nonautoregressive import FastSpeech2
    from tts.vocoder.registry import SHIPPED, load_vocoder
    from tts.vocoder.source_filter import SourceFilterVocoder

    defaults = shipped_defaults() if acoustic is None or vocoder is None else {}
    acoustic_path = Path(acoustic) if acoustic is not None else shipped_checkpoint(defaults["acoustic"])
    vocoder_name = vocoder or defaults["vocoder"]
    loaded = checkpoint.load(acoustic_path)
    model = loaded.model.eval()
    if not isinstance(model, FastSpeech2):
        raise ValueError(f"{acoustic_path}: only the non-autoregressive FastSpeech2 exports to ONNX "
                         f"(an autoregressive decoder loop is not a static graph), got {type(model).__name__}")
    if model.refiner is None:
        raise ValueError(f"{acoustic_path}: the model has no refiner; the ONNX runtime expects the default NAR")
    voc = load_vocoder(vocoder_name, loaded.mel_config)
    if not isinstance(voc, SourceFilterVocoder):
        raise ValueError(f"vocoder {vocoder_name!r}: only the source-filter vocoder exports (its DSP runs in numpy), "
                         f"got {type(voc).__name__}")
    vocoder_file = SHIPPED[vocoder_name][0] if vocoder_name in SHIPPED else Path(vocoder_name)
    controls = shipped_controls(acoustic_path)
    controls = {"refine_steps": int(controls.get("refine_steps", model.refine_steps)),
                "temperature": float(controls.get("temperature", model.refine_temperature))}

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d, m = model.mel_proj.in_features, model.n_mels
    tokens = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 0, 0, 0, 0]])
    lengths = torch.tensor([7, 3])
    t = 23
    frames = torch.randn(2, t, d)
    frame_lengths = torch.tensor([t, 15])
    mask = (torch.arange(t)[None, :] < frame_lengths[:, None]).float()[:, None, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about shape-derived Python ints (they are exact here)
        _export_graph(AcousticEncoder(model), (tokens, lengths, torch.tensor(0.0)), out / "acoustic_encoder.onnx",
                      ["tokens", "token_lengths", "pitch_shift"], ["hidden", "log_durations"],
                      {"tokens": {0: "B", 1: "L"}, "token_lengths": {0: "B"}, "hidden": {0: "B", 1: "L"},
                       "log_durations": {0: "B", 1: "L"}})
        _export_graph(AcousticDecoder(model), (frames, frame_lengths), out / "acoustic_decoder.onnx",
                      ["frames", "frame_lengths"], ["coarse", "cond"],
                      {"frames": {0: "B", 1: "T"}, "frame_lengths": {0: "B"}, "coarse": {0: "B", 2: "T"},
                       "cond": {0: "B", 2: "T"}})
        _export_graph(RefinerVelocity(model.refiner),
                      (torch.randn(2, m, t), torch.tensor([0.0, 0.5]), torch.randn(2, m, t), torch.randn(2, d, t), mask),
                      out / "refiner_velocity.onnx", ["x", "t", "coarse", "cond", "mask"], ["velocity"],
                      {"x": {0: "B", 2: "T"}, "t": {0: "B"}, "coarse": {0: "B", 2: "T"}, "cond": {0: "B", 2: "T"},
                       "mask": {0: "B", 2: "T"}, "velocity": {0: "B", 2: "T"}})
        _export_graph(VocoderNetwork(voc), (torch.randn(1, m, t) - 5.0,), out / "vocoder_network.onnx",
                      ["mel"], ["params"], {"mel": {0: "B", 2: "T"}, "params": {0: "B", 2: "T"}})

    syn = voc.synthesis
    manifest = {
        "format": FORMAT,
        "mel_config": loaded.mel_config.to_dict(),
        "frontend": loaded.meta.frontend,
        "controls": controls,
        "acoustic": {
            "d_model": d, "n_mels": m,
            "mel_mean": model.mel_mean.tolist(), "mel_std": model.mel_std.tolist(),
            "mel_pad_value": float(model.mel_pad_value), "min_token_frames": int(model.min_token_frames),
            "max_frames": int(model.max_frames), "refiner_sigma": float(model.refiner.sigma),
        },
        "vocoder": {
            "f0_min": voc.bins.f0_min, "f0_max": voc.bins.f0_max, "cents_per_bin": voc.bins.cents_per_bin,
            "n_bins": voc.bins.n_bins, "harmonic_cepstrum": voc.n_harmonic, "noise_cepstrum": voc.n_noise,
            "voicing_threshold": voc.voicing_threshold, "sample_rate": syn.sample_rate,
            "hop_length": syn.hop_length, "frame_hop": syn.frame_hop, "window": syn.window,
            "cutoff_hz": syn.cutoff_hz, "seed": syn.seed,
        },
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

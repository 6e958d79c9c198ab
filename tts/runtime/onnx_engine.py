"""The ONNX engine: an exported voice (`python -m tts.export`) on onnxruntime and numpy, no torch
(tts.runtime.engine describes the interface; tts.runtime.pipeline drives it).

An export holds voices (manifest "voices"; "default_voice" the shipped default) and the vocoders they speak
with (manifest "vocoders"; each voice names its own).  A parallel
voice's acoustic graph holds the whole NAR inference (length regulation and the K refiner steps included, the
controls and noise offsets as inputs: tts/export.py); a block-wise voice's three graphs run block by block
(tts.runtime.onnx_blocks: block mode and streaming).  This engine computes nothing of the model: it feeds the
graphs, runs the vocoder graph (network + F0 decoding) and the vocoder's DSP render (tts.vocoder.render, the
one render, on numpy).  `OnnxExportError` for a missing, stale-format or corrupt export (CLI exit 4).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tts.errors import CheckpointError
from tts.noise import item_noise_seed
from tts.paths import CHECKPOINT_DIR
from tts.runtime.controls import Controls
from tts.runtime.engine import Capabilities, MelBatch, StreamPiece, TextEncoding
from tts.runtime.onnx_blocks import BlockVoice, VocoderStream, per_item
from tts.vocoder.correction import CorrectionStage, correct_whole
from tts.vocoder.render import NUMPY, RenderInput, Synthesis, hann_window, render

DEFAULT_ONNX_DIR = CHECKPOINT_DIR / "onnx"  # `python -m tts.export --out checkpoints/onnx`
MANIFEST = "manifest.json"  # the export's layout, defined here (torch-free) and imported by tts.export
# v5: vocoders by name, each voice naming its own (a voice's own fine-tuned vocoder); v4: the acoustic and front
# graphs also give each token's frames (word timestamps); v3: voices (parallel and block-wise) beside one
# vocoder; v2 held the default voice's two graphs only
FORMAT = "tts-onnx-v5"
ACOUSTIC_INPUTS = ("tokens", "token_lengths", "speed", "pitch_shift", "temperature", "refine_steps", "noise_offsets")
ACOUSTIC_OUTPUTS = ("mels", "mel_lengths", "truncated", "durations")


class OnnxExportError(CheckpointError):
    """The export folder is missing, incomplete, corrupt or from another format (CLI exit 4)."""


# --- loading -------------------------------------------------------------------------------------------
def voice_vocoder(manifest: dict[str, Any], voice: str) -> dict[str, Any]:
    """The manifest entry of the vocoder `voice` speaks with."""
    return manifest["vocoders"][manifest["voices"][voice]["vocoder"]]


def vocoder_graphs(vocoder: dict[str, Any]) -> dict[str, str]:
    """A vocoder's graphs (its manifest entry) by part: "vocoder" (network + F0 decoding) and, when the vocoder
    has its magnitude correction, "vocoder_correction" (its gain network)."""
    return {"vocoder": vocoder["graph"], **({"vocoder_correction": vocoder["correction"]["graph"]}
                                            if vocoder.get("correction") else {})}


def read_manifest(onnx_dir: str | Path, verify: bool = True) -> dict[str, Any]:
    """The export's manifest.json, checked: format, every graph present and (verify) with its recorded
    sha256.  OnnxExportError naming the problem and the command that makes a good export."""
    folder = Path(onnx_dir)
    fix = f"run `python -m tts.export --out {folder}`"
    path = folder / MANIFEST
    if not folder.is_dir():
        raise OnnxExportError(f"no ONNX export at {folder} (folder missing): {fix}")
    if not path.is_file():
        raise OnnxExportError(f"no ONNX export at {folder} ({MANIFEST} missing; an interrupted export?): {fix}")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise OnnxExportError(f"{path} is corrupt ({e}): {fix}") from None
    if not isinstance(manifest, dict):
        raise OnnxExportError(f"{path} is not a manifest: {fix}")
    if manifest.get("format") != FORMAT:
        raise OnnxExportError(f"{path} is an export of format {manifest.get('format')!r} (an older exporter's); this "
                              f"runtime reads {FORMAT} (voices, block-wise ones included): {fix}")
    graphs = manifest.get("graphs") or {}
    voices = manifest.get("voices") or {}
    if manifest.get("default_voice") not in voices:
        raise OnnxExportError(f"{path} names no default voice among its voices {sorted(voices)}: {fix}")
    vocoders = manifest.get("vocoders") or {}
    for voice, entry in voices.items():
        if entry.get("vocoder") not in vocoders:
            raise OnnxExportError(f"{path}: voice {voice!r} speaks with vocoder {entry.get('vocoder')!r}, which the "
                                  f"export lacks (it has {sorted(vocoders)}): {fix}")
    wanted = {g for v in vocoders.values() for g in vocoder_graphs(v).values()} | \
        {g for v in voices.values() for g in v["graphs"].values()}
    for name in sorted(wanted):
        entry = graphs.get(name)
        if not entry:
            raise OnnxExportError(f"{path} lists no {name} graph: {fix}")
        graph = folder / entry["file"]
        if not graph.is_file():
            raise OnnxExportError(f"ONNX graph {graph} is missing: {fix}")
        if verify and not file_matches(graph, entry):
            raise OnnxExportError(f"ONNX graph {graph} does not match its manifest hash (corrupt or replaced): {fix}")
    # data the graphs read from outside themselves (the refiner's noise table, stored once for every graph)
    for name, entry in (manifest.get("external_data") or {}).items():
        if not (folder / name).is_file():
            raise OnnxExportError(f"ONNX data {folder / name} is missing: {fix}")
        if verify and not file_matches(folder / name, entry):
            raise OnnxExportError(f"ONNX data {folder / name} does not match its manifest hash (corrupt or replaced): {fix}")
    return manifest


def file_matches(path: Path, entry: dict[str, Any]) -> bool:
    """Is `path` the file a manifest entry recorded (sha256, and size / mtime_ns when recorded)?  An unchanged
    size and mtime is taken as the same file without hashing (hashing the 50 MB of an export and its sources
    costs ~0.1 s of every start); a changed mtime (a copy, a checkout) falls back to the sha256."""
    try:
        st = path.stat()
    except OSError:
        return False
    if "size" in entry and st.st_size != entry["size"]:
        return False
    if "size" in entry and entry.get("mtime_ns") == st.st_mtime_ns:
        return True
    return _sha256(path) == entry["sha256"]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_is_current(onnx_dir: str | Path, voice: str | None = None) -> bool:
    """True when `onnx_dir` holds a readable export of `voice` (None: its default voice) whose source
    checkpoints (the voice's and the vocoder's) still have the recorded hashes (a retrained or re-released
    checkpoint makes the export stale)."""
    try:
        manifest = read_manifest(onnx_dir, verify=False)
    except OnnxExportError:
        return False
    from tts.paths import REPO_ROOT

    voice = voice or manifest["default_voice"]
    entry = manifest["voices"].get(voice)
    if entry is None:
        return False
    sources = [manifest["sources"][entry["source"]], manifest["sources"][voice_vocoder(manifest, voice)["source"]]]
    # relative source paths are the repository's (tts.export records them so: the checkout may move)
    return all(file_matches(REPO_ROOT / source["path"], source) for source in sources)


def fix_mmap_threshold(threshold: int = 128 * 1024) -> None:
    """glibc only: keep malloc's mmap threshold at its default 128 KiB instead of letting it rise.

    Every batch allocates and frees arrays of new sizes (a long sentence: tens of MB).  glibc raises its
    mmap threshold to the size of each mmapped block that is freed, after which blocks that large come from
    the heap, which fragments and is not given back: the peak RSS of a document then grew by 0-80 MB from
    run to run (recipes.bench.document_memory).  Fixed, large blocks stay mmapped and return to the OS when
    freed.  A process-wide setting; a no-op on other C libraries."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, int(threshold))  # M_MMAP_THRESHOLD (glibc's malloc.h); fixing it stops the adjustment
    except (OSError, AttributeError):
        pass


class OnnxEngine(TextEncoding):
    """One exported voice (default: the export's default voice) and its vocoder; see the module docstring."""

    name = "onnx"

    def __init__(self, onnx_dir: str | Path, manifest: dict[str, Any], threads: int | None = 1,
                 voice: str | None = None) -> None:
        """threads: onnxruntime's intra-op threads (None = its own default, one per core, whose thread pools
        cost ~0.1 s more to start per session on a loaded machine; 1 is the fastest start).  voice: a name in
        the manifest's "voices" (None: its default voice)."""
        import onnxruntime as ort

        from tts.text import TextFrontend

        fix_mmap_threshold()
        self.onnx_dir = Path(onnx_dir)
        self.manifest = manifest
        self.voice = voice or manifest["default_voice"]
        if self.voice not in manifest["voices"]:
            raise ValueError(f"the ONNX export at {self.onnx_dir} has no voice {self.voice!r} "
                             f"(it has {', '.join(sorted(manifest['voices']))})")
        spec = manifest["voices"][self.voice]
        options = ort.SessionOptions()
        if threads is not None:
            if threads < 1:
                raise ValueError(f"threads must be >= 1, got {threads}")
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # no busy-waiting worker threads: on a shared CPU they steal the cycles of the main thread (they
        # doubled the session start-up here, 0.18 -> 0.32 s with 2 threads) and of other processes
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # The CPU arena reuses memory inside a run (measured: a batch of 8 sentences 0.73 s with it, 1.48 s
        # without, page faults of fresh allocations); it would keep the high-water mark of every shape it has
        # seen (memory growing with the document: tests/test_cli_hostile.py), so every run ends by shrinking it
        # (`self.run_options`): 0.91 s, memory back after each batch.
        options.enable_mem_pattern = False  # its plans are cached per input shape: one more per sentence length
        self.run_options = ort.RunOptions()
        self.run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self.sessions: dict[str, Any] = {}
        # the voice's vocoder (manifest "vocoders": its DSP settings, reach and optional correction)
        self.vocoder = voice_vocoder(manifest, self.voice)
        for part, graph in [*spec["graphs"].items(), *vocoder_graphs(self.vocoder).items()]:
            path = self.onnx_dir / manifest["graphs"][graph]["file"]
            try:
                self.sessions[part] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types
                raise OnnxExportError(f"ONNX graph {path} cannot be loaded ({e}): run `python -m tts.export "
                                      f"--out {self.onnx_dir}`") from None
        self.frontend = TextFrontend.from_dict(spec["frontend"])
        self.sample_rate = int(manifest["mel_config"]["sample_rate"])
        self.hop_length = int(manifest["mel_config"]["hop_length"])
        # what padded frames hold: the mel config's log floor (MelConfig.log_floor; tts.audio imports torch)
        self.mel_pad_value = math.log(float(manifest["mel_config"]["log_clamp"]))
        block = spec["decoding"] == "block"
        self.blocks = BlockVoice(self.sessions, spec["block"], self.run_options) if block else None
        self.capabilities = Capabilities(controls=frozenset(
            {"refine_steps", "temperature", "speed", "pitch_shift", "block_frames"}), block_mode=block, streaming=block)
        self.defaults = Controls(**spec["controls"])
        self.synthesis = Synthesis(**self.vocoder["synthesis"])
        self.window = hann_window(self.synthesis.window)
        # the magnitude correction (the vocoder's "correction"), or None
        self.correction = self.vocoder.get("correction")
        self.correction_window = hann_window(int(self.correction["fft_size"])) if self.correction else None

    @classmethod
    def load(cls, onnx_dir: str | Path = DEFAULT_ONNX_DIR, threads: int | None = 1, verify: bool = True,
             voice: str | None = None) -> "OnnxEngine":
        """The export in `onnx_dir` (default checkpoints/onnx), its `voice` (default: its default voice);
        `verify` checks each graph's sha256."""
        return cls(onnx_dir, read_manifest(onnx_dir, verify=verify), threads, voice)

    def mels(self, ids: Sequence[Sequence[int]], indices: Sequence[int], controls: Controls,
             forced_frames: Sequence[int] | None = None) -> MelBatch:
        """One run of the acoustic graph (FastSpeech2.infer's maths, exported); a block-wise voice's blocks."""
        if forced_frames is not None:
            raise ValueError("the ONNX engine cannot force output lengths (a benchmark of random weights: use torch)")
        if len(indices) != len(ids):
            raise ValueError(f"{len(indices)} item indices for a batch of {len(ids)}")
        if self.blocks is not None:
            return self.blocks.mels(ids, indices, controls)
        # item by item: the graph decides each item's lengths (onnx_blocks.per_item); measured on this CPU, a
        # batch of 8 cost what 8 calls cost (docs/results/serve/onnx_batching.md)
        shared = dict(speed=np.array(controls.speed, np.float32), pitch_shift=np.array(controls.pitch_shift, np.float32),
                      temperature=np.array(controls.temperature, np.float32),
                      refine_steps=np.array(controls.refine_steps, np.int64))
        offsets = np.array([item_noise_seed(controls.seed, i) for i in indices], np.int64)
        mels, mel_lengths, truncated, durations = per_item(
            lambda feeds: self.sessions["acoustic"].run(None, feeds, self.run_options), ids, shared,
            pads=(self.mel_pad_value, 0, False, 0), item_feeds=dict(noise_offsets=offsets))
        return MelBatch(mels, mel_lengths.astype(np.int64), truncated.astype(bool), None, controls.refine_steps,
                        durations.astype(np.int64))

    def vocode(self, batch: MelBatch) -> list[np.ndarray]:
        """Each item over its own length, alone (as the torch Vocoder.forward): -> [frames * hop] float32."""
        waves = []
        for k, n in enumerate(batch.lengths.tolist()):
            if n <= 0:
                waves.append(np.zeros(0, np.float32))
                continue
            f0, voiced, harmonic, noise = self.sessions["vocoder"].run(
                None, {"mel": np.ascontiguousarray(batch.mels[k : k + 1, :, :n])}, self.run_options)
            # the whole utterance, as SourceFilterVocoder.synthesize renders it (the one render, numpy ops)
            wave, _ = render(RenderInput(f0, voiced, harmonic, noise, 0), 0, n * self.synthesis.hop_length,
                             np.zeros(1), n, self.synthesis, self.window)
            if self.correction:  # as MagnitudeCorrection.forward, before the clip
                wave = correct_whole(wave, batch.mels[k : k + 1, :, :n], self._gains, self.synthesis.hop_length,
                                     self.correction_window, NUMPY)
            waves.append(np.clip(wave[0], -1.0, 1.0).astype(np.float32))
        return waves

    def _gains(self, mel: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
        """The exported MagnitudeCorrection.gains (tts.vocoder.correction.Gains)."""
        feeds = {"mel": np.ascontiguousarray(mel, np.float32), "magnitude": np.ascontiguousarray(magnitude, np.float32)}
        return self.sessions["vocoder_correction"].run(None, feeds, self.run_options)[0]

    def stream_part(self, ids: Sequence[int], index: int, controls: Controls) -> Iterator[StreamPiece] | None:
        """A block-wise voice's part block by block (as TorchEngine.stream_part); None for a parallel voice (no
        Capabilities.streaming: the pipeline speaks the part whole) or a part the frame guard cut."""
        if self.blocks is None:
            return None
        return self.blocks.stream_part(ids, index, controls, self.vocoder_stream())

    def vocoder_stream(self) -> VocoderStream:
        """The vocoder streamed on its graphs (SourceFilterVocoder.stream's twin): push mel chunks [1, M, n]."""
        stage = (CorrectionStage(self._gains, int(self.correction["receptive_frames"]), self.synthesis.hop_length,
                                 self.correction_window, NUMPY) if self.correction else None)
        return VocoderStream(self.sessions["vocoder"], self.run_options, self.synthesis, self.window,
                             int(self.vocoder["receptive_frames"]), stage)

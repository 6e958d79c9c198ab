"""Text -> wave with onnxruntime and numpy alone (no torch): the default voice exported by `tts.export`.

Public API (what the CLI's `--runtime onnx`, `tts.load(runtime="onnx")` and the server use):

    synth = OnnxSynthesizer.load("checkpoints/onnx", threads=1)   # OnnxExportError if missing/corrupt
    result = synth.synthesize("Hello there. Second sentence.", seed=0)   # -> SynthesisResult
    result.wave            # np.ndarray [N] float32 in [-1, 1]; result.sample_rate, .sentences, .timings, .notes
    items = synth.synthesize_items(["One text.", "Another."], seed=0)     # -> list[ItemResult] (batch 1)
    synth.controls(refine_steps=4)   # the controls a call would use (ValueError if out of range)

`synthesize(text, batch_size=8, refine_steps=None, speed=None, pitch_shift=None, progress=None,
temperature=None, seed=0, sink=None)` keeps the meaning of `tts.inference.Synthesizer.synthesize`: sentence
split, a final stop added, a sentence over the symbol limit cut at clause boundaries (joined by
CLAUSE_PAUSE_S), `pause_s` between sentences, sentence k's refiner noise from item_noise_seed(seed, k)
(the same noise as torch's, `torch_randn`), `sink` receiving each piece as it is made.  It returns the
same dataclass shapes with numpy arrays in place of tensors.  AR-only options do not exist here (only
the NAR exports).  Stages: `encode` -> `mels` (ONNX encoder, numpy length regulation, ONNX decoder, K
ONNX refiner steps) -> `vocode` (ONNX vocoder network, numpy F0 decoding and DSP render).

The numpy functions below are ports of the torch code they name, kept operation for operation so that
the two runtimes agree to float rounding (tests/test_onnx.py measures it).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tts.errors import CheckpointError, SynthesisError
from tts.inference_text import CLAUSE_PAUSE_S, _short, check_controls, encode_splitting, prepare_parts, split_clause
from tts.paths import CHECKPOINT_DIR
from tts.vocoder.noise import hash_noise

DEFAULT_ONNX_DIR = CHECKPOINT_DIR / "onnx"  # `python -m tts.export --out checkpoints/onnx`
MANIFEST = "manifest.json"  # the export's layout, defined here (torch-free) and imported by tts.export
FORMAT = "tts-onnx-v1"
GRAPHS = ("acoustic_encoder", "acoustic_decoder", "refiner_velocity", "vocoder_network")
TWO_PI = 2.0 * math.pi


class OnnxExportError(CheckpointError):
    """The export folder is missing, incomplete, corrupt or from another format (CLI exit 4)."""


# --- seeded noise: torch.randn(generator=torch.Generator().manual_seed(seed)) in numpy --------------
def _mt19937_uint32(seed: int, n: int) -> np.ndarray:
    """n raw outputs of mt19937 seeded as torch's CPU generator seeds it (init_genrand(seed mod 2**32));
    numpy's legacy seeding is the same reference algorithm."""
    bits = np.random.MT19937(0)
    bits._legacy_seeding(int(seed) & 0xFFFFFFFF)
    return bits.random_raw(n).astype(np.uint32)


def torch_randn(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Standard normal float32 noise equal (to ~2e-7) to torch.randn(*shape, generator seeded with `seed`).

    torch's CPU normal fill for >= 16 float32 values: uniforms u = (x & (2**24 - 1)) / 2**24 from one
    mt19937 draw each, then Box-Muller on blocks of 16 (u1 = 1 - u[i], u2 = u[i + 8] -> r cos, r sin);
    a tail that is not a whole block is made by drawing 16 fresh uniforms for the LAST 16 values."""
    n = int(np.prod(shape))
    if n < 16:  # torch takes another (scalar, float64) path there; never needed with n_mels >= 16
        raise ValueError(f"torch_randn needs >= 16 values, got shape {shape}")
    extra = 16 if n % 16 else 0
    raw = _mt19937_uint32(seed, n + extra)
    u = (raw & np.uint32((1 << 24) - 1)).astype(np.float32) * np.float32(2.0**-24)

    def box_muller(blocks: np.ndarray) -> np.ndarray:  # [K, 16] uniforms -> [K, 16] normals
        radius = np.sqrt(np.float32(-2.0) * np.log(np.float32(1.0) - blocks[:, :8]))
        theta = np.float32(TWO_PI) * blocks[:, 8:]
        return np.concatenate([radius * np.cos(theta), radius * np.sin(theta)], axis=1)

    full = n - n % 16
    out = np.empty(n, dtype=np.float32)
    out[:full] = box_muller(u[:full].reshape(-1, 16)).reshape(-1)
    if extra:
        out[n - 16 :] = box_muller(u[n : n + 16].reshape(1, 16)).reshape(-1)
    return out.reshape(shape)


def item_noise_seed(seed: int, index: int) -> int:
    """== tts.models.refiner.item_noise_seed (a blake2b hash of "seed:index" to 32 bits)."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and item index must be >= 0, got {seed}, {index}")
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=4).digest(), "little")


def per_item_noise(shape: tuple[int, int, int], lengths: Sequence[int], seeds: Sequence[int]) -> np.ndarray:
    """== tts.models.refiner.per_item_noise: [B, M, T], item k's first lengths[k] frames from seeds[k]."""
    b, n_mels, t = shape
    eps = np.zeros(shape, dtype=np.float32)
    for k, (seed, n) in enumerate(zip(seeds, lengths)):
        if n > 0:
            eps[k, :, :n] = torch_randn(seed, (n_mels, int(n)))
    return eps


# --- length regulation (tts.models.layers.length_regulator) -----------------------------------------
def durations_from_log(log_d: np.ndarray, token_mask: np.ndarray, speed: float, min_frames: int) -> np.ndarray:
    """== durations_from_log: round((exp(log_d) - 1) / speed) >= min_frames on real tokens, an empty item
    gets 1 frame on its first token.  np.round and torch.round both round half to even."""
    d = np.maximum(np.round((np.exp(log_d.astype(np.float32)) - np.float32(1.0)) / np.float32(speed)),
                   np.float32(min_frames))
    d = d.astype(np.int64) * token_mask.astype(np.int64)
    empty = (d.sum(axis=1) == 0) & token_mask.any(axis=1)
    d[:, 0] = np.where(empty, 1, d[:, 0])
    return d


def regulate_length(x: np.ndarray, durations: np.ndarray, max_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """== regulate_length(x, d, max_frames=...) at inference: x [B, L, D] -> (frames [B, T, D], frame
    lengths [B], truncated [B]); the max-frames guard clips the cumulative durations (a prefix is kept)."""
    cum = np.cumsum(durations, axis=1)
    truncated = cum[:, -1] > max_frames
    clipped = np.minimum(cum, max_frames)
    durations = np.diff(clipped, axis=1, prepend=0)
    totals = durations.sum(axis=1)
    t = max(int(totals.max()) if totals.size else 0, 1)
    b, n_tokens, d = x.shape
    frames = np.zeros((b, t, d), dtype=x.dtype)
    for i in range(b):
        frames[i, : totals[i]] = np.repeat(x[i], durations[i], axis=0)
    return frames, totals, truncated


# --- the source-filter vocoder's DSP (tts.vocoder.dsp), whole utterances ----------------------------
def decode_f0(logits: np.ndarray, f0_min: float, cents_per_bin: float, neighbourhood: int = 4) -> np.ndarray:
    """== F0Bins.decode: logits [B, n_bins, T] -> f0 [B, T] Hz (local weighted mean around the peak)."""
    z = logits.astype(np.float32)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    peak = probs.argmax(axis=1)[:, None, :]
    idx = np.arange(logits.shape[1])[None, :, None]
    w = probs * (np.abs(idx - peak) <= neighbourhood)
    cents = (w * idx.astype(np.float32)).sum(1) / np.maximum(w.sum(1), np.float32(1e-12)) * np.float32(cents_per_bin)
    return np.float32(f0_min) * np.power(np.float32(2.0), cents / np.float32(1200.0))


def frame_to_samples(x: np.ndarray, n_frames_total: int, s0: int, s1: int, hop: int) -> np.ndarray:
    """== frame_to_samples with first_frame 0: linear interpolation of frame values x [B, F, ...] to
    samples [s0, s1) (frame t at sample t * hop; frames outside [0, T) hold the edge value)."""
    t0 = s0 // hop
    t1 = (s1 - 1) // hop + 1
    frames = np.clip(np.arange(t0, t1 + 1), 0, n_frames_total - 1)
    v = x[:, frames]
    rest = x.shape[2:]
    ramp = (np.arange(hop, dtype=x.dtype) / x.dtype.type(hop)).reshape(hop, *([1] * len(rest)))
    per_frame = v[:, :-1, None] + (v[:, 1:] - v[:, :-1])[:, :, None] * ramp
    flat = per_frame.reshape(x.shape[0], -1, *rest)
    return flat[:, s0 - t0 * hop : s1 - t0 * hop]


def pulse_train(phase: np.ndarray, f0: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """== dsp.pulse_train: band-limited pulse train in closed form (float64 phase in, float32 out)."""
    k = np.maximum(np.floor(cutoff_hz / np.maximum(f0, 1.0)), 1).astype(np.float32)
    phase = (np.remainder(phase + math.pi, TWO_PI) - math.pi).astype(np.float32)
    half = np.sin(phase / np.float32(2))
    small = np.abs(half) < 1e-6
    ratio = np.sin((k + np.float32(0.5)) * phase) / (np.float32(2) * np.where(small, np.float32(1), half))
    return np.where(small, k, ratio - np.float32(0.5))


def _log_response(cepstrum: np.ndarray, n_fft: int) -> np.ndarray:
    return np.fft.rfft(cepstrum.astype(np.float32), n=n_fft, axis=-1)


def render_whole(f0: np.ndarray, voiced: np.ndarray, harmonic_cep: np.ndarray, noise_cep: np.ndarray,
                 dsp: dict[str, Any], window: np.ndarray) -> np.ndarray:
    """== dsp.render(s0=0, s1=T * hop, phase0=0, n_frames_total=T) for one utterance: f0, voiced [B, T],
    cepstra [B, T, L] -> wave [B, T * hop] float32 (unclamped)."""
    h, w_len, hop, sr = dsp["frame_hop"], dsp["window"], dsp["hop_length"], dsp["sample_rate"]
    n_frames = f0.shape[1]
    margin = w_len - h
    s0, s1 = 0, n_frames * hop
    e0, e1 = s0 - margin, s1 + margin
    b = f0.shape[0]
    f0_s = frame_to_samples(f0.astype(np.float64), n_frames, e0, e1, hop)  # [B, E]
    voiced_s = frame_to_samples(voiced.astype(np.float32), n_frames, e0, e1, hop)
    increments = TWO_PI * f0_s / sr
    phase = np.cumsum(increments, axis=1) - increments  # phase0 = 0 at e0
    phase = np.remainder(phase, TWO_PI)
    n = np.arange(e0, e1)
    inside = ((n >= 0) & (n < n_frames * hop)).astype(np.float32)
    harmonic = pulse_train(phase, f0_s, dsp["cutoff_hz"]) * voiced_s * inside
    noise = hash_noise(int(dsp["seed"]), e0, e1)[None, :] * inside
    noise = np.broadcast_to(noise, harmonic.shape)
    j0 = (e0 + w_len // 2) // h
    src = np.stack([harmonic, noise], 1).astype(np.float32)  # [B, 2, E]
    frames_h = np.lib.stride_tricks.sliding_window_view(src, w_len, axis=-1)[..., ::h, :]  # [B, 2, J, W]
    n_j = frames_h.shape[2]
    spectra = np.fft.rfft(frames_h * window, axis=-1)
    ratio = hop // h
    resp_h_log = _log_response(frame_to_samples(harmonic_cep.astype(np.float32), n_frames, j0, j0 + n_j, ratio), w_len)
    resp_h = np.exp(resp_h_log.real) * np.exp(1j * resp_h_log.imag)  # torch.polar(exp(re), im)
    resp_n = np.exp(_log_response(frame_to_samples(noise_cep.astype(np.float32), n_frames, j0, j0 + n_j, ratio),
                                  w_len).real)
    filtered = spectra[:, 0] * resp_h + spectra[:, 1] * resp_n
    frames = (np.fft.irfft(filtered, n=w_len, axis=-1) * window).astype(np.float32)  # [B, J, W]
    q = w_len // h
    blocks = frames.reshape(b, n_j, q, h)
    wave = np.zeros((b, n_j + q - 1, h), dtype=np.float32)
    for k in range(q):
        wave[:, k : k + n_j] += blocks[:, :, k]
    wave = wave.reshape(b, -1) * np.float32(h / float((window.astype(np.float32) ** 2).sum()))
    start = s0 - e0
    return wave[:, start : start + (s1 - s0)]


def hann_window(n: int) -> np.ndarray:
    """== torch.hann_window(n) (periodic)."""
    return (0.5 - 0.5 * np.cos(TWO_PI * np.arange(n) / n)).astype(np.float32)


# --- results (the shapes of tts.inference's, numpy inside) -----------------------------------------
@dataclass
class Timings:
    text_s: float = 0.0
    mel_s: float = 0.0
    vocoder_s: float = 0.0
    first_audio_s: float | None = None

    @property
    def total_s(self) -> float:
        return self.text_s + self.mel_s + self.vocoder_s


@dataclass
class SynthesisResult:
    wave: np.ndarray  # [N] float32, -1..1 (empty when a sink took the audio)
    sample_rate: int
    sentences: list[str]
    timings: Timings
    notes: list[str] = field(default_factory=list)
    streamed_samples: int = 0

    @property
    def seconds(self) -> float:
        return (self.wave.size + self.streamed_samples) / self.sample_rate

    @property
    def rtf(self) -> float:
        return self.timings.total_s / max(self.seconds, 1e-9)


@dataclass
class ItemResult:
    text: str
    wave: np.ndarray  # [N] float32
    sample_rate: int
    frames: int
    n_tokens: int
    mel_s: float
    vocoder_s: float
    refine_steps_taken: int | None = None
    ar_failure: None = None  # the NAR has no attention verdict (field kept for callers of both runtimes)

    @property
    def seconds(self) -> float:
        return self.wave.size / self.sample_rate


@dataclass
class MelResult:
    mels: np.ndarray  # [B, M, T] raw log-mel, padded with the log floor
    mel_lengths: np.ndarray  # [B] int64
    truncated: np.ndarray  # [B] bool: the max-frames guard cut the item
    refine_steps_taken: int


# --- loading -------------------------------------------------------------------------------------------
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
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise OnnxExportError(f"{path} is not a {FORMAT} manifest (format {manifest.get('format')!r}): {fix}"
                              if isinstance(manifest, dict) else f"{path} is not a manifest: {fix}")
    for name in GRAPHS:
        entry = (manifest.get("graphs") or {}).get(name)
        if not entry:
            raise OnnxExportError(f"{path} lists no {name} graph: {fix}")
        graph = folder / entry["file"]
        if not graph.is_file():
            raise OnnxExportError(f"ONNX graph {graph} is missing: {fix}")
        if verify and not file_matches(graph, entry):
            raise OnnxExportError(f"ONNX graph {graph} does not match its manifest hash (corrupt or replaced): {fix}")
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


def export_is_current(onnx_dir: str | Path) -> bool:
    """True when `onnx_dir` holds a readable export whose source checkpoints still have the recorded
    hashes (a retrained or re-released checkpoint makes the export stale)."""
    try:
        manifest = read_manifest(onnx_dir, verify=False)
    except OnnxExportError:
        return False
    from tts.paths import REPO_ROOT

    # relative source paths are the repository's (tts.export records them so: the checkout may move)
    return all(file_matches(REPO_ROOT / source["path"], source) for source in manifest.get("sources", {}).values())


def fix_mmap_threshold(threshold: int = 128 * 1024) -> None:
    """glibc only: keep malloc's mmap threshold at its default 128 KiB instead of letting it rise.

    Every batch allocates and frees arrays of new sizes (a long sentence: tens of MB).  glibc raises its
    mmap threshold to the size of each mmapped block that is freed, after which blocks that large come from
    the heap, which fragments and is not given back: the peak RSS of a document then grew by 0-80 MB from
    run to run (tts.bench.document_memory).  Fixed, large blocks stay mmapped and return to the OS when
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


class OnnxSynthesizer:
    """The default voice on onnxruntime; see the module docstring for the API."""

    def __init__(self, onnx_dir: str | Path, manifest: dict[str, Any], threads: int | None = 1,
                 pause_s: float = 0.25) -> None:
        """threads: onnxruntime's intra-op threads (None = its own default, one per core, whose thread pools
        cost ~0.1 s more to start per session on a loaded machine; 1 is the fastest start)."""
        import onnxruntime as ort

        from tts.text import TextFrontend

        fix_mmap_threshold()
        self.onnx_dir = Path(onnx_dir)
        self.manifest = manifest
        self.pause_s = pause_s
        options = ort.SessionOptions()
        if threads is not None:
            if threads < 1:
                raise ValueError(f"threads must be >= 1, got {threads}")
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # no busy-waiting worker threads: on a shared CPU they steal the cycles of the main thread (they
        # doubled the session start-up here, 0.18 -> 0.32 s with 2 threads) and of other processes
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # no arena: tensor shapes change with every batch, and onnxruntime's CPU arena keeps the high-water
        # mark of every shape it has seen (memory then grows with the document; tests/test_cli_hostile.py)
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False  # its plans are cached per input shape: one more per sentence length
        self.sessions: dict[str, Any] = {}
        for name in GRAPHS:
            path = self.onnx_dir / manifest["graphs"][name]["file"]
            try:
                self.sessions[name] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as e:  # onnxruntime raises its own Fail/InvalidGraph types
                raise OnnxExportError(f"ONNX graph {path} cannot be loaded ({e}): run `python -m tts.export "
                                      f"--out {self.onnx_dir}`") from None
        self.frontend = TextFrontend.from_dict(manifest["frontend"])
        mel = manifest["mel_config"]
        self.sample_rate = int(mel["sample_rate"])
        self.hop_length = int(mel["hop_length"])
        self.n_mels = int(mel["n_mels"])
        self.log_floor = math.log(float(mel["log_clamp"]))
        acoustic = manifest["acoustic"]
        self.mel_mean = np.asarray(acoustic["mel_mean"], dtype=np.float32)[:, None]  # [M, 1]
        self.mel_std = np.asarray(acoustic["mel_std"], dtype=np.float32)[:, None]
        self.default_controls = dict(manifest["controls"])
        self.voc = manifest["vocoder"]
        self.window = hann_window(int(self.voc["window"]))

    @classmethod
    def load(cls, onnx_dir: str | Path = DEFAULT_ONNX_DIR, threads: int | None = 1,
             verify: bool = True) -> "OnnxSynthesizer":
        """The export in `onnx_dir` (default checkpoints/onnx); `verify` checks each graph's sha256."""
        return cls(onnx_dir, read_manifest(onnx_dir, verify=verify), threads)

    def controls(self, refine_steps: int | None = None, temperature: float | None = None, speed: float | None = None,
                 pitch_shift: float | None = None) -> dict[str, float | int]:
        """The given controls over the export's defaults (default.json's K and temperature), range-checked."""
        given = {k: v for k, v in dict(refine_steps=refine_steps, temperature=temperature, speed=speed,
                                       pitch_shift=pitch_shift).items() if v is not None}
        asked = {**self.default_controls, **given}
        check_controls(asked)
        return asked

    # --- stages ---------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return self.frontend.encode(text)

    def mels(self, ids: Sequence[Sequence[int]], seed: int = 0, indices: Sequence[int] | None = None,
             refine_steps: int | None = None, temperature: float | None = None, speed: float | None = None,
             pitch_shift: float | None = None) -> MelResult:
        """Token id lists -> raw log-mels (FastSpeech2.infer's maths; noise of item b from (seed, indices[b]))."""
        ctl = self.controls(refine_steps, temperature, speed, pitch_shift)
        b = len(ids)
        indices = list(range(b)) if indices is None else list(indices)
        if len(indices) != b:
            raise ValueError(f"{len(indices)} item indices for a batch of {b}")
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        tokens = np.zeros((b, int(lengths.max())), dtype=np.int64)
        for k, seq in enumerate(ids):
            tokens[k, : len(seq)] = seq
        token_mask = np.arange(tokens.shape[1])[None, :] < lengths[:, None]
        hidden, log_d = self.sessions["acoustic_encoder"].run(
            None, {"tokens": tokens, "token_lengths": lengths,
                   "pitch_shift": np.array(float(ctl.get("pitch_shift", 0.0)), dtype=np.float32)})
        acoustic = self.manifest["acoustic"]
        d = durations_from_log(log_d, token_mask, float(ctl.get("speed", 1.0)), int(acoustic["min_token_frames"]))
        frames, frame_lengths, truncated = regulate_length(hidden, d, int(acoustic["max_frames"]))
        coarse, cond = self.sessions["acoustic_decoder"].run(None, {"frames": frames, "frame_lengths": frame_lengths})
        t = coarse.shape[2]
        frame_mask = np.arange(t)[None, :] < frame_lengths[:, None]  # [B, T]
        steps = int(ctl.get("refine_steps", 0))
        x = coarse
        if steps > 0:  # FlowMatchingRefiner.sample without early stop
            m = frame_mask[:, None, :].astype(np.float32)
            coarse_m = coarse * m
            eps = per_item_noise(coarse.shape, frame_lengths.tolist(), [item_noise_seed(seed, i) for i in indices])
            temp = np.float32(float(ctl.get("temperature", 1.0)))
            x = coarse_m + temp * np.float32(acoustic["refiner_sigma"]) * eps * m
            dt = 1.0 / steps
            for i in range(steps):
                tt = np.full((b,), i * dt, dtype=np.float32)
                (v,) = self.sessions["refiner_velocity"].run(None, {"x": x, "t": tt, "coarse": coarse_m, "cond": cond,
                                                                    "mask": m})
                x = x + np.float32(dt) * v
            x = x * m
        raw = x * self.mel_std + self.mel_mean  # FastSpeech2.denormalise
        raw = np.where(frame_mask[:, None, :], raw, np.float32(acoustic["mel_pad_value"])).astype(np.float32)
        return MelResult(raw, frame_lengths, truncated, steps)

    def vocode(self, out: MelResult) -> list[np.ndarray]:
        """Each item over its own length, alone (Vocoder.forward): -> waves [frames * hop] float32 in [-1, 1]."""
        waves = []
        nb, nh = int(self.voc["n_bins"]), int(self.voc["harmonic_cepstrum"])
        for k in range(out.mels.shape[0]):
            n = int(out.mel_lengths[k])
            if n <= 0:
                waves.append(np.zeros(0, dtype=np.float32))
                continue
            (params,) = self.sessions["vocoder_network"].run(None, {"mel": np.ascontiguousarray(out.mels[k : k + 1, :, :n])})
            f0 = decode_f0(params[:, :nb], float(self.voc["f0_min"]), float(self.voc["cents_per_bin"]))
            voiced = (1.0 / (1.0 + np.exp(-params[:, nb].astype(np.float32))) > self.voc["voicing_threshold"]).astype(np.float32)
            harmonic = params[:, nb + 1 : nb + 1 + nh].transpose(0, 2, 1)
            noise = params[:, nb + 1 + nh :].transpose(0, 2, 1)
            wave = render_whole(f0, voiced, harmonic, noise, self.voc, self.window)[0]
            waves.append(np.clip(wave, -1.0, 1.0).astype(np.float32))
        return waves

    # --- built on the stages --------------------------------------------------------------------------
    def synthesize_items(self, texts: Sequence[str], seed: int = 0, indices: Sequence[int] | None = None,
                         refine_steps: int | None = None, temperature: float | None = None,
                         speed: float | None = None, pitch_shift: float | None = None) -> list[ItemResult]:
        """Each text as ONE token sequence, batch 1 (Synthesizer.synthesize_items)."""
        indices = list(range(len(texts))) if indices is None else list(indices)
        if len(indices) != len(texts):
            raise ValueError(f"{len(indices)} item indices for {len(texts)} texts")
        results = []
        for text, index in zip(texts, indices):
            ids = self.encode(text)
            t0 = time.perf_counter()
            out = self.mels([ids], seed=seed, indices=[index], refine_steps=refine_steps, temperature=temperature,
                            speed=speed, pitch_shift=pitch_shift)
            t1 = time.perf_counter()
            [wave] = self.vocode(out)
            t2 = time.perf_counter()
            results.append(ItemResult(text, wave, self.sample_rate, int(out.mel_lengths[0]), len(ids), t1 - t0, t2 - t1,
                                      out.refine_steps_taken))
        return results

    def synthesize(self, text: str, batch_size: int = 8, refine_steps: int | None = None, speed: float | None = None,
                   pitch_shift: float | None = None, progress: Callable[[int, int], None] | None = None,
                   temperature: float | None = None, seed: int = 0,
                   sink: Callable[[np.ndarray], None] | None = None) -> SynthesisResult:
        """Synthesizer.synthesize's contract on this runtime (module docstring)."""
        t0 = time.perf_counter()
        ctl = dict(refine_steps=refine_steps, temperature=temperature, speed=speed, pitch_shift=pitch_shift)
        self.controls(**ctl)  # out of range: before any work
        prepared, notes = prepare_parts(text, self.encode, self.pause_s)  # the torch runtime's own text stage
        parts = [(p.text, p.ids, p.pause_s) for p in prepared]
        timings = Timings(text_s=time.perf_counter() - t0)
        next_index = len(parts)  # item indices of parts spoken again start past the sentence stream
        pieces_out: list[np.ndarray] = []
        streamed = 0
        for start in range(0, len(parts), batch_size):
            chunk = parts[start : start + batch_size]
            t1 = time.perf_counter()
            out = self.mels([ids for _, ids, _ in chunk], seed=seed, indices=list(range(start, start + len(chunk))), **ctl)
            t2 = time.perf_counter()
            waves = self.vocode(out)
            t3 = time.perf_counter()
            timings.mel_s += t2 - t1
            timings.vocoder_s += t3 - t2
            if timings.first_audio_s is None:
                timings.first_audio_s = t3 - t0
            for (piece_text, _, pause), wave, cut in zip(chunk, waves, out.truncated):
                if not np.isfinite(wave).all():
                    raise SynthesisError(f"the model made non-finite (NaN/inf) audio for {_short(piece_text)!r}; "
                                         "the export or the controls are broken")
                if cut and (halves := split_clause(piece_text)) is not None:
                    notes.append(f"the frame guard cut {_short(piece_text)!r}: spoken again in two parts")
                    wave, next_index = self._speak_parts(halves, seed, ctl, next_index)
                for piece in (np.zeros(int(pause * self.sample_rate), dtype=np.float32), wave):
                    if sink is None:
                        pieces_out.append(piece)
                    elif piece.size:
                        sink(piece)
                        streamed += piece.size
            if progress is not None:
                progress(min(start + batch_size, len(parts)), len(parts))
        wave = np.concatenate(pieces_out) if pieces_out else np.zeros(0, dtype=np.float32)
        return SynthesisResult(wave, self.sample_rate, [p for p, _, _ in parts], timings, notes, streamed_samples=streamed)

    def _speak_parts(self, texts: Sequence[str], seed: int, ctl: dict[str, Any], next_index: int
                     ) -> tuple[np.ndarray, int]:
        """== Synthesizer._speak_parts: texts spoken one by one (fresh item indices from `next_index`), joined
        by CLAUSE_PAUSE_S; a part the guard cuts again is cut again.  -> (wave, the next free index)."""
        from tts.text.errors import UnspeakableTextError

        pieces: list[np.ndarray] = []
        for part in texts:
            try:
                encoded = encode_splitting(self.encode, part)
            except UnspeakableTextError:
                continue
            for text, ids in encoded:
                index, next_index = next_index, next_index + 1
                out = self.mels([ids], seed=seed, indices=[index], **ctl)
                [wave] = self.vocode(out)
                if bool(out.truncated[0]) and (halves := split_clause(text)) is not None:
                    wave, next_index = self._speak_parts(halves, seed, ctl, next_index)
                pieces += [wave, np.zeros(int(CLAUSE_PAUSE_S * self.sample_rate), dtype=np.float32)]
        return (np.concatenate(pieces[:-1]) if pieces else np.zeros(0, dtype=np.float32)), next_index

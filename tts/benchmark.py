"""Latency / throughput / memory benchmark of the AR (Tacotron 2) and NAR (FastSpeech 2 + K-step refiner) paths.

    python -m tts.benchmark [--ar CKPT] [--nar CKPT] [--random] [--vocoder griffin-lim|hifigan_v3-random|PATH]
        [--lengths 10,25,50,100,200,400] [--ks 0,1,2,4,8] [--repeats 5] [--device cpu|cuda] [--threads N]
        [--batch-sizes 1,8] [--peers] [--peer-size matched|tiny] [--quality FILE] [--out DIR]

Everything is measured in ONE run, so the ratios (AR / NAR-K, ours / peer) compare numbers taken under the
same machine load.  Each timing is the median over `--repeats` runs after one warm-up run.

Output length.  A random-weight model has no meaningful stop token or durations, so for random models
(`--random`, a checkpoint whose info says "random", or whenever `--frames-per-symbol` is given) every
system is forced to emit round(symbols * frames_per_symbol) frames: the NAR model gets those durations,
the AR model `max_decoder_steps = ceil(frames / r)` with its stop token disabled.  A trained AR model is
left to stop by itself and a trained NAR model uses its predicted durations; the frames are recorded.
Peers (SpeechBrain modules, random weights) are always forced to our NAR frames at that length.

Peak memory is the growth of ru_maxrss during one longest-length inference in a FRESH subprocess per
system (baseline taken after the model is loaded), plus torch.cuda.max_memory_allocated on cuda.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

SENTENCES = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It is easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.",
    "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.",
    "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.",
    "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.",
    "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.",
    "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.",
    "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.",
    "The girl at the booth sold fifty bonds.",
    "The small pup gnawed a hole in the sock.",
    "The fish twisted and turned on the bent hook.",
    "Press the pants and sew a button on the vest.",
    "The swan dive was far short of perfect.",
    "The beauty of the view stunned the young boy.",
    "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.",
    "The colt reared and threw the tall rider.",
    "It snowed, rained, and hailed the same morning.",
    "Read verse out loud for pleasure.",
    "Hoist the load to your left shoulder.",
    "Take the winding path to reach the lake.",
    "Note closely the size of the gas tank.",
    "Wipe the grease off his dirty face.",
    "Mend the coat before you go out.",
    "The wrist was badly strained and hung limp.",
    "The stray cat gave birth to kittens.",
    "The young girl gave no clear response.",
    "The meal was cooked before the bell rang.",
    "What joy there is in living.",
]
FIRST_AUDIO_TEXT = " ".join(SENTENCES[:4])
FESTIVAL_VOICE = "voice_cmu_us_slt_arctic_hts"
DEFAULT_FRAMES_PER_SYMBOL = 6.0  # ~86 frames/s (hop 256 @ 22.05 kHz) over ~14 symbols/s of speech


class BenchmarkError(RuntimeError):
    """A setting the benchmark cannot run with (e.g. --device cuda without CUDA)."""


# --------------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------------
def parse_ints(s: str) -> list[int]:
    try:
        vals = [int(x) for x in s.split(",") if x.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from e
    if not vals:
        raise argparse.ArgumentTypeError("empty list")
    return vals


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def make_sync(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize()
    return lambda: None


def check_device(device: str) -> None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchmarkError(
            f"--device {device} requested but CUDA is not available here (torch {torch.__version__}, "
            f"built with CUDA {torch.version.cuda or 'none'}, {torch.cuda.device_count()} visible GPUs); "
            "run with --device cpu"
        )
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise BenchmarkError(f"unknown --device {device!r}: expected cpu or cuda[:N]")


def machine_facts(device: str, threads: int) -> dict[str, Any]:
    cpu_model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "torch_version": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "load_average_at_start": list(os.getloadavg()),
        "hostname": platform.node(),
    }
    if device.startswith("cuda"):
        facts["cuda_device"] = torch.cuda.get_device_name(torch.device(device))
        facts["cuda_version"] = torch.version.cuda
    return facts


def forced_durations(n_symbols: int, fps: float) -> list[int]:
    """Integer frames per symbol summing to round(n * fps), spread evenly."""
    edges = [round(i * fps) for i in range(n_symbols + 1)]
    return [max(b - a, 0) for a, b in zip(edges[:-1], edges[1:])]


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
def build_random_checkpoint(path: Path, model_name: str, overrides: dict[str, Any] | None = None) -> Path:
    """A random-weight acoustic checkpoint at conf/model/<name>.yaml size (speed measurements only)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tts import checkpoint
    from tts.audio import MelConfig
    from tts.checkpoint import CheckpointMeta
    from tts.paths import CONF_DIR
    from tts.text import TextFrontend

    mel_config = MelConfig.default()
    frontend = TextFrontend()
    node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / f"{model_name}.yaml"))
    node.update(overrides or {})
    kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    torch.manual_seed(0)
    model = instantiate(node, **kwargs)
    meta = CheckpointMeta("acoustic", node, kwargs, mel_config, frontend.to_dict(),
                          {"note": "random benchmark model (speed only)"})
    checkpoint.save(path, model, meta)
    return path


def is_random_checkpoint(meta) -> bool:
    return "random" in json.dumps(meta.info).lower()


def build_vocoder(name: str, mel_config, device: str):
    from tts.vocoder import registry

    if name == "hifigan_v3-random":
        torch.manual_seed(0)
        voc = registry.build_vocoder(registry.config_node("hifigan_v3"), mel_config)
        if hasattr(voc, "remove_weight_norm"):
            voc.remove_weight_norm()
        return voc.to(device).eval()
    return registry.load_vocoder(name, mel_config, device=device)


@dataclass
class System:
    """One mel generator under test: `run(tokens, lengths, frames|None) -> (mels, mel_lengths)`."""

    name: str
    kind: str  # "ar" | "nar"
    k: int | None
    model: torch.nn.Module
    forced: bool

    def run(self, tokens: torch.Tensor, lengths: torch.Tensor, frames: list[int] | None):
        if self.kind == "ar":
            if self.forced:
                assert frames is not None
                steps = math.ceil(max(frames) / self.model.r)
                out = self.model.infer(tokens, lengths, max_decoder_steps=steps, stop_threshold=1.1)  # never stops
            else:
                out = self.model.infer(tokens, lengths)
            return out.mels, out.mel_lengths
        kwargs: dict[str, Any] = {"refine_steps": self.k}
        if self.forced:
            assert frames is not None
            d = torch.zeros_like(tokens)
            for b in range(tokens.shape[0]):
                n = int(lengths[b])
                d[b, :n] = torch.tensor(forced_durations(n, frames[b] / max(n, 1)), device=tokens.device)
            kwargs["durations"] = d
        out = self.model.infer(tokens, lengths, **kwargs)
        return out.mels, out.mel_lengths


def pad_batch(ids_list: list[list[int]], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(x) for x in ids_list], device=device)
    tokens = torch.zeros(len(ids_list), int(lengths.max()), dtype=torch.long, device=device)
    for b, ids in enumerate(ids_list):
        tokens[b, : len(ids)] = torch.tensor(ids, device=device)
    return tokens, lengths


# --------------------------------------------------------------------------------------------------
# texts of a given symbol length
# --------------------------------------------------------------------------------------------------
class TextPool:
    def __init__(self, frontend) -> None:
        self.frontend = frontend
        self._cache: dict[str, list[int]] = {}

    def encode(self, s: str) -> list[int]:
        if s not in self._cache:
            self._cache[s] = self.frontend.encode(s)
        return self._cache[s]

    def text_of_length(self, n: int, offset: int = 0) -> tuple[str, list[int], list[str]]:
        """(text, exactly n symbol ids, text pieces to encode): whole pool sentences, then the words of the
        last one up to the first word that reaches n symbols; the ids are cut to exactly n."""
        used: list[str] = []
        ids: list[int] = []
        i = offset
        while len(ids) < n:
            s = SENTENCES[i % len(SENTENCES)]
            full = self.encode(s)
            if len(ids) + len(full) > n:  # cut this sentence at a word boundary
                words = s.split()
                for j in range(1, len(words) + 1):
                    part = " ".join(words[:j])
                    if len(ids) + len(self.encode(part)) >= n:
                        s, full = part, self.encode(part)
                        break
            used.append(s)
            ids = ids + full
            i += 1
        return " ".join(used), ids[:n], used


# --------------------------------------------------------------------------------------------------
# peers
# --------------------------------------------------------------------------------------------------
PEER_TINY = {
    "ar": dict(embedding_dim=32, encoder_dim=32, prenet_dim=16, attention_rnn_dim=32, decoder_rnn_dim=32,
               attention_dim=16, postnet_channels=16, location_filters=4, reduction_factor=3),
    "nar": dict(d_model=32, encoder_layers=1, decoder_layers=1, ffn_channels=64, predictor_channels=32),
}


def _cfg_get(cfg: dict[str, Any], key: str, cls) -> Any:
    import inspect

    if key in cfg:
        return cfg[key]
    return inspect.signature(cls.__init__).parameters[key].default


def build_sb_tacotron2(our_cfg: dict[str, Any], n_symbols: int, n_mels: int):
    """SpeechBrain's Tacotron2 at the size of our Tacotron2 config (random weights)."""
    from speechbrain.lobes.models.Tacotron2 import Tacotron2 as SBTacotron2

    from tts.models.autoregressive import Tacotron2

    g = lambda k: _cfg_get(our_cfg, k, Tacotron2)  # noqa: E731
    enc = int(g("encoder_dim"))
    kwargs = dict(
        mask_padding=True, n_mel_channels=n_mels, n_symbols=n_symbols,
        symbols_embedding_dim=enc,  # SpeechBrain's encoder convs take the embedding: the two must be equal
        encoder_kernel_size=int(g("encoder_kernel_size")), encoder_n_convolutions=int(g("encoder_n_convs")),
        encoder_embedding_dim=enc, attention_rnn_dim=int(g("attention_rnn_dim")),
        attention_dim=int(g("attention_dim")), attention_location_n_filters=int(g("location_filters")),
        attention_location_kernel_size=int(g("location_kernel_size")),
        n_frames_per_step=int(g("reduction_factor")), decoder_rnn_dim=int(g("decoder_rnn_dim")),
        prenet_dim=int(g("prenet_dim")), max_decoder_steps=1000, gate_threshold=0.5,
        p_attention_dropout=float(g("attention_dropout")), p_decoder_dropout=float(g("decoder_dropout")),
        postnet_embedding_dim=int(g("postnet_channels")), postnet_kernel_size=int(g("postnet_kernel_size")),
        postnet_n_convolutions=int(g("postnet_layers")), decoder_no_early_stopping=True,
    )
    torch.manual_seed(0)
    return SBTacotron2(**kwargs).eval(), kwargs


def build_sb_fastspeech2(our_cfg: dict[str, Any], n_symbols: int, n_mels: int):
    """SpeechBrain's FastSpeech2 at the size of our FastSpeech2 config (random weights)."""
    from speechbrain.lobes.models.FastSpeech2 import FastSpeech2 as SBFastSpeech2

    from tts.models.nonautoregressive import FastSpeech2

    g = lambda k: _cfg_get(our_cfg, k, FastSpeech2)  # noqa: E731
    d = int(g("d_model"))
    kwargs = dict(
        enc_num_layers=int(g("encoder_layers")), enc_num_head=int(g("n_heads")), enc_d_model=d,
        enc_ffn_dim=int(g("ffn_channels")), enc_k_dim=d, enc_v_dim=d, enc_dropout=float(g("dropout")),
        dec_num_layers=int(g("decoder_layers")), dec_num_head=int(g("n_heads")), dec_d_model=d,
        dec_ffn_dim=int(g("ffn_channels")), dec_k_dim=d, dec_v_dim=d, dec_dropout=float(g("dropout")),
        normalize_before=bool(g("pre_norm")), ffn_type="1dcnn",
        ffn_cnn_kernel_size_list=[int(g("ffn_kernel_size")), int(g("ffn_kernel_size_out"))],
        n_char=n_symbols, n_mels=n_mels,
        # SpeechBrain's FastSpeech2 always has a postnet (ours has the refiner instead): d_model channels, 5 convs
        postnet_embedding_dim=d, postnet_kernel_size=5, postnet_n_convolutions=5, postnet_dropout=0.5,
        padding_idx=0, dur_pred_kernel_size=int(g("predictor_kernel_size")),
        pitch_pred_kernel_size=int(g("predictor_kernel_size")),
        energy_pred_kernel_size=int(g("predictor_kernel_size")),
        variance_predictor_dropout=float(g("predictor_dropout")),
    )
    torch.manual_seed(0)
    return SBFastSpeech2(**kwargs).eval(), kwargs


def festival_available() -> str | None:
    """None if text2wave with the SLT HTS voice works, else the reason."""
    if shutil.which("text2wave") is None or shutil.which("festival") is None:
        return "text2wave / festival not on PATH"
    try:
        r = subprocess.run(["festival", "-b", f"({FESTIVAL_VOICE})"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"festival failed to start: {e}"
    if r.returncode != 0 or "not defined" in (r.stdout + r.stderr).lower():
        return f"festival voice {FESTIVAL_VOICE} not available: {(r.stdout + r.stderr).strip()[:300]}"
    return None


def festival_once(text: str, tmp: Path) -> tuple[float, float]:
    """(wall seconds of the whole text2wave process, seconds of audio it wrote)."""
    txt, wav = tmp / "festival.txt", tmp / "festival.wav"
    txt.write_text(text + "\n")
    wav.unlink(missing_ok=True)
    t0 = time.perf_counter()
    r = subprocess.run(["text2wave", "-eval", f"({FESTIVAL_VOICE})", "-o", str(wav), str(txt)],
                       capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t0
    if r.returncode != 0 or not wav.is_file():
        raise RuntimeError(f"text2wave failed (rc {r.returncode}): {r.stderr.strip()[:300]}")
    with wave.open(str(wav), "rb") as w:
        audio_s = w.getnframes() / w.getframerate()
    return dt, audio_s


# --------------------------------------------------------------------------------------------------
# memory probe (a fresh subprocess per system)
# --------------------------------------------------------------------------------------------------
def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def _current_rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark (which ru_maxrss reports) to the current RSS: `import torch`
    alone peaks far above a loaded small model, which would hide the inference's own growth."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs inside the fresh subprocess: load one system, then one inference at the given input."""
    from tts import checkpoint

    torch.set_num_threads(int(spec["threads"]))
    device = spec["device"]
    sync = make_sync(device)
    rss_start = _maxrss_mb()
    with torch.inference_mode():
        if spec["system"] == "vocoder":
            from tts.audio import MelConfig

            mel_config = MelConfig.from_dict(spec["mel_config"])
            voc = build_vocoder(spec["vocoder"], mel_config, device)
            frames = int(spec["frames"])
            g = torch.Generator().manual_seed(0)
            mel = (torch.randn(1, mel_config.n_mels, frames, generator=g) - 6.0).to(device)
            fn = lambda: voc(mel, torch.tensor([frames], device=device))  # noqa: E731
        else:
            loaded = checkpoint.load(spec["checkpoint"], device)
            system = System(spec["system"], spec["kind"], spec.get("k"), loaded.model, bool(spec["forced"]))
            tokens, lengths = pad_batch([spec["tokens"]], device)
            fn = lambda: system.run(tokens, lengths, [int(spec["frames"])])  # noqa: E731
        sync()
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            base_alloc = torch.cuda.memory_allocated()
        import gc

        gc.collect()
        rss_after_load_peak = _maxrss_mb()
        reset = _reset_peak_rss()
        rss_base = _maxrss_mb() if reset else rss_after_load_peak
        fn()
        sync()
        rss_peak = _maxrss_mb()
    res = {"rss_process_start_mb": rss_start, "maxrss_before_inference_mb": rss_after_load_peak,
           "rss_baseline_mb": rss_base, "rss_peak_mb": rss_peak, "rss_delta_mb": rss_peak - rss_base,
           "hwm_reset": reset, "rss_now_mb": _current_rss_mb(),
           "method": "ru_maxrss growth over one inference in a fresh process (peak reset via /proc/self/clear_refs"
                     " after loading)" if reset else "ru_maxrss growth (peak could not be reset: may read 0)"}
    if device.startswith("cuda"):
        res["cuda_max_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        res["cuda_delta_mb"] = (torch.cuda.max_memory_allocated() - base_alloc) / 2**20
    return res


def run_memory_probe_subprocess(spec: dict[str, Any], tmp: Path) -> dict[str, Any]:
    spec_file = tmp / f"probe-{spec['system']}.json"
    spec_file.write_text(json.dumps(spec))
    env = dict(os.environ, OMP_NUM_THREADS=str(spec["threads"]), MKL_NUM_THREADS=str(spec["threads"]))
    r = subprocess.run([sys.executable, "-m", "tts.benchmark", "--memory-probe", str(spec_file)],
                       capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        return {"error": f"probe failed (rc {r.returncode}): {r.stderr.strip()[-500:]}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args: argparse.Namespace, log: Callable[[str], None]) -> None:
        self.args, self.log = args, log
        self.device = args.device
        self.sync = make_sync(self.device)
        self.repeats = args.repeats

    def timeit(self, fn: Callable[[], Any]) -> tuple[Any, list[float]]:
        """One warm-up, then `repeats` timed calls (synchronised on cuda); returns the last output."""
        out = fn()
        times = []
        for _ in range(self.repeats):
            self.sync()
            t0 = time.perf_counter()
            out = fn()
            self.sync()
            times.append(time.perf_counter() - t0)
        return out, times


def run_benchmark(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    from tts import checkpoint

    check_device(args.device)
    torch.set_num_threads(args.threads)
    device = args.device
    facts = machine_facts(device, torch.get_num_threads())
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_ctx = tempfile.TemporaryDirectory(prefix="tts-bench-")
    tmp = Path(tmp_ctx.name)
    bench = Bench(args, log)
    notes: list[str] = []

    # ---- models ---------------------------------------------------------------------------------
    paths = {"ar": args.ar, "nar": args.nar}
    sources = {}
    for kind, model_name in (("ar", "autoregressive"), ("nar", "nonautoregressive")):
        if paths[kind] is None:
            if not args.random:
                raise BenchmarkError(f"no --{kind} checkpoint given: pass one, or --random for random models")
            paths[kind] = str(build_random_checkpoint(tmp / f"{kind}.pt", model_name))
            sources[kind] = f"random weights at conf/model/{model_name}.yaml size (--random)"
        else:
            sources[kind] = str(paths[kind])
    loaded = {k: checkpoint.load(p, device) for k, p in paths.items()}
    random_models = {k: is_random_checkpoint(v.meta) for k, v in loaded.items()}
    forced = args.frames_per_symbol is not None or any(random_models.values())
    fps = args.frames_per_symbol or DEFAULT_FRAMES_PER_SYMBOL
    speed_only = any(random_models.values())
    if speed_only:
        notes.append("RANDOM-WEIGHT MODELS: these numbers measure SPEED ONLY (the audio is noise).")
    if forced:
        notes.append(f"Output length forced to round(symbols x {fps:g}) frames for every system "
                     "(NAR: fixed durations; AR: max_decoder_steps, stop token disabled).")
    else:
        notes.append("Trained models: AR stops by itself, NAR uses its predicted durations (frames recorded).")
    mel_config = loaded["nar"].mel_config
    loaded["ar"].mel_config.check_compatible(mel_config, "AR checkpoint", "NAR checkpoint")
    frontend = loaded["nar"].frontend()
    pool = TextPool(frontend)
    vocoder = build_vocoder(args.vocoder, mel_config, device)
    hop, sr = mel_config.hop_length, mel_config.sample_rate

    systems = [System("ar", "ar", None, loaded["ar"].model, forced)]
    systems += [System(f"nar_k{k}", "nar", k, loaded["nar"].model, forced) for k in args.ks]
    models_info = {
        "ar": {"source": sources["ar"], "params": n_params(loaded["ar"].model), "random": random_models["ar"],
               "reduction_factor": loaded["ar"].model.r, "length_mode": "forced" if forced else "free (stop token)"},
        "nar": {"source": sources["nar"], "params": n_params(loaded["nar"].model), "random": random_models["nar"],
                "has_refiner": getattr(loaded["nar"].model, "refiner", None) is not None,
                "length_mode": "forced durations" if forced else "predicted durations"},
        "vocoder": {"name": args.vocoder, "class": type(vocoder).__name__, "params": n_params(vocoder)},
    }
    log(f"models: AR {models_info['ar']['params']/1e6:.2f} M params, NAR {models_info['nar']['params']/1e6:.2f} M, "
        f"vocoder {type(vocoder).__name__}; forced length: {forced}")

    def frames_for(n: int) -> int:
        return max(1, round(n * fps))

    # ---- mel latency, vocoder time, end-to-end RTF: one timed pipeline per repeat -----------------
    texts = {n: pool.text_of_length(n) for n in args.lengths}
    mel_latency: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    vocoder_time: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    e2e: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    with torch.inference_mode():
        for n in args.lengths:
            text, ids, used = texts[n]
            frames = [frames_for(n)] if forced else None
            def pipeline(s: System):
                t0 = time.perf_counter()
                for x in used:  # the frontend's real work (uncached); the ids are then cut to n symbols
                    pool.frontend.encode(x)
                tokens, lengths = pad_batch([ids], device)
                bench.sync()
                t1 = time.perf_counter()
                mels, mel_lengths = s.run(tokens, lengths, frames)
                bench.sync()
                t2 = time.perf_counter()
                w = vocoder(mels, mel_lengths)
                bench.sync()
                t3 = time.perf_counter()
                return (t1 - t0, t2 - t1, t3 - t2, t3 - t0, int(mel_lengths[0]), int(w.lengths[0]))

            for s in systems:
                pipeline(s)  # warm-up
            # Repeats are interleaved (system A, B, C, A, B, C, ...) so that a burst of load from other
            # processes hits every system alike and the same-run ratios stay fair.
            all_runs: dict[str, list[tuple]] = {s.name: [] for s in systems}
            for _ in range(args.repeats):
                for s in systems:
                    all_runs[s.name].append(pipeline(s))
            for s in systems:
                runs = all_runs[s.name]
                n_frames = runs[-1][4]
                audio_s = runs[-1][5] / sr
                mel_t = [r[1] for r in runs]
                voc_t = [r[2] for r in runs]
                tot_t = [r[3] for r in runs]
                mel_latency[s.name][str(n)] = {"median_s": median(mel_t), "times_s": mel_t, "frames": n_frames,
                                               "ms_per_frame": 1000 * median(mel_t) / max(n_frames, 1)}
                vocoder_time[s.name][str(n)] = {"median_s": median(voc_t), "times_s": voc_t, "frames": n_frames,
                                                "audio_s": audio_s, "rtf": median(voc_t) / max(audio_s, 1e-9)}
                e2e[s.name][str(n)] = {"median_s": median(tot_t), "text_s": median([r[0] for r in runs]),
                                       "audio_s": audio_s, "rtf": median(tot_t) / max(audio_s, 1e-9)}
                log(f"  len {n:4d} {s.name:8s} mel {median(mel_t)*1000:9.1f} ms ({n_frames} frames)  "
                    f"voc {median(voc_t)*1000:8.1f} ms  e2e RTF {e2e[s.name][str(n)]['rtf']:.3f}")

    ratios = {}
    for s in systems[1:]:
        ratios[f"ar_over_{s.name}"] = {
            str(n): mel_latency["ar"][str(n)]["median_s"] / mel_latency[s.name][str(n)]["median_s"]
            for n in args.lengths
        }

    # ---- first-audio latency: sentence by sentence, as a streaming synthesiser would ---------------
    from tts.text import split_sentences

    sentences = split_sentences(FIRST_AUDIO_TEXT)
    first_audio: dict[str, Any] = {}
    with torch.inference_mode():
        for s in systems:
            def stream():
                t0 = time.perf_counter()
                first, audio = None, 0
                for sent in sentences:
                    ids = pool.frontend.encode(sent)
                    tokens, lengths = pad_batch([ids], device)
                    mels, mel_lengths = s.run(tokens, lengths, [frames_for(len(ids))] if forced else None)
                    w = vocoder(mels, mel_lengths)
                    bench.sync()
                    audio += int(w.lengths[0])
                    if first is None:
                        first = time.perf_counter() - t0
                return first, time.perf_counter() - t0, audio / sr

            stream()
            runs = [stream() for _ in range(args.repeats)]
            first_audio[s.name] = {"first_audio_s": median([r[0] for r in runs]), "total_s": median([r[1] for r in runs]),
                                   "audio_s": runs[-1][2], "n_sentences": len(sentences)}
            log(f"  first audio {s.name:8s} {first_audio[s.name]['first_audio_s']*1000:9.1f} ms "
                f"(whole {len(sentences)} sentences {first_audio[s.name]['total_s']*1000:.1f} ms)")

    # ---- batch throughput ---------------------------------------------------------------------------
    batch_len = args.batch_length
    batch_ids = [pool.text_of_length(batch_len, offset=i)[1] for i in range(max(args.batch_sizes))]
    throughput: dict[str, dict[str, Any]] = {s.name: {} for s in systems}
    with torch.inference_mode():
        for s in systems:
            for bsz in args.batch_sizes:
                tokens, lengths = pad_batch(batch_ids[:bsz], device)
                frames = [frames_for(batch_len)] * bsz if forced else None

                def batch():
                    mels, mel_lengths = s.run(tokens, lengths, frames)
                    w = vocoder(mels, mel_lengths)
                    return int(w.lengths.sum())

                samples, times = bench.timeit(batch)
                t = median(times)
                throughput[s.name][str(bsz)] = {"median_s": t, "utterances_per_s": bsz / t,
                                                "audio_s_per_s": samples / sr / t, "symbols_per_utterance": batch_len}
                log(f"  batch {bsz:3d} {s.name:8s} {bsz / t:8.2f} utt/s  {samples / sr / t:8.2f} audio-s/s")

    # ---- peak memory: fresh subprocess per system ------------------------------------------------------
    peak_memory: dict[str, Any] = {}
    if not args.no_memory:
        n_max = max(args.lengths)
        ids_max = texts[n_max][1]
        frames_max = mel_latency["nar_k" + str(args.ks[0])][str(n_max)]["frames"] if args.ks else frames_for(n_max)
        for s in systems:
            spec = {"system": s.name, "kind": s.kind, "k": s.k, "checkpoint": paths[s.kind], "tokens": ids_max,
                    "frames": frames_for(n_max) if forced else frames_max, "forced": forced, "device": device,
                    "threads": torch.get_num_threads()}
            peak_memory[s.name] = run_memory_probe_subprocess(spec, tmp) | {"symbols": n_max}
        spec = {"system": "vocoder", "vocoder": args.vocoder, "mel_config": mel_config.to_dict(), "frames": frames_max,
                "device": device, "threads": torch.get_num_threads()}
        peak_memory["vocoder"] = run_memory_probe_subprocess(spec, tmp) | {"frames": frames_max}
        for k, v in peak_memory.items():
            log(f"  memory {k:8s} " + (f"+{v['rss_delta_mb']:.1f} MiB RSS (peak {v['rss_peak_mb']:.0f} MiB)"
                                       if "error" not in v else v["error"]))

    # ---- peers -------------------------------------------------------------------------------------------
    peers: dict[str, Any] = {}
    if args.peers:
        peers = run_peers(args, bench, loaded, texts, mel_latency, e2e, tmp, log)

    # ---- mel comparison image input --------------------------------------------------------------------
    mel_images = {}
    with torch.inference_mode():
        ids = pool.encode(SENTENCES[0])
        tokens, lengths = pad_batch([ids], device)
        fr = [frames_for(len(ids))] if forced else None
        picks = [systems[0]] + ([systems[1]] if len(systems) > 1 else [])
        if len(systems) > 2:
            picks.append(max(systems[1:], key=lambda s: s.k))
        for s in picks:
            mels, ml = s.run(tokens, lengths, fr)
            mel_images[s.name] = mels[0, :, : int(ml[0])].float().cpu()

    result = {
        "meta": {
            "command": " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tts.benchmark", *args.argv]),
            "argv": args.argv,
            "started": args.started,
            "machine": facts,
            "models": models_info,
            "speed_only": speed_only,
            "forced_length": forced,
            "frames_per_symbol": fps if forced else None,
            "notes": notes,
        },
        "settings": {"lengths": args.lengths, "ks": args.ks, "repeats": args.repeats, "warmup": 1,
                     "batch_sizes": args.batch_sizes, "batch_length": batch_len, "device": device,
                     "threads": torch.get_num_threads(), "vocoder": args.vocoder,
                     "sample_rate": sr, "hop_length": hop, "statistic": "median"},
        "mel_latency": mel_latency,
        "ratios": ratios,
        "vocoder": vocoder_time,
        "end_to_end": e2e,
        "first_audio": first_audio,
        "batch_throughput": throughput,
        "peak_memory": peak_memory,
        "peers": peers,
        "load_average_at_end": list(os.getloadavg()),
    }
    if args.quality:
        result["quality"] = json.loads(Path(args.quality).read_text())
    result["plots"] = make_plots(result, mel_images, out_dir, mel_config)
    (out_dir / "benchmark.json").write_text(json.dumps(result, indent=2))
    (out_dir / "benchmark.md").write_text(to_markdown(result))
    tmp_ctx.cleanup()
    return result


def run_peers(args, bench: Bench, loaded, texts, mel_latency, e2e, tmp: Path, log) -> dict[str, Any]:
    peers: dict[str, Any] = {}
    ref = "nar_k" + str(args.ks[0]) if args.ks else "ar"
    device = args.device

    # Festival SLT HTS: whole-process wall time per utterance, audio length from its output
    reason = festival_available()
    if reason is not None:
        peers["festival_slt"] = {"status": "unavailable", "reason": reason}
    else:
        per = {}
        try:
            for n in args.lengths:
                text = texts[n][0]
                festival_once(text, tmp)  # warm-up (page cache)
                runs = [festival_once(text, tmp) for _ in range(args.repeats)]
                t, audio_s = median([r[0] for r in runs]), runs[-1][1]
                per[str(n)] = {"median_s": t, "audio_s": audio_s, "rtf": t / max(audio_s, 1e-9), "text": text,
                               "ours_e2e_rtf_" + ref: e2e[ref][str(n)]["rtf"]}
                log(f"  peer festival len {n:4d}: {t*1000:.0f} ms for {audio_s:.2f} s audio, RTF {t/audio_s:.3f}")
            peers["festival_slt"] = {"status": "ok", "what": f"text2wave -eval '({FESTIVAL_VOICE})' whole process, "
                                     "on the full sentences our inputs were cut from", "per_length": per}
        except Exception as e:  # noqa: BLE001 - a peer failing must not fail the run
            peers["festival_slt"] = {"status": "failed", "reason": f"{type(e).__name__}: {e}", "per_length": per}

    # SpeechBrain modules at matched (or tiny) size, random weights, their own inference calls
    n_symbols = loaded["nar"].meta.build_kwargs["n_symbols"]
    n_mels = loaded["nar"].meta.build_kwargs["n_mels"]
    for name, kind, builder in (("speechbrain_tacotron2", "ar", build_sb_tacotron2),
                                ("speechbrain_fastspeech2", "nar", build_sb_fastspeech2)):
        cfg = dict(loaded[kind].meta.model_config)
        if args.peer_size == "tiny":
            cfg.update(PEER_TINY[kind])
        try:
            model, kwargs = builder(cfg, n_symbols, n_mels)
            model = model.to(device)
            per = {}
            ours = "ar" if kind == "ar" else ref
            with torch.inference_mode():
                for n in args.lengths:
                    ids = texts[n][1]
                    tokens, lengths = pad_batch([ids], device)
                    frames = mel_latency[ref][str(n)]["frames"]  # the same output length as our NAR
                    if kind == "ar":
                        r = kwargs["n_frames_per_step"]
                        model.decoder.max_decoder_steps = math.ceil(frames / r)
                        model.decoder.early_stopping = False
                        fn = lambda: model.infer(tokens, lengths.int())  # noqa: E731
                    else:
                        d = torch.tensor([forced_durations(n, frames / n)], device=device)
                        fn = lambda: model(tokens, durations=d)  # noqa: E731
                    out, times = bench.timeit(fn)
                    got = out[0].shape[-1] if kind == "ar" else out[1].shape[1]
                    t = median(times)
                    per[str(n)] = {"median_s": t, "frames": int(got),
                                   "ours_" + ours + "_median_s": mel_latency[ours][str(n)]["median_s"],
                                   "ours_over_peer": mel_latency[ours][str(n)]["median_s"] / t}
                    log(f"  peer {name} len {n:4d}: {t*1000:.1f} ms ({got} frames); ours/peer "
                        f"{per[str(n)]['ours_over_peer']:.2f}")
            peers[name] = {"status": "ok", "params": n_params(model), "compared_with": ours,
                           "size": args.peer_size, "constructor": kwargs,
                           "call": "Tacotron2.infer(tokens, lengths), early stopping off, max_decoder_steps forced"
                           if kind == "ar" else "FastSpeech2.forward(tokens, durations=forced)",
                           "per_length": per}
        except Exception as e:  # noqa: BLE001 - report, don't fail the run
            peers[name] = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
            log(f"  peer {name} could not run: {e}")
    return peers


# --------------------------------------------------------------------------------------------------
# plots and markdown
# --------------------------------------------------------------------------------------------------
def make_plots(result: dict[str, Any], mel_images: dict[str, torch.Tensor], out_dir: Path, mel_config) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = {}
    lengths = result["settings"]["lengths"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, per in result["mel_latency"].items():
        ax.plot(lengths, [per[str(n)]["median_s"] * 1000 for n in lengths], marker="o",
                label=name.upper().replace("NAR_K", "NAR K="))
    for name, peer in result["peers"].items():
        if peer.get("status") == "ok" and name.startswith("speechbrain"):
            ax.plot(lengths, [peer["per_length"][str(n)]["median_s"] * 1000 for n in lengths], marker="x",
                    linestyle="--", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("input length (symbols)")
    ax.set_ylabel("mel generation time (ms, median)")
    title = "Mel-generation latency vs input length"
    if result["meta"]["speed_only"]:
        title += " (random weights: speed only)"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out_dir / "latency_vs_length.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    plots["latency_vs_length"] = str(p)

    if "quality" in result:
        q = result["quality"]
        ks = sorted(q, key=lambda k: int(k))
        fig, ax = plt.subplots(figsize=(6, 4))
        metrics = sorted({m for k in ks for m in q[k]})
        axes = [ax] + [ax.twinx() for _ in metrics[1:2]]
        for i, m in enumerate(metrics[:2]):
            axes[i].plot([int(k) for k in ks], [q[k].get(m, float("nan")) for k in ks], marker="o",
                         color=f"C{i}", label=m)
            axes[i].set_ylabel(m, color=f"C{i}")
        ax.set_xlabel("refine steps K")
        ax.set_title("Quality vs K")
        fig.tight_layout()
        p = out_dir / "quality_vs_k.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        plots["quality_vs_k"] = str(p)

    if mel_images:
        fig, axes = plt.subplots(len(mel_images), 1, figsize=(8, 2.4 * len(mel_images)), squeeze=False)
        vmin = min(float(m.min()) for m in mel_images.values())
        vmax = max(float(m.max()) for m in mel_images.values())
        for ax, (name, mel) in zip(axes[:, 0], mel_images.items()):
            ax.imshow(mel.numpy(), origin="lower", aspect="auto", interpolation="nearest", vmin=vmin, vmax=vmax)
            ax.set_title(f"{name.upper().replace('NAR_K', 'NAR K=')}  ({mel.shape[1]} frames)", fontsize=9)
            ax.set_ylabel("mel bin")
        axes[-1, 0].set_xlabel(f"frame (hop {mel_config.hop_length})")
        fig.suptitle(f"\"{SENTENCES[0]}\"" + (" -- random weights" if result["meta"]["speed_only"] else ""),
                     fontsize=9)
        fig.tight_layout()
        p = out_dir / "mel_comparison.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        plots["mel_comparison"] = str(p)
    return plots


def _ms(x: float) -> str:
    return f"{x * 1000:.1f}"


def to_markdown(r: dict[str, Any]) -> str:
    m, s = r["meta"], r["settings"]
    lengths, names = s["lengths"], list(r["mel_latency"])
    mf = m["machine"]
    lines = ["# TTS benchmark", ""]
    if m["speed_only"]:
        lines += ["**RANDOM-WEIGHT MODELS -- SPEED ONLY.** Output lengths are forced; the audio is noise.", ""]
    lines += [f"- command: `{m['command']}`", f"- started: {m['started']}",
              f"- machine: {mf['cpu_model']}, {mf['cpu_count']} CPUs, torch {mf['torch_version']} "
              f"({mf['torch_threads']} threads), device {mf['device']}"
              + (f" ({mf.get('cuda_device')})" if "cuda_device" in mf else ""),
              f"- load average at start: {', '.join(f'{x:.2f}' for x in mf['load_average_at_start'])}; "
              f"at end: {', '.join(f'{x:.2f}' for x in r['load_average_at_end'])}",
              f"- AR: {m['models']['ar']['source']} ({m['models']['ar']['params']/1e6:.2f} M params, "
              f"r={m['models']['ar']['reduction_factor']}, {m['models']['ar']['length_mode']})",
              f"- NAR: {m['models']['nar']['source']} ({m['models']['nar']['params']/1e6:.2f} M params, "
              f"{m['models']['nar']['length_mode']})",
              f"- vocoder: {m['models']['vocoder']['name']} ({m['models']['vocoder']['class']}, "
              f"{m['models']['vocoder']['params']/1e6:.2f} M params)",
              f"- statistic: median of {s['repeats']} runs after {s['warmup']} warm-up (latency repeats interleaved "
              "across systems); ratios from this run's medians"]
    lines += [f"- note: {n}" for n in m["notes"]]
    lines += ["", "## Mel-generation latency (ms) vs input length (symbols)", ""]
    ratio_names = list(r["ratios"])
    hdr = ["symbols", "frames"] + names + [k.replace("ar_over_", "AR/").replace("nar_k", "NAR-K") for k in ratio_names]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for n in lengths:
        row = [str(n), str(r["mel_latency"][names[-1]][str(n)]["frames"])]
        row += [_ms(r["mel_latency"][k][str(n)]["median_s"]) for k in names]
        row += [f"{r['ratios'][k][str(n)]:.1f}x" for k in ratio_names]
        lines.append("| " + " | ".join(row) + " |")
    if not m["forced_length"]:
        lines += ["", "AR frames per length: " + ", ".join(
            f"{n}: {r['mel_latency']['ar'][str(n)]['frames']}" for n in lengths)]

    lines += ["", "## Vocoder time and end-to-end RTF (text frontend + mel + vocoder) / audio seconds", ""]
    hdr = ["symbols", "audio s", "vocoder ms", "vocoder RTF"] + [f"RTF {k}" for k in names]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for n in lengths:
        v = r["vocoder"][names[-1]][str(n)]
        row = [str(n), f"{v['audio_s']:.2f}", _ms(v["median_s"]), f"{v['rtf']:.3f}"]
        row += [f"{r['end_to_end'][k][str(n)]['rtf']:.3f}" for k in names]
        lines.append("| " + " | ".join(row) + " |")

    lines += ["", "## First-audio latency (multi-sentence text, sentence by sentence)", "",
              "| system | first audio ms | all sentences ms | audio s |", "|---|---|---|---|"]
    for k, v in r["first_audio"].items():
        lines.append(f"| {k} | {_ms(v['first_audio_s'])} | {_ms(v['total_s'])} | {v['audio_s']:.2f} |")

    lines += ["", f"## Batch throughput ({s['batch_length']} symbols per utterance, mel + vocoder)", ""]
    hdr = ["system"] + [f"B={b} utt/s" for b in s["batch_sizes"]] + [f"B={b} audio-s/s" for b in s["batch_sizes"]]
    lines += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for k, per in r["batch_throughput"].items():
        row = [k] + [f"{per[str(b)]['utterances_per_s']:.2f}" for b in s["batch_sizes"]]
        row += [f"{per[str(b)]['audio_s_per_s']:.2f}" for b in s["batch_sizes"]]
        lines.append("| " + " | ".join(row) + " |")

    if r["peak_memory"]:
        lines += ["", f"## Peak memory (fresh subprocess per system, longest input {max(lengths)} symbols)", "",
                  "| system | RSS growth MiB | peak RSS MiB | cuda max alloc MiB |", "|---|---|---|---|"]
        for k, v in r["peak_memory"].items():
            if "error" in v:
                lines.append(f"| {k} | error: {v['error'][:80]} | | |")
            else:
                lines.append(f"| {k} | {v['rss_delta_mb']:.1f} | {v['rss_peak_mb']:.0f} | "
                             f"{v.get('cuda_max_allocated_mb', float('nan')):.1f} |")

    if r["peers"]:
        lines += ["", "## Peers (same run)", ""]
        for name, p in r["peers"].items():
            if p.get("status") != "ok":
                lines.append(f"- **{name}**: {p.get('status')} -- {p.get('reason')}")
                continue
            if name == "festival_slt":
                lines += [f"**Festival SLT HTS** ({p['what']})", "",
                          "| symbols | wall ms | audio s | RTF | ours e2e RTF |", "|---|---|---|---|---|"]
                for n, v in p["per_length"].items():
                    ours = [x for kk, x in v.items() if kk.startswith("ours_e2e_rtf")][0]
                    lines.append(f"| {n} | {v['median_s']*1000:.0f} | {v['audio_s']:.2f} | {v['rtf']:.3f} | {ours:.3f} |")
            else:
                lines += ["", f"**{name}** ({p['params']/1e6:.2f} M params, size {p['size']}, random weights; "
                          f"{p['call']}) vs our {p['compared_with']}", "",
                          "| symbols | frames | peer ms | ours ms | ours/peer |", "|---|---|---|---|---|"]
                for n, v in p["per_length"].items():
                    ours = [x for kk, x in v.items() if kk.startswith("ours_") and kk.endswith("median_s")][0]
                    lines.append(f"| {n} | {v['frames']} | {_ms(v['median_s'])} | {_ms(ours)} | {v['ours_over_peer']:.2f} |")
            lines.append("")

    if "quality" in r:
        lines += ["", "## Quality vs K (from --quality)", "", "| K | " + " | ".join(
            sorted({mm for v in r["quality"].values() for mm in v})) + " |"]
        ms_ = sorted({mm for v in r["quality"].values() for mm in v})
        lines.append("|---|" + "---|" * len(ms_))
        for k in sorted(r["quality"], key=int):
            lines.append(f"| {k} | " + " | ".join(str(r["quality"][k].get(mm, "")) for mm in ms_) + " |")
    lines += ["", "## Plots", ""] + [f"- {k}: `{v}`" for k, v in r["plots"].items()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tts.benchmark", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", help="autoregressive acoustic checkpoint")
    p.add_argument("--nar", help="non-autoregressive acoustic checkpoint")
    p.add_argument("--random", action="store_true",
                   help="build random-weight models at conf/model/*.yaml size for missing checkpoints (speed only)")
    p.add_argument("--vocoder", default="griffin-lim", help="griffin-lim | hifigan_v3-random | hifigan | PATH")
    p.add_argument("--lengths", type=parse_ints, default=[10, 25, 50, 100, 200, 400], help="input lengths (symbols)")
    p.add_argument("--ks", type=parse_ints, default=[0, 1, 2, 4, 8], help="NAR refine steps to measure")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    p.add_argument("--batch-sizes", type=parse_ints, default=[1, 8])
    p.add_argument("--batch-length", type=int, default=50, help="symbols per utterance in the throughput test")
    p.add_argument("--frames-per-symbol", type=float, default=None,
                   help=f"force every system to this many frames per symbol (default for random models: "
                        f"{DEFAULT_FRAMES_PER_SYMBOL})")
    p.add_argument("--peers", action="store_true", help="also time Festival SLT and SpeechBrain's modules")
    p.add_argument("--peer-size", choices=["matched", "tiny"], default="matched",
                   help="SpeechBrain peers at our models' size (matched) or tiny (for tests)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--quality", help="JSON {K: {'cer': .., 'mcd': ..}} to plot quality vs K")
    p.add_argument("--out", default="benchmark_out")
    p.add_argument("--memory-probe", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.memory_probe:
        print(json.dumps(memory_probe(json.loads(Path(args.memory_probe).read_text()))))
        return 0
    if args.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return 2
    if any(k < 0 for k in args.ks):
        print("error: --ks must be >= 0", file=sys.stderr)
        return 2
    args.argv = argv
    args.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if args.threads is None:
        args.threads = torch.get_num_threads()
    try:
        result = run_benchmark(args, log=lambda s: print(s, flush=True))
    except BenchmarkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {Path(args.out) / 'benchmark.json'} and {Path(args.out) / 'benchmark.md'}; "
          f"plots: {', '.join(result['plots'].values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

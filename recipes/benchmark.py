"""Latency / throughput / memory benchmark of the AR (Tacotron 2) and NAR (FastSpeech 2 + K-step refiner) paths.

    python -m recipes.benchmark [--ar CKPT] [--nar CKPT] [--random] [--vocoder source-filter|griffin-lim|hifigan|hifigan_v3-random|PATH]
        [--lengths 10,25,50,100,200,400] [--ks 0,1,2,4,8] [--repeats 5] [--device cpu|cuda] [--threads N]
        [--batch-sizes 1,8] [--peers] [--peer-size matched|tiny] [--quality FILE] [--out DIR]
    python -m recipes.benchmark cold-start [--repeats 5] [--importtime] [--out DIR]   (recipes/bench/cold_start.py)
    python -m recipes.benchmark onnx [--threads 1,2] [--lengths 25,100,300] [--out DIR]  (recipes/bench/onnx_speed.py)
    python -m recipes.benchmark blocks --block CKPT [--nar CKPT] [--ar CKPT] [--blocks 8,16,32,64,0] [--quality FILE]
        (recipes/bench/blocks.py: the block-wise NAR's first-audio latency and total time over B, beside AR and NAR)
    python -m recipes.benchmark batching [--batch-sizes 1,2,4,8,16] [--orders bucketed,random] [--limit 64] [--out DIR]
        (recipes/bench/batching.py: AR and NAR throughput over batch size, bucketed vs random, padding fractions)
    python -m recipes.benchmark kv-cache [--lengths 100,..,2000] [--budget-mb 512] [--out DIR]  (bench/kv_cache.py)
    python -m recipes.benchmark latency [--lengths 12,..,200] [--repeats 3] [--threads 1] [--tar CKPT] [--out DIR]
        (recipes/bench/latency.py: every system's model-only and end-to-end time against length, and the margin)
    python -m recipes.benchmark short [--checkpoint CKPT ...] [--speeds 1,1.25,1.5,1.75,2] [--out DIR]
        (recipes/bench/short_utterances.py: one-vowel texts audible at every speed; a candidate default's gate)

Without --ar / --nar / --vocoder the shipped models are measured (checkpoints/ar.pt, checkpoints/nar.pt and the
default vocoder of checkpoints/default.json); --random builds random-weight models for the ones not given.

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
import sys
import time
from pathlib import Path

import torch

from recipes.bench.measure import run_benchmark
from recipes.bench.memory import memory_probe
from recipes.bench.systems import DEFAULT_FRAMES_PER_SYMBOL
from recipes.bench.timing import BenchmarkError


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


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    subcommands = "\n".join(f"  python -m recipes.benchmark {name} [--help]   {about}" for name, (_, about) in SUBCOMMANDS.items())
    p = argparse.ArgumentParser(prog="python -m recipes.benchmark", description=__doc__.split("\n\n")[0],
                                epilog=f"subcommands (each with its own options):\n{subcommands}",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", help="autoregressive acoustic checkpoint (default: the shipped checkpoints/ar.pt)")
    p.add_argument("--nar", help="non-autoregressive acoustic checkpoint (default: the shipped checkpoints/nar.pt)")
    p.add_argument("--random", action="store_true",
                   help="build random-weight models at conf/model/*.yaml size for missing checkpoints (speed only)")
    p.add_argument("--vocoder", default=None,
                   help="source-filter | griffin-lim | hifigan | hifigan_v3-random | PATH "
                        "(default: the shipped default vocoder, checkpoints/default.json)")
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
    p.add_argument("--quality", help="recipes.evaluate report.json (with nar_ks) or JSON {K: {metric: value}}: "
                   "plots quality vs K")
    p.add_argument("--out", default="benchmark_out")
    p.add_argument("--memory-probe", help=argparse.SUPPRESS)
    return p


# Subcommands with their own options (the first argument); without one, the latency/memory benchmark runs.
SUBCOMMANDS = {
    "cold-start": ("recipes.bench.cold_start", "CLI start-up time and memory in fresh processes"),
    "onnx": ("recipes.bench.onnx_speed", "torch against the ONNX engine, stage by stage"),
    "blocks": ("recipes.bench.blocks", "the block-wise NAR's first audio and total time over B"),
    "batching": ("recipes.bench.batching", "AR and NAR throughput over batch size, bucketed vs random, padding"),
    "runtime": ("recipes.bench.runtime", "default (ONNX) vs torch vs Piper RTF, CLI stream and cold start"),
    "kv-cache": ("recipes.bench.kv_cache", "the Transformer AR's per-step time and KV-cache memory against length"),
    "latency": ("recipes.bench.latency", "every system's model-only and end-to-end time against length, the margin"),
    "short": ("recipes.bench.short_utterances", "one-vowel / one-word texts audible at every speed (a default's gate)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        import importlib

        return importlib.import_module(SUBCOMMANDS[argv[0]][0]).main(argv[1:])
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
"""The runtime benchmark of issue 38: is the default runtime the fastest way to speak?

    python -m recipes.benchmark runtime --repeats 3 --out docs/results/runtime

Measured side by side in one run, on one thread each:
  * paragraph: a 12-sentence paragraph of ordinary documentation, in-process, through the one pipeline on
    the default runtime (`open_pipeline()`: the ONNX export when current) and on torch, and through Piper
    (en_US-joe-medium, onnxruntime); one untimed run each, then `--repeats` rounds with the systems
    alternating; RTF = wall seconds / audio seconds (best and median);
  * cli_stream_first_bytes: `python -m tts.synthesize --stream --text-file PARAGRAPH --out -` in a fresh
    process: seconds from launch to the first byte of audio on stdout (and to the end);
  * cli_hi: `python -m tts.synthesize --text "Hi." --out x.wav`: wall seconds and peak RSS of the process.
The targets (issue 38) are printed beside what was measured; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tts.paths import REPO_ROOT

# Ordinary documentation prose (written for this benchmark: evaluation text, never trained on).
PARAGRAPH = " ".join([
    "This package provides a small command line tool for converting text files between common encodings.",
    "By default, the program reads from standard input and writes the result to standard output.",
    "You can also name an input file and an output file on the command line.",
    "If the output file already exists, it is replaced only when the conversion succeeds.",
    "Lines that cannot be converted are reported with their line numbers, and the program exits with an error.",
    "The configuration file in your home directory sets the default encodings and the line endings.",
    "Options given on the command line always take precedence over the configuration file.",
    "To see every supported encoding, run the program with the list option.",
    "Large files are processed in blocks of one megabyte, so memory use stays small.",
    "The test suite can be run from the source directory with a single make command.",
    "Please report bugs through the project's issue tracker, and include the version number.",
    "This software is free, and you may redistribute it under the terms of the license.",
])
TARGETS = {"paragraph_rtf": "default runtime <= torch and <= 1/3 of Piper",
           "cli_stream_first_bytes_s": "<= 0.6 s", "cli_hi": "<= 0.5 s and <= 150 MB"}


def paragraph_rtf(repeats: int, threads: int) -> dict[str, Any]:
    """In-process RTF of the paragraph for the default runtime, torch and Piper, alternating per round."""
    import torch

    from recipes.peers.piper import PiperPeer
    from tts.runtime.release import open_pipeline

    torch.set_num_threads(threads)
    default = open_pipeline(threads=threads)
    speakers = {
        f"default ({default.engine.name})": lambda: default.synthesize(PARAGRAPH),
        "torch": (lambda p: lambda: p.synthesize(PARAGRAPH))(open_pipeline(runtime="torch", threads=threads)),
    }
    piper = PiperPeer(threads=threads)
    speakers["piper"] = lambda: piper(PARAGRAPH)
    seconds: dict[str, float] = {}
    for name, speak in speakers.items():  # untimed: one-time set-up out of the figures
        out = speak()
        seconds[name] = out.wave.size / out.sample_rate
    walls: dict[str, list[float]] = {name: [] for name in speakers}
    for _ in range(repeats):
        for name, speak in speakers.items():
            t0 = time.perf_counter()
            speak()
            walls[name].append(time.perf_counter() - t0)
    return {name: {"audio_s": round(seconds[name], 2), "wall_s": [round(w, 4) for w in walls[name]],
                   "rtf_best": round(min(walls[name]) / seconds[name], 4),
                   "rtf_median": round(statistics.median(walls[name]) / seconds[name], 4)} for name in speakers}


def cli_stream_first_bytes(repeats: int, text_file: Path) -> dict[str, Any]:
    """Fresh CLI processes streaming the paragraph to stdout: launch -> first byte, launch -> end."""
    first, total = [], []
    cmd = [sys.executable, "-m", "tts.synthesize", "--stream", "--text-file", str(text_file), "--out", "-",
           "--quiet", "--threads", "1"]
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        byte = proc.stdout.read(1)
        first.append(time.perf_counter() - t0)
        rest = proc.stdout.read()
        proc.wait()
        total.append(time.perf_counter() - t0)
        if proc.returncode != 0 or not byte:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
        del rest
    return {"first_bytes_s": [round(x, 3) for x in first], "first_bytes_s_median": round(statistics.median(first), 3),
            "total_s_median": round(statistics.median(total), 3)}


def cli_hi(repeats: int) -> dict[str, Any]:
    """Fresh CLI processes speaking "Hi." to a wav: wall seconds and the process's own peak RSS."""
    from recipes.bench.cold_start import run_once

    walls, rss = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "tts.synthesize", "--text", "Hi.", "--out", str(Path(tmp) / "hi.wav"), "--quiet"]
        import os

        for _ in range(repeats):
            wall, peak_mb, _ = run_once(cmd, REPO_ROOT, dict(os.environ))
            walls.append(wall)
            rss.append(peak_mb)
    return {"wall_s": [round(w, 3) for w in walls], "wall_s_median": round(statistics.median(walls), 3),
            "peak_rss_mb_max": round(max(rss), 1)}


def table(result: dict[str, Any]) -> str:
    lines = ["| system | audio s | RTF best | RTF median |", "|---|---|---|---|"]
    for name, r in result["paragraph"].items():
        lines.append(f"| {name} | {r['audio_s']} | {r['rtf_best']:.4f} | {r['rtf_median']:.4f} |")
    s, h = result["cli_stream"], result["cli_hi"]
    lines += ["", f"CLI `--stream --out -` on the paragraph: first bytes {s['first_bytes_s_median']} s after launch "
              f"(median of {len(s['first_bytes_s'])}: {s['first_bytes_s']}), whole run {s['total_s_median']} s.",
              f"CLI \"Hi.\": {h['wall_s_median']} s (median of {len(h['wall_s'])}: {h['wall_s']}), peak RSS "
              f"{h['peak_rss_mb_max']} MB.", f"Load average at the start: {result['load_average']}.",
              "Targets (issue 38): " + "; ".join(f"{k}: {v}" for k, v in TARGETS.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.benchmark runtime", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("runtime_out"))
    args = p.parse_args(argv)
    if args.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return 2
    import os

    args.out.mkdir(parents=True, exist_ok=True)
    text_file = args.out / "paragraph.txt"
    text_file.write_text(PARAGRAPH + "\n")
    result = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": list(sys.argv[1:] if argv is None else argv),
              "load_average": [round(x, 2) for x in os.getloadavg()], "threads": args.threads,
              "paragraph": paragraph_rtf(args.repeats, args.threads),
              "cli_stream": cli_stream_first_bytes(args.repeats, text_file), "cli_hi": cli_hi(args.repeats),
              "targets": TARGETS}
    (args.out / "runtime.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "runtime.md").write_text(table(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

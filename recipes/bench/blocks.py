"""The curve over the block size B of the block-wise NAR (issue 22), beside the AR and the parallel NAR.

    python -m recipes.benchmark blocks --block checkpoints/nar_block.pt --nar checkpoints/nar.pt --ar checkpoints/ar.pt \
        [--vocoder source-filter] [--blocks 8,16,32,64,0] [--lengths 10,100,400] [--repeats 3] [--threads 2] \
        [--quality exp/eval/blockwise/report.json] [--out docs/results/blockwise]

Speed, measured here, through THE streaming path (`Pipeline.stream_utterance`, batch 1):
  * first_audio_s: from the call to the first audio chunk, for one token sequence of exactly N symbols
    (N in --lengths; the parallel encoder, the blocks up to the first determined frames, the refiner's
    K x R-frame lookahead and the vocoder's lookahead are all inside it);
  * total_s: until the stream ends (all audio of that input);
  * paragraph_first_audio_s: first audio of a 200-word paragraph through `Pipeline.stream(text)`, text
    processing of the whole paragraph included (the issue's target: <= 150 ms on 2 cores).
Each figure is the median of --repeats runs after one warm-up run, all systems in ONE run (same load).
Quality (CER, MCD, DistillMOS) is read from a recipes.evaluate report.json whose systems are named
`<block-prefix>_b8 ... _bwhole` (nar_bs) beside `ar` and `nar` (--quality); the plot puts both side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tts import checkpoint
from recipes.bench.texts import SENTENCES, TextPool
from recipes.bench.timing import machine_facts, median
from tts.runtime.pipeline import Pipeline
from tts.runtime.text_stage import Part
from tts.runtime.torch_engine import TorchEngine
from tts.vocoder.registry import load_vocoder

PARAGRAPH_WORDS = 200
QUALITY_METRICS = ("cer", "mcd_db", "distillmos")


@dataclass(frozen=True)
class BenchSystem:
    name: str  # "ar", "nar" (parallel), "b8", ..., "bwhole"
    checkpoint: str
    block_frames: int | None  # None: not a block-mode run


def paragraph(n_words: int = PARAGRAPH_WORDS) -> str:
    """Pool sentences until n_words words (whole sentences, then cut at a word, ending in a stop)."""
    words: list[str] = []
    i = 0
    while len(words) < n_words:
        words += SENTENCES[i % len(SENTENCES)].split()
        i += 1
    text = " ".join(words[:n_words])
    return text if text.endswith(".") else text.rstrip(",;:") + "."


def _stream_ids(synth: Pipeline, text: str, ids: list[int], block_frames: int | None) -> tuple[float, float, int]:
    """(first audio s, total s, samples) of one token sequence through stream_utterance."""
    t0 = time.perf_counter()
    utt = synth.utterance(text, synth.controls(block_frames=block_frames))
    # one token sequence of exactly len(ids) symbols, as the latency curve asks (the frontend would cut the
    # text at its sentence ends)
    utt.parts[:] = [Part(text, ids, 0.0)]
    first = None
    n = 0
    for chunk in synth.stream_utterance(utt):
        if first is None and chunk.size:
            first = time.perf_counter() - t0
        n += chunk.size
    return float(first or 0.0), time.perf_counter() - t0, n


def _first_audio_of_text(synth: Pipeline, text: str, block_frames: int | None) -> float:
    t0 = time.perf_counter()
    stream = synth.stream(text, synth.controls(block_frames=block_frames))
    for chunk in stream:
        if chunk.size:
            stream.close()  # the rest is not needed: a player would already be playing
            return time.perf_counter() - t0
    raise RuntimeError("the stream made no audio")


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    systems: list[BenchSystem] = []
    if args.ar:
        systems.append(BenchSystem("ar", args.ar, None))
    if args.nar:
        systems.append(BenchSystem("nar", args.nar, None))
    systems += [BenchSystem(f"b{b or 'whole'}", args.block, b) for b in args.blocks]
    rows: list[dict[str, Any]] = []
    loaded: dict[str, Pipeline] = {}
    for s in systems:
        if s.checkpoint not in loaded:  # each checkpoint speaks with its own config's controls
            acoustic = checkpoint.load(s.checkpoint)
            loaded[s.checkpoint] = Pipeline(TorchEngine(acoustic, load_vocoder(args.vocoder, acoustic.mel_config)))
        synth = loaded[s.checkpoint]
        pool = TextPool(synth.engine.frontend)
        for n in args.lengths:
            text, ids, _ = pool.text_of_length(n)
            _stream_ids(synth, text, ids, s.block_frames)  # warm-up
            runs = [_stream_ids(synth, text, ids, s.block_frames) for _ in range(args.repeats)]
            samples = runs[0][2]
            rows.append({"system": s.name, "symbols": n, "first_audio_s": median([r[0] for r in runs]),
                         "total_s": median([r[1] for r in runs]),
                         "audio_s": samples / synth.sample_rate})
            print(f"{s.name:7s} {n:4d} symbols: first audio {rows[-1]['first_audio_s'] * 1000:8.1f} ms, "
                  f"total {rows[-1]['total_s'] * 1000:8.1f} ms, audio {rows[-1]['audio_s']:.2f} s", flush=True)
        if s.name != "ar" or args.ar_paragraph:
            text = paragraph()
            _first_audio_of_text(synth, text, s.block_frames)
            fa = median([_first_audio_of_text(synth, text, s.block_frames) for _ in range(args.repeats)])
            rows.append({"system": s.name, "symbols": "paragraph", "words": PARAGRAPH_WORDS, "first_audio_s": fa})
            print(f"{s.name:7s} {PARAGRAPH_WORDS}-word paragraph: first audio {fa * 1000:8.1f} ms", flush=True)
    result = {"argv": args.argv, "machine": machine_facts("cpu", args.threads), "vocoder": args.vocoder,
              "systems": {s.name: {"checkpoint": s.checkpoint, "block_frames": s.block_frames} for s in systems},
              "speed": rows, "cache": cache_bound(loaded[args.block].engine.model)}
    if args.memory_repeats:
        result["stream_memory"] = stream_memory(args.block, 16, tuple(args.memory_repeats), args.threads)
    if args.quality:
        result["quality"] = read_quality([Path(q) for q in args.quality], [s.name for s in systems], args.block_prefix)
    return result


def cache_bound(model: torch.nn.Module, block_frames: int = 16, n_frames: tuple[int, ...] = (500, 2000)) -> list[dict]:
    """The block decoder's key/value + conv cache, largest over the utterance, for utterances of n_frames
    frames (100 symbols, durations forced to n / 100 frames each): it must not grow with the length."""
    rows = []
    tokens = torch.randint(1, 40, (1, 100), generator=torch.Generator().manual_seed(0))
    for n in n_frames:
        plan = model.prepare(tokens, torch.tensor([100]), durations=torch.full((1, 100), n // 100))
        dec = model.block_decoder(block_frames)
        for _ in dec.blocks(plan.frames, plan.frame_mask):
            pass
        rows.append({"frames": int(plan.frames.shape[1]), "block_frames": block_frames,
                     "cache_frames": dec.max_cache_frames, "cache_kib": dec.max_cache_bytes / 1024})
        print(f"cache on a {rows[-1]['frames']}-frame utterance (B = {block_frames}): {dec.max_cache_frames} frames, "
              f"{rows[-1]['cache_kib']:.1f} KiB", flush=True)
    return rows


def stream_memory(block_ckpt: str, block_frames: int, repeats: tuple[int, ...], threads: int) -> list[dict]:
    """Peak RSS (VmHWM) of `python -m tts.synthesize --stream` with the block model, in a fresh process per
    document size (recipes.bench.document_memory's paragraph repeated R times): must not grow with the text."""
    import os
    import subprocess
    import tempfile

    import soundfile as sf

    from recipes.bench.document_memory import _PROBE, PARAGRAPH

    rows = []
    for r in repeats:
        with tempfile.TemporaryDirectory() as tmp:
            text, out = Path(tmp) / "doc.txt", Path(tmp) / "doc.wav"
            text.write_text(PARAGRAPH * r, encoding="utf-8")
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", _PROBE, "--threads", str(threads), "--checkpoint", block_ckpt,
                                   "--block-frames", str(block_frames), "--stream", "--text-file", str(text),
                                   "--out", str(out), "--quiet"],
                                  capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
            if proc.returncode != 0:
                raise RuntimeError(f"tts.synthesize exited {proc.returncode}: {proc.stderr[-2000:]}")
            peak_kb = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_KB "))
            info = sf.info(str(out))
            rows.append({"repeats": r, "audio_s": round(info.frames / info.samplerate, 2),
                         "audio_float32_mb": round(info.frames * 4 / 2**20, 2), "peak_rss_mb": round(peak_kb / 1024, 1),
                         "wall_s": round(time.perf_counter() - t0, 2)})
            print(f"--stream B = {block_frames}, paragraph x{r}: {rows[-1]}", flush=True)
    return rows


def read_quality(reports: list[Path], names: list[str], block_prefix: str) -> dict[str, dict[str, dict[str, float]]]:
    """{bench system name: {metric: {mean, lo, hi}}} from recipes.evaluate report.json files (systems `ar`,
    `nar`, `<block_prefix>_b8`, ...; a later file's system replaces an earlier one's)."""
    summary: dict[str, Any] = {}
    for report in reports:
        summary.update(json.loads(report.read_text())["summary"])
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in names:
        key = name if name in ("ar", "nar") else f"{block_prefix}_{name}"
        if key in summary:
            out[name] = {m: summary[key][m] for m in QUALITY_METRICS if m in summary[key]}
    return out


def to_markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    load = ", ".join(f"{x:.1f}" for x in m.get("load_average_at_start", []))
    lines = [f"# Block-wise NAR: the curve over B ({m.get('torch_threads')} thread(s), vocoder {r['vocoder']})", "",
             f"Machine: {m.get('cpu_count')} cores ({m.get('cpu_model')}), load average at start {load} (1/5/15 min); "
             "each time is the median of the runs after a warm-up.", "",
             f"Command: `python -m recipes.benchmark {' '.join(r['argv'])}`", ""]
    if r.get("quality_argv"):
        lines += [f"Quality joined by: `python -m recipes.benchmark {' '.join(r['quality_argv'])}`", ""]
    names = list(r["systems"])
    lengths = sorted({row["symbols"] for row in r["speed"] if row["symbols"] != "paragraph"})
    head = ["system", "B"]
    q = r.get("quality") or {}
    if q:
        head += ["CER", "MCD dB", "DistillMOS"]
    head += [f"first audio ms ({n} sym)" for n in lengths] + [f"total ms ({n} sym)" for n in lengths]
    head += [f"first audio ms ({PARAGRAPH_WORDS}-word paragraph)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        b = r["systems"][name]["block_frames"]
        cells = [name, "–" if b is None else ("whole" if b == 0 else str(b))]
        if q:
            for metric in QUALITY_METRICS:
                v = q.get(name, {}).get(metric)
                cells.append("–" if v is None else f"{v['mean']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]")
        speed = {row["symbols"]: row for row in r["speed"] if row["system"] == name}
        cells += [f"{speed[n]['first_audio_s'] * 1000:.0f}" if n in speed else "–" for n in lengths]
        cells += [f"{speed[n]['total_s'] * 1000:.0f}" if n in speed else "–" for n in lengths]
        cells.append(f"{speed['paragraph']['first_audio_s'] * 1000:.0f}" if "paragraph" in speed else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Block decoder cache (keys/values of the bounded past + the convs' left context), largest over the "
              "utterance:", "", "| utterance frames | B | cache frames | cache KiB |", "|---|---|---|---|"]
    lines += [f"| {c['frames']} | {c['block_frames']} | {c['cache_frames']} | {c['cache_kib']:.1f} |" for c in r["cache"]]
    if r.get("stream_memory"):
        lines += ["", "Peak RSS of `python -m tts.synthesize --stream --block-frames 16` (fresh process) against document "
                  "length:", "", "| paragraph x | audio s | whole audio as float32 MB | peak RSS MB | wall s |",
                  "|---|---|---|---|---|"]
        lines += [f"| {m['repeats']} | {m['audio_s']} | {m['audio_float32_mb']} | {m['peak_rss_mb']} | {m['wall_s']} |"
                  for m in r["stream_memory"]]
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks = [n for n in r["systems"] if n.startswith("b")]
    xs = list(range(len(blocks)))
    labels = [n[1:] for n in blocks]
    lengths = sorted({row["symbols"] for row in r["speed"] if row["symbols"] != "paragraph"})
    q = r.get("quality") or {}
    panels = [(m, m) for m in QUALITY_METRICS if any(m in q.get(n, {}) for n in r["systems"])]
    panels += [("first_audio_s", "first audio (ms)"), ("total_s", "total time (ms)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for ax, (key, title) in zip(axes, panels):
        if key in QUALITY_METRICS:
            ys = [q.get(n, {}).get(key, {}).get("mean") for n in blocks]
            ax.plot(xs, ys, "o-", label="block NAR")
            for ref, style in (("nar", "--"), ("ar", ":")):
                if key in q.get(ref, {}):
                    ax.axhline(q[ref][key]["mean"], linestyle=style, color="grey", label=f"{ref} (parallel)" if ref == "nar" else ref)
        else:
            for n in lengths:
                speed = {row["system"]: row for row in r["speed"] if row["symbols"] == n}
                ax.plot(xs, [speed[b][key] * 1000 for b in blocks], "o-", label=f"{n} symbols")
                for ref, style in (("nar", "--"), ("ar", ":")):
                    if ref in speed:
                        ax.axhline(speed[ref][key] * 1000, linestyle=style, linewidth=0.8)
            ax.set_yscale("log")
        ax.set_xticks(xs, labels)
        ax.set_xlabel("block size B (frames)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle("block-wise NAR vs parallel NAR (--) and AR (:)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.benchmark blocks", description=__doc__.split("\n\n")[0])
    p.add_argument("--block", required=True, help="block-mode NAR checkpoint (e.g. checkpoints/nar_block.pt)")
    p.add_argument("--nar", help="parallel NAR checkpoint to compare with")
    p.add_argument("--ar", help="AR checkpoint to compare with")
    p.add_argument("--ar-paragraph", action="store_true", help="also time the AR's paragraph first audio")
    p.add_argument("--vocoder", default="source-filter")
    p.add_argument("--blocks", type=parse_ints, default=[8, 16, 32, 64, 0], help="block sizes (0 = whole)")
    p.add_argument("--lengths", type=parse_ints, default=[10, 100, 400], help="input lengths (symbols)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quality", nargs="+", help="recipes.evaluate report.json file(s) with the same systems")
    p.add_argument("--memory-repeats", type=parse_ints, default=None,
                   help="also measure --stream's peak RSS on recipes.bench.document_memory's paragraph x R, e.g. 2,12")
    p.add_argument("--speed-from", help="a blocks.json measured before: join --quality to it without measuring again")
    p.add_argument("--block-prefix", default="nar_block", help="the block systems' name prefix in --quality")
    p.add_argument("--out", default="benchmark_blocks")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1 or any(b < 0 for b in args.blocks):
        p.error("--repeats and --threads must be >= 1 and block sizes >= 0")
    args.argv = ["blocks", *argv]
    if args.speed_from:  # only (re)join the quality reports to speed figures measured before
        result = json.loads(Path(args.speed_from).read_text())
        result["quality"] = read_quality([Path(q) for q in args.quality or []], list(result["systems"]), args.block_prefix)
        result["quality_argv"] = args.argv
    else:
        result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "blocks.json").write_text(json.dumps(result, indent=1))
    (out / "blocks.md").write_text(to_markdown(result))
    plot(result, out / "blocks.png")
    print(f"wrote {out / 'blocks.md'}, {out / 'blocks.json'}, {out / 'blocks.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

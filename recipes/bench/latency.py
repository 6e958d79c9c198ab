"""Latency against length of every system, model-only and end to end, and the margin between them (issue 37 item 6).

    python -m recipes.benchmark latency [--ar CKPT] [--tar CKPT] [--nar CKPT] [--block CKPT] [--scorer CKPT]
        [--vocoder NAME] [--lengths 12,25,50,100,200] [--ks 0,1,2,4] [--blocks 8,16,32,64] [--ns 1,2,4,8]
        [--systems NAME,...] [--repeats 3] [--threads 1] [--frames-per-symbol 6] [--out benchmark_latency]
    python -m recipes.benchmark latency --report-from DIR/latency.json --out DIR

Systems (the registry `REGISTRY`: a row of the figure is one entry, name -> a function of the loaded `Models` that
gives its `Voice`, i.e. the one pipeline over an engine and the controls it speaks with):
  * ar            -- Tacotron 2 (checkpoints/ar.pt), the reference every speed-up is taken against;
  * tar_cache     -- the Transformer AR decoding with its KV cache (`infer(use_cache=True)`);
  * tar_nocache   -- the same model and weights recomputing the whole prefix every step (`use_cache=False`, an
                     `ar_options` of the torch engine); the AR + speculative row is one more entry (`registry`:
                     the pipeline over tts.runtime.speculative.SpeculativeEngine);
  * nar_k{K}      -- the NAR (checkpoints/nar.pt) at refiner steps K (--ks);
  * block_b{B}    -- the block-wise NAR (checkpoints/nar_block.pt) at block size B frames (--blocks), its K;
  * rescore_n{N}  -- the NAR at its own K, best of N candidates under the AR scorer (tts.runtime.rescoring,
                     --scorer, default checkpoints/ar.pt; --ns).
Without --tar the Transformer AR has random weights at conf/model/transformer_ar.yaml size: a timing of its sizes,
not of its speech.  Every random-weight checkpoint (that one, or any whose info says "random") speaks to a forced
length, round(symbols x --frames-per-symbol) frames per sentence (the NAR: fixed durations; an AR: max_decoder_steps
with its stop token off; tts.runtime.torch_engine), so the cached and uncached decodes do the same steps whatever
the weights.  Trained models stop (AR) or predict durations (NAR) by themselves.

What is timed, for the same text (recipes.bench.texts: pool sentences up to --lengths symbols), each system:
  * end-to-end: the wall time of `Pipeline.synthesize(text, controls)`, in-process, after a warm-up call: the
    text stage, every acoustic call, the vocoder and the joined wave, exactly the path the CLI and the API take
    (sentences batched 8 at a time; AR retries off, so that nothing runs outside what the model-only time sees);
  * model-only: the same call's `timings.mel_s`, the pipeline's own clock around the engine's acoustic calls
    (a rescoring system's N candidates and its scorer included), so the two figures come from the same run.
Each is the median over --repeats; the repeats are interleaved over the systems (A, B, C, A, B, C, ...) so that a
burst of load from other processes hits all of them alike.  Speed-up of a system = the reference's time / its
time at that length, model-only and end-to-end; margin = end-to-end speed-up / model-only speed-up (1: the whole
model-only gain reaches the user; 0.6: 40 % of it is lost to the text stage, the vocoder and the rest).

Written: latency.json (every time measured), latency.md (the table and the per-system summary), latency.png (seconds
against audio length, one colour per system, model-only dashed, end-to-end solid; and the margin against length).
`--report-from latency.json` writes the table and the figure of an earlier measurement again, measuring nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch

from recipes.bench.systems import (DEFAULT_FRAMES_PER_SYMBOL, build_random_checkpoint, build_vocoder,
                                   is_random_checkpoint, n_params)
from recipes.bench.texts import TextPool
from recipes.bench.timing import BenchmarkError, machine_facts, median
from tts.runtime.engine import EngineDecorator

REFERENCE = "ar"
DEFAULT_LENGTHS = [12, 25, 50, 100, 200]  # symbols: about 1, 2, 4, 8, 16 s of the shipped voice's speech


# --------------------------------------------------------------------------------------------------
# engines and models as the systems need them
# --------------------------------------------------------------------------------------------------
class BenchEngine(EngineDecorator):
    """The base engine with what the benchmark fixes on every acoustic call: forced lengths, round(symbols x
    frames_per_symbol) frames per item (random weights: their stop token and durations mean nothing), and AR decode
    options no control carries (`ar_options`, e.g. the Transformer AR's use_cache)."""

    def __init__(self, base: Any, frames_per_symbol: float | None, ar_options: dict[str, Any] | None) -> None:
        super().__init__(base)
        self.frames_per_symbol, self.ar_options = frames_per_symbol, ar_options

    def mels(self, ids, indices, controls, forced_frames=None):
        if self.frames_per_symbol is not None:
            forced_frames = [max(1, round(len(x) * self.frames_per_symbol)) for x in ids]
        extra = {"ar_options": self.ar_options} if self.ar_options else {}
        return self.base.mels(ids, indices, controls, forced_frames, **extra)


@dataclass
class Voice:
    """A system as the benchmark speaks with it: the one pipeline and its controls."""

    pipeline: Any  # tts.runtime.pipeline.Pipeline
    controls: Any  # tts.runtime.controls.Controls
    source: str
    forced: bool


class Models:
    """The checkpoints and the vocoder, each loaded once and shared by the systems that use them."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self._loaded: dict[str, Any] = {}
        self._vocoders: dict[Any, Any] = {}
        self.sources: dict[str, str] = {}

    def path(self, kind: str) -> str:
        """The checkpoint of a kind: given (--ar, --nar, --block, --scorer, --tar), shipped, or (tar) random."""
        given = getattr(self.args, kind)
        if given is not None:
            if not Path(given).is_file():
                raise BenchmarkError(f"--{kind} {given}: no such file")
            return given
        if kind == "tar":
            return str(build_random_checkpoint(self.tmp / "tar.pt", "transformer_ar"))
        from recipes.bench.measure import shipped_model

        return str(shipped_model({"block": "nar_block", "scorer": "ar"}.get(kind, kind)))

    def loaded(self, kind: str) -> Any:
        if kind not in self._loaded:
            from tts import checkpoint

            path = self.path(kind)
            self._loaded[kind] = checkpoint.load(path)
            random = is_random_checkpoint(self._loaded[kind].meta)
            self.sources[kind] = path + (" (random weights)" if random else "")
        return self._loaded[kind]

    def vocoder_for(self, mel_config: Any) -> Any:
        key = json.dumps(mel_config.to_dict(), sort_keys=True)
        if key not in self._vocoders:
            if self.args.vocoder is None:
                from recipes.bench.measure import shipped_vocoder

                self.args.vocoder = shipped_vocoder()
            self._vocoders[key] = build_vocoder(self.args.vocoder, mel_config, "cpu")
        return self._vocoders[key]

    def engine(self, kind: str) -> Any:
        from tts.runtime.torch_engine import TorchEngine

        acoustic = self.loaded(kind)
        return TorchEngine(acoustic, self.vocoder_for(acoustic.mel_config))

    def voice(self, kind: str, engine: Any = None, ar_options: dict[str, Any] | None = None, **controls: Any) -> Voice:
        """The pipeline over `engine` (default: kind's plain torch engine), forced when kind's weights are random,
        with `ar_options` on every acoustic call."""
        from tts.runtime.pipeline import Pipeline

        engine = engine or self.engine(kind)
        forced = is_random_checkpoint(self.loaded(kind).meta)
        if forced or ar_options:
            engine = BenchEngine(engine, self.args.frames_per_symbol if forced else None, ar_options)
        pipeline = Pipeline(engine)
        return Voice(pipeline, pipeline.controls(**controls), self.sources[kind], forced)

    def rescoring(self, candidates: int) -> Voice:
        from tts.runtime.rescoring import RescoringEngine

        return self.voice("nar", RescoringEngine(self.engine("nar"), self.loaded("scorer"), candidates))


# --------------------------------------------------------------------------------------------------
# the registry: name -> its voice
# --------------------------------------------------------------------------------------------------
SystemFactory = Callable[[Models], Voice]


def registry(ks: list[int], blocks: list[int], ns: list[int]) -> dict[str, tuple[str, SystemFactory]]:
    """name -> (family, factory), in the order of the table.  A new system (AR + speculative) is one entry, e.g.
    `"tar_spec": ("ar", lambda m: m.voice("tar", SpeculativeEngine(m.engine("tar"), m.engine("nar"))))`."""
    systems: dict[str, tuple[str, SystemFactory]] = {
        REFERENCE: ("ar", lambda m: m.voice("ar")),
        "tar_cache": ("ar", lambda m: m.voice("tar", ar_options={"use_cache": True})),
        "tar_nocache": ("ar", lambda m: m.voice("tar", ar_options={"use_cache": False})),
    }
    for k in ks:
        systems[f"nar_k{k}"] = ("nar", partial(Models.voice, kind="nar", refine_steps=k))
    for b in blocks:
        systems[f"block_b{b}"] = ("block", partial(Models.voice, kind="block", block_frames=b))
    for n in ns:
        systems[f"rescore_n{n}"] = ("rescore", partial(Models.rescoring, candidates=n))
    return systems


# --------------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------------
@dataclass
class Take:
    model_s: float  # the pipeline's timings.mel_s: the acoustic calls
    e2e_s: float  # the wall time of the synthesize call
    audio_s: float
    notes: list[str] = field(default_factory=list)


def speak(voice: Voice, text: str) -> Take:
    t0 = time.perf_counter()
    result = voice.pipeline.synthesize(text, voice.controls)
    e2e = time.perf_counter() - t0
    return Take(result.timings.mel_s, e2e, result.seconds, list(result.notes))


def measure(voices: dict[str, Voice], texts: dict[int, tuple[str, int]], repeats: int,
            log: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per (system, length): the medians of `repeats` interleaved takes after one warm-up take each."""
    rows = []
    for n, (text, symbols) in texts.items():
        for voice in voices.values():
            speak(voice, text)  # warm-up
        takes: dict[str, list[Take]] = {name: [] for name in voices}
        for _ in range(repeats):
            for name, voice in voices.items():
                takes[name].append(speak(voice, text))
        for name, ts in takes.items():
            row = {"system": name, "length": n, "symbols": symbols, "audio_s": median([t.audio_s for t in ts]),
                   "model_s": median([t.model_s for t in ts]), "e2e_s": median([t.e2e_s for t in ts]),
                   "model_times_s": [t.model_s for t in ts], "e2e_times_s": [t.e2e_s for t in ts],
                   "notes": sorted({note for t in ts for note in t.notes})}
            rows.append(row)
            log(f"  {n:4d} symbols {name:12s} audio {row['audio_s']:6.2f} s  model-only {row['model_s'] * 1e3:9.1f} ms"
                f"  end-to-end {row['e2e_s'] * 1e3:9.1f} ms")
    return rows


def speedups(rows: list[dict[str, Any]], reference: str = REFERENCE) -> list[dict[str, Any]]:
    """Per (system, length): the reference's time / the system's, model-only and end-to-end, and their ratio."""
    ref = {r["length"]: r for r in rows if r["system"] == reference}
    out = []
    for r in rows:
        base = ref.get(r["length"])
        if base is None:
            raise BenchmarkError(f"no {reference!r} row at length {r['length']}: speed-ups are taken against it")
        model_x, e2e_x = base["model_s"] / r["model_s"], base["e2e_s"] / r["e2e_s"]
        out.append({"system": r["system"], "length": r["length"], "model_x": model_x, "e2e_x": e2e_x,
                    "margin": e2e_x / model_x, "model_share": r["model_s"] / r["e2e_s"]})
    return out


def summary(gains: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per system over the lengths: the range of each speed-up and the median and range of the margin."""
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(g["system"] for g in gains):
        mine = [g for g in gains if g["system"] == name]
        out[name] = {"model_x_min": min(g["model_x"] for g in mine), "model_x_max": max(g["model_x"] for g in mine),
                     "e2e_x_min": min(g["e2e_x"] for g in mine), "e2e_x_max": max(g["e2e_x"] for g in mine),
                     "margin_median": median([g["margin"] for g in mine]),
                     "margin_min": min(g["margin"] for g in mine), "margin_max": max(g["margin"] for g in mine)}
    return out


def faster_margin(gains: list[dict[str, Any]]) -> dict[str, float] | None:
    """The margin over every (system, length) whose model-only speed-up is above 1 (the systems sold as faster than
    the reference): its median and range, and the share of the model-only gain lost end to end, 1 - median."""
    margins = [g["margin"] for g in gains if g["model_x"] > 1]
    if not margins:
        return None
    mid = median(margins)
    return {"pairs": len(margins), "median": mid, "min": min(margins), "max": max(margins), "lost": 1 - mid}


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    machine = machine_facts("cpu", args.threads)  # here: its load average is the one at the start
    with tempfile.TemporaryDirectory(prefix="tts-latency-") as tmp:
        models = Models(args, Path(tmp))
        table = registry(args.ks, args.blocks, args.ns)
        names = args.systems or list(table)
        voices = {name: table[name][1](models) for name in names}
        pool = TextPool(voices[REFERENCE].pipeline.engine.frontend)
        texts = {}
        for n in args.lengths:
            text, _, used = pool.text_of_length(n)
            texts[n] = (text, sum(len(pool.encode(u)) for u in used))
        log(f"latency: {len(voices)} systems x {len(texts)} lengths x {args.repeats} repeats, {args.threads} "
            f"thread(s); vocoder {args.vocoder}")
        rows = measure(voices, texts, args.repeats, log)
        params = {kind: n_params(loaded.model) for kind, loaded in models._loaded.items()}
    gains = speedups(rows)
    return {
        "meta": {"command": " ".join(shlex.quote(a) for a in [sys.executable, "-m", "recipes.benchmark", *args.argv]),
                 "argv": args.argv, "started": args.started, "machine": machine,
                 "load_average_at_end": list(os.getloadavg()), "reference": REFERENCE},
        "settings": {"lengths": args.lengths, "ks": args.ks, "blocks": args.blocks, "ns": args.ns,
                     "repeats": args.repeats, "warmup": 1, "threads": args.threads, "vocoder": args.vocoder,
                     "frames_per_symbol_when_forced": args.frames_per_symbol, "statistic": "median",
                     "batch_size": "the pipeline's default (8 sentences)", "ar_retries": 0},
        "models": {kind: {"source": models.sources[kind], "params": params[kind]} for kind in params},
        "systems": {name: {"family": table[name][0], "source": v.source, "forced_length": v.forced,
                           "controls": asdict(v.controls)} for name, v in voices.items()},
        "texts": {str(n): {"text": t, "symbols": s} for n, (t, s) in texts.items()},
        "rows": rows,
        "speedups": gains,
        "summary": summary(gains),
        "faster_margin": faster_margin(gains),
    }


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------
def to_markdown(res: dict[str, Any]) -> str:
    m, st = res["meta"], res["settings"]
    load = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    forced = [n for n, s in res["systems"].items() if s["forced_length"]]
    lines = [
        "# Latency against length: every system, model-only and end to end",
        "",
        f"Command: `{m['command']}`",
        "",
        f"Machine: {m['machine']['cpu_count']} cores ({m['machine']['cpu_model']}), {st['threads']} torch thread(s), "
        f"load average {load(m['machine']['load_average_at_start'])} at start, {load(m['load_average_at_end'])} at "
        f"end.  Vocoder {st['vocoder']}.  Each time is the median of {st['repeats']} takes after a warm-up, the "
        "takes interleaved over the systems.",
        "",
        "Model-only = the pipeline's acoustic time (`timings.mel_s`: every acoustic call, a rescoring system's N "
        "candidates and scorer included); end-to-end = the wall time of the same `Pipeline.synthesize` call (text "
        "stage, acoustic, vocoder, wave).  Speed-up = the reference's (`ar`, Tacotron 2) time / the system's at that "
        "length; margin = end-to-end speed-up / model-only speed-up.",
        "",
        "Models: " + "; ".join(f"{k} {v['source']} ({v['params'] / 1e6:.2f} M params)" for k, v in res["models"].items())
        + ".",
    ]
    if forced:
        lines += ["", f"Forced length (random weights: speed only, their audio is noise): {', '.join(forced)} at "
                  f"{st['frames_per_symbol_when_forced']:g} frames per symbol."]
    lines += ["", "| system | symbols | audio s | model-only s | end-to-end s | model share | model-only x | "
              "end-to-end x | margin |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    gains = {(g["system"], g["length"]): g for g in res["speedups"]}
    for r in res["rows"]:
        g = gains[(r["system"], r["length"])]
        lines.append(f"| {r['system']} | {r['symbols']} | {r['audio_s']:.2f} | {r['model_s']:.3f} | {r['e2e_s']:.3f} | "
                     f"{g['model_share']:.2f} | {g['model_x']:.2f} | {g['e2e_x']:.2f} | {g['margin']:.2f} |")
    lines += ["", "Per system over the lengths:", "",
              "| system | model-only x (min-max) | end-to-end x (min-max) | margin median | margin min-max |",
              "|---|---:|---:|---:|---:|"]
    for name, s in res["summary"].items():
        lines.append(f"| {name} | {s['model_x_min']:.2f}-{s['model_x_max']:.2f} | {s['e2e_x_min']:.2f}-"
                     f"{s['e2e_x_max']:.2f} | {s['margin_median']:.2f} | {s['margin_min']:.2f}-{s['margin_max']:.2f} |")
    fm = res.get("faster_margin")
    if fm:
        lines += ["", f"Systems faster than the reference (model-only x > 1; {fm['pairs']} system-length pairs): margin "
                  f"median {fm['median']:.2f} (range {fm['min']:.2f}-{fm['max']:.2f}), i.e. {100 * fm['lost']:.0f} % "
                  "of the model-only speed-up lost end to end (median)."]
    notes = {name: sorted({note for r in res["rows"] if r["system"] == name for note in r["notes"]})
             for name in res["systems"]}
    if any(notes.values()):
        lines += ["", "Pipeline notes during the takes (first of each system's distinct notes; on random weights an "
                  "AR's attention verdicts mean nothing):", ""]
        lines += [f"- {name}: {len(ns)} distinct, e.g. {ns[0]}" for name, ns in notes.items() if ns]
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = list(res["systems"])
    colours = plt.get_cmap("tab20")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [3, 2]})
    for i, name in enumerate(names):
        rows = sorted((r for r in res["rows"] if r["system"] == name), key=lambda r: r["audio_s"])
        audio = [r["audio_s"] for r in rows]
        colour = colours(i % 20)
        ax1.plot(audio, [r["e2e_s"] for r in rows], "o-", color=colour, label=name, lw=1.4, ms=3)
        ax1.plot(audio, [r["model_s"] for r in rows], "--", color=colour, lw=1.0)
        if name != res["meta"]["reference"]:
            by_length = {g["length"]: g["margin"] for g in res["speedups"] if g["system"] == name}
            ax2.plot(audio, [by_length[r["length"]] for r in rows], "o-", color=colour, lw=1.2, ms=3, label=name)
    audio = [r["audio_s"] for r in res["rows"]]
    ticks = [t for t in (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64) if min(audio) / 1.5 <= t <= max(audio) * 1.5]
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax1.set(yscale="log", xlabel="audio length (s)", ylabel="seconds",
            title="latency: end-to-end (solid) and model-only (dashed)")
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.set(xlabel="audio length (s)", ylabel="end-to-end speed-up / model-only speed-up",
            title=f"margin (speed-ups against {res['meta']['reference']})")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, which="both")
    ax1.legend(fontsize=7, ncol=2)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line, checked (argparse's exit 2 with a message naming the bad option)."""
    from recipes.benchmark import parse_ints

    p = argparse.ArgumentParser(prog="python -m recipes.benchmark latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", help="Tacotron 2 checkpoint, the reference (default: checkpoints/ar.pt)")
    p.add_argument("--tar", help="Transformer AR checkpoint (default: random weights at conf/model/transformer_ar.yaml "
                   "size, lengths forced)")
    p.add_argument("--nar", help="NAR checkpoint (default: checkpoints/nar.pt)")
    p.add_argument("--block", help="block-mode NAR checkpoint (default: checkpoints/nar_block.pt)")
    p.add_argument("--scorer", help="AR scorer of the rescoring systems (default: checkpoints/ar.pt)")
    p.add_argument("--vocoder", help="vocoder of every system (default: the shipped default, checkpoints/default.json)")
    p.add_argument("--lengths", type=parse_ints, default=DEFAULT_LENGTHS, help="input lengths (symbols)")
    p.add_argument("--ks", type=parse_ints, default=[0, 1, 2, 4], help="NAR refiner steps K")
    p.add_argument("--blocks", type=parse_ints, default=[8, 16, 32, 64], help="block sizes B (frames; 0 = whole)")
    p.add_argument("--ns", type=parse_ints, default=[1, 2, 4, 8], help="rescoring candidates N")
    p.add_argument("--systems", type=lambda s: [x for x in s.split(",") if x],
                   help="only these systems (names as in the table; 'ar', the reference, is always needed)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--frames-per-symbol", type=float, default=DEFAULT_FRAMES_PER_SYMBOL,
                   help="output frames per symbol of random-weight models (forced lengths)")
    p.add_argument("--out", type=Path, default=Path("benchmark_latency"))
    p.add_argument("--report-from", type=Path, help="a latency.json measured before: write its table and figure "
                   "again (its speed-ups recomputed from its times), measuring nothing")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        p.error(f"--repeats and --threads must be >= 1, got {args.repeats} and {args.threads}")
    if min(args.lengths) < 1:
        p.error(f"--lengths must be >= 1 symbol, got {args.lengths}")
    if min(args.ks + args.blocks) < 0 or min(args.ns) < 1:
        p.error("--ks and --blocks must be >= 0 and --ns >= 1")
    if not args.frames_per_symbol > 0:
        p.error(f"--frames-per-symbol must be > 0, got {args.frames_per_symbol}")
    known = registry(args.ks, args.blocks, args.ns)
    if args.systems is not None:
        unknown = [s for s in args.systems if s not in known]
        if unknown:
            p.error(f"unknown system(s) {', '.join(unknown)}; the systems are {', '.join(known)}")
        if REFERENCE not in args.systems:
            p.error(f"--systems must include {REFERENCE!r}: every speed-up is taken against it")
    args.lengths = sorted(set(args.lengths))
    args.argv = ["latency", *argv]
    args.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return args


def report_from(path: Path) -> dict[str, Any]:
    """A measured latency.json with its speed-ups, summary and aggregate margin recomputed from its rows."""
    try:
        result = json.loads(path.read_text())
        gains = speedups(result["rows"], result["meta"]["reference"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BenchmarkError(f"--report-from {path}: not a latency.json ({e!r})") from e
    return {**result, "speedups": gains, "summary": summary(gains), "faster_margin": faster_margin(gains)}


def write(result: dict[str, Any], out: Path) -> list[Path]:
    """latency.json, latency.md and latency.png under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "latency.json", out / "latency.md", out / "latency.png"]
    paths[0].write_text(json.dumps(result, indent=1))
    paths[1].write_text(to_markdown(result))
    plot(result, paths[2])
    return paths


def summary_lines(result: dict[str, Any]) -> list[str]:
    return [f"{name:12s} model-only x{s['model_x_min']:.2f}-{s['model_x_max']:.2f}  end-to-end "
            f"x{s['e2e_x_min']:.2f}-{s['e2e_x_max']:.2f}  margin median {s['margin_median']:.2f} "
            f"(range {s['margin_min']:.2f}-{s['margin_max']:.2f})" for name, s in result["summary"].items()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        result = report_from(args.report_from) if args.report_from else run(args, log=partial(print, flush=True))
        paths = write(result, args.out)
    except BenchmarkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(result)))
    if result["faster_margin"]:
        fm = result["faster_margin"]
        print(f"faster than {result['meta']['reference']} (model-only x > 1, {fm['pairs']} pairs): margin median "
              f"{fm['median']:.2f} (range {fm['min']:.2f}-{fm['max']:.2f}): {100 * fm['lost']:.0f} % of the model-only "
              "speed-up lost end to end")
    print("wrote " + ", ".join(str(path) for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Batching measured (issue 37 item 2): AR and NAR throughput against the batch size B, with length-bucketed
against random batches, and the fraction of the computed positions that are padding.

    python -m recipes.benchmark batching [--ar CKPT] [--nar CKPT] [--vocoder NAME] [--data data/slt] [--split test]
        [--batch-sizes 1,2,4,8,16] [--orders bucketed,random] [--limit 64] [--threads 1] [--repeats 3] [--seed 0]
        [--out benchmark_batching]

Texts: the held-out sentences of the corpus (its `--split`, default test; the first `--limit`), each ONE token
sequence (as `Pipeline.synthesize_items` speaks an evaluation item), so that lengths vary as in real use.
Systems: the shipped models by default (checkpoints/ar.pt, checkpoints/nar.pt at its own K), each through THE
runtime's `TorchEngine.mels` (model-only time) then `vocode` (end to end = mels + vocoder).  Item i keeps the
noise index i (its position in the split) in every batch, so an item is the same work alone or batched.

For each system x order x B the sentences are grouped into batches (bucketed: sorted by symbol count then cut
into runs of B; random: one seeded shuffle then cut), one warm-up batch is run, then all batches, `--repeats`
times (orders interleaved inside a repeat, so load bursts hit both alike); the figures are medians over the
repeats of the whole set's time:
  * throughput: audio seconds per wall second and sentences per second, model-only and end to end;
  * padding: tokens, the fraction of the B x max_tokens encoder positions that are padding; for the NAR the
    same for mel frames (its decoder and refiner run on B x max_frames); for the AR the decoder steps,
    B x (steps until the batch's last item stops) against each item's own ceil(frames / r).
Batch invariance: every item of every batch is compared with the same item alone (B = 1): a NAR's mel, or an
AR's whose noise is per item (the Transformer AR), must match within MEL_ATOL; an AR whose prenet noise is one
RNG per batch (Tacotron 2) differs by design, so only its length differences are reported.

Random-weight checkpoints (info says "random") have no meaningful stop token or durations: their output is
forced to round(symbols x recipes.bench.systems.DEFAULT_FRAMES_PER_SYMBOL) frames, the AR's item lengths for the
padding are those forced frames (the AR itself decodes the batch's longest).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from recipes.bench.systems import DEFAULT_FRAMES_PER_SYMBOL, build_vocoder, is_random_checkpoint
from recipes.bench.timing import BenchmarkError, machine_facts, median
from tts.runtime.controls import Controls
from tts.runtime.torch_engine import TorchEngine

ORDERS = ("bucketed", "random")
# A padded batch reorders float sums: the mels of an item batched and alone agree within 1e-5 in
# tests/test_seeded_synthesis.py; the benchmark's long batches (16 items, lengths up to ~10x apart) get 10x that.
MEL_ATOL = 1e-4


# --------------------------------------------------------------------------------------------------
# texts and batches
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Item:
    """One held-out sentence as the engine's token ids."""

    index: int  # its position in the split: the noise index (tts.noise), the same alone or batched
    uid: str
    text: str
    ids: tuple[int, ...]


def split_items(engine: TorchEngine, data: Path, split: str, limit: int) -> list[Item]:
    """The first `limit` sentences of the corpus split, encoded by the engine's own frontend."""
    from tts.data.corpus import read_metadata, read_split

    texts = {u.id: u.text for u in read_metadata(data)}
    uids = read_split(data, split)[:limit]
    if not uids:
        raise BenchmarkError(f"split {split!r} of {data} is empty: no sentences to batch")
    return [Item(i, uid, texts[uid], tuple(engine.encode(texts[uid]))) for i, uid in enumerate(uids)]


def make_batches(items: list[Item], size: int, order: str, seed: int) -> list[list[Item]]:
    """bucketed: sorted by symbol count (ties by index) then cut into runs of `size`; random: one shuffle
    seeded by `seed`, then cut.  The last batch may be smaller."""
    if order == "bucketed":
        ordered = sorted(items, key=lambda it: (len(it.ids), it.index))
    elif order == "random":
        ordered = list(items)
        random.Random(seed).shuffle(ordered)
    else:
        raise ValueError(f"unknown order {order!r}: expected one of {ORDERS}")
    return [ordered[i: i + size] for i in range(0, len(ordered), size)]


@dataclass(frozen=True)
class Padding:
    """Positions computed over a set of batches (each batch B x its longest) against those of real items."""

    computed: int
    useful: int

    @property
    def fraction(self) -> float:
        return 1.0 - self.useful / self.computed if self.computed else 0.0


def padding(batch_lengths: list[list[int]]) -> Padding:
    """Per batch the items' lengths (tokens, frames or decoder steps) -> the padding over all batches:
    computed = sum over batches of B x max, useful = sum of all lengths."""
    computed = sum(len(b) * max(b) for b in batch_lengths if b)
    return Padding(computed, sum(sum(b) for b in batch_lengths))


def decoder_steps(frames: list[int], r: int) -> list[int]:
    """An AR item's decoder steps: r frames a step, so ceil(frames / r)."""
    return [math.ceil(n / r) for n in frames]


# --------------------------------------------------------------------------------------------------
# systems and runs
# --------------------------------------------------------------------------------------------------
@dataclass
class Subject:
    """One system under test: an engine at its own controls (the NAR at its shipped K)."""

    name: str  # "ar" | "nar"
    checkpoint: str
    engine: TorchEngine
    controls: Controls
    forced_fps: float | None  # frames per symbol forced on a random-weight model, else None (free length)

    @property
    def autoregressive(self) -> bool:
        return self.engine.capabilities.autoregressive

    @property
    def per_item_noise(self) -> bool:
        """Whether an item's noise is its own (NAR refiner, Transformer AR) rather than one RNG per batch."""
        return not self.autoregressive or bool(getattr(self.engine, "item_noise_seeds", False))

    def forced_frames(self, batch: list[Item]) -> list[int] | None:
        if self.forced_fps is None:
            return None
        return [max(1, round(len(it.ids) * self.forced_fps)) for it in batch]


@dataclass
class BatchOut:
    """One batch's times, its items' lengths and mels (the invariance check)."""

    mel_s: float
    vocoder_s: float
    frames: list[int]  # [B] each item's own frames (the forced ones for a forced AR, which decodes the longest)
    mels: list[torch.Tensor]  # B x [M, frames_b] (cpu float)


def run_batch(subject: Subject, batch: list[Item], decode_to: int | None = None) -> BatchOut:
    """One batch through mels then vocode, timed.  decode_to: a forced AR's frames to decode every item to
    (default: the batch's longest), each item's own frames are still its own forced ones."""
    forced = subject.forced_frames(batch)
    asked = forced if decode_to is None or forced is None else [decode_to] * len(batch)
    t0 = time.perf_counter()
    out = subject.engine.mels([list(it.ids) for it in batch], [it.index for it in batch], subject.controls, asked)
    t1 = time.perf_counter()
    subject.engine.vocode(out)
    t2 = time.perf_counter()
    made = [int(n) for n in out.lengths]
    frames = forced if forced is not None and subject.autoregressive else made
    mels = torch.as_tensor(out.mels).float().cpu()  # [B, M, T]
    # each item's own frames: a forced AR decoded the batch's longest for every item, the rest is not its audio
    return BatchOut(t1 - t0, t2 - t1, frames, [mels[b, :, :n] for b, n in enumerate(frames)])


@dataclass
class Invariance:
    """Items of batches against the same items alone."""

    items: int = 0
    max_abs: float = 0.0  # largest |batched - alone| over the frames both have (natural-log mel units)
    length_diffs: int = 0  # items whose frame count differs
    max_length_diff: int = 0

    def add(self, batched: torch.Tensor, alone: torch.Tensor) -> None:
        n = min(batched.shape[-1], alone.shape[-1])
        self.items += 1
        if n:
            self.max_abs = max(self.max_abs, float((batched[:, :n] - alone[:, :n]).abs().max()))
        d = abs(batched.shape[-1] - alone.shape[-1])
        self.length_diffs += d > 0
        self.max_length_diff = max(self.max_length_diff, d)


@dataclass
class Cell:
    """One system x order x B: what was measured."""

    system: str
    order: str
    batch_size: int
    batches: int
    sentences: int
    audio_s: float
    model_s: list[float] = field(default_factory=list)  # per repeat, all batches
    end_to_end_s: list[float] = field(default_factory=list)
    padding: dict[str, dict[str, float]] = field(default_factory=dict)  # tokens / frames / steps
    invariance: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        model, e2e = median(self.model_s), median(self.end_to_end_s)
        return {**asdict(self), "model_median_s": model, "end_to_end_median_s": e2e,
                "audio_s_per_s_model": self.audio_s / model, "audio_s_per_s_end_to_end": self.audio_s / e2e,
                "sentences_per_s_model": self.sentences / model, "sentences_per_s_end_to_end": self.sentences / e2e}


def padding_of(subject: Subject, batches: list[list[Item]], outs: list[BatchOut]) -> dict:
    """Tokens padding always; the NAR's mel frames, or the AR's decoder steps."""
    rows = {"tokens": padding([[len(it.ids) for it in b] for b in batches])}
    if subject.autoregressive:
        r = int(subject.engine.model.r)  # frames per decoder step: the model's own (Tacotron 2, Transformer AR)
        rows["steps"] = padding([decoder_steps(o.frames, r) for o in outs])
    else:
        rows["frames"] = padding([o.frames for o in outs])
    return {k: {"computed": p.computed, "useful": p.useful, "fraction": p.fraction} for k, p in rows.items()}


def measure_cell(subject: Subject, order: str, size: int, batches: list[list[Item]],
                 alone: dict[int, torch.Tensor] | None, hop: int, sr: int) -> tuple[Cell, list[BatchOut]]:
    """One timed pass over all batches (the caller warmed up): its times, padding and, given the items
    alone, the invariance of each batched item."""
    outs = [run_batch(subject, b) for b in batches]
    frames = sum(sum(o.frames) for o in outs)
    cell = Cell(subject.name, order, size, len(batches), sum(len(b) for b in batches), frames * hop / sr,
                model_s=[sum(o.mel_s for o in outs)], end_to_end_s=[sum(o.mel_s + o.vocoder_s for o in outs)],
                padding=padding_of(subject, batches, outs))
    if alone is not None:
        inv = Invariance()
        # A forced AR decodes every item of a batch to the batch's longest (its stop token is off), so a
        # non-causal postnet sees other frames past an item's end than alone: its reference is the item alone
        # decoded as far (untimed); a free or NAR item's reference is the item alone.
        rerun = subject.forced_fps is not None and subject.autoregressive and subject.per_item_noise
        for b, o in zip(batches, outs):
            for it, mel in zip(b, o.mels):
                inv.add(mel, run_batch(subject, [it], max(o.frames)).mels[0] if rerun else alone[it.index])
        cell.invariance = asdict(inv)
    return cell, outs


def measure_system(subject: Subject, items: list[Item], sizes: list[int], orders: list[str], repeats: int,
                   seed: int, hop: int, sr: int, log: Callable[[str], None]) -> list[Cell]:
    """Every order x B of one system; B ascending so that B = 1 (when asked for) gives the items alone."""
    cells: list[Cell] = []
    alone: dict[int, torch.Tensor] | None = None
    if 1 not in sizes:  # the invariance reference, untimed
        alone = {it.index: run_batch(subject, [it]).mels[0] for it in items}
    for size in sorted(sizes):
        plans = {order: make_batches(items, size, order, seed) for order in orders}
        run_batch(subject, plans[orders[0]][0])  # warm-up
        per_order: dict[str, Cell] = {}
        for _ in range(repeats):  # orders interleaved inside a repeat: load bursts hit both alike
            for order in orders:
                if order not in per_order:  # the first pass: padding and invariance too
                    per_order[order], outs = measure_cell(subject, order, size, plans[order], alone, hop, sr)
                    if size == 1 and alone is None:
                        alone = {b[0].index: o.mels[0] for b, o in zip(plans[order], outs)}
                else:
                    cell, _ = measure_cell(subject, order, size, plans[order], None, hop, sr)
                    per_order[order].model_s += cell.model_s
                    per_order[order].end_to_end_s += cell.end_to_end_s
        for order in orders:
            cell = per_order[order]
            cells.append(cell)
            log(describe(cell.summary()))
    return cells


def describe(c: dict[str, Any]) -> str:
    pad = ", ".join(f"{k} {v['fraction'] * 100:.1f} %" for k, v in c["padding"].items())
    inv = c["invariance"]
    same = "" if inv is None or c["batch_size"] == 1 else (
        f"; vs alone: max |diff| {inv['max_abs']:.1e}, {inv['length_diffs']}/{inv['items']} lengths differ")
    return (f"{c['system']:4s} {c['order']:8s} B={c['batch_size']:3d}: model {c['audio_s_per_s_model']:7.2f} "
            f"audio-s/s ({c['sentences_per_s_model']:6.2f} sent/s), end to end {c['audio_s_per_s_end_to_end']:7.2f} "
            f"audio-s/s ({c['sentences_per_s_end_to_end']:6.2f} sent/s); padding {pad}{same}")


# --------------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------------
def load_subjects(args: argparse.Namespace, log: Callable[[str], None]) -> tuple[list[Subject], str]:
    """The asked systems (shipped ones by default), sharing one vocoder."""
    from recipes.bench.measure import shipped_model, shipped_vocoder
    from tts import checkpoint

    loaded = {}
    for kind in ("ar", "nar"):
        if kind not in args.systems:
            continue
        path = getattr(args, kind) or str(shipped_model(kind))
        loaded[kind] = (path, checkpoint.load(path))
    vocoder_name = args.vocoder or shipped_vocoder()
    mel_config = next(iter(loaded.values()))[1].mel_config
    vocoder = build_vocoder(vocoder_name, mel_config, "cpu")
    subjects = []
    for kind, (path, ckpt) in loaded.items():
        engine = TorchEngine(ckpt, vocoder)
        forced = DEFAULT_FRAMES_PER_SYMBOL if is_random_checkpoint(ckpt.meta) else None
        subjects.append(Subject(kind, path, engine, engine.defaults.replace(seed=args.seed), forced))
        log(f"{kind}: {path} ({type(engine.model).__name__}, controls {engine.defaults}"
            f"{', random weights: length forced to %g frames/symbol' % forced if forced else ''})")
    return subjects, vocoder_name


def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    facts = machine_facts("cpu", torch.get_num_threads())
    subjects, vocoder_name = load_subjects(args, log)
    items = split_items(subjects[0].engine, args.data, args.split, args.limit)
    lengths = [len(it.ids) for it in items]
    log(f"{len(items)} {args.split} sentences of {args.data}: {min(lengths)} to {max(lengths)} symbols "
        f"(median {median(lengths):g})")
    cells: list[Cell] = []
    for s in subjects:
        if s.engine.frontend.symbols != subjects[0].engine.frontend.symbols:
            raise BenchmarkError(f"{s.name}'s symbol table differs from {subjects[0].name}'s: the same ids mean "
                                 "other symbols")
        hop, sr = s.engine.hop_length, s.engine.sample_rate
        with torch.inference_mode():
            cells += measure_system(s, items, args.batch_sizes, args.orders, args.repeats, args.seed, hop, sr, log)
    rows = [c.summary() for c in cells]
    return {"argv": args.argv, "started": args.started, "machine": facts,
            "load_average_at_end": list(os.getloadavg()),
            "settings": {"data": str(args.data), "split": args.split, "limit": args.limit, "sentences": len(items),
                         "batch_sizes": args.batch_sizes, "orders": args.orders, "repeats": args.repeats,
                         "warmup_batches": 1, "seed": args.seed, "threads": args.threads, "vocoder": vocoder_name,
                         "mel_atol": MEL_ATOL, "statistic": "median over repeats of all batches' total time"},
            "systems": {s.name: system_info(s) for s in subjects},
            "symbols": {"min": min(lengths), "max": max(lengths), "median": median(lengths)},
            "cells": rows, "invariance": invariance_verdicts(subjects, rows)}


def system_info(s: Subject) -> dict[str, Any]:
    info = {"checkpoint": s.checkpoint, "model": type(s.engine.model).__name__, "autoregressive": s.autoregressive,
            "controls": asdict(s.controls), "forced_frames_per_symbol": s.forced_fps,
            "per_item_noise": s.per_item_noise}
    if s.autoregressive:
        info["reduction_factor"] = int(s.engine.model.r)
    return info


def invariance_verdicts(subjects: list[Subject], rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per system: does batching change its output?  Per-item-noise systems must match alone within
    MEL_ATOL (and in length); a one-RNG-per-batch AR differs by design: its length differences are stated."""
    out = {}
    for s in subjects:
        checked = [r["invariance"] for r in rows if r["system"] == s.name and r["batch_size"] > 1 and r["invariance"]]
        max_abs = max((c["max_abs"] for c in checked), default=0.0)
        diffs = sum(c["length_diffs"] for c in checked)
        items = sum(c["items"] for c in checked)
        max_len = max((c["max_length_diff"] for c in checked), default=0)
        if s.per_item_noise:
            ok = max_abs <= MEL_ATOL and diffs == 0
            text = (f"{s.name}: batching does not change the output: every batched item's mel equals the item alone "
                    f"within {MEL_ATOL:g} (largest |difference| {max_abs:.1e}, {items} items compared)" if ok else
                    f"{s.name}: WARNING batched output differs from alone: largest |difference| {max_abs:.1e} "
                    f"(tolerance {MEL_ATOL:g}), {diffs}/{items} items of another length")
        else:
            ok = None
            text = (f"{s.name}: batched output differs from alone by design (its prenet dropout draws from one RNG "
                    f"per batch): {diffs}/{items} batched items have another length than alone, by up to {max_len} "
                    f"frames; largest mel |difference| over common frames {max_abs:.2g}")
        out[s.name] = {"invariant": ok, "items_compared": items, "max_abs": max_abs, "length_diffs": diffs,
                       "max_length_diff": max_len, "statement": text}
    return out


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------
def to_markdown(r: dict[str, Any]) -> str:
    m, st = r["machine"], r["settings"]
    load = ", ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    lines = [f"# Batching: throughput against batch size, bucketed vs random batches", "",
             f"Command: `python -m recipes.benchmark {' '.join(r['argv'])}`", "",
             f"{st['sentences']} sentences of {st['data']} ({st['split']} split; {r['symbols']['min']} to "
             f"{r['symbols']['max']} symbols), vocoder {st['vocoder']}, {st['threads']} torch thread(s) on "
             f"{m['cpu_count']} cores ({m['cpu_model']}), load average {load} at start, "
             f"{', '.join(f'{x:.2f}' for x in r['load_average_at_end'])} at end.  Throughput = audio seconds "
             f"(or sentences) per wall second over all batches, median of {st['repeats']} repeat(s) after one "
             f"warm-up batch; model = `TorchEngine.mels`, end to end = mels + vocoder.", ""]
    for name, info in r["systems"].items():
        forced = info["forced_frames_per_symbol"]
        lines.append(f"- {name}: {info['checkpoint']} ({info['model']}"
                     + (f", r = {info['reduction_factor']}" if "reduction_factor" in info else "")
                     + (f", K = {info['controls']['refine_steps']}" if not info["autoregressive"] else "")
                     + (f"; random weights, length forced to {forced:g} frames/symbol" if forced else "") + ")")
    lines += [""] + [f"- {v['statement']}" for v in r["invariance"].values()]
    lines += ["", "| system | order | B | audio-s/s model | audio-s/s end to end | sent/s model | sent/s end to end | "
              "padding tokens | padding frames (NAR) / decoder steps (AR) |", "|---|---|---|---|---|---|---|---|---|"]
    for c in r["cells"]:
        pad = c["padding"]
        second = pad.get("frames") or pad.get("steps")
        lines.append(f"| {c['system']} | {c['order']} | {c['batch_size']} | {c['audio_s_per_s_model']:.2f} | "
                     f"{c['audio_s_per_s_end_to_end']:.2f} | {c['sentences_per_s_model']:.2f} | "
                     f"{c['sentences_per_s_end_to_end']:.2f} | {pad['tokens']['fraction'] * 100:.1f} % | "
                     f"{second['fraction'] * 100:.1f} % |")
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("audio_s_per_s_model", "model only: audio s / wall s"),
              ("audio_s_per_s_end_to_end", "end to end: audio s / wall s"),
              ("padding", "padding: frames (NAR) / steps (AR), %")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.3 * len(panels), 3.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, title) in zip(axes, panels):
        for i, system in enumerate(r["systems"]):
            for order, style in (("bucketed", "-"), ("random", "--")):
                cells = sorted((c for c in r["cells"] if c["system"] == system and c["order"] == order),
                               key=lambda c: c["batch_size"])
                if not cells:
                    continue
                ys = [100 * (c["padding"].get("frames") or c["padding"]["steps"])["fraction"] if key == "padding"
                      else c[key] for c in cells]
                ax.plot([c["batch_size"] for c in cells], ys, style, marker="o", color=colours[i % len(colours)],
                        label=f"{system} {order}")
        ax.set_xscale("log", base=2)
        sizes = r["settings"]["batch_sizes"]
        ax.set_xticks(sizes, [str(b) for b in sizes])
        ax.set_xlabel("batch size B")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    from recipes.benchmark import parse_ints

    def positive_ints(s: str) -> list[int]:
        vals = parse_ints(s)
        if min(vals) < 1:
            raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {s!r}")
        return sorted(set(vals))

    def orders(s: str) -> list[str]:
        vals = [x.strip() for x in s.split(",") if x.strip()]
        bad = [x for x in vals if x not in ORDERS]
        if bad or not vals:
            raise argparse.ArgumentTypeError(f"unknown order(s) {bad or s!r}: expected a comma list of {ORDERS}")
        return list(dict.fromkeys(vals))

    def systems(s: str) -> list[str]:
        vals = [x.strip() for x in s.split(",") if x.strip()]
        if not vals or any(x not in ("ar", "nar") for x in vals):
            raise argparse.ArgumentTypeError(f"--systems takes ar, nar or ar,nar, got {s!r}")
        return vals

    p = argparse.ArgumentParser(prog="python -m recipes.benchmark batching", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ar", help="AR checkpoint (default: the shipped checkpoints/ar.pt)")
    p.add_argument("--nar", help="NAR checkpoint (default: the shipped checkpoints/nar.pt, at its own K)")
    p.add_argument("--systems", type=systems, default=["ar", "nar"], help="which of ar,nar to measure")
    p.add_argument("--vocoder", help="vocoder (default: the shipped default, checkpoints/default.json)")
    p.add_argument("--data", type=Path, default=Path("data/slt"), help="corpus folder")
    p.add_argument("--split", default="test", help="its split whose sentences are spoken (default: held-out test)")
    p.add_argument("--limit", type=int, default=64, help="the first N sentences of the split")
    p.add_argument("--batch-sizes", type=positive_ints, default=[1, 2, 4, 8, 16])
    p.add_argument("--orders", type=orders, default=list(ORDERS), help="bucketed,random")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0, help="the random order's shuffle and the models' noise")
    p.add_argument("--out", type=Path, default=Path("benchmark_batching"))
    args = p.parse_args(argv)
    if args.limit < 1 or args.threads < 1 or args.repeats < 1:
        p.error("--limit, --threads and --repeats must be >= 1")
    args.argv = ["batching", *argv]
    args.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        result = run(args, log=lambda s: print(s, flush=True))
    except BenchmarkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for v in result["invariance"].values():
        print(v["statement"], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batching.json").write_text(json.dumps(result, indent=1))
    (args.out / "batching.md").write_text(to_markdown(result))
    plot(result, args.out / "batching.png")
    print(f"wrote {args.out / 'batching.json'}, {args.out / 'batching.md'}, {args.out / 'batching.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

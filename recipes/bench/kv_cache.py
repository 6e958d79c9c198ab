"""The Transformer AR's KV cache measured (issue 37 item 1): per-step time against the decoded length, cached
against uncached, and the cache's memory against length with where it meets a memory budget.

    python -m recipes.benchmark kv-cache [--checkpoint CKPT] [--lengths 100,250,500,1000,2000] [--tokens 60]
        [--batch-sizes 1,8] [--threads 1] [--repeats 3] [--budget-mb 512] [--uncached-at 1000] [--window 16]
        [--seed 0] [--out benchmark_kv_cache]

Model: a Transformer AR checkpoint, or by default random weights at conf/model/transformer_ar.yaml size with the
default mel config (speed and memory depend on the sizes, not on the weights).  Input: `--tokens` random symbol
ids per item.  Every decode is forced to its length: stop token disabled (stop_threshold above 1) and
max_decoder_steps = ceil(frames / r), so the random weights' stop logits cannot end it early.

Speed (model.infer, the real decode path, at every batch size):
  * the time of ONE step is taken with two module hooks: a forward pre-hook on the prenet (the first thing a
    step runs, in both the cached and the uncached path) and a forward hook on the stop projection (the last).
    One decode to the longest length then gives every step's time, and the per-step time at frame n is the
    median of the `--window` steps ending at frame n: the cost of the steps around n, not the average from 0
    (which would hide a growth by averaging it with the cheap early steps), and a median, so that a scheduler
    hiccup of the shared machine does not land on one length.  What the hooks leave out is the loop's stop
    bookkeeping between steps, which does not depend on the length.  Hooks around each layer's causal
    self-attention (the only part that reads the cached K/V) time that share of the step in place, so a growth
    of the step with the length can be attributed; the hooks cost a few microseconds a step, the same at
    every length.  (Decoding to n and to n + window and
    taking the difference would cost a decode per length and difference two noisy totals.)
  * flatness: max / min of the cached per-step times over the lengths (target <= 1.2 from 100 to 2,000 frames);
  * speed-up: the uncached decode (use_cache=False: every layer recomputed over the whole prefix, and the text's
    cross-attention K/V recomputed, at every step) against the cached one, total infer time at `--uncached-at`
    frames; the uncached per-step times at lengths up to it come from the same decodes.
  Each figure is the median over `--repeats` after one warm-up decode.

Memory (decode_chunk driven step by step from the model's own start_cache, i.e. its default capacity that grows by
doubling; the same layers and accounting infer uses):
  * used: DecoderCache.cache_bytes() (the model's accounting) at each length; cross-checked once, at the longest
    length, against the nbytes of the tensors themselves (the held slice of each self-attention K/V plus the
    cross K/V), and against infer's own `cache_bytes` after a decode of that length;
  * allocated: the bytes of the distinct storages behind the cache's tensors (capacity, not just what is used);
  * fixed part: the bytes at 0 decoded positions (the text's cross-attention K/V: grows with the tokens, not the
    frames); slope: bytes per decoded frame per item;
  * budget: for `--budget-mb`, the longest utterance whose cache fits at each batch size, in frames and in seconds
    of audio (frames x hop / sample rate of the model's mel config): with the cache sized for the utterance
    (infer reserves max_decoder_steps positions up front) and with the doubling buffers (the capacity is the
    next power of two times the start capacity, and while a buffer grows the old and the new one are both alive).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from recipes.bench.timing import BenchmarkError, machine_facts, median

NO_STOP = 1.5  # stop_threshold above 1: sigmoid never exceeds it, so the decode runs to max_decoder_steps
MB = 2**20


# --------------------------------------------------------------------------------------------------
# the model and its inputs
# --------------------------------------------------------------------------------------------------
@dataclass
class Subject:
    """The model under test and what the figures need from its config."""

    model: Any  # TransformerAR, eval mode
    source: str  # checkpoint path or "random weights at conf/model/transformer_ar.yaml size"
    hop_length: int
    sample_rate: int
    n_symbols: int

    @property
    def r(self) -> int:
        return int(self.model.r)


def load_subject(checkpoint_path: str | None) -> Subject:
    """A checkpoint, or random weights at conf/model/transformer_ar.yaml size and the default mel config."""
    from tts.models.transformer_ar import TransformerAR

    if checkpoint_path is None:
        from hydra.utils import instantiate
        from omegaconf import OmegaConf

        from tts.audio import MelConfig
        from tts.paths import CONF_DIR
        from tts.text import TextFrontend

        mel, n_symbols = MelConfig.default(), len(TextFrontend().symbols)
        node = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "model" / "transformer_ar.yaml"))
        torch.manual_seed(0)
        model = instantiate(node, n_symbols=n_symbols, n_mels=mel.n_mels).eval()
        source = "random weights at conf/model/transformer_ar.yaml size"
    else:
        from tts import checkpoint

        if not Path(checkpoint_path).is_file():
            raise BenchmarkError(f"--checkpoint {checkpoint_path}: no such file")
        loaded = checkpoint.load(checkpoint_path)
        model, mel, source = loaded.model, loaded.mel_config, checkpoint_path
        n_symbols = len(loaded.frontend().symbols)
    if not isinstance(model, TransformerAR):
        raise BenchmarkError(f"{source}: a {type(model).__name__}, not a TransformerAR (the model with a KV cache)")
    return Subject(model, source, mel.hop_length, mel.sample_rate, n_symbols)


def random_tokens(n_symbols: int, batch: int, tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, tokens] ids in 1..n_symbols-1 (0 is padding), all items of the same length."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, n_symbols, (batch, tokens), generator=g), torch.full((batch,), tokens)


def steps_for(frames: int, r: int) -> int:
    """Decoder steps (positions) that hold `frames` frames."""
    return math.ceil(frames / r)


# --------------------------------------------------------------------------------------------------
# speed
# --------------------------------------------------------------------------------------------------
@dataclass
class TimedDecode:
    total_s: float  # the whole infer call (encoder, steps, postnet)
    step_s: list[float]  # each decoder step, prenet pre-hook to stop-projection hook
    attention_s: list[float]  # each step's time inside the layers' causal self-attention (the part that reads
    #                           the cache), so that a growth of the step with the length can be attributed


def timed_decode(subject: Subject, tokens: torch.Tensor, lengths: torch.Tensor, steps: int,
                 use_cache: bool) -> TimedDecode:
    """One forced decode of `steps` steps with each step timed by module hooks (see the module docstring)."""
    model = subject.model
    starts: list[float] = []
    ends: list[float] = []
    attention: list[float] = []
    entered = [0.0]

    def step_start(*_: Any) -> None:
        starts.append(time.perf_counter())
        attention.append(0.0)

    def attention_in(*_: Any) -> None:
        entered[0] = time.perf_counter()

    def attention_out(*_: Any) -> None:
        attention[-1] += time.perf_counter() - entered[0]

    hooks = [model.prenet.register_forward_pre_hook(step_start),
             model.stop_projection.register_forward_hook(lambda *_: ends.append(time.perf_counter()))]
    for layer in model.layers:
        hooks += [layer.self_attention.register_forward_pre_hook(attention_in),
                  layer.self_attention.register_forward_hook(attention_out)]
    try:
        with torch.no_grad():
            t0 = time.perf_counter()
            model.infer(tokens, lengths, max_decoder_steps=steps, stop_threshold=NO_STOP, use_cache=use_cache)
            total = time.perf_counter() - t0
    finally:
        for h in hooks:
            h.remove()
    if len(starts) != steps or len(ends) != steps:
        # the hooks are the measurement: a model whose step does not call each module once cannot be timed so
        raise BenchmarkError(f"expected {steps} prenet and stop-projection calls, got {len(starts)}, {len(ends)}")
    return TimedDecode(total, [e - s for s, e in zip(starts, ends)], attention)


def window_ms(step_s: list[float], end_step: int, window: int) -> float:
    """Median time (ms) of the `window` steps ending at step `end_step` (exclusive), fewer near the start."""
    chunk = step_s[max(0, end_step - window) : end_step]
    return 1e3 * median(chunk)


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope (slope 0 from a single point)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - slope * mx, slope


@dataclass
class SpeedRow:
    batch: int
    frames: int
    steps: int
    cached_step_ms: float
    cached_self_attention_ms: float  # of cached_step_ms: inside the layers' self-attention
    uncached_step_ms: float | None  # only at lengths <= --uncached-at


@dataclass
class SpeedSummary:
    batch: int
    flatness: float  # max / min cached per-step ms over the lengths
    # least-squares line through the cached per-step ms against frames: what a step pays per held position
    # (the attention reads every cached K/V once a step, so a cached step is O(length) in that part)
    intercept_ms: float
    ms_per_1000_frames: float
    uncached_at_frames: int
    cached_total_s: float
    uncached_total_s: float
    speedup: float  # uncached / cached total time at uncached_at_frames


def measure_speed(subject: Subject, batch: int, frame_lengths: list[int], uncached_at: int, n_tokens: int,
                  window: int, repeats: int, seed: int,
                  log: Callable[[str], None]) -> tuple[list[SpeedRow], SpeedSummary]:
    r = subject.r
    tokens, lengths = random_tokens(subject.n_symbols, batch, n_tokens, seed)
    longest, s_uncached = steps_for(max(frame_lengths), r), steps_for(uncached_at, r)
    # warm-up: both paths, a few windows long (allocator, first-call dispatch)
    for use_cache in (True, False):
        timed_decode(subject, tokens, lengths, min(2 * window, s_uncached), use_cache)
    cached_long, cached_u, uncached = [], [], []
    for i in range(repeats):
        # interleaved inside a repeat, so that a burst of load from the shared machine hits both paths alike
        cached_long.append(timed_decode(subject, tokens, lengths, longest, True))
        cached_u.append(timed_decode(subject, tokens, lengths, s_uncached, True))
        uncached.append(timed_decode(subject, tokens, lengths, s_uncached, False))
        log(f"  B={batch} repeat {i + 1}/{repeats}: cached {longest} steps {cached_long[-1].total_s:.2f} s; "
            f"at {uncached_at} frames cached {cached_u[-1].total_s:.2f} s, uncached {uncached[-1].total_s:.2f} s")
    rows = []
    for frames in frame_lengths:
        s = steps_for(frames, r)
        cached_ms = median([window_ms(d.step_s, s, window) for d in cached_long])
        attention_ms = median([window_ms(d.attention_s, s, window) for d in cached_long])
        uncached_ms = median([window_ms(d.step_s, s, window) for d in uncached]) if frames <= uncached_at else None
        rows.append(SpeedRow(batch, frames, s, cached_ms, attention_ms, uncached_ms))
    per_step = [row.cached_step_ms for row in rows]
    intercept, slope = line_fit([float(f) for f in frame_lengths], per_step)
    cached_total, uncached_total = median([d.total_s for d in cached_u]), median([d.total_s for d in uncached])
    summary = SpeedSummary(batch, max(per_step) / min(per_step), intercept, 1000 * slope, uncached_at, cached_total,
                           uncached_total, uncached_total / cached_total)
    return rows, summary


# --------------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------------
def tensor_bytes(cache: Any) -> int:
    """The used bytes counted from the tensors themselves: each layer's held K/V slices and the memory K/V."""
    total = 0
    for layer in cache.layers:
        held = (layer.self_k[:, :, : layer.length], layer.self_v[:, :, : layer.length])
        total += sum(t.nbytes for t in (*held, layer.cross_k, layer.cross_v))
    return total


def allocated_bytes(cache: Any) -> int:
    """The bytes of the distinct storages behind the cache (the K/V buffers at their capacity; the memory's K and V
    are views of one projection, so storages are counted once by address)."""
    storages: dict[int, int] = {}
    for layer in cache.layers:
        for t in (layer.self_k, layer.self_v, layer.cross_k, layer.cross_v):
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


@dataclass
class MemoryPoint:
    batch: int
    frames: int  # decoded frames (steps x r)
    steps: int
    used_bytes: int  # DecoderCache.cache_bytes()
    allocated_bytes: int  # storages at their capacity (the doubling buffers)
    capacity_steps: int


def measure_memory(subject: Subject, batch: int, frame_lengths: list[int], n_tokens: int,
                   seed: int) -> tuple[list[MemoryPoint], dict[str, Any]]:
    """Drive decode_chunk from the model's own start_cache (default capacity) to the longest length, feeding back
    its last frame as infer does; record the cache at 0 steps and at each length.  Returns the points and the
    cross-check at the longest length."""
    model, r = subject.model, subject.r
    tokens, lengths = random_tokens(subject.n_symbols, batch, n_tokens, seed)
    wanted = {steps_for(f, r) for f in frame_lengths} | {0}
    points, check = [], {}
    with torch.no_grad():
        memory, mask = model.encode(tokens, lengths)
        cache = model.start_cache(memory, mask)
        frame = model.go_frame(batch, memory)
        for s in range(max(wanted) + 1):
            if s in wanted:
                points.append(MemoryPoint(batch, s * r, s, cache.cache_bytes(), allocated_bytes(cache),
                                          cache.layers[0].self_k.shape[2]))
            if s == max(wanted):
                check = {"steps": s, "cache_bytes": cache.cache_bytes(), "tensor_nbytes": tensor_bytes(cache)}
                break
            out = model.decode_chunk(cache, frame[:, None])
            cache, frame = out.cache, out.frames[:, -1, -1]
        infer_bytes = model.infer(tokens, lengths, max_decoder_steps=check["steps"], stop_threshold=NO_STOP).cache_bytes
    check["infer_cache_bytes"] = infer_bytes
    check["agree"] = check["cache_bytes"] == check["tensor_nbytes"] == infer_bytes
    if not check["agree"]:
        raise BenchmarkError(f"B={batch}: the cache's accounting disagrees with its tensors: {check}")
    return points, check


@dataclass
class Fit:
    """Exact linear law of the cache: bytes(steps) = fixed + per_step x steps (checked at every measured point)."""

    batch: int
    fixed_bytes: int  # at 0 positions: the text's cross-attention K/V
    per_step_bytes: int  # one decoder position (r frames), the whole batch
    bytes_per_frame_per_item: float
    fixed_bytes_per_item_per_token: float
    linear: bool


def fit_memory(points: list[MemoryPoint], r: int, n_tokens: int) -> Fit:
    zero = next(p for p in points if p.steps == 0)
    last = max(points, key=lambda p: p.steps)
    per_step = (last.used_bytes - zero.used_bytes) // last.steps
    linear = all(p.used_bytes == zero.used_bytes + per_step * p.steps for p in points)
    batch = zero.batch
    return Fit(batch, zero.used_bytes, per_step, per_step / (r * batch), zero.used_bytes / (batch * n_tokens), linear)


def longest_fit(budget_bytes: int, fixed_bytes: int, per_step_bytes: int) -> int:
    """The most decoder positions whose cache (sized for the utterance) fits the budget; 0 if even the fixed
    part does not fit."""
    return max(0, (budget_bytes - fixed_bytes) // per_step_bytes)


def longest_fit_doubling(budget_bytes: int, fixed_bytes: int, per_step_bytes: int, start_capacity: int) -> int:
    """The most positions a cache that starts at `start_capacity` and doubles can reach: growing to capacity c
    holds the old buffers (c / 2) and the new ones (c) at once, so c is reachable when fixed + 1.5 c fits; the
    positions up to the largest reachable c are then held (0 if the start buffers do not fit)."""
    if fixed_bytes + start_capacity * per_step_bytes > budget_bytes:
        return 0
    capacity = start_capacity
    while fixed_bytes + (capacity + 2 * capacity) * per_step_bytes <= budget_bytes:
        capacity *= 2
    return capacity


@dataclass
class BudgetRow:
    batch: int
    budget_mb: float
    steps: int
    frames: int
    seconds: float  # of audio: frames x hop / sample rate
    doubling_frames: int
    doubling_seconds: float


def budget_row(fit: Fit, budget_mb: float, r: int, hop: int, sample_rate: int, start_capacity: int) -> BudgetRow:
    budget = int(budget_mb * MB)
    steps = longest_fit(budget, fit.fixed_bytes, fit.per_step_bytes)
    doubling = longest_fit_doubling(budget, fit.fixed_bytes, fit.per_step_bytes, start_capacity)
    return BudgetRow(fit.batch, budget_mb, steps, steps * r, steps * r * hop / sample_rate, doubling * r,
                     doubling * r * hop / sample_rate)


# --------------------------------------------------------------------------------------------------
# run, report
# --------------------------------------------------------------------------------------------------
def run(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    machine = machine_facts("cpu", args.threads)  # here, so that its load average is the one at the start
    subject = load_subject(args.checkpoint)
    model, r = subject.model, subject.r
    with torch.no_grad():  # the capacity start_cache gives by default (the doubling's first size)
        empty = model.start_cache(*model.encode(*random_tokens(subject.n_symbols, 1, 1, args.seed)))
    start_capacity = empty.layers[0].self_k.shape[2]
    log(f"kv-cache: {subject.source}; r={r}, d_model={model.d_model}, {len(model.layers)} layers; "
        f"{args.tokens} tokens; threads {args.threads}")
    speed_rows, speed_summaries, points, fits, budgets, checks = [], [], [], [], [], []
    for batch in args.batch_sizes:
        log(f"speed, B={batch}: cached to {max(args.lengths)} frames, cached and uncached to {args.uncached_at}")
        rows, summary = measure_speed(subject, batch, args.lengths, args.uncached_at, args.tokens, args.window,
                                      args.repeats, args.seed, log)
        speed_rows += rows
        speed_summaries.append(summary)
        for row in rows:
            uncached = f", uncached {row.uncached_step_ms:.2f} ms" if row.uncached_step_ms is not None else ""
            log(f"  {row.frames:5d} frames: cached {row.cached_step_ms:.2f} ms/step (self-attention "
                f"{row.cached_self_attention_ms:.2f}){uncached}")
        log(f"  flatness max/min {summary.flatness:.3f} (line: {summary.intercept_ms:.2f} ms + "
            f"{summary.ms_per_1000_frames:.3f} ms per 1000 frames); at {args.uncached_at} frames cached "
            f"{summary.cached_total_s:.2f} s, uncached {summary.uncached_total_s:.2f} s: {summary.speedup:.1f}x")
        mem, check = measure_memory(subject, batch, args.lengths, args.tokens, args.seed)
        fit = fit_memory(mem, r, args.tokens)
        row = budget_row(fit, args.budget_mb, r, subject.hop_length, subject.sample_rate, start_capacity)
        points += mem
        fits.append(fit)
        budgets.append(row)
        checks.append({"batch": batch, **check})
        log(f"memory, B={batch}: fixed {fit.fixed_bytes} B (cross K/V), {fit.per_step_bytes} B per step, "
            f"{fit.bytes_per_frame_per_item:.0f} B per frame per item, linear {fit.linear}; cache_bytes == tensors' "
            f"nbytes == infer's at {check['steps']} steps: {check['agree']}; {args.budget_mb:g} MB holds "
            f"{row.frames} frames ({row.seconds:.1f} s), {row.doubling_frames} frames with doubling buffers")
    return {
        "argv": args.argv,
        "started": args.started,
        "machine": machine,
        "load_average_at_end": list(os.getloadavg()),
        "model": {"source": subject.source, "class": type(model).__name__, "reduction_factor": r,
                  "d_model": model.d_model, "decoder_layers": len(model.layers),
                  "n_heads": model.layers[0].self_attention.n_heads,
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "hop_length": subject.hop_length, "sample_rate": subject.sample_rate,
                  "cache_start_capacity_steps": start_capacity, "dtype": str(next(model.parameters()).dtype)},
        "settings": {"lengths": args.lengths, "tokens": args.tokens, "batch_sizes": args.batch_sizes,
                     "threads": args.threads, "repeats": args.repeats, "window_steps": args.window,
                     "budget_mb": args.budget_mb, "uncached_at": args.uncached_at, "seed": args.seed},
        "speed": [asdict(x) for x in speed_rows],
        "speed_summary": [asdict(x) for x in speed_summaries],
        "memory": [asdict(x) for x in points],
        "memory_fit": [asdict(x) for x in fits],
        "budget": [asdict(x) for x in budgets],
        "accounting_check": checks,
    }


def to_markdown(res: dict[str, Any]) -> str:
    m, st = res["model"], res["settings"]
    seconds = lambda frames: frames * m["hop_length"] / m["sample_rate"]  # noqa: E731
    lines = [
        "# KV cache of the Transformer AR: per-step time and memory against length",
        "",
        f"Model: {m['source']} (r={m['reduction_factor']}, d_model {m['d_model']}, {m['decoder_layers']} layers, "
        f"{m['n_heads']} heads, {m['parameters']:,} parameters, {m['dtype']}); speed and memory depend on these "
        f"sizes, not on the weights.  {st['tokens']} input tokens; every decode forced to its length (stop token off).",
        f"Machine: {res['machine']['cpu_model']}, {st['threads']} torch thread(s), load average "
        f"{', '.join(f'{x:.2f}' for x in res['machine']['load_average_at_start'])} at start, "
        f"{', '.join(f'{x:.2f}' for x in res['load_average_at_end'])} at end.  Medians over {st['repeats']} "
        f"repeats after a warm-up; per-step time = median of the {st['window_steps']} steps ending at that length.",
        "",
        "## Per-step time against the decoded length",
        "",
        "| B | frames | audio s | cached ms/step | of which self-attention ms | uncached ms/step |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in res["speed"]:
        unc = f"{row['uncached_step_ms']:.2f}" if row["uncached_step_ms"] is not None else "-"
        lines.append(f"| {row['batch']} | {row['frames']} | {seconds(row['frames']):.1f} | "
                     f"{row['cached_step_ms']:.2f} | {row['cached_self_attention_ms']:.2f} | {unc} |")
    lines += ["", f"| B | flatness max/min {min(st['lengths'])}..{max(st['lengths'])} frames (target <= 1.2) | "
              "line ms + ms/1000 frames | "
              f"cached total at {st['uncached_at']} frames s | uncached total s | speed-up |",
              "|---:|---:|---:|---:|---:|---:|"]
    for s in res["speed_summary"]:
        verdict = "met" if s["flatness"] <= 1.2 else "missed"
        lines.append(f"| {s['batch']} | {s['flatness']:.3f} ({verdict}) | {s['intercept_ms']:.2f} + "
                     f"{s['ms_per_1000_frames']:.3f} | {s['cached_total_s']:.2f} | {s['uncached_total_s']:.2f} | "
                     f"{s['speedup']:.1f}x |")
    lines += ["", "## Cache memory against the decoded length", "",
              "Used = the model's `cache_bytes` (checked equal to the tensors' nbytes and to infer's own figure); "
              f"allocated = the storages at their capacity (start capacity {m['cache_start_capacity_steps']} steps, "
              "growing by doubling when the cache is driven step by step; infer reserves max_decoder_steps up front).",
              f"Frames = positions x r ({m['reduction_factor']}): what the positions that hold a length hold.",
              "", "| B | frames | used MB | allocated MB | capacity steps |", "|---:|---:|---:|---:|---:|"]
    for p in res["memory"]:
        lines.append(f"| {p['batch']} | {p['frames']} | {p['used_bytes'] / MB:.3f} | {p['allocated_bytes'] / MB:.3f} | "
                     f"{p['capacity_steps']} |")
    lines += ["", f"| B | fixed (cross K/V) bytes | bytes/frame/item | linear | longest in {st['budget_mb']:g} MB: "
              "frames (audio s) | with doubling buffers: frames (audio s) |", "|---:|---:|---:|---:|---:|---:|"]
    for f, b in zip(res["memory_fit"], res["budget"]):
        lines.append(f"| {f['batch']} | {f['fixed_bytes']:,} ({f['fixed_bytes_per_item_per_token']:.0f} per item "
                     f"per token) | {f['bytes_per_frame_per_item']:.0f} | {f['linear']} | {b['frames']:,} "
                     f"({b['seconds']:.0f} s) | {b['doubling_frames']:,} ({b['doubling_seconds']:.0f} s) |")
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any], path: Path) -> None:
    """Left: per-step ms against frames.  Right (log-log): the cache's used bytes measured (markers), its exact
    linear law drawn on to where it meets the budget (dashed, the crossing marked), the allocated bytes dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = res["model"]["reduction_factor"]
    budget = res["settings"]["budget_mb"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, batch in enumerate(res["settings"]["batch_sizes"]):
        color = f"C{i}"
        rows = [row for row in res["speed"] if row["batch"] == batch]
        ax1.plot([row["frames"] for row in rows], [row["cached_step_ms"] for row in rows], "o-", color=color,
                 label=f"cached, B={batch}")
        unc = [row for row in rows if row["uncached_step_ms"] is not None]
        ax1.plot([row["frames"] for row in unc], [row["uncached_step_ms"] for row in unc], "s--", color=color,
                 alpha=0.6, label=f"uncached, B={batch}")
        pts = [p for p in res["memory"] if p["batch"] == batch and p["frames"] > 0]
        ax2.plot([p["frames"] for p in pts], [p["used_bytes"] / MB for p in pts], "o", color=color,
                 label=f"used (measured), B={batch}")
        ax2.plot([p["frames"] for p in pts], [p["allocated_bytes"] / MB for p in pts], ":", color=color,
                 label=f"allocated (doubling), B={batch}")
        fit = next(f for f in res["memory_fit"] if f["batch"] == batch)
        crossing = next(b for b in res["budget"] if b["batch"] == batch)["frames"]
        top = 1.5 * max(crossing, r)  # points spaced evenly on the log axis, from one position to past the crossing
        frames = [r * (top / r) ** (i / 200) for i in range(201)]
        ax2.plot(frames, [(fit["fixed_bytes"] + fit["per_step_bytes"] * math.ceil(f / r)) / MB for f in frames],
                 "--", color=color, lw=1)
        ax2.axvline(crossing, color=color, lw=0.8, alpha=0.5)
        ax2.text(crossing, budget / 8, f" {crossing:,} frames", color=color, rotation=90, va="top", fontsize=8)
    ax1.set(xlabel="decoded frames", ylabel="ms per decoder step", yscale="log", title="per-step time")
    ax2.axhline(budget, color="k", lw=1)
    ax2.text(0.01, budget, f"budget {budget:g} MB", va="bottom", transform=ax2.get_yaxis_transform())
    ax2.set(xlabel="decoded frames", ylabel="KV cache MB", xscale="log", yscale="log",
            title="cache memory (dashed: the measured law, on to the budget)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8, loc="lower right")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------
def parse_args(argv: list[str]) -> argparse.Namespace:
    from recipes.benchmark import parse_ints

    p = argparse.ArgumentParser(prog="python -m recipes.benchmark kv-cache", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", help="a TransformerAR checkpoint (default: random weights at "
                   "conf/model/transformer_ar.yaml size)")
    p.add_argument("--lengths", type=parse_ints, default=[100, 250, 500, 1000, 2000], help="decoded frames")
    p.add_argument("--tokens", type=int, default=60, help="input symbols per item")
    p.add_argument("--batch-sizes", type=parse_ints, default=[1, 8])
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--window", type=int, default=16, help="steps whose median is the per-step time at a length")
    p.add_argument("--budget-mb", type=float, default=512.0, help="memory budget for the cache (MiB)")
    p.add_argument("--uncached-at", type=int, default=1000, help="frames at which uncached and cached are timed")
    p.add_argument("--seed", type=int, default=0, help="the random tokens")
    p.add_argument("--out", type=Path, default=Path("benchmark_kv_cache"))
    args = p.parse_args(argv)
    if min(args.lengths + args.batch_sizes) < 1:
        p.error(f"--lengths and --batch-sizes take integers >= 1, got {args.lengths} and {args.batch_sizes}")
    args.lengths, args.batch_sizes = sorted(set(args.lengths)), sorted(set(args.batch_sizes))
    for name in ("tokens", "threads", "repeats", "window", "uncached_at"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.budget_mb > 0:
        p.error(f"--budget-mb must be > 0, got {args.budget_mb}")
    if args.uncached_at > max(args.lengths):
        p.error(f"--uncached-at {args.uncached_at} is beyond the longest --lengths {max(args.lengths)}")
    args.argv = ["kv-cache", *argv]
    args.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        result = run(args, log=lambda s: print(s, flush=True))
    except BenchmarkError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kv_cache.json").write_text(json.dumps(result, indent=1))
    (args.out / "kv_cache.md").write_text(to_markdown(result))
    plot(result, args.out / "kv_cache.png")
    print(f"wrote {args.out / 'kv_cache.json'}, {args.out / 'kv_cache.md'}, {args.out / 'kv_cache.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

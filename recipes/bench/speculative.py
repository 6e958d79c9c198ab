"""Speculative decoding of the Transformer AR against plain cached decoding (issue 37 item 3).

    python -m recipes.bench.speculative --tar CKPT [--drafter checkpoints/nar.pt|repeat] [--ks 2,4,8,16]
        [--tolerance auto|X] [--limit 100] [--data-root data/slt] [--threads 1] [--out docs/results/speculative]

Speed and acceptance, model only, one sentence at a time (the latency case): every held-out test sentence is
decoded plainly (KV-cached) and speculatively for each k, at the same seed, through the engines' `mels` stage
(tts.runtime.speculative.SpeculativeEngine over the torch engine: the drafter's seconds are counted).  Per k: the
median speed-up over plain decoding, the share of drafts accepted, positions emitted per network call, and how far
the result moves from the plain decode (mean |log-mel difference| over the common frames, natural-log units, and
the length ratio).

Tolerance `auto` (the default): the AR's own teacher-forced error on validation sentences, rms over the mel
channels of its pre-postnet prediction against the real frame (normalised units), the median over frames:
tts/models/speculative.py says why a draft within that distance is an input the AR is trained to read.

Quality with intervals (CER, DistillMOS, MCD to the recordings) is one recipes.evaluate run with the systems
`tar` and `tar_s{k}` = {kind: acoustic, checkpoint: CKPT, speculate: k, drafter: D, tolerance: X}; the command is
printed and written beside the table.  Written: OUT/speculative.json and OUT/speculative.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from recipes.bench.batching import split_items
from recipes.bench.timing import BenchmarkError, machine_facts, median


@torch.inference_mode()
def teacher_forced_rms(engine: Any, data: Path, limit: int) -> float:
    """The median over frames of rms_M(prediction - real frame) of the engine's AR teacher-forced on `limit`
    validation utterances (eval mode, the prenet at its masks' expectation: the prediction itself, not a sample)."""
    from tts.data.batch import Batch
    from tts.data.corpus import load_features, read_metadata, read_split
    from tts.runtime.rescoring import deterministic_prenets

    model = engine.model
    texts = {u.id: u.text for u in read_metadata(data)}
    rms: list[np.ndarray] = []
    for uid in read_split(data, "val")[:limit]:
        feats = load_features(data, uid)
        mel = torch.as_tensor(feats.mel, dtype=torch.float32)[None]  # [1, M, T]
        tokens = torch.tensor([engine.encode(texts[uid])], dtype=torch.long)
        batch = Batch(ids=[uid], texts=[""], tokens=tokens, token_lengths=torch.tensor([tokens.shape[1]]),
                      mels=mel, mel_lengths=torch.tensor([mel.shape[2]]))
        with deterministic_prenets(model):
            out = model._teacher_forced(batch)
        target = model._target(batch)
        n = mel.shape[2]
        rms.append((out.mel_before[0, :, :n] - target[0, :, :n]).pow(2).mean(dim=0).sqrt().numpy())
    if not rms:
        raise BenchmarkError(f"no validation sentences in {data}: give --tolerance X")
    return float(np.median(np.concatenate(rms)))


def run(args: argparse.Namespace, log=print) -> dict[str, Any]:
    from tts import checkpoint
    from tts.runtime.speculative import SpeculativeEngine
    from tts.runtime.torch_engine import TorchEngine

    torch.set_num_threads(args.threads)
    base = TorchEngine(checkpoint.load(args.tar), None)
    data = Path(args.data_root)
    tolerance = teacher_forced_rms(base, data, args.val_limit) if args.tolerance == "auto" else float(args.tolerance)
    log(f"tolerance {tolerance:.4f} ({'auto: teacher-forced rms on validation' if args.tolerance == 'auto' else 'given'})")
    items = split_items(base, data, "test", args.limit)
    engines = {k: SpeculativeEngine(base, args.drafter, k, tolerance) for k in args.ks}
    controls = base.defaults.replace(seed=args.seed)
    rows: dict[int, list[dict[str, float]]] = {k: [] for k in args.ks}
    plain_s: list[float] = []
    for item in items:
        base.mels([item.ids], [item.index], controls)  # warm-up of this length
        t0 = time.perf_counter()
        plain = base.mels([item.ids], [item.index], controls)
        plain_s.append(time.perf_counter() - t0)
        ref = plain.mels[0, :, : int(plain.lengths[0])]
        for k, engine in engines.items():
            t0 = time.perf_counter()
            out = engine.mels([item.ids], [item.index], controls)
            seconds = time.perf_counter() - t0
            mel = out.mels[0, :, : int(out.lengths[0])]
            n = min(mel.shape[1], ref.shape[1])
            stats = engine.last_stats
            rows[k].append({"speedup": plain_s[-1] / seconds, "seconds": seconds, "draft_s": engine.last_draft_s,
                            "acceptance": stats.acceptance, "per_round": stats.positions_per_round,
                            "mel_diff": float((mel[:, :n] - ref[:, :n]).abs().mean()),
                            "length_ratio": mel.shape[1] / max(ref.shape[1], 1)})
        log(f"{item.uid}: plain {plain_s[-1]:.3f} s, " + ", ".join(
            f"k={k} x{rows[k][-1]['speedup']:.2f} acc {rows[k][-1]['acceptance']:.2f}" for k in args.ks))
    summary = {str(k): {key: median([r[key] for r in rows[k]]) for key in rows[k][0]} for k in args.ks}
    return {"tar": str(args.tar), "drafter": str(args.drafter), "tolerance": tolerance, "sentences": len(items),
            "plain_s_median": median(plain_s), "per_k": summary, "machine": machine_facts("cpu", args.threads),
            "quality_command": quality_command(args, tolerance)}


def quality_command(args: argparse.Namespace, tolerance: float) -> str:
    systems = [f"+systems.tar={{kind:acoustic,checkpoint:{args.tar},vocoder:{args.vocoder}}}"]
    systems += [f"+systems.tar_s{k}={{kind:acoustic,checkpoint:{args.tar},vocoder:{args.vocoder},speculate:{k},"
                f"drafter:{args.drafter},tolerance:{tolerance:.4f}}}" for k in args.ks]
    return " ".join(["python -m recipes.evaluate", f"data_root={args.data_root}", f"limit={args.limit}",
                     "name=speculative", "~systems.ground_truth", "~systems.copy_griffin_lim", "~systems.ar",
                     "~systems.nar", *systems])


def to_markdown(r: dict[str, Any]) -> str:
    lines = [f"Transformer AR `{r['tar']}`, drafter `{r['drafter']}`, tolerance {r['tolerance']:.4f}, "
             f"{r['sentences']} test sentences, plain cached decode {r['plain_s_median']:.3f} s median (medians below)",
             "", "| k | speed-up | drafts accepted | positions / call | drafter s | mean abs log-mel diff to plain | "
             "length ratio |", "|---|---|---|---|---|---|---|"]
    for k, s in r["per_k"].items():
        lines.append(f"| {k} | {s['speedup']:.2f} | {s['acceptance']:.3f} | {s['per_round']:.2f} | {s['draft_s']:.3f} | "
                     f"{s['mel_diff']:.3f} | {s['length_ratio']:.3f} |")
    lines += ["", f"Quality with intervals: `{r['quality_command']}`"]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tar", required=True, help="a Transformer AR checkpoint")
    p.add_argument("--drafter", default="checkpoints/nar.pt", help="a NAR checkpoint, or `repeat`")
    p.add_argument("--ks", default="2,4,8,16")
    p.add_argument("--tolerance", default="auto", help="`auto` (teacher-forced rms on validation) or a number >= 0")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--val-limit", type=int, default=20)
    p.add_argument("--data-root", default="data/slt")
    p.add_argument("--vocoder", default="source-filter")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="docs/results/speculative")
    args = p.parse_args(argv)
    try:
        args.ks = [int(x) for x in args.ks.split(",")]
    except ValueError:
        p.error(f"--ks takes comma-separated integers, got {args.ks!r}")
    if any(k < 2 for k in args.ks):
        p.error("--ks: every k must be >= 2 (one known input and k - 1 drafts a round)")
    if args.tolerance != "auto":
        try:
            ok = float(args.tolerance) >= 0
        except ValueError:
            ok = False
        if not ok:
            p.error(f"--tolerance takes `auto` or a number >= 0, got {args.tolerance!r}")
    if not Path(args.tar).is_file():
        p.error(f"--tar: checkpoint not found: {args.tar}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "speculative.json").write_text(json.dumps(result, indent=2) + "\n")
    text = to_markdown(result)
    (out / "speculative.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

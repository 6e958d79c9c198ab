"""Quality against mel-generation time, from `recipes.evaluate` reports: a plot and its table.

    python -m recipes.bench.tradeoff exp/eval/multimodality/report.json --out docs/results/multimodality \
        [--systems a,b,...] [--y distillmos] [--name tradeoff] [--timing TIMING_REPORT]

Each system is one point: x = mean mel-generation time per utterance (the report's `mel_s`), y = the mean
of `--y` with its confidence interval as an error bar (the report's CI). Systems without `mel_s` (the
recordings, copy synthesis) are drawn as horizontal reference lines. `--timing`: take every x from this
report instead, e.g. one run that synthesised all the systems one after another on the same quiet machine
(`recipes.evaluate ... overwrite=true` with the metrics off), when the quality reports were made at
different times under different loads. Writes OUT/NAME.png and
OUT/NAME.json (the plotted numbers, so the figure can be checked without reading the image).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from tts.evaluation.table import ReportError, collect


@dataclass(frozen=True)
class Point:
    system: str
    mel_ms: float | None  # None: a reference without a mel stage (recordings, copy synthesis)
    y: float
    y_low: float | None
    y_high: float | None


def points(reports: list[Path], systems: list[str] | None, y: str, timing: Path | None = None) -> list[Point]:
    out = []
    timed = {row.name: row for row in collect([timing])} if timing is not None else {}
    for row in collect(reports, systems):
        s = row.summary.get(y)
        if s is None or s.get("mean") is None:
            raise ReportError(f"system {row.name!r} has no {y!r} in {row.report}")
        mel = row.summary.get("mel_s")
        if timing is not None and mel is not None:  # a system with a mel stage: timed in the timing run
            if row.name not in timed or timed[row.name].summary.get("mel_s") is None:
                raise ReportError(f"system {row.name!r} has no mel_s in the timing report {timing}")
            mel = timed[row.name].summary["mel_s"]
        out.append(Point(row.name, None if mel is None or mel.get("mean") is None else round(mel["mean"] * 1000, 2),
                         s["mean"], s.get("ci_low"), s.get("ci_high")))
    return out


def plot(pts: list[Point], y: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in pts:
        if p.mel_ms is None:
            ax.axhline(p.y, linestyle="--", linewidth=1, color="grey")
            ax.annotate(p.system, (0.01, p.y), xycoords=("axes fraction", "data"), fontsize=7, va="bottom")
            continue
        err = None if p.y_low is None else [[p.y - p.y_low], [p.y_high - p.y]]
        ax.errorbar([p.mel_ms], [p.y], yerr=err, marker="o", capsize=3)
        ax.annotate(p.system, (p.mel_ms, p.y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("mel-generation time per utterance (ms, mean, log scale)")
    ax.set_ylabel(f"{y} (mean, 95 % interval)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--systems", default=None, help="comma-separated, in plot order (default: all)")
    ap.add_argument("--y", default="distillmos")
    ap.add_argument("--name", default="tradeoff")
    ap.add_argument("--title", default="Quality against mel-generation time")
    ap.add_argument("--timing", type=Path, default=None, help="a report to take every system's mel_s from")
    args = ap.parse_args(argv)
    try:
        pts = points(args.reports, args.systems.split(",") if args.systems else None, args.y, args.timing)
    except (ReportError, OSError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    plot(pts, args.y, args.out / f"{args.name}.png", args.title)
    (args.out / f"{args.name}.json").write_text(json.dumps({"y": args.y, "points": [asdict(p) for p in pts]}, indent=1))
    for p in pts:
        print(f"{p.system}: mel {p.mel_ms} ms, {args.y} {p.y:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

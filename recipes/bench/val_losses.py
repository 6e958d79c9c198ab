"""The last validation losses of training runs, side by side (from their TensorBoard logs).

    python -m recipes.bench.val_losses exp/mm_nar exp/mm_nar_distilled exp/mm_nar_kd \
        [--tags val/mel_l1,val/pitch_mse] [--out docs/results/multimodality/val_losses.md]

A run resumed after a kill writes several event files: they are read together and, per tag, the value at
the highest step wins. Each run is scored on its own validation split, so the figures compare how well a
model fits ITS targets (e.g. how much simpler a teacher's speech is to learn than the recordings), not
which model is better on a common test set (that is recipes.evaluate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_TAGS = ("val/mel_l1", "val/duration_mse", "val/pitch_mse", "val/energy_mse", "val/refiner_fm")


def last_values(run_dir: Path, prefix: str = "val/") -> dict[str, tuple[int, float]]:
    """tag -> (step, value) at the highest logged step, over every event file of `run_dir`/tb."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted((run_dir / "tb").glob("events.out.tfevents.*"))
    if not files:
        raise FileNotFoundError(f"no TensorBoard event files under {run_dir / 'tb'}")
    out: dict[str, tuple[int, float]] = {}
    for f in files:
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            if not tag.startswith(prefix):
                continue
            for ev in acc.Scalars(tag):
                if tag not in out or ev.step >= out[tag][0]:
                    out[tag] = (int(ev.step), float(ev.value))
    return out


def to_markdown(runs: list[Path], tags: list[str]) -> str:
    values = {run: last_values(run) for run in runs}
    lines = ["| run | last logged step | " + " | ".join(tags) + " |", "|---" * (len(tags) + 2) + "|"]
    for run in runs:
        v = values[run]
        step = max((s for s, _ in v.values()), default=0)
        cells = [f"{v[t][1]:.4f}" if t in v else "–" for t in tags]
        lines.append(f"| {run.name} | {step if v else '–'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path, nargs="+", help="experiment folders (with tb/)")
    ap.add_argument("--tags", default=",".join(DEFAULT_TAGS))
    ap.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    try:
        md = to_markdown(args.runs, [t for t in args.tags.split(",") if t])
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(md, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(md, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

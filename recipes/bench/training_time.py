"""How long a training run took, from its TensorBoard event files (issue 34: "training <= 10 hours in all").

    python -m recipes.bench.training_time exp/ar_baseline [--tag train/loss] [--json OUT]

A run resumed across sessions writes one event file per process.  Each process's time is the span between its
first and last logged training step plus one logging interval (the steps before its first log, at the process's
own pace); the gaps between processes (a machine waiting for the next session) are not training.  Steps a
killed process trained after its last checkpoint are done again by the next process: they count as time spent
(compute really used), and are reported as `repeated_steps`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Segment:
    """One training process (one event file)."""

    file: str
    first_step: int
    last_step: int
    hours: float  # its first to last logged step, plus one logging interval at its own pace
    seconds_per_step: float | None  # None when it logged once only


@dataclass
class RunTime:
    run: str
    segments: list[Segment]
    hours: float  # sum over the processes
    steps: int  # the run's last logged step
    repeated_steps: int  # steps trained twice (after a kill, from the last checkpoint)


def _events(path: Path, tag: str) -> list[tuple[int, float]]:
    """(step, wall time) of `tag`'s scalar events in one event file, in file order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return []
    return [(e.step, e.wall_time) for e in acc.Scalars(tag)]


def run_time(run: Path, tag: str = "train/loss") -> RunTime:
    files = sorted((run / "tb").glob("events.out.tfevents.*"))
    if not files:
        raise FileNotFoundError(f"no TensorBoard event files in {run / 'tb'}")
    starts: list[float] = []  # each segment's first wall time: the processes in the order they ran
    segments: list[Segment] = []
    for f in files:
        ev = _events(f, tag)
        if not ev:
            continue
        (s0, t0), (s1, t1) = ev[0], ev[-1]
        pace = (t1 - t0) / (s1 - s0) if s1 > s0 else None
        interval = (s1 - s0) / (len(ev) - 1) if len(ev) > 1 else 0.0  # steps between logs
        hours = ((t1 - t0) + (pace or 0.0) * interval) / 3600
        segments.append(Segment(f.name, s0, s1, hours, pace))
        starts.append(t0)
    segments = [seg for _, seg in sorted(zip(starts, segments), key=lambda x: x[0])]
    if not segments:
        raise ValueError(f"no {tag!r} events in {run / 'tb'}")
    repeated, reached = 0, -1
    for seg in segments:
        repeated += max(0, min(reached, seg.last_step) - seg.first_step + 1) if reached >= 0 else 0
        reached = max(reached, seg.last_step)
    return RunTime(str(run), segments, sum(s.hours for s in segments), reached, repeated)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", type=Path, help="a training run's folder (exp/NAME, with tb/)")
    p.add_argument("--tag", default="train/loss", help="the scalar logged every few training steps")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    try:
        rt = run_time(args.run, args.tag)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in rt.segments:
        pace = f"{s.seconds_per_step:.2f} s/step" if s.seconds_per_step else "one log"
        print(f"{s.file}: steps {s.first_step}-{s.last_step}, {s.hours:.2f} h, {pace}")
    print(f"{rt.run}: {rt.hours:.2f} h of training in {len(rt.segments)} processes, up to step {rt.steps} "
          f"({rt.repeated_steps} steps trained twice after kills)")
    if args.json:
        args.json.write_text(json.dumps(asdict(rt), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

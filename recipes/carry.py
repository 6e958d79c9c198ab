"""Carry a training run across machines: its latest weights into the repository, the run resumed from them.

    python -m recipes.carry save exp/tar_cpu_small carry/tar_cpu_small.pt   # last.ckpt -> fp16 weights
    python -m recipes.carry steps carry/tar_cpu_small.pt                    # total steps behind them

A run longer than a session outlives neither the session's processes nor, often, its machine (`exp/` is not in
git).  `save` writes the run's last.ckpt as weights only (fp16, atomically; the optimizer's moments would
triple the size) with the total training steps behind them in its info (`steps_before` + `global_step`, as a
release file).  The next session warm-starts from the file (`init_from=`, which sums the steps again) with
`optim.scheduler.offset=<steps>` so the learning-rate schedule continues where it was, after a short warm-up
for Adam's fresh moments (scripts/train_transformer_ar.sh does this when it finds no last.ckpt).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tts.checkpoint import export, read_raw, steps_behind


def total_steps(path: str | Path) -> int:
    """Steps of training behind a checkpoint: its own count plus those behind the weights it started from."""
    return steps_behind(read_raw(path))


def save(run: Path, dst: Path) -> int:
    src = run / "checkpoints" / "last.ckpt"
    if not src.is_file():
        raise SystemExit(f"error: {src} does not exist (nothing to carry)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    # the training modules keep info.global_step current, and info.steps_before travels with the meta
    export(src, dst, "fp16", info={"carried_from": str(src)})
    return total_steps(dst)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="RUN's last.ckpt -> fp16 weights at DST")
    s.add_argument("run", type=Path)
    s.add_argument("dst", type=Path)
    t = sub.add_parser("steps", help="print the total training steps behind a checkpoint")
    t.add_argument("path", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "save":
        print(f"{args.dst}: {save(args.run, args.dst)} steps in all")
    else:
        print(total_steps(args.path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

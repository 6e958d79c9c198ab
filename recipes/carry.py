"""Carry a training run across machines: its latest weights into the repository, the run resumed from them.

    python -m recipes.carry save exp/tar_cpu_small carry/tar_cpu_small.pt   # last.ckpt -> fp16 weights
    python -m recipes.carry steps carry/tar_cpu_small.pt                    # total steps behind them
    python -m recipes.carry start tar_cpu_small                             # the overrides that continue it

A run longer than a session outlives neither the session's processes nor, often, its machine (`exp/` is not in
git).  `save` writes the run's last.ckpt as weights only (fp16, atomically; the optimizer's moments would
triple the size) with the total training steps behind them in its info (`steps_before` + `global_step`, as a
release file).  The next session warm-starts from the file (`init_from=`, which sums the steps again) with
`optim.scheduler.offset=<steps>` so the learning-rate schedule continues where it was, after a short warm-up
for Adam's fresh moments.  `start EXPERIMENT` prints those overrides, one per line, for the scripts that run
a long experiment (scripts/train_transformer_ar.sh, scripts/train_nar_joe.sh): `ckpt_path=last` when the run's
last.ckpt is on this machine, else the warm start from carry/EXPERIMENT.pt for the steps left, else nothing
(the experiment's own first start).  Exit status 3: the carried weights already have all the steps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts.checkpoint import export, read_raw, steps_behind

CONF = Path(__file__).resolve().parents[1] / "conf"
FRESH_WARMUP = 200  # steps of learning-rate warm-up for Adam's fresh moments after a carried warm start
DONE = 3  # exit status of `start` when nothing is left to train


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


def experiment_steps(carried: Path, init_from: str | None, partial: bool) -> int:
    """Steps this experiment has trained behind `carried`.  Its steps_behind also counts those behind the
    experiment's own first warm start (nar_joe starts from the slt voice's carry/nar_block_festival.pt, whose steps are
    not joe's), except for a partial one (init_from_only: another architecture's parts, counted apart as
    init_from_steps), whose schedule began at 0."""
    base = 0 if partial or not init_from else steps_behind(read_raw(init_from))
    return total_steps(carried) - base


def start_overrides(experiment: str, carried: Path | None = None, extra: list[str] | None = None) -> list[str]:
    """The Hydra overrides that continue `experiment` (see the module's doc); raises SystemExit(DONE) when the
    carried weights already have the experiment's max_steps."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("train", [f"experiment={experiment}", *(extra or [])])
    carried = carried or Path("carry") / f"{experiment}.pt"
    if (Path(cfg.exp_dir) / "checkpoints" / "last.ckpt").is_file():
        return ["ckpt_path=last"]
    if not carried.is_file():
        return []
    partial = bool(cfg.get("init_from_only"))
    done = experiment_steps(carried, cfg.get("init_from"), partial)
    left = int(cfg.trainer.max_steps) - done
    if left <= 0:
        print(f"{carried}: {done} of {cfg.trainer.max_steps} steps of {experiment} done, nothing left to train",
              file=sys.stderr)
        raise SystemExit(DONE)
    return [f"init_from={carried}", *(["~init_from_only"] if partial else []), f"optim.scheduler.offset={done}",
            f"optim.scheduler.warmup_steps={FRESH_WARMUP}", f"trainer.max_steps={left}"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="RUN's last.ckpt -> fp16 weights at DST")
    s.add_argument("run", type=Path)
    s.add_argument("dst", type=Path)
    t = sub.add_parser("steps", help="print the total training steps behind a checkpoint")
    t.add_argument("path", type=Path)
    r = sub.add_parser("start", help="print the overrides that continue EXPERIMENT, one per line")
    r.add_argument("experiment")
    r.add_argument("--carried", type=Path, default=None, help="default: carry/EXPERIMENT.pt")
    r.add_argument("overrides", nargs="*", help="the run's other overrides (e.g. exp_dir=...)")
    args = p.parse_args(argv)
    if args.cmd == "save":
        print(f"{args.dst}: {save(args.run, args.dst)} steps in all")
    elif args.cmd == "steps":
        print(total_steps(args.path))
    else:
        print("".join(f"{o}\n" for o in start_overrides(args.experiment, args.carried, args.overrides)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

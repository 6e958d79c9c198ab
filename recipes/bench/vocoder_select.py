"""Choose a vocoder run's checkpoint on VALIDATION utterances, never on the test set (issue 31: a vocoder's copy
synthesis swung by ~0.15 DistillMOS from one checkpoint to the next, docs/results/vocoder_headroom).

    python -m recipes.bench.vocoder_select exp/vocoder_sf_corrected_ema_slt --data data/slt --limit 20 \\
        --against exp/eval/headroom_sf_slt_val/report.json [--out DIR]

Every stepNNNNNNN.ckpt of the run's checkpoints/ is scored by its copy synthesis of the first `limit` utterances of
the corpus's val split (recipes.bench.vocoder_headroom, copy synthesis only), paired utterance by utterance
against a reference report of the same utterances (e.g. the shipped vocoder's: `vocoder_headroom --split val`).
Prints one row per checkpoint and the one with the highest paired mean; `--out DIR` keeps each checkpoint's report
(DIR/stepNNNNNNN.json, reused on a rerun: scoring is the slow part) and writes DIR/selection.json.  Score the
chosen checkpoint once on the test split afterwards.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

STEP_FILE = re.compile(r"step(\d+)\.ckpt$")


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of the run's step checkpoints, in step order."""
    found = [(int(m.group(1)), p) for p in (run_dir / "checkpoints").glob("step*.ckpt")
             if (m := STEP_FILE.search(p.name))]
    if not found:
        raise SystemExit(f"error: no stepNNNNNNN.ckpt under {run_dir / 'checkpoints'}")
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    import torch

    from recipes.bench.vocoder_headroom import paired_difference, run

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", type=Path, help="a vocoder training run (exp/NAME)")
    p.add_argument("--data", type=Path, required=True, help="the corpus whose val split scores (e.g. data/slt)")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--against", type=Path, required=True,
                   help="report.json of a reference vocoder on the same val utterances (vocoder_headroom --split val)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    reference = json.loads(args.against.read_text())
    if reference.get("split") != "val" or reference.get("limit") != args.limit:
        raise SystemExit(f"error: --against {args.against} scores split {reference.get('split')!r}, limit "
                         f"{reference.get('limit')}: it must be the val split with --limit {args.limit}")
    rows = []
    print(f"| step | DistillMOS | minus {reference['vocoder']}, paired | better on |\n|---|---|---|---|")
    for step, path in checkpoints(args.run):
        cached = args.out / f"step{step:07d}.json" if args.out else None
        if cached is not None and cached.is_file():
            report = json.loads(cached.read_text())
        else:
            report = run(args.data, args.limit, str(path), "val", copy_only=True)
            report["paired"] = paired_difference(report, reference)
            if cached is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps(report, indent=2) + "\n")
        c, d = report["conditions"]["vocoder"], report["paired"]
        rows.append({"step": step, "checkpoint": str(path), "distillmos": c["distillmos"], "paired": d})
        print(f"| {step} | {c['distillmos']:.2f} [{c['low']:.2f}, {c['high']:.2f}] | {d['mean']:+.2f} "
              f"[{d['low']:+.2f}, {d['high']:+.2f}] | {d['wins']} of {d['n']} |", flush=True)
    best = max(rows, key=lambda r: r["paired"]["mean"])
    print(f"chosen on validation: step {best['step']} ({best['checkpoint']})")
    if args.out is not None:
        (args.out / "selection.json").write_text(json.dumps({"run": str(args.run), "against": str(args.against),
                                                             "rows": rows, "chosen": best}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Build a listening test from systems' audio folders.

    python -m recipes.listening_test build --systems gt=DIR1 nar=DIR2 ar=DIR3 --out TESTDIR \
        [--n 20] [--mos] [--seed 0] [--ground-truth gt] [--attention-checks 2] [--loudness gated|rms]

Each DIR holds ID.wav for the same held-out sentence IDs; the common IDs are used (a random --n of
them). Producing those folders by synthesis is a separate step. See tts/listening/build.py for the
normalisation and the test.json layout; then serve with `python -m tts.listening serve --test TESTDIR`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts.listening.build import build_test, parse_systems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m recipes.listening_test")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="make TESTDIR/test.json and TESTDIR/audio/ from audio folders")
    b.add_argument("--systems", nargs="+", required=True, metavar="NAME=DIR")
    b.add_argument("--out", required=True, type=Path)
    b.add_argument("--n", type=int, default=20, help="number of sentences (default 20)")
    b.add_argument("--mos", action="store_true", help="add MOS pages (one per system and sentence)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--ground-truth", nargs="*", default=None, metavar="NAME",
                   help="systems that are ground truth (default: any named gt, ground_truth, or reference)")
    b.add_argument("--attention-checks", type=int, default=2)
    b.add_argument("--loudness", choices=["gated", "rms"], default="gated")
    b.add_argument("--target-db", type=float, default=-23.0)
    b.add_argument("--title", default="Listening test")
    args = ap.parse_args(argv)
    try:
        systems = parse_systems(args.systems)
        gt = args.ground_truth
        if gt is None:
            gt = [s for s in systems if s.lower() in {"gt", "ground_truth", "groundtruth", "reference"}]
        if args.n < 1 or args.attention_checks < 0:
            raise ValueError("--n must be >= 1 and --attention-checks >= 0")
        test = build_test(systems, args.out, n=args.n, mos=args.mos, seed=args.seed, ground_truth=gt,
                          attention_checks=args.attention_checks, loudness=args.loudness,
                          target_db=args.target_db, title=args.title)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kinds = {}
    for it in test["items"]:
        k = "attention" if it.get("attention") else it["type"]
        kinds[k] = kinds.get(k, 0) + 1
    print(f"wrote {args.out}/test.json: {len(test['sentences'])} sentences, systems {test['systems']}, items {kinds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

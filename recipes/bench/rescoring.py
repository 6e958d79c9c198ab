"""AR rescoring of NAR candidates against a single sample (issue 37 item 4; tts.runtime.rescoring).

    python -m recipes.bench.rescoring [--ns 1,2,4,8] [--limit 100] [--data-root data/slt] [--name rescoring]
        [--checkpoint checkpoints/nar.pt] [--scorer checkpoints/ar.pt] [--vocoder source-filter] [--threads 1]

One recipes.evaluate run (the held-out split of --data-root, one seed for all) with a system `nar_rN` =
{kind: acoustic, checkpoint, vocoder, rescore: N} per N (N = 1 is the plain NAR, the single sample), the ASR
(CER, repeated / missing words), DistillMOS and over-smoothing (GV) metrics on; then the table of
exp/eval/NAME/report.json: per N, the corpus CER, the share of utterances with repeated / missing words, the GV
ratio to the recording (dB; < 0 = smoother than the recording), DistillMOS, and the acoustic seconds per
sentence (`mel_s`: the N candidates plus the scoring; the vocoder runs once) with their 95 % intervals.
The varied-prosody lab: --data-root data/slt_varied --checkpoint <its NAR> --scorer <its AR> --name rescoring_varied.
Written: exp/eval/NAME/rescoring.md (and the evaluation's own report.md / report.json beside it).
`--report-from REPORT.json` prints the table of an earlier run without evaluating (the README's table is this
output for docs/results/rescoring/report.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

# (report column, header, digits): per-utterance means from the report's summary
COLUMNS = (("has_repeated_words", "repeated words", 3), ("has_missing_words", "missing words", 3),
           ("gv_ratio_db", "GV ratio dB", 2), ("distillmos", "DistillMOS", 2), ("mel_s", "acoustic s/sentence", 3),
           ("rtf", "RTF", 3))


def evaluate_command(args: argparse.Namespace) -> list[str]:
    """The recipes.evaluate call: the default systems dropped, one rescoring system per N."""
    cmd = [sys.executable, "-m", "recipes.evaluate", f"data_root={args.data_root}", f"name={args.name}",
           f"limit={args.limit}", f"threads={args.threads}", "metrics.smoothing=true", "metrics.mcd=false",
           "metrics.f0=false", "~systems.ground_truth", "~systems.copy_griffin_lim", "~systems.ar", "~systems.nar"]
    for n in args.ns:
        cmd.append(f"+systems.nar_r{n}={{kind:acoustic,checkpoint:{args.checkpoint},vocoder:{args.vocoder},"
                   f"rescore:{n},scorer:{args.scorer}}}")
    return cmd


def cell(stat: dict[str, Any] | None, digits: int) -> str:
    if not stat or stat.get("mean") is None:
        return "-"
    return f"{stat['mean']:.{digits}f} [{stat['ci_low']:.{digits}f}, {stat['ci_high']:.{digits}f}]"


def table(report: dict[str, Any], ns: list[int]) -> str:
    """Markdown: one row per N (CER corpus-level; the rest per-utterance means with their intervals)."""
    head = ["N", "CER"] + [h for _, h, _ in COLUMNS]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in ns:
        name = f"nar_r{n}"
        summary = report["summary"].get(name, {})
        cer = report.get("corpus_asr", {}).get(name, {}).get("cer")
        cells = [str(n), "-" if cer is None else f"{cer:.4f}"] + [cell(summary.get(k), d) for k, _, d in COLUMNS]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ns", default="1,2,4,8", help="candidate counts N, comma-separated")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--data-root", default="data/slt")
    p.add_argument("--name", default="rescoring")
    p.add_argument("--checkpoint", default="checkpoints/nar.pt")
    p.add_argument("--scorer", default="checkpoints/ar.pt")
    p.add_argument("--vocoder", default="source-filter")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--report-from", type=Path, help="print the table of this report.json, evaluate nothing")
    args = p.parse_args(argv)
    args.ns = [int(x) for x in args.ns.split(",")]
    if args.report_from:
        print(table(json.loads(args.report_from.read_text()), args.ns))
        return 0
    subprocess.run(evaluate_command(args), check=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    out = Path("exp/eval") / args.name
    text = table(json.loads((out / "report.json").read_text()), args.ns)
    (out / "rescoring.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

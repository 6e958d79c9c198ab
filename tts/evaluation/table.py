"""One markdown table from one or more `recipes.evaluate` reports (their report.json), so that a figure
table in the README or docs is made by a command, never retyped:

    python -m tts.evaluation.table docs/results/eval_test_ar/report.json \
        docs/results/eval_test_nar/report.json --systems ground_truth,ar,nar_k0,nar_k2 \
        --columns cer,wer,mcd_db,distillmos,ar_failure,mel_s

Columns: `cer` / `wer` are corpus-level (total edits / total reference length, the report's
`corpus_asr`); every other column is the per-utterance mean from the report's `summary` (any metric
name a report has, e.g. mcd_db, log_f0_rmse_cents, distillmos, has_missing_words, ar_failure, mel_s,
rtf).  A system found in several reports is taken from the first that has it (so the reports are
listed in order of preference); `NAME@K` takes NAME from the K-th report only (1-based: two reports
with a system of the same name, e.g. the old and the new default, side by side; `--label` and `--paired` name
it so too); a cell a report lacks is "–".  `--ci` adds each mean's confidence
interval from the report ("3.45 [3.37, 3.53]"; the corpus-level CER/WER have none).

`--paired A,B` (repeatable) adds, for each per-utterance column, system A minus system B utterance by utterance
on the sentences both spoke (by id; from two reports only when both evaluated the same data_root and split): the
mean difference with its bootstrap interval and the number of sentences A wins.  Two systems on the same
sentences differ less than their two intervals suggest.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

CORPUS_COLUMNS = ("cer", "wer")
DEFAULT_COLUMNS = ("cer", "wer", "mcd_db", "distillmos")
# decimals per column (others: 3); MCD in dB and F0 in cents do not need more
DIGITS = {"mcd_db": 2, "log_f0_rmse_cents": 0, "distillmos": 2, "mel_s": 3, "seconds": 2, "gv_ratio_db": 2}


class ReportError(ValueError):
    """A file that is not a recipes.evaluate report, or a system no report has."""


@dataclass
class SystemRow:
    name: str
    report: Path
    summary: dict  # metric -> {"mean", "ci_low", "ci_high", ...}
    corpus_asr: dict | None  # {"cer", "wer", "n"} or None (ASR was off)


def read_report(path: Path) -> dict:
    try:
        payload = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ReportError(f"no report at {path} (run `python -m recipes.evaluate` first)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path} is not a JSON report: {e}") from None
    if not isinstance(payload, dict) or "summary" not in payload:
        raise ReportError(f"{path} is not a recipes.evaluate report.json (no 'summary')")
    return payload


def split_spec(spec: str, paths: Sequence[Path]) -> tuple[str, Sequence[Path]]:
    """`NAME` -> (NAME, every report); `NAME@K` -> (NAME, [the K-th report]) (1-based)."""
    name, at, k = spec.rpartition("@")
    if not at:
        return spec, paths
    if not k.isdigit() or not 1 <= int(k) <= len(paths):
        raise ReportError(f"{spec!r}: after '@' the number of one of the {len(paths)} reports (1-based)")
    return name, [paths[int(k) - 1]]


def collect(paths: Sequence[Path], systems: Sequence[str] | None = None) -> list[SystemRow]:
    """Rows in the order of `systems` (default: every system of every report, first report first); a row's
    name is its spec as asked (`NAME` or `NAME@K`)."""
    if systems is None:
        found: dict[str, SystemRow] = {}
        for path in paths:
            payload = read_report(path)
            corpus = payload.get("corpus_asr") or {}
            for name, summary in payload["summary"].items():
                found.setdefault(name, SystemRow(name, Path(path), summary, corpus.get(name)))
        return list(found.values())
    payloads = {Path(path): read_report(path) for path in paths}
    rows, missing = [], []
    for spec in systems:
        name, where = split_spec(spec, paths)
        for path in where:
            payload = payloads[Path(path)]
            if name in payload["summary"]:
                corpus = payload.get("corpus_asr") or {}
                rows.append(SystemRow(spec, Path(path), payload["summary"][name], corpus.get(name)))
                break
        else:
            missing.append(spec)
    if missing:
        have = set().union(*(p["summary"] for p in payloads.values()))
        raise ReportError(f"systems {missing} are in none of {[str(p) for p in paths]}; they have {sorted(have)}")
    return rows


def cell(row: SystemRow, column: str, ci: bool = False) -> str:
    digits = DIGITS.get(column, 3)
    if column in CORPUS_COLUMNS:
        value, stats = (row.corpus_asr or {}).get(column), {}
    else:
        stats = row.summary.get(column) or {}
        value = stats.get("mean")
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    if ci and stats.get("ci_low") is not None and stats.get("ci_high") is not None:
        text += f" [{stats['ci_low']:.{digits}f}, {stats['ci_high']:.{digits}f}]"
    return text


def to_markdown(rows: Sequence[SystemRow], columns: Sequence[str], labels: dict[str, str] | None = None,
                ci: bool = False) -> str:
    labels = labels or {}
    lines = ["| system | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for r in rows:
        lines.append(f"| {labels.get(r.name, r.name)} | " + " | ".join(cell(r, c, ci) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _per_utterance(paths: Sequence[Path], system: str) -> tuple[dict, list[dict]] | None:
    """(the first report holding `system` (`NAME` or `NAME@K`) per utterance, its rows), or None."""
    system, paths = split_spec(system, paths)
    for path in paths:
        report = read_report(path)
        rows = (report.get("utterances") or {}).get(system)
        if rows is not None:
            return report, rows
    return None


def paired_rows(paths: Sequence[Path], a: str, b: str, columns: Sequence[str],
                sentence_columns: Sequence[str] = ()) -> list[str]:
    """Markdown rows "A minus B | column | mean [low, high] | wins of n" for each per-utterance column.  CER and
    WER are corpus-level in the tables (errors over characters of all sentences), so they are paired only when
    named in `sentence_columns`, as the mean of the per-sentence differences ("cer per sentence")."""
    from tts.evaluation.report import mean_ci

    found = {s: _per_utterance(paths, s) for s in (a, b)}
    if any(v is None for v in found.values()):
        raise ReportError(f"no report of {[str(p) for p in paths]} holds {[s for s, v in found.items() if v is None]} "
                          "per utterance")
    # two reports pair by utterance id only when they spoke the same corpus split (ids are the corpus's own)
    where = [tuple((rep.get("config") or {}).get(k) for k in ("data_root", "split")) for rep, _ in found.values()]
    if where[0] != where[1]:
        raise ReportError(f"{a!r} and {b!r} come from reports on different sentences: {where[0]} vs {where[1]}")
    mine, theirs = ({u["id"]: u for u in rows} for _, rows in found.values())
    ids = [i for i in mine if i in theirs]
    lines = []
    unknown = [c for c in sentence_columns if c not in CORPUS_COLUMNS]
    if unknown:
        raise ReportError(f"per-sentence pairing is for {list(CORPUS_COLUMNS)}, not {unknown}")
    for column in [*(c for c in columns if c not in CORPUS_COLUMNS), *sentence_columns]:
        pairs = [(mine[i].get(column), theirs[i].get(column)) for i in ids]
        d = [float(x) - float(y) for x, y in pairs if isinstance(x, (int, float)) and isinstance(y, (int, float))]
        if not d:
            continue
        mean, low, high = mean_ci(d)
        digits = DIGITS.get(column, 3)
        name = f"{column} per sentence" if column in CORPUS_COLUMNS else column
        lines.append(f"| {a} minus {b} | {name} | {mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}] | "
                     f"{sum(x > 0 for x in d)} of {len(d)} |")
    return lines


def _csv(s: str | None) -> list[str] | None:
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts.evaluation.table", description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path, help="recipes.evaluate report.json files, in order of preference")
    p.add_argument("--systems", default=None, help="comma-separated systems, in table order (default: all)")
    p.add_argument("--columns", default=",".join(DEFAULT_COLUMNS), help="comma-separated metrics")
    p.add_argument("--label", action="append", default=[], metavar="SYSTEM=LABEL", help="row label for a system")
    p.add_argument("--ci", action="store_true", help="add each mean's confidence interval from the report")
    p.add_argument("--paired", action="append", default=[], metavar="A,B",
                   help="also system A minus system B, utterance by utterance (repeatable)")
    p.add_argument("--paired-sentence", default=None, metavar="cer,wer",
                   help="--paired also on these corpus-level metrics, as the mean per-sentence difference")
    args = p.parse_args(argv)
    labels = {}
    for item in args.label:
        if "=" not in item:
            p.error(f"--label wants SYSTEM=LABEL, got {item!r}")
        k, v = item.split("=", 1)
        labels[k] = v
    try:
        rows = collect(args.reports, _csv(args.systems))
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    columns = _csv(args.columns) or list(DEFAULT_COLUMNS)
    sys.stdout.write(to_markdown(rows, columns, labels, ci=args.ci))
    if args.paired:
        lines = ["", "| paired | metric | difference [95 % interval] | A larger on |", "|---|---|---|---|"]
        try:
            for pair in args.paired:
                a, _, b = pair.partition(",")
                if not a or not b:
                    p.error(f"--paired wants A,B, got {pair!r}")
                lines += paired_rows(args.reports, a.strip(), b.strip(), columns, _csv(args.paired_sentence) or ())
        except ReportError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

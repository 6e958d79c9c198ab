"""How much one text varies across its renditions in a corpus (the varied corpus of data_prep.prosody).

    python -m data_prep.variability --data data/slt_varied [--out docs/results/multimodality/variability.json]

For every text with two or more renditions (utterances grouped by data_prep.festival_corpus.text_group)
it measures, from the wav lengths and the cached frame F0 of data_prep.features:
    duration spread   std over renditions of the total duration (s), and that std / mean (%)
    F0 level spread   std over renditions of each rendition's mean log-F0 over voiced frames, in cents
    F0 range spread   std over renditions of each rendition's std of log-F0 (cents)
and reports the median and the 10th/90th percentiles over texts. A deterministic corpus gives 0 for
all of them (one rendering per text); the point of the varied corpus is that these are large.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from data_prep.atomic import write_json_atomic
from data_prep.corpus import CorpusError, load_features, read_corpus_info, read_metadata, read_segments
from data_prep.festival_corpus import text_group

CENTS_PER_OCTAVE = 1200.0


@dataclass(frozen=True)
class Rendition:
    id: str
    seconds: float
    mean_log2_f0: float  # over voiced frames
    std_log2_f0: float


@dataclass(frozen=True)
class Spread:
    """Per-text spreads, summarised over texts."""

    median: float
    p10: float
    p90: float
    mean: float


def summarise(values: list[float]) -> Spread:
    v = np.asarray(values, dtype=np.float64)
    return Spread(median=round(float(np.median(v)), 4), p10=round(float(np.percentile(v, 10)), 4),
                  p90=round(float(np.percentile(v, 90)), 4), mean=round(float(v.mean()), 4))


def rendition(data: Path, utt_id: str) -> Rendition:
    seg = read_segments(data, utt_id)
    pitch = load_features(data, utt_id).pitch.numpy()
    voiced = pitch[pitch > 0]
    if voiced.size == 0:
        raise CorpusError(f"{utt_id}: no voiced frame in the cached pitch")
    log2 = np.log2(voiced.astype(np.float64))
    return Rendition(id=utt_id, seconds=seg.n_samples / seg.sample_rate, mean_log2_f0=float(log2.mean()),
                     std_log2_f0=float(log2.std()))


def measure(data: Path, limit: int | None = None) -> dict[str, object]:
    groups: dict[str, list[str]] = {}
    for utt in read_metadata(data):
        groups.setdefault(text_group(utt.id), []).append(utt.id)
    repeated = [ids for ids in groups.values() if len(ids) >= 2][:limit]
    if not repeated:
        raise CorpusError(f"{data}: no text has two or more renditions (is it a --prosody-variation corpus?)")
    dur_std, dur_rel, f0_level, f0_range = [], [], [], []
    for ids in repeated:
        rs = [rendition(data, i) for i in ids]
        secs = np.array([r.seconds for r in rs])
        dur_std.append(float(secs.std()))
        dur_rel.append(float(secs.std() / secs.mean() * 100))
        f0_level.append(float(np.std([r.mean_log2_f0 for r in rs]) * CENTS_PER_OCTAVE))
        f0_range.append(float(np.std([r.std_log2_f0 for r in rs]) * CENTS_PER_OCTAVE))
    info = read_corpus_info(data)
    return {
        "data": str(data),
        "corpus": info.get("name"),
        "prosody_variation": info.get("prosody_variation"),
        "n_texts": len(repeated),
        "renditions_per_text": sorted({len(ids) for ids in repeated}),
        "duration_std_s": asdict(summarise(dur_std)),
        "duration_std_percent_of_mean": asdict(summarise(dur_rel)),
        "mean_f0_std_cents": asdict(summarise(f0_level)),
        "f0_range_std_cents": asdict(summarise(f0_range)),
        "definition": "per text: std over its renditions (population std); summarised over texts",
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    ap.add_argument("--limit", type=int, default=None, help="only the first N repeated texts")
    args = ap.parse_args(argv)
    try:
        report = measure(args.data, args.limit)
    except (CorpusError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["command"] = "python -m data_prep.variability " + " ".join(sys.argv[1:] if argv is None else argv)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How close the shipped voice's word timestamps lie to where a human-paced reading puts the words (issue 36):
the held-out test sentences of a corpus, each synthesised with timestamps (the default runtime, as a user
runs it), against the Festival segmentation of the same sentence's recording (data/slt/segments).

This measures the voice's predicted timing against the recording's, the error a subtitle made from our
timestamps would have on the recording (its pace and pauses are not ours: errors grow along a sentence); and,
with each sentence's pace fitted out (the recording's boundaries regressed on ours by a line per sentence), how
well the words sit relative to each other.  On our own audio the timestamps are exact by construction (a word is
its phones' frames: tests/test_pipeline.py).  Words are paired by their text (difflib), so that a sentence the
normaliser reads differently from Festival loses only the words that differ.

    python -m recipes.bench.word_timing --data data/slt --out docs/results/timestamps
"""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path

import numpy as np

from tts.data.corpus import read_metadata, read_segments, read_split
from tts.durations import word_spans_from_segments


def festival_words(data: Path, uid: str) -> list[tuple[str, float, float]]:
    """(word, start s, end s) of the recording, from Festival's phone segments."""
    seg = read_segments(data, uid)
    spans = word_spans_from_segments(seg.segments)
    names = [s.word for k, s in enumerate(seg.segments) if s.word is not None
             and (k == 0 or seg.segments[k - 1].word != s.word)]
    if len(names) != len(spans):  # one word name per run of phones
        raise ValueError(f"{uid}: {len(names)} word names for {len(spans)} word spans")
    return [(str(name).lower(), a, b) for name, (a, b) in zip(names, spans)]


def _key(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalnum())


def measure(data: Path, limit: int | None, runtime: str) -> dict:
    from tts.runtime.release import open_pipeline

    pipeline = open_pipeline(None, None, None, runtime, "cpu", None, 1, None)
    texts = {u.id: u.text for u in read_metadata(data)}
    uids = read_split(data, "test")[:limit]
    start_err: list[float] = []
    end_err: list[float] = []
    fitted_err: list[float] = []  # boundaries after each sentence's line fit (pace and offset removed)
    ours_total = ref_total = 0
    for uid in uids:
        result = pipeline.synthesize(texts[uid], pipeline.controls(), batch_size=1, timestamps=True)
        ours = [(_key(w.word), w.start_s, w.end_s) for w in result.words]
        ref = [(_key(w), a, b) for w, a, b in festival_words(data, uid)]
        ours_total, ref_total = ours_total + len(ours), ref_total + len(ref)
        matcher = difflib.SequenceMatcher(a=[w for w, _, _ in ours], b=[w for w, _, _ in ref], autojunk=False)
        mine, theirs = [], []
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                (_, a0, a1), (_, b0, b1) = ours[block.a + k], ref[block.b + k]
                start_err.append(abs(a0 - b0) * 1000)
                end_err.append(abs(a1 - b1) * 1000)
                mine += [a0, a1]
                theirs += [b0, b1]
        if len(mine) >= 4:
            slope, offset = np.polyfit(mine, theirs, 1)
            fitted_err += list(np.abs(slope * np.array(mine) + offset - np.array(theirs)) * 1000)
    both = np.array(start_err + end_err)
    return {
        "corpus": str(data), "split": "test", "sentences": len(uids), "runtime": pipeline.engine.name,
        "words_ours": ours_total, "words_reference": ref_total, "words_paired": len(start_err),
        "boundary_error_ms": {"median": float(np.median(both)), "p90": float(np.percentile(both, 90)),
                              "mean": float(both.mean())},
        "start_error_ms": {"median": float(np.median(start_err)), "p90": float(np.percentile(start_err, 90))},
        "end_error_ms": {"median": float(np.median(end_err)), "p90": float(np.percentile(end_err, 90))},
        "pace_fitted_boundary_error_ms": {"median": float(np.median(fitted_err)),
                                          "p90": float(np.percentile(fitted_err, 90))},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.bench.word_timing", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("data/slt"))
    p.add_argument("--limit", type=int, default=None, help="first N test sentences (default: all)")
    p.add_argument("--runtime", default="auto", choices=["auto", "torch", "onnx"])
    p.add_argument("--out", type=Path, default=None, help="folder for word_timing.json")
    args = p.parse_args(argv)
    report = measure(args.data, args.limit, args.runtime)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "word_timing.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

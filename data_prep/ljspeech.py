"""Prepare a real LJSpeech-1.1 folder in the project's corpus layout (no audio is copied).

    python -m data_prep.ljspeech --src LJSpeech-1.1 --out data/ljspeech

Checks: the folder, metadata.csv (`|`-separated, 3 fields, read with quoting off since texts contain
`"`), and that every listed wavs/ID.wav exists and is 22 050 Hz mono. Writes OUT/metadata.csv,
OUT/wavs (a symlink to SRC/wavs), OUT/splits/{train,val,test}.txt (data_prep.splits, same hash rule as
the Festival corpus) and OUT/corpus.json. Any problem is a `CorpusError` naming the path.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import soundfile as sf

from data_prep.atomic import write_json_atomic
from data_prep.corpus import CorpusError, Utterance, parse_metadata, write_metadata
from data_prep.splits import SplitConfig, write_splits

SAMPLE_RATE = 22050
MAX_LISTED_PROBLEMS = 5


def validate_ljspeech(src: Path) -> tuple[list[Utterance], float]:
    """Return (utterances, total seconds) of a valid LJSpeech folder, or raise CorpusError."""
    if not src.is_dir():
        raise CorpusError(f"LJSpeech folder not found: {src}")
    utts = parse_metadata(src / "metadata.csv")
    wav_dir = src / "wavs"
    if not wav_dir.is_dir():
        raise CorpusError(f"LJSpeech wav folder not found: {wav_dir}")
    problems: list[str] = []
    seconds = 0.0
    for u in utts:
        wav = wav_dir / f"{u.id}.wav"
        if not wav.is_file():
            problems.append(f"missing {wav}")
            continue
        try:
            info = sf.info(str(wav))
        except Exception as e:  # soundfile's LibsndfileError / RuntimeError
            problems.append(f"unreadable {wav}: {e}")
            continue
        if info.samplerate != SAMPLE_RATE or info.channels != 1:
            problems.append(f"{wav}: {info.samplerate} Hz, {info.channels} channel(s); expected {SAMPLE_RATE} Hz mono")
            continue
        seconds += info.frames / info.samplerate
    if problems:
        shown = "\n  ".join(problems[:MAX_LISTED_PROBLEMS])
        more = f"\n  ... and {len(problems) - MAX_LISTED_PROBLEMS} more" if len(problems) > MAX_LISTED_PROBLEMS else ""
        raise CorpusError(f"{len(problems)} problem(s) in LJSpeech folder {src}:\n  {shown}{more}")
    return utts, seconds


def prepare_ljspeech(src: Path, out: Path, split_config: SplitConfig = SplitConfig()) -> dict[str, object]:
    src, out = Path(src).resolve(), Path(out).resolve()
    if src == out:
        raise CorpusError(f"--out must differ from --src ({src}): metadata.csv there would be overwritten")
    utts, seconds = validate_ljspeech(src)
    out.mkdir(parents=True, exist_ok=True)
    link = out / "wavs"
    if link.is_symlink():
        if link.resolve() != (src / "wavs").resolve():
            link.unlink()  # pointed at an older copy of the corpus
    elif link.exists():
        raise CorpusError(f"{link} exists and is not a symlink; remove it or choose another --out")
    if not link.is_symlink():
        os.symlink(src / "wavs", link, target_is_directory=True)
    write_metadata(out, utts)
    sizes = write_splits(out, [u.id for u in utts], split_config)
    info = {
        "name": "ljspeech",
        "builder": "data_prep.ljspeech",
        "source": str(src),
        "metadata_sha256": hashlib.sha256((src / "metadata.csv").read_bytes()).hexdigest(),
        "n_utterances": len(utts),
        "hours": round(seconds / 3600, 4),
        "sample_rate": SAMPLE_RATE,
        "wavs": f"symlink to {src / 'wavs'}",
        "splits": {**split_config.to_dict(), "sizes": sizes},
    }
    write_json_atomic(out / "corpus.json", info)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="validate LJSpeech-1.1 and write splits/corpus.json")
    ap.add_argument("--src", type=Path, required=True, help="the LJSpeech-1.1 folder (metadata.csv, wavs/)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        info = prepare_ljspeech(args.src, args.out)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"ljspeech {args.out}: {info['n_utterances']} utterances, {info['hours']} h, splits {info['splits']['sizes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

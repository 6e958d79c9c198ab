"""A compact copy of a corpus for a remote GPU run (only the working tree travels there, 64 MiB):
FLAC audio, pitch-only feature files (the source-filter vocoder's F0 targets, so that pyworld is not
needed there), metadata and splits, for the first N train and M val utterances.

    python scripts/make_device_shard.py --data data/slt --out gpu_shard/slt --max-mb 19 \
        --tts-out gpu_shard/tts --tts 100 --durations data/slt/durations/festival

`--tts-out`: also a small corpus for the acoustic recipes (first N train + the val utterances of the
vocoder shard: full features, durations, and the FLAC files as relative symlinks into --out).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import soundfile as sf
import torch

from tts.data.corpus import load_features
from tts.data.features import FEATURE_VERSION, PITCH_CONFIG


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-mb", type=float, default=24.0, help="stop adding train utterances past this size")
    ap.add_argument("--val", type=int, default=8)
    ap.add_argument("--tts-out", type=Path, default=None)
    ap.add_argument("--tts", type=int, default=100)
    ap.add_argument("--durations", type=Path, default=None)
    args = ap.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    (args.out / "wavs").mkdir(parents=True)
    (args.out / "features").mkdir()
    (args.out / "splits").mkdir()
    splits = {name: (args.data / "splits" / f"{name}.txt").read_text().split() for name in ("train", "val")}
    meta = {line.split("|", 1)[0]: line for line in (args.data / "metadata.csv").read_text().splitlines()}
    total, kept = 0, {"train": [], "val": []}
    for name, limit in (("val", args.val), ("train", None)):
        for utt in splits[name]:
            if (limit is not None and len(kept[name]) >= limit) or total > args.max_mb * 1e6:
                break
            wave, sr = sf.read(args.data / "wavs" / f"{utt}.wav", dtype="int16")
            flac = args.out / "wavs" / f"{utt}.flac"
            sf.write(flac, wave, sr, format="FLAC", subtype="PCM_16")
            feats = load_features(args.data, utt)
            torch.save({"pitch": feats.pitch, "mel_config": feats.mel_config.to_dict(), "pitch_config": PITCH_CONFIG,
                        "n_samples": feats.n_samples, "version": FEATURE_VERSION}, args.out / "features" / f"{utt}.pt")
            total += flac.stat().st_size + (args.out / "features" / f"{utt}.pt").stat().st_size
            kept[name].append(utt)
    for name, ids in kept.items():
        (args.out / "splits" / f"{name}.txt").write_text("\n".join(ids) + "\n")
    (args.out / "splits" / "test.txt").write_text("")
    (args.out / "metadata.csv").write_text("\n".join(meta[u] for ids in kept.values() for u in ids) + "\n")
    print(f"{len(kept['train'])} train + {len(kept['val'])} val utterances, {total / 1e6:.1f} MB -> {args.out}")
    if args.tts_out is not None:
        tts_shard(args, {"train": kept["train"][: args.tts], "val": kept["val"]}, meta)


def tts_shard(args: argparse.Namespace, kept: dict[str, list[str]], meta: dict[str, str]) -> None:
    out = args.tts_out
    if out.exists():
        shutil.rmtree(out)
    dur_out = out / "durations" / "festival"
    for d in (out / "wavs", out / "features", out / "splits", dur_out):
        d.mkdir(parents=True)
    for utt in (u for ids in kept.values() for u in ids):
        (out / "wavs" / f"{utt}.flac").symlink_to(Path("..") / ".." / args.out.name / "wavs" / f"{utt}.flac")
        shutil.copy(args.data / "features" / f"{utt}.pt", out / "features" / f"{utt}.pt")
        if args.durations is not None:
            shutil.copy(args.durations / f"{utt}.npy", dur_out / f"{utt}.npy")
    shutil.copy(args.data / "features" / "stats.json", out / "features" / "stats.json")
    for name, ids in kept.items():
        (out / "splits" / f"{name}.txt").write_text("\n".join(ids) + "\n")
    (out / "splits" / "test.txt").write_text("")
    (out / "metadata.csv").write_text("\n".join(meta[u] for ids in kept.values() for u in ids) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    print(f"tts shard: {len(kept['train'])} train + {len(kept['val'])} val, {size / 1e6:.1f} MB -> {out}")


if __name__ == "__main__":
    main()

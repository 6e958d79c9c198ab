"""Checks of a training corpus made before anything is built: each failure is one line naming the command
that makes what is missing (the order a new user meets them in: corpus, features, durations)."""

from __future__ import annotations

from pathlib import Path

from tts.data.corpus import CorpusError, read_split
from tts.training.cli import UsageError

# the splits a training run reads (tts.data.datamodule: train and val)
TRAINING_SPLITS = ("train", "val")


class MissingDataError(UsageError):
    """A corpus, its features or its durations are not there yet."""


def require_corpus(root: str | Path, features: bool = True) -> None:
    """metadata.csv, the splits and (`features`) the features of every train/val utterance (data_prep.features)."""
    root = Path(root)
    if not (root / "metadata.csv").is_file():
        raise MissingDataError(
            f"{root} is not a corpus (no metadata.csv): build one with python -m data_prep.festival_corpus "
            f"--n 10500 --short --out {root}, or python -m data_prep.ljspeech --src LJSpeech-1.1 --out {root} "
            f"(or point data.root at yours)")
    if features and not (root / "features" / "stats.json").is_file():
        raise MissingDataError(f"{root} has no features yet: python -m data_prep.features --data {root}")
    for split in TRAINING_SPLITS:
        try:
            ids = read_split(root, split)
        except CorpusError as e:
            raise MissingDataError(f"{e} (the corpus builders write splits/)") from e
        needed = [root / "features" / f"{uid}.pt" for uid in ids] if features else [root / "wavs" / f"{uid}.wav" for uid in ids]
        missing = [p.stem for p in needed if not p.is_file()]
        if missing:
            if not features:
                raise MissingDataError(f"{root}: wavs missing for {len(missing)} of {len(ids)} {split} utterances "
                                       f"(e.g. {missing[0]}): rebuild the corpus (its builders are resumable)")
            raise MissingDataError(f"{root}: features missing for {len(missing)} of {len(ids)} {split} utterances "
                                   f"(e.g. {missing[0]}): python -m data_prep.features --data {root} (resumable)")


# source of durations -> (side folder in the corpus that it reads, default durations folder name), as
# recipes.extract_durations names them (conf/extract_durations.yaml)
DURATION_SOURCES = {"festival": ("segments", "festival"), "piper": ("alignments", "piper")}
TEACHER_NAME = "ar_teacher"


def extract_durations_command(root: str | Path, durations_dir: str | Path) -> str:
    """The recipes.extract_durations command that writes `durations_dir` for the corpus at `root`: from the
    corpus's own alignments when it has them (Festival segments, Piper alignments), else from an AR teacher."""
    root, durations_dir = Path(root), Path(durations_dir)
    source, default_name = next(((s, name) for s, (side, name) in DURATION_SOURCES.items() if (root / side).is_dir()),
                                ("teacher", TEACHER_NAME))
    args = [f"source={source}"] if source != "teacher" else ["checkpoint=AR_CHECKPOINT"]
    args.append(f"data_root={root}")
    if durations_dir.parent != root / "durations":
        args.append(f"out_dir={durations_dir}")
    elif durations_dir.name != default_name:
        args.append(f"name={durations_dir.name}")
    command = "python -m recipes.extract_durations " + " ".join(args)
    if source == "teacher":
        command += (" (AR_CHECKPOINT: an AR trained on this corpus, python -m recipes.train experiment=ar_cpu_small "
                    f"data.root={root}, or the shipped checkpoints/ar.pt)")
    return command


def require_durations(root: str | Path, durations_dir: str | Path | None) -> None:
    """A durations file for every train/val utterance, or one line naming the command that writes them."""
    root = Path(root)
    if durations_dir is None:
        raise MissingDataError(f"this model trains on durations and data.durations_dir is null: set it to the "
                               f"folder {extract_durations_command(root, root / 'durations' / 'festival')} writes")
    durations_dir = Path(durations_dir)
    for split in TRAINING_SPLITS:
        ids = read_split(root, split)
        missing = [uid for uid in ids if not (durations_dir / f"{uid}.npy").is_file()]
        if missing:
            what = "no durations" if len(missing) == len(ids) else f"durations missing for {len(missing)} of {len(ids)} {split} utterances"
            raise MissingDataError(f"{durations_dir}: {what}; make them with "
                                   f"{extract_durations_command(root, durations_dir)}")

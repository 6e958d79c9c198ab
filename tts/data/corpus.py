"""A prepared corpus: its layout and readers (written by data_prep.festival_corpus / data_prep.ljspeech /
data_prep.piper_corpus through data_prep.corpus; the product owns the layout, data_prep writes it).

    DIR/metadata.csv            id|text|normalised text   (LJSpeech layout, no quoting, no header)
    DIR/wavs/ID.wav             22 050 Hz mono 16-bit
    DIR/splits/{train,val,test}.txt   one ID a line
    DIR/corpus.json             what built it
    DIR/segments/ID.json        Festival corpora only: phone segmentation (see `Segmentation`)
    DIR/features/ID.pt          after data_prep.features (see `Features`), plus features/stats.json

Every reader raises `CorpusError` naming the file when it is missing or malformed.  Nothing here imports
data_prep (data_prep imports the product, never the reverse).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported lazily: the corpus builder and readers do not need it
    import torch

    from tts.audio import MelConfig


SPLIT_NAMES = ("train", "val", "test")  # DIR/splits/NAME.txt (data_prep.splits assigns them)


class CorpusError(ValueError):
    """A corpus file is missing or malformed; the message names the path."""


@dataclass(frozen=True)
class Utterance:
    id: str
    text: str
    normalised_text: str


@dataclass(frozen=True)
class PhoneSegment:
    phone: str  # Festival phone (lowercase ARPAbet-like), "pau" for silence
    end: float  # end time in seconds; the last one equals the wav duration
    word: str | None  # the Festival word this phone belongs to, None for pauses


@dataclass(frozen=True)
class Segmentation:
    id: str
    text: str
    normalised_text: str
    words: list[str]  # Festival's word sequence (Token daughters that are words)
    segments: list[PhoneSegment]
    sample_rate: int
    n_samples: int  # of DIR/wavs/ID.wav

    @property
    def duration(self) -> float:
        return self.n_samples / self.sample_rate


@dataclass(frozen=True)
class Features:
    mel: torch.Tensor  # float32 [n_mels, T] natural-log mel (stored as float16)
    pitch: torch.Tensor  # float32 [T] Hz, 0 = unvoiced
    energy: torch.Tensor  # float32 [T] L2 norm of the linear STFT magnitude frame
    mel_config: MelConfig
    n_samples: int

    @property
    def n_frames(self) -> int:
        return int(self.mel.shape[-1])


# --- paths ---------------------------------------------------------------------------------------
def wav_path(data_dir: str | Path, utt_id: str) -> Path:
    """wavs/ID.wav; wavs/ID.flac where only that exists (a compact copy of a corpus, e.g. the shard a
    remote GPU run trains on: scripts/make_device_shard.py)."""
    wav = Path(data_dir) / "wavs" / f"{utt_id}.wav"
    if not wav.is_file():
        flac = wav.with_suffix(".flac")
        if flac.is_file():
            return flac
    return wav


def segments_path(data_dir: str | Path, utt_id: str) -> Path:
    return Path(data_dir) / "segments" / f"{utt_id}.json"


def features_path(data_dir: str | Path, utt_id: str) -> Path:
    return Path(data_dir) / "features" / f"{utt_id}.pt"


# --- metadata ------------------------------------------------------------------------------------
def parse_metadata(path: Path) -> list[Utterance]:
    """Parse an LJSpeech-style metadata.csv: `|`-separated, 3 fields, quoting off (texts contain `"`)."""
    if not path.is_file():
        raise CorpusError(f"metadata file not found: {path}")
    utts, seen = [], set()
    with open(path, encoding="utf-8", newline="") as f:
        for line_no, row in enumerate(csv.reader(f, delimiter="|", quoting=csv.QUOTE_NONE), start=1):
            if len(row) != 3:
                raise CorpusError(f"{path}:{line_no}: expected 3 '|'-separated fields (id|text|normalised), got {len(row)}")
            utt_id, text, norm = (x.strip() for x in row)
            if not utt_id or not text:
                raise CorpusError(f"{path}:{line_no}: empty id or text")
            if utt_id in seen:
                raise CorpusError(f"{path}:{line_no}: duplicate id {utt_id!r}")
            seen.add(utt_id)
            utts.append(Utterance(id=utt_id, text=text, normalised_text=norm or text))
    if not utts:
        raise CorpusError(f"metadata file is empty: {path}")
    return utts


def read_metadata(data_dir: str | Path) -> list[Utterance]:
    return parse_metadata(Path(data_dir) / "metadata.csv")


def read_split(data_dir: str | Path, name: str) -> list[str]:
    if name not in SPLIT_NAMES:
        raise CorpusError(f"unknown split {name!r}; expected one of {SPLIT_NAMES}")
    path = Path(data_dir) / "splits" / f"{name}.txt"
    if not path.is_file():
        raise CorpusError(f"split file not found: {path}")
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_corpus_info(data_dir: str | Path) -> dict[str, Any]:
    return _read_json(Path(data_dir) / "corpus.json")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise CorpusError(f"file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"corrupt JSON file {path}: {e}") from e


# --- segments ------------------------------------------------------------------------------------
def read_segments(data_dir: str | Path, utt_id: str) -> Segmentation:
    path = segments_path(data_dir, utt_id)
    d = _read_json(path)
    try:
        return Segmentation(
            id=d["id"],
            text=d["text"],
            normalised_text=d["normalised_text"],
            words=list(d["words"]),
            segments=[PhoneSegment(phone=s["phone"], end=float(s["end"]), word=s["word"]) for s in d["segments"]],
            sample_rate=int(d["sample_rate"]),
            n_samples=int(d["n_samples"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise CorpusError(f"malformed segments file {path}: {e!r}") from e


# --- features ------------------------------------------------------------------------------------
def load_features(data_dir: str | Path, utt_id: str, mel_config: MelConfig | None = None) -> Features:
    """Load DIR/features/ID.pt; with `mel_config`, a file made with another mel definition is an error
    (tts.audio.MelConfigMismatchError) rather than silently used."""
    import torch

    from tts.audio import MelConfig

    path = features_path(data_dir, utt_id)
    if not path.is_file():
        raise CorpusError(f"features file not found: {path} (run python -m data_prep.features --data {data_dir})")
    try:
        d = torch.load(path, map_location="cpu", weights_only=True)
        feats = Features(
            mel=d["mel"].float(),
            pitch=d["pitch"].float(),
            energy=d["energy"].float(),
            mel_config=MelConfig.from_dict(d["mel_config"]),
            n_samples=int(d["n_samples"]),
        )
    except Exception as e:  # torch raises many types for truncated/corrupt pickles
        raise CorpusError(f"corrupt features file {path}: {e!r}") from e
    if mel_config is not None:
        mel_config.check_compatible(feats.mel_config, "requested mel config", str(path))
    return feats

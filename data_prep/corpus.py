"""Writing a prepared corpus, and its readers for data_prep's builders.

The layout (DIR/metadata.csv, wavs/, splits/, segments/, features/) and its readers are the product's:
`tts.data.corpus`, which the dataset, the vocoder data and the listening build read.  data_prep imports
them from there (never the reverse) and adds the writer; its builders read and write through this module.
"""

from __future__ import annotations

from pathlib import Path

from data_prep.atomic import write_text_atomic
from tts.data.corpus import (  # noqa: F401  (the readers, for data_prep's builders)
    SPLIT_NAMES,
    CorpusError,
    Features,
    PhoneSegment,
    Segmentation,
    Utterance,
    features_path,
    load_features,
    parse_metadata,
    read_corpus_info,
    read_metadata,
    read_segments,
    read_split,
    segments_path,
    wav_path,
)


def write_metadata(data_dir: str | Path, utts: list[Utterance]) -> None:
    for u in utts:
        for field in (u.id, u.text, u.normalised_text):
            if "|" in field or "\n" in field:
                raise CorpusError(f"utterance {u.id!r}: '|' or newline in {field!r}")
    write_text_atomic(
        Path(data_dir) / "metadata.csv", "".join(f"{u.id}|{u.text}|{u.normalised_text}\n" for u in utts)
    )

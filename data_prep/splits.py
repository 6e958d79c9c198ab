"""Deterministic train/val/test splits by a hash of the utterance ID.

Each ID maps to u = sha1(ID) / 2**64 in [0, 1): u < test_fraction -> test, u < test_fraction +
val_fraction -> val, else train. An ID's split depends only on the ID, so it is stable as the corpus
grows (a test utterance of a 6,000-utterance build is still test in a 10,000 one) and never depends
on the order or number of other IDs.

Tiny-corpus rule (fixtures): when hashing leaves val or test with fewer than
`min(min_per_split, len(ids) // 3)` IDs, the train IDs with the smallest u are moved to test, then
the next ones to val, until both reach it. For any corpus of a few thousand utterances the rule never
fires (expected test size 2 % of N), so large-corpus splits stay purely hash-based.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from data_prep.atomic import write_text_atomic
from tts.data.corpus import SPLIT_NAMES


@dataclass(frozen=True)
class SplitConfig:
    test_fraction: float = 0.02
    val_fraction: float = 0.01
    min_per_split: int = 2

    def __post_init__(self) -> None:
        if not (0 <= self.test_fraction and 0 <= self.val_fraction and self.test_fraction + self.val_fraction < 1):
            raise ValueError(f"bad split fractions test={self.test_fraction} val={self.val_fraction}")

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "test_fraction": self.test_fraction,
            "val_fraction": self.val_fraction,
            "min_per_split": self.min_per_split,
            "rule": "sha1(id) / 2**64 < test_fraction -> test; < test+val -> val; else train; "
            "tiny corpora: lowest-hash train ids topped up into test then val",
        }


def split_hash(utt_id: str) -> float:
    """u in [0, 1) from the first 8 bytes of sha1(ID)."""
    return int.from_bytes(hashlib.sha1(utt_id.encode()).digest()[:8], "big") / 2**64


def assign_splits(ids: list[str], config: SplitConfig = SplitConfig(),
                  group: Callable[[str], str] | None = None) -> dict[str, list[str]]:
    """{"train": [...], "val": [...], "test": [...]}, each sorted, disjoint, covering `ids`.

    `group` maps an ID to the key that is hashed (default: the ID itself). IDs with the same key always
    land in the same split, so several renditions of one text (data_prep.festival_corpus
    --prosody-variation) are held out together, never one heard in training and another in test.
    """
    key = group or (lambda utt_id: utt_id)
    members: dict[str, list[str]] = {}
    for utt_id in ids:
        members.setdefault(key(utt_id), []).append(utt_id)
    keys = list(members)
    splits: dict[str, list[str]] = {name: [] for name in SPLIT_NAMES}
    for k in keys:
        u = split_hash(k)
        if u < config.test_fraction:
            splits["test"].append(k)
        elif u < config.test_fraction + config.val_fraction:
            splits["val"].append(k)
        else:
            splits["train"].append(k)
    need = min(config.min_per_split, len(keys) // 3)
    spare = sorted(splits["train"], key=split_hash)  # closest to the held-out hash range first
    for name in ("test", "val"):
        while len(splits[name]) < need and spare:
            moved = spare.pop(0)
            splits["train"].remove(moved)
            splits[name].append(moved)
    return {name: sorted(i for k in v for i in members[k]) for name, v in splits.items()}


def write_splits(out_dir: Path, ids: list[str], config: SplitConfig = SplitConfig(),
                 group: Callable[[str], str] | None = None) -> dict[str, int]:
    """Write out_dir/splits/{train,val,test}.txt (one ID a line); returns the sizes."""
    splits = assign_splits(ids, config, group)
    for name, members in splits.items():
        write_text_atomic(out_dir / "splits" / f"{name}.txt", "".join(f"{i}\n" for i in members))
    return {name: len(members) for name, members in splits.items()}

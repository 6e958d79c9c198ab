"""Dataset over a corpus in LJSpeech layout with cached features (see data_prep/)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

import soundfile as sf

from tts.audio import MelConfig
from tts.data.batch import Batch
from tts.data.corpus import CorpusError, load_features, read_metadata, read_split, wav_path
from tts.durations import leading_pause_cut
from tts.text import TextFrontend

log = logging.getLogger(__name__)


@dataclass
class Item:
    id: str
    text: str
    tokens: torch.Tensor  # [L] long
    mel: torch.Tensor  # [M, T] float32 raw log-mel
    pitch: torch.Tensor  # [T] Hz, 0 = unvoiced
    energy: torch.Tensor  # [T]
    durations: torch.Tensor | None  # [L] long, sums to T


class TTSDataset(Dataset[Item]):
    """One split of a prepared corpus.

    Token ids come from `frontend` and are cached on disk under `root/cache/`, keyed by the frontend's
    description, so a changed frontend never reuses stale ids.  Features must have been extracted
    with the same mel config (`data_prep.features`); a mismatch is an error, not a silent resample.
    """

    def __init__(
        self,
        root: str | Path,
        split: str,
        frontend: TextFrontend,
        mel_config: MelConfig,
        durations_dir: str | Path | None = None,
        max_frames: int | None = None,
        lead_pause_frames: int | None = None,
    ) -> None:
        # lead_pause_frames: with durations, cut each utterance's leading pause to this many frames (mel, pitch,
        # energy and the first token's duration alike; tts.durations.leading_pause_cut says why); None keeps it
        if lead_pause_frames is not None and lead_pause_frames < 0:
            raise ValueError(f"lead_pause_frames must be >= 0 or None, got {lead_pause_frames}")
        if lead_pause_frames is not None and durations_dir is None:
            raise ValueError("lead_pause_frames needs durations (durations_dir): the cut is taken from the first token")
        self.lead_pause_frames = lead_pause_frames
        self.root = Path(root)
        self.split = split
        self.mel_config = mel_config
        self.durations_dir = Path(durations_dir) if durations_dir is not None else None
        meta = {u.id: u for u in read_metadata(self.root)}
        ids = read_split(self.root, split)
        unknown = [i for i in ids if i not in meta]
        if unknown:
            raise CorpusError(f"split {split} of {self.root} names ids missing from metadata.csv: {unknown[:5]}")
        self.texts = {i: meta[i].text for i in ids}
        self.tokens = self._encode_all(frontend, ids)
        self.ids = [i for i in ids if i in self.tokens]
        self.n_frames = self._frame_counts()
        if max_frames is not None:
            kept = [i for i in self.ids if self.n_frames[i] <= max_frames]
            if len(kept) < len(self.ids):
                log.info("%s: dropped %d utterances longer than %d frames", split, len(self.ids) - len(kept), max_frames)
            self.ids = kept
        if not self.ids:
            raise CorpusError(f"split {split} of {self.root} has no usable utterances")

    # --- cached derived data --------------------------------------------------------------------
    def _cache_path(self, frontend: TextFrontend) -> Path:
        key = hashlib.sha1(json.dumps(frontend.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
        return self.root / "cache" / f"tokens-{self.split}-{key}.json"

    def _encode_all(self, frontend: TextFrontend, ids: list[str]) -> dict[str, list[int]]:
        path = self._cache_path(frontend)
        cached: dict[str, list[int]] = {}
        if path.is_file():
            try:
                cached = json.loads(path.read_text())
            except json.JSONDecodeError:
                log.warning("ignoring corrupt token cache %s", path)
        todo = [i for i in ids if i not in cached or cached[i] is None]
        for i in todo:
            try:
                cached[i] = frontend.encode(self.texts[i])
            except ValueError as e:  # TextError: documented skip, the corpus keeps going
                log.warning("skipping %s: %s", i, e)
                cached[i] = None
        if todo:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a temp name per process: DDP ranks (and parallel jobs) encode the same split at once, and
            # a shared temp name would let one rank rename another's half-written file into place
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            try:
                tmp.write_text(json.dumps(cached))
                os.replace(tmp, path)
            finally:
                tmp.unlink(missing_ok=True)
        return {i: cached[i] for i in ids if cached.get(i)}

    def _frame_counts(self) -> dict[str, int]:
        """Frames per utterance, derived from the wav headers (1 + N // hop), without loading audio."""
        counts = {}
        for i in self.ids:
            path = wav_path(self.root, i)
            try:
                counts[i] = self.mel_config.n_frames(sf.info(str(path)).frames)
            except Exception as e:
                raise CorpusError(f"cannot read audio header of {path}: {e}") from e
        return counts

    def lengths(self) -> list[int]:
        """Mel frames per item, in index order (for the length-bucketing sampler)."""
        return [self.n_frames[i] for i in self.ids]

    # --- items -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> Item:
        uid = self.ids[index]
        feats = load_features(self.root, uid, self.mel_config)
        mel = feats.mel
        tokens = torch.tensor(self.tokens[uid], dtype=torch.long)
        durations = None
        if self.durations_dir is not None:
            durations = load_durations(self.durations_dir, uid, n_tokens=len(tokens), n_frames=mel.shape[-1])
        pitch, energy = feats.pitch, feats.energy
        if durations is not None and self.lead_pause_frames is not None:
            cut = leading_pause_cut(durations.numpy(), energy.numpy(), self.lead_pause_frames)
            if cut:
                mel, pitch, energy = mel[:, cut:], pitch[cut:], energy[cut:]
                durations = durations.clone()
                durations[0] -= cut
        return Item(uid, self.texts[uid], tokens, mel, pitch, energy, durations)


def load_durations(durations_dir: Path, uid: str, n_tokens: int, n_frames: int) -> torch.Tensor:
    """Integer frames per token from `durations_dir/ID.npy`, checked against tokens and mel length."""
    path = durations_dir / f"{uid}.npy"
    if not path.is_file():
        raise CorpusError(f"durations missing for {uid}: {path}")
    d = np.load(path)
    if d.ndim != 1 or len(d) != n_tokens:
        raise CorpusError(f"{path}: {d.shape} durations for {n_tokens} tokens (stale durations for another frontend?)")
    if int(d.sum()) != n_frames or (d < 0).any():
        raise CorpusError(f"{path}: durations sum to {int(d.sum())}, mel has {n_frames} frames")
    return torch.from_numpy(d.astype(np.int64))


class Collate:
    """list[Item] -> padded Batch; mels padded with the mel config's log floor (silence)."""

    def __init__(self, mel_pad_value: float) -> None:
        self.mel_pad_value = mel_pad_value

    def __call__(self, items: list[Item]) -> Batch:
        b = len(items)
        token_lengths = torch.tensor([len(it.tokens) for it in items], dtype=torch.long)
        mel_lengths = torch.tensor([it.mel.shape[-1] for it in items], dtype=torch.long)
        n_mels = items[0].mel.shape[0]
        L, T = int(token_lengths.max()), int(mel_lengths.max())
        tokens = torch.zeros(b, L, dtype=torch.long)
        mels = torch.full((b, n_mels, T), self.mel_pad_value)
        pitch = torch.zeros(b, T)
        energy = torch.zeros(b, T)
        has_dur = all(it.durations is not None for it in items)
        durations = torch.zeros(b, L, dtype=torch.long) if has_dur else None
        for k, it in enumerate(items):
            tokens[k, : len(it.tokens)] = it.tokens
            t = it.mel.shape[-1]
            mels[k, :, :t] = it.mel
            pitch[k, :t] = it.pitch
            energy[k, :t] = it.energy
            if durations is not None:
                durations[k, : len(it.durations)] = it.durations
        return Batch(
            ids=[it.id for it in items],
            texts=[it.text for it in items],
            tokens=tokens,
            token_lengths=token_lengths,
            mels=mels,
            mel_lengths=mel_lengths,
            pitch=pitch,
            energy=energy,
            durations=durations,
        )

"""Vocoder training data: random frame-aligned (mel, wave) segments and full validation utterances.

Alignment.  The mel of an utterance of N samples has T = 1 + N // hop frames (center=True), and a
vocoder turns T frames into T * hop samples, frame t owning samples [t*hop, (t+1)*hop).  So the wave is
zero-padded to T * hop samples, the mel is computed on the *whole* utterance (exactly what the vocoder
sees at inference, including the reflect padding at the utterance edges), and a segment of S frames
starting at frame f is paired with samples [f*hop, (f+S)*hop).

Frame F0 (`with_pitch`, for the source-filter vocoder's F0/voicing supervision and its teacher-forced
oscillator): float [S] Hz, 0 = unvoiced, frame t at sample t * hop -- from the corpus's feature cache
(`tts.data.features`, DIR/features/ID.pt) when it is current for this mel config, else computed the
same way (pyworld dio + stonemask) on the fly.

Teacher-forced fine-tuning (`mel_dir`): instead of ground-truth mels, read `mel_dir/ID.pt` (a tensor,
or a dict with key "mel") or `mel_dir/ID.npy`, float [n_mels, T] raw natural-log mel of the SAME mel
config, with T == 1 + N // hop for the utterance's wav of N samples (teacher forcing gives exactly the
ground-truth frame count; any other length is an error, never a silent stretch).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset

from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.data.corpus import wav_path


class VocoderDataError(ValueError):
    """Missing split, missing/ill-shaped teacher-forced mel, ..."""


def read_split_ids(root: Path, split: str) -> list[str]:
    path = root / "splits" / f"{split}.txt"
    if not path.is_file():
        raise VocoderDataError(f"split file not found: {path}")
    ids = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not ids:
        raise VocoderDataError(f"split file {path} is empty")
    return ids


def load_mel_file(mel_dir: Path, utt_id: str, n_mels: int) -> torch.Tensor:
    """Teacher-forced mel `ID.pt` / `ID.npy` -> float32 [n_mels, T] (format in the module docstring)."""
    pt, npy = mel_dir / f"{utt_id}.pt", mel_dir / f"{utt_id}.npy"
    if pt.is_file():
        obj = torch.load(pt, map_location="cpu", weights_only=True)
        mel = obj["mel"] if isinstance(obj, dict) else obj
    elif npy.is_file():
        mel = torch.from_numpy(np.load(npy))
    else:
        raise VocoderDataError(f"no teacher-forced mel for {utt_id}: expected {pt} or {npy}")
    if not isinstance(mel, torch.Tensor) or mel.dim() != 2 or mel.shape[0] != n_mels:
        shape = tuple(mel.shape) if isinstance(mel, torch.Tensor) else type(mel).__name__
        raise VocoderDataError(f"{utt_id}: teacher-forced mel must be [n_mels={n_mels}, T], got {shape}")
    return mel.float()


@dataclass
class VocoderItem:
    id: str
    mel: torch.Tensor  # [M, S] raw log-mel
    wave: torch.Tensor  # [S * hop] float -1..1
    pitch: torch.Tensor | None = None  # [S] Hz, 0 = unvoiced (with_pitch only)


@dataclass
class VocoderBatch:
    ids: list[str]
    mels: torch.Tensor  # [B, M, S]
    waves: torch.Tensor  # [B, S * hop]
    mel_lengths: torch.Tensor  # [B] frames (all S for training segments)
    pitch: torch.Tensor | None = None  # [B, S] Hz, 0 = unvoiced or padding (with_pitch only)

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device | str) -> "VocoderBatch":
        pitch = None if self.pitch is None else self.pitch.to(device)
        return VocoderBatch(self.ids, self.mels.to(device), self.waves.to(device), self.mel_lengths.to(device), pitch)


def collate(items: list[VocoderItem], mel_pad_value: float, hop_length: int) -> VocoderBatch:
    """Pad to the longest item: mels [B, M, T] with the silent-frame value, waves [B, T * hop] with zeros."""
    t = max(i.mel.shape[-1] for i in items)
    hop = hop_length
    mels = torch.full((len(items), items[0].mel.shape[0], t), mel_pad_value)
    waves = torch.zeros(len(items), t * hop)
    for b, item in enumerate(items):
        mels[b, :, : item.mel.shape[-1]] = item.mel
        waves[b, : item.wave.shape[-1]] = item.wave
    lengths = torch.tensor([i.mel.shape[-1] for i in items], dtype=torch.long)
    pitch = None
    if items[0].pitch is not None:
        pitch = torch.zeros(len(items), t)
        for b, item in enumerate(items):
            pitch[b, : item.pitch.shape[-1]] = item.pitch
    return VocoderBatch([i.id for i in items], mels, waves, lengths, pitch)


class VocoderDataset(Dataset[VocoderItem]):
    """One split; `segment_frames=None` gives whole utterances (validation), else random segments."""

    def __init__(
        self,
        root: str | Path,
        split: str,
        mel_config: MelConfig,
        segment_frames: int | None,
        mel_dir: str | Path | None = None,
        max_utterances: int | None = None,
        with_pitch: bool = False,
        cache_in_memory: bool = False,
    ) -> None:
        self.root = Path(root)
        self.with_pitch = with_pitch
        # Small corpora: keep each decoded utterance (mel, wave, pitch) after its first load (per worker).
        self.cache_in_memory = cache_in_memory
        self._cache: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]] = {}
        self.mel_config = mel_config
        self.segment_frames = segment_frames
        self.mel_dir = Path(mel_dir) if mel_dir is not None else None
        if self.mel_dir is not None and not self.mel_dir.is_dir():
            raise VocoderDataError(f"mel_dir not found: {self.mel_dir}")
        self.ids = read_split_ids(self.root, split)[:max_utterances]
        self.mel = MelSpectrogram(mel_config)
        if with_pitch:
            from tts.data.features import corpus_pitch_config

            self.pitch_config = corpus_pitch_config(self.root)  # the corpus's tracker: its cache and any recompute

    def __len__(self) -> int:
        return len(self.ids)

    def _pitch(self, utt_id: str, wave: torch.Tensor, n_frames: int) -> torch.Tensor:
        """Frame F0 [T] Hz of the utterance: from the feature cache when its pitch was made the current
        way for this audio and frame grid (the mel and energy entries are not needed), else computed."""
        from tts.data.features import compute_pitch, pitch_is_current

        path = self.root / "features" / f"{utt_id}.pt"
        if path.is_file():
            try:
                d = torch.load(path, map_location="cpu", weights_only=True)
            except Exception:  # corrupt cache: recompute rather than fail a training run
                d = {}
            if pitch_is_current(d, self.mel_config, int(wave.shape[0]), self.pitch_config):
                return d["pitch"].float()
        return torch.from_numpy(compute_pitch(wave.numpy(), self.mel_config, n_frames, self.pitch_config))

    def _utterance(self, utt_id: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Whole utterance: mel [M, T] and wave [T * hop], T = 1 + N // hop."""
        c = self.mel_config
        if self.cache_in_memory and utt_id in self._cache:
            return self._cache[utt_id]
        wave = load_wav(wav_path(self.root, utt_id), c.sample_rate)  # [N]
        t = c.n_frames(wave.shape[0])
        if self.mel_dir is not None:
            mel = load_mel_file(self.mel_dir, utt_id, c.n_mels)
            if mel.shape[1] != t:
                raise VocoderDataError(
                    f"{utt_id}: teacher-forced mel has {mel.shape[1]} frames, but its wav of {wave.shape[0]} "
                    f"samples has {t} (1 + N // {c.hop_length}); mels must be aligned to the wav"
                )
        else:
            with torch.no_grad():
                mel = self.mel(wave[None])[0]  # [M, T]
        pitch = self._pitch(utt_id, wave, t) if self.with_pitch else None
        wave = torch.nn.functional.pad(wave, (0, c.n_samples(t) - wave.shape[0]))  # [T * hop]
        if self.cache_in_memory:
            self._cache[utt_id] = (mel, wave, pitch)
        return mel, wave, pitch

    def __getitem__(self, index: int) -> VocoderItem:
        utt_id = self.ids[index]
        mel, wave, pitch = self._utterance(utt_id)
        s = self.segment_frames
        if s is None:
            return VocoderItem(utt_id, mel, wave, pitch)
        hop = self.mel_config.hop_length
        t = mel.shape[1]
        if t < s:  # short utterance: pad with silence (log floor / zero samples) to a full segment
            mel = torch.nn.functional.pad(mel, (0, s - t), value=self.mel_config.log_floor)
            wave = torch.nn.functional.pad(wave, (0, (s - t) * hop))
            pitch = None if pitch is None else torch.nn.functional.pad(pitch, (0, s - t))
            start = 0
        else:
            start = random.randint(0, t - s)  # seeded per worker by Lightning's seed_everything(workers=True)
        seg_pitch = None if pitch is None else pitch[start : start + s]
        return VocoderItem(utt_id, mel[:, start : start + s], wave[start * hop : (start + s) * hop], seg_pitch)


class VocoderDataModule(pl.LightningDataModule):
    """Random segments of `train_split` for training; the first `max_val_utterances` of `val_split`, whole."""

    def __init__(
        self,
        root: str,
        mel_config: MelConfig,
        segment_frames: int,
        batch_size: int,
        num_workers: int = 0,
        mel_dir: str | None = None,
        train_split: str = "train",
        val_split: str = "val",
        max_val_utterances: int | None = None,
        with_pitch: bool = False,
        max_train_utterances: int | None = None,
        cache_in_memory: bool = False,
        extra_roots: Sequence[str] = (),
    ) -> None:
        super().__init__()
        if segment_frames < 1 or batch_size < 1:
            raise ValueError(f"segment_frames and batch_size must be >= 1, got {segment_frames}, {batch_size}")
        self.root, self.mel_config = root, mel_config
        self.segment_frames, self.batch_size, self.num_workers = segment_frames, batch_size, num_workers
        self.mel_dir = mel_dir
        self.train_split, self.val_split = train_split, val_split
        self.max_val_utterances = max_val_utterances
        self.with_pitch, self.max_train_utterances = with_pitch, max_train_utterances
        self.cache_in_memory = cache_in_memory
        # More corpora of the same mel definition (one vocoder for several voices, issue 31): their train
        # splits join the training set, the first `max_val_utterances` of each val split join validation.
        self.extra_roots = [str(r) for r in extra_roots]
        if mel_dir is not None and self.extra_roots:
            raise ValueError("mel_dir (teacher-forced mels of one corpus) cannot be combined with extra_roots")
        self.train_set: Dataset[VocoderItem] | None = None
        self.val_set: Dataset[VocoderItem] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            roots = [self.root, *self.extra_roots]
            train = [VocoderDataset(r, self.train_split, self.mel_config, self.segment_frames, self.mel_dir,
                                    self.max_train_utterances, self.with_pitch, self.cache_in_memory) for r in roots]
            val = [VocoderDataset(r, self.val_split, self.mel_config, None, self.mel_dir, self.max_val_utterances,
                                  self.with_pitch) for r in roots]
            self.train_set = train[0] if len(train) == 1 else ConcatDataset(train)
            self.val_set = val[0] if len(val) == 1 else ConcatDataset(val)

    def _collate(self, items: list[VocoderItem]) -> VocoderBatch:
        return collate(items, self.mel_config.log_floor, self.mel_config.hop_length)

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            # Full batches only, except when the split is smaller than one batch (tiny corpora).
            drop_last=len(self.train_set) > self.batch_size,
            collate_fn=self._collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None
        # Whole utterances one at a time: the validation mel L1 is over real, unpadded lengths.
        return DataLoader(self.val_set, batch_size=1, shuffle=False, collate_fn=self._collate, num_workers=0)

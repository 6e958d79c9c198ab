"""Lightning DataModule: train/val splits of one corpus, length-bucketed batches."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from tts.audio import MelConfig
from tts.data.dataset import Collate, TTSDataset
from tts.data.sampler import LengthBucketSampler
from tts.text import TextFrontend


def next_train_epoch(trainer: pl.Trainer | None) -> int:
    """The epoch the trainer is about to train, when the training loader is (re)built.

    Resuming, Lightning iterates the loader (FitLoop.setup_data) before it settles the epoch (FitLoop.reset):
    a checkpoint written on the last batch of an epoch that had not ended (started > processed) resumes
    in the next epoch; otherwise the restored processed-epoch count is the epoch to train.
    """
    if trainer is None:
        return 0
    loop = trainer.fit_loop
    if not loop.restarting:
        return trainer.current_epoch
    progress = loop.epoch_progress.current
    ended_on_last_batch = progress.started > progress.processed and loop.epoch_loop.batch_progress.is_last_batch
    return progress.processed + int(ended_on_last_batch)


class TTSDataModule(pl.LightningDataModule):
    def __init__(
        self,
        root: str,
        frontend: TextFrontend,
        mel_config: MelConfig,
        batch_size: int,
        num_workers: int = 0,
        durations_dir: str | None = None,
        max_frames: int | None = None,
        val_batch_size: int | None = None,
        bucket_multiplier: int = 50,
        train_split: str = "train",
        val_split: str = "val",
        seed: int = 0,
        lead_pause_frames: int | None = None,
    ) -> None:
        super().__init__()
        self.lead_pause_frames = lead_pause_frames  # tts.data.TTSDataset's: the leading pause cut to this
        self.root = Path(root)
        self.frontend = frontend
        self.mel_config = mel_config
        self.batch_size = batch_size
        self.val_batch_size = val_batch_size or batch_size
        self.num_workers = num_workers
        self.durations_dir = durations_dir
        self.max_frames = max_frames
        self.bucket_multiplier = bucket_multiplier
        self.train_split, self.val_split = train_split, val_split
        self.seed = seed
        self.collate = Collate(mel_pad_value=mel_config.log_floor)
        self.train_set: TTSDataset | None = None
        self.val_set: TTSDataset | None = None

    def _dataset(self, split: str) -> TTSDataset:
        return TTSDataset(self.root, split, self.frontend, self.mel_config, self.durations_dir, self.max_frames,
                          self.lead_pause_frames)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is None:
            self.train_set = self._dataset(self.train_split)
            self.val_set = self._dataset(self.val_split)

    def _loader(self, dataset: TTSDataset, batch_size: int, shuffle: bool) -> DataLoader:
        # The loader is built once: its first epoch is set here, every later one by
        # tts.training.callbacks.SamplerEpoch (Lightning re-seeds only a batch_sampler's inner sampler).
        sampler = LengthBucketSampler(
            dataset.lengths(), batch_size, self.bucket_multiplier, shuffle=shuffle, seed=self.seed
        )
        if shuffle:
            sampler.set_epoch(next_train_epoch(self.trainer))
        return DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=self.collate,
            num_workers=self.num_workers,
            persistent_workers=False,
        )

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None
        return self._loader(self.train_set, self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None
        return self._loader(self.val_set, self.val_batch_size, shuffle=False)

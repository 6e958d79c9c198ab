"""Callbacks shared by the acoustic and vocoder recipes."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint


def step_checkpoint(exp_dir: str | Path, every_n_steps: int, keep: int, save_last: bool | str = True) -> ModelCheckpoint:
    """Checkpoints named by global step in exp_dir/checkpoints, the newest `keep` kept, plus last.ckpt
    (what `ckpt_path=last` resumes from).  `save_last="link"` makes last.ckpt a symlink instead of a copy."""
    return ModelCheckpoint(
        dirpath=Path(exp_dir) / "checkpoints",
        filename="step{step:07d}",
        auto_insert_metric_name=False,
        every_n_train_steps=every_n_steps,
        save_top_k=keep,
        monitor="step",
        mode="max",
        save_last=save_last,
        # On resume Lightning would otherwise write the new last checkpoint as last-v1.ckpt.
        enable_version_counter=False,
    )


class SamplerEpoch(Callback):
    """Sets the epoch of the training loader's batch sampler before each epoch, so the batch order
    changes every epoch.

    Lightning's own re-seeding (`_set_sampler_epoch`) reaches a `sampler` or a `batch_sampler.sampler`,
    not a batch sampler such as tts.data.sampler.LengthBucketSampler, and the loader is built once (no
    `reload_dataloaders_every_n_epochs`).  The epoch is the trainer's, which a resume from a checkpoint
    restores.  The first epoch of a run is iterated before any hook (in FitLoop.setup_data), so its epoch
    is set by the datamodule when it builds the loader (tts.data.datamodule.next_train_epoch, which also
    covers a resume); this hook sets every later one, before the loader is iterated again.
    """

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        sampler = getattr(trainer.train_dataloader, "batch_sampler", None)
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(trainer.current_epoch)

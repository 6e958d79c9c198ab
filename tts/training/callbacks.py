"""Callbacks shared by the acoustic and vocoder recipes."""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch.callbacks import ModelCheckpoint


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

"""Callbacks shared by the acoustic and vocoder recipes."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, TQDMProgressBar


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


class StepProgressBar(TQDMProgressBar):
    """One training bar over the whole run: "step N/max_steps", not per epoch.

    These recipes train by steps with `max_epochs: -1`, so Lightning's own bars said "Epoch 6/-2" (Rich) or
    restarted every epoch; a GAN vocoder counts two optimizer steps per batch, so the bar follows
    `trainer.global_step` (what max_steps and the checkpoint names count), not the batch index."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.train_progress_bar = self.init_train_tqdm()
        self.train_progress_bar.reset(total=trainer.max_steps if trainer.max_steps > 0 else None)
        self.train_progress_bar.initial = trainer.global_step  # a resumed run starts where it stopped
        self.train_progress_bar.n = trainer.global_step

    def on_train_epoch_start(self, trainer: pl.Trainer, *_: Any) -> None:
        self.train_progress_bar.set_description(f"step (epoch {trainer.current_epoch})")

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        bar = self.train_progress_bar
        if self._should_update(batch_idx + 1, bar.total) or trainer.global_step >= (bar.total or 0):
            bar.n = trainer.global_step
            bar.set_postfix(self.get_metrics(trainer, pl_module))
            bar.refresh()

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)  # the logger's version: always "" here (one run per directory)
        return metrics


@dataclass
class Validation:
    step: int
    value: float


class RunSummary(Callback):
    """Remembers each validation's `monitor` value, so that the run can end with where its checkpoints are,
    the step with the best validation value, and how to look at the curves (`summary()`)."""

    def __init__(self, exp_dir: str | Path, monitor: str) -> None:
        self.exp_dir = Path(exp_dir)
        self.monitor = monitor
        self.validations: list[Validation] = []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if value is not None and not trainer.sanity_checking:
            self.validations.append(Validation(int(trainer.global_step), float(value)))

    def summary(self, trainer: pl.Trainer) -> str:
        return run_summary(self.exp_dir, int(trainer.global_step), int(trainer.max_steps), self.monitor,
                           self.validations, interrupted=trainer.interrupted)


def _step_of(path: Path) -> int | None:
    digits = path.stem[len("step"):]
    return int(digits) if path.stem.startswith("step") and digits.isdigit() else None


def run_summary(exp_dir: Path, step: int, max_steps: int, monitor: str, validations: list[Validation],
                interrupted: bool = False) -> str:
    """The lines a training run ends with."""
    ckpt_dir = exp_dir / "checkpoints"
    kept = sorted((p for p in ckpt_dir.glob("step*.ckpt") if _step_of(p) is not None), key=_step_of)
    state = "interrupted" if interrupted else "finished"
    lines = [f"training {state} at step {step} of {max_steps}: run directory {exp_dir}"]
    last = ckpt_dir / "last.ckpt"
    if last.exists():
        lines.append(f"  last checkpoint: {last}   (resume: the same command with ckpt_path=last)")
    else:
        lines.append(f"  no checkpoint written yet (every checkpoint_every_n_steps steps, into {ckpt_dir})")
    if kept:
        lines.append(f"  kept checkpoints: {', '.join(p.name for p in kept)}")
    if validations:
        best = min(validations, key=lambda v: v.value)
        near = min(kept, key=lambda p: abs(_step_of(p) - best.step)) if kept else None
        where = f"; nearest kept checkpoint {near}" if near is not None else ""
        lines.append(f"  best {monitor} {best.value:.4g} at step {best.step} "
                     f"(last {validations[-1].value:.4g} at step {validations[-1].step}){where}")
    lines.append(f"  curves: {tensorboard_command()} --logdir {exp_dir / 'tb'}")
    return "\n".join(lines)


def tensorboard_command() -> str:
    """`tensorboard` when it is on PATH, else the script installed beside this Python (a venv not activated)."""
    if shutil.which("tensorboard"):
        return "tensorboard"
    beside = Path(sys.executable).parent / "tensorboard"
    try:
        return str(beside.relative_to(Path.cwd()))
    except ValueError:
        return str(beside)

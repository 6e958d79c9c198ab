"""Lightning glue shared by every acoustic recipe: the model brings `loss(batch)`, this brings the rest."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from torch import nn

from tts.checkpoint import CheckpointMeta, atomic_torch_save
from tts.data.batch import Batch
from tts.vocoder.griffin_lim import GriffinLimVocoder


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoints written to a temp file and renamed: a kill mid-save keeps the old file."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str, storage_options: Any = None) -> None:
        atomic_torch_save(checkpoint, path)


def colour_image(x: torch.Tensor) -> np.ndarray:
    """[H, W] tensor -> [3, H, W] float RGB (viridis), low index at the bottom like a spectrogram."""
    from matplotlib import colormaps

    x = x.detach().float().cpu()
    x = (x - x.min()) / (x.max() - x.min() + 1e-8)
    rgb = colormaps["viridis"](x.flip(0).numpy())[..., :3]  # [H, W, 3]
    return rgb.transpose(2, 0, 1)


def log_vocoder_media(logger: Any, step: int, mel_config: Any, utt_id: str, n_frames: int, wave: torch.Tensor,
                      real: torch.Tensor, mel_hat: torch.Tensor, mel_ref: torch.Tensor) -> None:
    """TensorBoard audio (generated and real, [n_frames * hop] samples) and mel images of one validation
    utterance; a no-op without a TensorBoard logger.  wave/real [N], mel_hat/mel_ref [M, T]."""
    tb = getattr(logger, "experiment", None)
    if tb is None or not hasattr(tb, "add_audio"):
        return
    n, sr = n_frames * mel_config.hop_length, mel_config.sample_rate
    tb.add_audio(f"val/{utt_id}/generated", wave[:n].float().cpu()[None], step, sample_rate=sr)
    tb.add_audio(f"val/{utt_id}/ground_truth", real[:n].float().cpu()[None], step, sample_rate=sr)
    tb.add_image(f"val/{utt_id}/mel_generated", colour_image(mel_hat), step)
    tb.add_image(f"val/{utt_id}/mel_ground_truth", colour_image(mel_ref), step)


def validate_vocoder(module: pl.LightningModule, batch: Any, batch_idx: int, mel: nn.Module, step: int,
                     log_audio_items: int) -> None:
    """A vocoder trainer's validation of one whole utterance through the inference path: logs val/mel_l1
    (our mel of the generated against the real wave) and, for the first `log_audio_items`, the media."""
    out = module.model(batch.mels, batch.mel_lengths)  # WaveOutput: wave [B, T * hop]
    mel_hat, mel_ref = mel(out.wave), mel(batch.waves)  # [B, M, T + 1]; the real wave is zero-padded
    module.log("val/mel_l1", (mel_hat - mel_ref).abs().mean(), prog_bar=True, batch_size=len(batch), sync_dist=True)
    if batch_idx < log_audio_items and module.global_rank == 0:
        log_vocoder_media(module.logger, step, module.meta.mel_config, batch.ids[0], int(batch.mel_lengths[0]),
                          out.wave[0], batch.waves[0], mel_hat[0], mel_ref[0])


class AcousticModule(pl.LightningModule):
    """Trains any acoustic model exposing `loss(batch: Batch) -> LossOutput`.

    `optimizer` / `scheduler` are partials (Hydra `_partial_: true`) taking params / optimizer.
    `meta` is the checkpoint description added to every Lightning checkpoint, so that the training
    checkpoint itself can be loaded by `tts.checkpoint.load`.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: Callable[..., torch.optim.Optimizer],
        meta: CheckpointMeta,
        scheduler: Callable[..., Any] | None = None,
        log_audio: bool = True,
        griffin_lim_iters: int = 32,
    ) -> None:
        super().__init__()
        self.model = model
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        self.meta = meta
        self.log_audio = log_audio
        self.vocoder = GriffinLimVocoder(meta.mel_config, n_iter=griffin_lim_iters) if log_audio else None

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        out = self.model.loss(batch)
        self.log("train/loss", out.total, prog_bar=True, batch_size=len(batch))
        for name, value in out.terms.items():
            self.log(f"train/{name}", value, batch_size=len(batch))
        return out.total

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        out = self.model.loss(batch)
        self.log("val/loss", out.total, prog_bar=True, batch_size=len(batch), sync_dist=True)
        for name, value in out.terms.items():
            self.log(f"val/{name}", value, batch_size=len(batch), sync_dist=True)
        if batch_idx == 0 and self.global_rank == 0:
            self._log_media(batch, out.images)

    def _log_media(self, batch: Batch, images: dict[str, torch.Tensor]) -> None:
        tb = getattr(self.logger, "experiment", None)
        if tb is None or not hasattr(tb, "add_image"):
            return
        step = self.global_step
        for name, img in images.items():
            tb.add_image(f"val/{name}", colour_image(img), step)
        if self.log_audio and self.vocoder is not None and "mel_pred" in images:
            self.vocoder.to(self.device)
            mel = images["mel_pred"][None].float()
            wave = self.vocoder(mel).wave[0].cpu()
            tb.add_audio("val/griffin_lim_pred", wave[None], step, sample_rate=self.meta.mel_config.sample_rate)
        if hasattr(self.model, "infer") and self.log_audio and self.vocoder is not None:
            # free-running inference of the first item: what the model really says, not teacher-forced
            with torch.no_grad():
                inf = self.model.infer(batch.tokens[:1], batch.token_lengths[:1])
            mel = inf.mels[:1, :, : int(inf.mel_lengths[0])]
            tb.add_image("val/mel_infer", colour_image(mel[0]), step)
            if getattr(inf, "alignments", None) is not None:
                tb.add_image("val/alignment_infer", colour_image(inf.alignments[0].T), step)
            wave = self.vocoder(mel.float()).wave[0].cpu()
            tb.add_audio("val/griffin_lim_infer", wave[None], step, sample_rate=self.meta.mel_config.sample_rate)

    def configure_optimizers(self):
        opt = self.optimizer_factory(params=self.model.parameters())
        if self.scheduler_factory is None:
            return opt
        return {"optimizer": opt, "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer=opt), "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        info = {**self.meta.info, "global_step": int(self.global_step), "epoch": int(self.current_epoch)}
        checkpoint["tts"] = {**self.meta.to_dict(), "info": info}

    # provenance of the weights a run started from (recipes.train init_from): survives a resume
    PROVENANCE_KEYS = ("init_from", "init_from_only", "steps_before", "init_from_steps")

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Resuming (`ckpt_path=last`) rebuilds the module from the config, which no longer says where the
        run's first weights came from: take that from the checkpoint, so the steps stay counted."""
        stored = (checkpoint.get("tts") or {}).get("info") or {}
        kept = {k: stored[k] for k in self.PROVENANCE_KEYS if k in stored}
        if kept:
            self.meta = dataclasses.replace(self.meta, info={**self.meta.info, **kept})

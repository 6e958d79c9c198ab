"""Lightning GAN training of a HiFi-GAN vocoder (manual optimisation: one D step, then one G step).

Losses are SpeechBrain's (`GeneratorLoss`, `DiscriminatorLoss`, MSE adversarial, MelGAN feature
matching) with one substitution: the mel L1 term uses OUR `MelSpectrogram` (the project's single mel
definition) on generated and real audio, instead of SpeechBrain's own mel copy.  Weights follow the
HiFi-GAN paper / SpeechBrain recipe: mel 45, feature matching 10 (inside GeneratorLoss), adversarial 1.

Step counting.  Lightning's `global_step` counts optimizer steps, and every batch takes two (D and G),
so `trainer.max_steps` and `checkpoint_every_n_steps` are in optimizer steps = 2 x batches.  TensorBoard's
x-axis (scalars from Lightning, and the audio/images logged here) is batches (`iteration`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import speechbrain as sb
import torch
from speechbrain.lobes.models.HifiGAN import (
    DiscriminatorLoss,
    GeneratorLoss,
    HifiganDiscriminator,
    MelganFeatureLoss,
    MSEDLoss,
    MSEGLoss,
)
from torch import nn

from tts.audio import MelSpectrogram
from tts.checkpoint import CheckpointMeta
from tts.training.losses import MultiResolutionSTFTLoss
from tts.training.module import validate_vocoder
from tts.vocoder.data import VocoderBatch
from tts.vocoder.hifigan import HifiGanVocoder


class MelL1Loss(nn.Module):
    """L1 between log-mels of generated and real audio, both [B, 1, N] -> scalar (our mel definition)."""

    def __init__(self, mel: MelSpectrogram) -> None:
        super().__init__()
        self.mel = mel

    def forward(self, y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # float32 even under mixed precision: log(clamp(x, 1e-5)) needs more range than fp16 has
        with torch.autocast(device_type=y.device.type, enabled=False):
            return nn.functional.l1_loss(self.mel(y_hat[:, 0].float()), self.mel(y[:, 0].float()))


class VocoderGanModule(pl.LightningModule):
    """Trains `model` (a HifiGanVocoder; saved under the `model.` prefix so that `tts.checkpoint.load`
    rebuilds it from the Lightning checkpoint) against SpeechBrain's MPD + MSD discriminator.

    `generator_optimizer` / `discriminator_optimizer` / `scheduler` are partials (Hydra `_partial_: true`)
    taking params / optimizer; the scheduler is stepped once per batch for both optimizers.
    """

    def __init__(
        self,
        model: HifiGanVocoder,
        meta: CheckpointMeta,
        generator_optimizer: Callable[..., torch.optim.Optimizer],
        discriminator_optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        mel_loss_weight: float = 45.0,
        feature_loss_weight: float = 10.0,
        adversarial_loss_weight: float = 1.0,
        grad_clip: float | None = None,
        log_audio_items: int = 2,
        discriminator_start_batch: int = 0,
        stft_loss_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.model = model
        self.discriminator = HifiganDiscriminator()  # MultiPeriod (2,3,5,7,11) + MultiScale (x1, x2, x4 pooled)
        self.meta = meta
        self.generator_optimizer_factory = generator_optimizer
        self.discriminator_optimizer_factory = discriminator_optimizer
        self.scheduler_factory = scheduler
        self.grad_clip = grad_clip
        self.log_audio_items = log_audio_items
        if discriminator_start_batch < 0:
            raise ValueError(f"discriminator_start_batch must be >= 0, got {discriminator_start_batch}")
        self.discriminator_start_batch = discriminator_start_batch
        self.mel_loss_weight = mel_loss_weight
        # Optional multi-resolution STFT term, in both phases (0 = HiFi-GAN as published).
        self.stft_loss_weight = stft_loss_weight
        self.stft_loss = MultiResolutionSTFTLoss() if stft_loss_weight > 0 else None
        self.generator_loss = GeneratorLoss(
            mseg_loss=MSEGLoss(),
            mseg_loss_weight=adversarial_loss_weight,
            feat_match_loss=MelganFeatureLoss(),
            feat_match_loss_weight=feature_loss_weight,
            l1_spec_loss=MelL1Loss(MelSpectrogram(meta.mel_config)),
            l1_spec_loss_weight=mel_loss_weight,
        )
        self.discriminator_loss = DiscriminatorLoss(msed_loss=MSEDLoss())

    @property
    def mel(self) -> MelSpectrogram:
        """The project's mel transform, as used by the mel L1 loss (registered once, inside the loss)."""
        return self.generator_loss.l1_spec_loss.mel

    @property
    def iteration(self) -> int:
        """Batches trained so far (each one = a discriminator and a generator optimizer step)."""
        return self.global_step // 2

    # --- training ---------------------------------------------------------------------------------
    def _clip(self, optimizer: torch.optim.Optimizer) -> None:
        if self.grad_clip is not None:  # Lightning's helper unscales AMP gradients first
            self.clip_gradients(optimizer, gradient_clip_val=self.grad_clip, gradient_clip_algorithm="norm")

    @property
    def adversarial(self) -> bool:
        """False during the generator-only warm-up (the first `discriminator_start_batch` batches)."""
        return self.iteration >= self.discriminator_start_batch

    def training_step(self, batch: VocoderBatch, batch_idx: int) -> None:
        opt_g, opt_d = self.optimizers()
        y = batch.waves[:, None]  # [B, 1, S * hop] real segment
        y_hat = self.model.train_forward(batch.mels)  # [B, 1, S * hop] generated from its mel [B, M, S]
        if not self.adversarial:
            self._warmup_step(opt_g, opt_d, y_hat, y, len(batch))
            return

        # Discriminator: real -> 1, generated (detached) -> 0, summed over the 8 sub-discriminators.
        self.toggle_optimizer(opt_d)
        scores_fake, _ = self.discriminator(y_hat.detach())
        scores_real, _ = self.discriminator(y)
        d_losses = self.discriminator_loss(scores_fake, scores_real)
        opt_d.zero_grad(set_to_none=True)
        self.manual_backward(d_losses["D_loss"])
        self._clip(opt_d)
        opt_d.step()
        self.untoggle_optimizer(opt_d)

        # Generator: fool the (just updated) discriminator, match its features on real audio, match mels.
        self.toggle_optimizer(opt_g)  # discriminator params frozen for this backward
        scores_fake, feats_fake = self.discriminator(y_hat)
        with torch.no_grad():
            _, feats_real = self.discriminator(y)
        g_losses = self.generator_loss(sb.Stage.TRAIN, y_hat, y, scores_fake, feats_fake, feats_real)
        g_loss = g_losses["G_loss"] + self._stft_term(y_hat, y, len(batch))
        opt_g.zero_grad(set_to_none=True)
        self.manual_backward(g_loss)
        self._clip(opt_g)
        opt_g.step()
        self.untoggle_optimizer(opt_g)

        for scheduler in self._schedulers():
            scheduler.step()
        b = len(batch)
        self.log("train/g_loss", g_loss, prog_bar=True, batch_size=b)
        self.log("train/d_loss", d_losses["D_loss"], prog_bar=True, batch_size=b)
        self.log("train/mel_l1", g_losses["G_l1_spec_loss"], prog_bar=True, batch_size=b)
        self.log("train/feature_matching", g_losses["G_feat_match_loss"], batch_size=b)
        self.log("train/adversarial", g_losses["G_mse_fake_loss"], batch_size=b)
        self.log("train/lr", opt_g.param_groups[0]["lr"], batch_size=b)

    def _warmup_step(self, opt_g, opt_d, y_hat: torch.Tensor, y: torch.Tensor, b: int) -> None:
        """Generator-only step on the mel L1 loss (Parallel WaveGAN's `discriminator_train_start_steps`):
        the discriminators (~70 M parameters, ~96 % of a GAN step's CPU time, see conf/train_vocoder.yaml)
        are not run, so a CPU budget buys many more generator updates, and the GAN phase starts from a
        generator that already speaks."""
        mel_l1 = self.generator_loss.l1_spec_loss(y_hat, y)  # the GAN phase's mel term, unweighted
        opt_g.zero_grad(set_to_none=True)
        self.manual_backward(self.mel_loss_weight * mel_l1 + self._stft_term(y_hat, y, b))
        self._clip(opt_g)
        opt_g.step()
        # No discriminator gradient exists (grads are None), so AdamW leaves its weights and state alone;
        # the call keeps Lightning's count at 2 optimizer steps per batch, the unit of max_steps/checkpoints.
        opt_d.zero_grad(set_to_none=True)
        opt_d.step()
        for scheduler in self._schedulers():
            scheduler.step()
        self.log("train/mel_l1", mel_l1, prog_bar=True, batch_size=b)
        self.log("train/lr", opt_g.param_groups[0]["lr"], batch_size=b)

    def _stft_term(self, y_hat: torch.Tensor, y: torch.Tensor, b: int) -> torch.Tensor:
        """stft_loss_weight x multi-resolution STFT loss (logged unweighted), or 0 when disabled."""
        if self.stft_loss is None:
            return y.new_zeros(())
        loss = self.stft_loss(y_hat, y)
        self.log("train/stft", loss, batch_size=b)
        return self.stft_loss_weight * loss

    def _schedulers(self) -> list[Any]:
        schedulers = self.lr_schedulers()
        if schedulers is None:
            return []
        return schedulers if isinstance(schedulers, list) else [schedulers]

    # --- validation: full utterances, the real inference path --------------------------------------
    def validation_step(self, batch: VocoderBatch, batch_idx: int) -> None:
        validate_vocoder(self, batch, batch_idx, self.mel, self.iteration, self.log_audio_items)

    # --- optimisers and checkpoints -----------------------------------------------------------------
    def configure_optimizers(self):
        opt_g = self.generator_optimizer_factory(params=self.model.parameters())
        opt_d = self.discriminator_optimizer_factory(params=self.discriminator.parameters())
        if self.scheduler_factory is None:
            return [opt_g, opt_d]
        return [opt_g, opt_d], [self.scheduler_factory(optimizer=opt_g), self.scheduler_factory(optimizer=opt_d)]

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        info = {
            **self.meta.info,
            "global_step": int(self.global_step),
            "iterations": self.iteration,
            "epoch": int(self.current_epoch),
        }
        checkpoint["tts"] = {**self.meta.to_dict(), "info": info}

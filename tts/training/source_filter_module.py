"""Lightning training of the frame-rate vocoders: the source-filter vocoder (tts/vocoder/source_filter.py) and
the iSTFT-head vocoder (tts/vocoder/istft.py), with the same spectral losses and optional light discriminator.
The iSTFT vocoder has no F0 to force or learn: its batches need no pitch, and the F0 and voicing terms below
are absent from its loss.

Per batch of random segments: the network reads the mel; the oscillator runs on the corpus's own F0
(teacher forcing: interpolated through unvoiced frames, gated by the corpus's voicing), so the filters
learn against the true excitation; the F0 classifier and the voicing logit learn from the same F0.
Loss = stft_weight * multi-resolution STFT (spectral convergence + log magnitude, including short FFTs
for transients) + mel_weight * mel L1 (our mel definition) + f0_weight * cross-entropy over log-F0 bins
(Gaussian-blurred targets, voiced frames) + voicing_weight * BCE.

The iSTFT vocoder may add phase_weight * the anti-wrapped phase losses (tts.training.losses.phase_losses:
instantaneous phase, group delay, instantaneous angular frequency) of its own frames against the recording's
STFT at the same size, hop and window (APNet, Ai & Ling 2023): without them nothing but a discriminator
constrains the phase a magnitude loss leaves free, and a discriminator batch costs 10-30x a generator one here.
Frames whose window reaches past the segment are left out (the recording's frame there sees samples the
segment lacks).

Optional adversarial stage (`discriminator` given; usually a fine-tuning run `init_from` a model
trained without it): every batch then takes a discriminator step (LSGAN) and a generator step with
adversarial_weight * LSGAN + feature_weight * feature matching added to the loss above.  Lightning's
global_step counts optimizer steps: 1 per batch without a discriminator, 2 with one.

Validation runs the real inference path (predicted F0 and voicing) on whole utterances and logs mel L1,
log-F0 RMSE in cents on frames both call voiced, and the voiced/unvoiced error rate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from tts.audio import MelSpectrogram
from tts.checkpoint import CheckpointMeta
from tts.training.discriminators import (
    LightDiscriminator,
    discriminator_loss,
    feature_matching_loss,
    generator_adversarial_loss,
)
from tts.training.losses import MultiResolutionSTFTLoss, phase_losses
from tts.training.module import validate_vocoder
from tts.vocoder.data import VocoderBatch
from tts.vocoder.dsp import TORCH, fill_unvoiced
from tts.vocoder.istft import IstftVocoder
from tts.vocoder.render import stft
from tts.vocoder.source_filter import SourceFilterVocoder


def teacher_f0(pitch: torch.Tensor, default_hz: float) -> tuple[torch.Tensor, torch.Tensor]:
    """pitch [B, T] Hz (0 = unvoiced) -> (f0 [B, T] > 0 interpolated through unvoiced, voiced [B, T] 0/1)."""
    voiced = (pitch > 0).float()
    f0 = torch.stack([fill_unvoiced(p, default_hz) for p in pitch.cpu()]).to(pitch.device)
    return f0, voiced


def f0_metrics(f0_hat: torch.Tensor, voiced_hat: torch.Tensor, pitch: torch.Tensor) -> dict[str, torch.Tensor]:
    """Frame F0 [T] predictions against reference pitch [T] (0 = unvoiced): RMSE in cents on frames both
    call voiced (nan if none), and the share of frames whose voicing decision differs."""
    ref_v = pitch > 0
    hat_v = voiced_hat > 0.5
    both = ref_v & hat_v
    cents = 1200 * torch.log2(f0_hat[both] / pitch[both])
    rmse = cents.pow(2).mean().sqrt() if both.any() else torch.tensor(float("nan"))
    return {"f0_rmse_cents": rmse, "vuv_error": (ref_v != hat_v).float().mean()}


class SourceFilterModule(pl.LightningModule):
    """Trains `model` (saved under the `model.` prefix, so tts.checkpoint.load rebuilds the vocoder)."""

    def __init__(
        self,
        model: SourceFilterVocoder | IstftVocoder,
        meta: CheckpointMeta,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        stft_weight: float = 1.0,
        mel_weight: float = 1.0,
        f0_weight: float = 1.0,
        voicing_weight: float = 1.0,
        f0_sigma_cents: float = 25.0,
        stft_fft_sizes: tuple[int, ...] = (2048, 1024, 512, 256, 128),
        stft_log_floor: float = 1e-5,
        log_audio_items: int = 2,
        grad_clip: float | None = None,
        discriminator: LightDiscriminator | None = None,
        discriminator_optimizer: Callable[..., torch.optim.Optimizer] | None = None,
        adversarial_weight: float = 1.0,
        feature_weight: float = 2.0,
        phase_weight: float = 0.0,
    ) -> None:
        super().__init__()
        if phase_weight and not isinstance(model, IstftVocoder):
            raise ValueError(f"phase_weight applies to the iSTFT vocoder's predicted phase; "
                             f"{type(model).__name__} predicts none (set it to 0)")
        self.phase_weight = float(phase_weight)
        self.automatic_optimization = False  # one code path with and without the discriminator
        if (discriminator is None) != (discriminator_optimizer is None):
            raise ValueError("a discriminator needs a discriminator_optimizer, and vice versa")
        self.model = model
        self.discriminator = discriminator
        self.discriminator_optimizer_factory = discriminator_optimizer
        self.adversarial_weight, self.feature_weight = adversarial_weight, feature_weight
        self.grad_clip = grad_clip
        self.meta = meta
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.stft_weight, self.mel_weight = stft_weight, mel_weight
        self.f0_weight, self.voicing_weight = f0_weight, voicing_weight
        self.f0_sigma_cents = f0_sigma_cents
        sizes = tuple(int(n) for n in stft_fft_sizes)
        # Hop n/4 and window n at each resolution (the short FFTs resolve onsets the long ones smear).
        self.stft_loss = MultiResolutionSTFTLoss(sizes, tuple(n // 4 for n in sizes), sizes, log_floor=stft_log_floor)
        self.mel = MelSpectrogram(meta.mel_config)
        self.log_audio_items = log_audio_items
        self.source_filter = isinstance(model, SourceFilterVocoder)
        if self.source_filter:  # the F0 the oscillator uses where a segment has no voiced frame (geometric bin centre)
            self.default_f0 = float((model.bins.f0_min * model.bins.f0_max) ** 0.5)

    @property
    def steps_per_batch(self) -> int:
        return 1 if self.discriminator is None else 2

    def _optimizers(self) -> tuple[Any, Any]:
        opts = self.optimizers()
        return (opts[0], opts[1]) if isinstance(opts, list) else (opts, None)

    def training_step(self, batch: VocoderBatch, batch_idx: int) -> torch.Tensor:
        loss = self.reconstruction_loss(batch)
        opt_g, opt_d = self._optimizers()
        y, b = batch.waves, len(batch)
        if self.discriminator is not None:
            y_hat = self._last_wave
            # Discriminator: real -> 1, generated (detached) -> 0.
            self.toggle_optimizer(opt_d)
            d_loss = discriminator_loss(self.discriminator(y), self.discriminator(y_hat.detach()))
            opt_d.zero_grad(set_to_none=True)
            self.manual_backward(d_loss)
            self._clip(opt_d)
            opt_d.step()
            self.untoggle_optimizer(opt_d)
            # Generator: fool the just-updated discriminator, match its features on real audio.
            self.toggle_optimizer(opt_g)
            fake = self.discriminator(y_hat)
            with torch.no_grad():
                real = self.discriminator(y)
            adversarial = generator_adversarial_loss(fake)
            features = feature_matching_loss(real, fake)
            loss = loss + self.adversarial_weight * adversarial + self.feature_weight * features
            self.log("train/d_loss", d_loss, prog_bar=True, batch_size=b)
            self.log("train/adversarial", adversarial, batch_size=b)
            self.log("train/feature_matching", features, batch_size=b)
        opt_g.zero_grad(set_to_none=True)
        self.manual_backward(loss)
        self._clip(opt_g)
        opt_g.step()
        if self.discriminator is not None:
            self.untoggle_optimizer(opt_g)
        schedulers = self.lr_schedulers()
        for scheduler in schedulers if isinstance(schedulers, list) else [schedulers] if schedulers else []:
            scheduler.step()
        self.log("train/loss", loss, prog_bar=True, batch_size=b)
        self.log("train/lr", opt_g.param_groups[0]["lr"], batch_size=b)
        return loss.detach()

    def _clip(self, optimizer: torch.optim.Optimizer) -> None:
        if self.grad_clip is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.grad_clip, gradient_clip_algorithm="norm")

    def reconstruction_loss(self, batch: VocoderBatch) -> torch.Tensor:
        """STFT + mel (+ F0 + voicing) loss of one batch (keeps the generated wave in `_last_wave`)."""
        if not self.source_filter:
            out = self.model.train_outputs(batch.mels)
            loss = self.spectral_loss(out.wave, batch)
            return loss + self.phase_weight * self.phase_loss(out.frames.phase, batch) if self.phase_weight else loss
        if batch.pitch is None:
            raise ValueError("the source-filter vocoder trains on batches with pitch (VocoderDataModule with_pitch=true)")
        f0, voiced = teacher_f0(batch.pitch, self.default_f0)
        out = self.model.train_forward(batch.mels, f0, voiced)
        # F0 classes on voiced frames inside the classifier's range; voicing on every frame.
        bins = self.model.bins
        in_range = (batch.pitch >= bins.f0_min) & (batch.pitch <= bins.f0_max)
        targets = bins.soft_targets(f0, self.f0_sigma_cents)  # [B, n_bins, S]
        log_probs = torch.log_softmax(out.f0_logits.float(), dim=1)
        ce = -(targets * log_probs).sum(1)  # [B, S]
        f0_loss = (ce * in_range).sum() / in_range.sum().clamp_min(1)
        voicing_loss = nn.functional.binary_cross_entropy_with_logits(out.voicing_logits.float(), voiced)
        loss = self.spectral_loss(out.wave, batch) + self.f0_weight * f0_loss + self.voicing_weight * voicing_loss
        b = len(batch)
        self.log("train/f0_ce", f0_loss, batch_size=b)
        self.log("train/voicing_bce", voicing_loss, batch_size=b)
        return loss

    def spectral_loss(self, wave: torch.Tensor, batch: VocoderBatch) -> torch.Tensor:
        """stft_weight * multi-resolution STFT + mel_weight * mel L1 of wave [B, S * hop] against the batch's;
        keeps the wave in `_last_wave` for the adversarial step."""
        stft = self.stft_loss(wave[:, None], batch.waves[:, None])  # [B, 1, S * hop] each
        mel_l1 = nn.functional.l1_loss(self.mel(wave), self.mel(batch.waves))
        self._last_wave = wave
        b = len(batch)
        self.log("train/stft", stft, batch_size=b)
        self.log("train/mel_l1", mel_l1, prog_bar=True, batch_size=b)
        return self.stft_weight * stft + self.mel_weight * mel_l1

    def phase_loss(self, phase_hat: torch.Tensor, batch: VocoderBatch, prefix: str = "train") -> torch.Tensor:
        """Anti-wrapped phase losses of the iSTFT vocoder's frames [B, N/2 + 1, S] against the recording's
        STFT (same size, hop, Hann window, frame t centred on sample t * hop) on the frames whose window lies
        inside the segment: [c, S - c] with c = the vocoder's context_frames."""
        model: IstftVocoder = self.model
        c, s = model.context_frames, phase_hat.shape[-1]
        if s <= 2 * c:
            raise ValueError(f"segments of {s} frames leave no frame for the phase loss (need > {2 * c})")
        ref = stft(batch.waves.float(), self.meta.mel_config.hop_length, model.window, TORCH)  # [B, N/2 + 1, S + 1]
        losses = phase_losses(phase_hat[..., c : s - c + 1], ref.angle()[..., c : s - c + 1])
        b = len(batch)
        self.log(f"{prefix}/phase_ip", losses.instantaneous, batch_size=b, sync_dist=prefix == "val")
        self.log(f"{prefix}/phase_gd", losses.group_delay, batch_size=b, sync_dist=prefix == "val")
        self.log(f"{prefix}/phase_iaf", losses.angular_frequency, batch_size=b, sync_dist=prefix == "val")
        return losses.total

    # --- validation: whole utterances through the inference path -------------------------------------
    def validation_step(self, batch: VocoderBatch, batch_idx: int) -> None:
        validate_vocoder(self, batch, batch_idx, self.mel, self.global_step, self.log_audio_items)
        if not self.source_filter:  # the phase errors of whole utterances (logged whatever phase_weight)
            with torch.no_grad():
                self.phase_loss(self.model.frame_outputs(batch.mels).phase, batch, prefix="val")
        # the F0 and voicing the inference path decides, against the corpus's
        if self.source_filter and batch.pitch is not None:
            with torch.no_grad():
                f0_hat, voiced_hat = self.model.decode(self.model.frame_params(batch.mels))
            m = f0_metrics(f0_hat[0], voiced_hat[0], batch.pitch[0])
            b = len(batch)
            if not torch.isnan(m["f0_rmse_cents"]):
                self.log("val/f0_rmse_cents", m["f0_rmse_cents"], batch_size=b, sync_dist=True)
            self.log("val/vuv_error", m["vuv_error"], batch_size=b, sync_dist=True)

    def configure_optimizers(self):
        opts = [self.optimizer_factory(params=self.model.parameters())]
        if self.discriminator is not None:
            opts.append(self.discriminator_optimizer_factory(params=self.discriminator.parameters()))
        if self.scheduler_factory is None:
            return opts
        return opts, [self.scheduler_factory(optimizer=o) for o in opts]

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        info = {**self.meta.info, "global_step": int(self.global_step),
                "iterations": int(self.global_step) // self.steps_per_batch, "epoch": int(self.current_epoch),
                "adversarial": self.discriminator is not None}
        checkpoint["tts"] = {**self.meta.to_dict(), "info": info}

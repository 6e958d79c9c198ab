"""FastSpeech 2-style non-autoregressive acoustic model (Ren et al. 2021) with a K-step refiner.

tokens [B, L] -> embedding + positions -> encoder FFT blocks -> h [B, L, D]
   -> variance adaptor: log-duration, pitch, energy predictors; h += pitch_emb + energy_emb
   -> length regulator (durations: ground truth when training, predicted at inference) -> [B, T, D]
   -> decoder FFT blocks -> hidden [B, T, D] -> Linear -> coarse mel [B, M, T]
   -> refiner (optional): K Euler steps of shallow flow matching from the coarse mel -> mel

Block mode (`block_sizes` set; tts/models/blockwise.py): the decoder is trained with block-causal masks of a
block size drawn per batch and a prenet reading the previous block's (teacher-forced) mel, so that
`infer(block_frames=B)` can decode it block by block with a bounded cache, and `stream_mels` hands each
block's refined mel on as soon as it is determined.

Feature normalisation lives inside the model (DESIGN.md section 2): the network predicts
(log_mel - mel_mean) / mel_std with per-channel buffers (defaults: mean -6, std 2.5, scalars fitting
natural-log speech mels, like the Tacotron 2 model); pitch/energy statistics live in the variance
adaptor.  `set_data_statistics(stats)` installs the corpus's features/stats.json.  `infer()` returns
raw natural-log mels padded with `mel_pad_value` (the mel config's log floor).

Losses (all masked to real tokens/frames): mel L1 in normalised units (balanced across channels),
MSE on log(d + 1), MSE on normalised token pitch and energy, and the refiner's flow-matching MSE.
By default the refiner's input (coarse mel and decoder hidden frames) is detached
(`refiner_detach_coarse`), so the refiner trains like a second stage on a moving but unaffected
first stage, while a single optimiser trains both.

Constructor defaults are the FastSpeech 2 paper's size; conf/model/nonautoregressive.yaml holds the
CPU-small size.  `n_symbols` and `n_mels` are derived by the trainer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from tts.data.batch import Batch, lengths_to_mask
from tts.models.layers.length_regulator import check_durations, durations_from_log, regulate_length, speed_durations
from tts.models.layers.mel_statistics import install_mel_statistics
from tts.models.blockwise import BlockDecoder, BlockPrenet, DecodedBlock, StreamingRefiner
from tts.models.layers.transformer import BlockLayout, FFTStack
from tts.models.layers.variance import VarianceAdaptor, VarianceOutput, VarianceTargets
from tts.models.outputs import InferenceSpec, LossOutput, MelOutput
from tts.models.refiner import FlowMatchingRefiner, per_item_noise

__all__ = ["FastSpeech2", "FastSpeech2Output", "NARInferenceOutput", "NARPlan", "MelChunk"]



@dataclass
class FastSpeech2Output:
    """Teacher-forced outputs (ground-truth durations, pitch, energy); T = the batch's frame count."""

    mel_coarse: torch.Tensor  # [B, M, T] normalised coarse mel, zero on padded frames
    mel_target: torch.Tensor  # [B, M, T] normalised target mel, zero on padded frames
    decoder_hidden: torch.Tensor  # [B, T, D] decoder output frames (the refiner's condition)
    frame_mask: torch.Tensor  # [B, T] bool
    token_mask: torch.Tensor  # [B, L] bool
    log_durations: torch.Tensor  # [B, L] predicted log(d + 1)
    pitch: torch.Tensor  # [B, L] predicted normalised pitch
    energy: torch.Tensor  # [B, L] predicted normalised energy
    targets: VarianceTargets  # token-level targets [B, L]


@dataclass
class NARInferenceOutput(MelOutput):
    """mels [B, M, T] raw log-mel (refined when K > 0, padded with the log floor), mel_lengths [B], plus:"""

    coarse_mels: torch.Tensor  # [B, M, T] raw log-mel before refinement (the same tensor as mels if K = 0)
    durations: torch.Tensor  # [B, L] long, frames per token actually used
    refine_steps_taken: int  # refiner network evaluations (0 without refiner or K = 0)
    pitch: torch.Tensor  # [B, L] Hz per token after pitch_shift / pitch_scale (the embedded contour)
    energy: torch.Tensor  # [B, L] raw energy per token after energy_scale
    truncated: torch.Tensor  # [B] bool, True where the max_frames guard cut the item


@dataclass
class NARPlan:
    """The parallel part of inference (encoder, variance adaptor, length regulator), before the decoder."""

    frames: torch.Tensor  # [B, T, D] length-regulated encoder frames
    frame_mask: torch.Tensor  # [B, T] bool
    mel_lengths: torch.Tensor  # [B]
    durations: torch.Tensor  # [B, L] long
    pitch: torch.Tensor  # [B, L] Hz
    energy: torch.Tensor  # [B, L] raw
    truncated: torch.Tensor  # [B] bool


@dataclass
class MelChunk:
    """Frames [start, start + mels.shape[2]) of the final (refined) raw log-mel, in order (`stream_mels`)."""

    start: int
    mels: torch.Tensor  # [B, M, n] raw log-mel, the log floor on padded frames


def denormalise_mel(mel: torch.Tensor, mask: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                    pad_value: float) -> torch.Tensor:
    """Normalised mel [B, M, T], frame mask [B, T], per-channel mean/std [M] -> raw log-mel, padding =
    pad_value.  Scriptable: the exported acoustic graph ends with it (tts/export.py)."""
    raw = mel * std[:, None] + mean[:, None]
    return raw.masked_fill(~mask[:, None, :], pad_value)


class FastSpeech2(nn.Module):
    # block-mode parameters a warm start from a parallel checkpoint leaves at their fresh initialisation
    # (tts.checkpoint.warm_start)
    fresh_parameter_prefixes = ("block_prenet.",)

    def __init__(
        self,
        n_symbols: int,
        n_mels: int,
        padding_idx: int = 0,
        # encoder / decoder FFT blocks
        d_model: int = 256,
        encoder_layers: int = 4,
        decoder_layers: int = 4,
        n_heads: int = 2,
        ffn_channels: int = 1024,
        ffn_kernel_size: int = 9,
        ffn_kernel_size_out: int = 1,
        dropout: float = 0.2,
        attention_dropout: float = 0.1,
        pre_norm: bool = False,
        # variance adaptor
        predictor_channels: int = 256,
        predictor_kernel_size: int = 3,
        predictor_layers: int = 2,
        predictor_dropout: float = 0.5,
        variance_embedding_kernel_size: int = 3,
        # loss weights
        duration_loss_weight: float = 1.0,
        pitch_loss_weight: float = 1.0,
        energy_loss_weight: float = 1.0,
        # refiner: a factory (Hydra `_partial_: true` node) called with n_mels= and cond_channels=
        refiner: Callable[..., FlowMatchingRefiner] | None = None,
        refiner_loss_weight: float = 1.0,
        refiner_detach_coarse: bool = True,
        refine_steps: int = 4,
        refine_temperature: float = 1.0,  # default start-noise scale of the refiner (Matcha: 0.667)
        # inference
        min_token_frames: int = 0,
        max_frames: int = 4000,
        # block mode (tts/models/blockwise.py): None = a parallel model.  Training draws one size per batch
        # from block_sizes (0 = the whole utterance); validation uses block_val_frames; infer() uses
        # block_frames unless told otherwise (0 = one block, the parallel decoder).
        block_sizes: Sequence[int] | None = None,
        block_past_frames: int = 64,
        block_prenet_frames: int = 4,
        block_prenet_dropout: float = 0.5,
        block_val_frames: int = 16,
        block_frames: int = 0,
        # normalisation defaults (replaced by set_data_statistics)
        mel_mean: float = -6.0,
        mel_std: float = 2.5,
        mel_pad_value: float = math.log(1e-5),
    ) -> None:
        super().__init__()
        if refine_steps < 0:
            raise ValueError(f"refine_steps must be >= 0, got {refine_steps}")
        if refine_temperature < 0:
            raise ValueError(f"refine_temperature must be >= 0, got {refine_temperature}")
        self.n_mels = n_mels
        self.duration_loss_weight = duration_loss_weight
        self.pitch_loss_weight = pitch_loss_weight
        self.energy_loss_weight = energy_loss_weight
        self.refiner_loss_weight = refiner_loss_weight
        self.refiner_detach_coarse = refiner_detach_coarse
        self.refine_steps = refine_steps
        self.refine_temperature = refine_temperature
        self.min_token_frames = min_token_frames
        self.max_frames = max_frames
        self.mel_pad_value = mel_pad_value
        if block_sizes is not None and (not block_sizes or any(int(b) < 0 for b in block_sizes)):
            raise ValueError(f"block_sizes must be a non-empty list of sizes >= 0 (0 = whole), got {block_sizes}")
        if block_frames < 0 or block_val_frames < 1 or block_past_frames < 0:
            raise ValueError("need block_frames >= 0, block_val_frames >= 1 and block_past_frames >= 0")
        self.block_sizes = [int(b) for b in block_sizes] if block_sizes is not None else None
        self.block_past_frames = block_past_frames
        self.block_val_frames = block_val_frames
        self.block_frames = block_frames if block_sizes is not None else 0

        def fft_stack(n_layers: int) -> FFTStack:
            return FFTStack(
                d_model, n_layers, n_heads, ffn_channels, ffn_kernel_size, ffn_kernel_size_out, dropout, attention_dropout, pre_norm
            )

        self.embedding = nn.Embedding(n_symbols, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[padding_idx].zero_()
        self.embed_scale = math.sqrt(d_model)  # unit-variance embeddings next to the [-1, 1] positions
        self.encoder = fft_stack(encoder_layers)
        self.variance = VarianceAdaptor(
            d_model, predictor_channels, predictor_kernel_size, predictor_layers, predictor_dropout, variance_embedding_kernel_size
        )
        self.decoder = fft_stack(decoder_layers)
        self.mel_proj = nn.Linear(d_model, n_mels)
        self.refiner = refiner(n_mels=n_mels, cond_channels=d_model) if refiner is not None else None
        self.block_prenet = (BlockPrenet(n_mels, d_model, block_prenet_frames, block_prenet_dropout)
                             if block_sizes is not None else None)
        self.register_buffer("mel_mean", torch.full((n_mels,), float(mel_mean)))
        self.register_buffer("mel_std", torch.full((n_mels,), float(mel_std)))

    # --- normalisation -----------------------------------------------------------------------------
    def set_data_statistics(self, stats: dict) -> None:
        """Install features/stats.json statistics; missing or non-finite entries keep their values.

        Reads stats["mel"]["mean"/"std"] (n_mels lists), the voiced-frame log-Hz pitch statistics
        under "log_mean"/"log_std" or data_prep's "mean_log_hz"/"std_log_hz" (if only Hz statistics
        exist, "mean"/"mean_hz" and "std"/"std_hz", then log_mean = log(mean) and log_std = std / mean,
        the first-order approximation), and stats["energy"]["mean"/"std"].  A wrong channel count is
        an error (a different mel definition); a NaN (e.g. no voiced frame) is skipped with a warning.
        """

        def pick(d: dict, *keys: str) -> float | None:
            for k in keys:
                v = d.get(k)
                if v is None:
                    continue
                if not math.isfinite(float(v)):
                    warnings.warn(f"ignoring non-finite statistic {k}={v}; keeping the current value")
                    return None
                return float(v)
            return None

        install_mel_statistics(stats.get("mel") or {}, self.mel_mean, self.mel_std)
        pitch = stats.get("pitch") or {}
        log_mean, log_std = pick(pitch, "log_mean", "mean_log_hz"), pick(pitch, "log_std", "std_log_hz")
        hz_mean, hz_std = pick(pitch, "mean", "mean_hz"), pick(pitch, "std", "std_hz")
        if log_mean is None and hz_mean is not None and hz_mean > 0:
            log_mean = math.log(hz_mean)
        if log_std is None and hz_std is not None and hz_mean is not None and hz_mean > 0:
            log_std = hz_std / hz_mean
        energy = stats.get("energy") or {}
        self.variance.set_statistics(log_mean, log_std, pick(energy, "mean"), pick(energy, "std"))

    def normalise(self, mel: torch.Tensor) -> torch.Tensor:
        """raw log-mel [B, M, T] -> normalised."""
        return (mel - self.mel_mean[:, None]) / self.mel_std[:, None]

    def denormalise(self, mel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """normalised [B, M, T], frame mask [B, T] -> raw log-mel, padding = mel_pad_value."""
        return denormalise_mel(mel, mask, self.mel_mean, self.mel_std, self.mel_pad_value)

    # --- building blocks ---------------------------------------------------------------------------
    def encode(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        """tokens [B, L] -> encoder output [B, L, D] (zero on padding)."""
        x = self.embedding(tokens.masked_fill(~token_mask, 0).clamp_min(0)) * self.embed_scale
        return self.encoder(x, token_mask)

    def _front(self, tokens: torch.Tensor, token_mask: torch.Tensor, pitch_shift: float, pitch_scale: float,
               energy_scale: float) -> VarianceOutput:
        """The encoder and the variance adaptor at inference, ITEM BY ITEM: [B, L] -> VarianceOutput [B, L, ...]
        (zero on padded tokens).  What decides an item's lengths must not depend on its batch: a batched matrix
        product rounds differently from a single one (~1e-6), and a predicted duration that close to x.5 frames
        rounds the other way, which moves every later frame (docs/results/batching found 1 sentence in 64).  At
        batch 1 each item computes exactly what it computes alone; the decoder and refiner stay batched (their
        1e-6 differences stay 1e-6)."""
        def one(t: torch.Tensor, m: torch.Tensor) -> VarianceOutput:
            return self.variance(self.encode(t, m), m, pitch_shift=pitch_shift, pitch_scale=pitch_scale,
                                 energy_scale=energy_scale)

        if tokens.shape[0] == 1:
            return one(tokens, token_mask)
        L = tokens.shape[1]
        items = [one(tokens[b : b + 1, :n], token_mask[b : b + 1, :n])
                 for b, n in enumerate(token_mask.sum(dim=1).tolist())]

        def stacked(name: str) -> torch.Tensor:  # [1, n, ...] per item -> [B, L, ...], zero-padded
            return torch.cat([F.pad(x, (0, 0) * (x.dim() - 2) + (0, L - x.shape[1]))
                              for x in (getattr(v, name) for v in items)])

        return VarianceOutput(**{f.name: stacked(f.name) for f in fields(VarianceOutput)})

    def decode(self, frames: torch.Tensor, frame_mask: torch.Tensor,
               layout: BlockLayout | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """frames [B, T, D] -> (decoder hidden [B, T, D], normalised coarse mel [B, M, T]), zero on padding.
        layout: block-causal decoding of the whole sequence at once (training in block mode)."""
        hidden = self.decoder(frames, frame_mask, layout)
        mel = self.mel_proj(hidden).transpose(1, 2) * frame_mask[:, None, :].to(hidden.dtype)
        return hidden, mel

    # --- training ----------------------------------------------------------------------------------
    def forward(self, batch: Batch) -> FastSpeech2Output:
        """Teacher-forced pass with the batch's durations, pitch and energy."""
        if batch.durations is None or batch.pitch is None or batch.energy is None:
            raise ValueError("FastSpeech2 needs batch.durations, batch.pitch and batch.energy (extract features first)")
        token_mask = batch.token_mask()
        frame_mask = batch.mel_mask()
        durations = batch.durations.long() * token_mask  # garbage on padded tokens must not expand
        check_durations(durations, batch.token_lengths, batch.mel_lengths)
        n_frames = batch.mels.shape[2]
        fmask = frame_mask.to(batch.mels.dtype)
        targets = self.variance.targets(durations, batch.pitch * fmask, batch.energy * fmask, token_mask)
        h = self.encode(batch.tokens, token_mask)
        var = self.variance(h, token_mask, pitch_target=targets.pitch, energy_target=targets.energy)
        reg = regulate_length(var.hidden, durations, max_len=n_frames)
        mel_target = self.normalise(batch.mels) * fmask[:, None, :]
        frames, layout = reg.frames, None
        if self.block_prenet is not None:
            layout = BlockLayout(self._training_block_frames(n_frames), self.block_past_frames)
            # teacher forcing: each block reads the ground-truth mel before its start
            prenet = self.block_prenet.teacher_forced(mel_target, n_frames, layout.block_frames)
            frames = frames + prenet * fmask[:, :, None]
        hidden, mel_coarse = self.decode(frames, frame_mask, layout)
        return FastSpeech2Output(
            mel_coarse, mel_target, hidden, frame_mask, token_mask, var.log_durations, var.pitch, var.energy, targets
        )

    def _training_block_frames(self, n_frames: int) -> int:
        """One block size per batch: drawn from block_sizes in training (torch's RNG, so seeded runs
        repeat), block_val_frames in eval mode; 0 means the whole batch's frames."""
        assert self.block_sizes is not None
        if self.training:
            size = self.block_sizes[int(torch.randint(len(self.block_sizes), (1,)))]
        else:
            size = self.block_val_frames
        return max(1, min(size, n_frames) if size > 0 else n_frames)

    def loss(self, batch: Batch) -> LossOutput:
        out = self(batch)
        tm = out.token_mask.to(out.mel_coarse.dtype)  # [B, L]
        fm = out.frame_mask.to(out.mel_coarse.dtype)  # [B, T]
        n_tokens = tm.sum().clamp_min(1.0)

        def token_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return (((pred - target) ** 2) * tm).sum() / n_tokens

        mel_l1 = ((out.mel_coarse - out.mel_target).abs() * fm[:, None, :]).sum() / (fm.sum() * self.n_mels).clamp_min(1.0)
        duration_mse = token_mse(out.log_durations, out.targets.log_durations)
        pitch_mse = token_mse(out.pitch, out.targets.pitch)
        energy_mse = token_mse(out.energy, out.targets.energy)
        total = (
            mel_l1
            + self.duration_loss_weight * duration_mse
            + self.pitch_loss_weight * pitch_mse
            + self.energy_loss_weight * energy_mse
        )
        terms = {"mel_l1": mel_l1, "duration_mse": duration_mse, "pitch_mse": pitch_mse, "energy_mse": energy_mse}
        coarse, cond = self._refiner_inputs(out)
        if self.refiner is not None:
            refiner_fm = self.refiner.loss(out.mel_target, coarse, cond, out.frame_mask)
            total = total + self.refiner_loss_weight * refiner_fm
            terms["refiner_fm"] = refiner_fm
        with torch.no_grad():  # length accuracy as inference would see it (speed 1, no min-frames bump)
            pred_d = torch.round(torch.exp(out.log_durations) - 1.0).clamp_min(0.0) * tm
            true_d = torch.expm1(out.targets.log_durations)
            terms["length_abs_error_frames"] = (pred_d.sum(1) - true_d.sum(1)).abs().mean()
            terms["duration_abs_error_frames"] = ((pred_d - true_d).abs() * tm).sum() / n_tokens
        terms = {k: v.detach() for k, v in terms.items()}
        return LossOutput(total=total, terms=terms, images=self._images(out, coarse, cond))

    def _refiner_inputs(self, out: FastSpeech2Output) -> tuple[torch.Tensor, torch.Tensor]:
        """(coarse [B, M, T], cond [B, D, T]) for the refiner, detached unless refiner_detach_coarse is off."""
        coarse, cond = out.mel_coarse, out.decoder_hidden.transpose(1, 2)
        if self.refiner_detach_coarse:
            coarse, cond = coarse.detach(), cond.detach()
        return coarse, cond

    @torch.no_grad()
    def _images(self, out: FastSpeech2Output, coarse: torch.Tensor, cond: torch.Tensor) -> dict[str, torch.Tensor]:
        """Item 0, raw log-mel [M, T0].  The refined mel (K steps) only outside training, where it is cheap."""
        n = int(out.frame_mask[0].sum())
        mask0 = out.frame_mask[:1, :n]
        images = {
            "mel_target": self.denormalise(out.mel_target[:1, :, :n], mask0)[0],
            "mel_pred": self.denormalise(out.mel_coarse[:1, :, :n], mask0)[0],
        }
        if self.refiner is not None and not self.training and self.refine_steps > 0:
            refined = self.refiner.sample(coarse[:1, :, :n], cond[:1, :, :n], mask0, self.refine_steps).mels
            images["mel_refined"] = self.denormalise(refined, mask0)[0]
        return {k: v.detach().float().cpu() for k, v in images.items()}

    # --- inference ---------------------------------------------------------------------------------
    @torch.no_grad()
    def infer(
        self,
        tokens: torch.Tensor,
        token_lengths: torch.Tensor,
        refine_steps: int | None = None,
        speed: float = 1.0,
        pitch_shift: float = 0.0,
        pitch_scale: float = 1.0,
        energy_scale: float = 1.0,
        refine_early_stop: float | None = None,
        temperature: float | None = None,
        durations: torch.Tensor | None = None,
        noise_seeds: Sequence[int] | None = None,
        block_frames: int | None = None,
    ) -> NARInferenceOutput:
        """tokens [B, L], token_lengths [B] -> NARInferenceOutput (raw log-mel).  Call `.eval()` first.

        refine_steps: K Euler steps (None = the constructor's default; 0 = coarse mel only, exactly).
        speed: > 1 speaks faster (`speed_durations`: durations divided by speed before rounding, no phone silenced).
        pitch_shift: semitones added to every token's F0; pitch_scale: multiplies the log-F0 deviation
        from the utterance mean (0 = monotone).  energy_scale: multiplies the raw energy.
        refine_early_stop: stop when a step's update RMS (normalised units) falls below this.
        temperature: scales the refiner's starting noise (None = the constructor's refine_temperature;
        0 = deterministic).
        durations: [B, L] frames per token to use instead of the predicted ones (e.g. ground truth for
        evaluation); speed still applies if != 1.
        noise_seeds: one refiner-noise seed per item (tts.models.refiner.item_noise_seed; None = 0..B-1):
        each item's starting noise comes from its own generator, so with the same seed an item's mel does
        not depend on its batch.  The early-stop decision is taken for the whole batch; everything else
        is per item.
        block_frames: decode in blocks of this many frames (block-mode checkpoints only; None = the
        model's default; 0 = one block, i.e. parallel).
        """
        steps, temperature = self._refine_controls(refine_steps, temperature)
        bf = self._check_block_frames(block_frames)
        plan = self.prepare(tokens, token_lengths, speed, pitch_shift, pitch_scale, energy_scale, durations)
        frame_mask = plan.frame_mask
        if bf is None:
            hidden, coarse = self.decode(plan.frames, frame_mask)
        else:
            blocks = list(self.block_decoder(bf or plan.frames.shape[1] or 1).blocks(plan.frames, frame_mask))
            if blocks:
                hidden = torch.cat([b.hidden for b in blocks], 1)
                coarse = torch.cat([b.coarse for b in blocks], 2)
            else:  # zero frames
                hidden, coarse = self.decode(plan.frames, frame_mask)
        coarse_raw = self.denormalise(coarse, frame_mask)
        taken = 0
        mels = coarse_raw
        if self.refiner is not None and steps > 0:
            refined = self.refiner.sample(
                coarse, hidden.transpose(1, 2), frame_mask, steps, temperature, refine_early_stop, noise_seeds
            )
            mels, taken = self.denormalise(refined.mels, frame_mask), refined.steps_taken
        return NARInferenceOutput(
            mels=mels,
            mel_lengths=plan.mel_lengths,
            coarse_mels=coarse_raw,
            durations=plan.durations,
            refine_steps_taken=taken,
            pitch=plan.pitch,
            energy=plan.energy,
            truncated=plan.truncated,
        )

    def inference_spec(self) -> InferenceSpec:
        """The controls `infer` takes and this checkpoint's own defaults (tts.runtime reads them)."""
        return InferenceSpec(
            controls=frozenset({"refine_steps", "temperature", "speed", "pitch_shift", "block_frames"}),
            block_mode=self.block_prenet is not None, autoregressive=False,
            defaults={"refine_steps": self.refine_steps if self.refiner is not None else 0,
                      "temperature": self.refine_temperature, "block_frames": self.block_frames or 0})

    def _refine_controls(self, refine_steps: int | None, temperature: float | None) -> tuple[int, float]:
        steps = self.refine_steps if refine_steps is None else int(refine_steps)
        if steps < 0:
            raise ValueError(f"refine_steps must be >= 0, got {steps}")
        temperature = self.refine_temperature if temperature is None else float(temperature)
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        return steps, temperature

    def _check_block_frames(self, block_frames: int | None) -> int | None:
        """None = the parallel decoder (a parallel checkpoint); else the block size (0 = whole utterance)."""
        bf = self.block_frames if block_frames is None else int(block_frames)
        if bf < 0:
            raise ValueError(f"block_frames must be >= 0 (0 = parallel), got {bf}")
        if self.block_prenet is None:
            if bf > 0:
                raise ValueError("this checkpoint was trained for parallel decoding only (no block_sizes): "
                                 "block_frames must be 0; train a block-mode model (experiment=nar_block_cpu_small)")
            return None
        return bf

    def block_decoder(self, block_frames: int) -> BlockDecoder:
        """The block-by-block decoder of this model's weights (block size in frames, >= 1)."""
        return BlockDecoder(self.decoder, self.mel_proj, self.block_prenet, BlockLayout(block_frames, self.block_past_frames))

    @torch.no_grad()
    def prepare(self, tokens: torch.Tensor, token_lengths: torch.Tensor, speed: float = 1.0, pitch_shift: float = 0.0,
                pitch_scale: float = 1.0, energy_scale: float = 1.0, durations: torch.Tensor | None = None) -> NARPlan:
        """The parallel part of `infer` (same controls): tokens [B, L] -> NARPlan with frames [B, T, D]."""
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        token_mask = lengths_to_mask(token_lengths, tokens.shape[1])
        var = self._front(tokens, token_mask, pitch_shift, pitch_scale, energy_scale)
        if durations is None:
            d = durations_from_log(var.log_durations, token_mask, speed, self.min_token_frames)
        else:
            d = durations.long() * token_mask
            if speed != 1.0:  # the one speed rule (its guards keep the first phone and every phone heard)
                d = speed_durations(d.float(), token_mask, speed)
        reg = regulate_length(var.hidden, d, max_frames=self.max_frames)
        frame_mask = lengths_to_mask(reg.frame_lengths, reg.frames.shape[1])
        return NARPlan(
            frames=reg.frames,
            frame_mask=frame_mask,
            mel_lengths=reg.frame_lengths,
            durations=reg.durations,
            pitch=self.variance.pitch_to_hz(var.pitch_used, token_mask),
            energy=self.variance.energy_to_raw(var.energy_used, token_mask),
            truncated=reg.truncated,
        )

    @torch.no_grad()
    def stream_mels(self, plan: NARPlan, block_frames: int | None = None, refine_steps: int | None = None,
                    temperature: float | None = None, noise_seeds: Sequence[int] | None = None,
                    refine_chunk_frames: int = 32) -> Iterator[MelChunk]:
        """The decoder and refiner of `infer` block by block: yields the final raw log-mel in order, each
        chunk as soon as it is determined (a block; with K refiner steps, K * R frames later, R the
        refiner's receptive half-width).  Equals `infer`'s mels within float rounding (tests/test_streaming.py).
        A parallel checkpoint (or block_frames 0) yields the whole utterance as one chunk.
        refine_chunk_frames: the refiner's smallest window of new frames (StreamingRefiner.min_chunk)."""
        steps, temperature = self._refine_controls(refine_steps, temperature)
        bf = self._check_block_frames(block_frames)
        frame_mask, t_total = plan.frame_mask, plan.frames.shape[1]
        if t_total == 0:
            return
        if bf is None:
            hidden, coarse = self.decode(plan.frames, frame_mask)
            blocks = iter([DecodedBlock(0, hidden, coarse)])
        else:
            blocks = self.block_decoder(bf or t_total).blocks(plan.frames, frame_mask)
        refiner = None
        if self.refiner is not None and steps > 0:
            noise = per_item_noise(torch.Size((frame_mask.shape[0], self.n_mels, t_total)),
                                   frame_mask.sum(dim=1).tolist(), noise_seeds).to(plan.frames.device, plan.frames.dtype)
            refiner = StreamingRefiner(self.refiner, steps, temperature, noise, frame_mask, refine_chunk_frames)
        done = 0
        for block in blocks:
            stop = block.start + block.coarse.shape[2]
            if refiner is None:
                ready = block.coarse
            else:
                ready = refiner.push(block.coarse, block.hidden.transpose(1, 2), final=stop >= t_total)
            n = ready.shape[2]
            if n:
                yield MelChunk(done, self.denormalise(ready, frame_mask[:, done : done + n]))
                done += n

    def num_parameters(self) -> dict[str, int]:
        """Parameter counts per part (for logs and reports)."""
        parts = {
            "embedding": self.embedding,
            **({"block_prenet": self.block_prenet} if self.block_prenet is not None else {}),
            "encoder": self.encoder,
            "variance_adaptor": self.variance,
            "decoder": self.decoder,
            "mel_proj": self.mel_proj,
        }
        if self.refiner is not None:
            parts["refiner"] = self.refiner
        counts = {k: sum(p.numel() for p in m.parameters()) for k, m in parts.items()}
        counts["total"] = sum(p.numel() for p in self.parameters())
        return counts

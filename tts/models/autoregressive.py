"""Tacotron 2-style autoregressive acoustic model (Shen et al. 2018), with reduction factor r.

tokens [B, L] -> encoder (embedding, convs, BiLSTM) -> memory [B, L, E]
              -> decoder: per step, prenet(last frame of previous group) -> attention LSTM ->
                 location-sensitive attention -> decoder LSTM -> r frames [B, r, M] + r stop logits
              -> postnet residual -> mel [B, M, T]

Feature normalisation lives inside the model (DESIGN.md section 2): the network works on
(log_mel - mel_mean) / mel_std with per-channel buffers (default: scalars fitting natural-log speech
mels, about mean -6, std 2.5; `set_normalizer` installs corpus statistics).  `forward` and `infer`
return raw natural-log mels, padded with `mel_pad_value` (the mel config's log floor).

Constructor defaults are the paper's size (512 embedding/encoder, 2 x 1024 decoder LSTMs, 256 prenet,
512 postnet, r = 1); conf/model/autoregressive.yaml holds the CPU-small size.

`ARAcousticModel` is what every AR acoustic model here shares (Tacotron 2, the Transformer AR of
tts/models/transformer_ar.py): the normaliser, the r-frame grouping of the teacher-forced input, the loss
(L1 + L2 before/after the postnet, stop BCE, decaying guided attention), the step limits, the stop
bookkeeping of a batched decode and the failure analysis.  A subclass supplies `_teacher_forced` and `infer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tts.data.batch import Batch, lengths_to_mask
from tts.models.layers.alignment import ARFailure, analyse_alignment, guided_attention_loss
from tts.models.layers.conv import Postnet, pad_to_multiple
from tts.models.layers.mel_statistics import install_mel_statistics
from tts.models.layers.tacotron_decoder import TacotronDecoder
from tts.models.layers.tacotron_encoder import TacotronEncoder
from tts.models.outputs import InferenceSpec, LossOutput, MelOutput

__all__ = [
    "ARAcousticModel", "ARStep", "StopTracker", "Tacotron2", "AROutput", "ARInferenceOutput", "ARFailure",
    "analyse_alignment",
]


@dataclass
class AROutput:
    """Teacher-forced outputs; mels are raw log-mel, T = the batch's frame count."""

    mel_before: torch.Tensor  # [B, M, T] decoder output (before postnet)
    mel_after: torch.Tensor  # [B, M, T] after the postnet residual
    stop_logits: torch.Tensor  # [B, T] per-frame stop logits
    alignments: torch.Tensor  # [B, ceil(T / r), L] attention weights per decoder step


@dataclass
class ARInferenceOutput(MelOutput):
    """mels [B, M, T] raw log-mel (padded with the log floor), mel_lengths [B] (inherited), plus:"""

    alignments: torch.Tensor  # [B, steps, L], zero after each item's stop
    failures: list[ARFailure]  # one per item


@dataclass
class _Normalised:
    """Internal teacher-forced outputs in normalised mel space, padded to T' = S * r frames."""

    mel_before: torch.Tensor  # [B, M, T']
    mel_after: torch.Tensor  # [B, M, T']
    stop_logits: torch.Tensor  # [B, T']
    alignments: torch.Tensor  # [B, S, L]


class ARAcousticModel(nn.Module):
    """The shared part of the AR acoustic models (module docstring).  A subclass builds its encoder/decoder and
    then `self.postnet` (in that order: parameter order is what optimizer state in a checkpoint is keyed by),
    and implements `_teacher_forced(batch) -> _Normalised` and `infer`."""

    postnet: Postnet
    # True where infer() takes noise_seeds (one RNG per item, so batched items equal each alone); False: the
    # prenet's dropout draws from torch's global RNG (Tacotron 2).
    item_noise_seeds: bool = False

    def __init__(
        self,
        n_mels: int,
        reduction_factor: int,
        mel_mean: float,
        mel_std: float,
        mel_pad_value: float,
        l1_weight: float,
        l2_weight: float,
        stop_weight: float,
        stop_pos_weight: float,
        guided_attention_weight: float,
        guided_attention_sigma: float,
        guided_attention_half_life: int | None,
        max_frames_per_token: float,
        max_extra_frames: int,
        skip_threshold: int,
        repeat_threshold: int,
        coverage_threshold: float,
        max_uncovered_fraction: float,
    ) -> None:
        super().__init__()
        if reduction_factor < 1:
            raise ValueError(f"reduction_factor must be >= 1, got {reduction_factor}")
        self.n_mels = n_mels
        self.r = reduction_factor
        self.mel_pad_value = mel_pad_value
        self.l1_weight, self.l2_weight = l1_weight, l2_weight
        self.stop_weight, self.stop_pos_weight = stop_weight, stop_pos_weight
        self.ga_weight, self.ga_sigma, self.ga_half_life = (
            guided_attention_weight, guided_attention_sigma, guided_attention_half_life
        )
        self.max_frames_per_token, self.max_extra_frames = max_frames_per_token, max_extra_frames
        self.failure_args = dict(
            skip_threshold=skip_threshold,
            repeat_threshold=repeat_threshold,
            coverage_threshold=coverage_threshold,
            max_uncovered_fraction=max_uncovered_fraction,
        )
        # Buffers so the normaliser travels in state_dict; [M] per channel.
        self.register_buffer("mel_mean", torch.full((n_mels,), float(mel_mean)))
        self.register_buffer("mel_std", torch.full((n_mels,), float(mel_std)))
        # Counts training loss() calls; drives the guided-attention decay and survives resume.
        self.register_buffer("loss_steps", torch.zeros((), dtype=torch.long))

    def _teacher_forced(self, batch: Batch) -> _Normalised:
        raise NotImplementedError

    # --- normalisation ----------------------------------------------------------------------------
    def set_normalizer(self, mean: torch.Tensor | float, std: torch.Tensor | float) -> None:
        """Install corpus statistics of the raw log-mel: mean/std scalars or [M] (tts.models.layers.mel_statistics)."""
        if (torch.as_tensor(std) <= 0).any():  # stats.json's near-constant channels are floored; a given std is not
            raise ValueError(f"mel std must be positive, got {std}")
        install_mel_statistics({"mean": mean, "std": std}, self.mel_mean, self.mel_std)

    def set_data_statistics(self, stats: dict) -> None:
        """Install data_prep's features/stats.json: stats["mel"]["mean"/"std"]; anything else, e.g. pitch/energy,
        is ignored; a missing entry keeps its current value."""
        install_mel_statistics(stats.get("mel") or {}, self.mel_mean, self.mel_std)

    def normalise(self, mel: torch.Tensor) -> torch.Tensor:
        """raw log-mel [B, M, T] -> normalised."""
        return (mel - self.mel_mean[:, None]) / self.mel_std[:, None]

    def denormalise(self, mel: torch.Tensor) -> torch.Tensor:
        return mel * self.mel_std[:, None] + self.mel_mean[:, None]

    def _to_raw(self, mel: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """normalised [B, M, T] -> raw log-mel with frames >= lengths set to the pad value."""
        mask = lengths_to_mask(lengths, mel.shape[2])[:, None, :]
        return self.denormalise(mel).masked_fill(~mask, self.mel_pad_value)

    # --- teacher forcing ----------------------------------------------------------------------------
    def _postnet(self, mel_before: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mask the coarse mel [B, M, T] beyond `lengths` and add the postnet residual -> (before, after)."""
        mask = lengths_to_mask(lengths, mel_before.shape[2])[:, None, :]
        mel_before = mel_before.masked_fill(~mask, 0.0)
        return mel_before, (mel_before + self.postnet(mel_before, mask)).masked_fill(~mask, 0.0)

    def _target(self, batch: Batch) -> torch.Tensor:
        """Normalised target [B, M, T'] padded to a multiple of r, zero (the mean mel) beyond each length:
        what the padding held (even inf/NaN) can then reach neither the decoder inputs nor the loss."""
        target = pad_to_multiple(self.normalise(batch.mels), self.r)
        mask = lengths_to_mask(batch.mel_lengths, target.shape[2])[:, None, :]
        return torch.where(mask, target, 0.0)

    def _decoder_inputs(self, target: torch.Tensor) -> torch.Tensor:
        """target [B, M, T'] (T' = S * r) -> decoder inputs [B, S, M]: the input of step s is the last frame of
        group s - 1 (the all-zero go frame, the normaliser's mean mel, for s = 0)."""
        B, M, T_pad = target.shape
        groups = target.transpose(1, 2).reshape(B, T_pad // self.r, self.r, M)  # [B, S, r, M]
        return torch.cat([self.go_frame(B, target)[:, None], groups[:, :-1, -1]], dim=1)

    def go_frame(self, batch_size: int, like: torch.Tensor) -> torch.Tensor:
        """[B, M] all-zero frame fed at step 0 (zero = the normaliser's mean mel)."""
        return like.new_zeros(batch_size, self.n_mels)

    def _normalised(self, frames: torch.Tensor, stop_logits: torch.Tensor, alignments: torch.Tensor,
                    mel_lengths: torch.Tensor) -> _Normalised:
        """Decoder outputs frames [B, S, r, M], stop_logits [B, S, r], alignments [B, S, L] -> _Normalised."""
        B, S, r, M = frames.shape
        mel_before = frames.reshape(B, S * r, M).transpose(1, 2)  # [B, M, T']
        mel_before, mel_after = self._postnet(mel_before, mel_lengths)
        return _Normalised(mel_before, mel_after, stop_logits.reshape(B, S * r), alignments)

    def forward(self, batch: Batch) -> AROutput:
        out = self._teacher_forced(batch)
        T = batch.mels.shape[2]
        return AROutput(
            mel_before=self._to_raw(out.mel_before[:, :, :T], batch.mel_lengths),
            mel_after=self._to_raw(out.mel_after[:, :, :T], batch.mel_lengths),
            stop_logits=out.stop_logits[:, :T],
            alignments=out.alignments,
        )

    # --- loss -------------------------------------------------------------------------------------------
    def stop_targets(self, mel_lengths: torch.Tensor, n_frames: int) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (target [B, n_frames] float, 1 from the last real frame on; mask [B, n_frames] bool).

        The mask keeps every frame of every decoder step that holds a real frame (frames < ceil(len/r)*r):
        those steps are fed real frames only, so neither target nor logit depends on the padding."""
        frames = torch.arange(n_frames, device=mel_lengths.device)[None, :]
        target = (frames >= (mel_lengths[:, None] - 1)).float()
        step_lengths = (mel_lengths + self.r - 1) // self.r
        return target, frames < (step_lengths * self.r)[:, None]

    def guided_attention_current_weight(self) -> float:
        if self.ga_half_life is None or self.ga_half_life <= 0:
            return self.ga_weight
        return self.ga_weight * 0.5 ** (float(self.loss_steps) / self.ga_half_life)

    def loss(self, batch: Batch) -> LossOutput:
        out = self._teacher_forced(batch)
        T_pad = out.mel_before.shape[2]
        target = self._target(batch)  # [B, M, T']
        frame_mask = lengths_to_mask(batch.mel_lengths, T_pad)[:, None, :].to(target.dtype)  # [B, 1, T']
        n_values = frame_mask.sum() * self.n_mels

        def masked_mean(x: torch.Tensor) -> torch.Tensor:
            return (x * frame_mask).sum() / n_values

        diff_before = out.mel_before - target  # both are zero beyond the lengths
        diff_after = out.mel_after - target
        terms = {
            "mel_l1_before": masked_mean(diff_before.abs()),
            "mel_l1_after": masked_mean(diff_after.abs()),
            "mel_l2_before": masked_mean(diff_before**2),
            "mel_l2_after": masked_mean(diff_after**2),
        }
        stop_target, stop_mask = self.stop_targets(batch.mel_lengths, T_pad)
        bce = F.binary_cross_entropy_with_logits(
            out.stop_logits, stop_target, reduction="none",
            pos_weight=torch.tensor(self.stop_pos_weight, device=stop_target.device),
        )  # fmt: skip
        terms["stop_bce"] = (bce * stop_mask).sum() / stop_mask.sum()
        step_lengths = (batch.mel_lengths + self.r - 1) // self.r
        ga_weight = self.guided_attention_current_weight()
        if ga_weight > 0:
            terms["guided_attention"] = guided_attention_loss(
                out.alignments, step_lengths, batch.token_lengths, self.ga_sigma
            )
        else:
            terms["guided_attention"] = out.alignments.new_zeros(())
        total = (
            self.l1_weight * (terms["mel_l1_before"] + terms["mel_l1_after"])
            + self.l2_weight * (terms["mel_l2_before"] + terms["mel_l2_after"])
            + self.stop_weight * terms["stop_bce"]
            + ga_weight * terms["guided_attention"]
        )
        if self.training:
            self.loss_steps += 1
        n0, s0, t0 = int(batch.token_lengths[0]), int(step_lengths[0]), int(batch.mel_lengths[0])
        images = {
            "alignment": out.alignments[0, :s0, :n0].detach().T,  # [L0, S0]
            "mel_target": batch.mels[0, :, :t0].detach(),  # [M, T0] raw log-mel
            "mel_pred": self.denormalise(out.mel_after[:1, :, :t0]).detach()[0],  # [M, T0]
        }
        return LossOutput(
            total=total,
            terms={k: v.detach() for k, v in terms.items()} | {"guided_attention_weight": torch.tensor(ga_weight)},
            images=images,
        )

    @torch.no_grad()
    def teacher_forced_alignment(self, batch: Batch) -> torch.Tensor:
        """-> [B, T, L] attention at frame rate (each decoder step repeated r times), zero on frames
        >= mel_lengths and tokens >= token_lengths.  Runs in the module's current mode; call .eval()."""
        alignments = self._teacher_forced(batch).alignments  # [B, S, L]
        T = batch.mels.shape[2]
        frames = alignments.repeat_interleave(self.r, dim=1)[:, :T]  # [B, T, L]
        return frames * batch.mel_mask()[:, :, None].to(frames.dtype)

    # --- inference --------------------------------------------------------------------------------------
    def default_max_steps(self, token_lengths: torch.Tensor) -> torch.Tensor:
        """Per-item step limit [B]: ceil((tokens * max_frames_per_token + max_extra_frames) / r).
        15 frames (~0.17 s) per token is about twice a slow speaking rate for phoneme input; the extra
        frames cover leading/trailing silence of very short inputs."""
        frames = token_lengths.float() * self.max_frames_per_token + self.max_extra_frames
        return torch.ceil(frames / self.r).long()

    @torch.no_grad()
    def inference_spec(self) -> InferenceSpec:
        """An AR model takes no control but the seed (its prenet dropout stays on at inference); whether its
        `infer` takes per-item `noise_seeds` is the class's `item_noise_seeds`."""
        return InferenceSpec(controls=frozenset(), block_mode=False, autoregressive=True, defaults={},
                             item_noise_seeds=self.item_noise_seeds)

    def step_limits(self, token_lengths: torch.Tensor, max_decoder_steps: int | None) -> torch.Tensor:
        """[B] decoder steps each item may take: `max_decoder_steps` for all, else `default_max_steps`."""
        if max_decoder_steps is None:
            return self.default_max_steps(token_lengths)
        return torch.full_like(token_lengths, int(max_decoder_steps), dtype=torch.long)

    def _decode(self, step: Callable[[int, torch.Tensor], ARStep], stops: StopTracker, first_frame: torch.Tensor,
                token_lengths: torch.Tensor) -> ARInferenceOutput:
        """THE free-running loop of a batched AR decode: step(s, previous frame [B, M]) -> the next r frames, until
        every item has stopped or reached its limit (finished items keep being decoded; their alignment rows are
        zeroed here, their frames masked at the end), then the postnet, raw log-mel padded beyond each item's
        length, and each item's failure verdict."""
        frame, frames, alignments = first_frame, [], []
        for s in range(int(stops.limits.max())):
            out = step(s, frame)
            frames.append(out.frames)
            alignments.append(out.attention * stops.update(s, out.stop_logits)[:, None])
            frame = out.frames[:, -1]
            if stops.done:
                break
        B, n_steps = token_lengths.shape[0], len(frames)
        mel = torch.stack(frames, dim=1).reshape(B, n_steps * self.r, self.n_mels).transpose(1, 2)  # [B, M, T]
        lengths = stops.lengths.clamp(max=n_steps * self.r)
        _, mel_after = self._postnet(mel, lengths)
        T = int(lengths.max())
        align = torch.stack(alignments, dim=1)  # [B, steps, L]
        item_steps = (lengths + self.r - 1) // self.r
        failures = [
            analyse_alignment(
                align[b, : item_steps[b], : token_lengths[b]], stopped=bool(stops.stopped[b]), **self.failure_args
            )
            for b in range(B)
        ]
        return ARInferenceOutput(
            mels=self._to_raw(mel_after[:, :, :T], lengths),
            mel_lengths=lengths,
            alignments=align,
            failures=failures,
        )


@dataclass
class ARStep:
    """One decoder step of a batch, what the free-running loop reads (normalised mel space)."""

    frames: torch.Tensor  # [B, r, M]
    stop_logits: torch.Tensor  # [B, r]
    attention: torch.Tensor  # [B, L]


class StopTracker:
    """The stop bookkeeping of one batched free-running decode of r frames a step.  Each item stops at the first
    frame whose stop probability exceeds `threshold` (its length is fixed there) or at its step limit; finished
    items keep being decoded with the batch, and `update` says which items were still live at that step."""

    def __init__(self, limits: torch.Tensor, r: int, threshold: float) -> None:
        self.limits, self.r, self.threshold = limits, r, threshold  # limits [B] steps
        self.finished = torch.zeros_like(limits, dtype=torch.bool)
        self.stopped = torch.zeros_like(self.finished)  # by the stop token (not by the limit)
        self.lengths = limits * r  # [B] frames; overwritten at each item's stop

    def update(self, step: int, stop_logits: torch.Tensor) -> torch.Tensor:
        """stop_logits [B, r] of decoder step `step` -> live [B] bool: items that were still decoding at it."""
        live = ~self.finished
        fired = torch.sigmoid(stop_logits) > self.threshold  # [B, r]
        stop_now = fired.any(dim=1) & live
        first = fired.float().argmax(dim=1)  # first frame of the group that fired
        self.lengths = torch.where(stop_now, step * self.r + first + 1, self.lengths)
        self.stopped |= stop_now
        self.finished |= stop_now | (step + 1 >= self.limits)
        return live

    @property
    def done(self) -> bool:
        return bool(self.finished.all())


class Tacotron2(ARAcousticModel):
    def __init__(
        self,
        n_symbols: int,
        n_mels: int,
        reduction_factor: int = 1,
        # encoder
        embedding_dim: int = 512,
        encoder_dim: int = 512,
        encoder_n_convs: int = 3,
        encoder_kernel_size: int = 5,
        encoder_dropout: float = 0.5,
        # decoder
        prenet_dim: int = 256,
        prenet_layers: int = 2,
        prenet_dropout: float = 0.5,
        prenet_dropout_at_inference: bool = True,
        attention_rnn_dim: int = 1024,
        decoder_rnn_dim: int = 1024,
        attention_dim: int = 128,
        location_filters: int = 32,
        location_kernel_size: int = 31,
        attention_dropout: float = 0.1,
        decoder_dropout: float = 0.1,
        # postnet
        postnet_channels: int = 512,
        postnet_layers: int = 5,
        postnet_kernel_size: int = 5,
        postnet_dropout: float = 0.5,
        # features
        mel_mean: float = -6.0,
        mel_std: float = 2.5,
        mel_pad_value: float = math.log(1e-5),
        padding_idx: int = 0,
        # loss
        l1_weight: float = 1.0,
        l2_weight: float = 1.0,
        stop_weight: float = 1.0,
        stop_pos_weight: float = 10.0,
        guided_attention_weight: float = 0.0,
        guided_attention_sigma: float = 0.2,
        guided_attention_half_life: int | None = None,
        # inference limits and failure detection
        max_frames_per_token: float = 15.0,
        max_extra_frames: int = 100,
        skip_threshold: int = 4,
        repeat_threshold: int = 2,
        coverage_threshold: float = 0.5,
        max_uncovered_fraction: float = 0.2,
    ) -> None:
        super().__init__(
            n_mels, reduction_factor, mel_mean, mel_std, mel_pad_value, l1_weight, l2_weight, stop_weight,
            stop_pos_weight, guided_attention_weight, guided_attention_sigma, guided_attention_half_life,
            max_frames_per_token, max_extra_frames, skip_threshold, repeat_threshold, coverage_threshold,
            max_uncovered_fraction,
        )  # fmt: skip
        self.encoder = TacotronEncoder(
            n_symbols, embedding_dim, encoder_dim, encoder_n_convs, encoder_kernel_size, encoder_dropout, padding_idx
        )
        self.decoder = TacotronDecoder(
            n_mels, encoder_dim, reduction_factor, prenet_dim, prenet_layers, prenet_dropout,
            prenet_dropout_at_inference, attention_rnn_dim, decoder_rnn_dim, attention_dim, location_filters,
            location_kernel_size, attention_dropout, decoder_dropout,
        )  # fmt: skip
        self.postnet = Postnet(n_mels, postnet_channels, postnet_layers, postnet_kernel_size, postnet_dropout)


    def _teacher_forced(self, batch: Batch) -> _Normalised:
        memory = self.encoder(batch.tokens, batch.token_lengths)  # [B, L, E]
        mem, _ = self.decoder.start(memory, batch.token_mask())
        out = self.decoder.teacher_forced(self._decoder_inputs(self._target(batch)), mem)
        return self._normalised(out.frames, out.stop_logits, out.alignments, batch.mel_lengths)

    def infer(
        self,
        tokens: torch.Tensor,
        token_lengths: torch.Tensor,
        max_decoder_steps: int | None = None,
        stop_threshold: float = 0.5,
    ) -> ARInferenceOutput:
        """Batched free-running decode.  Each item stops at the first frame whose stop probability exceeds
        `stop_threshold` (its length is fixed there, its later frames are padding and its alignment rows
        zero) or at its step limit (`max_decoder_steps` for all items, else `default_max_steps`).
        The prenet's dropout draws from torch's global RNG."""
        B, L = tokens.shape
        token_mask = lengths_to_mask(token_lengths, L)
        memory = self.encoder(tokens, token_lengths)
        mem, state = self.decoder.start(memory, token_mask)
        stops = StopTracker(self.step_limits(token_lengths, max_decoder_steps), self.r, stop_threshold)

        def step(s: int, frame: torch.Tensor) -> ARStep:
            nonlocal state
            out = self.decoder.step(self.decoder.prenet(frame), state, mem)
            state = out.state
            return ARStep(out.frames, out.stop_logits, out.attention)

        return self._decode(step, stops, self.go_frame(B, memory), token_lengths)

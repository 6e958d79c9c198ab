"""Attention-alignment utilities: guided-attention prior (training) and failure analysis (inference).

Both are pure functions of alignment matrices so they are testable on synthetic matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tts.data.batch import lengths_to_mask


def guided_attention_weights(
    step_lengths: torch.Tensor, token_lengths: torch.Tensor, n_steps: int, n_tokens: int, sigma: float = 0.2
) -> torch.Tensor:
    """Tachibana et al. (2017) diagonal prior W[b, s, l] = 1 - exp(-(l/L_b - s/S_b)^2 / (2 sigma^2)).

    step_lengths [B] (valid decoder steps S_b), token_lengths [B] (L_b) -> W [B, n_steps, n_tokens],
    zero outside each item's valid S_b x L_b block.
    """
    s = torch.arange(n_steps, device=step_lengths.device, dtype=torch.float32)[None, :, None]
    l = torch.arange(n_tokens, device=step_lengths.device, dtype=torch.float32)[None, None, :]
    S = step_lengths.float()[:, None, None]
    L = token_lengths.float()[:, None, None]
    w = 1.0 - torch.exp(-((l / L - s / S) ** 2) / (2.0 * sigma**2))
    valid = lengths_to_mask(step_lengths, n_steps)[:, :, None] & lengths_to_mask(token_lengths, n_tokens)[:, None, :]
    return w * valid


def guided_attention_loss(
    alignments: torch.Tensor, step_lengths: torch.Tensor, token_lengths: torch.Tensor, sigma: float = 0.2
) -> torch.Tensor:
    """alignments [B, S, L] -> scalar: mean over valid decoder steps of the attention mass placed off the
    diagonal (each step's weights sum to 1, so the value lies in [0, 1]; ~0 for a diagonal alignment)."""
    _, n_steps, n_tokens = alignments.shape
    w = guided_attention_weights(step_lengths, token_lengths, n_steps, n_tokens, sigma).to(alignments.dtype)
    return (alignments * w).sum() / step_lengths.sum().clamp_min(1)


@dataclass
class ARFailure:
    """Per-item verdict on one autoregressive decode (DESIGN.md section 1: known AR failures)."""

    no_stop: bool  # stop token never fired before max_decoder_steps
    skip: bool  # attention argmax jumped forward by more than `skip_threshold` tokens in one step
    repeat: bool  # attention argmax moved back by more than `repeat_threshold` tokens in one step
    low_coverage: bool  # too many tokens never received cumulative attention >= coverage_threshold
    max_forward_jump: int  # largest forward argmax move in one decoder step (tokens)
    max_backward_jump: int  # largest backward argmax move in one decoder step (tokens, >= 0)
    uncovered_fraction: float  # fraction of tokens with cumulative attention < coverage_threshold
    n_steps: int  # decoder steps analysed
    n_tokens: int  # encoder steps analysed

    @property
    def ok(self) -> bool:
        return not (self.no_stop or self.skip or self.repeat or self.low_coverage)


def analyse_alignment(
    alignment: torch.Tensor,
    stopped: bool,
    skip_threshold: int = 4,
    repeat_threshold: int = 2,
    coverage_threshold: float = 0.5,
    max_uncovered_fraction: float = 0.2,
) -> ARFailure:
    """alignment [steps, L] of ONE item (already trimmed to its decoded steps and real tokens).

    Thresholds are in encoder steps (tokens).  Defaults suit r = 1..3 on phoneme input, where a healthy
    alignment advances by well under one token per step on average and its argmax may flicker back by one.
    """
    if alignment.dim() != 2:
        raise ValueError(f"alignment must be [steps, L], got shape {tuple(alignment.shape)}")
    n_steps, n_tokens = alignment.shape
    alignment = alignment.detach().float()
    if n_steps == 0 or n_tokens == 0:
        return ARFailure(not stopped, False, False, True, 0, 0, 1.0, n_steps, n_tokens)
    peaks = alignment.argmax(dim=1)  # [steps]
    moves = peaks[1:] - peaks[:-1]
    max_forward = int(moves.max().clamp_min(0)) if moves.numel() else 0
    max_backward = int((-moves).max().clamp_min(0)) if moves.numel() else 0
    coverage = alignment.sum(dim=0)  # [L] cumulative attention each token received
    uncovered = float((coverage < coverage_threshold).float().mean())
    return ARFailure(
        no_stop=not stopped,
        skip=max_forward > skip_threshold,
        repeat=max_backward > repeat_threshold,
        low_coverage=uncovered > max_uncovered_fraction,
        max_forward_jump=max_forward,
        max_backward_jump=max_backward,
        uncovered_fraction=uncovered,
        n_steps=n_steps,
        n_tokens=n_tokens,
    )

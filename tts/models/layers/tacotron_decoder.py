"""Tacotron 2 autoregressive decoder: prenet -> attention LSTM -> location-sensitive attention ->
decoder LSTM -> r mel frames + r stop logits per step.

The interface is step-wise (`start` once, then `step` per group of r frames) so that teacher forcing,
free-running inference and later semi-autoregressive schemes all drive the same cell, and nothing is
ever recomputed over the prefix: the per-step state is O(B x (H + L)).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tts.models.layers.attention import LocationSensitiveAttention
from tts.models.layers.prenet import Prenet


@dataclass
class DecoderMemory:
    """What stays constant while decoding one batch."""

    memory: torch.Tensor  # [B, L, E] encoder output
    processed: torch.Tensor  # [B, L, A] attention's memory projection, computed once
    mask: torch.Tensor  # [B, L] bool, True on real tokens


@dataclass
class DecoderState:
    """Recurrent state carried from one decoder step to the next."""

    attention_hidden: torch.Tensor  # [B, H_att]
    attention_cell: torch.Tensor  # [B, H_att]
    decoder_hidden: torch.Tensor  # [B, H_dec]
    decoder_cell: torch.Tensor  # [B, H_dec]
    context: torch.Tensor  # [B, E] previous attention context
    attention_weights: torch.Tensor  # [B, L] previous attention weights
    attention_cumulative: torch.Tensor  # [B, L] sum of all previous attention weights


@dataclass
class DecoderStepOutput:
    frames: torch.Tensor  # [B, r, M] next r frames (normalised mel space)
    stop_logits: torch.Tensor  # [B, r] one stop logit per frame
    attention: torch.Tensor  # [B, L] this step's attention weights
    state: DecoderState


@dataclass
class TeacherForcedOutput:
    frames: torch.Tensor  # [B, S, r, M]
    stop_logits: torch.Tensor  # [B, S, r]
    alignments: torch.Tensor  # [B, S, L]


class TacotronDecoder(nn.Module):
    def __init__(
        self,
        n_mels: int,
        memory_dim: int,
        reduction_factor: int = 1,
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
    ) -> None:
        super().__init__()
        if reduction_factor < 1:
            raise ValueError(f"reduction_factor must be >= 1, got {reduction_factor}")
        self.n_mels = n_mels
        self.r = reduction_factor
        self.memory_dim = memory_dim
        self.prenet = Prenet(n_mels, prenet_dim, prenet_layers, prenet_dropout, prenet_dropout_at_inference)
        self.attention_rnn = nn.LSTMCell(prenet_dim + memory_dim, attention_rnn_dim)
        self.attention = LocationSensitiveAttention(
            attention_rnn_dim, memory_dim, attention_dim, location_filters, location_kernel_size
        )
        self.decoder_rnn = nn.LSTMCell(attention_rnn_dim + memory_dim, decoder_rnn_dim)
        self.frame_projection = nn.Linear(decoder_rnn_dim + memory_dim, n_mels * reduction_factor)
        self.stop_projection = nn.Linear(decoder_rnn_dim + memory_dim, reduction_factor)
        self.attention_dropout = attention_dropout
        self.decoder_dropout = decoder_dropout

    # --- setup ---------------------------------------------------------------------------------------
    def start(self, memory: torch.Tensor, mask: torch.Tensor) -> tuple[DecoderMemory, DecoderState]:
        """memory [B, L, E], mask [B, L] -> constant memory + zero initial state."""
        B, L, _ = memory.shape
        zeros = lambda n: memory.new_zeros(B, n)  # noqa: E731
        mem = DecoderMemory(memory=memory, processed=self.attention.process_memory(memory), mask=mask)
        state = DecoderState(
            attention_hidden=zeros(self.attention_rnn.hidden_size),
            attention_cell=zeros(self.attention_rnn.hidden_size),
            decoder_hidden=zeros(self.decoder_rnn.hidden_size),
            decoder_cell=zeros(self.decoder_rnn.hidden_size),
            context=zeros(self.memory_dim),
            attention_weights=zeros(L),
            attention_cumulative=zeros(L),
        )
        return mem, state

    # --- one step --------------------------------------------------------------------------------------
    def step(self, prenet_out: torch.Tensor, state: DecoderState, mem: DecoderMemory) -> DecoderStepOutput:
        """prenet_out [B, P] (prenet of the last frame of the previous group) -> next r frames."""
        att_h, att_c = self.attention_rnn(
            torch.cat([prenet_out, state.context], dim=-1), (state.attention_hidden, state.attention_cell)
        )
        att_h = F.dropout(att_h, self.attention_dropout, self.training)
        att = self.attention(
            att_h, mem.memory, mem.processed, state.attention_weights, state.attention_cumulative, mem.mask
        )
        dec_h, dec_c = self.decoder_rnn(
            torch.cat([att_h, att.context], dim=-1), (state.decoder_hidden, state.decoder_cell)
        )
        dec_h = F.dropout(dec_h, self.decoder_dropout, self.training)
        out = torch.cat([dec_h, att.context], dim=-1)  # [B, H_dec + E]
        frames = self.frame_projection(out).view(-1, self.r, self.n_mels)  # [B, r, M]
        stop_logits = self.stop_projection(out)  # [B, r]
        new_state = DecoderState(
            attention_hidden=att_h,
            attention_cell=att_c,
            decoder_hidden=dec_h,
            decoder_cell=dec_c,
            context=att.context,
            attention_weights=att.weights,
            attention_cumulative=state.attention_cumulative + att.weights,
        )
        return DecoderStepOutput(frames=frames, stop_logits=stop_logits, attention=att.weights, state=new_state)

    # --- teacher forcing ------------------------------------------------------------------------------
    def teacher_forced(self, previous_frames: torch.Tensor, mem: DecoderMemory) -> TeacherForcedOutput:
        """previous_frames [B, S, M]: the decoder input of each step (go frame, then the last target frame
        of each previous group).  The prenet runs over all steps at once; only the RNNs loop."""
        _, state = self.start(mem.memory, mem.mask)
        prenet_out = self.prenet(previous_frames)  # [B, S, P]
        frames, stops, alignments = [], [], []
        for s in range(previous_frames.shape[1]):
            out = self.step(prenet_out[:, s], state, mem)
            state = out.state
            frames.append(out.frames)
            stops.append(out.stop_logits)
            alignments.append(out.attention)
        return TeacherForcedOutput(
            frames=torch.stack(frames, dim=1), stop_logits=torch.stack(stops, dim=1), alignments=torch.stack(alignments, 1)
        )

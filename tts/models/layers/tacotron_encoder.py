"""Tacotron 2 text encoder: embedding -> N x (conv, BN, ReLU, dropout) -> BiLSTM (packed by lengths)."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tts.data.batch import lengths_to_mask
from tts.models.layers.conv import ConvStack


class TacotronEncoder(nn.Module):
    """tokens [B, L] long, lengths [B] -> memory [B, L, channels] (zeros on padded tokens)."""

    def __init__(
        self,
        n_symbols: int,
        embedding_dim: int = 512,
        channels: int = 512,
        n_convs: int = 3,
        kernel_size: int = 5,
        dropout: float = 0.5,
        padding_idx: int = 0,
    ) -> None:
        super().__init__()
        if channels % 2:
            raise ValueError(f"encoder channels must be even (BiLSTM halves), got {channels}")
        self.embedding = nn.Embedding(n_symbols, embedding_dim, padding_idx=padding_idx)
        # NVIDIA Tacotron 2 init: uniform with std sqrt(2 / (fan_in + fan_out)).
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (n_symbols + embedding_dim))
        with torch.no_grad():
            self.embedding.weight.uniform_(-bound, bound)
            self.embedding.weight[padding_idx].zero_()
        self.convs = ConvStack(embedding_dim, channels, channels, n_convs, kernel_size, "relu", dropout=dropout)
        self.lstm = nn.LSTM(channels, channels // 2, batch_first=True, bidirectional=True)
        self.out_dim = channels

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = lengths_to_mask(lengths, tokens.shape[1])[:, None, :]  # [B, 1, L]
        x = self.embedding(tokens).transpose(1, 2)  # [B, E, L]
        x = self.convs(x, mask).transpose(1, 2)  # [B, L, C]
        # Packing keeps the backward direction from reading padding: item outputs equal their solo run.
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])
        return out  # [B, L, C]

"""An alignment learned from the text and the recording alone (issue 31, item 2: durations for a corpus that
comes without a segmentation), the third source of the NAR's durations beside Festival's / Piper's own
alignments and the AR teacher's attention.

The method is the unsupervised aligner of RAD-TTS and FastPitch 1.1 ("One TTS Alignment To Rule Them All",
Badlani et al. 2022): a small text encoder (keys) and a small mel encoder (queries); a frame attends to a
token by the negative squared distance of their encodings, sharpened by a fixed temperature and biased
towards the diagonal by a beta-binomial prior; the loss is the forward-sum over every monotonic path (CTC's
forward algorithm, each token a label that may last any number of frames), so nothing but the pairing of a
text with its audio is needed.  Durations then come from the hard monotonic path through the attention
(`tts.durations.monotonic_alignment`, Glow-TTS's monotonic alignment search), as for the AR teacher:
`recipes.extract_durations source=teacher checkpoint=ALIGNER max_skip=0` (every token at least one frame).

Trained on its own (`conf/model/aligner.yaml`, experiment `aligner_joe`), not jointly with the NAR as in
RAD-TTS: the NARs here warm-start from trained voices and read stored durations, so a separate aligner
keeps one duration file format for every source.  Not a synthesiser: it has no `infer`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tts.data.batch import Batch, lengths_to_mask
from tts.models.layers.mel_statistics import install_mel_statistics
from tts.models.outputs import LossOutput


def beta_binomial_log_prior(n_frames: int, n_tokens: int, scaling: float) -> torch.Tensor:
    """[T, L] log P(token | frame): for frame t (1-based) a beta-binomial over tokens 0..L-1 with
    alpha = scaling * t, beta = scaling * (T + 1 - t), whose mode moves from the first token to the last
    as t goes from 1 to T (the diagonal); a smaller `scaling` widens it."""
    t = torch.arange(1, n_frames + 1, dtype=torch.float64)[:, None]  # [T, 1]
    k = torch.arange(n_tokens, dtype=torch.float64)[None, :]  # [1, L]
    n = float(n_tokens - 1)
    a, b = scaling * t, scaling * (n_frames + 1 - t)

    def log_beta(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x) + torch.lgamma(y) - torch.lgamma(x + y)

    log_choose = torch.lgamma(torch.tensor(n + 1.0)) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)
    return (log_choose + log_beta(k + a, n - k + b) - log_beta(a, b)).float()


class UnsupervisedAligner(nn.Module):
    """tokens [B, L] + raw log-mel [B, M, T] -> log attention [B, T, L] (each frame's distribution over its
    item's tokens); trained by `loss` (forward-sum), read by `teacher_forced_alignment` (the AR teacher's
    interface, so `recipes.extract_durations` distils either)."""

    def __init__(
        self,
        n_symbols: int,
        n_mels: int,
        embedding_dim: int,
        key_channels: int,
        query_channels: int,
        attention_dim: int,
        temperature: float,
        prior_scaling: float | None,
        blank_logprob: float,
        mel_mean: float,
        mel_std: float,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.n_mels = n_mels
        self.temperature = temperature
        self.prior_scaling = prior_scaling
        self.blank_logprob = blank_logprob
        self.embedding = nn.Embedding(n_symbols, embedding_dim, padding_idx=0)
        # keys: a token and its neighbours (kernel 3), then a projection into the shared space
        self.key_proj = nn.Sequential(
            nn.Conv1d(embedding_dim, key_channels, 3, padding=1), nn.ReLU(),
            nn.Conv1d(key_channels, attention_dim, 1),
        )
        # queries: a frame and its neighbours, two pointwise layers
        self.query_proj = nn.Sequential(
            nn.Conv1d(n_mels, query_channels, 3, padding=1), nn.ReLU(),
            nn.Conv1d(query_channels, attention_dim, 1), nn.ReLU(),
            nn.Conv1d(attention_dim, attention_dim, 1),
        )
        # the corpus's log-mel statistics (recipes.train installs them): the queries see a normalised mel
        self.register_buffer("mel_mean", torch.full((n_mels,), float(mel_mean)))
        self.register_buffer("mel_std", torch.full((n_mels,), float(mel_std)))

    def set_data_statistics(self, stats: dict) -> None:
        """data_prep's features/stats.json: stats["mel"]["mean"/"std"] (tts.models.layers.mel_statistics)."""
        install_mel_statistics(stats.get("mel") or {}, self.mel_mean, self.mel_std)

    def log_attention(self, tokens: torch.Tensor, token_lengths: torch.Tensor, mels: torch.Tensor,
                      mel_lengths: torch.Tensor) -> torch.Tensor:
        """-> [B, T, L] log-probabilities over the item's tokens per frame (-inf on padded tokens; rows of
        padded frames are finite but meaningless: callers cut to mel_lengths)."""
        token_mask = lengths_to_mask(token_lengths, tokens.shape[1])  # [B, L]
        keys = self.key_proj(self.embedding(tokens).transpose(1, 2))  # [B, A, L]
        mel = (mels - self.mel_mean[:, None]) / self.mel_std[:, None]
        queries = self.query_proj(mel)  # [B, A, T]
        # squared distances without the [B, A, T, L] difference tensor: |q|^2 + |k|^2 - 2 q.k
        dist = (queries.pow(2).sum(1)[:, :, None] + keys.pow(2).sum(1)[:, None, :]
                - 2 * torch.bmm(queries.transpose(1, 2), keys))  # [B, T, L]
        logits = -self.temperature * dist
        if self.prior_scaling is not None:
            logits = logits + self._prior(token_lengths, mel_lengths, logits.shape[1], logits.shape[2]).to(logits)
        logits = logits.masked_fill(~token_mask[:, None, :], float("-inf"))
        return logits.log_softmax(dim=2)

    def _prior(self, token_lengths: torch.Tensor, mel_lengths: torch.Tensor, T: int, L: int) -> torch.Tensor:
        """[B, T, L] the beta-binomial log prior of each item's own (T_b, L_b), zero elsewhere."""
        prior = torch.zeros(len(token_lengths), T, L)
        for b, (t, n) in enumerate(zip(mel_lengths.tolist(), token_lengths.tolist())):
            prior[b, :t, :n] = beta_binomial_log_prior(t, n, self.prior_scaling)
        return prior

    def forward_sum_loss(self, log_attention: torch.Tensor, token_lengths: torch.Tensor,
                         mel_lengths: torch.Tensor) -> torch.Tensor:
        """-log P(text | audio) summed over every monotonic path, per token, mean over items: CTC with the
        tokens 1..L as the label sequence and an extra "blank" class of fixed log-probability (a frame that
        belongs to no token; the paper's -1), one item at a time (its own T_b x L_b, no padding to mask)."""
        losses = []
        for b, (t, n) in enumerate(zip(mel_lengths.tolist(), token_lengths.tolist())):
            att = log_attention[b, :t, :n]  # [T_b, L_b]
            with_blank = F.pad(att, (1, 0), value=self.blank_logprob).log_softmax(dim=1)  # [T_b, 1 + L_b]
            target = torch.arange(1, n + 1, device=att.device)[None]  # [1, L_b]
            losses.append(F.ctc_loss(with_blank[:, None, :], target, torch.tensor([t]), torch.tensor([n]),
                                     blank=0, reduction="mean", zero_infinity=True))
        return torch.stack(losses).mean()

    def loss(self, batch: Batch) -> LossOutput:
        log_att = self.log_attention(batch.tokens, batch.token_lengths, batch.mels, batch.mel_lengths)
        total = self.forward_sum_loss(log_att, batch.token_lengths, batch.mel_lengths)
        t, n = int(batch.mel_lengths[0]), int(batch.token_lengths[0])
        return LossOutput(total=total, terms={"forward_sum": total.detach()},
                          images={"alignment": log_att[0, :t, :n].detach().exp().T})  # [L, T]

    @torch.no_grad()
    def teacher_forced_alignment(self, batch: Batch) -> torch.Tensor:
        """-> [B, T, L] attention (probabilities) at frame rate, zero on frames >= mel_lengths and tokens
        >= token_lengths: what `recipes.extract_durations` turns into durations."""
        att = self.log_attention(batch.tokens, batch.token_lengths, batch.mels, batch.mel_lengths).exp()
        return att * batch.mel_mask()[:, :, None].to(att.dtype)

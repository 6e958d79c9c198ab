"""The unsupervised aligner (tts/models/aligner.py): its prior, its forward-sum loss against brute force, that it
learns a known alignment, and its recipe path (train -> durations), while it refuses to synthesise."""

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from recipes.extract_durations import distil
from tts import checkpoint
from tts.data.batch import Batch
from tts.data.dataset import TTSDataset
from tts.durations import monotonic_alignment
from tts.errors import CheckpointError
from tts.models.aligner import UnsupervisedAligner, beta_binomial_log_prior
from tts.runtime.torch_engine import TorchEngine

SMALL = dict(embedding_dim=32, key_channels=64, query_channels=32, attention_dim=16, blank_logprob=-1.0,
             mel_mean=0.0, mel_std=1.0)


def test_prior_is_a_distribution_over_tokens_whose_mode_follows_the_diagonal():
    log_prior = beta_binomial_log_prior(40, 8, scaling=1.0)
    assert log_prior.shape == (40, 8)
    assert torch.allclose(log_prior.exp().sum(1), torch.ones(40), atol=1e-5)
    modes = log_prior.argmax(1)
    assert modes[0] == 0 and modes[-1] == 7 and bool((modes.diff() >= 0).all())
    assert beta_binomial_log_prior(5, 1, 1.0).exp().allclose(torch.ones(5, 1))  # one token takes every frame


def collapse(path):
    """CTC's many-to-one map: merge repeats, drop blanks (0)."""
    merged = [k for k, _ in itertools.groupby(path)]
    return [k for k in merged if k != 0]


def test_forward_sum_is_minus_log_of_every_monotonic_path_per_token():
    torch.manual_seed(0)
    model = UnsupervisedAligner(n_symbols=10, n_mels=6, temperature=0.1, prior_scaling=None, **SMALL)
    T, L = 5, 2
    log_att = torch.randn(1, T, L).log_softmax(2)
    got = model.forward_sum_loss(log_att, torch.tensor([L]), torch.tensor([T]))
    # brute force: every frame labelled blank or a token, the labelling's probability the product of the frames'
    # (blank at the fixed log-probability, renormalised with the tokens), summed over the labellings that read 1..L
    probs = torch.cat([torch.full((T, 1), -1.0), log_att[0]], 1).log_softmax(1).exp()
    total = sum(math.prod(float(probs[t, k]) for t, k in enumerate(path))
                for path in itertools.product(range(L + 1), repeat=T) if collapse(path) == list(range(1, L + 1)))
    assert float(got) == pytest.approx(-math.log(total) / L, rel=1e-5)


def synthetic_batch(rng: np.random.Generator, n_items: int, n_symbols: int, n_mels: int,
                    spectra: np.ndarray) -> tuple[Batch, list[np.ndarray]]:
    """Items whose mel frames are each token's own spectrum (plus noise) for a known number of frames."""
    tokens, durations, mels = [], [], []
    for _ in range(n_items):
        L = int(rng.integers(5, 10))
        # no token twice in a row: the boundary between two equal spectra is undefined, whatever the aligner
        toks = np.array([int(rng.integers(1, n_symbols))])
        while len(toks) < L:
            toks = np.append(toks, toks[-1] + int(rng.integers(1, n_symbols - 1)))
            toks[-1] = (toks[-1] - 1) % (n_symbols - 1) + 1
        durs = rng.integers(1, 7, size=L)
        mel = np.repeat(spectra[toks], durs, axis=0) + 0.1 * rng.standard_normal((int(durs.sum()), n_mels))
        tokens.append(toks), durations.append(durs), mels.append(mel.T)
    B, Lmax, Tmax = n_items, max(map(len, tokens)), max(m.shape[1] for m in mels)
    tok = torch.zeros(B, Lmax, dtype=torch.long)
    mel = torch.zeros(B, n_mels, Tmax)
    for b in range(B):
        tok[b, : len(tokens[b])] = torch.from_numpy(tokens[b])
        mel[b, :, : mels[b].shape[1]] = torch.from_numpy(mels[b]).float()
    batch = Batch(ids=[str(b) for b in range(B)], texts=[""] * B, tokens=tok,
                  token_lengths=torch.tensor([len(t) for t in tokens]), mels=mel,
                  mel_lengths=torch.tensor([m.shape[1] for m in mels]))
    return batch, durations


def test_all_parameters_receive_gradients():
    rng = np.random.default_rng(0)
    model = UnsupervisedAligner(n_symbols=12, n_mels=8, temperature=0.05, prior_scaling=1.0, **SMALL)
    batch, _ = synthetic_batch(rng, 3, 12, 8, rng.standard_normal((12, 8)))
    model.loss(batch).total.backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]


def test_learns_a_known_alignment():
    """Tokens that each sound like their own spectrum, durations drawn at random: after training, the hard path
    through the attention gives the durations the mels were made with (the recipe's max_skip=0)."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n_symbols, n_mels = 12, 8
    spectra = 2.0 * rng.standard_normal((n_symbols, n_mels))
    model = UnsupervisedAligner(n_symbols=n_symbols, n_mels=n_mels, temperature=0.05, prior_scaling=1.0, **SMALL)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        batch, _ = synthetic_batch(rng, 8, n_symbols, n_mels, spectra)
        loss = model.loss(batch).total
        opt.zero_grad(), loss.backward(), opt.step()
    model.eval()
    batch, truth = synthetic_batch(rng, 16, n_symbols, n_mels, spectra)
    att = model.teacher_forced_alignment(batch)
    exact = total = 0
    for b, durs in enumerate(truth):
        T, L = int(batch.mel_lengths[b]), int(batch.token_lengths[b])
        assert float(att[b, T:].abs().sum()) == 0 and float(att[b, :, L:].abs().sum()) == 0  # padding is zero
        got = monotonic_alignment(att[b, :T, :L].numpy(), max_skip=0)
        assert got.sum() == T and (got >= 1).all()
        exact += int((got == durs).sum())
        total += L
    assert exact / total > 0.97, f"only {exact}/{total} tokens got their true duration"


def test_recipe_trains_an_aligner_whose_checkpoint_makes_durations_and_refuses_to_synthesise(
        featurised_corpus: Path, tmp_path: Path):
    from test_train_recipe import fit

    module, trainer = fit(["debug=tiny", "model=aligner", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}",
                           "model.embedding_dim=32", "model.key_channels=32", "model.query_channels=32",
                           "model.attention_dim=16", "log_audio=false"])
    assert trainer.global_step == 20 and "val/forward_sum" in trainer.callback_metrics
    loaded = checkpoint.load(tmp_path / "checkpoints" / "last.ckpt")
    assert isinstance(loaded.model, UnsupervisedAligner)
    stats_mean = float(loaded.model.mel_mean[0])
    assert stats_mean != -6.0  # the corpus's statistics, not the placeholder
    out = tmp_path / "durations"
    out.mkdir()
    ds = TTSDataset(featurised_corpus, "train", loaded.frontend(), loaded.mel_config)
    distil(loaded.model.eval(), ds, out, batch_size=4, max_skip=0)
    for uid in ds.ids:
        d = np.load(out / f"{uid}.npy")
        assert d.sum() == ds.n_frames[uid] and len(d) == len(ds.tokens[uid]) and (d >= 1).all()
    with pytest.raises(CheckpointError, match="does not synthesise speech"):
        TorchEngine(loaded, None)

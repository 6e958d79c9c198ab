"""Flow-matching refiner: path/loss algebra, masking, K-step sampling, early stop, tiny overfit."""

from __future__ import annotations

import functools

import pytest
import torch

from tts.data.batch import Batch
from tts.models.nonautoregressive import FastSpeech2
from tts.models.refiner import FlowMatchingRefiner

N_MELS = 80


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Tiny tensors on shared 2-core machines: a second intra-op thread only adds contention
    # (measured: 26 ms vs 230 ms per tiny training step while other jobs run).
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _inputs(b: int = 2, t: int = 30, c: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randn(b, N_MELS, t, generator=g)
    coarse = target + 0.3 * torch.randn(b, N_MELS, t, generator=g)
    cond = torch.randn(b, c, t, generator=g)
    mask = torch.arange(t)[None] < torch.tensor([t, t - 9])[:b, None]
    return target, coarse, cond, mask


def _refiner(**kw) -> FlowMatchingRefiner:
    return FlowMatchingRefiner(N_MELS, 8, channels=16, n_layers=2, time_dim=16, **kw)


def test_loss_is_zero_for_the_exact_velocity_and_sigma_squared_without_noise_term(monkeypatch):
    target, coarse, cond, mask = _inputs()
    m = mask[:, None, :].float()
    deterministic = _refiner(sigma=0.0)
    monkeypatch.setattr(deterministic.net, "forward", lambda x, t, c, mk: (target - coarse) * mk)
    assert float(deterministic.loss(target, coarse, cond, mask)) == pytest.approx(0.0, abs=1e-10)
    # with noise, predicting only the mean residual leaves exactly the noise part (1 - sigma_min) sigma eps
    noisy = _refiner(sigma=0.5, sigma_min=0.0)
    monkeypatch.setattr(noisy.net, "forward", lambda x, t, c, mk: (target - coarse) * mk)
    g = torch.Generator().manual_seed(3)
    loss = float(noisy.loss(target, coarse, cond, mask, generator=g))
    g = torch.Generator().manual_seed(3)
    torch.rand(2, generator=g)  # the loss draws t first, then eps
    eps = torch.randn(target.shape, generator=g)
    expected = float(((0.5 * eps) ** 2 * m).sum() / (m.sum() * N_MELS))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_euler_steps_follow_a_straight_path_and_early_stop_jumps_to_the_end(monkeypatch):
    target, coarse, cond, mask = _inputs()
    m = mask[:, None, :].float()
    r = _refiner(sigma=0.0)
    monkeypatch.setattr(r.net, "forward", lambda x, t, c, mk: (target - coarse) * mk)
    for k in (1, 3, 8):
        out = r.sample(coarse, cond, mask, k)
        assert out.steps_taken == k
        assert torch.allclose(out.mels, target * m, atol=1e-5)
    stopped = r.sample(coarse, cond, mask, 8, early_stop=1e9)
    assert stopped.steps_taken == 1 and torch.allclose(stopped.mels, target * m, atol=1e-5)


def test_sample_k0_identity_and_argument_checks():
    target, coarse, cond, mask = _inputs()
    r = _refiner().eval()
    out = r.sample(coarse, cond, mask, 0)
    assert out.mels is coarse and out.steps_taken == 0
    assert r.sample(coarse, cond, mask, 5, early_stop=0.0).steps_taken == 5
    assert r.sample(coarse, cond, mask, 5, early_stop=1e9).steps_taken == 1
    with pytest.raises(ValueError):
        r.sample(coarse, cond, mask, -1)
    with pytest.raises(ValueError):
        _refiner(sigma=-1.0)


def test_refiner_ignores_padding():
    target, coarse, cond, mask = _inputs()
    r = _refiner().eval()
    junk = ~mask[:, None, :]

    def dirty(x: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(junk, 123.0)

    def loss(a, b, c) -> float:
        return float(r.loss(a, b, c, mask, generator=torch.Generator().manual_seed(1)).detach())

    assert loss(dirty(target), dirty(coarse), dirty(cond)) == pytest.approx(loss(target, coarse, cond), rel=1e-6)
    clean = r.sample(coarse, cond, mask, 3, temperature=0.0).mels
    noisy = r.sample(dirty(coarse), dirty(cond), mask, 3, temperature=0.0).mels
    assert torch.allclose(clean, noisy, atol=1e-6) and torch.all(clean.masked_select(junk) == 0)


def _structured_utterance(seed: int = 0) -> Batch:
    """One tiny utterance with speech-like structure: a formant-like envelope per token, a contour
    inside each token, and fine frame-level texture the coarse decoder smooths over."""
    g = torch.Generator().manual_seed(seed)
    n_tokens = 10
    durations = torch.randint(3, 9, (1, n_tokens), generator=g)
    ch = torch.arange(N_MELS).float()
    centres = torch.rand(n_tokens, generator=g) * 60 + 10
    envelope = -7 + 4 * torch.exp(-(((ch[None] - centres[:, None]) / 8) ** 2))  # [L, M]
    mel = envelope[torch.repeat_interleave(torch.arange(n_tokens), durations[0])].T  # [M, T]
    pos = torch.cat([torch.linspace(0, 1, int(k)) for k in durations[0]])  # position inside token
    mel = mel + 1.5 * torch.sin(ch[:, None] / 5 + 6 * pos[None]) * pos[None]
    t = mel.shape[1]
    mel = mel + 0.5 * torch.randn(N_MELS, t, generator=g)
    pitch = (150 + 50 * torch.rand(t, generator=g)) * (torch.rand(t, generator=g) > 0.2)
    energy = torch.rand(t, generator=g) * 10
    tokens = torch.randint(1, 40, (1, n_tokens), generator=g)
    return Batch(["u"], [""], tokens, torch.tensor([n_tokens]), mel[None], torch.tensor([t]), pitch[None], energy[None], durations)


def test_overfit_one_utterance_then_refiner_improves_the_coarse_mel():
    torch.manual_seed(0)
    model = FastSpeech2(
        40, N_MELS, d_model=32, encoder_layers=1, decoder_layers=1, n_heads=2, ffn_channels=64, ffn_kernel_size=3,
        predictor_channels=32, dropout=0.0, attention_dropout=0.0, predictor_dropout=0.0,
        refiner=functools.partial(FlowMatchingRefiner, channels=32, n_layers=3, time_dim=32),
    )
    batch = _structured_utterance()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(150):
        out = model.loss(batch)
        opt.zero_grad()
        out.total.backward()
        opt.step()
        first = float(out.terms["mel_l1"]) if first is None else first
    last = float(out.terms["mel_l1"])
    assert last < 0.4 * first, (first, last)
    assert float(out.terms["length_abs_error_frames"]) <= 2.0  # the duration predictor learned too

    model.eval()
    target = model.normalise(batch.mels)

    def error(k: int) -> float:
        # ground-truth durations so the output lines up with the target; temperature 0 = the
        # deterministic corrector (removing the start noise takes far more than 150 steps of training)
        inf = model.infer(batch.tokens, batch.token_lengths, refine_steps=k, durations=batch.durations, temperature=0.0)
        return float((model.normalise(inf.mels) - target).abs().mean())

    e0, e4 = error(0), error(4)
    assert e4 < 0.95 * e0, (e0, e4)

"""FastSpeech 2 model: config, shapes, gradients, length regulator, inference controls, padding."""

from __future__ import annotations

import functools
import math

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from tts.data.batch import Batch
from tts.models.layers.length_regulator import (
    average_by_durations,
    clip_durations,
    durations_from_log,
    speed_durations,
    regulate_length,
)
from tts.models.nonautoregressive import FastSpeech2, NARInferenceOutput
from tts.models.outputs import MelOutput
from tts.models.refiner import FlowMatchingRefiner
from tts.paths import CONF_DIR

N_MELS = 80
N_SYMBOLS = 40
LOG_FLOOR = math.log(1e-5)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Tiny models on shared 2-core machines: a second intra-op thread only adds contention.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def tiny_model(refiner: bool = True, **kw) -> FastSpeech2:
    args = dict(
        d_model=32, encoder_layers=1, decoder_layers=1, n_heads=2, ffn_channels=64, ffn_kernel_size=3,
        predictor_channels=32, dropout=0.1, attention_dropout=0.1, predictor_dropout=0.1,
    )
    args.update(kw)
    factory = functools.partial(FlowMatchingRefiner, channels=32, n_layers=2, time_dim=32) if refiner else None
    return FastSpeech2(n_symbols=N_SYMBOLS, n_mels=N_MELS, refiner=factory, **args)


def random_batch(b: int = 3, max_tokens: int = 9, seed: int = 0) -> Batch:
    """Valid random batch: durations 0..6 per real token (some zeros), mels/pitch/energy padded as the collate does."""
    g = torch.Generator().manual_seed(seed)
    token_lengths = torch.randint(max_tokens // 2, max_tokens + 1, (b,), generator=g)
    token_lengths[0] = max_tokens
    tmask = torch.arange(max_tokens)[None] < token_lengths[:, None]
    durations = torch.randint(0, 7, (b, max_tokens), generator=g) * tmask
    durations[:, 0] += 1  # no empty item
    mel_lengths = durations.sum(1)
    t = int(mel_lengths.max())
    fmask = torch.arange(t)[None] < mel_lengths[:, None]
    tokens = torch.randint(1, N_SYMBOLS, (b, max_tokens), generator=g) * tmask
    mels = torch.where(fmask[:, None], torch.randn(b, N_MELS, t, generator=g) * 2 - 6, torch.tensor(LOG_FLOOR))
    voiced = torch.rand(b, t, generator=g) > 0.3
    pitch = (torch.rand(b, t, generator=g) * 150 + 120) * voiced * fmask
    energy = torch.rand(b, t, generator=g) * 20 * fmask
    return Batch([f"u{i}" for i in range(b)], [""] * b, tokens, token_lengths, mels, mel_lengths, pitch, energy, durations)


# --- config ------------------------------------------------------------------------------------------
def test_yaml_instantiates_with_derived_args_only():
    cfg = OmegaConf.load(CONF_DIR / "model" / "nonautoregressive.yaml")
    assert "n_symbols" not in cfg and "n_mels" not in cfg  # derived by the trainer
    for node in (cfg, OmegaConf.to_container(cfg, resolve=True)):  # the checkpoint rebuilds from a plain dict
        model = instantiate(node, n_symbols=84, n_mels=N_MELS)
        assert isinstance(model, FastSpeech2) and isinstance(model.refiner, FlowMatchingRefiner)
    counts = model.num_parameters()
    assert 1e6 <= counts["refiner"] <= 3e6
    assert 5e6 <= counts["total"] <= 30e6
    for module in model.modules():  # no DictConfig/ListConfig leaked into a module attribute
        assert not any(OmegaConf.is_config(v) for v in vars(module).values())
    model.eval()
    out = model.infer(torch.tensor([[3, 4, 5, 6]]), torch.tensor([4]), refine_steps=1)
    assert out.mels.shape[:2] == (1, N_MELS)


def test_set_data_statistics_is_tolerant():
    model = tiny_model()
    model.set_data_statistics({"pitch": {"log_mean": 5.0, "log_std": 0.3}})  # no energy / mel: defaults kept
    assert float(model.variance.pitch_log_mean) == pytest.approx(5.0)
    assert float(model.variance.energy_std) == 1.0 and float(model.mel_mean[0]) == -6.0
    model.set_data_statistics({"pitch": {"mean": 200.0, "std": 40.0}, "energy": {"mean": 3.0, "std": 0.0}})
    assert float(model.variance.pitch_log_mean) == pytest.approx(math.log(200.0))
    assert float(model.variance.pitch_log_std) == pytest.approx(0.2)
    assert float(model.variance.energy_std) > 0  # floored, never a division by zero
    model.set_data_statistics({"mel": {"mean": [-5.0] * N_MELS, "std": [2.0] * N_MELS}})
    assert torch.equal(model.mel_std, torch.full((N_MELS,), 2.0))
    assert "mel_mean" in model.state_dict() and "variance.pitch_log_std" in model.state_dict()
    with pytest.raises(ValueError, match="n_mels"):
        model.set_data_statistics({"mel": {"mean": [0.0] * 10}})
    with pytest.raises(ValueError, match="finite"):  # a corpus without frames: not silently the defaults
        model.set_data_statistics({"mel": {"std": [float("nan")] * N_MELS}})
    # data_prep/features.py's key names, a NaN (no voiced frame) and a constant mel channel
    stats = {
        "pitch": {"mean_hz": 210.0, "std_hz": 30.0, "mean_log_hz": 5.3, "std_log_hz": float("nan")},
        "energy": {"mean": 12.0, "std": 4.0},
        "mel": {"mean": [-6.5] * N_MELS, "std": [0.0] + [2.2] * (N_MELS - 1)},
    }
    with pytest.warns(UserWarning, match="non-finite"):
        model.set_data_statistics(stats)
    assert float(model.variance.pitch_log_mean) == pytest.approx(5.3)
    assert float(model.variance.pitch_log_std) == pytest.approx(30.0 / 210.0)  # NaN skipped -> Hz fallback
    assert float(model.variance.energy_mean) == 12.0 and float(model.mel_mean[0]) == -6.5
    assert float(model.mel_std[0]) == pytest.approx(1e-2)  # floored


# --- training ------------------------------------------------------------------------------------------
def test_forward_and_loss_shapes():
    model = tiny_model()
    batch = random_batch()
    b, l = batch.tokens.shape
    t = batch.mels.shape[2]
    out = model(batch)
    assert out.mel_coarse.shape == (b, N_MELS, t) and out.decoder_hidden.shape == (b, t, 32)
    assert out.log_durations.shape == out.pitch.shape == out.energy.shape == (b, l)
    loss = model.loss(batch)
    assert loss.total.ndim == 0 and torch.isfinite(loss.total)
    assert set(loss.terms) == {
        "mel_l1", "duration_mse", "pitch_mse", "energy_mse", "refiner_fm",
        "length_abs_error_frames", "duration_abs_error_frames",
    }
    assert all(not v.requires_grad for v in loss.terms.values())
    n0 = int(batch.mel_lengths[0])
    assert loss.images["mel_target"].shape == loss.images["mel_pred"].shape == (N_MELS, n0)
    assert torch.allclose(loss.images["mel_target"], batch.mels[0, :, :n0], atol=1e-5)  # raw log-mel
    assert "mel_refined" not in loss.images  # only outside training: K refiner passes are not free
    model.eval()
    assert model.loss(batch).images["mel_refined"].shape == (N_MELS, n0)
    assert "refiner_fm" not in tiny_model(refiner=False).loss(batch).terms


def test_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    model = tiny_model()
    model.loss(random_batch()).total.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    assert not missing, f"parameters without gradient: {missing}"


@pytest.mark.parametrize("detach", [True, False])
def test_refiner_detach_flag(detach: bool):
    model = tiny_model(refiner_detach_coarse=detach)
    batch = random_batch()
    out = model(batch)
    coarse, cond = model._refiner_inputs(out)
    model.refiner.loss(out.mel_target, coarse, cond, out.frame_mask).backward()
    decoder_grad = model.mel_proj.weight.grad
    if detach:
        assert decoder_grad is None  # the refiner loss never trains the coarse model
    else:
        assert decoder_grad is not None and bool(decoder_grad.abs().sum() > 0)


def test_bad_durations_are_an_error():
    batch = random_batch()
    batch.durations[0, 0] += 1
    with pytest.raises(ValueError, match="sum to mel_lengths"):
        tiny_model().loss(batch)


def _garbage_padding(batch: Batch, extra_tokens: int = 0, extra_frames: int = 0) -> Batch:
    """Same batch with junk in every padded position (optionally more padding)."""
    b, l = batch.tokens.shape
    t = batch.mels.shape[2]
    g = torch.Generator().manual_seed(99)
    tmask = torch.arange(l + extra_tokens)[None] < batch.token_lengths[:, None]
    fmask = torch.arange(t + extra_frames)[None] < batch.mel_lengths[:, None]

    def pad(x: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        out = torch.zeros(size, dtype=x.dtype)
        out[tuple(slice(0, s) for s in x.shape)] = x
        return out

    tokens = torch.where(tmask, pad(batch.tokens, (b, l + extra_tokens)), torch.randint(1, N_SYMBOLS, tmask.shape, generator=g))
    durations = torch.where(tmask, pad(batch.durations, (b, l + extra_tokens)), torch.randint(1, 9, tmask.shape, generator=g))
    mels = torch.where(fmask[:, None], pad(batch.mels, (b, N_MELS, t + extra_frames)), torch.randn(b, N_MELS, t + extra_frames, generator=g) * 9)
    pitch = torch.where(fmask, pad(batch.pitch, (b, t + extra_frames)), torch.full(fmask.shape, 333.0))
    energy = torch.where(fmask, pad(batch.energy, (b, t + extra_frames)), torch.full(fmask.shape, 77.0))
    return Batch(batch.ids, batch.texts, tokens, batch.token_lengths, mels, batch.mel_lengths, pitch, energy, durations)


def test_padding_does_not_change_the_loss():
    model = tiny_model().eval()
    batch = random_batch(b=4)

    def loss(bt: Batch) -> dict[str, torch.Tensor]:
        torch.manual_seed(5)  # the refiner draws t and noise; same shapes -> same draws
        out = model.loss(bt)
        return {**out.terms, "total": out.total.detach()}

    clean = loss(batch)
    same_shape = loss(_garbage_padding(batch))
    for k in clean:
        assert torch.allclose(clean[k], same_shape[k], atol=1e-5), k
    longer = loss(_garbage_padding(batch, extra_tokens=3, extra_frames=11))  # noise shapes differ: skip refiner
    for k in clean:
        if k not in ("refiner_fm", "total"):
            assert torch.allclose(clean[k], longer[k], atol=1e-5), k


# --- length regulator ------------------------------------------------------------------------------------
def test_length_regulator_matches_naive_loop():
    g = torch.Generator().manual_seed(1)
    b, l, d = 4, 7, 5
    x = torch.randn(b, l, d, generator=g)
    token_lengths = torch.tensor([7, 5, 3, 1])
    durations = torch.randint(0, 5, (b, l), generator=g) * (torch.arange(l)[None] < token_lengths[:, None])
    durations[3, 0] = 2
    out = regulate_length(x, durations)
    t = int(durations.sum(1).max())
    assert out.frames.shape == (b, t, d)
    assert torch.equal(out.frame_lengths, durations.sum(1))
    for i in range(b):
        naive = torch.cat([x[i, j : j + 1].expand(int(durations[i, j]), d) for j in range(l)], dim=0)
        n = naive.shape[0]
        assert torch.equal(out.frames[i, :n], naive)
        assert torch.all(out.frames[i, n:] == 0)  # padded frames are zero
        assert torch.all(out.token_index[i, n:] == l)
    # teacher forcing: a fixed (larger) frame count
    assert regulate_length(x, durations, max_len=t + 4).frames.shape == (b, t + 4, d)


def test_length_regulator_max_frames_guard():
    x = torch.randn(2, 3, 4)
    durations = torch.tensor([[5, 5, 5], [1, 2, 0]])
    out = regulate_length(x, durations, max_frames=8)
    assert out.frame_lengths.tolist() == [8, 3] and out.truncated.tolist() == [True, False]
    assert out.durations.tolist() == [[5, 3, 0], [1, 2, 0]]
    assert out.frames.shape[1] == 8
    clipped, _ = clip_durations(durations, 100)
    assert torch.equal(clipped, durations)


def test_average_by_durations_matches_loop():
    g = torch.Generator().manual_seed(2)
    durations = torch.tensor([[2, 0, 3, 1], [1, 4, 0, 0]])
    values = torch.rand(2, 7, generator=g)
    weights = torch.rand(2, 7, generator=g) > 0.4
    means, counts = average_by_durations(values, durations, weights)
    for i in range(2):
        start = 0
        for j, dur in enumerate(durations[i].tolist()):
            sel = weights[i, start : start + dur]
            vals = values[i, start : start + dur][sel]
            assert counts[i, j] == sel.sum()
            assert means[i, j] == pytest.approx(float(vals.mean()) if len(vals) else 0.0, abs=1e-6)
            start += dur


def test_durations_from_log_speed_and_rounding():
    g = torch.Generator().manual_seed(3)
    mask = torch.arange(12)[None] < torch.tensor([12, 8])[:, None]
    true = torch.randint(2, 30, (2, 12), generator=g) * mask
    log_d = torch.log1p(true.float())
    base = durations_from_log(log_d, mask)
    assert torch.equal(base, true)
    for speed, factor in ((2.0, 0.5), (0.5, 2.0)):
        d = durations_from_log(log_d, mask, speed=speed)
        n_tokens = mask.sum(1)
        rest = d[:, 1:].sum(1) - base[:, 1:].sum(1) * factor  # the first token (the leading pause) aside
        assert torch.all(rest.abs() <= 0.5 * n_tokens)  # one rounding per token
        assert torch.all(d[~mask] == 0)
    assert torch.equal(durations_from_log(log_d, mask, speed=2.0)[:, 0], base[:, 0])  # speeding up keeps it
    assert torch.equal(durations_from_log(log_d, mask, speed=0.5)[:, 0], base[:, 0] * 2)  # slowing down scales it
    zeros = durations_from_log(torch.full((2, 12), -5.0), mask)  # all round to 0
    assert zeros.sum(1).tolist() == [1, 1]  # never an empty output
    assert torch.all(durations_from_log(torch.full((2, 12), -5.0), mask, min_frames=1) == mask.long())


def test_speeding_up_silences_no_phone():
    """Issue 35: "A." was near-silent at speed >= 1.25.  The first token with frames holds the utterance's leading
    pause, which the decoder renders at a fixed length: it keeps its speed-1 frames when speeding up (zero-frame
    tokens before it stay 0); any token heard at speed 1 keeps >= 1 frame (round(1 / 2) = 0 dropped it)."""
    mask = torch.ones(1, 6, dtype=torch.bool)
    frames = torch.tensor([[0.0, 24.0, 1.0, 0.0, 1.2, 9.0]])  # a leading quote, the first phone, short phones, a space
    for speed in (1.25, 1.5, 2.0):
        d = speed_durations(frames, mask, speed)
        assert d[0, :2].tolist() == [0, 24]
        assert d[0, 2] == 1 and d[0, 3] == 0 and d[0, 4] == 1
        assert d[0, 5] == round(9.0 / speed)
    assert torch.equal(speed_durations(frames, mask, 1.0), torch.round(frames).long())
    assert speed_durations(frames, mask, 0.5).tolist() == [[0, 48, 2, 0, 2, 18]]
    log_d = torch.log1p(frames)
    assert torch.equal(durations_from_log(log_d, mask, 2.0), speed_durations(frames, mask, 2.0))


# --- inference -----------------------------------------------------------------------------------------
def _tokens() -> tuple[torch.Tensor, torch.Tensor]:
    tokens = torch.tensor([[5, 9, 3, 12, 7, 8, 2], [4, 6, 10, 11, 0, 0, 0], [13, 3, 0, 0, 0, 0, 0]])
    return tokens, torch.tensor([7, 4, 2])


def _model_with_durations(frames_per_token: int = 6, **kw) -> FastSpeech2:
    """Tiny eval-mode model whose duration predictor says ~frames_per_token (random init says ~0)."""
    torch.manual_seed(0)
    model = tiny_model(**kw).eval()
    with torch.no_grad():
        model.variance.duration_predictor.proj.weight.mul_(0.01)
        model.variance.duration_predictor.proj.bias.fill_(math.log1p(frames_per_token))
    return model


def test_infer_refine_steps_and_early_stop():
    model = _model_with_durations()
    tokens, lengths = _tokens()
    out = model.infer(tokens, lengths, refine_steps=0)
    assert isinstance(out, NARInferenceOutput) and isinstance(out, MelOutput)
    assert torch.equal(out.mels, out.coarse_mels) and out.refine_steps_taken == 0
    b, l = tokens.shape
    assert out.mels.shape == (b, N_MELS, int(out.mel_lengths.max())) and out.durations.shape == (b, l)
    assert torch.equal(out.mel_lengths, out.durations.sum(1))
    assert torch.all(out.mels[1, :, int(out.mel_lengths[1]) :] == LOG_FLOOR)  # raw log-mel padding
    refined = model.infer(tokens, lengths, refine_steps=4)
    assert refined.refine_steps_taken == 4 and not torch.equal(refined.mels, refined.coarse_mels)
    assert torch.equal(refined.coarse_mels, out.coarse_mels)
    assert model.infer(tokens, lengths).refine_steps_taken == model.refine_steps  # constructor default
    assert model.infer(tokens, lengths, refine_steps=4, refine_early_stop=1e9).refine_steps_taken == 1
    assert model.infer(tokens, lengths, refine_steps=4, refine_early_stop=0.0).refine_steps_taken == 4
    assert tiny_model(refiner=False).eval().infer(tokens, lengths, refine_steps=4).refine_steps_taken == 0


def test_infer_speed_changes_total_frames():
    model = _model_with_durations(frames_per_token=8)
    tokens, lengths = _tokens()
    n1 = model.infer(tokens, lengths, refine_steps=0).mel_lengths
    assert torch.all((n1 - 8 * lengths).abs() <= lengths)  # the predictor really says ~8 frames
    n2 = model.infer(tokens, lengths, refine_steps=0, speed=2.0).mel_lengths
    n05 = model.infer(tokens, lengths, refine_steps=0, speed=0.5).mel_lengths
    first = model.infer(tokens, lengths, refine_steps=0).durations[:, 0]  # kept whole when speeding up
    assert torch.all((n2 - first - (n1 - first) / 2).abs() <= 0.5 * lengths + 0.5)
    assert torch.all((n05 - n1 * 2).abs() <= 0.5 * lengths + 0.5)


def test_infer_pitch_and_energy_controls():
    model = _model_with_durations()
    model.set_data_statistics({"pitch": {"log_mean": math.log(180), "log_std": 0.25}, "energy": {"mean": 10.0, "std": 2.0}})
    tokens, lengths = _tokens()
    mask = torch.arange(tokens.shape[1])[None] < lengths[:, None]
    base = model.infer(tokens, lengths, refine_steps=0)
    up = model.infer(tokens, lengths, refine_steps=0, pitch_shift=12.0)
    assert torch.allclose(up.pitch[mask], 2 * base.pitch[mask], rtol=1e-4)  # +12 semitones = one octave
    assert not torch.allclose(up.mels, base.mels)  # the shifted contour reaches the decoder
    assert torch.equal(up.durations, base.durations)  # controls are independent
    flat = model.infer(tokens, lengths, refine_steps=0, pitch_scale=0.0)
    for i, n in enumerate(lengths.tolist()):
        assert torch.allclose(flat.pitch[i, :n], flat.pitch[i, :n].mean().expand(n), rtol=1e-4)
    loud = model.infer(tokens, lengths, refine_steps=0, energy_scale=2.0)
    pos = mask & (base.energy > 0)
    assert torch.allclose(loud.energy[pos], 2 * base.energy[pos], rtol=1e-4)
    assert not torch.allclose(loud.mels, base.mels)


def test_batched_infer_equals_single_item_infer():
    model = _model_with_durations()
    tokens, lengths = _tokens()
    batched = model.infer(tokens, lengths, refine_steps=2, temperature=0.0, pitch_scale=1.5)
    for i, n in enumerate(lengths.tolist()):
        single = model.infer(tokens[i : i + 1, :n], lengths[i : i + 1], refine_steps=2, temperature=0.0, pitch_scale=1.5)
        frames = int(single.mel_lengths[0])
        assert int(batched.mel_lengths[i]) == frames
        assert torch.equal(batched.durations[i, :n], single.durations[0])
        assert torch.allclose(batched.mels[i, :, :frames], single.mels[0], atol=1e-4)
        assert torch.allclose(batched.coarse_mels[i, :, :frames], single.coarse_mels[0], atol=1e-4)


def test_infer_max_frames_guard_and_given_durations():
    model = _model_with_durations(frames_per_token=50, max_frames=60)
    tokens, lengths = _tokens()
    out = model.infer(tokens, lengths, refine_steps=1)
    assert int(out.mel_lengths.max()) <= 60 and out.truncated.tolist() == [True, True, True]
    given = torch.tensor([[1, 2, 3, 4, 5, 6, 7], [2, 2, 2, 2, 9, 9, 9], [3, 1, 9, 9, 9, 9, 9]])
    forced = model.infer(tokens, lengths, refine_steps=0, durations=given)
    assert forced.mel_lengths.tolist() == [28, 8, 4]


def test_refine_temperature_is_the_default_start_noise():
    tokens, lengths = _tokens()
    cold = _model_with_durations(refine_temperature=0.0)
    a = cold.infer(tokens, lengths, refine_steps=2).mels
    b = cold.infer(tokens, lengths, refine_steps=2).mels
    assert torch.equal(a, b)  # temperature 0 by default: no noise, same output twice
    assert not torch.equal(a, cold.infer(tokens, lengths, refine_steps=2, temperature=1.0).mels)
    with pytest.raises(ValueError, match="refine_temperature"):
        tiny_model(refine_temperature=-0.1)

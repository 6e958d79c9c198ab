"""The Transformer AR with a KV cache (issue 37): the cache equals recomputing the prefix, a chunk of k equals k
steps, batched items equal each alone at the same noise seeds, every parameter learns, the config composes and
trains through the recipe, the cache grows linearly, and the torch engine speaks with it.  CPU, tiny sizes."""

from __future__ import annotations

from pathlib import Path

import hydra
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from helpers import tiny_checkpoint
from test_autoregressive import N_MELS, N_SYMBOLS, random_batch
from tts import checkpoint
from tts.models.transformer_ar import TransformerAR, TransformerARInferenceOutput
from tts.paths import CONF_DIR

TINY = dict(
    reduction_factor=3, d_model=32, embedding_dim=16, encoder_n_convs=1, encoder_kernel_size=3, prenet_dim=16,
    decoder_layers=2, n_heads=4, ffn_dim=64, alignment_layers=1, alignment_heads=2, postnet_channels=16,
    postnet_layers=2, postnet_kernel_size=3, max_frames_per_token=3.0, max_extra_frames=10,
)  # fmt: skip
TINY_OVERRIDES = [f"model.{k}={v}" for k, v in TINY.items()]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_model(seed: int = 0, **overrides) -> TransformerAR:
    torch.manual_seed(seed)
    return TransformerAR(n_symbols=N_SYMBOLS, n_mels=N_MELS, guided_attention_weight=1.0, **(TINY | overrides)).eval()


def decode(model: TransformerAR, tokens, lengths, **kwargs) -> TransformerARInferenceOutput:
    with torch.no_grad():
        return model.infer(tokens, lengths, **kwargs)


def assert_same_decode(a, b, atol: float = 1e-5) -> None:
    assert torch.equal(a.mel_lengths, b.mel_lengths)
    torch.testing.assert_close(a.mels, b.mels, atol=atol, rtol=0)
    torch.testing.assert_close(a.alignments, b.alignments, atol=atol, rtol=0)


# --- the cache ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dropout_at_inference", [False, True], ids=["dropout-off", "dropout-on"])
def test_cached_decoding_equals_recomputing_the_prefix(dropout_at_inference: bool):
    model = tiny_model(prenet_dropout_at_inference=dropout_at_inference)
    batch = random_batch()
    kwargs = dict(max_decoder_steps=12, stop_threshold=1.1, noise_seeds=[5, 6, 7])  # no stop: all 12 steps
    cached = decode(model, batch.tokens, batch.token_lengths, use_cache=True, **kwargs)
    uncached = decode(model, batch.tokens, batch.token_lengths, use_cache=False, **kwargs)
    assert cached.mels.shape == (3, N_MELS, 36) and uncached.cache_bytes == 0 < cached.cache_bytes
    assert_same_decode(cached, uncached)
    other_seed = decode(model, batch.tokens, batch.token_lengths, **(kwargs | dict(noise_seeds=[1, 2, 3])))
    assert torch.equal(cached.mels, other_seed.mels) != dropout_at_inference  # the seeds are the noise


@pytest.mark.parametrize("dropout_at_inference", [False, True], ids=["dropout-off", "dropout-on"])
def test_a_chunk_of_k_positions_equals_k_chunks_of_one(dropout_at_inference: bool):
    model = tiny_model(prenet_dropout_at_inference=dropout_at_inference)
    batch = random_batch()
    k = 5
    inputs = torch.randn(3, k, N_MELS, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        memory, mask = model.encode(batch.tokens, batch.token_lengths)
        whole = model.decode_chunk(model.start_cache(memory, mask, [1, 2, 3]), inputs)
        cache = model.start_cache(memory, mask, [1, 2, 3], capacity=2)  # grows twice on the way
        steps = []
        for i in range(k):
            out = model.decode_chunk(cache, inputs[:, i : i + 1])
            cache = out.cache
            steps.append(out)
    assert whole.frames.shape == (3, k, 3, N_MELS) and whole.stop_logits.shape == (3, k, 3)
    assert whole.attention.shape == (3, k, 7) and whole.cache.length == cache.length == k
    for name in ("frames", "stop_logits", "attention"):
        torch.testing.assert_close(getattr(whole, name), torch.cat([getattr(s, name) for s in steps], 1),
                                   atol=1e-5, rtol=0)
    # padded tokens get exactly no attention
    assert torch.all(whole.attention[1, :, 4:] == 0) and torch.allclose(whole.attention.sum(-1), torch.ones(3, k))


def test_an_earlier_cache_stays_valid_after_later_chunks():
    """What speculative decoding needs: after decoding on, going back to an earlier cache (rejected drafts)
    decodes as if the later chunks had never been made."""
    model = tiny_model(prenet_dropout_at_inference=False)
    batch = random_batch()
    a, b = torch.randn(2, 3, 2, N_MELS, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        memory, mask = model.encode(batch.tokens, batch.token_lengths)
        start = model.decode_chunk(model.start_cache(memory, mask), a).cache
        model.decode_chunk(start, b)  # drafted, then rejected
        again = model.decode_chunk(start, a[:, :1])
        fresh = model.decode_chunk(model.decode_chunk(model.start_cache(memory, mask), a).cache, a[:, :1])
    torch.testing.assert_close(again.frames, fresh.frames, atol=1e-6, rtol=0)


def test_cache_bytes_grow_linearly_with_the_decoded_length():
    model = tiny_model()
    batch = random_batch()
    with torch.no_grad():
        memory, mask = model.encode(batch.tokens, batch.token_lengths)
        cache = model.start_cache(memory, mask, capacity=1)
        sizes = [cache.cache_bytes()]
        for _ in range(9):
            cache = model.decode_chunk(cache, torch.zeros(3, 1, N_MELS)).cache
            sizes.append(cache.cache_bytes())
    per_step = np.diff(sizes)
    # 2 (K, V) x layers x d_model x 4 bytes x batch per position; the memory's K/V are the constant part
    assert np.all(per_step == 2 * 2 * 32 * 4 * 3), per_step
    assert sizes[0] == 2 * 2 * 3 * 7 * 32 * 4


# --- batching and seeds ----------------------------------------------------------------------------------
@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "uncached"])
def test_batched_items_of_different_lengths_equal_each_alone(use_cache: bool):
    model = tiny_model()  # prenet dropout on at inference: the seeds decide the noise
    batch = random_batch(token_lengths=(7, 3, 5))
    seeds = [11, 12, 13]
    # stop disabled: each item runs to its own step limit (ceil((3 tokens + 10) / 3)), so the items end at
    # different steps and the finished ones keep being decoded, masked, while the others go on
    together = decode(model, batch.tokens, batch.token_lengths, stop_threshold=1.1, noise_seeds=seeds,
                      use_cache=use_cache)
    assert len(set(together.mel_lengths.tolist())) == 3
    for b in range(3):
        n = int(batch.token_lengths[b])
        alone = decode(model, batch.tokens[b : b + 1, :n], batch.token_lengths[b : b + 1], stop_threshold=1.1,
                       noise_seeds=seeds[b : b + 1], use_cache=use_cache)
        T, S = int(alone.mel_lengths[0]), alone.alignments.shape[1]
        assert int(together.mel_lengths[b]) == T
        torch.testing.assert_close(together.mels[b, :, :T], alone.mels[0], atol=1e-5, rtol=0)
        assert torch.all(together.mels[b, :, T:] == model.mel_pad_value)
        torch.testing.assert_close(together.alignments[b, :S, :n], alone.alignments[0], atol=1e-5, rtol=0)
        assert torch.all(together.alignments[b, S:] == 0) and torch.all(together.alignments[b, :, n:] == 0)
        assert together.failures[b] == alone.failures[0]


# --- the attention window (inference-time constraint) ------------------------------------------------------
def test_an_attention_window_as_wide_as_the_text_changes_nothing():
    model = tiny_model()
    batch = random_batch(token_lengths=(7, 3, 5))
    kwargs = dict(max_decoder_steps=12, stop_threshold=1.1, noise_seeds=[5, 6, 7])
    free = decode(model, batch.tokens, batch.token_lengths, **kwargs)
    wide = decode(model, batch.tokens, batch.token_lengths, attention_window=(7, 7), **kwargs)
    assert_same_decode(free, wide, atol=0)


def test_an_attention_window_keeps_every_step_near_the_furthest_token_reached():
    """Each step's alignment is zero outside [focus - back, focus + ahead], focus the furthest argmax of the
    steps before; batched equals alone; the model's own window is the default, a call's overrides it."""
    model = tiny_model()
    batch = random_batch(token_lengths=(7, 3, 5))
    seeds = [11, 12, 13]
    kwargs = dict(max_decoder_steps=12, stop_threshold=1.1)
    out = decode(model, batch.tokens, batch.token_lengths, attention_window=(0, 1), noise_seeds=seeds, **kwargs)
    free = decode(model, batch.tokens, batch.token_lengths, noise_seeds=seeds, **kwargs)
    assert not torch.equal(out.mels, free.mels)
    for b in range(3):
        n, focus = int(batch.token_lengths[b]), 0
        for s in range(int(out.mel_lengths[b]) // model.r):
            row = out.alignments[b, s]
            allowed = torch.zeros_like(row, dtype=torch.bool)
            allowed[focus : focus + 2] = True
            assert torch.all(row[~allowed] == 0) and abs(float(row.sum()) - 1) < 1e-5, (b, s, row)
            focus = max(focus, int(row.argmax()))
        alone = decode(model, batch.tokens[b : b + 1, :n], batch.token_lengths[b : b + 1], attention_window=(0, 1),
                       noise_seeds=seeds[b : b + 1], **kwargs)
        T = int(alone.mel_lengths[0])
        torch.testing.assert_close(out.mels[b, :, :T], alone.mels[0], atol=1e-5, rtol=0)
    own = tiny_model(attention_window=[0, 1])
    assert own.attention_window == (0, 1)
    assert_same_decode(decode(own, batch.tokens, batch.token_lengths, noise_seeds=seeds, **kwargs), out, atol=0)
    assert_same_decode(decode(own, batch.tokens, batch.token_lengths, noise_seeds=seeds, attention_window=(7, 7),
                              **kwargs), free, atol=0)


@pytest.mark.parametrize("window", [(-1, 3), (1, 0), (1,), (1, 2, 3), (1.5, 3), (True, 3)])
def test_a_bad_attention_window_is_a_clear_error(window):
    with pytest.raises(ValueError, match="attention_window"):
        tiny_model(attention_window=window)


def test_the_attention_window_is_for_plain_cached_decoding():
    model = tiny_model()
    batch = random_batch()
    with pytest.raises(ValueError, match="use_cache"):
        decode(model, batch.tokens, batch.token_lengths, attention_window=(1, 3), use_cache=False)


def test_the_stop_token_ends_each_item_where_it_fires():
    model = tiny_model(prenet_dropout_at_inference=False)
    batch = random_batch()
    with torch.no_grad():
        model.stop_projection.bias.fill_(10.0)  # every frame says stop: one step of r frames, first frame
    out = decode(model, batch.tokens, batch.token_lengths)
    assert out.mel_lengths.tolist() == [1, 1, 1] and out.alignments.shape[1] == 1
    assert all(not f.no_stop for f in out.failures)


# --- training -------------------------------------------------------------------------------------------
def test_every_parameter_learns_from_the_loss_and_the_terms_are_finite():
    model = tiny_model().train()
    batch = random_batch(mel_lengths=(20, 11, 16))  # 20 frames: not a multiple of r = 3
    out = model.loss(batch)
    out.total.backward()
    assert set(out.terms) >= {"mel_l1_before", "mel_l1_after", "mel_l2_before", "mel_l2_after", "stop_bce",
                              "guided_attention"}
    assert all(torch.isfinite(v) for v in out.terms.values()) and torch.isfinite(out.total)
    silent = [n for n, p in model.named_parameters() if p.grad is None or not torch.any(p.grad != 0)]
    assert not silent, silent
    assert int(model.loss_steps) == 1
    # the interface Tacotron 2's callers use
    fwd = model.eval()(batch)
    assert fwd.mel_after.shape == (3, N_MELS, 20) and fwd.stop_logits.shape == (3, 20)
    assert fwd.alignments.shape == (3, 7, 7)
    assert model.teacher_forced_alignment(batch).shape == (3, 20, 7)
    spec = model.inference_spec()
    assert spec.autoregressive and spec.item_noise_seeds and not spec.controls


def test_teacher_forcing_is_one_chunk_of_what_free_running_decodes():
    """The teacher-forced frames of the target equal a cached decode fed the same frames step by step."""
    model = tiny_model(prenet_dropout_at_inference=False)
    batch = random_batch(token_lengths=(7,), mel_lengths=(18,))
    with torch.no_grad():
        out = model._teacher_forced(batch)
        inputs = model._decoder_inputs(model._target(batch))  # [1, 6, M]
        memory, mask = model.encode(batch.tokens, batch.token_lengths)
        cache, frames = model.start_cache(memory, mask), []
        for s in range(inputs.shape[1]):
            step = model.decode_chunk(cache, inputs[:, s : s + 1])
            cache = step.cache
            frames.append(step.frames[:, 0])
    before = torch.stack(frames, 1).reshape(1, 18, N_MELS).transpose(1, 2)
    torch.testing.assert_close(out.mel_before, before, atol=1e-5, rtol=0)


# --- configs and the recipe -------------------------------------------------------------------------------
def test_model_yaml_instantiates_at_cpu_small_size():
    cfg = OmegaConf.load(CONF_DIR / "model" / "transformer_ar.yaml")
    assert "n_symbols" not in cfg and "n_mels" not in cfg  # derived by the trainer, never restated
    model = hydra.utils.instantiate(cfg, n_symbols=N_SYMBOLS, n_mels=80)
    assert isinstance(model, TransformerAR) and model.r == 3
    n_params = sum(p.numel() for p in model.parameters())
    assert 3e6 < n_params < 15e6, n_params  # CPU-small, well under the paper's size


def test_experiment_composes_through_hydra(featurised_corpus: Path, tmp_path: Path):
    from recipes.train import build
    from test_train_recipe import config

    cfg = config(["experiment=tar_cpu_small", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}"])
    assert cfg.name == "tar_cpu_small" and cfg.threads == 1 and cfg.data.batch_size == 32
    assert cfg.checkpoint_every_n_steps == 250 and cfg.model.reduction_factor == 3
    module, _, _ = build(cfg)
    assert isinstance(module.model, TransformerAR)
    assert module.meta.build_kwargs == {"n_symbols": 78, "n_mels": 80}
    # warm-started from the shipped Tacotron 2's encoder and postnet only (the decoder is new)
    assert module.meta.info["init_from_only"] == ["encoder.", "postnet."]
    shipped = checkpoint.load("checkpoints/ar.pt").model.state_dict()
    own = module.model.state_dict()
    assert torch.equal(own["encoder.embedding.weight"], shipped["encoder.embedding.weight"])


def test_a_tiny_training_run_through_the_recipe(featurised_corpus: Path, tmp_path: Path):
    from test_train_recipe import fit

    base = ["debug=tiny", "model=transformer_ar", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}",
            "trainer.max_steps=3", "trainer.val_check_interval=3", "checkpoint_every_n_steps=3", *TINY_OVERRIDES]
    module, trainer = fit(base)
    assert trainer.global_step == 3 and int(module.model.loss_steps) == 3
    loaded = checkpoint.load(tmp_path / "checkpoints" / "last.ckpt")
    assert isinstance(loaded.model, TransformerAR)
    ids = torch.tensor([loaded.frontend().encode("Hello world.")])
    out = loaded.model.eval().infer(ids, torch.tensor([ids.shape[1]]), max_decoder_steps=4)
    assert out.mels.shape[:2] == (1, 80) and torch.isfinite(out.mels).all()


# --- the engine -----------------------------------------------------------------------------------------------
def test_the_torch_engine_speaks_with_it_the_same_at_any_batch_size(tmp_path: Path):
    from tts.runtime import Pipeline
    from tts.runtime.torch_engine import TorchEngine
    from tts.vocoder.registry import load_vocoder

    ckpt = tiny_checkpoint(tmp_path / "tar.pt", "transformer_ar", **TINY)
    loaded = checkpoint.load(ckpt)
    pipeline = Pipeline(TorchEngine(loaded, load_vocoder("griffin-lim", loaded.mel_config)))
    assert pipeline.capabilities.autoregressive
    # the engine's mel call: each item's frames are the same alone and in a batch (its own seed, tts.noise)
    engine = pipeline.engine
    ids = [engine.encode(t) for t in ("Hello there.", "This is a longer test sentence.", "Bye.")]
    c = pipeline.controls(seed=4)
    batched = engine.mels(ids, [0, 1, 2], c)
    assert len(set(batched.lengths.tolist())) > 1
    for b in range(3):
        alone = engine.mels(ids[b : b + 1], [b], c)
        n = int(alone.lengths[0])
        assert int(batched.lengths[b]) == n
        torch.testing.assert_close(batched.mels[b, :, :n], alone.mels[0, :, :n], atol=1e-5, rtol=0)
    # and the audio of a text: the same at batch 1 and 3.  Griffin-Lim (32 iterations, momentum 0.99) is chaotic
    # in its input: a 1e-6 mel perturbation moves a random mel's wave by 2e-4 relative RMS (measured), and a
    # padded batch's mels differ by up to ~1e-5 from batch 1 (float sums reordered): measured 1.5e-3 here
    text = "Hello there. This is a test. Good bye."
    one = pipeline.synthesize(text, c, batch_size=1)
    three = pipeline.synthesize(text, c, batch_size=3)
    assert len(one.sentences) == 3 and one.wave.size == three.wave.size > 0
    rel_rms = np.sqrt(np.mean((one.wave - three.wave) ** 2) / np.mean(one.wave**2))
    assert rel_rms <= 1e-2, rel_rms
    other = pipeline.synthesize(text, pipeline.controls(seed=5), batch_size=3)
    assert other.wave.size != one.wave.size or not np.allclose(other.wave, one.wave, atol=1e-2)


def test_warm_start_takes_tacotrons_encoder_and_postnet_only(tmp_path):
    """init_from_only: the Transformer AR starts from a trained Tacotron 2's encoder and postnet (same modules,
    same names), its decoder stays fresh; a prefix the checkpoint does not hold is a clear error."""
    from tests.helpers import tiny_checkpoint
    from tts import checkpoint
    from tts.audio import MelConfig
    from tts.text.frontend import TextFrontend

    enc = dict(embedding_dim=16, encoder_dim=32, encoder_n_convs=1, encoder_kernel_size=3, postnet_channels=16,
               postnet_layers=2, postnet_kernel_size=3, prenet_dim=16, attention_rnn_dim=32, decoder_rnn_dim=32,
               attention_dim=16, location_filters=4)
    src = tiny_checkpoint(tmp_path / "taco.pt", "autoregressive", **enc)
    frontend = TextFrontend(max_symbols=400)
    torch.manual_seed(1)
    model = TransformerAR(n_symbols=len(frontend.symbols), n_mels=MelConfig.default().n_mels, **TINY)
    fresh = {k: v.clone() for k, v in model.state_dict().items()}
    checkpoint.warm_start(model, src, MelConfig.default(), frontend.to_dict(), ("encoder.", "postnet."))
    taco = checkpoint.load(src).model.state_dict()
    for k, v in model.state_dict().items():
        if k.startswith(("encoder.", "postnet.")):
            assert torch.equal(v, taco[k].float()), k
        else:
            assert torch.equal(v, fresh[k]), k
    with pytest.raises(checkpoint.CheckpointError, match="lacks"):
        checkpoint.warm_start(model, src, MelConfig.default(), frontend.to_dict(), ("encoder_alpha",))

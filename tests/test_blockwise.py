"""Block-wise (semi-autoregressive) decoding of the NAR (issue 22): masks, the bounded cache, batching,
the whole-utterance block, training == block-by-block inference, the windowed refiner, a tiny training run."""

from __future__ import annotations

import pytest
import torch

from test_nonautoregressive import N_MELS, _one_thread, random_batch, tiny_model  # noqa: F401 (autouse: 1 thread)
from tts.models.blockwise import BlockDecoder, StreamingRefiner, prenet_context, receptive_half_width
from tts.models.layers.transformer import BlockLayout, block_causal_mask
from tts.models.refiner import per_item_noise


def block_model(seed: int = 0, **kw) -> torch.nn.Module:
    """A tiny block-mode model whose prenet really contributes (its output layer starts at zero)."""
    torch.manual_seed(seed)
    args = dict(block_sizes=[4, 0], block_past_frames=5, ffn_kernel_size=5, ffn_kernel_size_out=3, decoder_layers=2)
    args.update(kw)
    model = tiny_model(**args)
    torch.nn.init.normal_(model.block_prenet.out.weight, std=0.3)
    return model.eval()


def decode_all(dec: BlockDecoder, frames: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    blocks = list(dec.blocks(frames, mask))
    return torch.cat([b.hidden for b in blocks], 1), torch.cat([b.coarse for b in blocks], 2)


def test_block_causal_mask_never_sees_a_later_block_and_keeps_a_bounded_past():
    layout = BlockLayout(block_frames=4, past_frames=6)
    mask = block_causal_mask(23, layout)
    for q in range(23):
        start = q // 4 * 4
        for k in range(23):
            assert bool(mask[q, k]) == (start - 6 <= k < start + 4), (q, k)
    # one block as long as the utterance: full attention (the parallel decoder)
    assert block_causal_mask(23, BlockLayout(23, 0)).all()
    with pytest.raises(ValueError, match="block_frames"):
        BlockLayout(0, 4)


def test_no_decoder_output_depends_on_a_later_block():
    """The training path (whole sequence + masks, conv taps into later blocks removed): changing the frames of
    block j and later leaves every frame of earlier blocks unchanged (float rounding), at every block size."""
    model = block_model()
    b = random_batch(2, 9, seed=3)
    plan = model.prepare(b.tokens, b.token_lengths, durations=b.durations)
    t = plan.frames.shape[1]
    for bf in (1, 3, 4, 7):
        layout = BlockLayout(bf, 5)
        hidden, _ = model.decode(plan.frames, plan.frame_mask, layout)
        cut = (t // 2) // bf * bf  # first frame of a block
        changed = plan.frames.clone()
        changed[:, cut:] += torch.randn_like(changed[:, cut:])
        hidden2, _ = model.decode(changed, plan.frame_mask, layout)
        # equal up to float rounding (the removed conv taps are subtracted, not skipped)
        torch.testing.assert_close(hidden[:, :cut], hidden2[:, :cut], atol=1e-5, rtol=0)
        assert (hidden[:, cut:] - hidden2[:, cut:]).abs().max() > 0.1


def test_training_masks_compute_what_block_by_block_decoding_computes():
    """Teacher forcing with the mel the blocks generated == the block decoder with its cache (so a model
    trained on masks can be decoded block by block): same hidden frames and coarse mel."""
    model = block_model()
    b = random_batch(3, 9, seed=1)
    plan = model.prepare(b.tokens, b.token_lengths, durations=b.durations)
    t = plan.frames.shape[1]
    for bf in (1, 3, 4, 7, t):
        hidden, coarse = decode_all(model.block_decoder(bf), plan.frames, plan.frame_mask)
        fm = plan.frame_mask.float()[:, :, None]
        frames = plan.frames + model.block_prenet.teacher_forced(coarse, t, bf) * fm
        hidden2, coarse2 = model.decode(frames, plan.frame_mask, BlockLayout(bf, model.block_past_frames))
        torch.testing.assert_close(hidden, hidden2, atol=2e-6, rtol=0)
        torch.testing.assert_close(coarse, coarse2, atol=2e-6, rtol=0)


def test_prenet_reads_the_frames_before_each_block_start():
    mel = torch.arange(2 * 3 * 10, dtype=torch.float32).view(2, 3, 10)  # [B, M, T]
    ctx = prenet_context(mel, torch.tensor([0, 4, 8]), 2).view(2, 3, 2, 3)  # [B, J, n_context, M]
    assert torch.equal(ctx[:, 0], torch.zeros(2, 2, 3))  # before frame 0: the go frames
    assert torch.equal(ctx[:, 1], mel[:, :, 2:4].transpose(1, 2))
    assert torch.equal(ctx[:, 2], mel[:, :, 6:8].transpose(1, 2))


def test_cache_is_bounded_on_a_2000_frame_utterance():
    """The cache holds past_frames keys/values per layer (+ the convs' half-widths), whatever the length."""
    model = block_model(block_past_frames=32)
    sizes = {}
    for n_frames in (300, 2000):
        tokens = torch.randint(1, 40, (1, 100))
        durations = torch.full((1, 100), n_frames // 100)
        plan = model.prepare(tokens, torch.tensor([100]), durations=durations)
        assert plan.frames.shape[1] == n_frames
        dec = model.block_decoder(16)
        n_blocks = sum(1 for _ in dec.blocks(plan.frames, plan.frame_mask))
        assert n_blocks == -(-n_frames // 16)
        sizes[n_frames] = (dec.max_cache_frames, dec.max_cache_bytes)
    assert sizes[2000] == sizes[300]
    assert sizes[2000][0] == 32
    d, layers, kernel = 32, 2, 5
    # k, v: [1, H, 32, d/H] float32 each + the key mask + the convs' left contexts
    assert sizes[2000][1] <= layers * (2 * 32 * d * 4 + 32 + (kernel // 2) * (d + 64) * 4 + 64 * 4 * 1)


def test_batched_block_decoding_of_different_lengths_equals_each_alone():
    model = block_model()
    b = random_batch(3, 9, seed=5)
    plan = model.prepare(b.tokens, b.token_lengths, durations=b.durations)
    lengths = plan.mel_lengths.tolist()
    assert len(set(lengths)) > 1
    for bf in (2, 4, 6):
        hidden, coarse = decode_all(model.block_decoder(bf), plan.frames, plan.frame_mask)
        for i, n in enumerate(lengths):
            h1, c1 = decode_all(model.block_decoder(bf), plan.frames[i : i + 1, :n], plan.frame_mask[i : i + 1, :n])
            torch.testing.assert_close(hidden[i : i + 1, :n], h1, atol=2e-6, rtol=0)
            torch.testing.assert_close(coarse[i : i + 1, :, :n], c1, atol=2e-6, rtol=0)
            assert not coarse[i, :, n:].any() and not hidden[i, n:].any()  # padding stays zero


def test_whole_utterance_block_equals_the_parallel_decoder():
    """A parallel model's weights warm-started into block mode (prenet output at zero): one block of the
    whole utterance gives exactly the parallel infer(); and the parallel weights decoded by BlockDecoder
    without a prenet, one block, equal the parallel decoder."""
    torch.manual_seed(0)
    parallel = tiny_model().eval()
    block = tiny_model(block_sizes=[8, 0]).eval()
    missing, unexpected = block.load_state_dict(parallel.state_dict(), strict=False)
    assert all(k.startswith("block_prenet.") for k in missing) and not unexpected
    b = random_batch(3, 9, seed=2)
    a = parallel.infer(b.tokens, b.token_lengths, refine_steps=2)
    w = block.infer(b.tokens, b.token_lengths, refine_steps=2, block_frames=0)
    assert torch.equal(a.mels, w.mels) and torch.equal(a.mel_lengths, w.mel_lengths)
    plan = parallel.prepare(b.tokens, b.token_lengths)
    t = plan.frames.shape[1]
    hidden, coarse = decode_all(BlockDecoder(parallel.decoder, parallel.mel_proj, None, BlockLayout(t, 0)),
                                plan.frames, plan.frame_mask)
    h2, c2 = parallel.decode(plan.frames, plan.frame_mask)
    assert torch.equal(hidden, h2) and torch.equal(coarse, c2)
    # a parallel checkpoint refuses a block size (it was never trained for it)
    with pytest.raises(ValueError, match="parallel decoding only"):
        parallel.infer(b.tokens, b.token_lengths, block_frames=8)


def test_streamed_mels_equal_infer_with_the_refiner_kept():
    """stream_mels (block decoder + windowed refiner) yields, in order, the mels infer() makes at the same
    block size, K and seeds (float rounding only), and its first chunk comes before the utterance ends."""
    model = block_model(block_sizes=[4, 0])
    tokens = torch.randint(1, 40, (2, 30))
    durations = torch.randint(1, 5, (2, 30))
    lengths = torch.tensor([30, 22])
    for bf in (4, 16):
        ref = model.infer(tokens, lengths, refine_steps=2, temperature=0.7, durations=durations, block_frames=bf,
                          noise_seeds=[11, 12])
        plan = model.prepare(tokens, lengths, durations=durations)
        chunks = list(model.stream_mels(plan, bf, refine_steps=2, temperature=0.7, noise_seeds=[11, 12],
                                        refine_chunk_frames=1))
        assert [c.start for c in chunks] == [sum(c.mels.shape[2] for c in chunks[:i]) for i in range(len(chunks))]
        streamed = torch.cat([c.mels for c in chunks], 2)
        assert len(chunks) > 2 and chunks[0].mels.shape[2] < streamed.shape[2]
        torch.testing.assert_close(streamed, ref.mels, atol=1e-5, rtol=0)


def test_windowed_refiner_equals_whole_refinement():
    model = tiny_model(refiner=True)
    refiner = model.refiner.eval()
    torch.manual_seed(4)
    t = 90
    coarse, cond = torch.randn(2, N_MELS, t), torch.randn(2, 32, t)
    mask = torch.arange(t)[None] < torch.tensor([[90], [61]])
    coarse, cond = coarse * mask[:, None], cond * mask[:, None]
    whole = refiner.sample(coarse, cond, mask, 3, 0.8, noise_seeds=[1, 2]).mels
    noise = per_item_noise(coarse.shape, mask.sum(1).tolist(), [1, 2])
    stream = StreamingRefiner(refiner, 3, 0.8, noise, mask, min_chunk=4)
    assert stream.margin == 3 * receptive_half_width(refiner) > 0
    out, start = [], 0
    for n in (5, 1, 17, 30, 9, 28):
        out.append(stream.push(coarse[:, :, start : start + n], cond[:, :, start : start + n], final=start + n >= t))
        start += n
    torch.testing.assert_close(torch.cat(out, 2), whole, atol=1e-5, rtol=0)
    # the window it keeps does not grow with the utterance
    assert stream.coarse.shape[2] <= 2 * stream.margin + 30


def test_block_mode_training_step_draws_block_sizes_and_learns():
    """Block-mode loss on a teacher-forced batch: finite, gradients reach the prenet, and a few optimizer
    steps lower it (the tiny training run of the recipe is in test_train_recipe-style test below)."""
    torch.manual_seed(0)
    model = tiny_model(block_sizes=[2, 4, 0], block_past_frames=4).train()
    batch = random_batch(3, 9, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        out = model.loss(batch)
        opt.zero_grad()
        out.total.backward()
        losses.append(float(out.terms["mel_l1"]))
        opt.step()
    assert model.block_prenet.inp.weight.grad is not None and model.block_prenet.out.weight.grad.abs().sum() > 0
    assert sum(losses[-5:]) < sum(losses[:5])


def test_tiny_block_mode_training_run_warm_started_from_a_parallel_checkpoint(featurised_corpus, tmp_path):
    """The recipe end to end in block mode: a parallel tiny run, released, warm-starts a block-mode run (the
    prenet starts fresh), which trains, validates and writes a checkpoint that decodes block by block."""
    from hydra.utils import instantiate
    from recipes.extract_durations import from_festival
    from test_train_recipe import TINY_NAR, config, fit

    from tts import checkpoint
    from tts.data.dataset import TTSDataset

    dur_dir = tmp_path / "durations"
    dur_dir.mkdir()
    base = ["debug=tiny", "model=nonautoregressive", f"data.root={featurised_corpus}", f"data.durations_dir={dur_dir}",
            "log_audio=false", *TINY_NAR]
    cfg = config(base + [f"exp_dir={tmp_path / 'parallel'}"])
    frontend, mel_config = instantiate(cfg.text), instantiate(cfg.audio)
    for split in ("train", "val"):  # the corpus's own (Festival) durations, as the shipped nar.pt
        from_festival(TTSDataset(featurised_corpus, split, frontend, mel_config), dur_dir, frontend)
    fit(base + ["trainer.max_steps=2", f"exp_dir={tmp_path / 'parallel'}"])
    parallel_ckpt = tmp_path / "nar.pt"
    checkpoint.export(tmp_path / "parallel" / "checkpoints" / "last.ckpt", parallel_ckpt)

    block = ["+model.block_sizes=[2,4,0]", "+model.block_past_frames=8", "+model.block_val_frames=4",
             "+model.block_frames=4", f"init_from={parallel_ckpt}"]
    module, trainer = fit(base + block + ["trainer.max_steps=6", "trainer.val_check_interval=3", f"exp_dir={tmp_path / 'block'}"])
    assert trainer.global_step == 6
    assert torch.isfinite(torch.tensor(float(trainer.callback_metrics["val/mel_l1"])))
    loaded = checkpoint.load(tmp_path / "block" / "checkpoints" / "last.ckpt")
    assert loaded.model.block_prenet is not None and loaded.model.block_frames == 4
    ids = torch.tensor([loaded.frontend().encode("Hello world, this is a test.")])
    out = loaded.model.infer(ids, torch.tensor([ids.shape[1]]), refine_steps=1)  # the model's B = 4
    assert out.mels.shape[1] == 80 and out.mel_lengths[0] > 0 and torch.isfinite(out.mels).all()


def test_evaluate_expands_nar_bs_and_a_parallel_checkpoint_refuses_block_sizes():
    from recipes.evaluate import EvaluationConfigError, parse_systems

    from tts.evaluation.systems import SystemSpec
    from tts.paths import CHECKPOINT_DIR

    nar = str(CHECKPOINT_DIR / "nar.pt")
    systems = parse_systems({"nb": {"kind": "acoustic", "checkpoint": nar, "vocoder": "griffin-lim",
                                    "nar_bs": [8, 0], "refine_steps": 2}})
    assert [(s.name, s.block_frames, s.refine_steps) for s in systems] == [("nb_b8", 8, 2), ("nb_bwhole", 0, 2)]
    assert systems[0].spec()["block_frames"] == 8
    assert "block_frames" not in SystemSpec("p", checkpoint=nar, vocoder="griffin-lim").spec()  # old wavs keep their identity
    with pytest.raises(EvaluationConfigError, match="block sizes"):
        parse_systems({"nb": {"kind": "acoustic", "checkpoint": nar, "nar_bs": [-1]}})
    with pytest.raises(ValueError, match="block-mode checkpoint"):
        systems[0].pipeline()  # nar.pt was trained for parallel decoding only

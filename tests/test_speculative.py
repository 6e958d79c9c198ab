"""Speculative decoding of the Transformer AR (issue 37 item 3, tts/models/speculative.py): with drafts equal to
the AR's own frames every draft is accepted and the result IS plain cached decoding; at tolerance 0 no draft is
accepted and the result is plain decoding one position a round; a loose tolerance emits k positions a round; the
prenet noise of a position does not depend on the rounds; the NAR drafter anchors on the AR's attention.  Tiny
random models on CPU."""

from __future__ import annotations

import pytest
import torch

from test_autoregressive import random_batch
from test_transformer_ar import assert_same_decode, decode, tiny_model
from tts.models.speculative import NARDrafter, RepeatDrafter, Speculation, frame_distance

STEPS = 14
FREE = dict(max_decoder_steps=STEPS, stop_threshold=1.1)  # no stop: every item decodes all STEPS positions


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def plain_positions(model, batch, seeds) -> tuple:
    """Plain cached decode, and the normalised frames [B, S, r, M] each position produced (pre-postnet)."""
    produced = []
    run_chunk = model.decode_chunk

    def recording(cache, inputs):
        out = run_chunk(cache, inputs)
        produced.append(out.frames)
        return out

    model.decode_chunk = recording
    try:
        out = decode(model, batch.tokens, batch.token_lengths, noise_seeds=seeds, **FREE)
    finally:
        del model.decode_chunk
    return out, torch.cat(produced, dim=1)


class OracleDrafter:
    """Drafts what plain decoding produced: the last frame of the next n positions."""

    def __init__(self, frames: torch.Tensor) -> None:
        self.frames = frames  # [B, S, r, M]

    def draft(self, frame, attention, emitted, n):
        last = self.frames[:, :, -1]  # [B, S, M]
        at = torch.arange(emitted, emitted + n).clamp(max=last.shape[1] - 1)
        return last[:, at]


@pytest.mark.parametrize("k", [2, 4, 16])
def test_drafts_equal_to_the_ar_s_own_frames_are_all_accepted_and_change_nothing(k: int):
    model = tiny_model(prenet_dropout_at_inference=True)
    batch = random_batch()
    seeds = [3, 4, 5]
    plain, frames = plain_positions(model, batch, seeds)
    spec = decode(model, batch.tokens, batch.token_lengths, noise_seeds=seeds,
                  speculation=Speculation(OracleDrafter(frames), k=k, tolerance=1e-4), **FREE)
    assert_same_decode(spec, plain)
    stats = spec.speculative
    # every draft taken but past the step limit, where the oracle has nothing to say (the last round)
    assert stats.accepted >= stats.drafted - (k - 1)
    assert stats.emitted[:-1] == [k] * (len(stats.emitted) - 1)  # a full chunk a round (the last cut by the limit)
    assert stats.rounds == -(-STEPS // k)


def test_at_tolerance_zero_nothing_is_accepted_and_the_decode_is_plain():
    model = tiny_model(prenet_dropout_at_inference=True)
    batch = random_batch()
    plain = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3], **FREE)
    spec = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3],
                  speculation=Speculation(RepeatDrafter(), k=4, tolerance=0.0), **FREE)
    assert_same_decode(spec, plain)  # every round keeps only o_1, the plain step, with its own noise
    assert spec.speculative.accepted == 0 and spec.speculative.rounds == STEPS
    assert spec.speculative.emitted == [1] * STEPS


def test_a_loose_tolerance_emits_k_positions_a_round_and_moves_the_result():
    model = tiny_model(prenet_dropout_at_inference=True)
    batch = random_batch()
    plain = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3], **FREE)
    spec = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3],
                  speculation=Speculation(RepeatDrafter(), k=4, tolerance=1e9), **FREE)
    assert spec.speculative.acceptance == 1.0 and spec.speculative.rounds == 4  # ceil(14 / 4)
    assert spec.mels.shape == plain.mels.shape
    assert not torch.allclose(spec.mels, plain.mels, atol=1e-3)  # fed its drafts, the AR says something else


def test_the_stop_token_ends_a_speculative_decode_where_it_fires():
    model = tiny_model(prenet_dropout_at_inference=False)
    batch = random_batch()
    plain, frames = plain_positions(model, batch, [1, 2, 3])
    kwargs = dict(max_decoder_steps=STEPS, stop_threshold=0.5)  # the random stop token fires somewhere
    plain = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3], **kwargs)
    spec = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3],
                  speculation=Speculation(OracleDrafter(frames), k=8, tolerance=1e-4), **kwargs)
    assert_same_decode(spec, plain)
    assert [f.ok for f in spec.failures] == [f.ok for f in plain.failures]


def test_batched_speculation_equals_each_item_alone():
    """The batch accepts the shortest prefix of its live items; the frames an item gets are still its own."""
    model = tiny_model(prenet_dropout_at_inference=True)
    batch = random_batch()
    plain, frames = plain_positions(model, batch, [1, 2, 3])
    whole = decode(model, batch.tokens, batch.token_lengths, noise_seeds=[1, 2, 3],
                   speculation=Speculation(OracleDrafter(frames), k=4, tolerance=1e-4), **FREE)
    for b in range(3):
        L = int(batch.token_lengths[b])
        alone = decode(model, batch.tokens[b : b + 1, :L], batch.token_lengths[b : b + 1], noise_seeds=[b + 1],
                       speculation=Speculation(OracleDrafter(frames[b : b + 1]), k=4, tolerance=1e-4), **FREE)
        torch.testing.assert_close(alone.mels[0], whole.mels[b, :, : alone.mels.shape[2]], atol=1e-5, rtol=0)


def test_speculation_needs_the_cache_and_a_sensible_k():
    model = tiny_model()
    batch = random_batch()
    with pytest.raises(ValueError, match="use_cache"):
        decode(model, batch.tokens, batch.token_lengths, use_cache=False, speculation=Speculation(RepeatDrafter()))
    with pytest.raises(ValueError, match="k >= 2"):
        Speculation(RepeatDrafter(), k=1)
    with pytest.raises(ValueError, match="tolerance"):
        Speculation(RepeatDrafter(), k=2, tolerance=float("nan"))


def test_the_nar_drafter_follows_the_attention_and_snaps_to_the_closest_frame():
    M, r = 4, 3
    durations = torch.tensor([[2, 6, 4]])  # token centres at frames 1, 5, 10
    mels = torch.arange(12, dtype=torch.float32)[None, :, None].expand(1, 12, M).clone()  # frame t == t
    drafter = NARDrafter(mels, durations, torch.tensor([12]), r=r, search=1)
    on_second = torch.tensor([[0.0, 1.0, 0.0]])  # attention on token 1: centre frame 5
    assert drafter.anchor(torch.full((1, M), 5.0), on_second).item() == 5
    assert drafter.anchor(torch.full((1, M), 6.0), on_second).item() == 6  # within `search`: the closest frame
    assert drafter.anchor(torch.full((1, M), 9.0), on_second).item() == 6  # past it: the edge of the window
    halfway = torch.tensor([[0.0, 0.5, 0.5]])  # centroid 1.5: between the centres 5 and 10
    assert drafter.anchor(torch.full((1, M), 7.5), halfway).item() in (7, 8)
    drafts = drafter.draft(torch.full((1, M), 5.0), on_second, emitted=0, n=3)  # frames 8, 11, then held at 11
    assert drafts[0, :, 0].tolist() == [8.0, 11.0, 11.0]
    assert frame_distance(drafts[0, 0], torch.full((M,), 5.0)).item() == pytest.approx(3.0)


# --- the engine decorator (tts.runtime.speculative) ---------------------------------------------------------
@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    from helpers import TINY as TINY_MODELS, tiny_checkpoint
    from test_transformer_ar import TINY as TINY_TAR
    from tts import checkpoint
    from tts.runtime.torch_engine import TorchEngine
    from tts.vocoder.registry import load_vocoder

    root = tmp_path_factory.mktemp("speculative")
    tar_path = tiny_checkpoint(root / "tar.pt", "transformer_ar", **TINY_TAR)
    tar = checkpoint.load(tar_path)
    nar = tiny_checkpoint(root / "nar.pt", "nonautoregressive", **TINY_MODELS["nonautoregressive"])
    ar = tiny_checkpoint(root / "ar.pt", "autoregressive", **TINY_MODELS["autoregressive"])
    base = TorchEngine(tar, load_vocoder("griffin-lim", tar.mel_config))
    return {"base": base, "nar": nar, "ar": ar, "tar_path": tar_path}


def test_the_engine_at_tolerance_zero_is_the_base_and_counts_its_rounds(engines):
    from tts.runtime.speculative import SpeculativeEngine

    base = engines["base"]
    ids = [base.encode("Hello world."), base.encode("The cat sat on the mat.")]
    controls = base.defaults.replace(seed=7)
    frames = [30, 42]  # forced: a random model's stop token means nothing
    for drafter in ("repeat", engines["nar"]):
        engine = SpeculativeEngine(base, drafter, k=4, tolerance=0.0)
        got, want = engine.mels(ids, [0, 1], controls, frames), base.mels(ids, [0, 1], controls, frames)
        torch.testing.assert_close(got.mels, want.mels, atol=1e-5, rtol=0)
        assert engine.last_stats.accepted == 0 and engine.last_stats.rounds == -(-max(frames) // 3)
    assert engine.last_draft_s > 0  # the NAR drafted
    loose = SpeculativeEngine(base, engines["nar"], k=4, tolerance=1e9)
    loose.mels(ids, [0, 1], controls, frames)
    assert loose.last_stats.acceptance == 1.0 and loose.last_stats.positions_per_round > 3


def test_the_pipeline_speaks_through_it(engines):
    from tts.runtime.pipeline import Pipeline
    from tts.runtime.speculative import SpeculativeEngine

    pipeline = Pipeline(SpeculativeEngine(engines["base"], engines["nar"], k=8, tolerance=0.5))
    audio = pipeline.synthesize("One sentence. And another one.", pipeline.controls(seed=1))
    assert audio.wave.size > 0 and pipeline.engine.last_stats.rounds > 0


def test_the_engine_refuses_what_cannot_speculate(engines):
    from tts import checkpoint
    from tts.errors import CheckpointError
    from tts.runtime.speculative import SpeculativeEngine
    from tts.runtime.torch_engine import TorchEngine

    tacotron = TorchEngine(checkpoint.load(engines["ar"]), None)
    with pytest.raises(CheckpointError, match="Transformer AR"):
        SpeculativeEngine(tacotron)
    with pytest.raises(CheckpointError, match="non-autoregressive"):
        SpeculativeEngine(engines["base"], tacotron)
    with pytest.raises(ValueError, match="k >= 2"):
        SpeculativeEngine(engines["base"], k=1)
    with pytest.raises(ValueError, match="autoregressive model"):
        TorchEngine(checkpoint.load(engines["nar"]), None).mels([[3, 4]], [0], engines["base"].defaults,
                                                                ar_options={"speculation": None})


def test_the_evaluation_system_option_composes(engines):
    from recipes.evaluate import EvaluationConfigError, parse_systems
    from tts.runtime.speculative import DEFAULT_TOLERANCE, SpeculativeEngine

    tar = engines["tar_path"]
    [plain, spec] = parse_systems({
        "tar": {"kind": "acoustic", "checkpoint": str(tar), "vocoder": "griffin-lim"},
        "tar_s4": {"kind": "acoustic", "checkpoint": str(tar), "vocoder": "griffin-lim", "speculate": 4,
                   "drafter": str(engines["nar"])}})
    assert "speculate" not in plain.spec()  # earlier runs' identities stay valid
    assert spec.spec()["speculate"] == 4 and spec.spec()["tolerance"] == DEFAULT_TOLERANCE
    pipeline = spec.pipeline()
    assert isinstance(pipeline.engine, SpeculativeEngine) and pipeline.engine.k == 4
    [item] = spec.synthesize_items(pipeline, ["Hello world."], seed=0)
    assert item.wave.size > 0 and pipeline.engine.last_stats.rounds > 0
    for bad in ({"speculate": 1}, {"speculate": "4"}, {"drafter": "repeat"}, {"tolerance": 0.5},
                {"speculate": 4, "drafter": "/no.pt"}, {"speculate": 4, "tolerance": -1},
                {"speculate": 4, "rescore": 2}):
        with pytest.raises(EvaluationConfigError):
            parse_systems({"s": {"kind": "acoustic", "checkpoint": str(tar), **bad}})


def test_the_cli_speaks_speculatively_and_refuses_bad_values(engines, tmp_path):
    import os
    import subprocess
    import sys

    from tts.paths import REPO_ROOT

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tts.synthesize", "--vocoder", "griffin-lim", "--quiet",
                               "--text", "Hello world.", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})

    out = tmp_path / "s.wav"
    proc = cli("--checkpoint", str(engines["tar_path"]), "--speculate", "4", "--drafter", str(engines["nar"]),
               "--tolerance", "0.3", "--keep-failed", "--out", str(out))  # a random AR's attention fails
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.stat().st_size > 44
    bad = tmp_path / "x.wav"
    for args, message in ((["--speculate", "1"], "--speculate"), (["--speculate", "65"], "--speculate"),
                          (["--drafter", "repeat"], "give --speculate"), (["--speculate", "4", "--tolerance", "-1"],
                                                                           "--tolerance"),
                          (["--speculate", "4", "--rescore", "2"], "do not combine")):
        proc = cli("--checkpoint", str(engines["tar_path"]), *args, "--out", str(bad))
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    proc = cli("--checkpoint", str(engines["nar"]), "--speculate", "4", "--out", str(bad))  # not a Transformer AR
    assert proc.returncode not in (0, 1) and "Transformer AR" in proc.stderr, proc.stderr
    assert not bad.exists()

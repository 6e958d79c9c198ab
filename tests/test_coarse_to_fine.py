"""Coarse-to-fine (tts.runtime.coarse_to_fine) on tiny random-weight checkpoints: the result is the AR's
teacher-forced postnet output on the NAR's draft (recomputed through the AR's public forward), with the draft's
lengths and durations; it is local (a change of the draft at frame t moves nothing far before t); an item is
the same alone and in a batch; the evaluation systems reach it and bad combinations are refused."""

import numpy as np
import pytest
import torch
from tts import checkpoint
from tts.data.batch import Batch
from tts.runtime.coarse_to_fine import CoarseToFineEngine, refine_locally
from tts.runtime.torch_engine import TorchEngine

# the rescoring tests' tiny checkpoints (a NAR with a refiner, an AR with r = 2) and the NAR's torch engine
from test_rescoring import FRAMES, SENTENCES, base, ckpts  # noqa: F401 (pytest fixtures)


def ar_forward(ar, ids: list[int], mel: torch.Tensor) -> torch.Tensor:
    """The AR's public forward on one mel with its prenets' inference-time dropout off -> mel_after [M, T]."""
    batch = Batch(ids=["x"], texts=["x"], tokens=torch.tensor([ids]), token_lengths=torch.tensor([len(ids)]),
                  mels=mel[None], mel_lengths=torch.tensor([mel.shape[1]]))
    prenets = [m for m in ar.modules() if hasattr(m, "dropout_at_inference")]
    for p in prenets:
        p.dropout_at_inference = False
    try:
        with torch.no_grad():
            return ar(batch).mel_after[0]
    finally:
        for p in prenets:
            p.dropout_at_inference = True


def test_the_result_is_the_ars_teacher_forced_output_on_the_draft(base, ckpts):
    engine = CoarseToFineEngine(base, ckpts["ar"])
    ids = [base.encode(t) for t in SENTENCES]
    controls = base.defaults.replace(seed=4)
    out, draft = engine.mels(ids, [0, 1, 2], controls, FRAMES), base.mels(ids, [0, 1, 2], controls, FRAMES)
    assert np.array_equal(out.lengths, draft.lengths) and np.array_equal(out.durations, draft.durations)
    ar = checkpoint.load(ckpts["ar"]).model.eval()
    for b in range(3):
        n = int(draft.lengths[b])
        want = ar_forward(ar, ids[b], draft.mels[b, :, :n])
        torch.testing.assert_close(out.mels[b, :, :n], want, rtol=1e-5, atol=1e-5)
        assert (out.mels[b, :, :n] - draft.mels[b, :, :n]).abs().max() > 1e-3  # it did change the draft


def postnet_reach(ar) -> int:
    """Frames the postnet reads on either side of a frame: the sum of its convolutions' half-kernels."""
    return sum((m.kernel_size[0] - 1) // 2 for m in ar.postnet.modules() if isinstance(m, torch.nn.Conv1d))


def test_refinement_is_local(base, ckpts):
    ar = checkpoint.load(ckpts["ar"]).model.eval()
    ids = base.encode(SENTENCES[1])
    draft = base.mels([ids], [0], base.defaults, [FRAMES[1]]).mels[0, :, : FRAMES[1]]
    t0 = 25  # the last frame of a group of r = 2: a step's input is the previous group's last frame
    assert (t0 + 1) % ar.r == 0
    moved = draft.clone()
    moved[:, t0] += 3.0
    a, b = refine_locally(ar, ids, draft), refine_locally(ar, ids, moved)
    reach = postnet_reach(ar)
    assert reach > 0 and t0 - reach > 4
    # the decoder reads the draft only before t, so frames before t0 + 1 - (postnet reach) cannot see the change
    torch.testing.assert_close(a[:, : t0 + 1 - reach], b[:, : t0 + 1 - reach], rtol=0, atol=1e-6)
    assert (a[:, t0 + 1 :] - b[:, t0 + 1 :]).abs().max() > 1e-4


def test_an_item_is_the_same_alone_and_in_a_batch(base, ckpts):
    engine = CoarseToFineEngine(base, ckpts["ar"])
    ids = [base.encode(t) for t in SENTENCES]
    controls = base.defaults.replace(seed=9)
    batched = engine.mels(ids, [0, 1, 2], controls, FRAMES)
    for b in range(3):
        alone = engine.mels([ids[b]], [b], controls, [FRAMES[b]])
        n = int(alone.lengths[0])
        torch.testing.assert_close(alone.mels[0, :, :n], batched.mels[b, :, :n], rtol=0, atol=1e-5)


def test_evaluation_system_and_refusals(base, ckpts):
    from recipes.evaluate import EvaluationConfigError, parse_systems

    [plain, c2f] = parse_systems({
        "nar": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), "vocoder": "griffin-lim"},
        "nar_c2f": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), "vocoder": "griffin-lim",
                    "coarse_to_fine": str(ckpts["ar"])}})
    assert "coarse_to_fine" not in plain.spec() and c2f.spec()["coarse_to_fine"] == str(ckpts["ar"])
    pipeline = c2f.pipeline()
    assert isinstance(pipeline.engine, CoarseToFineEngine)
    [item] = c2f.synthesize_items(pipeline, ["Hello world."], seed=0)
    assert item.wave.size > 0
    for bad in ({"coarse_to_fine": "/no.pt"}, {"coarse_to_fine": str(ckpts["ar"]), "speculate": 4}):
        with pytest.raises(EvaluationConfigError):
            parse_systems({"s": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), **bad}})
    ar_engine = TorchEngine(checkpoint.load(ckpts["ar"]), None)
    with pytest.raises(ValueError, match="already autoregressive"):
        CoarseToFineEngine(ar_engine, ckpts["ar"])
    with pytest.raises(Exception, match="autoregressive acoustic model"):
        CoarseToFineEngine(base, ckpts["nar"])

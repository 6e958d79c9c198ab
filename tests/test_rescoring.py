"""AR rescoring of NAR candidates (tts.runtime.rescoring) on tiny random-weight checkpoints: N = 1 is the base
engine, the winner is the argmin of the documented score, an item's choice does not depend on its batch, a seed
repeats itself, and the CLI and the evaluation systems reach it."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import TINY, tiny_checkpoint
from tts import checkpoint
from tts.data.batch import Batch
from tts.models.layers.alignment import guided_attention_loss
from tts.paths import REPO_ROOT
from tts.runtime.pipeline import Pipeline
from tts.runtime.rescoring import ATTENTION_SIGMA, RescoringEngine, candidate_seed
from tts.runtime.torch_engine import TorchEngine
from tts.vocoder.registry import load_vocoder

SENTENCES = ["Hello world.", "The cat sat on the mat.", "How are you today?"]
FRAMES = [23, 31, 27]  # forced output lengths: a random NAR's durations mean nothing


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rescoring")
    # a NAR whose refiner noise dominates (its candidates differ), an AR scorer with r = 2 (a step holds 2 frames)
    nar = tiny_checkpoint(root / "nar.pt", "nonautoregressive", refine_steps=2, refine_temperature=1.0,
                          **TINY["nonautoregressive"])
    ar = tiny_checkpoint(root / "ar.pt", "autoregressive", reduction_factor=2, **TINY["autoregressive"])
    return {"nar": nar, "ar": ar}


@pytest.fixture(scope="module")
def base(ckpts) -> TorchEngine:
    acoustic = checkpoint.load(ckpts["nar"])
    return TorchEngine(acoustic, load_vocoder("griffin-lim", acoustic.mel_config))


def encode(engine, texts=SENTENCES) -> list[list[int]]:
    return [engine.encode(t) for t in texts]


def test_one_candidate_is_the_base_engine(base, ckpts):
    engine = RescoringEngine(base, ckpts["ar"], candidates=1)
    controls = base.defaults.replace(seed=3)
    got, want = engine.mels(encode(base), [0, 1, 2], controls, FRAMES), base.mels(encode(base), [0, 1, 2], controls, FRAMES)
    assert torch.equal(got.mels, want.mels)
    assert np.array_equal(got.lengths, want.lengths) and np.array_equal(got.durations, want.durations)


def independent_score(scorer, ids: list[int], mel: torch.Tensor) -> float:
    """The documented score recomputed one candidate at a time through the AR's public `forward` (raw log-mel
    out) and the training loss's guided-attention term: |pred - x| / std averaged over channels and frames, plus
    the attention mass off the diagonal band (weight 1)."""
    n = mel.shape[1]
    batch = Batch(ids=["x"], texts=["x"], tokens=torch.tensor([ids]), token_lengths=torch.tensor([len(ids)]),
                  mels=mel[None], mel_lengths=torch.tensor([n]))
    prenets = [m for m in scorer.modules() if hasattr(m, "dropout_at_inference")]
    for p in prenets:
        p.dropout_at_inference = False
    try:
        with torch.no_grad():
            out = scorer(batch)
    finally:
        for p in prenets:
            p.dropout_at_inference = True
    error = ((out.mel_before[0] - mel).abs() / scorer.mel_std[:, None]).mean()
    steps = torch.tensor([(n + scorer.r - 1) // scorer.r])
    off = guided_attention_loss(out.alignments[:, : int(steps)], steps, torch.tensor([len(ids)]), ATTENTION_SIGMA)
    return float(error + off)


def test_winner_is_the_argmin_of_independently_computed_scores(base, ckpts):
    n = 3
    engine = RescoringEngine(base, ckpts["ar"], candidates=n)
    controls = base.defaults.replace(seed=5)
    ids = encode(base)
    out = engine.mels(ids, [0, 1, 2], controls, FRAMES)
    scorer = checkpoint.load(ckpts["ar"]).model.eval()
    candidates = [base.mels(ids, [0, 1, 2], controls.replace(seed=candidate_seed(5, c)), FRAMES) for c in range(n)]
    assert len({candidate_seed(5, c) for c in range(n)}) == n
    for b, item in enumerate(engine.last_scores):
        mels = [c.mels[b, :, : int(c.lengths[b])] for c in candidates]
        scores = [independent_score(scorer, ids[b], m) for m in mels]
        np.testing.assert_allclose(item.score, scores, rtol=1e-4, atol=1e-5)
        assert item.chosen == int(np.argmin(scores))
        winner = mels[item.chosen]
        assert int(out.lengths[b]) == winner.shape[1]
        assert torch.equal(out.mels[b, :, : winner.shape[1]], winner)
        assert np.array_equal(out.durations[b], candidates[item.chosen].durations[b])
    # the candidates do differ (the refiner's noise), so the choice is a real one
    assert (candidates[0].mels[0] - candidates[1].mels[0]).abs().max() > 1e-2


def test_an_item_is_the_same_alone_and_in_a_batch(base, ckpts):
    engine = RescoringEngine(base, ckpts["ar"], candidates=4)
    controls = base.defaults.replace(seed=11)
    ids = encode(base)
    batched = engine.mels(ids, [0, 1, 2], controls, FRAMES)
    batched_scores = engine.last_scores
    for b in range(len(ids)):
        alone = engine.mels([ids[b]], [b], controls, [FRAMES[b]])
        assert engine.last_scores[0].chosen == batched_scores[b].chosen
        np.testing.assert_allclose(engine.last_scores[0].score, batched_scores[b].score, rtol=1e-5)
        n = int(alone.lengths[0])
        assert n == int(batched.lengths[b])
        torch.testing.assert_close(alone.mels[0, :, :n], batched.mels[b, :, :n], rtol=0, atol=1e-5)


def test_the_same_seed_gives_the_same_audio(base, ckpts):
    pipeline = Pipeline(RescoringEngine(base, ckpts["ar"], candidates=2))
    first = pipeline.synthesize("Hello world. How are you today?", pipeline.controls(seed=2)).wave
    again = pipeline.synthesize("Hello world. How are you today?", pipeline.controls(seed=2)).wave
    assert np.array_equal(first, again) and first.size > 0


def test_bad_candidate_counts_and_scorers_are_refused(base, ckpts):
    for n in (0, 17, 2.0, True):
        with pytest.raises(ValueError, match="candidates"):
            RescoringEngine(base, ckpts["ar"], candidates=n)
    with pytest.raises(Exception, match="autoregressive"):
        RescoringEngine(base, ckpts["nar"], candidates=2)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tts.synthesize", "--vocoder", "griffin-lim", "--quiet", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_cli_rescore_writes_a_wav_and_refuses_bad_values(ckpts, tmp_path: Path):
    out = tmp_path / "r2.wav"
    proc = cli("--checkpoint", str(ckpts["nar"]), "--text", "Hello world.", "--rescore", "2", "--scorer",
               str(ckpts["ar"]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.stat().st_size > 44
    for bad in ("0", "17", "two"):
        proc = cli("--checkpoint", str(ckpts["nar"]), "--text", "Hi.", "--rescore", bad, "--out", str(tmp_path / "x.wav"))
        assert proc.returncode == 2 and "--rescore" in proc.stderr, proc.stderr
    proc = cli("--checkpoint", str(ckpts["nar"]), "--text", "Hi.", "--scorer", str(ckpts["ar"]),
               "--out", str(tmp_path / "x.wav"))
    assert proc.returncode == 2 and "--rescore" in proc.stderr
    assert not (tmp_path / "x.wav").exists()


def test_evaluation_system_option_composes(ckpts):
    from recipes.evaluate import EvaluationConfigError, parse_systems

    [plain, rescored] = parse_systems({
        "nar": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), "vocoder": "griffin-lim"},
        "nar_r2": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), "vocoder": "griffin-lim", "rescore": 2,
                   "scorer": str(ckpts["ar"])}})
    assert "rescore" not in plain.spec()  # earlier runs' identities stay valid
    assert rescored.spec()["rescore"] == 2 and rescored.spec()["scorer"] == str(ckpts["ar"])
    pipeline = rescored.pipeline()
    assert isinstance(pipeline.engine, RescoringEngine) and pipeline.engine.candidates == 2
    [item] = rescored.synthesize_items(pipeline, ["Hello world."], seed=0)
    assert item.wave.size > 0 and len(pipeline.engine.last_scores) == 1
    for bad in ({"rescore": 0}, {"rescore": "4"}, {"scorer": str(ckpts["ar"])}, {"rescore": 2, "scorer": "/no.pt"}):
        with pytest.raises(EvaluationConfigError):
            parse_systems({"s": {"kind": "acoustic", "checkpoint": str(ckpts["nar"]), **bad}})


def test_readme_rescoring_table_is_what_its_command_prints(capsys, monkeypatch):
    # the README's figures come from the committed report, re-rendered by the bench's own table
    from recipes.bench import rescoring as bench
    from tts.paths import REPO_ROOT
    monkeypatch.chdir(REPO_ROOT)
    readme = (REPO_ROOT / "README.md").read_text()
    for report in ("docs/results/rescoring/report.json", "docs/results/rescoring/varied/report.json"):
        command = f"python -m recipes.bench.rescoring --report-from {report}"
        assert command in readme
        assert bench.main(command.split()[3:]) == 0
        table = capsys.readouterr().out.strip()
        assert table.startswith("| N | CER") and table in readme

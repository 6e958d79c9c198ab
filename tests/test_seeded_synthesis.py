"""Seeded, batch-invariant synthesis: a sentence's mel does not depend on its batch, the CLI repeats itself."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY, tiny_checkpoint
from tts import checkpoint
from tts.noise import item_noise_seed
from tts.paths import REPO_ROOT

SENTENCES = ["Hello world.", "The cat sat on the mat.", "A much longer sentence, with a pause in the middle of it.",
             "Yes.", "Seven.", "How are you today?", "Speech synthesis on a small machine.", "Goodbye."]


@pytest.fixture(scope="module")
def nar(tmp_path_factory) -> Path:
    # a random NAR with its refiner on and full-scale start noise: the noise dominates the output
    path = tmp_path_factory.mktemp("ckpt") / "nar.pt"
    return tiny_checkpoint(path, "nonautoregressive", refine_steps=3, refine_temperature=1.0,
                           **TINY["nonautoregressive"])


def test_batch_of_8_equals_each_sentence_alone(nar: Path):
    loaded = checkpoint.load(nar)
    model, frontend = loaded.model.eval(), loaded.frontend()
    ids = [frontend.encode(s) for s in SENTENCES]
    seeds = [item_noise_seed(0, k) for k in range(len(ids))]
    tokens = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
    for k, seq in enumerate(ids):
        tokens[k, : len(seq)] = torch.tensor(seq)
    lengths = torch.tensor([len(seq) for seq in ids])
    with torch.inference_mode():
        batch = model.infer(tokens, lengths, noise_seeds=seeds)
        assert batch.refine_steps_taken == 3
        for k, seq in enumerate(ids):
            alone = model.infer(torch.tensor([seq]), torch.tensor([len(seq)]), noise_seeds=[seeds[k]])
            n = int(alone.mel_lengths[0])
            assert int(batch.mel_lengths[k]) == n
            torch.testing.assert_close(batch.mels[k, :, :n], alone.mels[0, :, :n], rtol=0, atol=1e-5)
        # the noise matters: another seed for the same sentence gives another mel
        other = model.infer(torch.tensor([ids[0]]), torch.tensor([len(ids[0])]), noise_seeds=[item_noise_seed(1, 0)])
        assert (other.mels[0] - batch.mels[0, :, : other.mels.shape[-1]]).abs().max() > 1e-2


def run(nar: Path, out: Path, *extra: str) -> bytes:
    proc = subprocess.run([sys.executable, "-m", "tts.synthesize", "--checkpoint", str(nar), "--vocoder", "griffin-lim",
                           "--text", "Hello world. How are you today?", "--out", str(out), "--quiet", *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out.read_bytes()


def test_same_command_gives_identical_bytes_and_the_seed_matters(nar: Path, tmp_path: Path):
    first = run(nar, tmp_path / "a.wav")
    assert run(nar, tmp_path / "b.wav") == first
    assert run(nar, tmp_path / "c.wav", "--seed", "0") == first  # 0 is the default
    assert run(nar, tmp_path / "d.wav", "--seed", "7") != first

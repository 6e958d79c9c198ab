"""The speculative-decoding benchmark (recipes/bench/speculative.py) end to end on a tiny random Transformer AR
and NAR over the fixture corpus: it writes its table from what it measured, derives the tolerance from the AR's
teacher-forced error, and refuses bad arguments with a clear message."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import TINY, tiny_checkpoint
from test_transformer_ar import TINY as TINY_TAR

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_speculative")
    return {"tar": tiny_checkpoint(root / "tar.pt", "transformer_ar", **TINY_TAR),
            "nar": tiny_checkpoint(root / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])}


def test_the_benchmark_writes_what_it_measured(ckpts, featurised_corpus, tmp_path):
    from recipes.bench import speculative

    out = tmp_path / "out"
    assert speculative.main(["--tar", str(ckpts["tar"]), "--drafter", str(ckpts["nar"]), "--ks", "2,4",
                             "--limit", "2", "--val-limit", "2", "--data-root", str(featurised_corpus),
                             "--out", str(out)]) == 0
    result = json.loads((out / "speculative.json").read_text())
    assert result["sentences"] == 2 and set(result["per_k"]) == {"2", "4"}
    assert result["tolerance"] > 0  # auto: the random AR's teacher-forced error
    for k, row in result["per_k"].items():
        assert row["speedup"] > 0 and 0 <= row["acceptance"] <= 1 and 1 <= row["per_round"] <= int(k)
    table = (out / "speculative.md").read_text()
    assert f"{result['per_k']['4']['speedup']:.2f}" in table and "speculate:4" in table


def test_the_tolerance_is_the_ar_s_own_teacher_forced_error(ckpts, featurised_corpus):
    from recipes.bench.speculative import teacher_forced_rms
    from tts import checkpoint
    from tts.runtime.torch_engine import TorchEngine

    engine = TorchEngine(checkpoint.load(ckpts["tar"]), None)
    first = teacher_forced_rms(engine, featurised_corpus, 2)
    assert first == teacher_forced_rms(engine, featurised_corpus, 2) > 0  # deterministic: no prenet noise
    with torch.no_grad():
        for p in engine.model.frame_projection.parameters():
            p.mul_(0.0)  # predicts the normalised mean: the error is the data's own rms around it
    assert teacher_forced_rms(engine, featurised_corpus, 2) != first


@pytest.mark.parametrize("bad, message", [(["--ks", "1,4"], "k must be >= 2"), (["--tolerance", "-1"], "--tolerance"),
                                          (["--ks", "a"], "comma-separated")])
def test_bad_arguments_are_refused(ckpts, bad, message, capsys):
    from recipes.bench import speculative

    with pytest.raises(SystemExit) as e:
        speculative.parse_args(["--tar", str(ckpts["tar"]), *bad])
    assert e.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        speculative.parse_args(["--tar", "/no/such.pt"])

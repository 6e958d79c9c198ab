"""recipes/evaluate.py on the fixture corpus: ground truth, copy synthesis and tiny random AR / NAR models."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from recipes.evaluate import EvaluationConfigError, parse_systems, run
from helpers import TINY, tiny_checkpoint
from tts.paths import CONF_DIR, REPO_ROOT

FAST = ["limit=2", "threads=1", "metrics.mos=false", "metrics.dnsmos=false"]


def config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="evaluate", overrides=overrides)


def run_in_process(overrides: list[str]) -> dict:
    threads = torch.get_num_threads()
    try:
        return run(config(overrides))
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ckpt")
    return {
        "ar": tiny_checkpoint(d / "ar.pt", "autoregressive", **TINY["autoregressive"]),
        "nar": tiny_checkpoint(d / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"]),
    }


def systems_overrides(ckpt: dict[str, Path]) -> list[str]:
    return [
        f"systems.ar.checkpoint={ckpt['ar']}",
        "~systems.nar",
        f"+systems.nar={{kind:acoustic,checkpoint:{ckpt['nar']},vocoder:griffin-lim,nar_ks:[0,2]}}",
    ]


@pytest.fixture(scope="module")
def evaluated(featurised_corpus: Path, checkpoints, tmp_path_factory) -> tuple[Path, list[str]]:
    """One real CLI run (subprocess), ASR on, MOS off, 2 test utterances."""
    out = tmp_path_factory.mktemp("eval") / "out"
    overrides = [f"data_root={featurised_corpus}", f"out_dir={out}", *FAST, *systems_overrides(checkpoints)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "recipes.evaluate", *overrides], cwd=REPO_ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    return out, overrides


def test_report_files_and_metrics(evaluated):
    out, _ = evaluated
    assert (out / "report.md").is_file()
    report = json.loads((out / "report.json").read_text())
    names = ["ground_truth", "copy_griffin_lim", "ar", "nar_k0", "nar_k2"]
    assert list(report["summary"]) == names
    md = (out / "report.md").read_text()
    for name in names:
        assert f"| {name} |" in md
        assert sorted(p.name for p in (out / name).glob("*.wav")) == ["slt_00012.wav", "slt_00014.wav"]
        assert len(report["utterances"][name]) == 2
    s = report["summary"]
    mean = {name: {k: v["mean"] for k, v in s[name].items()} for name in names}

    # ground truth against itself: exactly zero
    assert mean["ground_truth"]["mcd_db"] == 0.0
    assert mean["ground_truth"]["vuv_error"] == 0.0
    assert mean["ground_truth"]["length_error_frames"] == 0
    # copy synthesis keeps the length and is far closer than random models
    assert mean["copy_griffin_lim"]["length_error_frames"] == 0
    random = ["ar", "nar_k0", "nar_k2"]
    assert 0 < mean["copy_griffin_lim"]["mcd_db"] < min(mean[n]["mcd_db"] for n in random)
    # ASR: the ground truth is the reference point, random models are unintelligible
    assert mean["ground_truth"]["cer"] < 0.3
    for n in random:
        assert mean["ground_truth"]["cer"] < mean[n]["cer"]
    assert report["corpus_asr"]["ground_truth"]["cer"] < min(report["corpus_asr"][n]["cer"] for n in random)
    row = report["utterances"]["ground_truth"][0]
    assert isinstance(row["asr_text"], str) and row["asr_text"]
    assert {"n_repeated_words", "n_missing_words", "wer"} <= set(row)

    # timings only where a model made mels; AR failures only for the AR system
    assert "mel_s" in s["ar"] and "mel_s" in s["nar_k2"] and "mel_s" not in s["ground_truth"]
    assert "vocoder_s" in s["copy_griffin_lim"] and "rtf" not in s["ground_truth"]
    copy = s["copy_griffin_lim"]  # a copy system's RTF is its vocoder's: vocoder seconds / audio seconds
    assert copy["rtf"]["mean"] > 0
    copy_rows = report["utterances"]["copy_griffin_lim"]
    assert all(r["rtf"] == pytest.approx(r["vocoder_s"] / r["seconds"]) for r in copy_rows)
    assert "ar_failure" in s["ar"] and "ar_failure" not in s["nar_k0"]
    assert report["systems"]["nar_k2"]["refine_steps"] == 2
    side = json.loads((out / "nar_k2" / "slt_00012.json").read_text())
    assert side["refine_steps_taken"] == 2 and side["frames"] > 0
    assert "distillmos" not in s["ar"]  # switched off


def test_rerun_is_resumable(evaluated):
    out, overrides = evaluated
    wavs = sorted(out.rglob("*.wav"))
    before = {p: p.stat().st_mtime_ns for p in wavs if "hydra" not in p.parts}
    first = json.loads((out / "report.json").read_text())
    report = run_in_process([*overrides, "metrics.asr=false", "metrics.f0=false"])
    assert {p: p.stat().st_mtime_ns for p in before} == before  # no wav rewritten
    assert report["summary"]["copy_griffin_lim"]["mcd_db"]["mean"] == pytest.approx(
        first["summary"]["copy_griffin_lim"]["mcd_db"]["mean"])
    # the timings of the first run survive in the sidecars
    assert report["summary"]["ar"]["mel_s"]["mean"] == pytest.approx(first["summary"]["ar"]["mel_s"]["mean"])
    assert "cer" not in report["summary"]["ar"]


def test_retrained_checkpoint_is_resynthesised(evaluated, checkpoints):
    out, overrides = evaluated
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.wav") if "hydra" not in p.parts}
    st = checkpoints["nar"].stat()
    os.utime(checkpoints["nar"], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # "training wrote a new last.ckpt"
    off = ["metrics.asr=false", "metrics.mcd=false", "metrics.f0=false"]
    report = run_in_process([*overrides, *off])
    changed = {p.parent.name for p, t in before.items() if p.stat().st_mtime_ns != t}
    assert changed == {"nar_k0", "nar_k2"}
    assert "mcd_db" not in report["summary"]["ar"] and "length_error_frames" in report["summary"]["ar"]


def test_unknown_kind_is_a_clear_error(featurised_corpus, tmp_path):
    with pytest.raises(EvaluationConfigError, match=r"system 'x': unknown kind 'vits'.*ground_truth"):
        run_in_process([f"data_root={featurised_corpus}", f"out_dir={tmp_path}", *FAST, "~systems.ar", "~systems.nar",
                        "+systems.x={kind:vits}"])
    assert not any(tmp_path.iterdir())  # checked before any work


def test_missing_checkpoint_is_a_clear_error(featurised_corpus, tmp_path):
    missing = tmp_path / "nope" / "last.ckpt"
    with pytest.raises(EvaluationConfigError, match=r"system 'ar': checkpoint not found: .*nope/last.ckpt"):
        run_in_process([f"data_root={featurised_corpus}", f"out_dir={tmp_path / 'out'}", *FAST,
                        f"systems.ar.checkpoint={missing}", "~systems.nar"])


def test_empty_split_is_a_clear_error(fixture_corpus, tmp_path):
    root = tmp_path / "corpus"
    (root / "splits").mkdir(parents=True)
    shutil.copy(fixture_corpus / "metadata.csv", root / "metadata.csv")
    (root / "splits" / "test.txt").write_text("\n")
    with pytest.raises(EvaluationConfigError, match="split 'test' .* is empty"):
        run_in_process([f"data_root={root}", f"out_dir={tmp_path / 'out'}", *FAST, "~systems.ar", "~systems.nar"])


def test_system_parsing_and_nar_ks_expansion(checkpoints):
    systems = parse_systems({
        "gt": {"kind": "ground_truth"},
        "nar": {"kind": "acoustic", "checkpoint": str(checkpoints["nar"]), "nar_ks": [0, 1, 8]},
        "off": None,
    })
    assert [s.name for s in systems] == ["gt", "nar_k0", "nar_k1", "nar_k8"]
    assert [s.refine_steps for s in systems[1:]] == [0, 1, 8]
    assert systems[1].vocoder == "griffin-lim"
    with pytest.raises(EvaluationConfigError, match="unknown keys"):
        parse_systems({"c": {"kind": "copy", "vocoder": "griffin-lim", "checkpoint": "x"}})
    with pytest.raises(EvaluationConfigError, match="refine steps must be integers"):
        parse_systems({"n": {"kind": "acoustic", "checkpoint": str(checkpoints["nar"]), "refine_steps": -1}})
    cold = parse_systems({"t0": {"kind": "acoustic", "checkpoint": str(checkpoints["nar"]), "nar_ks": [2], "temperature": 0}})
    assert cold[0].name == "t0_k2" and cold[0].temperature == 0.0 and cold[0].spec()["temperature"] == 0.0
    with pytest.raises(EvaluationConfigError, match="temperature"):
        parse_systems({"t": {"kind": "acoustic", "checkpoint": str(checkpoints["nar"]), "temperature": -1}})


def test_temperature_zero_makes_nar_synthesis_deterministic(featurised_corpus, checkpoints, tmp_path):
    import numpy as np
    import soundfile as sf

    spec = f"{{kind:acoustic,checkpoint:{checkpoints['nar']},refine_steps:4,temperature:0}}"
    waves = []
    for seed in (0, 1):
        out = tmp_path / f"s{seed}"
        run_in_process([f"data_root={featurised_corpus}", f"out_dir={out}", *FAST, "limit=1", f"seed={seed}",
                        "~systems.ar", "~systems.nar", "~systems.copy_griffin_lim", "~systems.ground_truth",
                        f"+systems.cold={spec}"])
        waves.append(sf.read(next((out / "cold").glob("*.wav")))[0])
    np.testing.assert_array_equal(waves[0], waves[1])


def test_refine_steps_on_an_ar_model_is_a_clear_error(featurised_corpus, checkpoints, tmp_path):
    with pytest.raises(EvaluationConfigError, match="has no refine_steps"):
        run_in_process([f"data_root={featurised_corpus}", f"out_dir={tmp_path}", *FAST, "limit=1",
                        "~systems.ar", "~systems.nar", "~systems.copy_griffin_lim",
                        f"+systems.ar_k2={{kind:acoustic,checkpoint:{checkpoints['ar']},refine_steps:2}}"])

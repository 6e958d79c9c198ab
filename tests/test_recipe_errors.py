"""Every recipe ends a user error with one `error:` line and exit 2, as the synthesis CLI does (issue 32 item
4), and says what it wrote (item 9)."""

import os
import shutil
import subprocess
import sys

import pytest

from data_prep.festival_corpus import BuildSummary, _Progress
from recipes.extract_durations import warnings_for
from tts.paths import REPO_ROOT


def recipe(module: str, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("HYDRA_FULL_ERROR", None)
    env.pop("TTS_DEBUG", None)
    return subprocess.run([sys.executable, "-m", module, *overrides], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("module, overrides, says", [
    # a missing checkpoint (the issue's own example)
    ("recipes.evaluate", ["systems.ar.checkpoint=exp/nope.ckpt", "limit=1", "metrics.asr=false", "metrics.mos=false"],
     "checkpoint not found: exp/nope.ckpt"),
    # a bad value, found while Hydra composes (before any folder is made)
    ("recipes.extract_durations", ["source=bogus"], "source must be one of teacher, festival, piper, external"),
    # an override of a key that does not exist
    ("recipes.train_vocoder", ["vocoder=source_filter", "vocoder_data.segment_frame=8"],
     "Could not override 'vocoder_data.segment_frame'"),
    # a config group option that does not exist
    ("recipes.train", ["experiment=nar_cpu_smal"], "Could not find 'experiment/nar_cpu_smal' (available: "),
])
def test_a_user_error_is_one_line_and_exit_2(module, overrides, says, tmp_path):
    p = recipe(module, *overrides, f"hydra.run.dir={tmp_path / 'hydra'}")
    assert p.returncode == 2, p.stderr[-3000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], p.stderr[-3000:]


def test_a_constructor_refusing_an_added_key_is_a_user_error(tmp_path):
    p = recipe("recipes.train", "debug=tiny", f"exp_dir={tmp_path}", "+model.no_such_width=3")
    assert p.returncode == 2 and "no_such_width" in p.stderr and "Traceback" not in p.stderr, p.stderr[-3000:]


def test_durations_with_many_zero_frame_phones_are_flagged():
    report = {"source": "teacher", "splits": {"train": {"phones_with_zero_frames": 0.5},
                                               "val": {"phones_with_zero_frames": 0.012}}}
    [warning] = warnings_for(report)
    assert warning.startswith("WARNING: train: 50% of phones got 0 frames") and "source=festival" in warning


def test_the_corpus_summary_names_the_clipped_utterances():
    progress = _Progress(total=3, every=1000)
    progress.tick(ok=True, clipped=True, utt_id="slt_00007")
    progress.tick(ok=True, clipped=False, utt_id="slt_00008")
    summary = BuildSummary(out_dir="data/x", n_requested=3, n_clipped=progress.clipped,
                           clipped_ids=progress.clipped_ids)
    assert "clipped (this run): 1: slt_00007\n" in summary.text()
    many = BuildSummary(out_dir="d", n_requested=0, n_clipped=12, clipped_ids=[f"u{i:02d}" for i in range(12)])
    assert "clipped (this run): 12: u00, u01" in many.text() and "u09 and 2 more" in many.text()


def test_extract_durations_refuses_before_making_a_folder(tmp_path):
    """A typo in data_root, or a teacher checkpoint that is not there, made DATA_ROOT/durations/NAME/hydra (Hydra's
    run folder) before the refusal: now both are found while the config is composed, and nothing is made."""
    nowhere = tmp_path / "no_corpus"
    p = recipe("recipes.extract_durations", "source=festival", f"data_root={nowhere}")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-3000:]
    assert p.stderr.startswith(f"error: {nowhere} is not a corpus (no metadata.csv)") and "data_root" in p.stderr
    assert "resolving interpolation" not in p.stderr and not nowhere.exists()

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO_ROOT / "tests" / "fixtures" / "slt20", corpus, ignore=shutil.ignore_patterns("cache"))
    p = recipe("recipes.extract_durations", f"checkpoint={tmp_path / 'nope.ckpt'}", f"data_root={corpus}")
    assert p.returncode == 2 and p.stderr.startswith(f"error: checkpoint not found: {tmp_path / 'nope.ckpt'}"), \
        p.stderr[-3000:]
    assert not (corpus / "durations").exists()

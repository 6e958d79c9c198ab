"""Training runs as a newcomer meets them (issue 32 items 2, 3, 5, 6): one run per directory (multirun jobs
included), resume explicit, durations found or refused with the command that makes them, `debug=tiny` out of
the box, a step progress bar, logged scalars in a short run, an end summary, no Lightning noise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from recipes.train import build, needs_durations
from tts.paths import CONF_DIR, REPO_ROOT
from tts.training.callbacks import Validation, run_summary
from tts.training.preflight import MissingDataError, require_corpus, require_durations
from tts.training.run_dir import RunDirError, prepare_run_dir

TINY_AR = ["model.embedding_dim=32", "model.encoder_dim=32", "model.prenet_dim=16", "model.attention_rnn_dim=32",
           "model.decoder_rnn_dim=32", "model.attention_dim=16", "model.postnet_channels=16",
           "model.location_filters=4", "log_audio=false", "threads=1"]
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "slt20"
NOISE = ("💡", "LeafSpec", "not resumable", "Epoch ", "Traceback")


def train(*overrides: str, multirun: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "recipes.train", *(["-m"] if multirun else []), *overrides],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)


def fixture_listing() -> set[str]:
    return {str(p.relative_to(FIXTURE)) for p in FIXTURE.rglob("*")}


def test_debug_tiny_runs_out_of_the_box_resumes_quietly_and_ends_with_a_summary(tmp_path):
    before = fixture_listing()
    run = tmp_path / "tiny"
    first = train("debug=tiny", f"exp_dir={run}", "trainer.max_steps=2", "checkpoint_every_n_steps=1", *TINY_AR)
    assert first.returncode == 0, first.stderr[-3000:]
    assert (run / "corpus" / "features" / "stats.json").is_file()  # the fixture, copied and featurised
    assert fixture_listing() == before, "debug=tiny wrote into tests/fixtures"

    # the resume: mid-epoch (Lightning's "not resumable" warning), with the bar on
    again = train("debug=tiny", f"exp_dir={run}", "trainer.max_steps=5", "checkpoint_every_n_steps=1",
                  "ckpt_path=last", "trainer.enable_progress_bar=true", "trainer.val_check_interval=2", *TINY_AR)
    assert again.returncode == 0, again.stderr[-3000:]
    out = again.stdout + again.stderr
    for noise in NOISE:
        assert noise not in out, noise
    assert "step (epoch" in out and "5/5" in out  # one bar over the run's steps
    assert f"training finished at step 5 of 5: run directory {run}" in again.stdout
    assert f"last checkpoint: {run / 'checkpoints' / 'last.ckpt'}" in again.stdout
    assert f"--logdir {run / 'tb'}" in again.stdout and "best val/loss" in again.stdout

    # a 5-step run logs its training scalars (the default cadence of 25 logged none)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb")).Reload()
    assert len(events.Scalars("train/loss")) >= 3


def test_multirun_jobs_train_in_their_own_directories_and_a_name_is_not_reused(tmp_path):
    run = tmp_path / "sweep"
    p = train("debug=tiny", f"exp_dir={run}", "trainer.max_steps=2", "checkpoint_every_n_steps=1", "seed=1,2", *TINY_AR,
              multirun=True)
    assert p.returncode == 0, p.stderr[-3000:]
    for job in ("job0", "job1"):
        assert (run / job / "checkpoints" / "last.ckpt").is_file(), job
        assert len(list((run / job / "tb").glob("events.out.tfevents.*"))) == 1, job
    assert not (run / "checkpoints").exists()

    # the same sweep again, without ckpt_path=last: refused in one line, nothing overwritten
    stamp = (run / "job0" / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    again = train("debug=tiny", f"exp_dir={run}", "trainer.max_steps=2", "seed=1,2", *TINY_AR, multirun=True)
    assert again.returncode == 2
    error = [line for line in again.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "already holds a run" in error[0] and "ckpt_path=last" in error[0]
    assert "Traceback" not in again.stderr
    assert (run / "job0" / "checkpoints" / "last.ckpt").stat().st_mtime_ns == stamp


def test_run_directory_rules(tmp_path):
    run = tmp_path / "exp" / "a"
    prepare_run_dir(run, None)  # new and empty: fine
    (run / "tb").mkdir(parents=True)
    stale = run / "tb" / "events.out.tfevents.1.host.1.0"
    stale.write_bytes(b"")
    prepare_run_dir(run, None)  # an earlier start that saved no checkpoint: its curves go, it may start again
    assert not stale.exists()
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "step0000010.ckpt").write_bytes(b"x")
    with pytest.raises(RunDirError, match="already holds a run.*ckpt_path=last"):
        prepare_run_dir(run, None)
    with pytest.raises(RunDirError, match="no run to resume"):
        prepare_run_dir(run, "last")  # step files but no last.ckpt
    (run / "checkpoints" / "last.ckpt").write_bytes(b"x")
    prepare_run_dir(run, "last")
    # ckpt_path=last under another name: refused (Lightning started from scratch), naming what can resume
    with pytest.raises(RunDirError, match=f"no run to resume.*runs that can resume: {run}"):
        prepare_run_dir(tmp_path / "exp" / "b", "last")
    with pytest.raises(RunDirError, match="no such checkpoint"):
        prepare_run_dir(tmp_path / "exp" / "b", str(tmp_path / "missing.ckpt"))


def test_the_existing_long_runs_resume_with_their_scripts_commands(tmp_path):
    """scripts/train_ar_baseline.sh and scripts/train_nar_joe.sh (through recipes.carry start) add `ckpt_path=last`
    when their exp/<name>/checkpoints/last.ckpt exists: a directory of that shape (checkpoints, tb of several starts,
    hydra/) passes the checks unchanged -- on a copy of the shape, never exp/ itself."""
    for name in ("ar_baseline", "nar_joe"):
        run = tmp_path / "exp" / name
        (run / "checkpoints").mkdir(parents=True)
        (run / "tb").mkdir()
        (run / "hydra").mkdir()
        for f in ("step0000250.ckpt", "step0000500.ckpt", "last.ckpt"):
            (run / "checkpoints" / f).write_bytes(b"x")
        events = [run / "tb" / f"events.out.tfevents.{i}.vm.{i}.0" for i in range(3)]
        for e in events:
            e.write_bytes(b"e")
        prepare_run_dir(run, "last")
        assert all(e.exists() for e in events)
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="train", overrides=[f"experiment={name}", "ckpt_path=last"],
                          return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        assert cfg.exp_dir == f"exp/{name}" and cfg.ckpt_path == "last"
    text = (REPO_ROOT / "scripts" / "train_ar_baseline.sh").read_text()
    assert "checkpoints/last.ckpt ] && resume=(ckpt_path=last)" in text
    # train_nar_joe.sh runs with what `recipes.carry start nar_joe` prints: ckpt_path=last for that shape
    from recipes import carry

    assert "recipes.carry start nar_joe" in (REPO_ROOT / "scripts" / "train_nar_joe.sh").read_text()
    assert carry.start_overrides("nar_joe", extra=[f"exp_dir={tmp_path / 'exp' / 'nar_joe'}"]) == ["ckpt_path=last"]


def config(overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def test_the_data_config_locates_durations_for_the_nar_only(featurised_corpus, tmp_path):
    nar = config(["experiment=nar_cpu_small", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}"])
    assert needs_durations(nar) and nar.data.durations_dir == f"{featurised_corpus}/durations/festival"
    ar = config(["experiment=ar_baseline", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}"])
    assert not needs_durations(ar)
    _, datamodule, _ = build(ar)
    assert datamodule.durations_dir is None  # the AR reads none, wherever the data config says they are
    assert config(["data=ljspeech"]).data.durations_dir == "data/ljspeech/durations/ar_teacher"
    assert config(["experiment=nar_joe"]).data.durations_dir == "data/joe/durations/piper"


def test_missing_durations_are_refused_with_the_command_that_makes_them(featurised_corpus, tmp_path):
    require_corpus(featurised_corpus)
    with pytest.raises(MissingDataError, match=r"no durations; make them with python -m recipes.extract_durations "
                                               rf"source=festival data_root={featurised_corpus}$"):
        require_durations(featurised_corpus, featurised_corpus / "durations" / "festival")
    with pytest.raises(MissingDataError, match="source=festival .* name=mine"):
        require_durations(featurised_corpus, featurised_corpus / "durations" / "mine")
    # a corpus without Festival segments or Piper alignments (LJSpeech): an AR teacher's
    bare = tmp_path / "bare"
    (bare / "splits").mkdir(parents=True)
    (bare / "splits" / "train.txt").write_text("a\n")
    (bare / "splits" / "val.txt").write_text("b\n")
    with pytest.raises(MissingDataError, match="checkpoint=AR_CHECKPOINT .*ar_cpu_small"):
        require_durations(bare, bare / "durations" / "ar_teacher")
    (bare / "alignments").mkdir()
    with pytest.raises(MissingDataError, match="source=piper"):
        require_durations(bare, bare / "durations" / "piper")
    with pytest.raises(MissingDataError, match="no features yet: python -m data_prep.features"):
        (bare / "metadata.csv").write_text("a|A.|A.\n")
        require_corpus(bare)


def test_the_nar_recipe_refuses_before_training_in_one_line(featurised_corpus, tmp_path):
    p = train("experiment=nar_cpu_small", f"data.root={featurised_corpus}", f"exp_dir={tmp_path / 'nar'}")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [f"error: {featurised_corpus}/durations/festival: no durations; make them "
                                             f"with python -m recipes.extract_durations source=festival "
                                             f"data_root={featurised_corpus}"]
    assert not (tmp_path / "nar" / "checkpoints").exists()


def test_summary_names_checkpoints_best_validation_and_tensorboard(tmp_path):
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for f in ("step0000100.ckpt", "step0000200.ckpt", "last.ckpt"):
        (ckpts / f).write_bytes(b"x")
    text = run_summary(tmp_path, 200, 1000, "val/loss", [Validation(99, 0.8), Validation(199, 0.9)], interrupted=True)
    assert text.splitlines()[0] == f"training interrupted at step 200 of 1000: run directory {tmp_path}"
    assert f"last checkpoint: {ckpts / 'last.ckpt'}" in text
    assert f"best val/loss 0.8 at step 99 (last 0.9 at step 199); nearest kept checkpoint {ckpts / 'step0000100.ckpt'}" in text
    assert f"--logdir {tmp_path / 'tb'}" in text

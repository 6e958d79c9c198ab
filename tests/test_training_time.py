"""recipes.bench.training_time: a resumed run's training hours from its TensorBoard event files."""

import pytest
from torch.utils.tensorboard import SummaryWriter

from recipes.bench.training_time import main, run_time


def _process(run, start_step, end_step, t0, seconds_per_step, every=25):
    """One training process's event file: train/loss every `every` steps at a fixed pace from wall time t0."""
    w = SummaryWriter(str(run / "tb"), filename_suffix=f".{start_step}")
    for step in range(start_step, end_step + 1, every):
        w.add_scalar("train/loss", 1.0, step, walltime=t0 + (step - start_step) * seconds_per_step)
    w.close()


def test_hours_are_the_processes_own_spans_not_the_gaps_between_sessions(tmp_path, capsys):
    run = tmp_path / "exp" / "ar"
    # process 1: steps 24..524 at 4 s/step, killed; process 2 resumes at checkpoint 500 (500..524 again),
    # a day later, at 2 s/step up to 1000
    _process(run, 24, 524, 1_000_000.0, 4.0)
    _process(run, 500, 1000, 1_086_400.0, 2.0)
    rt = run_time(run)
    assert [(s.first_step, s.last_step) for s in rt.segments] == [(24, 524), (500, 1000)]
    assert [s.seconds_per_step for s in rt.segments] == [pytest.approx(4.0), pytest.approx(2.0)]
    # spans plus one logging interval each: (500 + 25) * 4 s + (500 + 25) * 2 s, not the day between them
    assert rt.hours == pytest.approx((525 * 4 + 525 * 2) / 3600)
    assert rt.steps == 1000 and rt.repeated_steps == 25
    assert main([str(run)]) == 0
    assert "2 processes, up to step 1000" in capsys.readouterr().out


def test_a_run_without_events_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err

"""recipes.bench.val_losses: the last validation losses of runs, from real TensorBoard event files (a
resumed run's two files read together, the highest step winning)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from recipes.bench import val_losses


def _run(root: Path, name: str, points: list[list[tuple[str, int, float]]]) -> Path:
    run = root / name
    for k, events in enumerate(points):  # one SummaryWriter per (re)start, as a resumed training has
        w = SummaryWriter(str(run / "tb"), filename_suffix=f".{k}")
        for tag, step, value in events:
            w.add_scalar(tag, value, step)
        w.close()
    return run


def test_last_values_across_a_resumed_runs_files_and_the_table(tmp_path: Path, capsys):
    a = _run(tmp_path, "a", [[("val/mel_l1", 199, 0.5), ("train/loss", 199, 9.0), ("val/mel_l1", 399, 0.4)],
                             [("val/mel_l1", 599, 0.3), ("val/pitch_mse", 599, 1.25)]])
    b = _run(tmp_path, "b", [[("val/mel_l1", 599, 0.2)]])
    assert val_losses.last_values(a) == {"val/mel_l1": (599, pytest.approx(0.3)), "val/pitch_mse": (599, 1.25)}
    assert val_losses.main([str(a), str(b), "--tags", "val/mel_l1,val/pitch_mse", "--out", str(tmp_path / "t.md")]) == 0
    table = (tmp_path / "t.md").read_text()
    assert "| a | 599 | 0.3000 | 1.2500 |" in table and "| b | 599 | 0.2000 | – |" in table
    assert table == capsys.readouterr().out


def test_a_run_without_logs_is_a_clear_error(tmp_path: Path, capsys):
    assert val_losses.main([str(tmp_path / "missing")]) == 2
    assert "no TensorBoard event files" in capsys.readouterr().err

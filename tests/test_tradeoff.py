"""recipes.bench.tradeoff: quality from the quality reports, time from a separate timing run when given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.bench import tradeoff
from tts.evaluation.table import ReportError


def _report(path: Path, systems: dict[str, dict[str, float]]) -> Path:
    summary = {name: {m: {"mean": v, "ci_low": v - 0.1, "ci_high": v + 0.1, "n": 9} for m, v in metrics.items()}
               for name, metrics in systems.items()}
    path.write_text(json.dumps({"summary": summary}))
    return path


def test_the_timing_report_supplies_every_systems_time(tmp_path: Path):
    quality = _report(tmp_path / "q.json", {"gt": {"distillmos": 3.5}, "a": {"distillmos": 3.0, "mel_s": 0.9},
                                            "b": {"distillmos": 3.2, "mel_s": 0.05}})
    timing = _report(tmp_path / "t.json", {"a": {"mel_s": 0.2}, "b": {"mel_s": 0.1}})
    own = {p.system: p.mel_ms for p in tradeoff.points([quality], None, "distillmos")}
    assert own == {"gt": None, "a": 900.0, "b": 50.0}
    timed = {p.system: (p.mel_ms, p.y) for p in tradeoff.points([quality], None, "distillmos", timing)}
    assert timed == {"gt": (None, 3.5), "a": (200.0, 3.0), "b": (100.0, 3.2)}  # quality kept, time replaced
    assert tradeoff.main([str(quality), "--out", str(tmp_path / "plot"), "--timing", str(timing)]) == 0
    plotted = json.loads((tmp_path / "plot" / "tradeoff.json").read_text())["points"]
    assert [p["mel_ms"] for p in plotted] == [None, 200.0, 100.0]


def test_a_system_the_timing_run_lacks_is_an_error(tmp_path: Path):
    quality = _report(tmp_path / "q.json", {"a": {"distillmos": 3.0, "mel_s": 0.9}})
    timing = _report(tmp_path / "t.json", {"other": {"mel_s": 0.2}})
    with pytest.raises(ReportError, match="'a' has no mel_s in the timing report"):
        tradeoff.points([quality], None, "distillmos", timing)

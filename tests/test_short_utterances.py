"""recipes.benchmark short: the gate a candidate default voice passes on one-vowel texts (real shipped voice)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from recipes.bench.short_utterances import level_db, main


def test_level_is_rms_in_dbfs():
    assert abs(level_db(np.full(100, 0.5, dtype=np.float32)) - 20 * np.log10(0.5)) < 1e-6
    assert level_db(np.zeros(10, dtype=np.float32)) < -200
    assert level_db(np.zeros(0, dtype=np.float32)) < -200


def test_the_shipped_voice_passes_and_a_floor_above_it_fails(tmp_path: Path, capsys):
    assert main(["--texts", "A.|Go!", "--speeds", "1,2", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert table.count("| yes |") == 2, table
    report = json.loads((tmp_path / "short_utterances.json").read_text())
    assert [r["text"] for r in report["rows"]] == ["A.", "Go!"] and all(len(r["levels_db"]) == 2 for r in report["rows"])
    assert (tmp_path / "short_utterances.md").read_text() == table
    # the same voice against a floor no speech reaches: reported as not audible, exit status 1
    assert main(["--texts", "A.", "--speeds", "1", "--floor-db", "0"]) == 1
    assert "| NO |" in capsys.readouterr().out

"""`python -m recipes.peers.measure_nemo`: the scoring rule and the report, on case files written here (NeMo's own
files are public reference data that this repository does not copy; the run with them is in
docs/results/text_normalisation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recipes.peers.measure_nemo import CLASSES, DOCUMENT_CLASSES, equivalent, load_cases, main, spoken_key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("twenty-five", "twenty five"),  # hyphens
        ("One Hundred", "one hundred"),  # case
        ("one  hundred ", " one hundred"),  # spacing
        ("one hundred and five", "one hundred five"),  # "and" inside a number
        ("two dollars and five cents", "two dollars five cents"),  # "and" inside an amount
        ("two and a half", "two a half"),
        ("five six, seven.", "five six seven"),  # pauses are not words
        ("p m", "PM"),  # spelled letters
        ("nine p m E S T", "nine PM EST"),
        ("S D F at gmail", "sdf at gmail"),
    ],
)
def test_equivalent_spoken_forms(a: str, b: str) -> None:
    assert spoken_key(a) == spoken_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("two to five", "two - five"),  # "to" is a word, a dash is not
        ("salt and pepper", "salt pepper"),  # "and" between words stays
        ("main street", "main st"),
        ("forty-five degrees", "forty five degree"),
        ("missus", "misses"),
        ("one two", "twelve"),
    ],
)
def test_different_spoken_forms(a: str, b: str) -> None:
    assert spoken_key(a) != spoken_key(b)


def test_any_alternative_counts() -> None:
    assert equivalent("two hundred", ("twice a hundred", "two hundred"))
    assert not equivalent(None, ("x",))


def _write_cases(directory: Path) -> None:
    """One file per class, in NeMo's format; sentences of our own."""
    for cls in CLASSES:
        (directory / f"test_cases_{cls}.txt").write_text(f"7 apples~seven apples\nQ~{cls}\n\n", encoding="utf-8")
    # a two-form line: either spoken form is right
    (directory / "test_cases_money.txt").write_text("$3~three bucks~three dollars\n", encoding="utf-8")


def test_load_cases(tmp_path: Path) -> None:
    _write_cases(tmp_path)
    cases = load_cases(tmp_path)
    assert len(cases) == 2 * len(CLASSES) - 1
    money = [c for c in cases if c.cls == "money"]
    assert money[0].expected == ("three bucks", "three dollars") and money[0].line == 1


def test_missing_class_file_is_a_clear_error(tmp_path: Path) -> None:
    _write_cases(tmp_path)
    (tmp_path / "test_cases_roman.txt").unlink()
    with pytest.raises(SystemExit, match="test_cases_roman.txt"):
        load_cases(tmp_path)
    with pytest.raises(SystemExit, match="not a directory"):
        load_cases(tmp_path / "nowhere")


def test_report_without_nemo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, out = tmp_path / "cases", tmp_path / "out"
    cases.mkdir()
    _write_cases(cases)
    assert main(["--cases", str(cases), "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    scores = report["scores"]
    assert scores["money"] == {"n": 1, "ours": 1, "nemo": None}
    # "7 apples" is right, "Q" is not the class name: one of two in every other class
    assert all(scores[c] == {"n": 2, "ours": 1, "nemo": None} for c in CLASSES if c != "money")
    assert report["failures"]["ours"] == [f"{c}:2" for c in CLASSES if c != "money"]
    assert report["nemo_timing"] is None and report["ours_timing"]["start_up_s"] > 0
    table = (out / "table.md").read_text()
    assert table.count("\n| ") == len(CLASSES) and "| money | 1 | 1/1 (100%) | - |" in table
    assert all(f"| {c} |" in table for c in DOCUMENT_CLASSES)
    assert "| money |" in capsys.readouterr().out


def test_install_needs_a_venv(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--cases", str(tmp_path), "--install"])

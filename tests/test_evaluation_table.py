"""tts.evaluation.table: README tables made from recipes.evaluate reports, not retyped."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tts.evaluation.report import write_report
from tts.evaluation.table import ReportError, collect, main, to_markdown
from tts.paths import REPO_ROOT


def make_report(out: Path, per_system: dict[str, list[dict]], corpus: dict[str, dict]) -> Path:
    """A report.json as recipes.evaluate writes it: write_report's payload + corpus_asr."""
    _, js = write_report(per_system, out, n_boot=50)
    payload = json.loads(js.read_text())
    payload["corpus_asr"] = corpus
    js.write_text(json.dumps(payload))
    return js


@pytest.fixture
def reports(tmp_path: Path) -> tuple[Path, Path]:
    a = make_report(tmp_path / "a", {
        "ground_truth": [{"cer": 0.0, "mcd_db": 0.0}, {"cer": 0.1, "mcd_db": 0.0}],
        "ar": [{"cer": 0.2, "mcd_db": 10.0, "ar_failure": True}, {"cer": 0.0, "mcd_db": 12.0, "ar_failure": False}],
    }, {"ground_truth": {"cer": 0.04, "wer": 0.1, "n": 2}, "ar": {"cer": 0.08, "wer": 0.2, "n": 2}})
    b = make_report(tmp_path / "b", {
        "ground_truth": [{"cer": 0.5, "mcd_db": 0.0}],
        "nar_k2": [{"cer": 0.0, "mcd_db": 11.0, "distillmos": 2.25}],
    }, {"ground_truth": {"cer": 0.5, "wer": 0.5, "n": 1}, "nar_k2": {"cer": 0.01, "wer": 0.02, "n": 1}})
    return a, b


def test_table_takes_each_system_from_the_first_report_that_has_it(reports):
    a, b = reports
    rows = collect([a, b], ["ground_truth", "ar", "nar_k2"])
    md = to_markdown(rows, ["cer", "mcd_db", "ar_failure", "distillmos"], {"nar_k2": "NAR K=2"})
    lines = md.splitlines()
    assert lines[0] == "| system | cer | mcd_db | ar_failure | distillmos |"
    # corpus-level CER (0.04), not the mean of per-utterance CERs (0.05), and not report b's 0.5
    assert lines[2] == "| ground_truth | 0.040 | 0.00 | – | – |"
    assert lines[3] == "| ar | 0.080 | 11.00 | 0.500 | – |"
    assert lines[4] == "| NAR K=2 | 0.010 | 11.00 | – | 2.25 |"


def test_name_at_k_takes_a_system_from_that_report_only(reports, capsys):
    # two reports with a system of the same name (the old and the new default): NAME@K picks the K-th report's
    a, b = reports
    rows = collect([a, b], ["ground_truth@2", "ground_truth", "ar@1"])
    assert [r.name for r in rows] == ["ground_truth@2", "ground_truth", "ar@1"]
    assert [r.corpus_asr["cer"] for r in rows] == [0.5, 0.04, 0.08]
    with pytest.raises(ReportError, match="in none of"):
        collect([a, b], ["ar@2"])  # ar is in report 1 only
    for bad in ("ar@3", "ar@0", "ar@x"):
        with pytest.raises(ReportError, match="number of one of the 2 reports"):
            collect([a, b], [bad])
    assert main([str(a), str(b), "--systems", "ground_truth@2", "--columns", "cer",
                 "--label", "ground_truth@2=second"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| second | 0.500 |"


def test_ci_adds_the_reports_interval_but_not_to_corpus_columns(reports):
    a, _ = reports
    [ar] = collect([a], ["ar"])
    lo, hi = ar.summary["mcd_db"]["ci_low"], ar.summary["mcd_db"]["ci_high"]
    assert lo < hi  # two different utterances: a real interval
    md = to_markdown([ar], ["cer", "mcd_db"], ci=True)
    assert md.splitlines()[2] == f"| ar | 0.080 | 11.00 [{lo:.2f}, {hi:.2f}] |"


def test_cli_prints_the_table_and_rejects_unknown_systems_and_files(reports, tmp_path: Path):
    a, b = reports
    cmd = [sys.executable, "-m", "tts.evaluation.table", str(a), str(b)]
    r = subprocess.run(cmd + ["--columns", "cer,wer"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[2:] == ["| ground_truth | 0.040 | 0.100 |", "| ar | 0.080 | 0.200 |",
                                         "| nar_k2 | 0.010 | 0.020 |"]
    r = subprocess.run(cmd + ["--systems", "ar,tacotron9"], capture_output=True, text=True)
    assert r.returncode == 2 and "tacotron9" in r.stderr and r.stdout == ""
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ReportError, match="not a JSON report"):
        collect([tmp_path / "bad.json"])
    with pytest.raises(ReportError, match="no report at"):
        collect([tmp_path / "missing.json"])


def documented_tables(doc: Path) -> list[tuple[list[str], str]]:
    """(argv, table) for each ``` block running tts.evaluation.table that a markdown table follows (with --paired,
    two tables one blank line apart)."""
    found = []
    for m in re.finditer(r"```\n(.*?)```\n+((?:\|[^\n]*\n)+(?:\n(?:\|[^\n]*\n)+)?)", doc.read_text(), re.S):
        command, table = m.group(1).replace("\\\n", " "), m.group(2)
        if "-m tts.evaluation.table" in command:
            argv = shlex.split(command.split("-m tts.evaluation.table", 1)[1])
            found.append((argv, table))
    return found


@pytest.mark.parametrize("doc", ["README.md", "checkpoints/README.md"])
def test_documented_tables_are_what_their_commands_print(doc, capsys, monkeypatch):
    # a figure in the docs comes from a command anyone can rerun: rerun it on the committed reports
    monkeypatch.chdir(REPO_ROOT)
    tables = documented_tables(REPO_ROOT / doc)
    assert tables, f"{doc} has no table made by tts.evaluation.table"
    for argv, table in tables:
        assert main(argv) == 0
        assert capsys.readouterr().out.strip() == table.strip(), f"{doc}: table of `{' '.join(argv)}` is stale"


def test_paired_differences_are_taken_sentence_by_sentence(tmp_path: Path, capsys):
    """--paired A,B: A minus B on the sentences both spoke (by id), with the interval and A's wins."""
    report = make_report(tmp_path / "p", {
        "new": [{"id": "u1", "distillmos": 3.5, "cer": 0.0}, {"id": "u2", "distillmos": 3.0}, {"id": "u3", "distillmos": 4.0}],
        "old": [{"id": "u2", "distillmos": 2.5}, {"id": "u1", "distillmos": 3.0, "cer": 0.1}],
    }, {"new": {"cer": 0.0, "wer": 0.0, "n": 3}, "old": {"cer": 0.1, "wer": 0.1, "n": 2}})
    assert main([str(report), "--columns", "cer,distillmos", "--paired", "new,old"]) == 0
    out = capsys.readouterr().out
    assert "| new minus old | distillmos | +0.50 [+0.50, +0.50] | 2 of 2 |" in out  # u3 has no partner
    assert "cer" not in out.split("| paired |")[1]  # CER is corpus-level unless asked per sentence
    assert main([str(report), "--columns", "distillmos", "--paired", "new,old", "--paired-sentence", "cer"]) == 0
    assert "| new minus old | cer per sentence | -0.100 [" in capsys.readouterr().out  # one pair: no interval
    assert main([str(report), "--paired", "new,old", "--paired-sentence", "distillmos"]) == 2
    assert "per-sentence pairing" in capsys.readouterr().err
    assert main([str(report), "--paired", "new,absent"]) == 2
    assert "holds ['absent']" in capsys.readouterr().err
    # A and B in two reports of the same sentences pair as in one; reports of other sentences are refused
    other = make_report(tmp_path / "q", {"newer": [{"id": "u1", "distillmos": 4.5}, {"id": "u2", "distillmos": 2.0}]},
                        {"newer": {"cer": 0.0, "wer": 0.0, "n": 2}})
    assert main([str(report), str(other), "--columns", "distillmos", "--paired", "newer,old"]) == 0
    assert "| newer minus old | distillmos | +0.50 [-0.50, +1.50] | 1 of 2 |" in capsys.readouterr().out
    payload = json.loads(other.read_text())
    payload["config"] = {"data_root": "data/joe", "split": "test"}
    other.write_text(json.dumps(payload))
    assert main([str(report), str(other), "--paired", "newer,old"]) == 2
    assert "different sentences" in capsys.readouterr().err
    # NAME@K pairs a system with its namesake of another report
    twin = make_report(tmp_path / "t", {"new": [{"id": "u1", "distillmos": 3.0}, {"id": "u2", "distillmos": 3.5}]},
                       {"new": {"cer": 0.0, "wer": 0.0, "n": 2}})
    assert main([str(twin), str(report), "--columns", "distillmos", "--paired", "new@1,new@2"]) == 0
    assert "| new@1 minus new@2 | distillmos | +0.00 [-0.50, +0.50] | 1 of 2 |" in capsys.readouterr().out

"""`python -m recipes.benchmark latency` (recipes/bench/latency.py, issue 37 item 6) on tiny random-weight checkpoints:
the subcommand runs every family end to end through the pipeline and writes its three files, the speed-ups and the
margin are the arithmetic of the measured times (checked on a hand-made record), and bad arguments exit 2 with a
clear message.  CPU, one thread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recipes import benchmark
from recipes.bench import latency
from tests.helpers import TINY, tiny_checkpoint
from tts.runtime.engine import Capabilities
from test_transformer_ar import TINY as TINY_TAR


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    before = torch.get_num_threads()
    d = tmp_path_factory.mktemp("latency")
    yield {"ar": tiny_checkpoint(d / "ar.pt", "autoregressive", **TINY["autoregressive"]),
           "nar": tiny_checkpoint(d / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"]),
           "block": tiny_checkpoint(d / "block.pt", "nonautoregressive", **TINY["nonautoregressive"],
                                    block_sizes=[4, 0], block_past_frames=5),
           "tar": tiny_checkpoint(d / "tar.pt", "transformer_ar", **TINY_TAR),
           "dir": d}
    torch.set_num_threads(before)  # the run sets one thread


def models_args(tiny: dict[str, Path]) -> list[str]:
    return ["--ar", str(tiny["ar"]), "--tar", str(tiny["tar"]), "--nar", str(tiny["nar"]), "--block", str(tiny["block"]),
            "--scorer", str(tiny["ar"]), "--vocoder", "griffin-lim"]


def test_the_subcommand_runs_every_family_and_writes_its_three_files(tiny, capsys):
    out = tiny["dir"] / "out"
    rc = benchmark.main(["latency", *models_args(tiny), "--lengths", "3,8", "--ks", "0,2", "--blocks", "4",
                         "--ns", "1,2", "--repeats", "1", "--threads", "1", "--frames-per-symbol", "2",
                         "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "latency.json").read_text())
    assert (out / "latency.png").stat().st_size > 0
    names = ["ar", "tar_cache", "tar_nocache", "nar_k0", "nar_k2", "block_b4", "rescore_n1", "rescore_n2"]
    assert list(res["systems"]) == names
    assert [(r["system"], r["length"]) for r in res["rows"]] == [(s, n) for n in (3, 8) for s in names]
    assert all(s["forced_length"] for s in res["systems"].values())  # tiny models are random: lengths forced
    for r in res["rows"]:
        # model-only is part of the same call's end-to-end time
        assert 0 < r["model_s"] < r["e2e_s"] and len(r["e2e_times_s"]) == 1 and r["audio_s"] > 0
    assert res["systems"]["nar_k2"]["controls"]["refine_steps"] == 2
    assert res["systems"]["block_b4"]["controls"]["block_frames"] == 4
    # the table holds the speed-ups of the json, computed from the json's times
    assert latency.speedups(res["rows"]) == res["speedups"]
    md = (out / "latency.md").read_text()
    assert "| system | symbols |" in md and "margin median" in md and "Forced length" in md
    for g in res["speedups"]:
        assert f"| {g['model_x']:.2f} | {g['e2e_x']:.2f} | {g['margin']:.2f} |" in md
    printed = capsys.readouterr().out
    assert "margin median" in printed and "wrote" in printed
    # the report again from the json, measuring nothing: the same table
    again = tiny["dir"] / "again"
    assert benchmark.main(["latency", "--report-from", str(out / "latency.json"), "--out", str(again)]) == 0
    assert (again / "latency.md").read_text() == md and (again / "latency.png").stat().st_size > 0


def test_speed_ups_and_margin_are_the_arithmetic_of_the_times():
    rows = [{"system": "ar", "length": 10, "model_s": 2.0, "e2e_s": 2.5},
            {"system": "nar", "length": 10, "model_s": 0.2, "e2e_s": 0.7},
            {"system": "ar", "length": 20, "model_s": 4.0, "e2e_s": 5.0},
            {"system": "nar", "length": 20, "model_s": 0.5, "e2e_s": 1.0}]
    gains = {(g["system"], g["length"]): g for g in latency.speedups(rows)}
    # 10 symbols: model-only 2.0 / 0.2 = 10x, end-to-end 2.5 / 0.7; margin = (2.5 / 0.7) / 10
    g = gains[("nar", 10)]
    assert g["model_x"] == pytest.approx(10.0) and g["e2e_x"] == pytest.approx(2.5 / 0.7)
    assert g["margin"] == pytest.approx(2.5 / 0.7 / 10) and g["model_share"] == pytest.approx(0.2 / 0.7)
    assert gains[("nar", 20)]["margin"] == pytest.approx((5.0 / 1.0) / (4.0 / 0.5))
    assert gains[("ar", 10)]["model_x"] == gains[("ar", 10)]["margin"] == 1.0  # the reference against itself
    s = latency.summary(list(gains.values()))["nar"]
    assert (s["model_x_min"], s["model_x_max"]) == (pytest.approx(8.0), pytest.approx(10.0))
    assert s["margin_median"] == pytest.approx((2.5 / 0.7 / 10 + 5.0 / 8.0) / 2)
    # the systems faster than the reference: both nar pairs (model-only x 10 and 8), not the reference's own
    fm = latency.faster_margin(list(gains.values()))
    assert fm["pairs"] == 2 and fm["median"] == pytest.approx(s["margin_median"]) and fm["lost"] == 1 - fm["median"]
    with pytest.raises(latency.BenchmarkError, match="no 'ar' row at length 30"):
        latency.speedups(rows + [{"system": "nar", "length": 30, "model_s": 1.0, "e2e_s": 1.0}])


def test_the_bench_engine_forces_lengths_and_passes_ar_options():
    calls = []

    class Base:
        capabilities = Capabilities(controls=frozenset())

        def mels(self, ids, indices, controls, forced_frames=None, **kwargs):
            calls.append((forced_frames, kwargs))

    latency.BenchEngine(Base(), 2.5, {"use_cache": False}).mels([[1, 2, 3], [4]], [0, 1], None)
    latency.BenchEngine(Base(), None, None).mels([[1, 2, 3]], [0], None, forced_frames=[7])
    # round(3 x 2.5) = 8 (half to even), round(1 x 2.5) = 2; without options the call is the plain engine call
    assert calls == [([8, 2], {"ar_options": {"use_cache": False}}), ([7], {})]


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], "--repeats and --threads must be >= 1"),
    (["--lengths", "0,10"], "--lengths must be >= 1"),
    (["--ns", "0"], "--ns >= 1"),
    (["--systems", "ar,warp_drive"], "unknown system(s) warp_drive; the systems are ar, tar_cache"),
    (["--systems", "nar_k0"], "--systems must include 'ar'"),
    (["--lengths", "ten"], "expected comma-separated integers"),
])
def test_bad_arguments_exit_2_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        benchmark.main(["latency", *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_bad_report_from_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    assert benchmark.main(["latency", "--report-from", str(tmp_path / "x.json"), "--out", str(tmp_path)]) == 2
    assert "not a latency.json" in capsys.readouterr().err


def test_a_missing_checkpoint_is_a_clear_error(tmp_path, capsys):
    rc = benchmark.main(["latency", "--ar", str(tmp_path / "nope.pt"), "--systems", "ar", "--out", str(tmp_path)])
    assert rc == 2
    assert f"--ar {tmp_path / 'nope.pt'}: no such file" in capsys.readouterr().err

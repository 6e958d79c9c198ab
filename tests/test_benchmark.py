"""python -m recipes.benchmark: a smoke run with tiny random models (no timed assertions)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import TINY, tiny_checkpoint
from recipes import benchmark
from recipes.bench.systems import DEFAULT_FRAMES_PER_SYMBOL
from tts.runtime.torch_engine import forced_durations
from tts.paths import REPO_ROOT



@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    ar = tiny_checkpoint(tmp / "ar.pt", "autoregressive", **TINY["autoregressive"])
    nar = tiny_checkpoint(tmp / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])
    quality = tmp / "quality.json"
    quality.write_text(json.dumps({"0": {"cer": 0.2, "mcd": 7.0}, "2": {"cer": 0.1, "mcd": 6.0}}))
    out = tmp / "out"
    argv = ["--ar", str(ar), "--nar", str(nar), "--lengths", "8,20", "--ks", "0,2", "--repeats", "1",
            "--batch-sizes", "1,2", "--batch-length", "12", "--threads", "1", "--peers", "--peer-size", "tiny",
            "--quality", str(quality), "--out", str(out)]
    torch_threads = torch.get_num_threads()
    try:
        assert benchmark.main(argv) == 0
    finally:
        torch.set_num_threads(torch_threads)
    return out, json.loads((out / "benchmark.json").read_text())


def test_outputs_written_with_expected_keys(smoke):
    out, r = smoke
    for key in ("meta", "settings", "mel_latency", "ratios", "vocoder", "end_to_end", "first_audio",
                "batch_throughput", "peak_memory", "peers", "plots", "quality"):
        assert key in r, key
    machine = r["meta"]["machine"]
    for key in ("cpu_model", "cpu_count", "torch_threads", "torch_version", "device", "load_average_at_start"):
        assert key in machine, key
    assert machine["torch_threads"] == 1 and machine["device"] == "cpu"
    assert "recipes.benchmark" in r["meta"]["command"] and "--peers" in r["meta"]["command"]
    assert r["meta"]["speed_only"] is True and r["meta"]["forced_length"] is True  # tiny = random checkpoints
    md = (out / "benchmark.md").read_text()
    assert "Mel-generation latency" in md and "RANDOM-WEIGHT MODELS (ar, nar)" in md and "Festival" in md
    for name in ("latency_vs_length", "quality_vs_k", "mel_comparison"):
        png = Path(r["plots"][name])
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_times_positive_and_lengths_forced(smoke):
    _, r = smoke
    assert set(r["mel_latency"]) == {"ar", "nar_k0", "nar_k2"}
    for name, per in r["mel_latency"].items():
        assert set(per) == {"8", "20"}
        for n, v in per.items():
            assert v["median_s"] > 0 and len(v["times_s"]) == 1
            assert v["frames"] >= round(int(n) * DEFAULT_FRAMES_PER_SYMBOL)  # AR: up to r-1 more
            assert r["vocoder"][name][n]["median_s"] > 0
            assert r["end_to_end"][name][n]["rtf"] > 0 and r["end_to_end"][name][n]["audio_s"] > 0
    # NAR got exactly the forced frames, AR the same length up to its reduction factor
    for n in ("8", "20"):
        nar = r["mel_latency"]["nar_k0"][n]["frames"]
        assert nar == round(int(n) * DEFAULT_FRAMES_PER_SYMBOL)
        assert 0 <= r["mel_latency"]["ar"][n]["frames"] - nar < r["meta"]["models"]["ar"]["reduction_factor"]
    for name, v in r["first_audio"].items():
        assert 0 < v["first_audio_s"] <= v["total_s"] and v["n_sentences"] > 1
    for name, per in r["batch_throughput"].items():
        assert set(per) == {"1", "2"}
        assert all(v["utterances_per_s"] > 0 and v["audio_s_per_s"] > 0 for v in per.values())
    for name in ("ar", "nar_k0", "nar_k2", "vocoder"):
        v = r["peak_memory"][name]
        assert "error" not in v, v
        assert v["rss_peak_mb"] > 0 and v["rss_delta_mb"] >= 0


def test_ratios_are_same_run_medians(smoke):
    _, r = smoke
    ml = r["mel_latency"]
    assert set(r["ratios"]) == {"ar_over_nar_k0", "ar_over_nar_k2"}
    for k in ("nar_k0", "nar_k2"):
        for n in ("8", "20"):
            assert r["ratios"][f"ar_over_{k}"][n] == pytest.approx(ml["ar"][n]["median_s"] / ml[k][n]["median_s"])


def test_peers_section(smoke):
    _, r = smoke
    peers = r["peers"]
    assert set(peers) == {"festival_slt", "piper_joe_medium", "speechbrain_tacotron2", "speechbrain_fastspeech2"}
    for name, p in peers.items():
        assert p["status"] in ("ok", "unavailable", "failed"), p
        if p["status"] != "ok":
            assert p["reason"]
    for name in ("speechbrain_tacotron2", "speechbrain_fastspeech2"):
        p = peers[name]
        assert p["status"] == "ok", p
        for n, v in p["per_length"].items():
            assert v["median_s"] > 0 and v["ours_over_peer"] > 0
            assert v["frames"] >= r["mel_latency"]["nar_k0"][n]["frames"]  # same output length as ours
    piper = peers["piper_joe_medium"]  # the `peers` extra is part of the test setup (Makefile)
    assert piper["status"] == "ok", piper
    assert "**Piper joe-medium**" in (smoke[0] / "benchmark.md").read_text()  # a text -> wave table, as Festival's
    assert all(v["rtf"] > 0 and v["audio_s"] > 0.2 for v in piper["per_length"].values())
    fest = peers["festival_slt"]
    if fest["status"] == "ok":
        assert all(v["rtf"] > 0 and v["audio_s"] > 0 for v in fest["per_length"].values())


def test_cuda_without_cuda_fails_clearly(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    r = subprocess.run([sys.executable, "-m", "recipes.benchmark", "--random", "--device", "cuda", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert r.returncode != 0
    assert "CUDA is not available" in r.stderr and "--device cpu" in r.stderr
    assert not (tmp_path / "benchmark.json").exists()


def test_forced_durations_sum():
    for n, fps in ((10, 6.0), (7, 5.5), (1, 6.3)):
        d = forced_durations(n, fps)
        assert len(d) == n and sum(d) == round(n * fps)


def _report(systems: dict, corpus: dict, summary: dict) -> dict:
    return {"title": "t", "systems": systems, "corpus_asr": corpus, "summary": summary, "utterances": {}}


def test_quality_read_from_an_evaluate_report(tmp_path):
    from recipes.bench.measure import load_quality

    nar = {"kind": "acoustic", "checkpoint": "n.pt", "vocoder": "griffin-lim", "temperature": None}
    report = _report(
        {"ground_truth": {"kind": "ground_truth"}, "nar_k0": {**nar, "refine_steps": 0},
         "nar_k4": {**nar, "refine_steps": 4}},
        {"ground_truth": {"cer": 0.02, "wer": 0.05, "n": 3}, "nar_k0": {"cer": 0.3, "wer": 0.5, "n": 3},
         "nar_k4": {"cer": 0.1, "wer": 0.2, "n": 3}},
        {"nar_k0": {"mcd_db": {"mean": 9.0}, "mel_s": {"mean": 0.01}}, "nar_k4": {"mcd_db": {"mean": 8.0}}},
    )
    p = tmp_path / "report.json"
    p.write_text(json.dumps(report))
    q = load_quality(p)
    assert q == {"0": {"cer": 0.3, "wer": 0.5, "mcd_db": 9.0, "mel_s": 0.01}, "4": {"cer": 0.1, "wer": 0.2, "mcd_db": 8.0}}


def test_quality_errors_are_clear(tmp_path):
    from recipes.bench.measure import load_quality
    from recipes.bench.timing import BenchmarkError

    nar = {"kind": "acoustic", "checkpoint": "n.pt", "refine_steps": 2}
    p = tmp_path / "two.json"
    p.write_text(json.dumps(_report({"a_k2": nar, "b_k2": {**nar, "checkpoint": "m.pt"}}, {}, {})))
    with pytest.raises(BenchmarkError, match="both have K=2"):
        load_quality(p)
    p.write_text(json.dumps(_report({"ground_truth": {"kind": "ground_truth"}}, {}, {})))
    with pytest.raises(BenchmarkError, match="no NAR system"):
        load_quality(p)
    p.write_text("{not json")
    with pytest.raises(BenchmarkError, match="cannot read JSON"):
        load_quality(p)
    with pytest.raises(BenchmarkError, match="cannot read JSON"):
        load_quality(tmp_path / "missing.json")


def test_memory_probe_reads_its_own_peak_not_its_parents(tmp_path):
    """ru_maxrss survives exec (the child would report the benchmark's own peak); VmHWM does not."""
    from recipes.bench.memory import _maxrss_mb, run_memory_probe_subprocess

    ckpt = tiny_checkpoint(tmp_path / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])
    ballast = torch.ones(1024, 1024, 256)  # 1 GiB resident in this (parent) process
    parent_peak = _maxrss_mb()
    spec = {"system": "nar_k0", "kind": "nar", "k": 0, "checkpoint": str(ckpt), "forced": True,
            "tokens": [5, 6, 7, 8], "frames": 40, "threads": 1, "device": "cpu"}
    probe = run_memory_probe_subprocess(spec, tmp_path)
    del ballast
    assert "error" not in probe, probe
    assert probe["rss_peak_mb"] < parent_peak - 512, (probe, parent_peak)


def test_report_with_a_peer_that_failed_at_one_length(smoke, tmp_path):
    import copy

    from recipes.bench.report import make_plots, to_markdown

    _, r = smoke
    r = copy.deepcopy(r)
    peer = r["peers"]["speechbrain_fastspeech2"]
    assert peer["status"] == "ok", peer
    peer["per_length"].pop("20")
    peer["failed_lengths"] = {"20": "RuntimeError: positional table too short"}
    plots = make_plots(r, {}, tmp_path, None)
    assert Path(plots["latency_vs_length"]).is_file()
    assert "| 20 | – | failed: RuntimeError: positional table too short" in to_markdown({**r, "plots": plots})


# --- issue 32 item 7: the benchmark defaults to the shipped models and says what it compares ------------------


def test_a_missing_model_or_vocoder_is_the_shipped_one(tmp_path):
    """`--nar X` alone measured nothing ("no --ar checkpoint given"): the AR and the vocoder are now the
    shipped ones (checkpoints/ar.pt, checkpoints/default.json's vocoder), and the report says so."""
    from tts.paths import CHECKPOINT_DIR

    nar = tiny_checkpoint(tmp_path / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])
    out = tmp_path / "out"
    torch_threads = torch.get_num_threads()
    try:
        assert benchmark.main(["--nar", str(nar), "--lengths", "8", "--ks", "0", "--repeats", "1", "--batch-sizes", "1",
                               "--threads", "1", "--no-memory", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(torch_threads)
    r = json.loads((out / "benchmark.json").read_text())
    assert r["meta"]["models"]["ar"]["source"].startswith(str(CHECKPOINT_DIR / "ar.pt")) and "shipped" in r["meta"]["models"]["ar"]["source"]
    shipped_vocoder = json.loads((CHECKPOINT_DIR / "default.json").read_text())["vocoder"]
    assert r["meta"]["models"]["vocoder"]["name"] == shipped_vocoder == "source-filter"


def test_help_names_every_subcommand_and_the_source_filter_vocoder():
    text = benchmark.build_parser().format_help()
    for name in benchmark.SUBCOMMANDS:
        assert f"recipes.benchmark {name}" in text, name
    assert "source-filter" in text


def test_an_ar_that_stops_at_once_is_flagged():
    from recipes.bench.measure import too_short
    from recipes.bench.systems import System

    free = System("ar", "ar", None, synth=None, forced=False)
    assert "stopped early" in too_short(free, symbols=20, frames=1)
    assert too_short(free, symbols=20, frames=120) is None
    assert too_short(System("ar", "ar", None, synth=None, forced=True), symbols=20, frames=1) is None
    # a NAR has no stop token: its warning names its durations
    nar = too_short(System("nar_k0", "nar", 0, synth=None, forced=False), symbols=20, frames=2)
    assert "near-zero durations" in nar and "stop token" not in nar

"""The varied (one-to-many) corpus: data_prep.festival_corpus --prosody-variation, data_prep.prosody,
data_prep.variability."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data_prep import corpus, festival_corpus, features, splits, variability
from data_prep.prosody import PROSODY_DIR, Prosody, ProsodyRanges, draw_prosody, insert_pauses

HAVE_FESTIVAL = shutil.which("festival") is not None and shutil.which("sox") is not None
needs_festival = pytest.mark.skipif(not HAVE_FESTIVAL, reason="`festival`/`sox` not on PATH")

TEXTS = ["The cat sat on the mat, and then it slept.", "Harp not on that string.", "It rained all day."]


def test_draw_is_a_function_of_seed_and_id_within_the_ranges():
    ranges = ProsodyRanges(rate_range=(0.8, 1.25), pitch_range_cents=(-200, 200), pause_prob=0.5)
    a = draw_prosody(0, "var_00001_1", ranges)
    assert a == draw_prosody(0, "var_00001_1", ranges)
    assert a != draw_prosody(0, "var_00001_2", ranges) and a != draw_prosody(1, "var_00001_1", ranges)
    draws = [draw_prosody(3, f"var_{i:05d}_1", ranges) for i in range(200)]
    rates = np.array([d.rate for d in draws])
    assert rates.min() >= 0.8 and rates.max() <= 1.25 and rates.std() > 0.05
    assert all(-200 <= d.pitch_cents <= 200 for d in draws)
    on = np.mean([x > 0 for d in draws for x in d.pause_draws])
    assert 0.4 < on < 0.6


@pytest.mark.parametrize("bad", [dict(rate_range=(1.3, 1.2)), dict(pitch_range_cents=(-2000, 0)),
                                 dict(pause_prob=1.5), dict(pause_range_s=(0.3, 0.1))])
def test_bad_ranges_are_refused(bad):
    with pytest.raises(ValueError):
        ProsodyRanges(**bad)


def test_pauses_lengthen_internal_pauses_only():
    sr = 1000
    phones = ["pau", "a", "pau", "b", "pau"]
    ends = [0.1, 0.3, 0.4, 0.6, 0.7]
    wave = np.arange(700, dtype=np.int16)
    out, new_ends, edits = insert_pauses(wave, sr, phones, ends, Prosody(1.0, 0.0, (0.25,)))
    assert [e.segment_index for e in edits] == [2]
    assert len(out) == 950 and new_ends == pytest.approx([0.1, 0.3, 0.65, 0.85, 0.95])
    assert (out[350:600] == 0).all() and out[349] == 349 and out[600] == 350  # silence in the pause's middle
    same, same_ends, none = insert_pauses(wave, sr, phones, ends, Prosody(1.0, 0.0, (0.0,)))
    assert none == [] and same_ends == ends and len(same) == 700


def test_renditions_of_a_text_share_a_split_keyed_like_the_plain_corpus():
    ids = [f"var_{i:05d}_{r}" for i in range(1, 3001) for r in (1, 2, 3)]
    s = splits.assign_splits(ids, group=festival_corpus.text_group)
    plain = splits.assign_splits([f"slt_{i:05d}" for i in range(1, 3001)])
    for name in splits.SPLIT_NAMES:
        texts = {i.split("_")[1] for i in s[name]}
        assert texts == {i.split("_")[1] for i in plain[name]}  # same held-out texts as data/slt
        assert len(s[name]) == 3 * len(texts)


@pytest.fixture(scope="module")
def varied(tmp_path_factory) -> Path:
    if not HAVE_FESTIVAL:
        pytest.skip("`festival`/`sox` not on PATH")
    out = tmp_path_factory.mktemp("varied") / "c"
    variation = festival_corpus.Variation(renditions=3, seed=7, ranges=ProsodyRanges(pause_prob=1.0))
    festival_corpus.build_corpus(out, TEXTS, n=3, jobs=2, source={"kind": "test"}, variation=variation,
                                 split_config=splits.SplitConfig(min_per_split=1))
    return out


def _featurise(root: Path) -> None:
    if not (root / "features" / "stats.json").is_file():
        assert features.main(["--data", str(root), "--jobs", "1"]) == 0


@needs_festival
def test_renditions_differ_and_the_draw_is_recorded(varied: Path):
    ids = [u.id for u in corpus.read_metadata(varied)]
    assert ids == [f"var_0000{i}_{r}" for i in (1, 2, 3) for r in (1, 2, 3)]
    lengths = {i: sf.info(str(corpus.wav_path(varied, i))).frames for i in ids}
    assert len({lengths[f"var_00001_{r}"] for r in (1, 2, 3)}) == 3  # rate and pauses differ
    wav_bytes = {corpus.wav_path(varied, i).read_bytes() for i in ids}
    assert len(wav_bytes) == len(ids)
    info = corpus.read_corpus_info(varied)
    assert info["prosody_variation"]["renditions"] == 3 and info["prosody_variation"]["seed"] == 7
    for i in ids:
        side = json.loads((varied / PROSODY_DIR / f"{i}.json").read_text())
        drawn = draw_prosody(7, i, ProsodyRanges(pause_prob=1.0))
        assert (side["rate"], side["pitch_cents"], side["text_id"]) == (drawn.rate, drawn.pitch_cents, f"slt_{i[4:9]}")
        seg = corpus.read_segments(varied, i)
        assert abs(seg.segments[-1].end * 22050 - lengths[i]) <= 2.0  # segments follow rate and pauses
        if i.startswith("var_00001"):  # the comma's pause was lengthened (pause_prob 1)
            assert side["pauses_inserted"]
    # no side-file field leaks into what models read
    assert all("rate" not in json.loads(corpus.segments_path(varied, i).read_text()) for i in ids)


@needs_festival
def test_the_build_repeats_from_its_seed(varied: Path, tmp_path: Path):
    again = tmp_path / "again"
    variation = festival_corpus.Variation(renditions=3, seed=7, ranges=ProsodyRanges(pause_prob=1.0))
    festival_corpus.build_corpus(again, TEXTS[:1], n=1, jobs=1, source={"kind": "test"}, variation=variation)
    for r in (1, 2, 3):
        i = f"var_00001_{r}"
        assert corpus.wav_path(again, i).read_bytes() == corpus.wav_path(varied, i).read_bytes()


@needs_festival
def test_the_dataset_never_opens_the_side_files(varied: Path):
    """Open every item of every split with an audit hook watching for any open() under prosody/."""
    from tts.audio import MelConfig
    from tts.data.dataset import TTSDataset
    from tts.text.frontend import TextFrontend

    _featurise(varied)
    side_dir = str((varied / PROSODY_DIR).resolve())
    opened: list[str] = []
    watching = [True]

    def hook(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], (str, Path)) and \
                str(Path(args[0]).resolve()).startswith(side_dir):
            opened.append(str(args[0]))

    sys.addaudithook(hook)  # audit hooks cannot be removed: `watching` switches this one off
    try:
        n = 0
        for split in splits.SPLIT_NAMES:
            ds = TTSDataset(varied, split, TextFrontend(), MelConfig.default())
            n += sum(1 for k in range(len(ds)) if ds[k].mel.shape[0] == 80)
        assert n == 9
        probe = json.loads((varied / PROSODY_DIR / "var_00001_1.json").read_text())  # the hook does see it
        assert probe["id"] == "var_00001_1" and opened == [str(varied / PROSODY_DIR / "var_00001_1.json")]
    finally:
        watching[0] = False


@needs_festival
def test_variability_is_measured(varied: Path):
    _featurise(varied)
    report = variability.measure(varied)
    assert report["n_texts"] == 3 and report["renditions_per_text"] == [3]
    assert report["duration_std_s"]["median"] > 0.05
    assert report["mean_f0_std_cents"]["median"] > 20


def test_variability_refuses_a_corpus_without_renditions():
    fixture = Path(__file__).parent / "fixtures" / "slt20"
    with pytest.raises(corpus.CorpusError, match="two or more renditions"):
        variability.measure(fixture)


@needs_festival
def test_the_labs_evaluation_and_tradeoff_plot_run_on_a_tiny_varied_corpus(varied: Path, tmp_path: Path):
    """The lab's own evaluation config (conf/evaluate_multimodality.yaml) end to end on the tiny corpus,
    with random tiny models in place of the trained ones, then its table and quality-vs-time plot."""
    import subprocess

    from helpers import TINY, tiny_checkpoint
    from recipes.bench import tradeoff
    from tts.evaluation import table
    from tts.paths import REPO_ROOT

    _featurise(varied)
    ar = tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"])
    nar = tiny_checkpoint(tmp_path / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])
    block = tiny_checkpoint(tmp_path / "block.pt", "nonautoregressive", **TINY["nonautoregressive"],
                            block_sizes=[4, 0], block_past_frames=8)
    out = tmp_path / "eval"
    overrides = [f"data_root={varied}", f"out_dir={out}", "threads=1", "metrics.mos=false", "metrics.asr=false",
                 "metrics.mcd=false", "metrics.f0=false",
                 f"systems.ar.checkpoint={ar}", f"systems.nar.checkpoint={nar}", "systems.nar.nar_ks=[0,2]",
                 f"systems.nar_distilled.checkpoint={nar}", "systems.nar_distilled.nar_ks=[0]",
                 f"systems.nar_block.checkpoint={block}", "systems.nar_block.nar_ks=[2]",
                 f"systems.nar_kd.checkpoint={nar}", "systems.nar_kd.nar_ks=[0]"]
    p = subprocess.run([sys.executable, "-m", "recipes.evaluate", "--config-name", "evaluate_multimodality", *overrides],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["summary"]) == {"ground_truth", "copy_source_filter", "ar", "nar_k0", "nar_k2", "nar_distilled_k0",
                                       "nar_block_k2", "nar_kd_k0"}
    gt, k0 = report["summary"]["ground_truth"], report["summary"]["nar_k0"]
    assert gt["gv_ratio_db"]["mean"] == 0.0 and k0["gv_ratio_db"]["mean"] != 0.0  # measured, per system
    assert k0["spectral_flatness"]["n"] == 3  # the held-out text's three renditions
    md = table.to_markdown(table.collect([out / "report.json"]), ["gv_ratio_db", "spectral_flatness"], ci=True)
    assert "| nar_k2 |" in md
    assert tradeoff.main([str(out / "report.json"), "--out", str(tmp_path / "plot"), "--y", "spectral_flatness"]) == 0
    plotted = json.loads((tmp_path / "plot" / "tradeoff.json").read_text())
    by_name = {pt["system"]: pt for pt in plotted["points"]}
    assert by_name["ground_truth"]["mel_ms"] is None and by_name["nar_k2"]["mel_ms"] > 0
    assert (tmp_path / "plot" / "tradeoff.png").stat().st_size > 5000

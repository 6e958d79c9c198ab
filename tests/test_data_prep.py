"""Tests of data_prep: sentence filtering, Festival protocol, corpus build/resume, splits, features,
LJSpeech validation and the corpus readers. The Festival tests run the real `festival` (a few short
sentences, ~1 s each); the feature tests use the committed 20-utterance fixture tests/fixtures/slt20."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from data_prep import corpus, festival_corpus, features, ljspeech, sentences, splits
from data_prep.festival import FestivalError, FestivalProcess, scheme_string
from tts.audio import MelConfig, MelConfigMismatchError, MelSpectrogram, load_wav
from tts.data import features as tfeatures
from tts.data.features import compute_pitch

FIXTURE = Path(__file__).parent / "fixtures" / "slt20"
HAVE_FESTIVAL = shutil.which("festival") is not None and shutil.which("sox") is not None
needs_festival = pytest.mark.skipif(not HAVE_FESTIVAL, reason="`festival`/`sox` not on PATH (apt-get install festival festvox-us-slt-hts festlex-cmu sox)")


# --- sentences -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, reason",
    [
        ("A dead man cannot bite.", None),
        ('"Is that guy still here?"', None),
        ("It costs five dollars (really), Mr. Smith.", None),
        ("Caf\u00e9 society is over.", "non-ascii"),
        ("Use a/b or c_d here.", "characters"),
        ("Pipe | breaks metadata.", "characters"),
        ("Too short.", "length"),
        (" ".join(["word"] * 26) + ".", "length"),
        ("Call 555 1234 5678 9999 now.", "letters"),
        ("WHO sees a BEACH BUNNY sobbing?", "shouting"),
        ("and then it went on", "fragment"),
        ('He said "Go away now.', "unbalanced"),
        ("Q: Why did it work?", "speaker-label"),
        ("What the fuck is this?", "blocklist"),
        ("Wait for it... here it is.", "fragment"),
    ],
)
def test_filter_reason(text: str, reason: str | None) -> None:
    assert sentences.filter_reason(text) == reason


def test_split_sentences_abbreviations_and_initials() -> None:
    text = 'Mr. Smith met Dr. J. R. R. Tolkien. "Hello," he said. It was 5 p.m. Really? Yes!'
    assert sentences.split_sentences(text) == [
        "Mr. Smith met Dr. J. R. R. Tolkien.", '"Hello," he said.', "It was 5 p.m.", "Really?", "Yes!"]


def test_entry_text_drops_attribution() -> None:
    entry = "The trouble with life is\nthat it goes on.\n\t\t-- Some Author,\n\t\t   \"A Book\""
    assert sentences.entry_text(entry) == "The trouble with life is that it goes on."


def test_select_sentences_dedupes_and_orders_deterministically() -> None:
    pool = ["A dead man cannot bite.", "a DEAD man cannot bite.", "Harp not on that string.",
            "Never kick a man, unless he's down.", "bad / sentence here.", "Polymer physicists are into chains."]
    first = sentences.select_sentences(pool)
    shuffled = pool[:]
    random.Random(3).shuffle(shuffled)
    assert sentences.select_sentences(shuffled)[1:] == first[1:]  # which duplicate wins may differ
    assert len(first) == 4 and sum(s.lower() == "a dead man cannot bite." for s in first) == 1
    # hash order: independent of the rest of the pool
    assert sentences.select_sentences(pool[2:4]) == [s for s in first if s in pool[2:4]]


@pytest.mark.skipif(not sentences.FORTUNES_DIR.is_dir(), reason="Debian fortunes not installed")
def test_fortune_pool_is_large_and_clean() -> None:
    pool = sentences.fortune_sentences()
    assert len(pool) > 12000
    assert all(sentences.filter_reason(s) is None for s in pool[:2000])
    assert len({s.lower() for s in pool}) == len(pool)


def test_short_pool_keeps_the_gate_texts_out_and_the_interjections_in(tmp_path: Path) -> None:
    fortunes = tmp_path / "fortunes"
    fortunes.mkdir()
    # a tiny fortunes folder: a long sentence (main pool only), short ones, and the gate's "Oh." said otherwise
    (fortunes / "f").write_text("Harp not on that string.\n%\nOh! Never.\n%\nGood luck. Uh?\n", encoding="utf-8")
    pool = sentences.short_sentences(held_out=("Oh.", "Uh."), fortunes_dir=fortunes)
    assert {"Never.", "Good luck."} <= set(pool) and "Harp not on that string." not in pool
    assert "Oh!" not in pool and "Uh?" not in pool  # the gate's words, whatever the punctuation
    assert set(sentences.INTERJECTIONS) <= set(pool)  # each passes the short filter
    assert all(sentences.filter_reason(s, sentences.SHORT_CONFIG) is None for s in pool)
    assert pool == sentences.short_sentences(held_out=("Oh.", "Uh."), fortunes_dir=fortunes)
    # the interjections teach a phrase-final stressed schwa without the gate's own "Uh."
    assert "Huh?" in pool and all(len(s.split()) <= 2 for s in pool)


def test_short_pool_is_refused_beside_a_sentence_file_or_variation(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("Harp not on that string.\n")
    with pytest.raises(SystemExit):
        festival_corpus.main(["--n", "1", "--out", str(tmp_path / "o"), "--sentences", str(tmp_path / "s.txt"),
                              "--short"])
    with pytest.raises(ValueError, match="deterministic corpus"):
        festival_corpus.build_corpus(tmp_path / "o", ["Harp not on that string."], n=1, jobs=1, source={},
                                     variation=festival_corpus.Variation(2), short_texts=["Yes."])


# --- Festival protocol -----------------------------------------------------------------------------
def test_scheme_string_escapes() -> None:
    assert scheme_string('say "hi" (now)') == r'"say \"hi\" (now)"'
    assert scheme_string("back\\slash") == r'"back\\slash"'
    assert scheme_string('end \\"') == r'"end \\\""'
    assert scheme_string("two\nlines\tand  spaces") == '"two lines and spaces"'


def test_missing_festival_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="festival.*apt-get install"):
        FestivalProcess()
    (tmp_path / "s.txt").write_text("Harp not on that string.\n")
    assert festival_corpus.main(["--n", "1", "--out", str(tmp_path / "o"), "--sentences", str(tmp_path / "s.txt")]) == 2


@needs_festival
def test_festival_tricky_text_and_error_recovery(tmp_path: Path) -> None:
    with FestivalProcess() as fest:
        r = fest.synth("t1", 'He said "stop" (twice) \\ then left; it cost $3.50.', tmp_path / "t1.wav")
        assert r.words[:5] == ["He", "said", "stop", "twice", "\\"]
        assert r.words[-3:] == ["three", "dollars", "fifty"]
        assert r.normalised_text().startswith('He said "stop" (twice)')
        assert (tmp_path / "t1.wav").is_file() and r.segments[0].phone == "pau"
        # A Scheme error (unwritable wav path) fails this sentence only; the process stays in step.
        with pytest.raises(FestivalError):
            fest.synth("t2", "Hello there.", tmp_path / "no" / "such" / "dir.wav")
        r3 = fest.synth("t3", "Hello there.", tmp_path / "t3.wav")
        assert r3.words == ["Hello", "there"]


# --- corpus build ----------------------------------------------------------------------------------
TEXTS = ['"Quotes", she said (twice).', "It costs $3.50 at 10:30.", "Harp not on that string."]


def _build(out: Path, jobs: int = 2) -> festival_corpus.BuildSummary:
    return festival_corpus.build_corpus(out, TEXTS, n=3, jobs=jobs, source={"kind": "test"},
                                        split_config=splits.SplitConfig(min_per_split=1))


@needs_festival
def test_build_resume_and_rebuild_one(tmp_path: Path) -> None:
    out = tmp_path / "c"
    s1 = _build(out)
    assert (s1.n_synthesised, s1.n_failed, s1.n_utterances) == (3, 0, 3)
    ids = ["slt_00001", "slt_00002", "slt_00003"]
    utts = corpus.read_metadata(out)
    assert [u.id for u in utts] == ids and [u.text for u in utts] == TEXTS
    assert utts[1].normalised_text == "It costs three dollars fifty at ten thirty."
    assert (out / "metadata.csv").read_text().splitlines()[0] == 'slt_00001|"Quotes", she said (twice).|"Quotes", she said (twice).'
    for utt_id in ids:
        info = sf.info(str(corpus.wav_path(out, utt_id)))
        assert (info.samplerate, info.channels, info.subtype) == (22050, 1, "PCM_16")
        seg = corpus.read_segments(out, utt_id)
        assert seg.n_samples == info.frames
        # Festival's last segment end = wav length (up to resampling rounding: <= 1 output sample)
        assert abs(seg.segments[-1].end * 22050 - info.frames) <= 1.0
        assert [p.word for p in seg.segments if p.word] and seg.words
    assert sorted(sum((corpus.read_split(out, n) for n in splits.SPLIT_NAMES), [])) == ids
    info = corpus.read_corpus_info(out)
    assert info["n_utterances"] == 3 and info["sample_rate"] == 22050 and info["voice"] == "cmu_us_slt_arctic_hts"
    assert not list(out.rglob("*.tmp")) and not (out / ".festival32k").exists()

    mtimes = {i: corpus.wav_path(out, i).stat().st_mtime_ns for i in ids}
    original = corpus.wav_path(out, ids[1]).read_bytes()
    s2 = _build(out)
    assert (s2.n_synthesised, s2.n_already_done, s2.n_utterances) == (0, 3, 3)

    corpus.wav_path(out, ids[1]).unlink()
    s3 = _build(out, jobs=1)
    assert (s3.n_synthesised, s3.n_already_done) == (1, 2)
    assert corpus.wav_path(out, ids[1]).read_bytes() == original  # Festival is deterministic
    for i in (ids[0], ids[2]):
        assert corpus.wav_path(out, i).stat().st_mtime_ns == mtimes[i]


@needs_festival
def test_build_with_a_short_pool_keeps_the_main_ids(tmp_path: Path) -> None:
    out = tmp_path / "c"
    s = festival_corpus.build_corpus(out, TEXTS[2:], n=1, jobs=1, source={"kind": "test"},
                                     split_config=splits.SplitConfig(min_per_split=1),
                                     short_texts=["Huh?", "Yes."], short_source={"kind": "test"})
    assert (s.n_synthesised, s.n_utterances, s.n_requested) == (3, 3, 3)
    assert [u.id for u in corpus.read_metadata(out)] == ["slt_00001", "slts_00001", "slts_00002"]
    assert [u.text for u in corpus.read_metadata(out)][1:] == ["Huh?", "Yes."]
    info = corpus.read_corpus_info(out)
    assert info["short_pool"]["n_requested"] == 2 and info["short_pool"]["id_format"].startswith("slts_")
    assert sorted(sum((corpus.read_split(out, n) for n in splits.SPLIT_NAMES), [])) == [
        "slt_00001", "slts_00001", "slts_00002"]
    # the same build without the short pool: the main utterance is untouched (not re-synthesised)
    s2 = festival_corpus.build_corpus(out, TEXTS[2:], n=1, jobs=1, source={"kind": "test"},
                                      split_config=splits.SplitConfig(min_per_split=1))
    assert (s2.n_synthesised, s2.n_already_done) == (0, 1)


@needs_festival
def test_build_failure_is_logged_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = festival_corpus.synth_utterance

    def flaky(fest: FestivalProcess, out_dir: Path, item: festival_corpus.Planned) -> tuple[int, bool]:
        if item.id == "slt_00002":
            raise FestivalError("injected failure")
        return real(fest, out_dir, item)

    monkeypatch.setattr(festival_corpus, "synth_utterance", flaky)
    out = tmp_path / "c"
    s = _build(out, jobs=1)
    assert (s.n_synthesised, s.n_failed, s.n_utterances) == (2, 1, 2)
    assert [u.id for u in corpus.read_metadata(out)] == ["slt_00001", "slt_00003"]
    assert json.loads((out / "failures.jsonl").read_text().splitlines()[0])["id"] == "slt_00002"
    s2 = _build(out, jobs=1)  # an earlier failure is not retried by default
    assert (s2.n_synthesised, s2.n_failed, s2.n_failed_total) == (0, 0, 1)


# --- splits ------------------------------------------------------------------------------------------
def test_splits_deterministic_disjoint_and_stable() -> None:
    ids = [f"slt_{i:05d}" for i in range(1, 7001)]
    a = splits.assign_splits(ids)
    shuffled = ids[:]
    random.Random(0).shuffle(shuffled)
    assert splits.assign_splits(shuffled) == a
    sets = [set(a[n]) for n in splits.SPLIT_NAMES]
    assert sum(map(len, sets)) == len(ids) and set.union(*sets) == set(ids)
    assert len(a["test"]) >= 100 and 40 <= len(a["val"]) <= 110
    # stable as N grows: the first 6000 IDs keep their splits
    b = splits.assign_splits(ids[:6000])
    first = set(ids[:6000])
    for name in splits.SPLIT_NAMES:
        assert b[name] == [i for i in a[name] if i in first]
    assert len(b["test"]) >= 100


def test_splits_tiny_corpus_rule() -> None:
    s = splits.assign_splits([f"x{i}" for i in range(20)])
    assert all(len(s[n]) >= 2 for n in splits.SPLIT_NAMES) and sum(len(v) for v in s.values()) == 20
    s3 = splits.assign_splits(["a", "b", "c"])
    assert sorted(len(v) for v in s3.values()) == [1, 1, 1]


# --- fixture + readers -------------------------------------------------------------------------------
def test_fixture_corpus_is_consistent() -> None:
    utts = corpus.read_metadata(FIXTURE)
    assert len(utts) == 20
    split_ids = {n: corpus.read_split(FIXTURE, n) for n in splits.SPLIT_NAMES}
    assert all(len(v) >= 2 for v in split_ids.values())
    assert sorted(sum(split_ids.values(), [])) == sorted(u.id for u in utts)
    for u in utts:
        seg = corpus.read_segments(FIXTURE, u.id)
        frames = sf.info(str(corpus.wav_path(FIXTURE, u.id))).frames
        assert seg.text == u.text and seg.normalised_text == u.normalised_text and seg.n_samples == frames
        assert abs(seg.segments[-1].end * seg.sample_rate - frames) <= 1.0
    assert sum(p.stat().st_size for p in FIXTURE.rglob("*") if p.is_file()) < 3_000_000


def test_readers_raise_corpus_error_naming_path(tmp_path: Path) -> None:
    with pytest.raises(corpus.CorpusError, match=str(tmp_path / "metadata.csv")):
        corpus.read_metadata(tmp_path)
    (tmp_path / "metadata.csv").write_text("a|b\n")
    with pytest.raises(corpus.CorpusError, match="expected 3"):
        corpus.read_metadata(tmp_path)
    with pytest.raises(corpus.CorpusError, match="split file not found"):
        corpus.read_split(tmp_path, "test")
    with pytest.raises(corpus.CorpusError, match="unknown split"):
        corpus.read_split(tmp_path, "dev")
    (tmp_path / "segments").mkdir()
    (tmp_path / "segments" / "a.json").write_text("{not json")
    with pytest.raises(corpus.CorpusError, match="corrupt JSON file .*a.json"):
        corpus.read_segments(tmp_path, "a")
    (tmp_path / "segments" / "b.json").write_text('{"id": "b"}')
    with pytest.raises(corpus.CorpusError, match="malformed segments file .*b.json"):
        corpus.read_segments(tmp_path, "b")
    with pytest.raises(corpus.CorpusError, match="features file not found"):
        corpus.load_features(tmp_path, "a")


# --- features -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fixture_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("slt20") / "slt20"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_features_shapes_cache_and_invalidation(fixture_copy: Path) -> None:
    ids = [u.id for u in corpus.read_metadata(fixture_copy)][:4]
    default = MelConfig.default()
    s1 = features.extract_features(fixture_copy, default, jobs=1, ids=ids)
    assert (s1.n_computed, s1.n_cached, s1.failures) == (4, 0, {})
    mel_fn = MelSpectrogram(default)
    for utt_id in ids:
        n = sf.info(str(corpus.wav_path(fixture_copy, utt_id))).frames
        f = corpus.load_features(fixture_copy, utt_id, default)
        t = 1 + n // 256
        assert f.mel.shape == (80, t) and f.pitch.shape == (t,) and f.energy.shape == (t,)
        raw = torch.load(corpus.features_path(fixture_copy, utt_id), weights_only=True)
        assert raw["mel"].dtype == torch.float16 and raw["pitch"].dtype == torch.float32
        wave = load_wav(corpus.wav_path(fixture_copy, utt_id), 22050)
        torch.testing.assert_close(f.mel, mel_fn(wave), atol=1e-2, rtol=1e-3)  # fp16 storage
        energy = torch.linalg.vector_norm(mel_fn.magnitude(wave), dim=0)
        torch.testing.assert_close(f.energy, energy)
        voiced = f.pitch[f.pitch > 0]
        assert voiced.numel() > 0.3 * t and 120 < float(voiced.median()) < 260  # SLT: female voice
    stats = json.loads((fixture_copy / "features" / "stats.json").read_text())
    assert stats["n_utterances"] == 4 and len(stats["mel"]["mean"]) == 80
    assert stats["mel_config"] == default.to_dict() and stats["pitch"]["std_log_hz"] > 0

    s2 = features.extract_features(fixture_copy, default, jobs=2, ids=ids)  # parallel path, all cached
    assert (s2.n_computed, s2.n_cached) == (0, 4)
    assert s2.stats["total_frames"] == stats["total_frames"]

    other = dataclasses.replace(default, f_max=7600.0)
    s3 = features.extract_features(fixture_copy, other, jobs=1, ids=ids)
    assert (s3.n_computed, s3.n_cached) == (4, 0)
    with pytest.raises(MelConfigMismatchError):
        corpus.load_features(fixture_copy, ids[0], default)

    corpus.features_path(fixture_copy, ids[0]).write_bytes(b"truncated")
    with pytest.raises(corpus.CorpusError, match="corrupt features file"):
        corpus.load_features(fixture_copy, ids[0])
    s4 = features.extract_features(fixture_copy, other, jobs=1, ids=ids)
    assert (s4.n_computed, s4.n_cached) == (1, 3)


def test_pitch_contour_is_frame_aligned() -> None:
    # 200 Hz tone in the second half only: voiced frames must start where the tone starts (+-2 frames).
    sr, cfg = 22050, MelConfig.default()
    n = sr
    wave = np.zeros(n, dtype=np.float64)
    wave[n // 2:] = 0.5 * np.sin(2 * np.pi * 200 * np.arange(n - n // 2) / sr)
    f0 = compute_pitch(wave, cfg, cfg.n_frames(n))
    assert f0.shape == (1 + n // 256,)
    onset = int(np.argmax(f0 > 0))
    assert abs(onset - (n // 2) / 256) <= 2
    assert abs(np.median(f0[f0 > 0]) - 200) < 5


def _pulse_train(f0: float, sr: int, n: int) -> np.ndarray:
    """A male-like voiced sound: a pulse train at f0 Hz through a decaying resonance (rich harmonics)."""
    x = np.zeros(n)
    x[:: int(sr / f0)] = 1.0
    return np.convolve(x, np.exp(-np.arange(200) / 30.0) * np.sin(np.arange(200) * 2 * np.pi * 700 / sr))[:n] * 0.3


@pytest.mark.parametrize("method", ["dio", "harvest"])
def test_pitch_trackers_find_a_low_voice(method: str) -> None:
    sr, cfg = 22050, MelConfig.default()
    wave = _pulse_train(98.0, sr, sr)
    config = tfeatures.PITCH_CONFIG if method == "dio" else tfeatures.HARVEST_PITCH_CONFIG
    f0 = compute_pitch(wave, cfg, cfg.n_frames(sr), config)
    assert (f0 > 0).mean() > 0.8 and abs(np.median(f0[f0 > 0]) - 98.0) < 5


def test_corpus_pitch_config_is_the_corpus_s(fixture_copy: Path) -> None:
    """corpus.json names the tracker; features, their cache check and stats.json follow it; a bad one is refused."""
    assert tfeatures.corpus_pitch_config(fixture_copy) == tfeatures.PITCH_CONFIG  # no corpus.json key: dio
    info_path = fixture_copy / "corpus.json"
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    ids = [u.id for u in corpus.read_metadata(fixture_copy)][:2]
    dio = features.extract_features(fixture_copy, jobs=1, ids=ids)
    info_path.write_text(json.dumps({**info, "pitch_config": tfeatures.HARVEST_PITCH_CONFIG}))
    harvest = features.extract_features(fixture_copy, jobs=1, ids=ids)
    assert (harvest.n_computed, harvest.n_cached) == (2, 0)  # the dio cache is not the corpus's pitch any more
    assert harvest.stats["pitch_config"] == tfeatures.HARVEST_PITCH_CONFIG != dio.stats["pitch_config"]
    d = torch.load(corpus.features_path(fixture_copy, ids[0]), weights_only=True)
    assert d["pitch_config"] == tfeatures.HARVEST_PITCH_CONFIG
    assert features.extract_features(fixture_copy, jobs=1, ids=ids).n_cached == 2
    info_path.write_text(json.dumps({**info, "pitch_config": {"method": "crepe", "f0_floor": 50, "f0_ceil": 400}}))
    with pytest.raises(ValueError, match="pitch_config must be"):
        tfeatures.corpus_pitch_config(fixture_copy)


# --- LJSpeech -----------------------------------------------------------------------------------------
def _fake_lj(root: Path, n: int = 6, sr: int = 22050) -> Path:
    (root / "wavs").mkdir(parents=True)
    lines = []
    for i in range(n):
        utt_id = f"LJ001-{i + 1:04d}"
        sf.write(str(root / "wavs" / f"{utt_id}.wav"), 0.1 * np.sin(np.arange(sr // 4) / 10), sr, subtype="PCM_16")
        lines.append(f'{utt_id}|He said "No, {i} times."|He said "No, {i} times."')
    (root / "metadata.csv").write_text("\n".join(lines) + "\n")
    return root


def test_ljspeech_prepare(tmp_path: Path) -> None:
    src = _fake_lj(tmp_path / "LJSpeech-1.1")
    info = ljspeech.prepare_ljspeech(src, tmp_path / "out")
    assert info["n_utterances"] == 6 and (tmp_path / "out" / "wavs").is_symlink()
    utts = corpus.read_metadata(tmp_path / "out")
    assert utts[0].text == 'He said "No, 0 times."'  # quoting off keeps the quotes
    assert sorted(sum((corpus.read_split(tmp_path / "out", n) for n in splits.SPLIT_NAMES), [])) == [u.id for u in utts]
    assert corpus.wav_path(tmp_path / "out", utts[0].id).is_file()
    ljspeech.prepare_ljspeech(src, tmp_path / "out")  # re-running is fine


def test_ljspeech_errors(tmp_path: Path) -> None:
    with pytest.raises(corpus.CorpusError, match="LJSpeech folder not found"):
        ljspeech.prepare_ljspeech(tmp_path / "nope", tmp_path / "out")
    src = _fake_lj(tmp_path / "lj")
    meta = (src / "metadata.csv").read_text()
    (src / "metadata.csv").unlink()
    with pytest.raises(corpus.CorpusError, match="metadata file not found"):
        ljspeech.prepare_ljspeech(src, tmp_path / "out")
    (src / "metadata.csv").write_text(meta + "LJ001-0099|only two fields\n")
    with pytest.raises(corpus.CorpusError, match=r"metadata.csv:7: expected 3"):
        ljspeech.prepare_ljspeech(src, tmp_path / "out")
    (src / "metadata.csv").write_text(meta + "LJ001-0099|a|a\n")
    with pytest.raises(corpus.CorpusError, match="missing .*LJ001-0099.wav"):
        ljspeech.prepare_ljspeech(src, tmp_path / "out")
    (src / "metadata.csv").write_text(meta)
    sf.write(str(src / "wavs" / "LJ001-0002.wav"), np.zeros(1600), 16000, subtype="PCM_16")
    with pytest.raises(corpus.CorpusError, match="16000 Hz"):
        ljspeech.prepare_ljspeech(src, tmp_path / "out")
    assert ljspeech.main(["--src", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2

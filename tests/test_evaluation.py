"""tts.evaluation: MCD/F0 with DTW, CER/WER, word errors, lengths, reports, DistillMOS/DNSMOS."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
import torch

from tts.evaluation.asr import normalize_text, repeated_missing_words, score
from tts.evaluation.lengths import ar_failure_rates, duration_error, length_error
from tts.evaluation.mcd import mcd, world_features
from tts.evaluation.pitch import evaluate_pair, log_f0_rmse_cents, vuv_error_rate
from tts.evaluation.report import mean_ci, summarise, write_report


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _wav(fixture_corpus, utt):
    x, sr = sf.read(str(fixture_corpus / "wavs" / f"{utt}.wav"), dtype="float32")
    return x, sr


# --- MCD / F0 -------------------------------------------------------------------------------------


def test_identical_signals_give_zero(fixture_corpus):
    x, sr = _wav(fixture_corpus, "slt_00001")
    m = evaluate_pair(x, x.copy(), sr)
    assert m.mcd_db == 0.0
    assert m.log_f0_rmse_cents == 0.0
    assert m.vuv_error == 0.0
    assert m.n_frames_ref == m.n_frames_syn == m.path_length
    assert m.n_voiced_both > 0.5 * m.n_frames_ref  # the recording is mostly voiced
    # 5 ms frames
    assert abs(m.n_frames_ref - len(x) / sr / 0.005) <= 2


def test_dtw_makes_shifted_and_stretched_copies_close_and_other_utterance_far(fixture_corpus):
    import librosa

    x, sr = _wav(fixture_corpus, "slt_00001")
    other, _ = _wav(fixture_corpus, "slt_00002")
    shifted = np.concatenate([np.zeros(int(0.1 * sr), np.float32), x])
    stretched = librosa.effects.time_stretch(x, rate=1 / 1.05)  # 5 % slower, phase vocoder

    ref = world_features(x, sr)
    from tts.evaluation.mcd import mcd_from_features

    f_shift, f_stretch, f_other = (world_features(w, sr) for w in (shifted, stretched, other))
    m_shift = mcd_from_features(ref, f_shift)
    m_shift_plain = mcd_from_features(ref, f_shift, use_dtw=False)
    m_stretch = mcd_from_features(ref, f_stretch)
    m_other = mcd_from_features(ref, f_other)
    # measured: shift 0.03 dB (13.4 without DTW), stretch 4.7, other utterance 8.7
    assert m_shift.mcd_db < 0.5
    assert m_shift_plain.mcd_db > 8.0  # without DTW the 100 ms shift is a disaster
    assert m_shift.n_frames_syn - m_shift.n_frames_ref == 20  # 100 ms at 5 ms
    assert m_stretch.mcd_db < 6.0
    assert m_other.mcd_db > 7.0
    assert m_other.mcd_db > 1.5 * m_stretch.mcd_db
    # path is monotone and covers both ends
    p = m_stretch.path
    assert tuple(p[0]) == (0, 0) and tuple(p[-1]) == (ref.n_frames - 1, f_stretch.n_frames - 1)
    assert np.all(np.diff(p, axis=0) >= 0)


def test_mcd_convenience_and_bad_input(fixture_corpus):
    x, sr = _wav(fixture_corpus, "slt_00003")
    r = mcd(torch.from_numpy(x), x, sr, f0_method="harvest")
    assert r.mcd_db == 0.0 and r.path_length == r.n_frames_ref
    with pytest.raises(ValueError):
        mcd(np.zeros(0), x, sr)
    with pytest.raises(ValueError):
        mcd(x, x, sr, f0_method="yin")


def test_f0_rmse_and_vuv_on_known_contours():
    ref = np.array([0, 100, 100, 200, 200, 0, 0, 0], dtype=float)
    syn = np.array([0, 100, 200, 200, 0, 0, 150, 150], dtype=float)
    # voiced in both: frames 1, 2, 3 -> cents errors 0, 1200, 0
    assert log_f0_rmse_cents(ref, syn) == pytest.approx(1200 / math.sqrt(3))
    # voicing differs at frames 4, 6, 7 -> 3 / 8
    assert vuv_error_rate(ref, syn) == pytest.approx(3 / 8)
    # a semitone everywhere -> 100 cents
    assert log_f0_rmse_cents([220.0] * 5, [220.0 * 2 ** (1 / 12)] * 5) == pytest.approx(100.0)
    # through a path: the syn frame 0 is paired with every ref frame
    path = np.array([[0, 0], [1, 0], [2, 0]])
    assert vuv_error_rate([100, 0, 100], [120], path) == pytest.approx(1 / 3)
    assert math.isnan(log_f0_rmse_cents([0, 0], [100, 100]))
    with pytest.raises(ValueError):
        vuv_error_rate([1, 2], [1, 2, 3])


def test_pitch_shift_is_measured_in_cents(fixture_corpus):
    import pyworld as pw

    x, sr = _wav(fixture_corpus, "slt_00002")
    x64 = x.astype(np.float64)
    f0, t = pw.harvest(x64, sr, frame_period=5.0)
    sp = pw.cheaptrick(x64, f0, t, sr)
    ap = pw.d4c(x64, f0, t, sr)
    shifted = pw.synthesize(f0 * 2 ** (2 / 12), sp, ap, sr, frame_period=5.0)  # +2 semitones
    same = pw.synthesize(f0, sp, ap, sr, frame_period=5.0)
    up = evaluate_pair(same, shifted, sr)
    base = evaluate_pair(same, same, sr)
    assert base.log_f0_rmse_cents == 0.0
    assert 175 < up.log_f0_rmse_cents < 240  # measured 208 (dio)
    assert up.vuv_error < 0.1


# --- text scores -----------------------------------------------------------------------------------


def test_cer_wer_known_strings():
    s = score(["hello world"], ["hello word"])
    assert s.wer == pytest.approx(0.5)
    assert s.cer == pytest.approx(1 / 11)
    assert s.n == 1
    s2 = score(["the cat sat", "hello world"], ["the cat sat", "hello world"])
    assert s2.cer == 0.0 and s2.wer == 0.0 and s2.n == 2
    # corpus level: 1 word error out of 5 reference words
    s3 = score(["the cat sat", "hello world"], ["the cat sat", "hello"])
    assert s3.wer == pytest.approx(1 / 5)
    assert score(["hello world"], [""]).wer == 1.0
    with pytest.raises(ValueError):
        score(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        score(["  "], ["x"])


def test_normalisation_makes_spoken_and_written_forms_agree():
    a, b = "Dr. Smith paid $5", "doctor smith paid five dollars"
    assert normalize_text(a) == normalize_text(b)
    assert score([a], [b]).wer == 0.0
    import jiwer

    assert jiwer.wer(a, b) > 0.5  # without normalisation they are far apart
    assert score(["Radioactive cats have 18 half-lives."], ["radioactive cats have eighteen half lives"]).wer == 0.0


def test_repeated_missing_words():
    e = repeated_missing_words("the cat sat on the mat", "the the cat on the mat mat")
    assert e.repeated == ["the", "mat"]
    assert e.missing == ["sat"]
    assert e.inserted == []
    e = repeated_missing_words("the cat sat", "the cat sat the cat sat")
    assert e.repeated == ["the", "cat", "sat"] and e.missing == [] and e.inserted == []
    e = repeated_missing_words("red green blue black", "red banana green black")
    assert e.inserted == ["banana"] and e.missing == ["blue"] and e.repeated == []
    # number words are normalised to digits on both sides (whisper normaliser)
    assert repeated_missing_words("one two three", "123") == repeated_missing_words("a", "a")
    e = repeated_missing_words("a big dog", "a big cat")
    assert e.substituted == [("dog", "cat")] and not (e.repeated or e.missing or e.inserted)
    e = repeated_missing_words("Hello, world!", "")
    assert e.missing == ["hello", "world"]


# --- lengths ---------------------------------------------------------------------------------------


def test_length_and_duration_errors():
    e = length_error(100, 110, 256 / 22050)
    assert e.frames == 10 and e.abs_frames == 10
    assert e.seconds == pytest.approx(10 * 256 / 22050)
    assert e.ratio == pytest.approx(1.1) and e.log_ratio == pytest.approx(math.log(1.1))
    e = length_error(100, 90, 0.01)
    assert e.frames == -10 and e.abs_seconds == pytest.approx(0.1)
    with pytest.raises(ValueError):
        length_error(0, 5, 0.01)
    d = duration_error([2, 3, 4], [3, 3, 2], 0.01)
    assert d.mae_frames == pytest.approx(1.0)
    assert d.rmse_frames == pytest.approx(math.sqrt(5 / 3))
    assert d.mae_seconds == pytest.approx(0.01) and d.n_tokens == 3
    with pytest.raises(ValueError):
        duration_error([1, 2], [1], 0.01)


def test_ar_failure_rates():
    def r(ok=False, no_stop=False, skip=False, repeat=False, low_coverage=False):
        return SimpleNamespace(ok=ok, no_stop=no_stop, skip=skip, repeat=repeat, low_coverage=low_coverage)

    rates = ar_failure_rates([r(ok=True), r(ok=True), r(no_stop=True), r(skip=True, repeat=True)])
    assert rates.n == 4
    assert rates.ok_rate == 0.5 and rates.failure_rate == 0.5
    assert rates.no_stop == 0.25 and rates.skip == 0.25 and rates.repeat == 0.25 and rates.low_coverage == 0.0
    assert rates.counts["ok"] == 2
    with pytest.raises(ValueError):
        ar_failure_rates([])
    with pytest.raises(AttributeError):
        ar_failure_rates([SimpleNamespace(ok=True)])


# --- reports ---------------------------------------------------------------------------------------


def test_mean_ci():
    m, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0], method="t")
    assert m == 3.0
    assert hi - m == pytest.approx(2.776445 * math.sqrt(2.5) / math.sqrt(5), rel=1e-5)
    m, lo, hi = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0], method="bootstrap")
    assert 1.0 < lo < 3.0 < hi < 5.0
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    m, lo, hi = mean_ci([7.0])
    assert m == 7.0 and math.isnan(lo)


def test_write_report(tmp_path):
    per_system = {
        "ground_truth": [{"id": "a", "mcd_db": 0.0, "wer": 0.0, "ok": True},
                         {"id": "b", "mcd_db": 0.0, "wer": 0.1, "ok": True}],
        "ar": [{"id": "a", "mcd_db": 6.0, "wer": 0.2, "ok": True},
               {"id": "b", "mcd_db": 8.0, "wer": float("nan"), "ok": False},
               {"id": "c", "mcd_db": 7.0, "wer": 0.4, "ok": False}],
    }
    md, js = write_report(per_system, tmp_path / "out", title="Tiny", method="t")
    data = json.loads(js.read_text())
    s = data["summary"]["ar"]
    assert s["mcd_db"]["mean"] == pytest.approx(7.0) and s["mcd_db"]["n"] == 3
    assert s["wer"]["mean"] == pytest.approx(0.3) and s["wer"]["n_missing"] == 1
    assert s["ok"]["mean"] == pytest.approx(1 / 3)
    assert "id" not in s
    assert data["utterances"]["ar"][1]["wer"] is None  # NaN -> null (strict JSON)
    text = md.read_text()
    assert text.startswith("# Tiny")
    assert "| ar | 3 | 7.000 [" in text
    assert "| ground_truth | 2 | 0.000 [0.000, 0.000]" in text
    assert summarise(per_system["ar"], metrics=["mcd_db"])["mcd_db"].mean == pytest.approx(7.0)


# --- naturalness -----------------------------------------------------------------------------------


def test_distillmos_ranks_clean_above_noisy(fixture_corpus):
    from tts.evaluation.naturalness import predict_mos

    x, sr = _wav(fixture_corpus, "slt_00001")
    rng = np.random.default_rng(0)
    noisy = x + 0.1 * rng.standard_normal(len(x)).astype(np.float32)
    clean_mos = predict_mos(x, sr)
    noisy_mos = predict_mos(noisy, sr)
    assert 1.0 <= noisy_mos <= 5.0 and 1.0 <= clean_mos <= 5.0
    assert clean_mos > noisy_mos + 1.0  # measured 3.46 vs 1.81


def test_dnsmos_background_score_drops_with_noise(fixture_corpus):
    from tts.evaluation.naturalness import DNSMOS

    x, sr = _wav(fixture_corpus, "slt_00001")
    rng = np.random.default_rng(0)
    noisy = np.clip(x + 0.1 * rng.standard_normal(len(x)).astype(np.float32), -1, 1)
    judge = DNSMOS()
    clean, bad = judge(x, sr), judge(noisy, sr)
    assert clean.bak > bad.bak + 1.0  # measured 4.14 vs 1.20 (ovrl 3.21 vs 1.21)
    assert clean.ovrl > bad.ovrl

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import TINY, tiny_checkpoint
from tts.data.corpus import PhoneSegment
from tts.durations import durations_from_segments, monotonic_alignment, word_boundary_error, word_spans_from_segments, word_spans_from_tokens
from tts.paths import REPO_ROOT


def diagonal(durations):
    T, L = sum(durations), len(durations)
    att = np.full((T, L), 1e-3)
    t = 0
    for j, d in enumerate(durations):
        att[t : t + d, j] = 1.0
        t += d
    return att / att.sum(1, keepdims=True)


@pytest.mark.parametrize("durs", [[3, 1, 4, 1, 5], [1] * 7, [10], [2, 6, 2, 9, 1, 1, 3]])
def test_recovers_durations_of_a_hard_alignment(durs):
    d = monotonic_alignment(diagonal(durs))
    assert d.tolist() == durs and d.sum() == sum(durs)


def test_sum_is_mel_length_on_noisy_attention():
    rng = np.random.default_rng(0)
    att = diagonal([4, 2, 7, 3, 5, 1, 6]) + rng.random((28, 7)) * 0.3
    d = monotonic_alignment(att / att.sum(1, keepdims=True))
    assert d.sum() == 28 and len(d) == 7 and (d >= 0).all()


def test_a_token_never_attended_can_get_zero_frames_only_with_skips():
    att = diagonal([3, 1, 3])
    att[:, 1] = 1e-6  # token 1 (a word boundary, say) ignored by the teacher
    assert monotonic_alignment(att, max_skip=1)[1] == 0
    d0 = monotonic_alignment(att, max_skip=0)
    assert (d0 >= 1).all() and d0.sum() == 7


def test_word_boundaries():
    syms = ["HH", "AH0", " ", "W", "ER1", "L", "D", "."]
    d = np.array([2, 3, 1, 2, 2, 2, 2, 4])
    spans = word_spans_from_tokens(syms, d, lambda s: s not in (" ", "."))
    assert spans == [(0, 5), (6, 14)]
    segs = [PhoneSegment("pau", 0.1, None), PhoneSegment("hh", 0.2, "hello"), PhoneSegment("ow", 0.3, "hello"),
            PhoneSegment("w", 0.4, "world"), PhoneSegment("d", 0.5, "world"), PhoneSegment("pau", 0.7, None)]
    assert word_spans_from_segments(segs) == [(0.1, 0.3), (0.3, 0.5)]
    exact = word_boundary_error([(0, 5), (6, 14)], [(0.0, 4.5 * 0.01), (5.5 * 0.01, 13.5 * 0.01)], 0.01)
    assert exact.comparable and exact.mean_abs_error_ms == pytest.approx(0.0, abs=1e-9)
    assert not word_boundary_error([(0, 5)], [(0, 1), (1, 2)], 0.01).comparable


def test_recipe_end_to_end_and_external_import(featurised_corpus: Path, tmp_path: Path):
    ckpt = tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"])
    out = tmp_path / "dur"
    args = [sys.executable, "-m", "recipes.extract_durations", f"checkpoint={ckpt}", f"data_root={featurised_corpus}",
            f"out_dir={out}", "batch_size=4"]
    r = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    files = sorted(out.glob("*.npy"))
    assert len(files) == 20 and report["splits"]["train"]["utterances"] == 16
    assert report["splits"]["train"]["word_boundary_comparable_utterances"] > 0
    assert np.isfinite(report["splits"]["train"]["word_boundary_mean_abs_error_ms"])
    # resumable: nothing left to align on a second run
    mtimes = {f.name: f.stat().st_mtime_ns for f in files}
    r = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and {f.name: f.stat().st_mtime_ns for f in out.glob("*.npy")} == mtimes

    # an external file with the same durations imports to identical files; a wrong sum is refused
    ext = tmp_path / "ext.jsonl"
    ext.write_text("".join(json.dumps({"id": f.stem, "durations": np.load(f).tolist()}) + "\n" for f in files))
    out2 = tmp_path / "dur2"
    r = subprocess.run([*args[:-2], f"out_dir={out2}", "source=external", f"external={ext}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(np.array_equal(np.load(f), np.load(out2 / f.name)) for f in files)
    bad = [json.loads(line) for line in ext.read_text().splitlines()]
    bad[0]["durations"][0] += 1
    ext.write_text("".join(json.dumps(b) + "\n" for b in bad))
    r = subprocess.run([*args[:-2], f"out_dir={tmp_path / 'dur3'}", "source=external",
                        f"external={ext}"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "durations sum to" in r.stderr


# --- durations from Festival's segmentation ------------------------------------------------------
def _segs(*items):
    return [PhoneSegment(phone=p, end=e, word=w) for p, e, w in items]


def _is_phone(s: str) -> bool:
    return s[:1].isalpha()


HOP = 0.01  # seconds per frame in these cases: frame f is centred at f * HOP


def test_segment_durations_pause_goes_to_punctuation_and_sums_to_frames():
    # "hi, you." with a lead pause, a pause at the comma and a trailing pause
    segs = _segs(("pau", 0.10, None), ("hh", 0.15, "hi"), ("ay", 0.30, "hi"), ("pau", 0.50, None),
                 ("y", 0.55, "you"), ("uw", 0.70, "you"), ("pau", 0.80, None))
    symbols = ["HH", "AY1", ",", " ", "Y", "UW1", "."]
    n_frames = 81  # 1 + 0.80 s / HOP
    r = durations_from_segments(symbols, _is_phone, segs, n_frames, HOP)
    assert r.durations.sum() == n_frames and r.phone_match_rate == 1.0
    # HH owns the lead pause [0, 0.15) -> frames 0..14; the comma owns the pause [0.30, 0.50)
    assert r.durations.tolist() == [15, 15, 20, 0, 5, 15, 11]


def test_segment_durations_pause_without_punctuation_goes_to_word_boundary():
    segs = _segs(("b", 0.10, "b"), ("pau", 0.30, None), ("k", 0.40, "k"))
    r = durations_from_segments(["B", " ", "K"], _is_phone, segs, 41, HOP)
    assert r.durations.tolist() == [10, 20, 11]
    # no pause between words: the boundary gets no frames
    r = durations_from_segments(["B", " ", "K"], _is_phone, _segs(("b", 0.10, "b"), ("k", 0.40, "k")), 41, HOP)
    assert r.durations.tolist() == [10, 0, 31]


def test_segment_durations_mismatched_phones_and_min_one_frame():
    # Festival says "l ay v z", we say "L IH1 V T Z": IH1/ay is a substitution (paired), our extra T
    # has no counterpart and splits V's span with it
    segs = _segs(("l", 0.10, "w"), ("ay", 0.30, "w"), ("v", 0.40, "w"), ("z", 0.60, "w"))
    r = durations_from_segments(["L", "IH1", "V", "T", "Z"], _is_phone, segs, 61, HOP)
    assert r.durations.tolist() == [10, 20, 5, 5, 21]
    assert r.phone_match_rate == pytest.approx(3 / 5) and (r.n_ours, r.n_reference) == (5, 4)
    # a Festival phone we do not have ("d") goes to our previous phone
    segs = _segs(("l", 0.10, "w"), ("ay", 0.30, "w"), ("d", 0.35, "w"), ("v", 0.40, "w"))
    assert durations_from_segments(["L", "AY1", "V"], _is_phone, segs, 41, HOP).durations.tolist() == [10, 25, 6]
    # a phone shorter than a frame still gets one, from its longest neighbour; the total is unchanged
    segs = _segs(("b", 0.101, "b"), ("k", 0.109, "b"), ("s", 0.300, "b"))
    assert durations_from_segments(["B", "K", "S"], _is_phone, segs, 31, HOP).durations.tolist() == [11, 1, 19]
    with pytest.raises(ValueError):
        durations_from_segments([" ", "."], _is_phone, segs, 31, HOP)


def test_recipe_festival_source(featurised_corpus: Path, tmp_path: Path):
    out = tmp_path / "fest"
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=festival",
                        f"data_root={featurised_corpus}", f"out_dir={out}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    train = rep["splits"]["train"]
    assert rep["source"] == "festival" and len(list(out.glob("*.npy"))) == 20
    assert train["phones_with_zero_frames"] == 0.0
    assert train["phone_match_rate_mean"] > 0.8
    # boundaries come from Festival itself: only frame rounding and the lead pause separate them
    assert train["word_boundary_mean_abs_error_ms"] < 30.0

    # against another source's durations (a corpus without Festival's segmentation): against themselves the
    # boundaries agree exactly; a source whose every phone moved by frames disagrees by about as much
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=festival",
                        f"data_root={featurised_corpus}", f"out_dir={tmp_path / 'again'}", f"reference={out}"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    again = json.loads((tmp_path / "again" / "report.json").read_text())["splits"]["train"]
    assert again["word_boundary_reference"] == str(out) and again["word_boundary_comparable_utterances"] == 16
    assert again["word_boundary_mean_abs_error_ms"] == 0.0
    shifted = tmp_path / "shifted"  # every boundary after the first token one frame later
    shifted.mkdir()
    for f in out.glob("*.npy"):
        d = np.load(f)
        d[0] += 1
        d[int(np.flatnonzero(d > 1)[-1])] -= 1
        np.save(shifted / f.name, d)
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=festival",
                        f"data_root={featurised_corpus}", f"out_dir={tmp_path / 'again2'}", f"reference={shifted}"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    moved = json.loads((tmp_path / "again2" / "report.json").read_text())["splits"]["train"]
    from hydra.utils import instantiate
    from omegaconf import OmegaConf
    from tts.paths import CONF_DIR
    frame_ms = 1000 * instantiate(OmegaConf.load(CONF_DIR / "audio" / "lj22k.yaml")).frame_seconds
    assert 0.3 * frame_ms < moved["word_boundary_mean_abs_error_ms"] <= frame_ms + 1e-6


def test_piper_segments_read_espeak_symbols_as_arpabet_phones():
    from tts.durations import piper_segments

    # "^ h ˈ e ɪ ." : BOS, HH, a stress mark and the two symbols of one diphthong EY, punctuation, EOS
    phonemes = ["^", "h", "ˈ", "e", "ɪ", " ", "ɑ", "ː", "ɹ", ".", "$"]
    frames = [3, 2, 1, 4, 2, 5, 3, 1, 3, 6, 0]
    seg = piper_segments(phonemes, frames, frame_seconds=0.01)
    assert [s.phone for s in seg] == ["pau", "hh", "ey", "pau", "aa", "r", "pau", "pau"]
    ends = np.round(np.array([s.end for s in seg]) / 0.01).astype(int)
    # the stress mark's frame goes to EY (1 + 4 + 2); "ɑ ː ɹ" = AA R splits its 7 frames 4 + 3
    assert ends.tolist() == [3, 5, 12, 17, 21, 24, 30, 30]
    assert [s.word for s in seg] == [None, "w0", "w0", None, "w1", "w1", None, None]


def test_piper_durations_reach_our_tokens_exactly():
    from tts.durations import piper_segments

    # our tokens K AE1 T S . against Piper's "^ k ˈ æ t s . $": every phone pairs, so each token's
    # frames are Piper's (the BOS pause goes to the first phone, the final pause to the full stop)
    phonemes, frames = ["^", "k", "ˈ", "æ", "t", "s", ".", "$"], [4, 3, 2, 6, 3, 5, 7, 0]
    seg = piper_segments(phonemes, frames, frame_seconds=256 / 22050)
    symbols = ["K", "AE1", "T", "S", "."]
    res = durations_from_segments(symbols, lambda s: s[0].isalpha(), seg, n_frames=sum(frames) + 1,
                                  frame_seconds=256 / 22050)
    assert res.phone_match_rate == 1.0
    assert res.durations.tolist() == [4 + 3, 2 + 6, 3, 5, 7 + 1]


def test_report_flags_a_first_token_that_holds_only_the_leading_pause(featurised_corpus: Path, tmp_path: Path):
    """The AR teacher's durations gave the first token the leading pause alone (all of data/slt's utterances), and
    the NAR trained on them spoke "A." near-silently: the report measures it and warns, Festival's durations pass."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from recipes.extract_durations import evaluate, warnings_for
    from tts.data.corpus import load_features
    from tts.data.dataset import TTSDataset
    from tts.durations import speech_onset
    from tts.paths import CONF_DIR

    out = tmp_path / "fest"
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=festival", "splits=[train]",
                        f"data_root={featurised_corpus}", f"out_dir={out}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    festival = json.loads((out / "report.json").read_text())["splits"]["train"]
    assert festival["first_token_silent_share"] < 0.75 and "leading pause" not in r.stdout + r.stderr
    # the same durations with the first token cut back to the frames before the speech starts (the rest to token 1)
    frontend = instantiate(OmegaConf.load(CONF_DIR / "text" / "arpabet.yaml"))
    mel_config = instantiate(OmegaConf.load(CONF_DIR / "audio" / "lj22k.yaml"))
    dataset = TTSDataset(featurised_corpus, "train", frontend, mel_config)
    early = tmp_path / "early"
    early.mkdir()
    for uid in dataset.ids:
        d = np.load(out / f"{uid}.npy")
        energy = load_features(featurised_corpus, uid, mel_config).energy.numpy()
        lead = max(1, speech_onset(energy))
        d[1] += d[0] - lead
        d[0] = lead
        np.save(early / f"{uid}.npy", d)
    report = evaluate(dataset, early, frontend)
    assert report["first_token_silent_share"] == 1.0
    assert report["first_token_energy_ratio_mean"] < festival["first_token_energy_ratio_mean"]
    [warning] = [w for w in warnings_for({"source": "teacher", "splits": {"train": report}}) if "leading pause" in w]
    assert "100%" in warning


def test_onset_first_token_moves_the_first_boundary_into_the_speech():
    from tts.durations import onset_first_token, speech_onset

    energy = np.r_[np.full(10, 0.01), np.full(20, 1.0)]  # 10 frames of leading pause, then speech
    assert speech_onset(energy) == 10
    # the attention's boundary at frame 6, in the pause: [10, 16) split between the first two tokens
    moved = onset_first_token(np.array([6, 10, 14]), energy)
    assert moved.tolist() == [13, 3, 14] and moved.sum() == 30
    # a first token that already reaches the speech, or a second token ending at the onset, stays
    assert onset_first_token(np.array([12, 4, 14]), energy).tolist() == [12, 4, 14]
    assert onset_first_token(np.array([4, 6, 20]), energy).tolist() == [4, 6, 20]
    assert onset_first_token(np.array([30]), energy).tolist() == [30]
    assert speech_onset(np.zeros(5)) == 0


def test_speech_onset_of_a_word_said_alone():
    """Pauses fill most of a word said alone ("Ah.": 15 frames before it, 20 after, 18 of speech): the onset is where
    the speech starts, not frame 0, which the median reference gave (the median of such an utterance is silence)."""
    from tts.durations import leading_pause_cut, speech_onset

    energy = np.r_[np.full(15, 0.06), np.linspace(30.0, 90.0, 18), np.full(20, 0.05)]
    assert float(np.median(energy)) < 0.1 and speech_onset(energy) == 15
    assert leading_pause_cut(np.array([15, 38]), energy, keep=2) == 13
    # quiet speech is still speech: the reference is the utterance's own level
    assert speech_onset(energy * 1e-3) == 15


def test_leading_pause_cut_keeps_the_asked_pause_and_a_frame_of_the_first_token():
    from tts.durations import leading_pause_cut

    energy = np.r_[np.full(10, 0.01), np.full(20, 1.0)]  # speech from frame 10
    assert leading_pause_cut(np.array([13, 3, 14]), energy, keep=2) == 8
    assert leading_pause_cut(np.array([13, 3, 14]), energy, keep=0) == 10
    assert leading_pause_cut(np.array([13, 3, 14]), energy, keep=12) == 0  # a pause shorter than asked: no cut
    # the first token ends before the onset (the AR teacher's boundary): it keeps one frame
    assert leading_pause_cut(np.array([6, 10, 14]), energy, keep=2) == 5
    assert leading_pause_cut(np.array([0, 16, 14]), energy, keep=2) == 0
    with pytest.raises(ValueError, match="keep"):
        leading_pause_cut(np.array([13, 3, 14]), energy, keep=-1)


def test_dataset_cuts_the_leading_pause_of_every_stream_alike(featurised_corpus: Path, tmp_path: Path):
    """lead_pause_frames cuts mel, pitch, energy and the first token's duration by the same frames, so that the
    durations still sum to the frames, and the first token's frames are louder on average than uncut."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from tts.data.dataset import TTSDataset
    from tts.durations import leading_pause_cut
    from tts.paths import CONF_DIR

    out = tmp_path / "fest"
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=festival", "splits=[train]",
                        f"data_root={featurised_corpus}", f"out_dir={out}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    frontend = instantiate(OmegaConf.load(CONF_DIR / "text" / "arpabet.yaml"))
    mel_config = instantiate(OmegaConf.load(CONF_DIR / "audio" / "lj22k.yaml"))
    whole = TTSDataset(featurised_corpus, "train", frontend, mel_config, out)
    cut = TTSDataset(featurised_corpus, "train", frontend, mel_config, out, lead_pause_frames=2)
    n_cut, first_whole, first_cut = 0, [], []
    for k in range(len(whole)):
        a, b = whole[k], cut[k]
        gone = a.mel.shape[1] - b.mel.shape[1]
        assert b.mel.shape[1] == b.pitch.shape[0] == b.energy.shape[0] == int(b.durations.sum())
        assert torch.equal(b.mel, a.mel[:, gone:]) and torch.equal(b.pitch, a.pitch[gone:])
        assert torch.equal(b.durations[1:], a.durations[1:]) and int(b.durations[0]) >= 1
        assert gone == leading_pause_cut(a.durations.numpy(), a.energy.numpy(), keep=2)
        n_cut += gone > 0
        first_whole.append(float(a.energy[: int(a.durations[0])].mean()))
        first_cut.append(float(b.energy[: int(b.durations[0])].mean()))
    assert n_cut > 0 and np.mean(first_cut) > np.mean(first_whole)
    with pytest.raises(ValueError, match="durations"):
        TTSDataset(featurised_corpus, "train", frontend, mel_config, lead_pause_frames=2)

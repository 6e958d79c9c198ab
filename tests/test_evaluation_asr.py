"""The offline Whisper judge on real Festival recordings (kept under 60 s: 3 utterances)."""

import csv
import time

import pytest
import soundfile as sf
import torch

from tts.evaluation.asr import WhisperJudge, bundled_model_dir, score


@pytest.fixture(scope="module")
def judge():
    torch.set_num_threads(1)
    return WhisperJudge()


def _metadata(fixture_corpus):
    with open(fixture_corpus / "metadata.csv", newline="") as f:
        return {row[0]: row for row in csv.reader(f, delimiter="|", quoting=csv.QUOTE_NONE)}


def test_bundled_model_is_found():
    d = bundled_model_dir()
    assert (d / "model.bin").is_file() and (d / "tokenizer.json").is_file()


def test_whisper_judge_transcribes_festival_audio(judge, fixture_corpus):
    meta = _metadata(fixture_corpus)
    ids = ["slt_00001", "slt_00003", "slt_00005"]
    refs, hyps = [], []
    t0 = time.perf_counter()
    audio_s = 0.0
    for utt in ids:
        x, sr = sf.read(str(fixture_corpus / "wavs" / f"{utt}.wav"), dtype="float32")
        audio_s += len(x) / sr
        hyps.append(judge.transcribe(torch.from_numpy(x), sr))
        refs.append(meta[utt][1])
    elapsed = time.perf_counter() - t0
    s = judge.score(refs, hyps)
    assert s.n == 3
    assert s.cer < 0.15, list(zip(refs, hyps))
    assert s.wer < 0.35, list(zip(refs, hyps))
    assert elapsed < 45, f"judge too slow: {elapsed:.1f} s for {audio_s:.1f} s of audio"
    # a wrong transcript scores badly: the judge is able to fail
    assert score(refs, hyps[1:] + hyps[:1]).cer > 0.5


def test_missing_model_dir_is_a_clear_error(tmp_path):
    from tts.evaluation.asr import ASRModelMissingError

    with pytest.raises(ASRModelMissingError, match="model.bin"):
        WhisperJudge(model_dir=tmp_path)

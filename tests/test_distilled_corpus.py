"""data_prep.distilled_corpus: a corpus of a teacher's own speech (sequence-level distillation, issue 25).
The stored target is the teacher's mel itself; the build repeats and resumes; a varied corpus's renditions
are one text; the AR's rejected decodes are left out and recorded; a dataset reads the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf
import torch

from data_prep import corpus
from data_prep.distilled_corpus import build, distilled_id, teacher_texts
from helpers import TINY, tiny_checkpoint
from tts.runtime.torch_engine import TorchEngine

FIXTURE = Path(__file__).parent / "fixtures" / "slt20"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    # a random NAR whose every token lasts >= 3 frames (untrained, its durations would be ~0)
    return tiny_checkpoint(tmp_path_factory.mktemp("t") / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"],
                           min_token_frames=3)


@pytest.fixture(scope="module")
def built(teacher: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kd") / "c"
    s = build(teacher, FIXTURE, out, seed=3)
    assert (s.n_written, s.n_present, s.rejected) == (18, 0, {})  # slt20: 16 train + 2 val texts
    return out


def test_the_stored_target_is_the_teachers_own_mel(teacher: Path, built: Path, one_torch_thread):
    engine = TorchEngine.from_paths(str(teacher), "source-filter")
    mc = engine.mel_config
    train = corpus.read_split(built, "train")
    assert train == [distilled_id(i) for i in corpus.read_split(FIXTURE, "train")]
    assert corpus.read_split(built, "test") == []  # students are scored on the source's recordings
    texts = {u.id: u.text for u in corpus.read_metadata(built)}
    for k, uid in enumerate(train[:3]):  # the build's item index k: train comes first
        out = engine.mels([engine.encode(texts[uid])], [k], engine.defaults.replace(seed=3))
        teacher_mel = out.mels[0, :, : int(out.lengths[0])]
        feats = corpus.load_features(built, uid, mc)
        torch.testing.assert_close(feats.mel, teacher_mel.half().float(), rtol=0, atol=0)
        n = teacher_mel.shape[-1]
        assert feats.pitch.shape == feats.energy.shape == (n,)
        assert mc.n_frames(sf.info(str(corpus.wav_path(built, uid))).frames) == n  # audio and frames agree
    info = json.loads((built / "corpus.json").read_text())
    assert info["splits"] == {"train": 16, "val": 2} and info["rejected"] == {} and info["hours"] > 0
    assert (built / "features" / "stats.json").is_file()


def test_the_build_repeats_and_resumes(teacher: Path, built: Path, tmp_path: Path):
    victim = corpus.features_path(built, "kd_00005")
    before = victim.read_bytes(), corpus.wav_path(built, "kd_00005").read_bytes()
    victim.unlink()
    s = build(teacher, FIXTURE, built, seed=3)
    assert (s.n_written, s.n_present) == (1, 17)
    # the remade item is the same as before: its noise comes from (seed, its position), not from the run
    assert _same_pt(victim, before[0], tmp_path)
    assert corpus.wav_path(built, "kd_00005").read_bytes() == before[1]


def _same_pt(path: Path, old: bytes, tmp: Path) -> bool:
    (tmp / "old.pt").write_bytes(old)
    a, b = torch.load(path, weights_only=True), torch.load(tmp / "old.pt", weights_only=True)
    return torch.equal(a["mel"], b["mel"]) and torch.equal(a["pitch"], b["pitch"])


def test_a_dataset_reads_the_distilled_corpus(built: Path):
    from tts.audio import MelConfig
    from tts.data.dataset import TTSDataset
    from tts.text import TextFrontend

    ds = TTSDataset(built, "train", TextFrontend(max_symbols=400), MelConfig.default())
    item = ds[0]
    assert item.mel.shape[-1] == item.pitch.shape[-1] > 0


def test_renditions_of_one_text_are_spoken_once(tmp_path: Path):
    src = tmp_path / "varied"
    utts = [corpus.Utterance(f"var_0000{t}_{r}", f"text {t}.", f"text {t}.") for t in (1, 2) for r in (1, 2, 3)]
    corpus.write_metadata(src, utts)
    for split, ids in (("train", [u.id for u in utts[:3]]), ("val", [u.id for u in utts[3:]]), ("test", [])):
        (src / "splits").mkdir(exist_ok=True)
        (src / "splits" / f"{split}.txt").write_text("".join(f"{i}\n" for i in ids))
    plan = teacher_texts(src)
    assert {k: [kid for kid, _ in v] for k, v in plan.items()} == {"train": ["kd_00001"], "val": ["kd_00002"]}
    assert plan["train"][0][1].text == "text 1."


def test_rejected_teacher_decodes_are_recorded_and_a_teacher_that_fails_everywhere_is_an_error(tmp_path: Path):
    """An untrained AR never stops: its failure check rejects every decode (kept out, with the reason), and a
    corpus with nothing left is a clear error, not an empty corpus that training would trip over later."""
    ar = tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"])
    with pytest.raises(corpus.CorpusError, match=r"every decode rejected \(4\), e\.g\. kd_00001: .*no_stop"):
        build(ar, FIXTURE, tmp_path / "c", limit=2)
    assert not (tmp_path / "c" / "metadata.csv").exists()

"""Vocoder data (frame-aligned segments, teacher-forced mels) and a tiny GAN run through the recipe."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tts import checkpoint
from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.paths import CONF_DIR
from tts.vocoder.data import VocoderDataError, VocoderDataset, collate, read_split_ids
from tts.vocoder.hifigan import HifiGanVocoder
from tts.vocoder.registry import load_vocoder


@pytest.fixture(scope="module")
def mel_config() -> MelConfig:
    return MelConfig.default()


def full_utterance(root: Path, utt_id: str, c: MelConfig) -> tuple[torch.Tensor, torch.Tensor, int]:
    wave = load_wav(root / "wavs" / f"{utt_id}.wav", c.sample_rate)
    return MelSpectrogram(c)(wave[None])[0], wave, wave.shape[0]


def test_segments_are_frame_aligned_slices_of_the_whole_utterance(fixture_corpus: Path, mel_config: MelConfig):
    hop, s = mel_config.hop_length, 8
    ds = VocoderDataset(fixture_corpus, "train", mel_config, segment_frames=s)
    assert ds.ids == read_split_ids(fixture_corpus, "train")
    mel, wave, n = full_utterance(fixture_corpus, ds.ids[0], mel_config)
    wave = torch.nn.functional.pad(wave, (0, mel.shape[1] * hop - n))  # [T * hop]
    for _ in range(3):
        item = ds[0]
        assert item.mel.shape == (mel_config.n_mels, s) and item.wave.shape == (s * hop,)
        # the segment's frame offset, recovered from the mel, must also be its sample offset / hop
        errors = torch.stack([(mel[:, f : f + s] - item.mel).abs().max() for f in range(mel.shape[1] - s + 1)])
        f = int(errors.argmin())
        assert errors[f] < 1e-5
        assert torch.equal(item.wave, wave[f * hop : (f + s) * hop])


def test_whole_utterances_and_short_ones(fixture_corpus: Path, mel_config: MelConfig):
    hop = mel_config.hop_length
    val = VocoderDataset(fixture_corpus, "val", mel_config, segment_frames=None, max_utterances=1)
    item = val[0]
    mel, wave, n = full_utterance(fixture_corpus, item.id, mel_config)
    assert item.mel.shape[1] == 1 + n // hop and item.wave.shape[0] == item.mel.shape[1] * hop
    assert torch.allclose(item.mel, mel) and torch.equal(item.wave[:n], wave) and item.wave[n:].abs().sum() == 0
    # a segment longer than the utterance is padded with silence: log floor frames, zero samples
    long = VocoderDataset(fixture_corpus, "val", mel_config, segment_frames=mel.shape[1] + 5)[0]
    assert torch.all(long.mel[:, -5:] == mel_config.log_floor) and long.wave[-5 * hop :].abs().sum() == 0
    batch = collate([item, long], mel_config.log_floor, hop)
    assert batch.mels.shape == (2, 80, mel.shape[1] + 5) and batch.waves.shape == (2, (mel.shape[1] + 5) * hop)
    assert batch.mel_lengths.tolist() == [mel.shape[1], mel.shape[1] + 5]


def test_extra_roots_join_several_corpora(fixture_corpus: Path, mel_config: MelConfig, tmp_path: Path):
    """One vocoder for several voices: every corpus's train split trains, every val split validates."""
    import shutil

    from tts.vocoder.data import VocoderDataModule

    other = tmp_path / "other"
    shutil.copytree(fixture_corpus, other, ignore=shutil.ignore_patterns("cache", "features"))
    (other / "splits" / "train.txt").write_text("\n".join(read_split_ids(fixture_corpus, "train")[:3]) + "\n")
    dm = VocoderDataModule(str(fixture_corpus), mel_config, segment_frames=8, batch_size=2, max_val_utterances=1,
                           extra_roots=[str(other)])
    dm.setup()
    n_train = len(read_split_ids(fixture_corpus, "train"))
    assert len(dm.train_set) == n_train + 3 and len(dm.val_set) == 2
    # the extra corpus's items are read from its own folder: make one of its wavs unreadable
    (other / "wavs" / f"{read_split_ids(other, 'train')[0]}.wav").write_bytes(b"not a wav")
    dm.train_set[0]  # the first corpus still reads
    with pytest.raises(Exception):
        dm.train_set[n_train]
    with pytest.raises(ValueError, match="extra_roots"):
        VocoderDataModule(str(fixture_corpus), mel_config, 8, 2, mel_dir=str(tmp_path), extra_roots=[str(other)])


def test_teacher_forced_mels(fixture_corpus: Path, mel_config: MelConfig, tmp_path: Path):
    ids = read_split_ids(fixture_corpus, "val")
    mel, _, _ = full_utterance(fixture_corpus, ids[0], mel_config)
    torch.save(mel + 0.25, tmp_path / f"{ids[0]}.pt")  # a plain tensor...
    torch.save({"mel": mel[:, :-1]}, tmp_path / f"{ids[1]}.pt")  # ...or {"mel": ...}; one frame short here
    ds = VocoderDataset(fixture_corpus, "val", mel_config, segment_frames=None, mel_dir=tmp_path)
    assert torch.allclose(ds[0].mel, mel + 0.25)
    with pytest.raises(VocoderDataError, match="frames.*aligned to the wav"):
        ds[1]
    (tmp_path / f"{ids[1]}.pt").unlink()
    with pytest.raises(VocoderDataError, match=r"expected .*\.pt or .*\.npy"):
        ds[1]


def compose_cfg(corpus: Path, exp_dir: Path, *overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(
            "train_vocoder",
            overrides=[
                "vocoder=hifigan_v3",
                "vocoder_debug=tiny",
                f"data.root={corpus}",
                f"exp_dir={exp_dir}",
                "name=test_vocoder",
                "vocoder_data.segment_frames=8",
                "trainer.val_check_interval=1",  # batches: validate (and log media) after each
                "trainer.log_every_n_steps=1",
                "checkpoint_every_n_steps=2",  # optimizer steps (2 per batch): a checkpoint per batch
                *overrides,
            ],
        )


@pytest.fixture
def restore_threads():
    # the recipe sets torch's thread count (the debug preset: 1 thread); give the session back its own
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_tiny_training_resumes_and_its_checkpoint_rebuilds_a_vocoder(
    fixture_corpus: Path, tmp_path: Path, restore_threads: None
):
    from recipes.train_vocoder import build, train

    # 1 batch = 2 optimizer steps (discriminator + generator); each checkpoint is ~870 MB, so few of them
    trainer = train(compose_cfg(fixture_corpus, tmp_path, "trainer.max_steps=2"))
    assert trainer.global_step == 2
    last = tmp_path / "checkpoints" / "last.ckpt"
    raw = checkpoint.read_raw(last)
    assert raw["tts"]["kind"] == "vocoder" and raw["tts"]["info"]["iterations"] == 1
    assert raw["tts"]["model_config"]["_target_"] == "tts.vocoder.hifigan.HifiGanVocoder"
    assert raw["optimizer_states"][0]["state"][0]["step"] == 1  # generator AdamW: one step per batch
    assert (tmp_path / "checkpoints" / "step0000002.ckpt").is_file() and not list(tmp_path.glob("checkpoints/.*tmp*"))
    tb = EventAccumulator(str(tmp_path / "tb"), size_guidance={"audio": 0, "images": 0})
    tb.Reload()
    tags = tb.Tags()
    assert {"train/mel_l1", "train/d_loss", "train/g_loss", "val/mel_l1"} <= set(tags["scalars"])
    val_id = read_split_ids(fixture_corpus, "val")[0]
    assert {f"val/{val_id}/generated", f"val/{val_id}/ground_truth"} <= set(tags["audio"])
    assert {f"val/{val_id}/mel_generated", f"val/{val_id}/mel_ground_truth"} <= set(tags["images"])

    # resume: one more batch continues from step 2 (optimizer and scheduler state too), not from scratch
    trainer = train(compose_cfg(fixture_corpus, tmp_path, "trainer.max_steps=4", "ckpt_path=last"))
    assert trainer.global_step == 4
    raw = checkpoint.read_raw(last)
    assert raw["global_step"] == 4 and raw["tts"]["info"]["iterations"] == 2
    assert raw["optimizer_states"][0]["state"][0]["step"] == 2 and raw["lr_schedulers"][0]["last_epoch"] == 2

    # the file alone rebuilds a working vocoder; weight-norm removal does not change the output
    vocoder = load_vocoder(last, mel_config=MelConfig.default())
    assert isinstance(vocoder, HifiGanVocoder) and vocoder.weight_norm_removed and not vocoder.training
    weight_normed = checkpoint.load(last).model  # the unchanged tts.checkpoint.load works as well
    mel = torch.randn(1, 80, 12) - 5.0
    out = vocoder(mel)
    assert out.wave.shape == (1, 12 * 256) and torch.isfinite(out.wave).all()
    assert torch.allclose(out.wave, weight_normed(mel).wave, atol=1e-5)
    # a half-precision export (no discriminator, no optimizer state) loads the same way
    checkpoint.export(last, tmp_path / "hifigan.pt", "fp16")
    assert (tmp_path / "hifigan.pt").stat().st_size < last.stat().st_size / 10
    assert torch.allclose(load_vocoder(tmp_path / "hifigan.pt")(mel).wave, out.wave, atol=2e-2)

    # fine-tuning start: init_from copies generator and discriminator weights into a fresh run
    module, _, _ = build(compose_cfg(fixture_corpus, tmp_path / "ft", f"init_from={last}", "vocoder_data.mel_dir=null"))
    sd = checkpoint.model_state_dict(raw)
    assert all(torch.equal(v, sd[k]) for k, v in module.model.state_dict().items())
    d_key = next(k for k in raw["state_dict"] if k.startswith("discriminator."))
    assert torch.equal(module.state_dict()[d_key], raw["state_dict"][d_key])


def test_generator_only_warmup_then_gan(fixture_corpus: Path, tmp_path: Path, restore_threads: None):
    """discriminator_start_batch=1: batch 1 trains the generator alone (discriminator untouched, still
    2 optimizer steps per batch), batch 2 is a full GAN step."""
    from recipes.train_vocoder import build

    cfg = compose_cfg(fixture_corpus, tmp_path, "trainer.max_steps=2", "discriminator_start_batch=1",
                      "checkpoint_every_n_steps=1000", "trainer.val_check_interval=1000", "loss.stft_loss_weight=2.5")
    torch.set_num_threads(cfg.threads)
    module, data, trainer = build(cfg)
    g0 = [p.detach().clone() for p in module.model.parameters()]
    d0 = [p.detach().clone() for p in module.discriminator.parameters()]
    trainer.fit(module, datamodule=data)
    assert trainer.global_step == 2 and module.iteration == 1 and module.adversarial
    assert all(torch.equal(a, b) for a, b in zip(d0, module.discriminator.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(g0, module.model.parameters()))
    opt_g, opt_d = trainer.optimizers
    assert opt_d.state == {} and opt_g.state[next(module.model.parameters())]["step"] == 1
    assert module.stft_loss is not None and float(trainer.logged_metrics["train/stft"]) > 0
    trainer.fit_loop.epoch_loop.max_steps = 4  # one more batch: now the discriminator trains too
    trainer.fit(module, datamodule=data)
    assert trainer.global_step == 4
    assert not all(torch.equal(a, b) for a, b in zip(d0, module.discriminator.parameters()))
    with pytest.raises(ValueError, match="discriminator_start_batch"):
        build(compose_cfg(fixture_corpus, tmp_path, "discriminator_start_batch=-1"))


def test_multi_resolution_stft_loss(fixture_corpus: Path, mel_config: MelConfig):
    """0 for the same wave, grows with the distortion, and its gradient reaches the generated wave."""
    from tts.training.vocoder_module import MultiResolutionSTFTLoss

    utt_id = read_split_ids(fixture_corpus, "train")[0]
    y = load_wav(fixture_corpus / "wavs" / f"{utt_id}.wav", mel_config.sample_rate)[None, None, :16384]
    loss = MultiResolutionSTFTLoss()
    assert float(loss(y, y)) == 0.0
    noise = torch.randn_like(y) * y.abs().mean()
    small, large = float(loss(y + 0.1 * noise, y)), float(loss(y + noise, y))
    assert 0.0 < small < large
    y_hat = (y + noise).requires_grad_()
    loss(y_hat, y).backward()
    assert torch.isfinite(y_hat.grad).all() and y_hat.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="same length"):
        MultiResolutionSTFTLoss(fft_sizes=(512,), hop_sizes=(50, 100), win_lengths=(240,))


def test_weight_average_checkpoints_hold_the_average_and_resume_both(fixture_corpus: Path, tmp_path: Path,
                                                                      restore_threads: None):
    """ema_decay: the checkpoint's weights (what tts.checkpoint.load and validation see) are the moving
    average, the raw ones travel beside them, and a resumed run goes on from both."""
    from recipes.train_vocoder import train

    def cfg(*extra: str):
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            return compose("train_vocoder", overrides=[
                "vocoder=source_filter", "vocoder_debug=tiny", f"data.root={fixture_corpus}", f"exp_dir={tmp_path}",
                "name=test_ema", "vocoder.hidden_channels=16", "checkpoint_every_n_steps=2",
                "trainer.val_check_interval=2", "ema_decay=0.5", *extra])

    train(cfg("trainer.max_steps=2"))
    last = tmp_path / "checkpoints" / "last.ckpt"
    raw = checkpoint.read_raw(last)
    average, current = raw["state_dict"], raw["current_model_state"]
    key = "model.head.weight"
    assert not torch.equal(average[key], current[key])
    loaded = checkpoint.load(last).model.state_dict()
    assert torch.equal(loaded["head.weight"], average[key].to(loaded["head.weight"].dtype))
    trainer = train(cfg("trainer.max_steps=3", "ckpt_path=last", "checkpoint_every_n_steps=1"))
    assert trainer.global_step == 3
    again = checkpoint.read_raw(last)
    assert again["global_step"] == 3
    # one more update from the restored average: average' = 0.5 average + 0.5 current'
    moved = again["current_model_state"][key]
    assert not torch.equal(moved, current[key])
    assert torch.allclose(again["state_dict"][key], 0.5 * average[key] + 0.5 * moved, atol=1e-6)

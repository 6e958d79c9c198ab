"""Tiny CPU training runs of the acoustic recipe (Hydra compose -> Lightning fit), resume, and kill."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from recipes.train import build
from tts import checkpoint
from tts.paths import CONF_DIR, REPO_ROOT
from tts.data.dataset import TTSDataset

TINY_AR = [
    "model.embedding_dim=32", "model.encoder_dim=32", "model.prenet_dim=16", "model.attention_rnn_dim=32",
    "model.decoder_rnn_dim=32", "model.attention_dim=16", "model.postnet_channels=16", "model.location_filters=4",
]


def config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides, return_hydra_config=True)
    # as @hydra.main does: ${hydra:...} interpolations (e.g. the run name) need the Hydra config set
    HydraConfig.instance().set_config(cfg)
    return cfg


def fit(overrides: list[str]):
    cfg = config(overrides)
    module, datamodule, trainer = build(cfg)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    return module, trainer


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")))
def test_experiment_presets_compose_and_instantiate(experiment, featurised_corpus: Path, tmp_path: Path):
    cfg = config([f"experiment={experiment}", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}"])
    assert cfg.name == experiment
    module, datamodule, trainer = build(cfg)
    assert sum(p.numel() for p in module.model.parameters()) > 1e6
    assert module.meta.build_kwargs == {"n_symbols": 78, "n_mels": 80}


def test_ar_tiny_training_run_resume_and_self_describing_checkpoint(featurised_corpus: Path, tmp_path: Path):
    base = ["debug=tiny", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}", *TINY_AR]
    module, trainer = fit(base)
    assert trainer.global_step == 20
    last = tmp_path / "checkpoints" / "last.ckpt"
    assert last.is_file()
    assert (tmp_path / "tb").is_dir() and any((tmp_path / "tb").rglob("events.out.tfevents*"))

    # the training checkpoint rebuilds the model by itself and the model runs
    loaded = checkpoint.load(last)
    frontend = loaded.frontend()
    ids = torch.tensor([frontend.encode("Hello world.")])
    out = loaded.model.infer(ids, torch.tensor([ids.shape[1]]), max_decoder_steps=5)
    assert out.mels.shape[:2] == (1, 80)

    # resume continues the step count instead of restarting
    module2, trainer2 = fit(base + ["trainer.max_steps=30", "ckpt_path=last"])
    assert trainer2.global_step == 30

    # exported release checkpoint (fp16, no optimizer state)
    checkpoint.export(last, tmp_path / "ar.pt")
    assert (tmp_path / "ar.pt").stat().st_size < last.stat().st_size


def test_killed_run_resumes_from_last_checkpoint(featurised_corpus: Path, tmp_path: Path):
    overrides = ["debug=tiny", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}", "trainer.max_steps=400",
                 "checkpoint_every_n_steps=5", "log_audio=false", *TINY_AR]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "recipes.train", *overrides], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    last = tmp_path / "checkpoints" / "last.ckpt"
    deadline = time.monotonic() + 240
    while not last.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert last.is_file(), proc.stderr.read().decode()[-3000:] if proc.poll() is not None else "no checkpoint in time"
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    step_at_kill = checkpoint.read_raw(last)["global_step"]
    assert 5 <= step_at_kill < 400
    _, trainer = fit(overrides[:3] + ["trainer.max_steps=" + str(step_at_kill + 5), "ckpt_path=last",
                                      "checkpoint_every_n_steps=5", "log_audio=false", *TINY_AR])
    assert trainer.global_step == step_at_kill + 5


def test_dataset_items_and_collate(featurised_corpus: Path):
    cfg = config([f"data.root={featurised_corpus}"])
    from hydra.utils import instantiate

    frontend = instantiate(cfg.text)
    mel_config = instantiate(cfg.audio)
    ds = TTSDataset(featurised_corpus, "train", frontend, mel_config)
    assert len(ds) >= 2 and ds.lengths()[0] == ds[0].mel.shape[-1]
    from tts.data.dataset import Collate

    batch = Collate(mel_config.log_floor)([ds[0], ds[1]])
    assert batch.mels.shape[0] == 2 and batch.mels.shape[1] == 80
    assert batch.mel_mask().sum() == sum(ds.lengths()[:2])
    assert (batch.mels[~batch.mel_mask()[:, None, :].expand_as(batch.mels)] == mel_config.log_floor).all()
    # the token cache is reused: a second dataset does not re-run G2P
    cache = list((featurised_corpus / "cache").glob("tokens-train-*.json"))
    assert len(cache) == 1


def test_ddp_trainer_config_instantiates(featurised_corpus: Path, tmp_path: Path):
    # GPU DDP cannot run here; the same config on 2 CPU processes builds a DDP trainer (launch is in fit)
    from lightning.pytorch.strategies import DDPStrategy

    cfg = config(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2", "trainer.precision=32-true",
                  f"data.root={featurised_corpus}", f"exp_dir={tmp_path}"])
    _, _, trainer = build(cfg)
    assert isinstance(trainer.strategy, DDPStrategy) and trainer.world_size == 2


TINY_NAR = ["model.d_model=32", "model.encoder_layers=1", "model.decoder_layers=1", "model.ffn_channels=64",
            "model.predictor_channels=32", "model.refiner.channels=16", "model.refiner.n_layers=2"]


def test_nar_tiny_training_run_on_distilled_durations(featurised_corpus: Path, tmp_path: Path):
    from helpers import TINY, tiny_checkpoint
    from recipes.extract_durations import distil

    teacher = checkpoint.load(tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"]))
    dur_dir = tmp_path / "durations"
    dur_dir.mkdir()
    for split in ("train", "val"):
        ds = TTSDataset(featurised_corpus, split, teacher.frontend(), teacher.mel_config)
        distil(teacher.model, ds, dur_dir, batch_size=8, max_skip=1)
    module, trainer = fit(["debug=tiny", "model=nonautoregressive", f"data.root={featurised_corpus}",
                           f"data.durations_dir={dur_dir}", f"exp_dir={tmp_path / 'exp'}", *TINY_NAR])
    assert trainer.global_step == 20
    logged = trainer.callback_metrics
    assert "val/length_abs_error_frames" in logged and "train/duration_abs_error_frames" in logged
    loaded = checkpoint.load(tmp_path / "exp" / "checkpoints" / "last.ckpt")
    ids = torch.tensor([loaded.frontend().encode("Hello world.")])
    out = loaded.model.infer(ids, torch.tensor([ids.shape[1]]), refine_steps=2)
    assert out.mels.shape[1] == 80 and out.mel_lengths[0] > 0


def test_init_from_warm_starts_weights_and_counts_steps_before(featurised_corpus: Path, tmp_path: Path):
    first = tmp_path / "first"
    base = ["debug=tiny", f"data.root={featurised_corpus}", "log_audio=false", "trainer.max_steps=5", *TINY_AR]
    fit(base + [f"exp_dir={first}"])
    release = tmp_path / "ar.pt"
    checkpoint.export(first / "checkpoints" / "last.ckpt", release, info={"global_step": 5})

    # a new run starts from the released (fp16) weights, not from random ones; its normalisation statistics
    # are this corpus's (recipes.train installs them after the warm start, issue 31), not the fp16-rounded copy
    cfg = config(base + [f"exp_dir={tmp_path / 'second'}", f"init_from={release}"])
    module, _, _ = build(cfg)
    shipped = checkpoint.load(release).model.state_dict()
    corpus_stats = {"mel_mean", "mel_std"}
    for name, value in module.model.state_dict().items():
        if name not in corpus_stats:
            assert torch.equal(value, shipped[name]), name
    stats = json.loads((featurised_corpus / "features" / "stats.json").read_text())
    assert torch.allclose(module.model.mel_mean, torch.tensor(stats["mel"]["mean"]))
    assert module.meta.info["init_from"] == str(release) and module.meta.info["steps_before"] == 5

    # a chain of warm starts sums the steps behind the weights
    _, trainer = fit(base + [f"exp_dir={tmp_path / 'second'}", f"init_from={release}"])
    assert trainer.global_step == 5
    third = config(base + [f"exp_dir={tmp_path / 'third'}", f"init_from={tmp_path / 'second' / 'checkpoints' / 'last.ckpt'}"])
    assert build(third)[0].meta.info["steps_before"] == 10

    # resuming the warm-started run (ckpt_path=last) keeps its provenance in the checkpoints it writes
    _, trainer = fit([o for o in base if not o.startswith("trainer.max_steps")]
                     + ["trainer.max_steps=7", f"exp_dir={tmp_path / 'second'}", "ckpt_path=last"])
    info = checkpoint.read_raw(tmp_path / "second" / "checkpoints" / "last.ckpt")["tts"]["info"]
    assert trainer.global_step == 7 and info["global_step"] == 7
    assert info["init_from"] == str(release) and info["steps_before"] == 5


def test_init_from_refuses_another_architecture_or_mel(featurised_corpus: Path, tmp_path: Path):
    base = ["debug=tiny", f"data.root={featurised_corpus}", "log_audio=false", "trainer.max_steps=2", *TINY_AR]
    fit(base + [f"exp_dir={tmp_path / 'a'}"])
    src = tmp_path / "a" / "checkpoints" / "last.ckpt"
    with pytest.raises(checkpoint.CheckpointError, match="do not fit"):
        build(config(base + [f"exp_dir={tmp_path / 'b'}", f"init_from={src}", "model.decoder_rnn_dim=48"]))
    with pytest.raises(checkpoint.CheckpointError, match="mel config differs"):
        build(config(base + [f"exp_dir={tmp_path / 'b'}", f"init_from={src}", "audio.f_max=7600"]))
    with pytest.raises(checkpoint.CheckpointError, match="not found"):
        build(config(base + [f"exp_dir={tmp_path / 'b'}", f"init_from={tmp_path / 'missing.pt'}"]))

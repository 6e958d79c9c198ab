"""Train a vocoder: `python -m recipes.train_vocoder vocoder=source_filter|istft|hifigan_v3|hifigan_v1 data=slt`.

HiFi-GAN trains as a GAN (tts/training/vocoder_module.py); the frame-rate vocoders (source-filter, iSTFT head)
with STFT and mel losses (+ F0 and voicing for the source-filter one) and, with `sf_discriminator=light`, the
light discriminator (tts/training/source_filter_module.py, settings `frame_vocoder:`).

One run per directory, as recipes.train (exp/<name>, multirun jobs exp/<name>/job<N>): resume a killed run
with `ckpt_path=last`; a new run into a directory holding checkpoints is refused.  Tiny CPU smoke run:
`vocoder_debug=tiny`.  User errors end in one `error:` line and exit 2.
Fine-tune on an acoustic model's teacher-forced mels (format: tts/vocoder/data.py) in a new run:
`vocoder_data.mel_dir=DIR init_from=exp/vocoder_hifigan_v3/checkpoints/last.ckpt exp_dir=exp/ft` --
`init_from` copies generator + discriminator weights and starts fresh optimisers and step count.
The Lightning checkpoints carry the tts description, so `tts.vocoder.registry.load_vocoder(PATH)`
(or `tts.checkpoint.load(PATH).model`) rebuilds the vocoder from the file alone.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import hydra
import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import EMAWeightAveraging, LearningRateMonitor
from omegaconf import DictConfig, OmegaConf

from recipes.train import log_every_n_steps, progress_bar, tensorboard, use_job_dir
from tts import checkpoint
from tts.audio import MelConfig
from tts.training.callbacks import RunSummary, step_checkpoint
from tts.training.cli import recipe_entry, user_errors
from tts.training.module import AtomicCheckpointIO
from tts.training.noise import quiet_lightning
from tts.training.preflight import require_corpus
from tts.training.run_dir import prepare_run_dir, process_rank
from tts.training.source_filter_module import SourceFilterModule
from tts.vocoder.data import VocoderDataModule
from tts.vocoder.istft import IstftVocoder
from tts.vocoder.source_filter import SourceFilterVocoder
from tts.vocoder.registry import build_vocoder, mel_config_node, vocoder_meta

log = logging.getLogger(__name__)


def init_weights(module: pl.LightningModule, path: str, mel_config: MelConfig) -> None:
    """Start from the generator (and discriminator, if stored) of another vocoder checkpoint."""
    raw = checkpoint.read_raw(path)
    meta = checkpoint.CheckpointMeta.from_dict(raw["tts"])
    if meta.kind != "vocoder":
        raise checkpoint.CheckpointError(f"init_from {path} is a {meta.kind!r} checkpoint, not a vocoder")
    mel_config.check_compatible(meta.mel_config, "this run", f"init_from {path}")
    weights = checkpoint.model_state_dict(raw)
    # a part the source checkpoint lacks starts fresh: the magnitude correction of a source-filter vocoder
    # fine-tuned from a plain one (its head starts as the identity)
    fresh = tuple(p for p in ("correction.",) if getattr(module.model, "correction", None) is not None)
    result = module.model.load_state_dict(weights, strict=not fresh)
    wrong = [k for k in result.missing_keys if not k.startswith(fresh)] + list(result.unexpected_keys) if fresh else []
    if wrong:
        raise checkpoint.CheckpointError(f"init_from {path} does not fit this vocoder: {', '.join(wrong[:4])}")
    disc = {k[len("discriminator.") :]: v for k, v in raw["state_dict"].items() if k.startswith("discriminator.")}
    if disc and hasattr(module, "discriminator"):
        module.discriminator.load_state_dict(disc)
    log.info("initialised from %s (discriminator: %s)", path, "yes" if disc else "no, fresh")


def build_source_filter_module(cfg: DictConfig, model: SourceFilterVocoder | IstftVocoder, meta) -> SourceFilterModule:
    sf = cfg.frame_vocoder
    loss = OmegaConf.to_container(sf.loss, resolve=True)
    loss["stft_fft_sizes"] = tuple(loss["stft_fft_sizes"])
    gan = sf.get("discriminator") is not None
    return SourceFilterModule(
        model=model,
        meta=meta,
        optimizer=instantiate(sf.optimizer),
        scheduler=instantiate(sf.scheduler) if sf.get("scheduler") else None,
        log_audio_items=cfg.log_audio_items,
        grad_clip=sf.get("grad_clip"),
        discriminator=instantiate(sf.discriminator) if gan else None,
        discriminator_optimizer=instantiate(sf.discriminator_optimizer) if gan else None,
        **loss,
    )


def build(cfg: DictConfig) -> tuple[pl.LightningModule, VocoderDataModule, pl.Trainer]:
    """Everything the run needs, from the composed config (also used by the tests)."""
    mel_config: MelConfig = instantiate(cfg.audio)
    node = OmegaConf.to_container(cfg.vocoder, resolve=True)
    model = build_vocoder(node, mel_config)
    from tts.vocoder.hifigan import HifiGanVocoder  # SpeechBrain: imported only where HiFi-GAN is trained

    if not isinstance(model, (HifiGanVocoder, SourceFilterVocoder, IstftVocoder)):
        raise ValueError(f"vocoder {node['_target_']} has no trainable generator; "
                         "pick vocoder=source_filter|istft|hifigan_v1|hifigan_v3")
    source_filter = isinstance(model, SourceFilterVocoder)
    frame_rate = source_filter or isinstance(model, IstftVocoder)  # the light recipe: settings `frame_vocoder:`
    # The mel config goes in as a Hydra node: instantiate() would turn a MelConfig object into a DictConfig.
    # The source-filter vocoder learns F0 and voicing from the corpus's frame pitch.
    datamodule = instantiate(cfg.vocoder_data, mel_config=mel_config_node(mel_config), with_pitch=source_filter)
    meta = vocoder_meta(
        node,
        mel_config,
        info={"recipe": "recipes.train_vocoder", "experiment": cfg.name, "data": str(cfg.vocoder_data.root),
              "mel_dir": cfg.vocoder_data.mel_dir,
              **({"init_from": str(cfg.init_from)} if cfg.get("init_from") else {})},
    )
    if frame_rate:
        return _finish_build(cfg, build_source_filter_module(cfg, model, meta), datamodule, mel_config, gan=False)
    from tts.training.vocoder_module import VocoderGanModule

    module = VocoderGanModule(
        model=model,
        meta=meta,
        generator_optimizer=instantiate(cfg.optim.generator),
        discriminator_optimizer=instantiate(cfg.optim.discriminator),
        scheduler=instantiate(cfg.optim.scheduler) if cfg.optim.get("scheduler") else None,
        mel_loss_weight=cfg.loss.mel_loss_weight,
        feature_loss_weight=cfg.loss.feature_loss_weight,
        adversarial_loss_weight=cfg.loss.adversarial_loss_weight,
        grad_clip=cfg.grad_clip,
        log_audio_items=cfg.log_audio_items,
        discriminator_start_batch=cfg.discriminator_start_batch,
        stft_loss_weight=cfg.loss.stft_loss_weight,
    )
    return _finish_build(cfg, module, datamodule, mel_config, gan=True)


def _finish_build(cfg: DictConfig, module: pl.LightningModule, datamodule: VocoderDataModule,
                  mel_config: MelConfig, gan: bool) -> tuple[pl.LightningModule, VocoderDataModule, pl.Trainer]:
    if cfg.get("init_from"):
        init_weights(module, cfg.init_from, mel_config)
    exp_dir = Path(cfg.exp_dir)
    # Lightning warns that manual-optimisation checkpoints hold the post-step weights: that is intended.
    warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")
    callbacks = [
        # A vocoder checkpoint is ~870 MB (70.7 M discriminator parameters + two AdamW states):
        # last.ckpt is a symlink to the newest step file instead of a second full copy.
        step_checkpoint(exp_dir, cfg.checkpoint_every_n_steps, cfg.keep_checkpoints, save_last="link"),
        LearningRateMonitor(logging_interval="step"),
        RunSummary(exp_dir, monitor="val/mel_l1"),
    ]
    if cfg.get("ema_decay") is not None:
        # The checkpoints' weights (and validation's) are the moving average; the raw weights travel in the
        # checkpoint's current_model_state, so a resumed run goes on from both.
        callbacks.append(EMAWeightAveraging(decay=float(cfg.ema_decay), use_buffers=True))
    strategy = {}
    if gan and cfg.trainer.get("strategy") == "ddp":
        # Each backward (D step, then G step) reaches only part of the parameters: plain DDP would
        # fail waiting for the gradients of the other network.
        strategy = {"strategy": "ddp_find_unused_parameters_true"}
    trainer = instantiate(cfg.trainer, callbacks=callbacks + progress_bar(cfg.trainer), logger=tensorboard(exp_dir),
                          plugins=[AtomicCheckpointIO()], log_every_n_steps=log_every_n_steps(cfg.trainer), **strategy)
    return module, datamodule, trainer


def preflight(cfg: DictConfig) -> None:
    """The run directory and the corpus, before anything is built (recipes.train.preflight's checks)."""
    if process_rank() != 0:
        return
    prepare_run_dir(cfg.exp_dir, cfg.ckpt_path)
    # the wavs only: the mels are computed from them, and F0 too where the features hold none
    require_corpus(cfg.vocoder_data.root, features=False)


def train(cfg: DictConfig) -> pl.Trainer:
    """The body of `main`, callable with a composed config."""
    quiet_lightning()
    torch.set_num_threads(cfg.threads) if cfg.threads else None
    pl.seed_everything(cfg.seed, workers=True)
    log.info("config:\n%s", OmegaConf.to_yaml(cfg))
    module, datamodule, trainer = build(cfg)
    n_g = sum(p.numel() for p in module.model.parameters())
    disc = getattr(module, "discriminator", None)
    n_d = sum(p.numel() for p in disc.parameters()) if disc is not None else 0
    log.info("generator %.2f M parameters, discriminator %.2f M", n_g / 1e6, n_d / 1e6)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    summary = next(c for c in trainer.callbacks if isinstance(c, RunSummary))
    if trainer.is_global_zero:
        print(summary.summary(trainer), flush=True)
    return trainer


@hydra.main(version_base="1.3", config_path="../conf", config_name="train_vocoder")
@user_errors
def main(cfg: DictConfig) -> None:
    use_job_dir(cfg)
    preflight(cfg)
    train(cfg)


if __name__ == "__main__":
    recipe_entry(main)

"""Train an acoustic model: `python -m recipes.train model=autoregressive data=slt [experiment=...]`.

Resume a killed run with `ckpt_path=last` (same exp_dir).  Start a new run from the weights of an
earlier one (e.g. a shipped release checkpoint, when the training folder is gone) with
`init_from=checkpoints/ar.pt`: weights only, fresh optimizer and schedule.  Multi-GPU: `trainer=ddp`; multi-node:
launch the same command under torchrun with `trainer.num_nodes=N`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from tts.audio import MelConfig
from tts.checkpoint import CheckpointMeta, warm_start
from tts.training.callbacks import SamplerEpoch, step_checkpoint
from tts.training.module import AcousticModule, AtomicCheckpointIO

log = logging.getLogger(__name__)


def build(cfg: DictConfig) -> tuple[AcousticModule, pl.LightningDataModule, pl.Trainer]:
    """Everything the run needs, from the composed config (also used by the tests)."""
    mel_config: MelConfig = instantiate(cfg.audio)
    frontend = instantiate(cfg.text)
    # Derived, never restated: vocabulary size from the symbol table, n_mels from the mel config.
    build_kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    model = instantiate(cfg.model, **build_kwargs)
    # _convert_="object": Hydra would otherwise turn the MelConfig dataclass into a DictConfig
    datamodule = instantiate(cfg.data, frontend=frontend, mel_config=mel_config, _convert_="object")
    warm: dict[str, object] = {}
    if cfg.get("init_from") and not cfg.ckpt_path:
        source = warm_start(model, cfg.init_from, mel_config, frontend.to_dict())
        log.info("weights initialised from %s (%s)", cfg.init_from, source)
        # training steps behind the starting weights, summed over a chain of warm starts
        warm = {"init_from": str(cfg.init_from),
                "steps_before": int(source.get("steps_before") or 0) + int(source.get("global_step") or 0)}
    # After the warm start, whose buffers carry the SOURCE corpus's statistics: a model warm-started
    # from another voice (issue 31: joe from slt) must normalise with this corpus's mel/pitch/energy.
    stats_path = Path(cfg.data.root) / "features" / "stats.json"
    if hasattr(model, "set_data_statistics") and stats_path.is_file():
        model.set_data_statistics(json.loads(stats_path.read_text()))
    meta = CheckpointMeta(
        kind="acoustic",
        model_config=OmegaConf.to_container(cfg.model, resolve=True),
        build_kwargs=build_kwargs,
        mel_config=mel_config,
        frontend=frontend.to_dict(),
        info={"recipe": "recipes.train", "experiment": cfg.name, "data": str(cfg.data.root), **warm},
    )
    module = AcousticModule(
        model=model,
        optimizer=instantiate(cfg.optim.optimizer),
        scheduler=instantiate(cfg.optim.scheduler) if cfg.optim.get("scheduler") else None,
        meta=meta,
        log_audio=cfg.log_audio,
    )
    exp_dir = Path(cfg.exp_dir)
    callbacks = [
        step_checkpoint(exp_dir, cfg.checkpoint_every_n_steps, cfg.keep_checkpoints),
        LearningRateMonitor(logging_interval="step"),
        SamplerEpoch(),  # a new batch order every epoch
    ]
    logger = TensorBoardLogger(save_dir=str(exp_dir), name="tb", version="")
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=logger, plugins=[AtomicCheckpointIO()])
    return module, datamodule, trainer


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> None:
    torch.set_num_threads(cfg.threads) if cfg.threads else None
    pl.seed_everything(cfg.seed, workers=True)
    log.info("config:\n%s", OmegaConf.to_yaml(cfg))
    module, datamodule, trainer = build(cfg)
    n_params = sum(p.numel() for p in module.model.parameters())
    log.info("model %s: %.2f M parameters", type(module.model).__name__, n_params / 1e6)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)


if __name__ == "__main__":
    main()

"""Train an acoustic model: `python -m recipes.train model=autoregressive data=slt [experiment=...]`.

Each run has its own directory, exp_dir (exp/<name>; under Hydra's `-m` each job exp/<name>/job<N>): a new
run into one that holds checkpoints is refused, and resuming a killed run is explicit, `ckpt_path=last`
(tts/training/run_dir.py).  Start a new run from the weights of an earlier one (e.g. a shipped release
checkpoint, when the training folder is gone) with `init_from=checkpoints/ar.pt`: weights only, fresh
optimizer and schedule.  A NAR model trains on durations that the data config locates (data.durations_dir,
e.g. conf/data/slt.yaml): when they are missing the run is refused before training, naming the
recipes.extract_durations command.  `debug=tiny` trains a few steps on a copy of the committed fixture corpus.
Multi-GPU: `trainer=ddp`; multi-node: launch the same command under torchrun with `trainer.num_nodes=N`.
User errors end in one `error:` line and exit 2 (tts/training/cli.py).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import hydra
import lightning.pytorch as pl
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import get_class, instantiate
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf, open_dict

from tts.audio import MelConfig
from tts.checkpoint import CheckpointMeta, warm_start
from tts.models.nonautoregressive import FastSpeech2
from tts.training.callbacks import RunSummary, SamplerEpoch, StepProgressBar, step_checkpoint
from tts.training.cli import recipe_entry, user_errors
from tts.training.module import AcousticModule, AtomicCheckpointIO
from tts.training.noise import quiet_lightning
from tts.training.preflight import require_corpus, require_durations
from tts.training.run_dir import multirun_job_dir, prepare_run_dir, process_rank

log = logging.getLogger(__name__)


def build(cfg: DictConfig) -> tuple[AcousticModule, pl.LightningDataModule, pl.Trainer]:
    """Everything the run needs, from the composed config (also used by the tests)."""
    mel_config: MelConfig = instantiate(cfg.audio)
    frontend = instantiate(cfg.text)
    # Derived, never restated: vocabulary size from the symbol table, n_mels from the mel config.
    build_kwargs = {"n_symbols": len(frontend.symbols), "n_mels": mel_config.n_mels}
    model = instantiate(cfg.model, **build_kwargs)
    # _convert_="object": Hydra would otherwise turn the MelConfig dataclass into a DictConfig.  Only a model
    # that trains on durations reads them: the data config may locate them for every model (conf/data/).
    durations_dir = cfg.data.durations_dir if needs_durations(cfg) else None
    datamodule = instantiate(cfg.data, frontend=frontend, mel_config=mel_config, durations_dir=durations_dir,
                             _convert_="object")
    warm: dict[str, object] = {}
    if cfg.get("init_from") and not cfg.ckpt_path:
        source = warm_start(model, cfg.init_from, mel_config, frontend.to_dict(), tuple(cfg.get("init_from_only") or ()))
        log.info("weights initialised from %s (%s)", cfg.init_from, source)
        # training steps behind the starting weights, summed over a chain of warm starts
        warm = {"init_from": str(cfg.init_from), **({"init_from_only": list(cfg.init_from_only)}
                                                     if cfg.get("init_from_only") else {}),
                # a partial warm start (init_from_only: another architecture's encoder, say) trained a different
                # model: its steps are recorded, not counted as this model's (the carry schedule offset reads them)
                ("init_from_steps" if cfg.get("init_from_only") else "steps_before"): source["steps_behind"]}
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
        RunSummary(exp_dir, monitor="val/loss"),
    ]
    trainer = instantiate(cfg.trainer, callbacks=callbacks + progress_bar(cfg.trainer), logger=tensorboard(exp_dir),
                          plugins=[AtomicCheckpointIO()], log_every_n_steps=log_every_n_steps(cfg.trainer))
    return module, datamodule, trainer


def needs_durations(cfg: DictConfig) -> bool:
    """FastSpeech 2 and its block-wise form train on durations; the AR aligns by itself."""
    return issubclass(get_class(cfg.model._target_), FastSpeech2)


def progress_bar(trainer_cfg: DictConfig) -> list[pl.Callback]:
    """The run's one step bar (Lightning refuses a bar callback when enable_progress_bar is false)."""
    return [StepProgressBar()] if trainer_cfg.get("enable_progress_bar", True) else []


def tensorboard(exp_dir: Path) -> TensorBoardLogger:
    # version "": the run directory is the run (tts/training/run_dir.py), no version_N inside it
    return TensorBoardLogger(save_dir=str(exp_dir), name="tb", version="")


def log_every_n_steps(trainer_cfg: DictConfig) -> int:
    """The configured cadence, but at least ~10 points in a short run: 25 logged nothing in a 20-step run."""
    every = int(trainer_cfg.get("log_every_n_steps") or 50)
    max_steps = int(trainer_cfg.get("max_steps") or -1)
    return min(every, max(1, max_steps // 10)) if max_steps > 0 else every


def use_job_dir(cfg: DictConfig) -> None:
    """Under Hydra's multirun every job trains in its own directory (they all shared exp/<name> before)."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        with open_dict(cfg):
            cfg.exp_dir = str(multirun_job_dir(cfg.exp_dir, hydra_cfg.job.num))


def prepare_fixture(cfg: DictConfig) -> None:
    """debug=tiny: a copy of the committed fixture corpus (cfg.fixture_corpus) with its features, in the run
    directory, so that the smoke run needs nothing prepared and writes nothing into tests/fixtures."""
    root = Path(cfg.data.root)
    if not cfg.get("fixture_corpus") or (root / "features" / "stats.json").is_file():
        return
    if root.resolve() == Path(cfg.fixture_corpus).resolve():
        return  # data.root pointed at the committed fixture itself: never written into (require_corpus says why)
    from data_prep.features import extract_features  # the recipes may use data_prep; the product never does

    if not (root / "metadata.csv").is_file():
        shutil.copytree(cfg.fixture_corpus, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("cache"))
    log.info("debug corpus: %s copied to %s, extracting its features", cfg.fixture_corpus, root)
    extract_features(root, instantiate(cfg.audio), jobs=1)


def preflight(cfg: DictConfig) -> None:
    """Every refusal a user can meet, before anything is built: run directory, corpus, features, durations."""
    if process_rank() != 0:
        return
    prepare_run_dir(cfg.exp_dir, cfg.ckpt_path)
    prepare_fixture(cfg)
    require_corpus(cfg.data.root)
    if needs_durations(cfg):
        require_durations(cfg.data.root, cfg.data.durations_dir)


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
@user_errors
def main(cfg: DictConfig) -> None:
    quiet_lightning()
    use_job_dir(cfg)
    preflight(cfg)
    torch.set_num_threads(cfg.threads) if cfg.threads else None
    pl.seed_everything(cfg.seed, workers=True)
    log.info("config:\n%s", OmegaConf.to_yaml(cfg))
    module, datamodule, trainer = build(cfg)
    n_params = sum(p.numel() for p in module.model.parameters())
    log.info("model %s: %.2f M parameters", type(module.model).__name__, n_params / 1e6)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    summary = next(c for c in trainer.callbacks if isinstance(c, RunSummary))
    if trainer.is_global_zero:
        print(summary.summary(trainer), flush=True)


if __name__ == "__main__":
    recipe_entry(main)

"""The training batch order changes every epoch of a real fit, and a resumed run continues the order."""

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from recipes.train import build
from test_train_recipe import TINY_AR, config
from tts.data.batch import Batch


class BatchLog(Callback):
    """Records the utterance ids of every training batch, per epoch: {epoch: [[id, ...], ...]}."""

    def __init__(self) -> None:
        self.epochs: dict[int, list[list[str]]] = {}

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module, batch: Batch, batch_idx: int) -> None:
        self.epochs.setdefault(trainer.current_epoch, []).append(list(batch.ids))


def fit_logged(overrides: list[str], keep_all_in: Path | None = None) -> BatchLog:
    """A recipes.train fit recording its batches; `keep_all_in`: also keep a checkpoint every 2 steps there."""
    cfg = config(overrides)
    module, datamodule, trainer = build(cfg)
    log = BatchLog()
    trainer.callbacks.append(log)
    if keep_all_in is not None:
        trainer.callbacks.append(ModelCheckpoint(keep_all_in, "step{step}", every_n_train_steps=2, save_top_k=-1,
                                                 auto_insert_metric_name=False))
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path)
    return log


def test_two_epochs_of_a_real_fit_see_different_batch_orders_and_resume_continues(
    featurised_corpus: Path, tmp_path: Path
):
    # fixture: 16 train utterances, batch 4 -> 4 batches an epoch; 8 steps = 2 epochs.  Pools of one batch
    # (bucket_multiplier=1), so that the batches themselves, not only their order, are drawn each epoch.
    base = ["debug=tiny", f"data.root={featurised_corpus}", "log_audio=false", "trainer.val_check_interval=100",
            "data.bucket_multiplier=1", *TINY_AR]
    whole = fit_logged(base + [f"exp_dir={tmp_path / 'whole'}", "trainer.max_steps=8"], keep_all_in=tmp_path / "all")
    assert sorted(whole.epochs) == [0, 1]
    first, second = whole.epochs[0], whole.epochs[1]
    assert sorted(i for b in first for i in b) == sorted(i for b in second for i in b)  # same utterances
    assert first != second  # ... in another order
    assert not any(b in second for b in first)

    # Resumed runs continue in epoch 1 with epoch 1's batches, not epoch 0's (Lightning's own restart
    # bookkeeping decides how many of them it replays): from a run that ended after epoch 0 ...
    fit_logged(base + [f"exp_dir={tmp_path / 'ended'}", "trainer.max_steps=4", "checkpoint_every_n_steps=4"])
    resumed = {"ended": fit_logged(base + [f"exp_dir={tmp_path / 'ended'}", "trainer.max_steps=8", "ckpt_path=last"])}
    # ... and from the checkpoints of the uninterrupted run on the last batch of epoch 0 and within epoch 1
    for step in (4, 6):
        ckpt = tmp_path / "all" / f"step{step}.ckpt"
        resumed[step] = fit_logged(base + [f"exp_dir={tmp_path / str(step)}", "trainer.max_steps=8", f"ckpt_path={ckpt}"])
    for name, log in resumed.items():
        assert min(log.epochs) == 1 and log.epochs[1], name
        assert all(b in second for b in log.epochs[1]), name

"""Distributed training on CPU with 2 processes (gloo): the masked BatchNorm's global statistics, and the
AR, NAR and vocoder recipes fitting a few steps under DDP (run as subprocesses, as a user would)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from test_train_recipe import TINY_AR, TINY_NAR
from tts import checkpoint
from tts.models.layers.conv import MaskedBatchNorm1d
from tts.paths import REPO_ROOT

WORLD = 2


def _batchnorm_rank(rank: int, init_file: str, x: torch.Tensor, mask: torch.Tensor, out_dir: str) -> None:
    """One rank: the BN forward/backward on its half of the batch; saves output and gradients."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)
        bn = MaskedBatchNorm1d(3)
        half = slice(rank * 2, rank * 2 + 2)
        xr = x[half].clone().requires_grad_(True)
        y = bn(xr, mask[half])
        # a loss that weights positions unequally, so that the gradient through the statistics matters
        (y * torch.arange(y.numel()).reshape(y.shape)).sum().backward()
        # DDP would average the parameter gradients over ranks; the statistics' share is already global
        for p in bn.parameters():
            dist.all_reduce(p.grad)
        torch.save({"y": y.detach(), "x_grad": xr.grad, "w_grad": bn.weight.grad, "running_mean": bn.running_mean},
                   Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_masked_batchnorm_uses_global_statistics_across_ranks(tmp_path: Path):
    # 4 items, 2 per rank, with padding of different lengths: under DDP each rank's output and gradients
    # equal those of one process holding the whole batch
    torch.manual_seed(1)
    x = torch.randn(4, 3, 7)
    mask = (torch.arange(7)[None, :] < torch.tensor([7, 3, 5, 2])[:, None])[:, None, :]  # [4, 1, 7]
    mp.spawn(_batchnorm_rank, args=(str(tmp_path / "init"), x, mask, str(tmp_path)), nprocs=WORLD)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]

    torch.manual_seed(0)
    bn = MaskedBatchNorm1d(3)
    xs = x.clone().requires_grad_(True)
    y = bn(xs, mask)
    weights = torch.cat([torch.arange(y[:2].numel()).reshape(y[:2].shape)] * 2)
    (y * weights).sum().backward()
    torch.testing.assert_close(torch.cat([r["y"] for r in ranks]), y.detach())
    torch.testing.assert_close(torch.cat([r["x_grad"] for r in ranks]), xs.grad)
    torch.testing.assert_close(ranks[0]["w_grad"], bn.weight.grad)
    torch.testing.assert_close(ranks[1]["running_mean"], bn.running_mean)


def _sampler_rank(rank: int, init_file: str, lengths: list[int], out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        from tts.data.sampler import LengthBucketSampler

        sampler = LengthBucketSampler(lengths, 4, seed=3)  # rank and world size from torch.distributed
        torch.save(list(sampler), Path(out_dir) / f"batches{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_ranks_see_disjoint_batches(tmp_path: Path):
    lengths = [50 + (i * 37) % 400 for i in range(32)]  # 8 batches of 4: no padding on 2 ranks
    mp.spawn(_sampler_rank, args=(str(tmp_path / "init"), lengths, str(tmp_path)), nprocs=WORLD)
    ranks = [torch.load(tmp_path / f"batches{r}.pt") for r in range(WORLD)]
    seen = [[i for b in batches for i in b] for batches in ranks]
    assert len(ranks[0]) == len(ranks[1]) == 4
    assert not set(seen[0]) & set(seen[1]) and sorted(seen[0] + seen[1]) == list(range(32))


# --- the recipes under DDP, as subprocesses (Lightning's CPU DDP launches one process per rank) ---------

DDP = ["trainer=ddp_cpu", "threads=1", "log_audio=false"]


def recipe(module: str, *overrides: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    # own session: a kill reaches the launcher and the rank it started
    return subprocess.Popen([sys.executable, "-m", module, *overrides], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, **popen)


def finish(proc: subprocess.Popen, timeout: float = 240) -> None:  # ~25 s idle; x5 seen on a loaded machine
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, err.decode()[-3000:]


def checkpoint_files(exp_dir: Path) -> list[str]:
    return sorted(p.name for p in (exp_dir / "checkpoints").iterdir())


def test_ar_ddp_fit_writes_one_checkpoint_and_a_killed_run_resumes(featurised_corpus: Path, tmp_path: Path):
    base = ["debug=tiny", f"data.root={featurised_corpus}", f"exp_dir={tmp_path}", *DDP, *TINY_AR]
    proc = recipe("recipes.train", *base, "trainer.max_steps=400", "checkpoint_every_n_steps=2")
    last = tmp_path / "checkpoints" / "last.ckpt"
    deadline = time.monotonic() + 120
    while not last.is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher (rank 0) and rank 1
    proc.wait()
    assert last.is_file(), proc.stderr.read().decode()[-3000:]
    step = checkpoint.read_raw(last)["global_step"]
    assert 2 <= step < 400
    # rank 0 alone writes: step files and last.ckpt, no per-rank copies or versioned duplicates
    assert all(name == "last.ckpt" or name.startswith("step") for name in checkpoint_files(tmp_path))

    finish(recipe("recipes.train", *base, f"trainer.max_steps={step + 2}", "ckpt_path=last"))
    assert checkpoint.read_raw(last)["global_step"] == step + 2


def test_nar_ddp_fit(featurised_corpus: Path, tmp_path: Path):
    from helpers import TINY, tiny_checkpoint
    from recipes.extract_durations import distil
    from tts.data.dataset import TTSDataset

    teacher = checkpoint.load(tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"]))
    dur_dir = tmp_path / "durations"
    dur_dir.mkdir()
    for split in ("train", "val"):
        distil(teacher.model, TTSDataset(featurised_corpus, split, teacher.frontend(), teacher.mel_config), dur_dir,
               batch_size=8, max_skip=1)
    exp = tmp_path / "exp"
    finish(recipe("recipes.train", "debug=tiny", "model=nonautoregressive", f"data.root={featurised_corpus}",
                  f"data.durations_dir={dur_dir}", f"exp_dir={exp}", "trainer.max_steps=4",
                  "checkpoint_every_n_steps=2", *DDP, *TINY_NAR))
    assert checkpoint.read_raw(exp / "checkpoints" / "last.ckpt")["global_step"] == 4


@pytest.mark.parametrize("vocoder", ["hifigan_v3", "source_filter"])
def test_vocoder_ddp_fit(vocoder: str, fixture_corpus: Path, tmp_path: Path):
    # HiFi-GAN with one generator-only warm-up batch: the discriminator gets no gradient in it, which
    # plain DDP rejects (the recipe uses ddp_find_unused_parameters_true for the GAN)
    warmup = ["discriminator_start_batch=1"] if vocoder == "hifigan_v3" else []
    finish(recipe("recipes.train_vocoder", f"vocoder={vocoder}", "vocoder_debug=tiny", "trainer=ddp_cpu",
                  f"data.root={fixture_corpus}", f"exp_dir={tmp_path}", "trainer.max_steps=4",
                  "trainer.val_check_interval=2", "checkpoint_every_n_steps=2", *warmup))
    assert checkpoint.read_raw(tmp_path / "checkpoints" / "last.ckpt")["global_step"] == 4

"""Distributed training on CPU with 2 processes (gloo): the masked BatchNorm's global statistics, and the
AR, NAR and vocoder recipes fitting a few steps under DDP (run as subprocesses, as a user would)."""

from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tts.models.layers.conv import MaskedBatchNorm1d

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

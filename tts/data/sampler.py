"""Length-bucketing batch sampler: batches of similar length, so little of each batch is padding."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import Sampler


class LengthBucketSampler(Sampler[list[int]]):
    """Yields lists of dataset indices.

    Each epoch: shuffle all indices (seeded by `seed + epoch`), cut them into pools of
    `batch_size * bucket_multiplier`, sort each pool by length, cut pools into batches, shuffle the
    batches.  Batches are then dealt round-robin to DDP ranks (`num_replicas`, `rank`; taken from
    torch.distributed when it is initialised), every rank getting the same number of batches, so the
    trainer must not wrap it in a DistributedSampler (`use_distributed_sampler: false`).  When the batch
    count does not divide by the ranks (and `drop_last` is off) the list is padded by wrapping around it:
    the k-th extra batch repeats batch k, so at most `num_replicas - 1` different batches are seen twice.

    The epoch must be set before each epoch's `__iter__`: Lightning calls `set_epoch` only on a
    `batch_sampler.sampler`, never on a batch sampler itself, so the recipes add
    `tts.training.callbacks.SamplerEpoch`, which sets it from the trainer's epoch (also after a resume).
    The number of batches does not depend on the epoch (pools have fixed sizes), so `len()` is stable.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        bucket_multiplier: int = 50,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if len(lengths) == 0:
            raise ValueError("cannot sample from an empty dataset")
        distributed = dist.is_available() and dist.is_initialized()
        self.num_replicas = num_replicas if num_replicas is not None else (dist.get_world_size() if distributed else 1)
        self.rank = rank if rank is not None else (dist.get_rank() if distributed else 0)
        self.lengths = list(lengths)
        self.batch_size = batch_size
        self.pool_size = batch_size * bucket_multiplier
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        n = len(self.lengths)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=g).tolist()
        else:
            order = sorted(range(n), key=lambda i: self.lengths[i])
        batches: list[list[int]] = []
        for start in range(0, n, self.pool_size):
            pool = sorted(order[start : start + self.pool_size], key=lambda i: self.lengths[i])
            for b in range(0, len(pool), self.batch_size):
                batch = pool[b : b + self.batch_size]
                if len(batch) == self.batch_size or not self.drop_last:
                    batches.append(batch)
        if self.shuffle:
            perm = torch.randperm(len(batches), generator=g).tolist()
            batches = [batches[i] for i in perm]
        return batches

    def _rank_batches(self) -> list[list[int]]:
        batches = self._all_batches()
        per_rank = len(batches) // self.num_replicas if self.drop_last else -(-len(batches) // self.num_replicas)
        # pad by wrapping around (extra batch k repeats batch k) so that every rank runs the same number
        # of steps, which DDP needs; not always batch 0, which would weight one batch per epoch
        n_real = len(batches)
        batches += [batches[k % n_real] for k in range(per_rank * self.num_replicas - n_real)]
        return batches[self.rank : per_rank * self.num_replicas : self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._rank_batches())

    def __len__(self) -> int:
        return len(self._rank_batches())

import random

import pytest

from tts.data.sampler import LengthBucketSampler


def lengths(n=503, seed=0):
    rng = random.Random(seed)
    return [rng.randint(50, 900) for _ in range(n)]


def test_every_index_once_and_batches_are_similar_length():
    ls = lengths()
    s = LengthBucketSampler(ls, batch_size=16, bucket_multiplier=10, seed=3)
    batches = list(s)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(ls)))
    assert len(batches) == len(s) == -(-len(ls) // 16)
    # bucketing: mean spread inside a batch is far below the spread of random batches
    spread = sum(max(ls[i] for i in b) - min(ls[i] for i in b) for b in batches) / len(batches)
    assert spread < 0.2 * (max(ls) - min(ls))


def test_deterministic_per_epoch_and_changes_between_epochs():
    ls = lengths()
    a = LengthBucketSampler(ls, 8, seed=1)
    b = LengthBucketSampler(ls, 8, seed=1)
    assert list(a) == list(b)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first


def test_drop_last():
    s = LengthBucketSampler(list(range(1, 21)), batch_size=8, bucket_multiplier=1, drop_last=True, shuffle=False)
    assert all(len(b) == 8 for b in s) and len(s) == 2


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_partition_batches_and_get_equal_counts(world):
    ls = lengths(101)
    per_rank = [list(LengthBucketSampler(ls, 8, seed=5, num_replicas=world, rank=r)) for r in range(world)]
    assert len({len(p) for p in per_rank}) == 1
    seen = [i for p in per_rank for b in p for i in b]
    assert set(seen) == set(range(len(ls)))  # nothing lost; wrap-around may repeat a batch


def test_bad_arguments():
    with pytest.raises(ValueError, match="empty"):
        LengthBucketSampler([], 4)
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketSampler([1, 2], 0)


def test_padding_wraps_around_different_batches_not_batch_0():
    # 5 batches on 4 ranks -> 8 slots: the 3 extra batches repeat batches 0, 1, 2 of the epoch's list
    ls = lengths(40)
    world = 4
    full = list(LengthBucketSampler(ls, 8, seed=2))
    per_rank = [list(LengthBucketSampler(ls, 8, seed=2, num_replicas=world, rank=r)) for r in range(world)]
    dealt = [per_rank[k % world][k // world] for k in range(2 * world)]
    assert dealt == full + full[:3]

"""recipes.benchmark kv-cache (issue 37 item 1's measurements) on a tiny TransformerAR: the subcommand runs end to
end and writes its three files, the cache's bytes are linear in the decoded length and agree with the tensors,
the budget arithmetic is right on a hand-made example, and bad arguments exit 2 with a clear message.  CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from recipes import benchmark
from recipes.bench import kv_cache
from recipes.bench.systems import build_random_checkpoint
from test_transformer_ar import TINY

# fast: a few steps, one repeat, a window of 2 steps
ARGS = ["--lengths", "6,12,24", "--uncached-at", "12", "--tokens", "5", "--batch-sizes", "1,2", "--repeats", "1",
        "--window", "2", "--threads", "1", "--budget-mb", "0.25"]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    before = torch.get_num_threads()
    path = build_random_checkpoint(tmp_path_factory.mktemp("kv") / "tiny_tar.pt", "transformer_ar", TINY)
    yield path
    torch.set_num_threads(before)  # the run sets one thread


def test_the_subcommand_writes_its_three_files(tiny_checkpoint: Path, tmp_path: Path, capsys):
    out = tmp_path / "out"
    assert benchmark.main(["kv-cache", "--checkpoint", str(tiny_checkpoint), *ARGS, "--out", str(out)]) == 0
    res = json.loads((out / "kv_cache.json").read_text())
    assert (out / "kv_cache.png").stat().st_size > 0
    md = (out / "kv_cache.md").read_text()
    assert "Per-step time" in md and "Cache memory" in md and "0.25 MB" in md
    assert [(r["batch"], r["frames"]) for r in res["speed"]] == [(b, f) for b in (1, 2) for f in (6, 12, 24)]
    # uncached only up to --uncached-at; every time positive
    assert all((r["uncached_step_ms"] is None) == (r["frames"] > 12) for r in res["speed"])
    assert all(0 < r["cached_self_attention_ms"] < r["cached_step_ms"] for r in res["speed"])
    assert all(s["speedup"] > 0 and s["flatness"] >= 1 for s in res["speed_summary"])
    assert all(c["agree"] for c in res["accounting_check"])
    assert res["machine"]["torch_threads"] == 1 and res["model"]["reduction_factor"] == TINY["reduction_factor"]
    assert "wrote" in capsys.readouterr().out


def test_cache_memory_is_linear_in_the_decoded_length(tiny_checkpoint: Path):
    subject = kv_cache.load_subject(str(tiny_checkpoint))
    r = subject.r
    n = 5 * r  # frames; 2n has twice the positions
    by_batch = {}
    for batch in (1, 3):
        points, check = kv_cache.measure_memory(subject, batch, [n, 2 * n], n_tokens=4, seed=0)
        used = {p.frames: p.used_bytes for p in points}
        assert used[2 * n] - used[n] == used[n] - used[0] > 0
        assert check["agree"]  # the model's accounting == the tensors' nbytes == infer's cache_bytes
        by_batch[batch] = kv_cache.fit_memory(points, r, n_tokens=4)
        assert by_batch[batch].linear
    # per item the same: a batch of 3 is 3 caches of 1
    assert by_batch[3].bytes_per_frame_per_item == by_batch[1].bytes_per_frame_per_item
    assert by_batch[3].fixed_bytes == 3 * by_batch[1].fixed_bytes
    # what the slope must be: K and V, every layer, d_model float32 values per position (r frames), per item
    layers, d_model = TINY["decoder_layers"], TINY["d_model"]
    assert by_batch[1].bytes_per_frame_per_item == 2 * layers * d_model * 4 / r
    # the fixed part is the text's cross K/V: the same count per token
    assert by_batch[1].fixed_bytes == 2 * layers * d_model * 4 * 4


def test_the_budget_arithmetic_on_a_hand_made_example():
    fit = kv_cache.Fit(batch=2, fixed_bytes=1000, per_step_bytes=100, bytes_per_frame_per_item=100 / 6,
                       fixed_bytes_per_item_per_token=0.0, linear=True)
    # 1 MiB: (1048576 - 1000) // 100 = 10475 steps -> 31425 frames at r = 3; at hop 256, 22050 Hz:
    row = kv_cache.budget_row(fit, budget_mb=1.0, r=3, hop=256, sample_rate=22050, start_capacity=64)
    assert (row.steps, row.frames) == (10475, 31425)
    assert row.seconds == pytest.approx(31425 * 256 / 22050)
    # doubling from 64: growing to 2c holds c + 2c; 1000 + 3 x 2048 x 100 fits 1 MiB, 1000 + 3 x 4096 x 100 not
    assert row.doubling_frames == 4096 * 3
    assert kv_cache.longest_fit(budget_bytes=999, fixed_bytes=1000, per_step_bytes=100) == 0
    assert kv_cache.longest_fit(budget_bytes=1250, fixed_bytes=1000, per_step_bytes=100) == 2
    assert kv_cache.longest_fit_doubling(1000 + 64 * 100 - 1, 1000, 100, start_capacity=64) == 0
    assert kv_cache.longest_fit_doubling(1000 + 64 * 100, 1000, 100, start_capacity=64) == 64


@pytest.mark.parametrize("bad, message", [
    (["--lengths", "0,100"], "integers >= 1"),
    (["--lengths", "a,b"], "comma-separated integers"),
    (["--repeats", "0"], "--repeats must be >= 1"),
    (["--budget-mb", "0"], "--budget-mb must be > 0"),
    (["--lengths", "100,200", "--uncached-at", "500"], "beyond the longest --lengths"),
])
def test_bad_arguments_exit_2_with_a_message(bad: list[str], message: str, capsys):
    with pytest.raises(SystemExit) as e:
        benchmark.main(["kv-cache", *bad])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_missing_or_wrong_checkpoint_exits_2(tmp_path: Path, capsys):
    assert benchmark.main(["kv-cache", "--checkpoint", str(tmp_path / "none.pt"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    taco = build_random_checkpoint(tmp_path / "taco.pt", "autoregressive")
    assert benchmark.main(["kv-cache", "--checkpoint", str(taco), "--out", str(tmp_path)]) == 2
    assert "not a TransformerAR" in capsys.readouterr().err

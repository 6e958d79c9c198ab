"""`python -m recipes.benchmark batching` (recipes/bench/batching.py): the padding arithmetic, the batch orders, the
subcommand end to end on tiny random-weight checkpoints, and its refusals."""

import json
from pathlib import Path

import pytest

from recipes import benchmark
from recipes.bench.batching import Item, decoder_steps, make_batches, padding
from tests.helpers import TINY, tiny_checkpoint

FIXTURE = Path(__file__).parent / "fixtures" / "slt20"


def items_of_lengths(lengths: list[int]) -> list[Item]:
    return [Item(i, f"u{i}", "", tuple(range(1, n + 1))) for i, n in enumerate(lengths)]


def test_padding_fraction_of_a_hand_made_batch():
    # one batch of 3 items of 3, 5 and 8 positions: 3 x 8 = 24 computed, 16 real
    p = padding([[3, 5, 8]])
    assert (p.computed, p.useful) == (24, 16)
    assert p.fraction == pytest.approx(1 - 16 / 24)
    # two batches add up: [3, 5] -> 10 computed, [8] -> 8 computed
    assert padding([[3, 5], [8]]).fraction == pytest.approx(1 - 16 / 18)
    assert padding([[4, 4]]).fraction == 0.0
    # an AR decodes r frames a step: 7 frames at r = 2 are 4 steps
    assert decoder_steps([7, 8, 1], 2) == [4, 4, 1]


def test_bucketed_batches_never_pad_more_than_random_ones():
    lengths = [12, 80, 33, 5, 61, 47, 20, 90, 8, 55, 41, 27, 70, 15]
    items = items_of_lengths(lengths)
    for size in (1, 2, 3, 4, 8, 14, 20):
        bucketed = make_batches(items, size, "bucketed", 0)
        assert sorted(it.index for b in bucketed for it in b) == list(range(len(items)))
        assert all(len(b) == size for b in bucketed[:-1])
        waste = padding([[len(it.ids) for it in b] for b in bucketed]).fraction
        for seed in range(20):
            shuffled = make_batches(items, size, "random", seed)
            assert sorted(it.index for b in shuffled for it in b) == list(range(len(items)))
            assert waste <= padding([[len(it.ids) for it in b] for b in shuffled]).fraction + 1e-12
    assert make_batches(items, 4, "random", 3) == make_batches(items, 4, "random", 3)  # seeded


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("batching")
    return {"ar": tiny_checkpoint(d / "ar.pt", "autoregressive", **TINY["autoregressive"]),
            "nar": tiny_checkpoint(d / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"]),
            "dir": d}


def test_the_subcommand_runs_end_to_end_and_writes_its_three_files(tiny, capsys):
    out = tiny["dir"] / "out"
    rc = benchmark.main(["batching", "--ar", str(tiny["ar"]), "--nar", str(tiny["nar"]), "--vocoder", "source-filter",
                         "--data", str(FIXTURE), "--split", "train", "--limit", "7", "--batch-sizes", "1,3",
                         "--repeats", "1", "--threads", "1", "--out", str(out)])
    assert rc == 0
    for name in ("batching.json", "batching.md", "batching.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    r = json.loads((out / "batching.json").read_text())
    cells = {(c["system"], c["order"], c["batch_size"]): c for c in r["cells"]}
    assert set(cells) == {(s, o, b) for s in ("ar", "nar") for o in ("bucketed", "random") for b in (1, 3)}
    for c in r["cells"]:
        assert c["sentences"] == 7 and c["audio_s_per_s_model"] > c["audio_s_per_s_end_to_end"] > 0
        if c["batch_size"] == 1:  # alone: nothing is padding
            assert all(p["fraction"] == 0 for p in c["padding"].values())
    assert set(cells["ar", "random", 3]["padding"]) == {"tokens", "steps"}
    assert set(cells["nar", "random", 3]["padding"]) == {"tokens", "frames"}
    for system, second in (("ar", "steps"), ("nar", "frames")):
        b, s = cells[system, "bucketed", 3]["padding"], cells[system, "random", 3]["padding"]
        assert b["tokens"]["fraction"] <= s["tokens"]["fraction"]
        # random weights: frames forced in proportion to the symbols, so bucketing by symbols buckets frames
        assert b[second]["fraction"] <= s[second]["fraction"]
    # the NAR's items batched equal themselves alone; the Tacotron 2 AR's differ by design (stated, not failed)
    assert r["invariance"]["nar"]["invariant"] is True and r["invariance"]["nar"]["items_compared"] == 14
    assert r["invariance"]["ar"]["invariant"] is None and "by design" in r["invariance"]["ar"]["statement"]
    md = (out / "batching.md").read_text()
    assert "| nar | bucketed | 3 |" in md and "does not change the output" in md
    assert "B=  3" in capsys.readouterr().out  # measured figures are printed as they come


@pytest.mark.parametrize("args, message", [(["--batch-sizes", "0,2"], "batch sizes must be >= 1"),
                                           (["--orders", "bucketed,sorted"], "unknown order"),
                                           (["--repeats", "0"], "must be >= 1")])
def test_bad_arguments_exit_2_with_a_clear_message(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        benchmark.main(["batching", *args])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_transformer_ar_runs_and_its_batched_items_equal_themselves_alone(tmp_path):
    # nothing Tacotron-specific: any AR the engine runs (r from the model), here the KV-cached Transformer AR,
    # whose noise is per item, so that batching must not change its output
    tar = pytest.importorskip("test_transformer_ar", reason="the Transformer AR is not in this tree")
    ckpt = tiny_checkpoint(tmp_path / "tar.pt", "transformer_ar", **tar.TINY)
    out = tmp_path / "out"
    assert benchmark.main(["batching", "--ar", str(ckpt), "--systems", "ar", "--vocoder", "source-filter",
                           "--data", str(FIXTURE), "--split", "train", "--limit", "5", "--batch-sizes", "2,4",
                           "--orders", "random", "--repeats", "1", "--out", str(out)]) == 0
    r = json.loads((out / "batching.json").read_text())
    assert r["systems"]["ar"]["model"] == "TransformerAR" and r["systems"]["ar"]["per_item_noise"]
    assert r["invariance"]["ar"]["invariant"] is True and r["invariance"]["ar"]["items_compared"] == 10

from pathlib import Path

import pytest
import torch

from tts import checkpoint
from tts.audio import MelConfig
from tts.checkpoint import CheckpointError, CheckpointMeta


def meta() -> CheckpointMeta:
    return CheckpointMeta(
        kind="acoustic",
        model_config={"_target_": "torch.nn.Linear", "bias": True},
        build_kwargs={"in_features": 3, "out_features": 2},
        mel_config=MelConfig.default(),
        frontend=None,
        info={"note": "test"},
    )


def test_round_trip_rebuilds_model_from_file_alone(tmp_path: Path):
    m = meta().build_model()
    p = tmp_path / "m.pt"
    checkpoint.save(p, m, meta())
    loaded = checkpoint.load(p)
    assert isinstance(loaded.model, torch.nn.Linear) and not loaded.model.training
    assert torch.equal(loaded.model.weight, m.weight)
    assert loaded.mel_config == MelConfig.default()
    assert loaded.meta.info == {"note": "test"}


def test_half_export_is_smaller_and_loads_as_float32(tmp_path: Path):
    torch.manual_seed(0)
    m = torch.nn.Linear(300, 200)
    md = meta()
    md.build_kwargs = {"in_features": 300, "out_features": 200}
    checkpoint.save(tmp_path / "full.pt", m, md)
    checkpoint.export(tmp_path / "full.pt", tmp_path / "half.pt", half=True, info={"exported": True})
    assert (tmp_path / "half.pt").stat().st_size < 0.6 * (tmp_path / "full.pt").stat().st_size
    loaded = checkpoint.load(tmp_path / "half.pt")
    assert loaded.model.weight.dtype == torch.float32
    assert (loaded.model.weight - m.weight).abs().max() < 1e-3
    assert loaded.meta.info["exported"] is True


def test_lightning_prefixed_weights(tmp_path: Path):
    m = meta().build_model()
    raw = {"tts": meta().to_dict(), "state_dict": {f"model.{k}": v for k, v in m.state_dict().items()}, "optimizer_states": []}
    torch.save(raw, tmp_path / "last.ckpt")
    assert torch.equal(checkpoint.load(tmp_path / "last.ckpt").model.bias, m.bias)


def test_bad_files_give_clear_errors(tmp_path: Path):
    with pytest.raises(CheckpointError, match="not found"):
        checkpoint.load(tmp_path / "nope.pt")
    (tmp_path / "junk.pt").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(tmp_path / "junk.pt")
    good = tmp_path / "good.pt"
    checkpoint.save(good, meta().build_model(), meta())
    (tmp_path / "trunc.pt").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(tmp_path / "trunc.pt")
    torch.save({"weights": 1}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a tts checkpoint"):
        checkpoint.load(tmp_path / "foreign.pt")
    raw = torch.load(good, weights_only=False)
    raw["state_dict"]["weight"] = torch.zeros(5, 5)
    torch.save(raw, tmp_path / "shape.pt")
    with pytest.raises(CheckpointError, match="do not fit"):
        checkpoint.load(tmp_path / "shape.pt")


def test_atomic_save_keeps_old_file_when_writing_fails(tmp_path: Path):
    p = tmp_path / "c.pt"
    checkpoint.atomic_torch_save({"v": 1}, p)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full, say")

    with pytest.raises(RuntimeError, match="disk full"):
        checkpoint.atomic_torch_save({"v": 2, "x": Unpicklable()}, p)
    assert torch.load(p)["v"] == 1
    assert [f.name for f in tmp_path.iterdir()] == ["c.pt"]  # no temp file left behind

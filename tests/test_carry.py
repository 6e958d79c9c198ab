"""A run carried across machines (recipes.carry): weights saved, steps counted, the schedule continued."""

from pathlib import Path

import pytest
import torch

from recipes import carry
from tests.test_train_recipe import TINY_AR, config, fit
from recipes.train import build
from tts import checkpoint
from tts.training.schedules import warmup_then_decay


def lrs(steps: int, **kwargs) -> list[float]:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = warmup_then_decay(opt, **kwargs)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_schedule_offset_continues_the_decay_after_a_fresh_warmup():
    kw = dict(decay_start=10, decay_rate=0.5, decay_every=10)
    plain = lrs(60, warmup_steps=4, **kw)
    assert plain[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0]) and plain[9] == 1.0
    assert plain[20] == pytest.approx(0.5) and plain[30] == pytest.approx(0.25)
    # weights trained 20 steps: the decay reads 20 + step, the warm-up ramps to the decayed rate
    carried = lrs(40, warmup_steps=4, offset=20, **kw)
    assert carried[:4] == pytest.approx([0.25 * plain[20], 0.5 * plain[21], 0.75 * plain[22], plain[23]])
    assert carried[4:] == pytest.approx(plain[24:60])


def test_carry_save_counts_steps_and_a_warm_start_from_it_continues(featurised_corpus: Path, tmp_path: Path):
    base = ["debug=tiny", f"data.root={featurised_corpus}", "log_audio=false", "trainer.max_steps=5", *TINY_AR]
    with pytest.raises(SystemExit, match="nothing to carry"):
        carry.save(tmp_path / "first", tmp_path / "carried.pt")
    fit(base + [f"exp_dir={tmp_path / 'first'}"])
    carried = tmp_path / "carry" / "run.pt"
    assert carry.save(tmp_path / "first", carried) == 5 and carry.total_steps(carried) == 5
    first = tmp_path / "first.pt"
    first.write_bytes(carried.read_bytes())
    assert carried.stat().st_size < (tmp_path / "first" / "checkpoints" / "last.ckpt").stat().st_size / 2
    trained = checkpoint.load(tmp_path / "first" / "checkpoints" / "last.ckpt").model.state_dict()
    for name, value in checkpoint.load(carried).model.state_dict().items():
        assert torch.allclose(value, trained[name], rtol=1e-3, atol=1e-3), name  # fp16

    # the next session: weights from the carried file, the schedule offset by the steps behind them
    second = base + [f"exp_dir={tmp_path / 'second'}", f"init_from={carried}", "optim.scheduler.offset=5"]
    module, _, _ = build(config(second))
    assert module.meta.info["steps_before"] == 5
    fit(second)
    assert carry.save(tmp_path / "second", carried) == 10  # a chain of carries sums the steps
    assert main_steps(carried) == "10"
    # an experiment that began as a full warm start from `first` (nar_joe from the slt voice) has trained 5 of
    # them; one that took only parts of it (init_from_only) began its schedule at 0 and owns all 10
    assert carry.experiment_steps(carried, str(first), partial=False) == 5
    assert carry.experiment_steps(carried, str(first), partial=True) == 10
    assert carry.experiment_steps(carried, None, partial=False) == 10


def test_start_resumes_else_continues_the_carried_weights_else_starts(tmp_path: Path):
    """The overrides scripts/train_transformer_ar.sh and train_nar_joe.sh run with, for the committed carry."""
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(str(carry.CONF), version_base=None):
        total = compose("train", ["experiment=tar_cpu_small"]).trainer.max_steps
    carried = Path("carry/tar_cpu_small.pt")
    done = carry.total_steps(carried)  # the Transformer AR's first start took only ar.pt's parts: all its own
    run = [f"exp_dir={tmp_path / 'run'}"]
    assert carry.start_overrides("tar_cpu_small", carried, run) == [
        f"init_from={carried}", "~init_from_only", f"optim.scheduler.offset={done}",
        f"optim.scheduler.warmup_steps={carry.FRESH_WARMUP}", f"trainer.max_steps={total - done}"]
    assert carry.start_overrides("tar_cpu_small", tmp_path / "absent.pt", run) == []
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert carry.start_overrides("tar_cpu_small", carried, run) == ["ckpt_path=last"]
    with pytest.raises(SystemExit) as finished:
        carry.start_overrides("tar_cpu_small", carried, [f"exp_dir={tmp_path / 'other'}", f"trainer.max_steps={done}"])
    assert finished.value.code == carry.DONE


def main_steps(path: Path) -> str:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert carry.main(["steps", str(path)]) == 0
    return buf.getvalue().strip()

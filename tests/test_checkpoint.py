"""tts.checkpoint: self-describing files that rebuild their model alone, and that are data, never code (issue 35
item 1): a pickle that calls anything, or a config naming anything but this project's model classes, is refused
without running it."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY, tiny_checkpoint, tiny_vocoder_checkpoint

from tts import checkpoint
from tts.checkpoint import ALLOWED_TARGETS, CheckpointError
from tts.errors import UntrustedCheckpointError
from tts.paths import CHECKPOINT_DIR, REPO_ROOT
from tts.vocoder.registry import load_vocoder


@pytest.fixture(scope="module")
def nar(tmp_path_factory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("nar") / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])


def raw_of(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def test_round_trip_rebuilds_model_from_file_alone(nar: Path):
    loaded = checkpoint.load(nar)
    assert type(loaded.model).__name__ == "FastSpeech2" and not loaded.model.training
    stored = raw_of(nar)["state_dict"]
    assert stored.keys() == loaded.model.state_dict().keys()
    assert all(torch.equal(stored[k].float(), v.float()) for k, v in loaded.model.state_dict().items())
    assert loaded.meta.info == {"note": "random test model"}


def test_half_export_is_smaller_and_loads_as_float32(nar: Path, tmp_path: Path):
    checkpoint.export(nar, tmp_path / "half.pt", "fp16", info={"exported": True})
    assert (tmp_path / "half.pt").stat().st_size < 0.6 * nar.stat().st_size
    full, half = checkpoint.load(nar).model, checkpoint.load(tmp_path / "half.pt")
    w = next(n for n, p in full.named_parameters() if p.numel() > 100)
    assert dict(half.model.named_parameters())[w].dtype == torch.float32
    assert (dict(half.model.named_parameters())[w] - dict(full.named_parameters())[w]).abs().max() < 1e-3
    assert half.meta.info["exported"] is True


def test_int8_export_is_a_quarter_and_loads_within_half_a_step(nar: Path, tmp_path: Path):
    """precision int8: every weight tensor of INT8_MIN_ELEMENTS or more stored as int8 + one fp16 scale per output
    channel, read back as float32 within half a quantisation step of the original; the rest fp16."""
    checkpoint.export(nar, tmp_path / "q.pt", "int8")
    assert (tmp_path / "q.pt").stat().st_size < 0.4 * nar.stat().st_size
    stored = raw_of(tmp_path / "q.pt")["state_dict"]
    full, q = checkpoint.load(nar).model.state_dict(), checkpoint.load(tmp_path / "q.pt").model.state_dict()
    quantised = [k for k, v in full.items() if v.is_floating_point() and v.dim() >= 2
                 and v.numel() >= checkpoint.INT8_MIN_ELEMENTS]
    assert quantised and all(stored[k].dtype == torch.int8 for k in quantised)
    for k in quantised:
        step = stored[k + checkpoint.INT8_SCALE].float().reshape(-1, *[1] * (full[k].dim() - 1))
        assert q[k].dtype == torch.float32 and bool(((q[k] - full[k]).abs() <= step / 2 + 1e-6).all()), k
    assert all(stored[k].dtype == torch.float16 for k, v in full.items() if v.is_floating_point() and k not in quantised)


@pytest.mark.parametrize("damage", ["no scale", "no tensor", "wrong shape"])
def test_a_damaged_int8_weight_is_a_corrupt_file(nar: Path, tmp_path: Path, damage: str):
    checkpoint.export(nar, tmp_path / "q.pt", "int8")
    raw = raw_of(tmp_path / "q.pt")
    key = next(k for k, v in raw["state_dict"].items() if v.dtype == torch.int8)
    scale = key + checkpoint.INT8_SCALE
    if damage == "no scale":
        del raw["state_dict"][scale]
    elif damage == "no tensor":
        del raw["state_dict"][key]
    else:
        raw["state_dict"][scale] = raw["state_dict"][scale][:-1]
    torch.save(raw, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="int8|weights do not fit"):
        checkpoint.load(tmp_path / "bad.pt")


def test_lightning_training_checkpoint_with_optimizer_state_loads(nar: Path, tmp_path: Path):
    """What Lightning writes: `model.`-prefixed weights, optimizer and scheduler state, loop counters."""
    model = checkpoint.load(nar).model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    sum(p.sum() for p in model.parameters()).backward()
    opt.step()  # real Adam state: exp_avg tensors, step counts
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
    raw = {"epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.5.0",
           "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
           "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 3}}}},
           "callbacks": {"ModelCheckpoint{'monitor': None}": {"best_model_path": "/x/last.ckpt", "best_model_score": None}},
           "optimizer_states": [opt.state_dict()], "lr_schedulers": [sched.state_dict()], "tts": raw_of(nar)["tts"]}
    torch.save(raw, tmp_path / "last.ckpt")
    loaded = checkpoint.load(tmp_path / "last.ckpt")
    assert all(torch.equal(loaded.model.state_dict()[k], v) for k, v in model.state_dict().items())
    assert checkpoint.global_step(checkpoint.read_raw(tmp_path / "last.ckpt")) == 120


def test_bad_files_give_clear_errors(nar: Path, tmp_path: Path):
    with pytest.raises(CheckpointError, match="not found"):
        checkpoint.load(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="not a regular file"):
        checkpoint.load("/dev/zero")
    (tmp_path / "junk.pt").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(tmp_path / "junk.pt")
    (tmp_path / "trunc.pt").write_bytes(nar.read_bytes()[: nar.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt"):
        checkpoint.load(tmp_path / "trunc.pt")
    torch.save({"weights": 1}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="not a tts checkpoint"):
        checkpoint.load(tmp_path / "foreign.pt")
    raw = raw_of(nar)
    raw["state_dict"]["encoder.embedding.weight"] = torch.zeros(5, 5)
    torch.save(raw, tmp_path / "shape.pt")
    with pytest.raises(CheckpointError, match="do not fit"):
        checkpoint.load(tmp_path / "shape.pt")
    for key, value, message in (("kind", "program", "unknown checkpoint kind"), ("mel_config", {"n_fft": 1}, "mel config"),
                                ("model_config", "os.system", "malformed"), ("format", None, "unsupported")):
        raw = raw_of(nar)
        raw["tts"][key] = value
        torch.save(raw, tmp_path / f"{key}.pt")
        with pytest.raises(CheckpointError, match=message):
            checkpoint.load(tmp_path / f"{key}.pt")


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


# --- item 1: a checkpoint is data ---------------------------------------------------------------------------
class Payload:
    """Unpickling this calls os.system: what a hostile checkpoint holds."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_files(nar: Path, folder: Path) -> dict[str, Path]:
    """A real tts checkpoint with code in its pickle, in both torch formats (zip and the legacy plain pickle), and
    the code alone as a plain pickle file.  Each, unpickled the old way, makes `marker`."""
    marker = folder / "MARKER"
    raw = raw_of(nar)
    raw["tts"]["info"]["payload"] = Payload(marker)
    files = {"zip": folder / "evil.pt", "legacy": folder / "evil_legacy.pt", "pickle": folder / "evil.pkl"}
    torch.save(raw, files["zip"])
    torch.save(raw, files["legacy"], _use_new_zipfile_serialization=False)
    files["pickle"].write_bytes(pickle.dumps(Payload(marker)))  # protocol 5: refused at its first opcode
    return files


def test_a_pickle_that_runs_code_is_refused_unrun(nar: Path, tmp_path: Path):
    marker = tmp_path / "MARKER"
    files = evil_files(nar, tmp_path)
    # the payload is real: the unsafe loader this module used to call runs it
    torch.load(files["zip"], weights_only=False)
    assert marker.exists()
    marker.unlink()
    for name, path in files.items():
        if name == "pickle":  # refused at its first opcode, before any global
            with pytest.raises(CheckpointError, match="not a torch file of plain data: Unsupported operand"):
                checkpoint.load(path)
            continue
        with pytest.raises(UntrustedCheckpointError, match=r"not safe to load: its pickle calls posix\.system.*refused"):
            checkpoint.load(path)
        with pytest.raises(UntrustedCheckpointError, match="not safe"):
            checkpoint.warm_start(torch.nn.Linear(1, 1), path, checkpoint.load(nar).mel_config, None)
        assert not marker.exists(), name


def rewritten(nar: Path, folder: Path, name: str, edit) -> Path:
    raw = raw_of(nar)
    edit(raw["tts"])
    torch.save(raw, folder / name)
    return folder / name


@pytest.mark.parametrize("edit,named", [
    (lambda t: t["model_config"].update(_target_="os.getcwd"), "os.getcwd"),
    (lambda t: t["model_config"].update(_target_="os.system", command="true"), "os.system"),
    (lambda t: t["model_config"]["refiner"].update(_target_="subprocess.run"), "subprocess.run"),  # nested, _partial_
    (lambda t: t["build_kwargs"].update(extra={"_target_": "builtins.eval", "_args_": ["1"]}), "not plain"),
    (lambda t: t["build_kwargs"].update(extra=[{"_target_": "builtins.exec"}]), "builtins.exec"),
    (lambda t: t["model_config"].update(_target_=["os", "getcwd"]), "['os', 'getcwd']"),
    (lambda t: t["model_config"].update(d_model="${oc.env:HOME}"), "not plain"),
    (lambda t: t["model_config"].update(_target_="tts.checkpoint.atomic_torch_save"), "atomic_torch_save"),
], ids=["getcwd", "system", "nested-partial", "hydra-args", "in-list", "non-string", "interpolation", "project-function"])
def test_a_config_naming_anything_but_a_model_class_is_refused(nar: Path, tmp_path: Path, edit, named: str):
    path = rewritten(nar, tmp_path, "cfg.pt", edit)
    with pytest.raises(UntrustedCheckpointError, match="refused") as e:
        checkpoint.load(path)
    assert named in str(e.value) and str(path) in str(e.value)


def test_allow_list_covers_every_model_the_project_trains():
    """Every model and vocoder class in conf/ is allowed (else its own checkpoints would be refused)."""
    import yaml

    targets = set()
    for folder in ("model", "vocoder"):
        for conf in (REPO_ROOT / "conf" / folder).glob("*.yaml"):
            targets |= checkpoint._targets(yaml.safe_load(conf.read_text()))
    assert targets and targets <= ALLOWED_TARGETS, targets - ALLOWED_TARGETS


def test_a_frontend_naming_a_program_is_refused_or_reduced_to_espeak(nar: Path, tmp_path: Path):
    """The G2P runs the frontend's espeak program for unknown words: a path in a file must not become a program."""
    script = tmp_path / "espeak-ng"  # a program shipped beside the checkpoint, under espeak's name
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'MARKER'}\n")
    script.chmod(0o755)
    reduced = rewritten(nar, tmp_path, "reduced.pt", lambda t: t["frontend"]["g2p"].update(espeak_executable=str(script)))
    assert checkpoint.load(reduced).frontend().g2p.espeak_executable == "espeak-ng"
    checkpoint.load(reduced).frontend().encode("Blorptastic zwiggle.")  # out-of-vocabulary words: espeak runs
    assert not (tmp_path / "MARKER").exists()
    for edit, message in ((lambda t: t["frontend"]["g2p"].update(espeak_executable="/bin/sh"), "espeak program"),
                          (lambda t: t["frontend"]["g2p"].update(espeak_voice="--path=/tmp"), "voice"),
                          (lambda t: t["frontend"].update(max_symbols="400"), "max_symbols")):
        with pytest.raises(CheckpointError, match=message):
            checkpoint.load(rewritten(nar, tmp_path, "bad.pt", edit)).frontend()


def test_a_vocoder_file_is_data_too(tmp_path: Path):
    voc = tiny_vocoder_checkpoint(tmp_path / "voc.pt")
    assert type(load_vocoder(str(voc))).__name__ == "HifiGanVocoder"
    files = evil_files(voc, tmp_path)
    bad_target = rewritten(voc, tmp_path, "target.pt", lambda t: t["model_config"].update(_target_="os.getcwd"))
    for path in (files["zip"], files["legacy"], bad_target):
        with pytest.raises(UntrustedCheckpointError):
            load_vocoder(str(path))
    with pytest.raises(CheckpointError, match="plain data"):
        load_vocoder(str(files["pickle"]))
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("path", sorted(CHECKPOINT_DIR.glob("*.pt")) + sorted((CHECKPOINT_DIR / "vocoder").glob("*.pt")),
                         ids=lambda p: p.name)
def test_every_shipped_checkpoint_loads_as_data(path: Path):
    loaded = checkpoint.load(path)
    assert loaded.meta.kind == ("vocoder" if path.parent.name == "vocoder" else "acoustic")


def test_cli_refuses_hostile_files_with_exit_4_and_one_line(nar: Path, tmp_path: Path):
    files = evil_files(nar, tmp_path)
    target = rewritten(nar, tmp_path, "cfg.pt", lambda t: t["model_config"].update(_target_="os.getcwd"))
    runs = [["--checkpoint", str(files["zip"]), "--vocoder", "griffin-lim"],
            ["--checkpoint", str(target), "--vocoder", "griffin-lim"],
            ["--checkpoint", str(nar), "--vocoder", str(files["legacy"])]]
    for args in runs:
        r = subprocess.run([sys.executable, "-m", "tts.synthesize", "--threads", "1", *args, "--text", "Hello.",
                            "--out", str(tmp_path / "x.wav")], cwd=REPO_ROOT, capture_output=True, timeout=300)
        err = r.stderr.decode()
        assert r.returncode == 4 and err.count("\n") == 1 and err.startswith("error:") and "refused" in err, (args, err)
    assert not (tmp_path / "MARKER").exists() and not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize("tag", ["!new:os.system", "!apply:os.system", "!name:os.system", "!module:os",
                                 "!include:/etc/passwd"])
def test_a_speechbrain_folder_whose_yaml_calls_code_is_refused(tmp_path: Path, tag: str):
    """SpeechBrain reads hyperparams.yaml with HyperPyYAML, whose tags call what they name."""
    from test_vocoder_pretrained import make_folder

    folder = tmp_path / "voc"
    make_folder(folder)
    marker = tmp_path / "MARKER"
    text = (folder / "hyperparams.yaml").read_text()
    (folder / "hyperparams.yaml").write_text(text + f"\nexploit: {tag} [touch {marker}]\n")
    with pytest.raises(UntrustedCheckpointError, match=f"names {tag}.*refused"):
        load_vocoder(str(folder))
    assert not marker.exists()
    (folder / "hyperparams.yaml").write_text(text)  # the same folder without the payload loads
    assert type(load_vocoder(str(folder))).__name__ == "SpeechBrainHifiGan"

"""tts.checkpoint against a file whose config names absurd model sizes (issue 35 follow-up item 3): the config decides
what is built, the file holds the weights; a config asking for far more elements than the file holds (d_model=10**6:
a 4 TB weight; 10**4 layers: an endless build) is a CheckpointError before the allocation, in about no time and
memory, from the Python API, the vocoder loader and the CLI (exit 4, one line)."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tts import checkpoint
from tts.checkpoint import BUILD_SLACK_ELEMENTS, CheckpointError
from tts.paths import CHECKPOINT_DIR, REPO_ROOT
from tts.vocoder.registry import load_vocoder

NAR = CHECKPOINT_DIR / "nar.pt"
VOCODER = CHECKPOINT_DIR / "vocoder" / "source_filter.pt"


def crafted(source: Path, folder: Path, name: str, edit) -> Path:
    """`source` with its description edited (the weights as they are)."""
    raw = torch.load(source, map_location="cpu", weights_only=True)
    edit(raw["tts"])
    torch.save(raw, folder / name)
    return folder / name


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ABSURD = {
    "d_model": (lambda t: t["model_config"].update(d_model=10**6, n_heads=1), "empty([78, 1000000])"),
    "layers": (lambda t: t["model_config"].update(encoder_layers=10**4), ""),
    "many-layers": (lambda t: t["model_config"].update(decoder_layers=10**12), ""),
    "ffn": (lambda t: t["model_config"].update(ffn_channels=10**9), ""),
    "kernel": (lambda t: t["model_config"].update(ffn_kernel_size=10**7 + 1), ""),
    "refiner": (lambda t: t["model_config"]["refiner"].update(channels=10**6), ""),
    "refiner-layers": (lambda t: t["model_config"]["refiner"].update(n_layers=10**9), ""),
    "symbols": (lambda t: t["build_kwargs"].update(n_symbols=10**11), "100000000000"),
    "mels": (lambda t: t["build_kwargs"].update(n_mels=10**8), ""),
}


@pytest.mark.parametrize("edit,where", ABSURD.values(), ids=list(ABSURD))
def test_a_config_naming_absurd_sizes_is_refused_before_allocating(tmp_path: Path, edit, where: str):
    path = crafted(NAR, tmp_path, "absurd.pt", edit)
    before = peak_rss_mb()
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match="absurd sizes") as e:
        checkpoint.load(path)
    seconds = time.perf_counter() - t0
    message = str(e.value)
    assert str(path) in message and where in message and "\n" not in message, message
    assert seconds < 10, seconds  # the file's own reading included (15 MB)
    assert peak_rss_mb() - before < 200  # nothing of the model's size was allocated


def test_a_vocoder_naming_absurd_sizes_is_refused(tmp_path: Path):
    path = crafted(VOCODER, tmp_path, "voc.pt", lambda t: t["model_config"].update(hidden_channels=10**6))
    with pytest.raises(CheckpointError, match="absurd sizes"):
        load_vocoder(str(path))
    path = crafted(VOCODER, tmp_path, "window.pt", lambda t: t["model_config"].update(window=10**12))
    with pytest.raises(CheckpointError, match=r"hann_window\(1000000000000\).*absurd sizes"):
        load_vocoder(str(path))


def test_the_bound_is_what_the_file_holds(tmp_path: Path):
    """A file holds every weight of its model (loading is strict), so the bound is its own element count with
    slack (buffers a model makes itself): a config a little larger than its weights still builds and fails on
    the weights as before; the shipped models allocate their weights and < 0.1 % more."""
    held = sum(v.numel() for v in checkpoint.model_state_dict(checkpoint.read_raw(NAR)).values())
    assert held > BUILD_SLACK_ELEMENTS  # the bound is twice the weights here
    wider = crafted(NAR, tmp_path, "wider.pt", lambda t: t["model_config"].update(ffn_channels=800))
    with pytest.raises(CheckpointError, match="weights do not fit"):
        checkpoint.load(wider)
    doubled = crafted(NAR, tmp_path, "doubled.pt", lambda t: t["model_config"].update(encoder_layers=40))
    with pytest.raises(CheckpointError, match="absurd sizes"):
        checkpoint.load(doubled)
    meta = checkpoint.read_meta(checkpoint.read_raw(NAR), NAR)
    assert sum(p.numel() for p in meta.build_model(max_elements=held).state_dict().values()) == held  # exact fits
    with pytest.raises(CheckpointError, match="absurd sizes"):
        meta.build_model(max_elements=held // 2)


def test_a_build_kwarg_named_like_the_builders_own_parameter_is_just_a_bad_argument(tmp_path: Path):
    """The file's build_kwargs go to the model as a dict, never spread into the builder's call."""
    for key in ("max_elements", "kwargs", "node"):
        path = crafted(NAR, tmp_path, f"{key}.pt", lambda t, key=key: t["build_kwargs"].update({key: 1}))
        with pytest.raises(CheckpointError, match="does not build a model"):
            checkpoint.load(path)


def test_the_cli_refuses_absurd_sizes_with_exit_4_and_one_line(tmp_path: Path):
    path = crafted(NAR, tmp_path, "absurd.pt", ABSURD["d_model"][0])
    r = subprocess.run([sys.executable, "-m", "tts.synthesize", "--threads", "1", "--checkpoint", str(path),
                        "--text", "Hello.", "--out", str(tmp_path / "x.wav")], cwd=REPO_ROOT, capture_output=True,
                       timeout=300)
    err = r.stderr.decode()
    assert r.returncode == 4 and err.count("\n") == 1 and "absurd sizes" in err, err
    assert not (tmp_path / "x.wav").exists()

"""recipes.release: training checkpoints -> shipped fp16 release with default.json, checked before it lands."""

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
import torch

from recipes.release import ReleaseError, release
from tests.helpers import TINY, tiny_checkpoint, tiny_vocoder_checkpoint
from tts import checkpoint
from tts.audio import MelConfig
from tts.runtime import Pipeline
from tts.runtime.torch_engine import TorchEngine
from tts.vocoder.registry import load_vocoder


@pytest.fixture()
def sources(tmp_path: Path) -> dict[str, str]:
    return {
        "ar": str(tiny_checkpoint(tmp_path / "ar.ckpt", "autoregressive", **TINY["autoregressive"])),
        "nar": str(tiny_checkpoint(tmp_path / "nar.ckpt", "nonautoregressive", **TINY["nonautoregressive"])),
    }


def test_release_exports_fp16_that_loads_and_speaks(sources, tmp_path):
    out = tmp_path / "checkpoints"
    summary = release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out)
    defaults = json.loads((out / "default.json").read_text())
    # default.json names the voices, their models, the default voice and the vocoder only: the inference
    # settings live in each checkpoint
    assert defaults == {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}
    assert json.loads((out / "release.json").read_text())["total_mb"] == pytest.approx(summary["total_mb"])
    for name in ("ar", "nar"):
        raw = torch.load(out / f"{name}.pt", weights_only=False)
        floats = [v for v in raw["state_dict"].values() if v.is_floating_point()]
        assert floats and all(v.dtype == torch.float16 for v in floats)
        assert "optimizer_states" not in raw
        assert raw["tts"]["info"]["source"] == sources[name]
        assert len(raw["tts"]["info"]["source_sha256"]) == 64
    # the exported default loads and synthesises on its own
    pipeline = Pipeline(TorchEngine(checkpoint.load(out / "nar.pt"), load_vocoder("griffin-lim")))
    assert pipeline.synthesize("Hello there.").wave.size > 0
    assert not list(out.glob(".release-*")), "staging folder left behind"


def test_release_over_budget_replaces_nothing(sources, tmp_path):
    out = tmp_path / "checkpoints"
    release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out)
    before = {p.name: p.read_bytes() for p in out.glob("*") if p.is_file()}
    with pytest.raises(ReleaseError, match="budget"):
        release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["ar", "nar"]}}, out, max_total_mb=0.001, force=True)
    assert {p.name: p.read_bytes() for p in out.glob("*") if p.is_file()} == before


def test_release_errors_name_the_problem(sources, tmp_path):
    out = tmp_path / "checkpoints"
    with pytest.raises(ReleaseError, match="does not exist"):
        release({**sources, "nar": str(tmp_path / "missing.ckpt")}, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out)
    with pytest.raises(ReleaseError, match="default voice 'slt' has none of its models"):
        release({**sources, "nar": None}, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar"]}}, out)
    with pytest.raises(ReleaseError, match="needs a vocoder checkpoint"):  # none given, none shipped
        release(sources, {}, {"voice": "slt", "vocoder": "hifigan", "voices": {"slt": ["nar", "ar"]}}, out, shipped_dir=tmp_path / "nothing_shipped")
    assert not out.exists(), "a failed first release leaves no (empty) folder"


def test_release_rejects_mel_mismatch(tmp_path):
    other = MelConfig.from_dict({**MelConfig.default().to_dict(), "f_max": 7600.0})
    src = {"nar": str(tiny_checkpoint(tmp_path / "nar.ckpt", "nonautoregressive", mel_config=other, **TINY["nonautoregressive"]))}
    with pytest.raises(Exception, match="mel"):
        release(src, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, tmp_path / "checkpoints")


def tiny_source_filter_checkpoint(path: Path) -> Path:
    """A small random source-filter vocoder, saved as recipes.train_vocoder would."""
    from tts.vocoder.registry import config_node, vocoder_meta
    from tts.vocoder.source_filter import SourceFilterVocoder

    sf = SourceFilterVocoder(MelConfig.default(), hidden_channels=16)
    checkpoint.save(path, sf, vocoder_meta(config_node("source_filter") | {"hidden_channels": 16}, MelConfig.default()))
    return path


def test_release_config_composes_and_runs(sources, tmp_path):
    """conf/release.yaml as `python -m recipes.release` runs it (its default vocoder is the source-filter,
    which a fresh out_dir does not hold yet: its checkpoint is given, as the first release of it would)."""
    from hydra import compose, initialize_config_dir

    from tts.paths import CONF_DIR

    out = tmp_path / "rel"
    sf_ckpt = tiny_source_filter_checkpoint(tmp_path / "sf.pt")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("release", overrides=[f"acoustic.ar={sources['ar']}", f"acoustic.nar={sources['nar']}",
                                            f"vocoders.source-filter={sf_ckpt}", f"out_dir={out}"])
    summary = release(dict(cfg.acoustic), dict(cfg.vocoders), OmegaConf.to_container(cfg.default), Path(cfg.out_dir),
                      precision=str(cfg.precision), max_total_mb=float(cfg.max_total_mb),
                      overrides={k: dict(v) for k, v in (cfg.overrides or {}).items() if v})
    assert set(summary["files"]) == {"ar.pt", "nar.pt", "vocoder/source_filter.pt"} and (out / "default.json").is_file()
    # the voices keep the models this release holds (nar_block and joe's model are not in it)
    assert json.loads((out / "default.json").read_text()) == {"voice": "slt", "vocoder": "source-filter",
                                                              "voices": {"slt": ["nar", "ar"]}}


def test_release_overrides_inference_defaults_only(sources, tmp_path):
    out = tmp_path / "checkpoints"
    release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out, overrides={"nar": {"refine_steps": 2}})
    meta = checkpoint.load(out / "nar.pt").meta
    assert meta.model_config["refine_steps"] == 2 and meta.info["overrides"] == {"refine_steps": 2}
    assert checkpoint.load(out / "nar.pt").model.inference_spec().defaults["refine_steps"] == 2
    with pytest.raises(ReleaseError, match="cannot override 'd_model'"):
        release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out, overrides={"nar": {"d_model": 64}},
                force=True)


def test_release_sets_a_default_the_training_config_did_not_spell_out(sources, tmp_path):
    # the refiner temperature is a constructor argument the training run left at its default
    src = checkpoint.load(sources["nar"])
    src.meta.model_config.pop("refine_temperature", None)
    checkpoint.save(tmp_path / "old.pt", src.model, src.meta)
    out = tmp_path / "checkpoints"
    release({"ar": None, "nar": str(tmp_path / "old.pt")}, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}},
            out, overrides={"nar": {"refine_steps": 2, "refine_temperature": 0.5}})
    loaded = checkpoint.load(out / "nar.pt")
    assert loaded.model.refine_steps == 2 and loaded.model.refine_temperature == 0.5
    with pytest.raises(ReleaseError, match="cannot override 'no_such_thing'"):
        release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, out,
                overrides={"nar": {"no_such_thing": 1}}, force=True)


def test_rereleasing_a_shipped_file_keeps_its_provenance_and_weights(sources, tmp_path):
    # a later session ships a new AR while the NAR's training folder is gone: the NAR is released from
    # the shipped file itself, which must keep the weights bit for bit and the record of where they came from
    first = tmp_path / "first"
    release(sources, {}, {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, first)
    shipped = json.loads((first / "release.json").read_text())["files"]["nar.pt"]
    second = tmp_path / "second"
    summary = release({"ar": sources["ar"], "nar": str(first / "nar.pt")}, {},
                      {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}, second)
    again = summary["files"]["nar.pt"]
    assert {k: again[k] for k in ("source", "source_sha256", "global_step")} == \
        {k: shipped[k] for k in ("source", "source_sha256", "global_step")}
    assert again["source"] == sources["nar"]
    a, b = checkpoint.read_raw(first / "nar.pt")["state_dict"], checkpoint.read_raw(second / "nar.pt")["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_release_cli_ships_a_vocoder_as_the_default(sources, tmp_path):
    """The documented command line: `vocoders.NAME=PATH default.vocoder=NAME` (a key that is not the
    name of a config group, so Hydra takes it as a value); a later release of another vocoder keeps the
    first one shipped, with its provenance."""
    import subprocess
    import sys

    from tts.paths import REPO_ROOT

    voc = tiny_vocoder_checkpoint(tmp_path / "voc.ckpt")
    out = tmp_path / "rel"
    p = subprocess.run([sys.executable, "-m", "recipes.release", f"acoustic.ar={sources['ar']}",
                        f"acoustic.nar={sources['nar']}", f"vocoders.hifigan={voc}", "default.vocoder=hifigan",
                        f"out_dir={out}"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((out / "default.json").read_text())["vocoder"] == "hifigan"
    shipped = json.loads((out / "release.json").read_text())["files"]
    assert set(shipped) == {"ar.pt", "nar.pt", "vocoder/hifigan_v3.pt"}
    assert shipped["vocoder/hifigan_v3.pt"]["source_sha256"]
    vocoder = load_vocoder(out / "vocoder" / "hifigan_v3.pt")
    mel = torch.randn(1, 80, 10) - 5.0
    reference = load_vocoder(voc)(mel).wave
    assert torch.allclose(vocoder(mel).wave, reference, atol=1e-2)  # fp16 weights, same generator

    from tts.vocoder.source_filter import SourceFilterVocoder

    sf_ckpt = tiny_source_filter_checkpoint(tmp_path / "sf.pt")
    p = subprocess.run([sys.executable, "-m", "recipes.release", "acoustic.ar=null", f"acoustic.nar={out / 'nar.pt'}",
                        f"vocoders.source-filter={sf_ckpt}", "default.vocoder=source-filter", f"out_dir={out}", "--force"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((out / "default.json").read_text())["vocoder"] == "source-filter"
    again = json.loads((out / "release.json").read_text())["files"]
    assert {"nar.pt", "vocoder/hifigan_v3.pt", "vocoder/source_filter.pt"} <= set(again)
    assert again["vocoder/hifigan_v3.pt"]["source_sha256"] == shipped["vocoder/hifigan_v3.pt"]["source_sha256"]
    assert isinstance(load_vocoder(out / "vocoder" / "source_filter.pt"), SourceFilterVocoder)


# --- issue 32 item 1: the shipped voice cannot be replaced by accident ---------------------------------------


def _shipped_copy(tmp_path: Path) -> Path:
    """A stand-in for checkpoints/: a release of its own (never the real one), as the shipped folder."""
    shipped = tmp_path / "shipped"
    release({"nar": str(tiny_checkpoint(tmp_path / "s.ckpt", "nonautoregressive", **TINY["nonautoregressive"]))},
            {"source-filter": str(tiny_source_filter_checkpoint(tmp_path / "sf0.pt"))},
            {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar", "ar"]}}, shipped, shipped_dir=tmp_path / "none")
    return shipped


def test_release_into_the_shipped_folder_or_an_existing_release_needs_force(sources, tmp_path):
    shipped = _shipped_copy(tmp_path)
    before = {p.relative_to(shipped): p.read_bytes() for p in shipped.rglob("*") if p.is_file()}
    for out in (shipped, tmp_path / "shipped" / ".." / "shipped"):
        with pytest.raises(ReleaseError, match="shipped voice's folder.*--force"):
            release(sources, {}, {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar", "ar"]}}, out, shipped_dir=shipped)
    mine = tmp_path / "mine"
    release(sources, {}, {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar", "ar"]}}, mine, shipped_dir=shipped)
    with pytest.raises(ReleaseError, match="not empty.*--force"):
        release(sources, {}, {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar", "ar"]}}, mine, shipped_dir=shipped)
    assert {p.relative_to(shipped): p.read_bytes() for p in shipped.rglob("*") if p.is_file()} == before
    # explicit: --force replaces the release (and keeps what it did not replace in its record)
    summary = release({"ar": sources["ar"], "nar": None}, {}, {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["ar", "nar"]}}, shipped,
                      force=True, shipped_dir=shipped)
    assert set(summary["files"]) == {"ar.pt", "nar.pt", "vocoder/source_filter.pt"}


def test_a_new_release_speaks_through_the_shipped_vocoder_with_the_shipped_controls(sources, tmp_path):
    """A user's NAR released into a new folder, no vocoder given: the shipped default vocoder is released
    beside it (same weights, its provenance kept) and the NAR gets the shipped K and temperature."""
    from hydra import compose, initialize_config_dir

    from tts.paths import CONF_DIR

    shipped = _shipped_copy(tmp_path)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("release", overrides=["acoustic.ar=null", f"acoustic.nar={sources['nar']}"])
    out = tmp_path / "voice"
    summary = release(dict(cfg.acoustic), dict(cfg.vocoders), OmegaConf.to_container(cfg.default), out,
                      overrides={k: dict(v) for k, v in cfg.overrides.items() if v}, shipped_dir=shipped)
    assert set(summary["files"]) == {"nar.pt", "vocoder/source_filter.pt"}
    a = checkpoint.read_raw(shipped / "vocoder" / "source_filter.pt")
    b = checkpoint.read_raw(out / "vocoder" / "source_filter.pt")
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])
    assert summary["files"]["vocoder/source_filter.pt"]["source"] == str(tmp_path / "sf0.pt")
    controls = checkpoint.load(out / "nar.pt").model.inference_spec().defaults
    assert (controls["refine_steps"], controls["temperature"]) == (2, 0.667)
    assert json.loads((out / "default.json").read_text()) == {"voice": "slt", "vocoder": "source-filter",
                                                              "voices": {"slt": ["nar"]}}


def test_release_config_reproduces_the_shipped_voice():
    """conf/release.yaml's defaults are the shipped voice's: the default model and vocoder of
    checkpoints/default.json, and every shipped NAR's own controls (K, temperature) as its overrides."""
    from tts.paths import CHECKPOINT_DIR, CONF_DIR

    cfg = OmegaConf.load(CONF_DIR / "release.yaml")
    shipped = json.loads((CHECKPOINT_DIR / "default.json").read_text())
    released = {v: [m for m in models if (CHECKPOINT_DIR / f"{m}.pt").is_file()] for v, models in cfg.default.voices.items()}
    released = {v: m for v, m in released.items() if m}
    expected = {**OmegaConf.to_container(cfg.default), "voices": released}
    own = {v: name for v, name in expected.pop("voice_vocoders").items() if v in released}
    assert {**expected, **({"voice_vocoders": own} if own else {})} == shipped
    assert "checkpoints" not in str(cfg.out_dir) and cfg.force is False
    for name in json.loads((CHECKPOINT_DIR / "release.json").read_text())["files"]:
        if name.startswith("vocoder/"):
            continue
        config = checkpoint.read_raw(CHECKPOINT_DIR / name)["tts"]["model_config"]
        shipped = {k: config[k] for k in ("refine_steps", "refine_temperature") if config.get(k) is not None}
        assert Path(name).stem in cfg.acoustic, f"{name} cannot be released by conf/release.yaml"
        assert dict(cfg.overrides.get(Path(name).stem) or {}) == shipped, name
    # and each shipped file is stored at the precision the config gives it (int8 files hold int8 tensors)
    for name in json.loads((CHECKPOINT_DIR / "release.json").read_text())["files"]:
        stem = Path(name).stem if not name.startswith("vocoder/") else None
        want = (cfg.precisions or {}).get(stem, cfg.precision) if stem else cfg.precision
        dtypes = {v.dtype for v in checkpoint.read_raw(CHECKPOINT_DIR / name)["state_dict"].values()}
        assert (torch.int8 in dtypes) == (want == "int8"), (name, want, dtypes)


def test_release_cli_refuses_the_shipped_folder_in_one_line(sources, tmp_path):
    import subprocess
    import sys

    from tts.paths import CHECKPOINT_DIR, REPO_ROOT

    before = {p: p.stat().st_mtime_ns for p in CHECKPOINT_DIR.rglob("*.pt")}
    # max_total_mb: should the refusal ever break, the budget check still replaces nothing (and the test fails)
    p = subprocess.run([sys.executable, "-m", "recipes.release", "acoustic.ar=null", f"acoustic.nar={sources['nar']}",
                        "out_dir=checkpoints", "max_total_mb=0.0001"], cwd=REPO_ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "--force" in p.stderr and "Traceback" not in p.stderr
    assert {p: p.stat().st_mtime_ns for p in CHECKPOINT_DIR.rglob("*.pt")} == before


def test_release_stores_each_file_at_its_own_precision(sources, tmp_path):
    """`precisions` name -> int8 for that file only (the shipped NARs), the rest at `precision`; release.json
    records each file's precision; a name no release knows or a precision that does not exist is refused."""
    out = tmp_path / "rel"
    default = {"voice": "slt", "vocoder": "griffin-lim", "voices": {"slt": ["nar", "ar"]}}
    summary = release(sources, {}, default, out, precisions={"nar": "int8"})
    nar, ar = (checkpoint.read_raw(out / f"{n}.pt")["state_dict"] for n in ("nar", "ar"))
    assert any(v.dtype == torch.int8 for v in nar.values())
    assert not any(v.dtype == torch.int8 for v in ar.values())
    assert {k: v["precision"] for k, v in summary["files"].items()} == {"nar.pt": "int8", "ar.pt": "fp16"}
    assert Pipeline(TorchEngine(checkpoint.load(out / "nar.pt"), load_vocoder("griffin-lim"))).synthesize("Hi.").wave.size
    with pytest.raises(ReleaseError, match="no such model or vocoder"):
        release(sources, {}, default, tmp_path / "b", precisions={"narr": "int8"})
    with pytest.raises(ReleaseError, match="not one of"):
        release(sources, {}, default, tmp_path / "c", precisions={"nar": "int4"})
    # a known model not released this time may keep its precision entry (conf/release.yaml names nar_block)
    release({**sources, "nar_block": None}, {}, default, tmp_path / "d", precisions={"nar_block": "int8"})


# --- issue 31: a voice speaks through its own vocoder (default.json "voice_vocoders") --------------------------


def test_a_voice_with_its_own_vocoder_is_released_with_it(tmp_path):
    """joe's model and joe's vocoder: default.json maps the voice to it, the file ships beside the default one;
    a voice the release does not ship loses its entry; a voice whose vocoder is missing, or an entry for no
    voice, is refused before anything is written."""
    nar = str(tiny_checkpoint(tmp_path / "nar.ckpt", "nonautoregressive", **TINY["nonautoregressive"]))
    joe = str(tiny_checkpoint(tmp_path / "joe.ckpt", "nonautoregressive", **TINY["nonautoregressive"]))
    vocoders = {"source-filter": str(tiny_source_filter_checkpoint(tmp_path / "sf.pt")),
                "source-filter-joe": str(tiny_source_filter_checkpoint(tmp_path / "sf_joe.pt"))}
    default = {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar"], "joe": ["nar_joe"]},
               "voice_vocoders": {"joe": "source-filter-joe"}}
    out = tmp_path / "rel"
    summary = release({"nar": nar, "nar_joe": joe}, vocoders, default, out)
    assert json.loads((out / "default.json").read_text()) == default
    assert {"vocoder/source_filter.pt", "vocoder/source_filter_joe.pt"} <= set(summary["files"])
    assert summary["files"]["vocoder/source_filter_joe.pt"]["source"] == vocoders["source-filter-joe"]
    # joe not released: neither its voice nor its vocoder entry stays (and its vocoder need not be given)
    alone = tmp_path / "alone"
    release({"nar": nar, "nar_joe": None}, {"source-filter": vocoders["source-filter"]}, default, alone)
    assert json.loads((alone / "default.json").read_text()) == {"voice": "slt", "vocoder": "source-filter",
                                                                "voices": {"slt": ["nar"]}}
    with pytest.raises(ReleaseError, match="voice 'joe'.s vocoder 'source-filter-joe' needs a vocoder checkpoint"):
        release({"nar": nar, "nar_joe": joe}, {"source-filter": vocoders["source-filter"]}, default, tmp_path / "x",
                shipped_dir=tmp_path / "none")  # (else the shipped joe vocoder would be released with it)
    with pytest.raises(ReleaseError, match=r"voice_vocoders names \['bob'\]: no such voice"):
        release({"nar": nar}, vocoders, {**default, "voice_vocoders": {"bob": "source-filter-joe"}}, tmp_path / "y")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_the_runtime_gives_each_voice_its_own_vocoder(tmp_path, monkeypatch):
    """tts.runtime.release reads default.json's "voice_vocoders": the voice's vocoder, its models' vocoder, the
    default one for other voices and for checkpoint files; a malformed entry is a CheckpointError."""
    from tts.errors import CheckpointError
    from tts.runtime import release as runtime_release

    path = tmp_path / "default.json"
    monkeypatch.setattr(runtime_release, "DEFAULTS_FILE", path)
    default = {"voice": "slt", "vocoder": "source-filter", "voices": {"slt": ["nar", "ar"], "joe": ["nar_joe"]},
               "voice_vocoders": {"joe": "source-filter-joe"}}
    path.write_text(json.dumps(default))
    assert runtime_release.voice_vocoder("joe") == runtime_release.model_vocoder("nar_joe") == "source-filter-joe"
    assert runtime_release.voice_vocoder("slt") == runtime_release.model_vocoder("ar") == "source-filter"
    assert runtime_release.voice_vocoder() == runtime_release.model_vocoder(None) == "source-filter"
    # the ONNX export holds each model with its voice's vocoder: another vocoder is a request it cannot serve
    assert runtime_release.non_default_choices(None, "source-filter-joe", "cpu", "nar_joe") == []
    assert runtime_release.non_default_choices(None, "source-filter", "cpu", "nar_joe") == ["vocoder source-filter"]
    for bad in ({"bob": "source-filter"}, {"joe": 3}, ["joe"]):
        path.write_text(json.dumps({**default, "voice_vocoders": bad}))
        with pytest.raises(CheckpointError, match="'voice_vocoders' must map shipped voices"):
            runtime_release.shipped_defaults()

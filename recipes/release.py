"""Export trained checkpoints as a release: a folder `tts.synthesize` speaks from (conf/release.yaml).

    python -m recipes.release acoustic.nar=exp/nar_cpu_small/checkpoints/last.ckpt acoustic.ar=null out_dir=voices/mine
    python -m recipes.release ... vocoders.source-filter=exp/vocoder_source_filter/checkpoints/last.ckpt
    python -m recipes.release ... out_dir=checkpoints --force      # replaces the SHIPPED voice: explicit only

A release goes into a NEW folder (by default releases/<date>_<time>); an existing non-empty folder, and above
all the shipped checkpoints/, is written only with `--force` (`force=true`): a user's experiment must never
replace the product's voice by accident.  What is released reproduces the shipped settings unless overridden:
the default vocoder (source-filter; when no checkpoint of it is given, the shipped one is released with the
models) and the NAR models' inference controls (K, temperature: `overrides`).

Each training checkpoint (Lightning: weights + optimizer state, ~90 MB for the AR model) becomes a
weights-only fp16 (or int8: `precisions`) file that still describes itself (model config, mel config, symbol table), with
`info` recording where it came from (source file, its sha256, training step).  The release is checked
before anything is replaced: every file loads back, every acoustic model's mel config matches the
default vocoder's, and the total stays under `max_total_mb`.  The release is built in a staging folder
and moved into place only after all checks pass, so a failed or interrupted release leaves the previous
one in place (and a failed first release leaves no empty folder).  `OUT/release.json` records what was
released; the command ends with the synthesis command for the new folder.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from data_prep.atomic import write_json_atomic
from tts import checkpoint
from tts.paths import CHECKPOINT_DIR
from tts.training.cli import recipe_entry, user_errors
from tts.vocoder.registry import GRIFFIN_LIM, SHIPPED, load_vocoder

log = logging.getLogger(__name__)


# model-config keys that only steer inference (safe to change without retraining)
INFERENCE_OVERRIDES = {"refine_steps", "refine_temperature", "min_token_frames", "max_frames", "max_frames_per_token"}


# what a release records of a file's origin (kept when an already shipped file is released again)
PROVENANCE = ("source", "source_sha256", "global_step")


class ReleaseError(RuntimeError):
    """A release that would not work or would replace files unasked: missing source, mel mismatch, over
    budget, an existing release as out_dir without force."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_one(src: Path, dst: Path, precision: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """One training checkpoint -> one release file; `overrides` replace inference-time model config
    values (e.g. the NAR's default `refine_steps`), never anything the weights depend on."""
    if not src.is_file():
        raise ReleaseError(f"release source {src} does not exist (train it first, or set it to null)")
    raw = checkpoint.read_raw(src)
    src_info = raw["tts"].get("info", {})
    if "global_step" not in raw and "source" in src_info:
        # a shipped file shipped again (its training folder is gone): keep where its weights came from
        info = {k: src_info.get(k) for k in PROVENANCE}
    else:
        info = {
            "source": str(src),
            "source_sha256": sha256(src.resolve()),
            "global_step": checkpoint.global_step(raw),
        }
    if src_info.get("steps_before"):
        # trained on from earlier weights (recipes.train init_from): the steps behind those weights
        info["steps_before"] = src_info["steps_before"]
    dst.parent.mkdir(parents=True, exist_ok=True)
    loaded = checkpoint.load(src)
    for key, value in (overrides or {}).items():
        # a key the training config did not spell out is fine if the model's constructor takes it
        # (e.g. refine_temperature, added after the checkpoint was trained)
        known = key in loaded.meta.model_config or key in inspect.signature(type(loaded.model)).parameters
        if key not in INFERENCE_OVERRIDES or not known:
            raise ReleaseError(f"{src}: cannot override {key!r} (allowed: {sorted(INFERENCE_OVERRIDES)} "
                               f"that {type(loaded.model).__name__} takes)")
        loaded.meta.model_config[key] = value
    loaded.meta.info = {**loaded.meta.info, **info, **({"overrides": dict(overrides)} if overrides else {})}
    checkpoint.save(dst, loaded.model, loaded.meta, precision)
    checkpoint.load(dst)  # it must load back on its own
    return {"file": str(dst), "mb": dst.stat().st_size / 2**20, "precision": precision, **info}


def _vocoder_rel(name: str) -> str:
    return f"vocoder/{SHIPPED[name][0].name}"


def check_out_dir(out_dir: Path, force: bool, shipped_dir: Path = CHECKPOINT_DIR) -> None:
    """Refuse to write into the shipped voice's folder, or into any folder that already holds files, unless
    `force`.  (An earlier release.yaml wrote into checkpoints/ by default and replaced the shipped models
    with a user's 20-step run.)"""
    if force:
        return
    if out_dir.resolve() == shipped_dir.resolve():
        raise ReleaseError(f"out_dir={out_dir} is the shipped voice's folder: releasing into it replaces the "
                           f"shipped models; add --force (force=true) if that is what you mean, or choose a new out_dir")
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ReleaseError(f"out_dir={out_dir} already exists and is not empty: choose a new folder, or add --force "
                           f"(force=true) to replace the files of the release in it")


def voice_vocoders(default: dict[str, Any], voices: dict[str, list[str]]) -> dict[str, str]:
    """Each released voice's vocoder: default.json's "voice_vocoders" entry (a vocoder fine-tuned on the voice's
    corpus), else the default vocoder.  An entry for a voice this release does not ship is dropped with it."""
    own = dict(default.get("voice_vocoders") or {})
    unknown = sorted(set(own) - set(default["voices"]))
    if unknown:
        raise ReleaseError(f"voice_vocoders names {unknown}: no such voice (voices: {sorted(default['voices'])})")
    return {voice: own.get(voice, default["vocoder"]) for voice in voices}


def shipped_vocoder_sources(vocoders: dict[str, str | None], needed: set[str], out_dir: Path,
                            shipped_dir: Path = CHECKPOINT_DIR) -> dict[str, str | None]:
    """A vocoder the release's voices speak with (`needed`: the default one and the voices' own), with no
    checkpoint given, released into a folder that does not hold it yet: the shipped file, so that a release of
    a new acoustic model speaks through the shipped vocoder."""
    out = dict(vocoders)
    for name in sorted(needed & set(SHIPPED)):
        if not out.get(name) and not (out_dir / _vocoder_rel(name)).is_file():
            shipped = shipped_dir / _vocoder_rel(name)
            if shipped.is_file() and out_dir.resolve() != shipped_dir.resolve():
                out[name] = str(shipped)
    return out


def release_voices(voices: dict[str, list[str]], default_voice: str, acoustic: dict[str, str | None],
                   out_dir: Path) -> dict[str, list[str]]:
    """The voices of the release: each voice's models that the release holds (released now, or already in
    out_dir), in the given order; a voice left with none is not shipped, the default voice must keep one."""
    present = {name for name, src in acoustic.items() if src} | {p.stem for p in out_dir.glob("*.pt")}
    out = {v: [m for m in models if m in present] for v, models in voices.items()}
    out = {v: models for v, models in out.items() if models}
    if default_voice not in out:
        raise ReleaseError(f"default voice {default_voice!r} has none of its models {voices.get(default_voice)} in "
                           f"the release (released: {sorted(present)}); voices: {voices}")
    for name in sorted(present - {m for models in out.values() for m in models}):
        print(f"note: {name}.pt is released but in no voice (voices.VOICE=[..., {name}] names it)", file=sys.stderr)
    return out


def file_precisions(names: set[str], known: set[str], precision: str,
                    precisions: dict[str, str] | None) -> dict[str, str]:
    """Each released model's or vocoder's (`names`) storage precision: `precisions[name]` where given, else
    `precision`.  A name in `precisions` that is no model or vocoder a release knows (`known`), or a precision
    outside tts.checkpoint.PRECISIONS, is a ReleaseError: a typo must not ship a file at the wrong precision
    silently.  (A known model not released this time, e.g. nar_block=null, is fine.)"""
    precisions = dict(precisions or {})
    unknown = sorted(set(precisions) - known)
    if unknown:
        raise ReleaseError(f"precisions for {unknown}: no such model or vocoder (known: {sorted(known)})")
    out = {name: precisions.get(name, precision) for name in names}
    bad = sorted({p for p in out.values() if p not in checkpoint.PRECISIONS})
    if bad:
        raise ReleaseError(f"precision {bad[0]!r} is not one of {checkpoint.PRECISIONS}")
    return out


def release(acoustic: dict[str, str | None], vocoders: dict[str, str | None], default: dict[str, str], out_dir: Path,
            precision: str = "fp16", max_total_mb: float = 60.0,
            overrides: dict[str, dict[str, Any]] | None = None, force: bool = False,
            shipped_dir: Path = CHECKPOINT_DIR, precisions: dict[str, str] | None = None) -> dict[str, Any]:
    """`vocoders`: shipped name (tts.vocoder.registry.SHIPPED) -> training checkpoint to export, or None to
    leave that file as it is in out_dir (the default vocoder is then the shipped one from `shipped_dir` when
    out_dir lacks it).  Refused without `force`: out_dir = the shipped folder, or a non-empty out_dir.
    `precisions`: model or vocoder name -> its storage precision, overriding `precision` for that file."""
    out_dir = Path(out_dir)
    check_out_dir(out_dir, force, shipped_dir)
    # the folders this release creates (out_dir and missing parents, e.g. releases/): a failed first release
    # removes them again when they are still empty, instead of leaving an empty release behind
    created = [p for p in (out_dir, *out_dir.parents) if not p.exists()]
    try:
        shipped_voices = release_voices(dict(default["voices"]), default["voice"], acoustic, out_dir)
        spoken_with = voice_vocoders(default, shipped_voices)
        vocoders = shipped_vocoder_sources(vocoders, {default["vocoder"], *spoken_with.values()}, out_dir, shipped_dir)
        released = {name for name, src in (*acoustic.items(), *vocoders.items()) if src}
        return _release(acoustic, vocoders, default, out_dir, file_precisions(released, {*acoustic, *SHIPPED}, precision, precisions),
                        max_total_mb, overrides, shipped_voices, spoken_with)
    except BaseException:
        for folder in created:  # deepest first
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def _release(acoustic: dict[str, str | None], vocoders: dict[str, str | None], default: dict[str, str], out_dir: Path,
             precisions: dict[str, str], max_total_mb: float, overrides: dict[str, dict[str, Any]] | None,
             voices: dict[str, list[str]], spoken_with: dict[str, str]) -> dict[str, Any]:
    unknown = sorted(set(vocoders) - set(SHIPPED))
    if unknown:
        raise ReleaseError(f"unknown shipped vocoder(s) {unknown}; expected names from {sorted(SHIPPED)}")
    for role, name in [("default vocoder", default["vocoder"]),
                       *((f"voice {voice!r}'s vocoder", name) for voice, name in spoken_with.items())]:
        if name not in (GRIFFIN_LIM, *SHIPPED):
            raise ReleaseError(f"{role} must be {GRIFFIN_LIM!r} or one of {sorted(SHIPPED)}, got {name!r}")
        if name in SHIPPED and not vocoders.get(name) and not (out_dir / _vocoder_rel(name)).is_file():
            raise ReleaseError(f"{role} {name!r} needs a vocoder checkpoint to ship (vocoders.{name}=PATH)")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Build the whole release in a staging folder; only a release that passed every check replaces files.
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".release-") as tmp:
        stage = Path(tmp)
        files: dict[str, Any] = {}
        for name, src in acoustic.items():
            if src:
                files[f"{name}.pt"] = export_one(Path(src), stage / f"{name}.pt", precisions[name],
                                                 (overrides or {}).get(name))
        vocoder_rels = {_vocoder_rel(name) for name in SHIPPED}
        for name, src in vocoders.items():
            if src:
                files[_vocoder_rel(name)] = export_one(Path(src), stage / _vocoder_rel(name), precisions[name])
        # Files already released there and not replaced stay (acoustic models such as nar_block.pt included),
        # with the provenance the earlier release recorded for them, and count towards the budget.
        prior_path = out_dir / "release.json"
        prior = json.loads(prior_path.read_text()).get("files", {}) if prior_path.is_file() else {}
        kept = {rel: {**prior.get(rel, {}), "file": str(out_dir / rel), "mb": (out_dir / rel).stat().st_size / 2**20}
                for rel in sorted((vocoder_rels | set(prior)) - set(files)) if (out_dir / rel).is_file()}
        total = sum(f["mb"] for f in files.values()) + sum(f["mb"] for f in kept.values())
        if total > max_total_mb:
            raise ReleaseError(f"shipped checkpoints total {total:.1f} MB > budget {max_total_mb} MB")
        # Every released acoustic model must run with its voice's vocoder, and with the default one (a model of
        # no voice, or a checkpoint file given to tts.synthesize): the same mel definition.
        def released_vocoder(name: str) -> Any:
            if name == GRIFFIN_LIM:
                return load_vocoder(GRIFFIN_LIM)
            rel = _vocoder_rel(name)
            return load_vocoder(stage / rel if rel in files else out_dir / rel)

        loaded = {name: released_vocoder(name) for name in {default["vocoder"], *spoken_with.values()}}
        voice_of = {model: voice for voice, models in voices.items() for model in models}
        for rel in files:
            if rel not in vocoder_rels:
                mel_config = checkpoint.load(stage / rel).mel_config
                for name in {default["vocoder"], spoken_with.get(voice_of.get(Path(rel).stem), default["vocoder"])}:
                    loaded[name].check_mel_config(mel_config, f"released {rel}")
        own = {voice: name for voice, name in spoken_with.items() if name != default["vocoder"]}
        default = {k: v for k, v in default.items() if k != "voice_vocoders"}
        summary = {"files": {**files, **kept}, "total_mb": total,
                   "default": {**default, "voices": voices, **({"voice_vocoders": own} if own else {})}}
        for rel in files:
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, out_dir / rel)
            summary["files"][rel]["file"] = str(out_dir / rel)
    write_json_atomic(out_dir / "release.json", summary)
    # the voices, their models, the default voice, the default vocoder and the voices' own (shipped_defaults
    # reads it); every other inference setting lives in the shipped model's own config (`overrides`), read by tts.runtime
    write_json_atomic(out_dir / "default.json", summary["default"])
    return summary


def synthesis_command(out_dir: Path, default: dict[str, Any]) -> str:
    """How to speak with the released folder (tts.synthesize takes the files; default.json is checkpoints/'s)."""
    name = (default.get("voice_vocoders") or {}).get(default["voice"], default["vocoder"])  # the default voice's
    vocoder = str(out_dir / _vocoder_rel(name)) if name in SHIPPED else name
    model = default["voices"][default["voice"]][0]
    return (f"python -m tts.synthesize --checkpoint {out_dir / (model + '.pt')} --vocoder {vocoder} "
            f"--text \"Hello there.\" --out hello.wav")


@hydra.main(version_base="1.3", config_path="../conf", config_name="release")
@user_errors(extra=(ReleaseError,))
def main(cfg: DictConfig) -> None:
    out_dir = Path(cfg.out_dir)
    summary = release(dict(cfg.acoustic), dict(cfg.vocoders), OmegaConf.to_container(cfg.default), out_dir,
                      precision=str(cfg.precision), max_total_mb=float(cfg.max_total_mb),
                      overrides={k: dict(v) for k, v in (cfg.overrides or {}).items() if v}, force=bool(cfg.force),
                      precisions={k: str(v) for k, v in (cfg.precisions or {}).items() if v})
    print(json.dumps(summary, indent=2))
    print(f"released {len(summary['files'])} file(s), {summary['total_mb']:.1f} MB, into {out_dir}\n"
          f"speak with it: {synthesis_command(out_dir, summary['default'])}")


if __name__ == "__main__":
    # `--force` as the issue and the docs spell it; Hydra itself takes only key=value
    sys.argv = [("force=true" if a == "--force" else a) for a in sys.argv]
    recipe_entry(main)

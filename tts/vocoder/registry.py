"""One entry point for every vocoder: `load_vocoder(name_or_path, mel_config=None)`.

    "griffin-lim"                  conf/vocoder/griffin_lim.yaml, no weights
    "source-filter"                the project's shipped source-filter vocoder, checkpoints/vocoder/source_filter.pt
    "source-filter-joe"            the same vocoder fine-tuned on the joe corpus (the joe voice's), source_filter_joe.pt
    "hifigan"                      the project's shipped HiFi-GAN, checkpoints/vocoder/hifigan_v3.pt
    "speechbrain-lj"               SpeechBrain's public LJSpeech HiFi-GAN (speechbrain/tts-hifigan-ljspeech)
    PATH.ckpt / PATH.pt            any tts vocoder checkpoint (training checkpoint or export)
    FOLDER                         a SpeechBrain vocoder folder (hyperparams.yaml + generator.ckpt)

How a vocoder checkpoint rebuilds itself.  Its `tts` entry is a CheckpointMeta with kind="vocoder",
model_config = the Hydra node of conf/vocoder/*.yaml (`_target_` + explicit arguments) and
build_kwargs = {"mel_config": {"_target_": "tts.audio.MelConfig", ...fields}}: the mel config as a
Hydra node, so that `hydra.utils.instantiate(model_config, **build_kwargs)` -- i.e. the unchanged
`tts.checkpoint.load` -- builds the vocoder with a real MelConfig.  (Passing a MelConfig *object* to
instantiate would not work: OmegaConf turns a dataclass kwarg into a DictConfig.)  Weights are the
LightningModule's `model.` entries (the discriminator is stored under `discriminator.` and ignored).
`load_vocoder` adds what inference wants: kind check, weight-norm removal, the mel-config check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tts import checkpoint
from tts.audio import MelConfig
from tts.checkpoint import CheckpointError, CheckpointMeta
from tts.paths import CHECKPOINT_DIR, CONF_DIR
from tts.vocoder.base import Vocoder

GRIFFIN_LIM = "griffin-lim"
SPEECHBRAIN_LJ = "speechbrain-lj"
# Vocoders the release ships (recipes.release), by the name users pass to --vocoder.
SHIPPED = {
    "source-filter": (CHECKPOINT_DIR / "vocoder" / "source_filter.pt", "source_filter_corrected", "slt"),
    "source-filter-joe": (CHECKPOINT_DIR / "vocoder" / "source_filter_joe.pt", "source_filter_corrected", "joe"),
    "hifigan": (CHECKPOINT_DIR / "vocoder" / "hifigan_v3.pt", "hifigan_v3", "slt"),
}  # name -> (file, conf/vocoder/ config it is trained with, the corpus it is trained on)
NAMES = (GRIFFIN_LIM, *SHIPPED, SPEECHBRAIN_LJ)



def mel_config_node(mel_config: MelConfig) -> dict[str, Any]:
    """A MelConfig as a Hydra node (what `instantiate` turns back into the dataclass)."""
    return {"_target_": f"{MelConfig.__module__}.{MelConfig.__qualname__}", **mel_config.to_dict()}


def build_kwargs(mel_config: MelConfig) -> dict[str, Any]:
    """The derived arguments a vocoder node is instantiated with (stored as CheckpointMeta.build_kwargs)."""
    return {"mel_config": mel_config_node(mel_config)}


def build_vocoder(node: Any, mel_config: MelConfig) -> Vocoder:
    """Instantiate a conf/vocoder/*.yaml node (dict or DictConfig) for `mel_config`."""
    vocoder = checkpoint.instantiate_node(node, **build_kwargs(mel_config))  # Hydra only for non-plain nodes
    if not isinstance(vocoder, Vocoder):
        raise TypeError(f"vocoder node {node.get('_target_')!r} built a {type(vocoder).__name__}, not a Vocoder")
    return vocoder


def vocoder_meta(node: dict[str, Any], mel_config: MelConfig, info: dict[str, Any] | None = None) -> CheckpointMeta:
    """The `tts` description of a vocoder checkpoint (`node`: the resolved conf/vocoder/*.yaml)."""
    return CheckpointMeta(
        kind="vocoder",
        model_config=dict(node),
        build_kwargs=build_kwargs(mel_config),
        mel_config=mel_config,
        frontend=None,
        info=dict(info or {}),
    )


def config_node(name: str) -> dict[str, Any]:
    """conf/vocoder/NAME.yaml as a plain dict."""
    import yaml  # lazily: only configs (Griffin-Lim) need it, not a checkpoint vocoder

    path = CONF_DIR / "vocoder" / f"{name}.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"no vocoder config {path}")
    return yaml.safe_load(path.read_text())


def load_vocoder_checkpoint(path: str | Path, device: str = "cpu") -> Vocoder:
    """Rebuild a vocoder from a tts checkpoint alone, ready for inference (eval, weight norm removed)."""
    loaded = checkpoint.load(path, device=device)
    if loaded.meta.kind != "vocoder":
        raise CheckpointError(f"{path} is a {loaded.meta.kind!r} checkpoint, not a vocoder")
    vocoder = loaded.model
    if not isinstance(vocoder, Vocoder) or vocoder.mel_config != loaded.mel_config:
        raise CheckpointError(f"{path}: its model config does not build a Vocoder for the stored mel config")
    if hasattr(vocoder, "remove_weight_norm"):
        vocoder.remove_weight_norm()  # after loading: the stored weights are the weight-normed ones
    return vocoder.eval()


def load_vocoder(
    name_or_path: str | Path,
    mel_config: MelConfig | None = None,
    device: str = "cpu",
    offline: bool | None = None,
    savedir: str | Path | None = None,
) -> Vocoder:
    """A ready-to-run vocoder; `mel_config` (the acoustic model's) must equal the vocoder's, else
    `MelConfigMismatchError` naming both.  `offline` / `savedir` apply to "speechbrain-lj" only."""
    name = str(name_or_path)
    if name == GRIFFIN_LIM:
        vocoder = build_vocoder(config_node("griffin_lim"), mel_config or MelConfig.default())
    elif name == SPEECHBRAIN_LJ or name.rstrip("/") == "speechbrain/tts-hifigan-ljspeech":
        from tts.vocoder.pretrained import SPEECHBRAIN_LJSPEECH, load_speechbrain_hifigan

        vocoder = load_speechbrain_hifigan(SPEECHBRAIN_LJSPEECH, mel_config, savedir=savedir, offline=offline)
    elif name in SHIPPED:
        path, conf, corpus = SHIPPED[name]
        if not path.is_file():
            raise CheckpointError(
                f"the project's {name} vocoder {path} is missing: train one with `python -m recipes.train_vocoder "
                f"vocoder={conf} data={corpus}` and ship it with `python -m recipes.release vocoders.{name}=CKPT`, "
                "or use `--vocoder griffin-lim`"
            )
        vocoder = load_vocoder_checkpoint(path, device)
    elif Path(name).is_dir():
        from tts.vocoder.pretrained import load_speechbrain_hifigan

        vocoder = load_speechbrain_hifigan(name, mel_config, offline=offline)
    elif Path(name).is_file():
        vocoder = load_vocoder_checkpoint(name, device)
    else:
        raise ValueError(
            f"unknown vocoder {name!r}: expected one of {list(NAMES)}, a tts vocoder checkpoint file, "
            "or a SpeechBrain vocoder folder"
        )
    if mel_config is not None:
        vocoder.check_mel_config(mel_config)
    return vocoder.to(device).eval()

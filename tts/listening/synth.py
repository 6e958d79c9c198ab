"""Audio folders for a listening test made by synthesis: the same held-out sentences through each system."""

from __future__ import annotations

import random
from pathlib import Path

from tts.audio import save_wav
from tts.data.corpus import read_metadata, read_split, wav_path
from tts.evaluation.systems import SYSTEM_VOCODER, SystemSpec


def parse_synth(spec: str) -> SystemSpec:
    """NAME=CHECKPOINT[,vocoder=V][,k=K][,temperature=T] -> an acoustic SystemSpec (the evaluation's type);
    e.g. nar_k4=checkpoints/nar.pt,vocoder=hifigan,k=4.  CHECKPOINT `voice:NAME` is a shipped voice (its first
    model and, unless vocoder= is given, the voice's own vocoder), e.g. joe=voice:joe"""
    if "=" not in spec:
        raise ValueError(f"bad --synth {spec!r}: expected NAME=CHECKPOINT[,vocoder=V][,k=K][,temperature=T]")
    name, rest = spec.split("=", 1)
    path, *opts = rest.split(",")
    fields: dict[str, str | int | float] = {}
    for opt in opts:
        key, _, value = opt.partition("=")
        if key == "vocoder" and value:
            fields["vocoder"] = value
        elif key == "k" and value.isdigit():
            fields["refine_steps"] = int(value)
        elif key == "temperature" and _is_number(value) and float(value) >= 0:
            fields["temperature"] = float(value)
        else:
            raise ValueError(f"bad option {opt!r} in --synth {spec!r} (known: vocoder=V, k=K, temperature=T)")
    if not name.strip():
        raise ValueError(f"bad --synth {spec!r}: empty name")
    if path.startswith("voice:"):  # SystemSpec gives a shipped voice its own vocoder unless one is named
        return SystemSpec(name.strip(), "acoustic", voice=path.removeprefix("voice:"), **fields)
    return SystemSpec(name.strip(), "acoustic", checkpoint=path, **{"vocoder": SYSTEM_VOCODER, **fields})


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def pick_sentences(data_root: Path, split: str, n: int, seed: int) -> dict[str, str]:
    """A seeded sample of n held-out sentences: id -> text."""
    texts = {u.id: u.text for u in read_metadata(data_root)}
    ids = read_split(data_root, split)
    if not ids:
        raise ValueError(f"split {split!r} of {data_root} is empty")
    ids = sorted(ids)
    random.Random(seed).shuffle(ids)
    return {i: texts[i] for i in sorted(ids[:n])}


def synthesise_folder(system: SystemSpec, sentences: dict[str, str], out_dir: Path, seed: int = 0) -> Path:
    """out_dir/ID.wav for each sentence through `system`, by THE inference path as `recipes.evaluate` makes
    its wavs (Pipeline.synthesize_items: one token sequence per sentence, noise seeded from (seed, the
    sentence's position among `sentences`)); existing files are kept (resumable)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    position = {uid: k for k, uid in enumerate(sentences)}
    todo = [uid for uid in sentences if not (out_dir / f"{uid}.wav").is_file()]
    if todo:
        pipeline = system.pipeline()
        for uid in todo:
            [item] = system.synthesize_items(pipeline, [sentences[uid]], seed=seed, indices=[position[uid]])
            save_wav(out_dir / f"{uid}.wav", item.wave, item.sample_rate)
    return out_dir


def ground_truth_folder(data_root: Path, sentences: dict[str, str], out_dir: Path) -> Path:
    """Links to the corpus recordings of the chosen sentences (the hidden reference)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for uid in sentences:
        link = out_dir / f"{uid}.wav"
        if not link.exists():
            link.symlink_to(wav_path(data_root, uid).resolve())
    return out_dir

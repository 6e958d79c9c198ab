"""Audio folders for a listening test made by synthesis: the same held-out sentences through each system."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from data_prep.corpus import read_metadata, read_split, wav_path
from tts.audio import save_wav


@dataclass
class SynthSystem:
    name: str
    checkpoint: Path
    vocoder: str = "griffin-lim"
    refine_steps: int | None = None


def parse_synth(spec: str) -> SynthSystem:
    """NAME=CHECKPOINT[,vocoder=V][,k=K]  e.g. nar_k4=checkpoints/nar.pt,vocoder=hifigan,k=4"""
    if "=" not in spec:
        raise ValueError(f"bad --synth {spec!r}: expected NAME=CHECKPOINT[,vocoder=V][,k=K]")
    name, rest = spec.split("=", 1)
    path, *opts = rest.split(",")
    system = SynthSystem(name.strip(), Path(path))
    for opt in opts:
        key, _, value = opt.partition("=")
        if key == "vocoder" and value:
            system.vocoder = value
        elif key == "k" and value.isdigit():
            system.refine_steps = int(value)
        else:
            raise ValueError(f"bad option {opt!r} in --synth {spec!r} (known: vocoder=V, k=K)")
    if not name.strip():
        raise ValueError(f"bad --synth {spec!r}: empty name")
    return system


def pick_sentences(data_root: Path, split: str, n: int, seed: int) -> dict[str, str]:
    """A seeded sample of n held-out sentences: id -> text."""
    texts = {u.id: u.text for u in read_metadata(data_root)}
    ids = read_split(data_root, split)
    if not ids:
        raise ValueError(f"split {split!r} of {data_root} is empty")
    ids = sorted(ids)
    random.Random(seed).shuffle(ids)
    return {i: texts[i] for i in sorted(ids[:n])}


def synthesise_folder(system: SynthSystem, sentences: dict[str, str], out_dir: Path) -> Path:
    """out_dir/ID.wav for each sentence through `system`; existing files are kept (resumable)."""
    from tts.inference import Synthesizer

    out_dir.mkdir(parents=True, exist_ok=True)
    todo = {i: t for i, t in sentences.items() if not (out_dir / f"{i}.wav").is_file()}
    if todo:
        synth = Synthesizer.from_paths(system.checkpoint, system.vocoder)
        for uid, text in todo.items():
            result = synth.synthesize(text, refine_steps=system.refine_steps)
            save_wav(out_dir / f"{uid}.wav", result.wave, result.sample_rate)
    return out_dir


def ground_truth_folder(data_root: Path, sentences: dict[str, str], out_dir: Path) -> Path:
    """Links to the corpus recordings of the chosen sentences (the hidden reference)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for uid in sentences:
        link = out_dir / f"{uid}.wav"
        if not link.exists():
            link.symlink_to(wav_path(data_root, uid).resolve())
    return out_dir

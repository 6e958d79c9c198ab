"""Text -> waveform with one acoustic checkpoint and one vocoder (what `python -m tts.synthesize` runs)."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tts import checkpoint
from tts.checkpoint import CheckpointError
from tts.models.refiner import item_noise_seed
from tts.paths import CHECKPOINT_DIR
from tts.text import TextFrontend, split_sentences
from tts.text.errors import TextError, UnspeakableTextError
from tts.vocoder.base import Vocoder
from tts.vocoder.registry import load_vocoder

DEFAULTS_FILE = CHECKPOINT_DIR / "default.json"


@dataclass
class Timings:
    text_s: float = 0.0
    mel_s: float = 0.0
    vocoder_s: float = 0.0
    first_audio_s: float | None = None  # wall time until the first sentence batch was audio

    @property
    def total_s(self) -> float:
        return self.text_s + self.mel_s + self.vocoder_s


@dataclass
class SynthesisResult:
    wave: torch.Tensor  # [N] float32, -1..1
    sample_rate: int
    sentences: list[str]
    timings: Timings
    notes: list[str] = field(default_factory=list)  # e.g. AR failures, skipped sentences

    @property
    def seconds(self) -> float:
        return self.wave.numel() / self.sample_rate

    @property
    def rtf(self) -> float:
        return self.timings.total_s / max(self.seconds, 1e-9)


def shipped_defaults() -> dict[str, str]:
    """checkpoints/default.json: which shipped acoustic model ("nar"/"ar") and vocoder are the default."""
    if not DEFAULTS_FILE.is_file():
        raise CheckpointError(f"no shipped defaults: {DEFAULTS_FILE} is missing")
    return json.loads(DEFAULTS_FILE.read_text())


def shipped_checkpoint(model: str) -> Path:
    """checkpoints/MODEL.pt; a model the release does not ship is a clear error naming what it does ship."""
    path = CHECKPOINT_DIR / f"{model}.pt"
    if not path.is_file():
        shipped = sorted(p.stem for p in CHECKPOINT_DIR.glob("*.pt"))
        raise CheckpointError(f"no shipped {model!r} model ({path} is missing); this release ships "
                              f"{shipped or 'none'}: train one (recipes.train) and pass --checkpoint PATH")
    return path


class Synthesizer:
    """Sentence-split, batched synthesis; `pause_s` of silence between sentences."""

    def __init__(self, acoustic: checkpoint.LoadedCheckpoint, vocoder: Vocoder, device: str = "cpu",
                 pause_s: float = 0.25) -> None:
        if acoustic.meta.kind != "acoustic":
            raise CheckpointError(f"expected an acoustic checkpoint, got kind {acoustic.meta.kind!r}")
        vocoder.check_mel_config(acoustic.mel_config, "acoustic checkpoint")
        self.model = acoustic.model.to(device).eval()
        self.frontend: TextFrontend = acoustic.frontend()
        self.vocoder = vocoder.to(device).eval()
        self.mel_config = acoustic.mel_config
        self.device = device
        self.pause_s = pause_s
        self._infer_args = set(inspect.signature(self.model.infer).parameters)
        self._seeded = "noise_seeds" in self._infer_args  # models that draw noise (the NAR refiner)

    @classmethod
    def from_paths(cls, acoustic_path: str | Path, vocoder: str, device: str = "cpu") -> "Synthesizer":
        acoustic = checkpoint.load(acoustic_path, device)
        return cls(acoustic, load_vocoder(vocoder, acoustic.mel_config, device=device), device)

    def _controls(self, **controls: float | int | None) -> dict:
        """Keep the controls the model supports; asking a model for one it lacks is an error."""
        asked = {k: v for k, v in controls.items() if v is not None}
        unsupported = sorted(set(asked) - self._infer_args)
        if unsupported:
            raise ValueError(f"{type(self.model).__name__} does not support {unsupported} (a NAR control?)")
        return asked

    @torch.inference_mode()
    def synthesize(self, text: str, batch_size: int = 8, refine_steps: int | None = None, speed: float | None = None,
                   pitch_shift: float | None = None, progress: Callable[[int, int], None] | None = None,
                   temperature: float | None = None, seed: int = 0) -> SynthesisResult:
        """Speak `text`, `batch_size` sentences at a time.  `seed` fixes the NAR refiner's starting noise:
        sentence k's noise comes from item_noise_seed(seed, k), whatever the batch size, so the same call
        gives the same audio and a sentence sounds the same alone or batched with others."""
        t0 = time.perf_counter()
        controls = self._controls(refine_steps=refine_steps, speed=speed, pitch_shift=pitch_shift,
                                  temperature=temperature)
        sentences = split_sentences(text) or [text]
        encoded: list[tuple[str, list[int]]] = []
        notes: list[str] = []
        errors: list[TextError] = []
        for s in sentences:
            try:
                encoded.append((s, self.frontend.encode(s)))
            except UnspeakableTextError as e:  # e.g. a sentence of only symbols: skip it, keep the rest
                errors.append(e)
                notes.append(f"skipped unspeakable sentence {s!r}")
        if not encoded:
            raise errors[0] if errors else UnspeakableTextError(f"nothing speakable in {text!r}")
        timings = Timings(text_s=time.perf_counter() - t0)
        pause = torch.zeros(int(self.pause_s * self.mel_config.sample_rate))
        pieces: list[torch.Tensor] = []
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start : start + batch_size]
            lengths = torch.tensor([len(ids) for _, ids in chunk], device=self.device)
            tokens = torch.zeros(len(chunk), int(lengths.max()), dtype=torch.long, device=self.device)
            for k, (_, ids) in enumerate(chunk):
                tokens[k, : len(ids)] = torch.tensor(ids)
            if self._seeded:  # [B] seeds by position in the sentence stream, not in the batch
                controls["noise_seeds"] = [item_noise_seed(seed, start + k) for k in range(len(chunk))]
            t1 = time.perf_counter()
            out = self.model.infer(tokens, lengths, **controls)
            t2 = time.perf_counter()
            waves = self.vocoder(out.mels, out.mel_lengths)
            t3 = time.perf_counter()
            timings.mel_s += t2 - t1
            timings.vocoder_s += t3 - t2
            if timings.first_audio_s is None:
                timings.first_audio_s = t3 - t0
            for k, failure in enumerate(getattr(out, "failures", None) or []):
                if not failure.ok:
                    notes.append(f"AR failure in {chunk[k][0]!r}: {failure}")
            for k in range(len(chunk)):
                pieces += [waves.wave[k, : int(waves.lengths[k])].float().cpu(), pause]
            if progress is not None:
                progress(min(start + batch_size, len(encoded)), len(encoded))
        wave = torch.cat(pieces[:-1])
        return SynthesisResult(wave, self.mel_config.sample_rate, [s for s, _ in encoded], timings, notes)

"""THE inference controls: one frozen value, validated once, whose defaults are the voice's own.

A `Controls` is complete (every field has a value) and valid (each field finite and inside RANGES) from
the moment it exists: nothing downstream checks a range again.  Its defaults come from one place, the
loaded voice: an engine reads them from its model (the checkpoint's own config, which `recipes.release`
writes: e.g. the shipped NAR's K = 2, temperature 0.667; the exported manifest copies them), and
`Pipeline.controls(**given)` lays what a caller gives over them, refusing a control the model lacks.

Torch-free (the ONNX engine and the CLI's fast start import it).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

# The range each control is meaningful in (inclusive).  Outside it a model makes silence or non-finite audio
# (a pitch shift of 100 semitones puts F0 above Nyquist; NaN/inf propagate into every sample), or works without
# bound, so a value outside is refused before any work.  The maxima, measured on the shipped voice:
# - speed 2: at 2.5 "Hi." is -55 dBFS and at 4 "Hello there." -48 dBFS (near-silence, the NAR's phones fall
#   under a few frames each; speed 8-10 gave 0.1 s at -44 to -73 dBFS); at 2 every test sentence of more than one
#   phone is -26 to -34 dBFS (tests/test_api.py).  (A lone vowel, "I", was near-silent at 1.25 until speeding up
#   left the first phone its frames, tts.models.layers.length_regulator.speed_durations: now -35 dBFS at 1 to 2.)
# - refine_steps 32: one Euler step per refiner pass, linear in time (K = 64 takes 2 s for a sentence that K = 2
#   speaks in 0.24 s; 100 000 never ended); the measured curves stop at K = 8.
# - block_frames 65 536: a block of the whole utterance is the parallel decoder (the frame guard stops far below).
# - seed 2**63 - 1: seeds are hashed (tts.noise), any int64 works on both engines.
RANGES: dict[str, tuple[float, float]] = {
    "refine_steps": (0, 32), "temperature": (0.0, 2.0), "speed": (0.1, 2.0), "pitch_shift": (-12.0, 12.0),
    "block_frames": (0, 65_536), "seed": (0, 2**63 - 1)}
# Limits of a run beside its controls, one for the CLI and the API: sentences per model call (more only grows
# one batch's memory) and CPU threads.
MAX_BATCH_SIZE = 256
MAX_THREADS = 256

INTEGER = frozenset({"refine_steps", "block_frames", "seed"})


@dataclass(frozen=True)
class Controls:
    """How a text is spoken.  refine_steps: the NAR refiner's Euler steps K (0 = the coarse mel); temperature:
    its start-noise scale; speed: > 1 faster; pitch_shift: semitones; block_frames: the block-wise NAR's
    block size (0 = parallel); seed: the run's noise (the refiner's start noise, the AR's prenet dropout)."""

    refine_steps: int = 0
    temperature: float = 1.0
    speed: float = 1.0
    pitch_shift: float = 0.0
    block_frames: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            # a wrong type is the caller's bug (TypeError), a number out of range is a bad value (ValueError);
            # bool is an int to Python but never a number here; numpy scalars are numbers
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be {'an int' if name in INTEGER else 'a number'}, got "
                                f"{type(value).__name__} {value!r}")
            if not math.isfinite(float(value)) or value < low or value > high:
                raise ValueError(f"{name} must be a finite number in [{low}, {high}], got {value!r}")
            if name in INTEGER and int(value) != value:  # 2.0 is 2; 1.5 steps or a seed of 1.5 mean nothing
                raise ValueError(f"{name} must be a whole number, got {value!r}")
            object.__setattr__(self, name, int(value) if name in INTEGER else float(value))

    def replace(self, **given: Any) -> "Controls":
        """These controls with the given ones (None = keep) laid over them, validated."""
        unknown = sorted(set(given) - set(RANGES))
        if unknown:
            raise ValueError(f"unknown control(s) {', '.join(unknown)}; the controls are {', '.join(RANGES)}")
        return dataclasses.replace(self, **{k: v for k, v in given.items() if v is not None})

    def batch_key(self) -> tuple:
        """Parts batch together only with equal controls (one acoustic call takes one value of each)."""
        return dataclasses.astuple(self)

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
from dataclasses import dataclass
from typing import Any

# The range each control is meaningful in (inclusive; None = unbounded).  Outside it a model makes silence
# or non-finite audio (a pitch shift of 100 semitones puts F0 above Nyquist; NaN/inf propagate into every
# sample), so a value outside is refused before any work.
RANGES: dict[str, tuple[float, float | None]] = {
    "refine_steps": (0, None), "temperature": (0.0, 2.0), "speed": (0.1, 10.0), "pitch_shift": (-12.0, 12.0),
    "block_frames": (0, None), "seed": (0, None)}
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
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}")
            if name in INTEGER and float(value) != int(value):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
            if not math.isfinite(float(value)) or value < low or (high is not None and value > high):
                allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise ValueError(f"{name} must be a finite number in {allowed}, got {value!r}")
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

"""The windowed refiner's bookkeeping, written once for both engines and torch-free: which window of a coarse
mel that arrives block by block to refine when, and which of its frames are then final.

The refiner's velocity network sees +-R frames (R = its receptive half-width), so after K Euler steps a
refined frame depends on the coarse mel, the condition and the noise within +-K*R frames (the `margin`).  A
frame is final once the coarse mel is known `margin` frames past it; the window run for it starts `margin`
frames earlier (context only: the outputs near a window's cut are wrong and dropped).  The refinement of a
window itself is the caller's (`refine`): tts.models.blockwise.StreamingRefiner runs the torch refiner, the
ONNX engine its exported refine graph.  Arrays are [B, C, n] (torch tensors or numpy arrays, frames last).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# refine(coarse [B, M, w], cond [B, C, w], lo, hi) -> refined frames [lo, hi) [B, M, w]
RefineFn = Callable[[Any, Any, int, int], Any]


def cat_frames(a: Any, b: Any) -> Any:
    """a, b [B, C, n] concatenated along frames, in their own array library."""
    if isinstance(a, np.ndarray):
        return np.concatenate([a, b], axis=2)
    import torch  # only reached with torch tensors: torch is loaded already

    return torch.cat([a, b], dim=2)


class RefineWindows:
    """Push coarse frames in order; get back the refined frames that became final (possibly none).

    margin: K * R frames; min_chunk: frames refined per window at least (but the last): each window also runs
    over 2 * margin context frames, so tiny windows repeat most of the work (with B = 8 and K*R = 36, ten
    times over).  The network costs about the same on 80 frames as on 500 on a CPU (per-call overhead), so
    fewer, larger windows win.  Holds at most the last margin + (new frames) coarse frames."""

    def __init__(self, margin: int, min_chunk: int = 32) -> None:
        self.margin = margin
        self.min_chunk = max(1, min_chunk)
        self.coarse: Any = None  # [B, M, w] frames [self.first, self.received)
        self.cond: Any = None  # [B, C, w]
        self.first = 0
        self.received = 0
        self.done = 0

    def push(self, coarse: Any, cond: Any, final: bool, refine: RefineFn) -> Any:
        """coarse [B, M, n] normalised, cond [B, C, n] (the next frames) -> refined frames [B, M, n'] now final."""
        self.coarse = coarse if self.coarse is None else cat_frames(self.coarse, coarse)
        self.cond = cond if self.cond is None else cat_frames(self.cond, cond)
        self.received += coarse.shape[2]
        target = self.received if final else self.received - self.margin
        if target <= self.done or (not final and target - self.done < self.min_chunk):
            return coarse[:, :, :0]
        lo = max(self.first, self.done - self.margin)  # context on the left
        hi = self.received if final else min(self.received, target + self.margin)
        a, z = lo - self.first, hi - self.first
        out = refine(self.coarse[:, :, a:z], self.cond[:, :, a:z], lo, hi)
        ready = out[:, :, self.done - lo : target - lo]
        self.done = target
        drop = max(0, self.done - self.margin - self.first)  # frames no later window will read
        if drop:
            self.coarse, self.cond, self.first = self.coarse[:, :, drop:], self.cond[:, :, drop:], self.first + drop
        return ready

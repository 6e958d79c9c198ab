"""F0 metrics on the MCD's DTW alignment.

* log-F0 RMSE in **cents** (1200 * log2(f_syn / f_ref)), over aligned frame pairs voiced in both;
  100 cents = one semitone.  (log-Hz RMSE = cents * ln(2) / 1200.)
* V/UV error rate: fraction of aligned frame pairs whose voicing decisions differ.

F0 comes from the same WORLD analysis as the MCD (`tts.evaluation.mcd.world_features`, 5 ms frames),
and frames are paired by the MCD's DTW path, so one analysis serves all three numbers
(`evaluate_pair`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tts.evaluation.mcd import MCDResult, mcd_from_features, world_features


def _pairs(ref_f0, syn_f0, path):
    ref_f0 = np.asarray(ref_f0, dtype=np.float64).reshape(-1)
    syn_f0 = np.asarray(syn_f0, dtype=np.float64).reshape(-1)
    if path is None:
        if len(ref_f0) != len(syn_f0):
            raise ValueError(f"contours of different lengths ({len(ref_f0)}, {len(syn_f0)}) need a path")
        return ref_f0, syn_f0
    path = np.asarray(path)
    return ref_f0[path[:, 0]], syn_f0[path[:, 1]]


def log_f0_rmse_cents(ref_f0, syn_f0, path=None) -> float:
    """RMSE of 1200*log2(F0) over pairs voiced (F0 > 0) in both; NaN if no such pair."""
    a, b = _pairs(ref_f0, syn_f0, path)
    both = (a > 0) & (b > 0)
    if not both.any():
        return math.nan
    d = 1200.0 * np.log2(b[both] / a[both])
    return float(np.sqrt(np.mean(d * d)))


def vuv_error_rate(ref_f0, syn_f0, path=None) -> float:
    """Fraction of (aligned) frame pairs where exactly one side is voiced."""
    a, b = _pairs(ref_f0, syn_f0, path)
    if len(a) == 0:
        return math.nan
    return float(np.mean((a > 0) != (b > 0)))


@dataclass(frozen=True)
class PairMetrics:
    mcd_db: float
    log_f0_rmse_cents: float  # NaN when no aligned frame pair is voiced in both
    vuv_error: float
    n_voiced_both: int
    n_frames_ref: int
    n_frames_syn: int
    path_length: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def evaluate_pair(ref_wave, syn_wave, sample_rate: int, *, f0_method: str = "dio",
                  use_dtw: bool = True) -> PairMetrics:
    """MCD, log-F0 RMSE (cents) and V/UV error from one WORLD analysis and one DTW path."""
    ref = world_features(ref_wave, sample_rate, f0_method=f0_method)
    syn = world_features(syn_wave, sample_rate, f0_method=f0_method)
    m: MCDResult = mcd_from_features(ref, syn, use_dtw=use_dtw)
    a, b = _pairs(ref.f0, syn.f0, m.path)
    return PairMetrics(
        mcd_db=m.mcd_db,
        log_f0_rmse_cents=log_f0_rmse_cents(ref.f0, syn.f0, m.path),
        vuv_error=vuv_error_rate(ref.f0, syn.f0, m.path),
        n_voiced_both=int(((a > 0) & (b > 0)).sum()),
        n_frames_ref=m.n_frames_ref,
        n_frames_syn=m.n_frames_syn,
        path_length=m.path_length,
    )

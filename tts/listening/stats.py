"""Statistics for listening tests: Wilson score intervals, exact sign test, t intervals for MOS."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats as _st


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (nan, nan) when n == 0.

    Preferred over the normal ("Wald") interval because it stays inside [0, 1] and keeps its
    coverage for small n and proportions near 0 or 1, which is typical of listening tests.
    """
    if n <= 0:
        return (math.nan, math.nan)
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside [0, {n}]")
    z = _st.norm.ppf(0.5 + confidence / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def sign_test(wins_a: int, wins_b: int) -> float:
    """Two-sided exact binomial (sign) test of wins_a vs wins_b, ties already excluded. 1.0 if no data."""
    n = wins_a + wins_b
    if n == 0:
        return 1.0
    return float(_st.binomtest(wins_a, n, 0.5, alternative="two-sided").pvalue)


@dataclass
class MeanCI:
    mean: float
    low: float
    high: float
    sd: float
    n: int


def mean_ci_t(values: list[float], confidence: float = 0.95) -> MeanCI:
    """Mean with a Student-t confidence interval (nan bounds for n < 2)."""
    n = len(values)
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, math.nan, 0)
    mean = sum(values) / n
    if n < 2:
        return MeanCI(mean, math.nan, math.nan, math.nan, 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = _st.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return MeanCI(mean, mean - half, mean + half, sd, n)

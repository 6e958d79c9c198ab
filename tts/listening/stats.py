"""Statistics for listening tests: Wilson intervals, exact sign test, t intervals (per answer); sign test over
raters, cluster bootstrap, paired t over raters (the rater as the unit)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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


# ---------------------------------------------------------------- the rater as the unit
# Answers of one rater are not independent (one taste, one headphone, one script): counting answers as
# trials lets a handful of raters make any difference "significant" (4 bots x 156 pages gave p = 1.2e-7).
# The tests below count raters; the bootstrap resamples raters with all their answers (cluster bootstrap).

@dataclass
class RaterSignTest:
    for_a: int  # raters who preferred system a on more of the pair's pages than b
    for_b: int
    even: int  # raters with as many pages for a as for b (ties-only raters included)
    p_value: float


def rater_sign_test(wins: list[tuple[int, int]]) -> RaterSignTest:
    """Exact sign test over raters: each rater's (wins_a, wins_b) on the pair counts once, by its majority."""
    for_a = sum(a > b for a, b in wins)
    for_b = sum(b > a for a, b in wins)
    return RaterSignTest(for_a, for_b, len(wins) - for_a - for_b, sign_test(for_a, for_b))


def cluster_bootstrap_ratio(num: list[float], den: list[float], n_boot: int = 2000, confidence: float = 0.95,
                            seed: int = 0) -> tuple[float, float]:
    """Percentile interval of sum(num) / sum(den) when raters (index k: num[k], den[k]) are resampled with
    replacement; (nan, nan) with fewer than 2 raters. E.g. A/B: num = wins of a, den = wins of a + b;
    MOS: num = sum of scores, den = number of scores."""
    num_a, den_a = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if len(num_a) < 2 or den_a.sum() <= 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num_a), size=(n_boot, len(num_a)))
    d = den_a[idx].sum(axis=1)
    ratios = num_a[idx].sum(axis=1)[d > 0] / d[d > 0]
    alpha = (1 - confidence) / 2
    return (float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha)))


@dataclass
class PairedDiff:
    mean: float
    low: float
    high: float
    n: int
    p_value: float


def paired_t(differences: list[float], confidence: float = 0.95) -> PairedDiff:
    """Mean of per-rater differences with a t interval and the two-sided one-sample t-test p (nan if n < 2)."""
    m = mean_ci_t(differences, confidence)
    if m.n < 2:
        return PairedDiff(m.mean, math.nan, math.nan, m.n, math.nan)
    if m.sd == 0:
        p = 1.0 if m.mean == 0 else 0.0
    else:
        p = float(2 * _st.t.sf(abs(m.mean) / (m.sd / math.sqrt(m.n)), m.n - 1))
    return PairedDiff(m.mean, m.low, m.high, m.n, p)


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman rank correlation; nan when either side is constant or n < 3."""
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(_st.spearmanr(x, y).statistic)

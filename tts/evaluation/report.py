"""Aggregate per-utterance results per system into means with 95 % confidence intervals.

Input: ``{system_name: [ {metric: value, ...}, ... ]}`` (one dict per utterance).  Every numeric
(int / float / bool) key is a metric; bools average to rates; None / NaN / inf values are left out of
that metric (and counted in ``n_missing``); string keys (ids, texts) are carried only into the JSON.

CI: percentile bootstrap of the mean (default, 2000 resamples, fixed seed) or Student t.
Output: a markdown table (systems x metrics, "mean [low, high]") and a JSON file with the summaries
and the per-utterance rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class MetricSummary:
    mean: float
    ci_low: float
    ci_high: float
    std: float
    n: int
    n_missing: int


def _numeric(v) -> float | None:
    if isinstance(v, (bool, np.bool_)):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def mean_ci(values: Sequence[float], *, method: str = "bootstrap", level: float = 0.95,
            n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high); with one value the interval is (nan, nan)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan
    m = float(x.mean())
    if x.size == 1:
        return m, math.nan, math.nan
    alpha = 1.0 - level
    if method == "t":
        from scipy import stats

        half = float(stats.t.ppf(1 - alpha / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
        return m, m - half, m + half
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, x.size, size=(n_boot, x.size))
        means = x[idx].mean(axis=1)
        lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
        return m, float(lo), float(hi)
    raise ValueError(f"method must be 'bootstrap' or 't', got {method!r}")


def summarise(rows: Sequence[Mapping], *, metrics: Sequence[str] | None = None, method: str = "bootstrap",
              level: float = 0.95, n_boot: int = 2000, seed: int = 0) -> dict[str, MetricSummary]:
    if metrics is None:
        metrics = []
        for r in rows:
            for k, v in r.items():
                if k not in metrics and (_numeric(v) is not None or isinstance(v, float)):
                    metrics.append(k)
    out = {}
    for k in metrics:
        vals = [_numeric(r.get(k)) for r in rows]
        good = [v for v in vals if v is not None]
        m, lo, hi = mean_ci(good, method=method, level=level, n_boot=n_boot, seed=seed)
        std = float(np.std(good, ddof=1)) if len(good) > 1 else math.nan
        out[k] = MetricSummary(mean=m, ci_low=lo, ci_high=hi, std=std, n=len(good),
                               n_missing=len(vals) - len(good))
    return out


def summarise_systems(per_system: Mapping[str, Sequence[Mapping]], **kw) -> dict[str, dict[str, MetricSummary]]:
    return {name: summarise(rows, **kw) for name, rows in per_system.items()}


def _fmt(x: float, digits: int) -> str:
    return "nan" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def to_markdown(summaries: Mapping[str, Mapping[str, MetricSummary]], *, title: str = "Evaluation",
                digits: int = 3, level: float = 0.95) -> str:
    metrics: list[str] = []
    for s in summaries.values():
        metrics += [k for k in s if k not in metrics]
    lines = [f"# {title}", "", f"Mean [{int(level * 100)} % CI] over utterances; n = utterances scored.", ""]
    lines.append("| system | n | " + " | ".join(metrics) + " |")
    lines.append("|---|---|" + "---|" * len(metrics))
    for name, s in summaries.items():
        n = max((v.n for v in s.values()), default=0)
        cells = []
        for k in metrics:
            v = s.get(k)
            cells.append("" if v is None else f"{_fmt(v.mean, digits)} [{_fmt(v.ci_low, digits)}, {_fmt(v.ci_high, digits)}]")
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _jsonable(v):
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None  # strict JSON has no NaN
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def write_report(per_system: Mapping[str, Sequence[Mapping]], out_dir: str | Path, *, name: str = "report",
                 title: str = "Evaluation", method: str = "bootstrap", level: float = 0.95,
                 n_boot: int = 2000, seed: int = 0, digits: int = 3) -> tuple[Path, Path]:
    """Write ``out_dir/{name}.md`` and ``out_dir/{name}.json``; returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarise_systems(per_system, method=method, level=level, n_boot=n_boot, seed=seed)
    md = out_dir / f"{name}.md"
    js = out_dir / f"{name}.json"
    md.write_text(to_markdown(summaries, title=title, digits=digits, level=level))
    payload = {
        "title": title,
        "ci": {"method": method, "level": level, "n_boot": n_boot if method == "bootstrap" else None, "seed": seed},
        "summary": {sys: {k: asdict(v) for k, v in s.items()} for sys, s in summaries.items()},
        "utterances": {sys: list(rows) for sys, rows in per_system.items()},
    }
    js.write_text(json.dumps(_jsonable(payload), indent=2, allow_nan=False) + "\n")
    return md, js

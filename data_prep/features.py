"""Per-utterance mel, pitch and energy, cached on disk, plus corpus statistics.

    python -m data_prep.features --data data/slt [--jobs 2] [--features-dir DIR]

For each utterance of DIR/metadata.csv, DIR/features/ID.pt (its contents, how they are made and when a
cached file is valid: tts.data.features, the product's) is computed or reused; a cached file is reused
only if it is current. DIR/features/stats.json has pitch
mean/std over voiced frames (Hz and log Hz), energy mean/std over all frames, per-channel mel
mean/std, counts, and the mel config.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import torch

from data_prep.atomic import tmp_path, write_json_atomic
from tts.audio import MelConfig, MelSpectrogram, load_wav
from tts.data.corpus import CorpusError, read_metadata, wav_path
from tts.data.features import FEATURE_VERSION, compute_features, corpus_pitch_config, is_current


@dataclass
class Accumulator:
    """Sums for corpus statistics (float64); mergeable across workers."""

    n_mels: int
    n_utterances: int = 0
    frames: int = 0
    mel_sum: np.ndarray = field(default=None)  # type: ignore[assignment]  # [n_mels]
    mel_sumsq: np.ndarray = field(default=None)  # type: ignore[assignment]  # [n_mels]
    voiced: int = 0
    f0_sum: float = 0.0
    f0_sumsq: float = 0.0
    logf0_sum: float = 0.0
    logf0_sumsq: float = 0.0
    energy_sum: float = 0.0
    energy_sumsq: float = 0.0

    def __post_init__(self) -> None:
        if self.mel_sum is None:
            self.mel_sum = np.zeros(self.n_mels)
            self.mel_sumsq = np.zeros(self.n_mels)

    def add(self, d: dict[str, Any]) -> None:
        mel = d["mel"].double().numpy()  # [n_mels, T]
        f0 = d["pitch"].double().numpy()
        energy = d["energy"].double().numpy()
        voiced = f0[f0 > 0]
        self.n_utterances += 1
        self.frames += mel.shape[1]
        self.mel_sum += mel.sum(axis=1)
        self.mel_sumsq += (mel**2).sum(axis=1)
        self.voiced += voiced.size
        self.f0_sum += voiced.sum()
        self.f0_sumsq += (voiced**2).sum()
        self.logf0_sum += np.log(voiced).sum()
        self.logf0_sumsq += (np.log(voiced) ** 2).sum()
        self.energy_sum += energy.sum()
        self.energy_sumsq += (energy**2).sum()

    def merge(self, other: "Accumulator") -> None:
        for name in ("n_utterances", "frames", "voiced", "f0_sum", "f0_sumsq", "logf0_sum", "logf0_sumsq",
                     "energy_sum", "energy_sumsq"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.mel_sum += other.mel_sum
        self.mel_sumsq += other.mel_sumsq

    def stats(self, config: MelConfig, pitch_config: dict[str, Any]) -> dict[str, Any]:
        def mean_std(s: float | np.ndarray, ss: float | np.ndarray, n: int) -> tuple[Any, Any]:
            if n == 0:
                return float("nan"), float("nan")
            mean = s / n
            return mean, np.sqrt(np.maximum(ss / n - mean**2, 0.0))

        f0_mean, f0_std = mean_std(self.f0_sum, self.f0_sumsq, self.voiced)
        lf0_mean, lf0_std = mean_std(self.logf0_sum, self.logf0_sumsq, self.voiced)
        e_mean, e_std = mean_std(self.energy_sum, self.energy_sumsq, self.frames)
        m_mean, m_std = mean_std(self.mel_sum, self.mel_sumsq, self.frames)
        return {
            "n_utterances": self.n_utterances,
            "total_frames": self.frames,
            "voiced_frames": self.voiced,
            "hours": self.frames * config.frame_seconds / 3600,
            "pitch": {"mean_hz": float(f0_mean), "std_hz": float(f0_std),
                      "mean_log_hz": float(lf0_mean), "std_log_hz": float(lf0_std),
                      "over": "voiced frames (pitch > 0)"},
            "energy": {"mean": float(e_mean), "std": float(e_std), "over": "all frames"},
            "mel": {"mean": np.asarray(m_mean).tolist(), "std": np.asarray(m_std).tolist(),
                    "over": "all frames, per channel"},
            "mel_config": config.to_dict(),
            "pitch_config": dict(pitch_config),
            "version": FEATURE_VERSION,
        }


# --- per-utterance work (runs in pool workers) ------------------------------------------------------
_MEL_FN: MelSpectrogram | None = None
_PITCH_CONFIG: dict[str, Any] | None = None


def _init_worker(config_dict: dict[str, Any], pitch_config: dict[str, Any]) -> None:
    global _MEL_FN, _PITCH_CONFIG
    torch.set_num_threads(1)  # one process per core; intra-op threads would oversubscribe
    _MEL_FN = MelSpectrogram(MelConfig.from_dict(config_dict))
    _PITCH_CONFIG = pitch_config


def _process(job: tuple[str, str, str]) -> tuple[str, str, Accumulator | str]:
    """(id, data_dir, features_dir) -> (id, "computed" | "cached" | "failed", stats or error)."""
    utt_id, data_dir, features_dir = job
    assert _MEL_FN is not None and _PITCH_CONFIG is not None
    config = _MEL_FN.config
    wav = wav_path(data_dir, utt_id)
    out = Path(features_dir) / f"{utt_id}.pt"
    acc = Accumulator(n_mels=config.n_mels)
    try:
        n_samples = sf.info(str(wav)).frames
        if out.is_file():
            try:
                d = torch.load(out, map_location="cpu", weights_only=True)
                if is_current(d, config, n_samples, _PITCH_CONFIG):
                    acc.add(d)
                    return utt_id, "cached", acc
            except Exception:  # corrupt/truncated cache file: recompute below
                pass
        d = compute_features(load_wav(wav, config.sample_rate), _MEL_FN, _PITCH_CONFIG)
        tmp = tmp_path(out)
        torch.save(d, tmp)
        tmp.replace(out)
        acc.add(d)
        return utt_id, "computed", acc
    except Exception as e:  # one bad wav is reported, not fatal for the corpus
        return utt_id, "failed", f"{type(e).__name__}: {e}"


@dataclass
class FeatureSummary:
    n_computed: int
    n_cached: int
    failures: dict[str, str]
    stats: dict[str, Any]
    wall_seconds: float


def extract_features(data_dir: str | Path, config: MelConfig | None = None, jobs: int = 1,
                     features_dir: str | Path | None = None, ids: list[str] | None = None) -> FeatureSummary:
    """Compute (or reuse) features for every utterance (or `ids`) and write stats.json."""
    t0 = time.monotonic()
    data_dir = Path(data_dir)
    config = config or MelConfig.default()
    features_dir = Path(features_dir) if features_dir else data_dir / "features"
    features_dir.mkdir(parents=True, exist_ok=True)
    for p in features_dir.glob(".*.tmp"):
        p.unlink(missing_ok=True)
    ids = ids if ids is not None else [u.id for u in read_metadata(data_dir)]
    pitch_config = corpus_pitch_config(data_dir)  # the corpus's tracker (corpus.json; default dio)
    work = [(i, str(data_dir), str(features_dir)) for i in ids]

    total = Accumulator(n_mels=config.n_mels)
    counts = {"computed": 0, "cached": 0}
    failures: dict[str, str] = {}

    def collect(results: Any) -> None:
        for k, (utt_id, status, payload) in enumerate(results, start=1):
            if status == "failed":
                failures[utt_id] = str(payload)
                print(f"FAILED {utt_id}: {payload}", file=sys.stderr, flush=True)
            else:
                counts[status] += 1
                total.merge(payload)  # type: ignore[arg-type]
            if k % 500 == 0:
                print(f"  {k}/{len(work)} ({counts['computed']} computed, {counts['cached']} cached, "
                      f"{len(failures)} failed) {time.monotonic() - t0:.0f} s", flush=True)

    if jobs <= 1:
        threads = torch.get_num_threads()
        _init_worker(config.to_dict(), pitch_config)
        try:
            collect(map(_process, work))
        finally:
            torch.set_num_threads(threads)
    else:
        # spawn, not fork: a parent that already ran torch/OpenMP can deadlock forked children.
        with mp.get_context("spawn").Pool(jobs, initializer=_init_worker,
                                          initargs=(config.to_dict(), pitch_config)) as pool:
            collect(pool.imap_unordered(_process, work, chunksize=16))

    stats = total.stats(config, pitch_config)
    stats["failures"] = failures
    write_json_atomic(features_dir / "stats.json", stats)
    return FeatureSummary(counts["computed"], counts["cached"], failures, stats, time.monotonic() - t0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mel/pitch/energy features + stats for a prepared corpus")
    ap.add_argument("--data", type=Path, required=True, help="corpus folder (metadata.csv, wavs/)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--features-dir", type=Path, default=None, help="default: DATA/features")
    args = ap.parse_args(argv)
    try:
        s = extract_features(args.data, MelConfig.default(), args.jobs, args.features_dir)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    p = s.stats["pitch"]
    print(f"features {args.features_dir or args.data / 'features'}: {s.n_computed} computed, {s.n_cached} cached, "
          f"{len(s.failures)} failed, {s.stats['total_frames']} frames ({s.stats['hours']:.2f} h) in "
          f"{s.wall_seconds:.0f} s; pitch {p['mean_hz']:.1f} +- {p['std_hz']:.1f} Hz, "
          f"energy {s.stats['energy']['mean']:.2f} +- {s.stats['energy']['std']:.2f}")
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())

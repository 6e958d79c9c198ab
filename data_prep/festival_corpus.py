"""Build the built-in corpus: Festival's SLT HTS voice reading sentences from Debian's fortunes.

    python -m data_prep.festival_corpus --n 10500 --out data/slt [--jobs 2]

Output (LJSpeech layout, see data_prep.corpus):
    DIR/wavs/ID.wav           22 050 Hz mono 16-bit, resampled from Festival's 32 kHz by sox `rate -v`
    DIR/segments/ID.json      Festival's phone segmentation + word sequence + normalised text
    DIR/metadata.csv          id|text|normalised text (Festival's word expansion, punctuation kept)
    DIR/splits/{train,val,test}.txt, DIR/corpus.json, DIR/failures.jsonl (sentences Festival failed on)

With --prosody-variation R, each of the N texts is rendered R times with hidden random prosody
(data_prep.prosody: speaking rate, F0 level, lengthened pauses), IDs `var_00001_1` ... `var_00001_R`;
the drawn values go to DIR/prosody/ID.json (never read by a dataset), and the splits keep the
renditions of a text together, hashed by the `slt_%05d` ID of the same text, so the held-out texts are
the ones the deterministic corpus holds out too.

IDs are `slt_00001`, ... in the sentence order of data_prep.sentences (seeded hash order), so the
first N of a larger build are the same utterances as a build with --n N.  --short adds the whole short pool
(data_prep.sentences.short_sentences: one- and two-word sentences and interjections, which the main pool leaves
out) as `slts_00001`, ... in its own order, so the main corpus's IDs, texts and splits stay as they were; the texts
of the short-utterance gate (recipes.bench.short_utterances) are kept out of that pool.  J shards = J threads, each
driving one long-running `festival` process (the work happens in the child processes, so threads are
enough). Resumable: an utterance whose wav and segments json exist (json written last, with its text)
is skipped; a killed run loses only the utterances in flight, whose temp files are swept on restart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import soundfile as sf

from data_prep import sentences as sent
from data_prep.atomic import remove_stale_tmp, tmp_path, write_json_atomic
from data_prep.corpus import Utterance, segments_path, wav_path, write_metadata
from data_prep.festival import VOICE, FestivalError, FestivalProcess, SynthResult
from data_prep.prosody import PROSODY_DIR, Prosody, ProsodyRanges, draw_prosody, insert_pauses, side_record
from data_prep.splits import SplitConfig, write_splits

SAMPLE_RATE = 22050
ID_PREFIX = "slt"
SHORT_PREFIX = "slts"  # the short pool's IDs (--short); "slt_" sorts before "slts", so split files list them last
VARIED_PREFIX = "var"
# sox: -D no dither (byte-reproducible output); `rate -v` = very high quality linear-phase resampler.
SOX_RATE_EFFECT = ["rate", "-v"]
# Hash of this builder's source as loaded (not as on disk at the end of a long run).
BUILDER_SHA256 = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


class ResampleError(RuntimeError):
    pass


@dataclass(frozen=True)
class Planned:
    id: str
    text: str
    prosody: Prosody | None = None  # None: Festival's own rendering (the deterministic corpus)
    text_id: str | None = None  # the `slt_%05d` ID of the text (varied corpus: shared by its renditions)
    rendition: int = 0
    seed: int = 0


@dataclass
class BuildSummary:
    out_dir: str
    n_requested: int
    n_utterances: int = 0  # in metadata.csv after this run
    n_synthesised: int = 0  # this run
    n_already_done: int = 0
    n_failed: int = 0  # this run
    n_failed_total: int = 0  # listed in failures.jsonl for the planned IDs
    n_clipped: int = 0  # utterances where sox reported clipped samples (this run)
    clipped_ids: list[str] = field(default_factory=list)  # which ones (a count alone named nothing to listen to)
    audio_seconds: float = 0.0  # whole corpus
    wall_seconds: float = 0.0
    splits: dict[str, int] = field(default_factory=dict)
    festival_sample_rates: set[int] = field(default_factory=set)  # as read from Festival's wavs

    def text(self) -> str:
        rtf = self.wall_seconds / self.audio_seconds if self.audio_seconds else 0.0
        return (
            f"corpus {self.out_dir}\n"
            f"  utterances: {self.n_utterances} (requested {self.n_requested}; synthesised this run "
            f"{self.n_synthesised}, already done {self.n_already_done}, failed this run {self.n_failed}, "
            f"failed in total {self.n_failed_total})\n"
            f"  audio: {self.audio_seconds / 3600:.2f} h ({self.audio_seconds:.0f} s)\n"
            f"  wall time: {self.wall_seconds:.0f} s (this run; {rtf:.4f} s per audio second overall)\n"
            f"  clipped (this run): {self.n_clipped}{clipped_list(self.clipped_ids)}\n"
            f"  splits: " + ", ".join(f"{k} {v}" for k, v in self.splits.items())
        )


def clipped_list(ids: list[str], shown: int = 10) -> str:
    """": slt_00012, slt_00480" (the first `shown`, then how many more), or nothing."""
    if not ids:
        return ""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ": " + ", ".join(sorted(ids)[:shown]) + more


def plan(texts: list[str], n: int, prefix: str = ID_PREFIX) -> list[Planned]:
    if n > len(texts):
        print(f"warning: only {len(texts)} sentences available, fewer than {n} requested ({prefix})", file=sys.stderr)
    return [Planned(id=f"{prefix}_{i + 1:05d}", text=t) for i, t in enumerate(texts[:n])]


@dataclass(frozen=True)
class Variation:
    """--prosody-variation: `renditions` per text, prosody drawn from `ranges` with `seed`."""

    renditions: int
    seed: int = 0
    ranges: ProsodyRanges = ProsodyRanges()

    def to_dict(self) -> dict[str, object]:
        return {"renditions": self.renditions, "seed": self.seed, **vars(self.ranges),
                "side_files": f"{PROSODY_DIR}/ID.json (never read by a dataset)"}


def plan_varied(texts: list[str], n: int, variation: Variation) -> list[Planned]:
    """R renditions of each of the first `n` texts, each with its own drawn prosody."""
    out = []
    for base in plan(texts, n):
        index = base.id.split("_")[1]
        for r in range(1, variation.renditions + 1):
            utt_id = f"{VARIED_PREFIX}_{index}_{r}"
            out.append(Planned(id=utt_id, text=base.text, text_id=base.id, rendition=r, seed=variation.seed,
                               prosody=draw_prosody(variation.seed, utt_id, variation.ranges)))
    return out


def text_group(utt_id: str) -> str:
    """The split key: a rendition `var_00042_3` is held out with text `slt_00042`."""
    parts = utt_id.split("_")
    return f"{ID_PREFIX}_{parts[1]}" if parts[0] == VARIED_PREFIX and len(parts) == 3 else utt_id


def is_done(out_dir: Path, item: Planned) -> bool:
    """wav + json present and the json is for the same text (guards against a changed sentence pool)."""
    seg = segments_path(out_dir, item.id)
    if not (seg.is_file() and wav_path(out_dir, item.id).is_file()):
        return False
    try:
        return json.loads(seg.read_text(encoding="utf-8")).get("text") == item.text
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False


def resample_sox(src: Path, dst: Path, sample_rate: int, pitch_cents: float = 0.0) -> bool:
    """Resample `src` into `dst` (16-bit mono wav), shifting F0 by `pitch_cents` (sox `pitch`, which
    keeps the duration). Returns True if sox reported clipping."""
    pitch = ["pitch", f"{pitch_cents:.1f}"] if pitch_cents else []
    cmd = ["sox", "-D", "-V2", str(src), "-t", "wav", "-r", str(sample_rate), "-b", "16", "-c", "1",
           "-e", "signed-integer", str(dst), *pitch, *SOX_RATE_EFFECT]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ResampleError(f"sox failed on {src}: {proc.stderr.strip()}")
    return "clipped" in proc.stderr


def synth_utterance(fest: FestivalProcess, out_dir: Path, item: Planned) -> tuple[int, bool]:
    """Synthesise one utterance into wavs/ and segments/ atomically. Returns (n_samples, clipped)."""
    raw = out_dir / ".festival32k" / f"{item.id}.wav"
    wav, seg = wav_path(out_dir, item.id), segments_path(out_dir, item.id)
    wav_tmp, seg_tmp = tmp_path(wav), tmp_path(seg)
    side = out_dir / PROSODY_DIR / f"{item.id}.json"
    try:
        prosody = item.prosody
        result: SynthResult = fest.synth(item.id, item.text, raw, rate=prosody.rate if prosody else 1.0)
        if not result.segments or not result.words:
            raise FestivalError("festival produced no phones or words")
        raw_info = sf.info(str(raw))
        ends = [s.end for s in result.segments]
        edits = []
        if prosody is not None and any(prosody.pause_draws):
            wave, sr = sf.read(str(raw), dtype="int16")
            wave, ends, edits = insert_pauses(wave, sr, [s.phone for s in result.segments], ends, prosody)
            sf.write(str(raw), wave, sr, subtype="PCM_16")
        clipped = resample_sox(raw, wav_tmp, SAMPLE_RATE, prosody.pitch_cents if prosody else 0.0)
        n_samples = sf.info(str(wav_tmp)).frames
        if prosody is not None:
            write_json_atomic(side, side_record(item.id, item.text_id or item.id, item.rendition, item.seed,
                                                prosody, edits))
        record = {
            "id": item.id,
            "text": item.text,
            "normalised_text": result.normalised_text(),
            "words": result.words,
            "sample_rate": SAMPLE_RATE,
            "n_samples": n_samples,
            "festival_sample_rate": raw_info.samplerate,
            "festival_n_samples": raw_info.frames,
            "segments": [{"phone": s.phone, "end": end, "word": s.word} for s, end in zip(result.segments, ends)],
        }
        seg_tmp.write_text(json.dumps(record, indent=None) + "\n", encoding="utf-8")
        # wav first, json last: the json is the "utterance complete" marker that is_done checks.
        wav_tmp.replace(wav)
        seg_tmp.replace(seg)
        return n_samples, clipped
    finally:
        for p in (raw, wav_tmp, seg_tmp):
            p.unlink(missing_ok=True)


class _Progress:
    """Thread-safe counters + a progress line every `every` utterances."""

    def __init__(self, total: int, every: int = 100) -> None:
        self.total, self.every = total, every
        self.done = self.failed = self.clipped = 0
        self.clipped_ids: list[str] = []
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def tick(self, ok: bool, clipped: bool = False, utt_id: str | None = None) -> None:
        with self.lock:
            self.done += ok
            self.failed += not ok
            self.clipped += clipped
            if clipped and utt_id:
                self.clipped_ids.append(utt_id)
            n = self.done + self.failed
            if n % self.every == 0 or n == self.total:
                dt = time.monotonic() - self.t0
                eta = dt / n * (self.total - n)
                print(f"  {n}/{self.total} ({self.failed} failed) {dt:.0f} s, eta {eta:.0f} s", flush=True)


def _shard_worker(work: queue.Queue[Planned], out_dir: Path, timeout_s: float, progress: _Progress,
                  failures: list[dict[str, str]], stop: threading.Event, errors: list[BaseException]) -> None:
    fest = FestivalProcess(voice=VOICE, timeout_s=timeout_s)
    try:
        fest.start()  # a missing festival/voice is fatal for the build, reported by build_corpus
    except (OSError, FestivalError) as e:
        errors.append(e)
        return
    try:
        while not stop.is_set():
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            try:
                _, clipped = synth_utterance(fest, out_dir, item)
                progress.tick(ok=True, clipped=clipped, utt_id=item.id)
            except (FestivalError, ResampleError, RuntimeError, OSError) as e:
                if stop.is_set():
                    return  # interrupted: not the sentence's fault, retried on the next run
                print(f"FAILED {item.id} {item.text!r}: {e}", file=sys.stderr, flush=True)
                record = {"id": item.id, "text": item.text, "error": str(e)}
                with progress.lock:
                    failures.append(record)
                    with open(out_dir / "failures.jsonl", "a", encoding="utf-8") as f:
                        f.write(json.dumps(record) + "\n")
                progress.tick(ok=False)
    finally:
        fest.close()


def _read_failures(out_dir: Path) -> dict[str, str]:
    """id -> text of earlier failures (skipped again unless --retry-failed)."""
    path = out_dir / "failures.jsonl"
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                out[rec["id"]] = rec["text"]
            except (json.JSONDecodeError, KeyError):
                continue  # a line torn by a kill
    return out


def _tool_versions() -> dict[str, str]:
    versions = {}
    for pkg in ("festival", "festvox-us-slt-hts", "festlex-cmu", "sox", "fortunes", "fortunes-min"):
        try:
            versions[pkg] = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                                           capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            versions[pkg] = "unknown"
    return versions


def build_corpus(out_dir: Path, texts: list[str], n: int, jobs: int, source: dict[str, object],
                 split_config: SplitConfig = SplitConfig(), timeout_s: float = 120.0,
                 retry_failed: bool = False, command: str | None = None,
                 variation: Variation | None = None, short_texts: list[str] | None = None,
                 short_source: dict[str, object] | None = None) -> BuildSummary:
    """Synthesise the first `n` of `texts` (and every one of `short_texts`, IDs SHORT_PREFIX) into `out_dir`
    (resuming), then write metadata/splits/corpus.json."""
    short_texts = short_texts or []
    if short_texts and variation is not None:
        raise ValueError("a short pool goes with the deterministic corpus only (no prosody variation)")
    t0 = time.monotonic()
    if shutil.which("sox") is None:
        raise FileNotFoundError("`sox` not found on PATH: apt-get install -y --no-install-recommends sox")
    out_dir = Path(out_dir)
    for sub in ("wavs", "segments", ".festival32k", *((PROSODY_DIR,) if variation else ())):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
        remove_stale_tmp(out_dir / sub)
    for p in (out_dir / ".festival32k").glob("*.wav"):
        p.unlink()

    planned = plan_varied(texts, n, variation) if variation else plan(texts, n)
    planned += plan(short_texts, len(short_texts), SHORT_PREFIX)
    earlier_failures = {} if retry_failed else _read_failures(out_dir)
    if retry_failed:
        (out_dir / "failures.jsonl").unlink(missing_ok=True)
    summary = BuildSummary(out_dir=str(out_dir), n_requested=n + len(short_texts))
    work: queue.Queue[Planned] = queue.Queue()
    for item in planned:
        if is_done(out_dir, item):
            summary.n_already_done += 1
        elif earlier_failures.get(item.id) != item.text:
            work.put(item)

    n_work = work.qsize()
    print(f"{len(planned)} planned, {summary.n_already_done} already done, {n_work} to synthesise "
          f"with {jobs} festival processes", flush=True)
    progress = _Progress(total=n_work)
    failures: list[dict[str, str]] = []
    stop = threading.Event()
    errors: list[BaseException] = []
    workers = [threading.Thread(target=_shard_worker, daemon=True,
                                args=(work, out_dir, timeout_s, progress, failures, stop, errors))
               for _ in range(min(jobs, max(n_work, 1)))]
    for w in workers:
        w.start()
    try:
        for w in workers:
            while w.is_alive():
                w.join(timeout=1.0)
    except KeyboardInterrupt:
        stop.set()  # workers finish their in-flight utterance and exit; festival children get EOF
        for w in workers:
            w.join()
        raise
    if errors and not work.empty():
        raise RuntimeError(f"festival could not be started: {errors[0]}") from errors[0]
    summary.n_synthesised, summary.n_failed, summary.n_clipped = progress.done, progress.failed, progress.clipped
    summary.clipped_ids = list(progress.clipped_ids)
    try:
        (out_dir / ".festival32k").rmdir()  # only Festival's temporary 32 kHz files lived there
    except OSError:
        pass

    summary = _finalise(out_dir, planned, summary, split_config)
    summary.wall_seconds = time.monotonic() - t0
    short = {"n_requested": len(short_texts), "id_format": f"{SHORT_PREFIX}_%05d, position in the short pool's order",
             "text_source": short_source} if short_texts else None
    write_json_atomic(out_dir / "corpus.json", _corpus_info(summary, split_config, source, command, variation, short))
    return summary


def _finalise(out_dir: Path, planned: list[Planned], summary: BuildSummary,
              split_config: SplitConfig) -> BuildSummary:
    """metadata.csv + splits from the utterances that are complete on disk."""
    utts, seconds = [], 0.0
    failed = _read_failures(out_dir)
    for item in planned:
        if is_done(out_dir, item):
            rec = json.loads(segments_path(out_dir, item.id).read_text(encoding="utf-8"))
            utts.append(Utterance(id=item.id, text=item.text, normalised_text=rec["normalised_text"]))
            seconds += rec["n_samples"] / rec["sample_rate"]
            summary.festival_sample_rates.add(rec["festival_sample_rate"])
        elif failed.get(item.id) == item.text:
            summary.n_failed_total += 1
    write_metadata(out_dir, utts)
    summary.n_utterances = len(utts)
    summary.audio_seconds = seconds
    summary.splits = write_splits(out_dir, [u.id for u in utts], split_config, group=text_group)
    return summary


def _corpus_info(summary: BuildSummary, split_config: SplitConfig, source: dict[str, object],
                 command: str | None, variation: Variation | None = None,
                 short: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "name": "festival-slt-fortunes" + ("-varied" if variation else ""),
        "prosody_variation": variation.to_dict() if variation else None,
        "builder": "data_prep.festival_corpus",
        "builder_sha256": BUILDER_SHA256,
        "n_requested": summary.n_requested,
        "n_utterances": summary.n_utterances,
        "n_failed": summary.n_failed_total,
        "hours": round(summary.audio_seconds / 3600, 4),
        "voice": VOICE,
        "sample_rate": SAMPLE_RATE,
        "festival_sample_rate": sorted(summary.festival_sample_rates),
        "resampler": "sox -D " + " ".join(SOX_RATE_EFFECT) + " (very high quality, no dither)",
        "id_format": (f"{VARIED_PREFIX}_%05d_R: text position in the sentence order, rendition R" if variation
                      else f"{ID_PREFIX}_%05d, position in the sentence order"),
        "command": command,
        "text_source": source,
        "short_pool": short,
        "splits": {**split_config.to_dict(), "sizes": summary.splits},
        "tool_versions": _tool_versions(),
        "last_run": {
            "synthesised": summary.n_synthesised,
            "already_done": summary.n_already_done,
            "failed": summary.n_failed,
            "wall_seconds": round(summary.wall_seconds, 1),
        },
    }


def load_texts(sentences_file: Path | None, config: sent.SentenceConfig) -> tuple[list[str], dict[str, object]]:
    """The ordered sentence pool and its provenance: fortunes, or a file of one sentence a line."""
    if sentences_file is None:
        return sent.fortune_sentences(config), {
            "kind": "debian-fortunes", **sent.source_provenance(), "sentence_config": vars(config)}
    lines = sentences_file.read_text(encoding="utf-8").splitlines()
    kept, seen = [], set()
    for line in lines:
        line = " ".join(line.split())
        if line and sent.filter_reason(line, config) is None and line.lower() not in seen:
            kept.append(line)
            seen.add(line.lower())
    return kept, {"kind": "sentences-file", "path": str(sentences_file),
                  "sha256": hashlib.sha256(sentences_file.read_bytes()).hexdigest(),
                  "sentence_config": vars(config), "order": "file order"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True, help="number of sentences (the first N in corpus order)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="festival processes (default: cores)")
    ap.add_argument("--max-words", type=int, default=25, help="longest sentence in words (fixtures use fewer)")
    ap.add_argument("--sentences", type=Path, default=None,
                    help="use this file (one sentence a line, file order, same filters) instead of fortunes")
    ap.add_argument("--test-fraction", type=float, default=SplitConfig.test_fraction)
    ap.add_argument("--val-fraction", type=float, default=SplitConfig.val_fraction)
    ap.add_argument("--min-per-split", type=int, default=SplitConfig.min_per_split,
                    help="tiny-corpus rule: top up val/test to this many (capped at N//3)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per sentence before festival is restarted")
    ap.add_argument("--retry-failed", action="store_true", help="retry sentences listed in failures.jsonl")
    ap.add_argument("--short", action="store_true",
                    help="also the short pool (1-2 words, interjections; IDs slts_%%05d; fortunes only)")
    var = ap.add_argument_group("prosody variation (a one-to-many corpus; data_prep.prosody)")
    var.add_argument("--prosody-variation", type=int, default=0, metavar="R",
                     help="render each text R times with hidden random prosody (0 = Festival's own, once)")
    var.add_argument("--seed", type=int, default=0, help="seed of the prosody draws")
    var.add_argument("--rate-range", type=float, nargs=2, default=ProsodyRanges.rate_range, metavar=("LO", "HI"))
    var.add_argument("--pitch-range-cents", type=float, nargs=2, default=ProsodyRanges.pitch_range_cents,
                     metavar=("LO", "HI"))
    var.add_argument("--pause-prob", type=float, default=ProsodyRanges.pause_prob)
    var.add_argument("--pause-range", type=float, nargs=2, default=ProsodyRanges.pause_range_s, metavar=("LO", "HI"),
                     help="seconds of silence added to a chosen phrase-internal pause")
    args = ap.parse_args(argv)
    if args.prosody_variation < 0:
        ap.error("--prosody-variation must be >= 0")
    if args.short and (args.prosody_variation or args.sentences is not None):
        ap.error("--short goes with the fortunes corpus only (no --sentences, no --prosody-variation)")
    try:
        variation = Variation(args.prosody_variation, args.seed, ProsodyRanges(
            tuple(args.rate_range), tuple(args.pitch_range_cents), args.pause_prob, tuple(args.pause_range),
        )) if args.prosody_variation else None
    except ValueError as e:
        ap.error(str(e))

    config = sent.SentenceConfig(max_words=args.max_words)
    texts, source = load_texts(args.sentences, config)
    short_texts, short_source = [], None
    if args.short:
        from recipes.bench.short_utterances import DEFAULT_TEXTS as GATE_TEXTS  # held out of the short pool

        short_texts = sent.short_sentences(held_out=GATE_TEXTS)
        short_source = {"kind": "debian-fortunes + data_prep.sentences.INTERJECTIONS",
                        "sentence_config": vars(sent.SHORT_CONFIG), "held_out_gate_texts": list(GATE_TEXTS),
                        "n_available": len(short_texts)}
    split_config = SplitConfig(args.test_fraction, args.val_fraction, args.min_per_split)
    command = "python -m data_prep.festival_corpus " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        summary = build_corpus(args.out, texts, args.n, max(1, args.jobs), source, split_config,
                               args.timeout, args.retry_failed, command, variation, short_texts, short_source)
    except (FileNotFoundError, RuntimeError) as e:  # missing festival/sox/voice: say so, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary.text(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

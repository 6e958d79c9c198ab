"""Sequence-level knowledge distillation (FastSpeech's teacher data): a corpus whose targets are a teacher
model's own speech.

    python -m data_prep.distilled_corpus --teacher exp/mm_ar/checkpoints/last.ckpt \
        --src data/slt_varied --out data/slt_varied_kd

For each text of the source corpus's train and val splits (once per text: the renditions of a varied
corpus are one text, data_prep.festival_corpus.text_group) the teacher speaks the text through THE
engine's stages (TorchEngine.encode -> mels -> vocode, seed and item index fixed, so a rerun
makes the same corpus). The corpus keeps the teacher's mel itself as the feature (features/ID.pt, what a
student trains on), not the mel of its vocoded audio, which would add the vocoder's error to the target;
pitch and energy are measured on the vocoded audio (wavs/ID.wav) as data_prep.features measures them.
A teacher decode the AR's own failure check rejects (no stop, skip, repeat, low coverage), or one too
short to analyse, is left out and recorded with the reason. The test split is left empty: students are evaluated on the source corpus's held-out
recordings. Resumable: texts already written are skipped.

Durations for a student then come from the teacher's alignment of its own output:
    python -m recipes.extract_durations checkpoint=TEACHER data_root=OUT name=teacher "splits=[train,val]"
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf
import torch

from data_prep.atomic import tmp_path, write_json_atomic, write_text_atomic
from data_prep.corpus import CorpusError, Utterance, features_path, read_metadata, read_split, wav_path, write_metadata
from data_prep.features import extract_features
from data_prep.festival_corpus import text_group
from tts.audio import MelSpectrogram, save_wav
from tts.data.features import compute_features
from tts.evaluation.lengths import FAILURE_KINDS

KD_PREFIX = "kd"


@dataclass(frozen=True)
class DistilledSummary:
    n_texts: int  # texts the source's train + val splits hold
    n_written: int  # made by this run
    n_present: int  # found from an earlier run
    rejected: dict[str, str]  # id -> why the teacher's decode was left out
    wall_seconds: float


def distilled_id(group: str) -> str:
    """`slt_00042` (a text group of the source) -> `kd_00042`."""
    return f"{KD_PREFIX}_{group.split('_', 1)[1]}" if "_" in group else f"{KD_PREFIX}_{group}"


def teacher_texts(src: Path) -> dict[str, list[tuple[str, Utterance]]]:
    """split -> [(distilled id, first rendition's utterance)] for train and val, one entry per text group."""
    meta = {u.id: u for u in read_metadata(src)}
    out: dict[str, list[tuple[str, Utterance]]] = {}
    seen: set[str] = set()
    for split in ("train", "val"):
        out[split] = []
        for uid in read_split(src, split):
            group = text_group(uid)
            if group in seen:
                continue
            seen.add(group)
            if uid not in meta:
                raise CorpusError(f"{src}: split {split} names {uid!r}, which metadata.csv lacks")
            out[split].append((distilled_id(group), meta[uid]))
    return out


def build(teacher: Path, src: Path, out: Path, seed: int = 0, vocoder: str = "source-filter",
          limit: int | None = None) -> DistilledSummary:
    """Write the distilled corpus under `out` (see the module docstring); `limit`: first N texts per split."""
    from tts.runtime.torch_engine import TorchEngine  # torch and the models only for the build itself

    t0 = time.monotonic()
    plan = teacher_texts(src)
    if limit is not None:
        plan = {k: v[:limit] for k, v in plan.items()}
    engine = TorchEngine.from_paths(str(teacher), vocoder, "cpu")
    mc = engine.mel_config
    mel_fn = MelSpectrogram(mc)
    (out / "wavs").mkdir(parents=True, exist_ok=True)
    (out / "features").mkdir(parents=True, exist_ok=True)
    rejected: dict[str, str] = {}
    written = present = 0
    kept: dict[str, list[str]] = {}
    utts: list[Utterance] = []
    index = 0
    for split, items in plan.items():
        kept[split] = []
        for kid, u in items:
            index += 1  # the item's stable position: its AR prenet-dropout noise, whatever was resumed
            if features_path(out, kid).is_file() and wav_path(out, kid).is_file():
                present += 1
            else:
                verdict = _speak(engine, mel_fn, u, index - 1, seed, out / "wavs" / f"{kid}.wav",
                                 features_path(out, kid))
                if verdict:
                    rejected[kid] = verdict
                    continue
                written += 1
            kept[split].append(kid)
            utts.append(Utterance(kid, u.text, u.normalised_text))
            if (written + present) % 100 == 0:
                print(f"  {written + present} texts ({written} made, {len(rejected)} rejected) "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
    if not utts:
        raise CorpusError(f"the teacher {teacher} had every decode rejected ({len(rejected)}), e.g. "
                          + "; ".join(f"{k}: {v}" for k, v in list(rejected.items())[:3]))
    write_metadata(out, utts)
    for split in ("train", "val", "test"):
        write_text_atomic(out / "splits" / f"{split}.txt", "".join(f"{i}\n" for i in kept.get(split, [])))
    summary = extract_features(out, mc, jobs=1)  # the cached teacher features: stats.json over them
    if summary.failures:
        raise CorpusError(f"{out}: features failed for {sorted(summary.failures)[:5]}")
    write_json_atomic(out / "corpus.json", {
        "name": f"{src.name}-distilled",
        "builder": "data_prep.distilled_corpus",
        "builder_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "teacher": str(teacher),
        "teacher_sha256": hashlib.sha256(teacher.read_bytes()).hexdigest(),
        "source": str(src),
        "seed": seed,
        "vocoder": vocoder,
        "sample_rate": mc.sample_rate,
        "n_utterances": len(utts),
        "splits": {k: len(v) for k, v in kept.items()},
        "rejected": rejected,
        "hours": round(sum(sf.info(str(wav_path(out, u.id))).duration for u in utts) / 3600, 4),
    })
    return DistilledSummary(sum(len(v) for v in plan.values()), written, present, rejected, time.monotonic() - t0)


def _speak(engine, mel_fn: MelSpectrogram, u: Utterance, index: int, seed: int, wav: Path, feat: Path) -> str:
    """Teacher speech for one text -> wav + features (teacher mel, measured pitch/energy); '' or why not.
    The engine's stages (tts.runtime.torch_engine), not the pipeline: the teacher's mel itself is kept."""
    mc = engine.mel_config
    out = engine.mels([engine.encode(u.text)], [index], engine.defaults.replace(seed=seed))
    if out.failures and not out.failures[0].ok:
        f = out.failures[0]
        return ", ".join(k for k in FAILURE_KINDS if getattr(f, k)) or "failed"
    n = int(out.lengths[0])
    if (n - 1) * mc.hop_length < mc.min_samples:  # too short to measure pitch and energy on
        return f"too short ({n} frames)"
    mel = out.mels[0, :, :n].float().cpu()  # [M, T]
    wave = torch.from_numpy(engine.vocode(out)[0])
    # n_frames(N) = 1 + N // hop: (T - 1) hops of audio give exactly the teacher's T frames
    wave = wave[: (n - 1) * mc.hop_length]
    d = compute_features(wave, mel_fn)  # pitch and energy of the teacher's audio, [T] each
    d["mel"] = mel.to(torch.float16)  # the target: the teacher's own mel, not its vocoded copy's
    save_wav(wav, wave, mc.sample_rate)
    tmp = tmp_path(feat)
    torch.save(d, tmp)
    tmp.replace(feat)
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="a corpus of a teacher model's speech (sequence-level distillation)")
    ap.add_argument("--teacher", type=Path, required=True, help="acoustic checkpoint (.pt or Lightning .ckpt)")
    ap.add_argument("--src", type=Path, required=True, help="source corpus (its train/val texts are spoken)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocoder", default="source-filter",
                    help="makes the audio that pitch and energy are measured on (default: the lab's source-filter)")
    ap.add_argument("--limit", type=int, default=None, help="first N texts of each split (tests, smoke runs)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not args.teacher.is_file():
        print(f"error: teacher checkpoint not found: {args.teacher}", file=sys.stderr)
        return 2
    try:
        s = build(args.teacher, args.src, args.out, args.seed, args.vocoder, args.limit)
    except CorpusError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.out}: {s.n_written} made, {s.n_present} present, {len(s.rejected)} rejected "
          f"of {s.n_texts} texts in {s.wall_seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Durations for the NAR model: distilled from the AR teacher, taken from the corpus's Festival phone
segmentation or from the Piper teacher's own alignments, or imported from a file; see
conf/extract_durations.yaml.  They go to DATA_ROOT/durations/NAME (NAME: festival, piper or ar_teacher by
source), where the data configs look for them (conf/data/*.yaml durations_dir); the command ends with the
report, where it wrote, and the training command that reads them.  User errors: one line, exit 2."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import hydra
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from data_prep.atomic import write_json_atomic
from tts import checkpoint
from tts.data.corpus import CorpusError, load_features, read_segments
from tts.data.dataset import Collate, TTSDataset
from data_prep.piper_corpus import alignments_path
from tts.durations import (SPEECH_FLOOR, durations_from_segments, monotonic_alignment, onset_first_token,
                           piper_segments, spans_in_seconds, speech_level, word_boundary_error,
                           word_spans_from_segments, word_spans_from_tokens)
from tts.training.cli import UsageError, recipe_entry, user_errors
from tts.training.preflight import MissingDataError, require_corpus

log = logging.getLogger(__name__)

SOURCES = ("teacher", "festival", "piper", "external")
# the folder each source writes by default (conf/extract_durations.yaml `name`), where conf/data/*.yaml look
DEFAULT_NAMES = {"teacher": "ar_teacher", "festival": "festival", "piper": "piper", "external": "external"}


# The resolvers below run while Hydra composes the config (out_dir names the run folder, out_dir/hydra): a bad
# source, a data_root that is no corpus or a teacher checkpoint that is not there stops it there, before any
# folder is made (a typo in data_root made DATA_ROOT/durations/NAME/hydra, a corpus-like tree of nothing).
def _durations_name(source: str, checkpoint: str | None = None) -> str:
    if source not in DEFAULT_NAMES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, not {source!r}")
    if source == "teacher" and checkpoint and not Path(checkpoint).is_file():
        raise FileNotFoundError(f"checkpoint not found: {checkpoint} (an AR teacher: python -m recipes.train "
                                f"experiment=ar_cpu_small; on a Festival or Piper corpus source=festival / "
                                f"source=piper need none)")
    return DEFAULT_NAMES[source]


def _corpus_root(data_root: str) -> str:
    try:
        require_corpus(data_root, features=False)
    except MissingDataError as e:  # its wording is the training recipes' (data.root): here the key is data_root
        raise MissingDataError(str(e).replace("data.root", "data_root")) from None
    return data_root


OmegaConf.register_new_resolver("durations_name", _durations_name, replace=True)
OmegaConf.register_new_resolver("corpus_root", _corpus_root, replace=True)

# Above this share of 0-frame phones the durations are suspect (the shipped AR teacher: 1.2 %, Festival's
# segmentation ~0): a teacher whose attention skips phones, or alignments of another text.
ZERO_FRAME_WARNING = 0.05
# The first token holds nothing but the leading pause when its frames' mean energy is under SPEECH_FLOOR x the
# utterance's speech level (tts.durations: the floor that speech passes): a NAR trained on such durations learns
# that a first phone is quiet and speaks a lone vowel ("A.") near-silently.  Measured on data/slt val / test (with
# the median as the reference, before 2026-12-07): Festival's segmentation 34 % / 43 % of
# utterances (its NAR speaks "A." at -35 dBFS), the 9,250-step AR teacher's attention 100 % / 100 % (its NAR: -71 dBFS;
# checkpoints/README.md, "The NAR distilled from the AR teacher"): warn between the two
SILENT_FIRST_WARNING = 0.75  # share of utterances


def save_durations(out_dir: Path, uid: str, durations: np.ndarray) -> None:
    tmp = out_dir / f".{uid}.tmp.npy"
    np.save(tmp, durations.astype(np.int64))
    tmp.replace(out_dir / f"{uid}.npy")


def distil(model, dataset: TTSDataset, out_dir: Path, batch_size: int, max_skip: int,
           first_token_onset: bool = True) -> list[str]:
    """Teacher-forced alignments -> durations; skips utterances already done (resumable).  first_token_onset: the
    first token reaches into the speech (tts.durations.onset_first_token)."""
    collate = Collate(dataset.mel_config.log_floor)
    todo = [k for k, uid in enumerate(dataset.ids) if not (out_dir / f"{uid}.npy").is_file()]
    for start in range(0, len(todo), batch_size):
        batch = collate([dataset[k] for k in todo[start : start + batch_size]])
        with torch.no_grad():
            att = model.teacher_forced_alignment(batch)  # [B, T, L]
        for b, uid in enumerate(batch.ids):
            T, L = int(batch.mel_lengths[b]), int(batch.token_lengths[b])
            d = monotonic_alignment(att[b, :T, :L].numpy(), max_skip=max_skip)
            if first_token_onset:
                d = onset_first_token(d, batch.energy[b, :T].numpy())
            save_durations(out_dir, uid, d)
        log.info("  %d/%d", min(start + batch_size, len(todo)), len(todo))
    return [dataset.ids[k] for k in todo]


def from_festival(dataset: TTSDataset, out_dir: Path, frontend) -> dict:
    """Durations from Festival's own phone segmentation side files (data_prep.festival_corpus), our
    tokens paired with Festival's phones by edit distance (tts.durations.durations_from_segments)."""
    rates, missing = [], []
    for uid in dataset.ids:
        try:
            seg = read_segments(dataset.root, uid)
        except CorpusError:
            missing.append(uid)
            continue
        symbols = frontend.decode(dataset.tokens[uid])
        res = durations_from_segments(symbols, frontend.symbols.is_phone, seg.segments, dataset.n_frames[uid],
                                      dataset.mel_config.frame_seconds)
        save_durations(out_dir, uid, res.durations)
        rates.append(res.phone_match_rate)
    if missing:
        raise CorpusError(f"{dataset.root} has no Festival segmentation for {len(missing)} utterances, "
                          f"e.g. {missing[:3]}: use source=teacher or source=external")
    return {"phone_match_rate_mean": float(np.mean(rates)), "phone_match_rate_p10": float(np.percentile(rates, 10))}


def from_piper(dataset: TTSDataset, out_dir: Path, frontend) -> dict:
    """Durations from the Piper teacher's per-phoneme alignments (data_prep.piper_corpus: the frames its
    VITS decoder generated the audio from), paired with our tokens as Festival's segmentation is."""
    rates, missing = [], []
    for uid in dataset.ids:
        path = alignments_path(dataset.root, uid)
        try:
            side = json.loads(path.read_text())
            phonemes, frames = side["phonemes"], side["frames"]
        except (OSError, ValueError, KeyError) as e:
            missing.append(f"{uid} ({type(e).__name__})")
            continue
        if not phonemes:
            missing.append(f"{uid} (no per-phoneme alignment)")
            continue
        segments = piper_segments(phonemes, frames, dataset.mel_config.frame_seconds)
        symbols = frontend.decode(dataset.tokens[uid])
        res = durations_from_segments(symbols, frontend.symbols.is_phone, segments, dataset.n_frames[uid],
                                      dataset.mel_config.frame_seconds)
        save_durations(out_dir, uid, res.durations)
        rates.append(res.phone_match_rate)
    if missing:
        raise CorpusError(f"{dataset.root} has no usable Piper alignments for {len(missing)} utterances, "
                          f"e.g. {missing[:3]}: rebuild them with python -m data_prep.piper_corpus")
    return {"phone_match_rate_mean": float(np.mean(rates)), "phone_match_rate_p10": float(np.percentile(rates, 10))}


def import_external(path: Path, dataset: TTSDataset, out_dir: Path) -> None:
    wanted = set(dataset.ids)
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            rec = json.loads(line)
            if rec["id"] in wanted:
                save_durations(out_dir, rec["id"], np.asarray(rec["durations"], dtype=np.int64))
    missing = [u for u in dataset.ids if not (out_dir / f"{u}.npy").is_file()]
    if missing:
        raise CorpusError(f"{path} has no durations for {len(missing)} utterances, e.g. {missing[:3]}")


def evaluate(dataset: TTSDataset, out_dir: Path, frontend, reference: Path | None = None) -> dict:
    """Checks (sum, shape) every file; word-boundary error against the Festival side file where it exists, or,
    given `reference` (a folder of another source's durations: a corpus without Festival's segmentation, the
    Piper corpus), against that source's word boundaries."""
    from tts.data.dataset import load_durations

    def reference_spans(uid: str, symbols: list[str]) -> list[tuple[float, float]]:
        if reference is None:
            return word_spans_from_segments(read_segments(dataset.root, uid).segments)
        if not (reference / f"{uid}.npy").is_file():
            raise CorpusError(f"no reference durations for {uid} in {reference}")
        ref = load_durations(reference, uid, n_tokens=len(symbols), n_frames=dataset.n_frames[uid]).numpy()
        return spans_in_seconds(word_spans_from_tokens(symbols, ref, frontend.symbols.is_phone), frame_s)

    errors, maxima, zero, total, comparable, no_reference = [], [], 0, 0, 0, 0
    silent_first, first_ratio = 0, []
    frame_s = dataset.mel_config.frame_seconds
    for uid in dataset.ids:
        tokens = dataset.tokens[uid]
        d = load_durations(out_dir, uid, n_tokens=len(tokens), n_frames=dataset.n_frames[uid]).numpy()
        symbols = frontend.decode(tokens)
        phone_mask = [frontend.symbols.is_phone(s) for s in symbols]
        zero += int(((d == 0) & np.array(phone_mask)).sum())
        total += int(sum(phone_mask))
        energy = load_features(dataset.root, uid, dataset.mel_config).energy.numpy()  # [T]
        ratio = float(energy[: int(d[0])].mean() / max(speech_level(energy), 1e-8)) if d[0] > 0 else 0.0
        first_ratio.append(ratio)
        silent_first += ratio < SPEECH_FLOOR
        try:
            ref_spans = reference_spans(uid, symbols)
        except CorpusError:
            no_reference += 1
            continue
        ours = word_spans_from_tokens(symbols, d, frontend.symbols.is_phone)
        rep = word_boundary_error(ours, ref_spans, frame_s)
        if rep.comparable:
            comparable += 1
            errors.append(rep.mean_abs_error_ms)
            maxima.append(rep.max_abs_error_ms)
    n = len(dataset.ids)
    return {
        "utterances": n,
        "word_boundary_reference": str(reference) if reference is not None else "festival segmentation",
        "phones_with_zero_frames": zero / max(total, 1),
        # the first token's mean frame energy over the utterance's median, and the share where it is the silence alone
        "first_token_energy_ratio_mean": float(np.mean(first_ratio)) if first_ratio else math.nan,
        "first_token_silent_share": silent_first / max(n, 1),
        "word_boundary_comparable_utterances": comparable,
        "utterances_without_reference": no_reference,
        "word_boundary_mean_abs_error_ms": float(np.mean(errors)) if errors else math.nan,
        "word_boundary_median_utt_error_ms": float(np.median(errors)) if errors else math.nan,
        "word_boundary_p90_utt_max_error_ms": float(np.percentile(maxima, 90)) if maxima else math.nan,
    }


def warnings_for(report: dict) -> list[str]:
    """What a user should look at before training on these durations."""
    out = []
    for split, rep in report["splits"].items():
        share = rep["phones_with_zero_frames"]
        if share > ZERO_FRAME_WARNING:
            out.append(f"WARNING: {split}: {share:.0%} of phones got 0 frames (over {ZERO_FRAME_WARNING:.0%}): "
                       + ("the teacher's attention skips phones; train it longer or use source=festival / piper"
                          if report["source"] == "teacher" else "these alignments do not fit the text"))
        silent = rep.get("first_token_silent_share", 0.0)
        if silent > SILENT_FIRST_WARNING:
            out.append(f"WARNING: {split}: in {silent:.0%} of utterances the first token holds only the leading pause "
                       f"(its energy under {SPEECH_FLOOR:.0%} of the utterance's speech level; over "
                       f"{SILENT_FIRST_WARNING:.0%}): a NAR trained on them speaks a lone vowel near-silently "
                       "(check it with `python -m recipes.benchmark short`)")
    return out


def ending(report: dict, out_dir: Path, data_root: str) -> str:
    """The lines the command ends with: the report once, where it went, what reads it next."""
    lines = [json.dumps(report["splits"], indent=2), *warnings_for(report)]
    n = sum(rep["utterances"] for rep in report["splits"].values())
    lines.append(f"wrote durations of {n} utterances to {out_dir} (report: {out_dir / 'report.json'})")
    lines.append(f"next: python -m recipes.train experiment=nar_cpu_small data.root={data_root} "
                 f"data.durations_dir={out_dir}   (conf/data/*.yaml name the default folder of each corpus)")
    return "\n".join(lines)


@hydra.main(version_base="1.3", config_path="../conf", config_name="extract_durations")
@user_errors
def main(cfg: DictConfig) -> dict:
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.source not in SOURCES:
        raise UsageError(f"source must be one of {', '.join(SOURCES)}, not {cfg.source!r}")
    if cfg.source == "external" and not cfg.external:
        raise UsageError("source=external needs external=FILE.jsonl")
    if cfg.source == "teacher":
        loaded = checkpoint.load(cfg.checkpoint)
        frontend, mel_config = loaded.frontend(), loaded.mel_config
    else:  # the frontend and mel definition the NAR recipe will be trained with
        loaded, frontend, mel_config = None, instantiate(cfg.text), instantiate(cfg.audio)
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    reference = Path(cfg.reference) if cfg.reference else None
    report = {"source": cfg.source, "checkpoint": str(cfg.checkpoint) if loaded else None,
              "first_token_onset": bool(cfg.first_token_onset) if cfg.source == "teacher" else None,
              "frontend": frontend.to_dict(), "splits": {}}
    for split in cfg.splits:
        dataset = TTSDataset(cfg.data_root, split, frontend, mel_config)
        if cfg.limit:
            dataset.ids = dataset.ids[: cfg.limit]
        extra = {}
        if cfg.source == "external":
            import_external(Path(cfg.external), dataset, out_dir)
        elif cfg.source == "festival":
            extra = from_festival(dataset, out_dir, frontend)
        elif cfg.source == "piper":
            extra = from_piper(dataset, out_dir, frontend)
        else:
            if not hasattr(loaded.model, "teacher_forced_alignment"):
                raise UsageError(f"checkpoint={cfg.checkpoint} is a {type(loaded.model).__name__}, which has no "
                                 f"attention to distil durations from: give an AR (Tacotron 2) or aligner checkpoint")
            log.info("%s: aligning %d utterances", split, len(dataset))
            distil(loaded.model, dataset, out_dir, cfg.batch_size, cfg.max_skip, cfg.first_token_onset)
        report["splits"][split] = {**evaluate(dataset, out_dir, frontend, reference), **extra}
        log.info("%s: %d utterances done", split, len(dataset))
    write_json_atomic(out_dir / "report.json", report)
    print(ending(report, out_dir, str(cfg.data_root)), flush=True)
    return report


if __name__ == "__main__":
    recipe_entry(main)

"""Where a vocoder loses against its recordings: F0, STFT magnitude or STFT phase (DistillMOS per condition).

    python -m recipes.bench.vocoder_headroom --data data/slt --limit 20 [--vocoder source-filter] [--out DIR]

On the first N test utterances of a corpus, the copy synthesis of the vocoder (mel of the recording ->
wave) is scored beside waves that swap one thing for the recording's own (STFT of 1024 points at the mel's
hop, Hann window, inverted with torch.istft):
  recording                 the reference;
  vocoder                   the copy synthesis;
  recording magnitude + vocoder phase   what a perfect magnitude would give with the vocoder's phase;
  vocoder magnitude + recording phase   what a perfect phase would give with the vocoder's magnitude;
  oracle F0 (source-filter vocoders)    rendered with the corpus's F0 and voicing instead of the predicted.
A condition near the recording names the part that is already good; the gap between the vocoder and
"recording magnitude + vocoder phase" is the most a magnitude correction can win (tts/vocoder/source_filter.py,
"Magnitude correction").  Means with 95 % bootstrap intervals; `--out DIR` writes report.json there.
`--against REPORT` also prints the paired difference of this vocoder's copy synthesis from that report's
(same utterances), e.g. a fine-tuned vocoder against the one it started from.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

FFT, CONDITIONS = 1024, ("recording", "vocoder", "recording_magnitude_vocoder_phase",
                         "vocoder_magnitude_recording_phase", "oracle_f0")


def conditions(vocoder, mel: torch.Tensor, wave: torch.Tensor, pitch: torch.Tensor | None,
               copy_only: bool = False) -> dict[str, torch.Tensor]:
    """mel [M, T], wave [T * hop], pitch [T] Hz or None -> {condition: wave [T * hop]} (copy_only: the
    vocoder's copy synthesis alone)."""
    from tts.training.source_filter_module import teacher_f0
    from tts.vocoder.source_filter import SourceFilterVocoder

    hop = vocoder.mel_config.hop_length
    window = torch.hann_window(FFT)
    with torch.inference_mode():
        copy = vocoder(mel[None]).wave[0]
        if copy_only:
            return {"vocoder": copy}
        y = torch.nn.functional.pad(wave, (0, max(0, copy.shape[0] - wave.shape[0])))[: copy.shape[0]]  # T * hop
        stft = lambda x: torch.stft(x, FFT, hop, window=window, return_complex=True)  # noqa: E731
        istft = lambda z: torch.istft(z, FFT, hop, window=window, length=y.shape[0])  # noqa: E731
        rec, voc = stft(y), stft(copy)
        out = {"recording": y, "vocoder": copy,
               "recording_magnitude_vocoder_phase": istft(rec.abs() * torch.exp(1j * voc.angle())),
               "vocoder_magnitude_recording_phase": istft(voc.abs() * torch.exp(1j * rec.angle()))}
        if isinstance(vocoder, SourceFilterVocoder) and pitch is not None:
            t = mel.shape[-1]
            frames = torch.nn.functional.pad(pitch[:t], (0, max(0, t - pitch.shape[0])))  # [T]; a missing end: unvoiced
            f0, voiced = teacher_f0(frames[None], vocoder.bins.f0_min)
            oracle = vocoder.train_forward(mel[None], f0, voiced).wave  # the render (+ correction) with these F0s
            out["oracle_f0"] = oracle[0].clamp(-1, 1)
    return out


def run(data: Path, limit: int, vocoder_name: str, split: str = "test", copy_only: bool = False) -> dict:
    from tts.evaluation.naturalness import predict_mos
    from tts.evaluation.report import mean_ci
    from tts.vocoder.data import VocoderDataset
    from tts.vocoder.registry import load_vocoder
    from tts.vocoder.source_filter import SourceFilterVocoder

    vocoder = load_vocoder(vocoder_name)
    pitch = isinstance(vocoder, SourceFilterVocoder)
    ds = VocoderDataset(data, split, vocoder.mel_config, None, max_utterances=limit, with_pitch=pitch)
    scores: dict[str, list[float]] = {}
    for i in range(len(ds)):
        item = ds[i]
        for name, wave in conditions(vocoder, item.mel, item.wave, item.pitch, copy_only).items():
            scores.setdefault(name, []).append(predict_mos(wave.numpy(), vocoder.sample_rate))
    summary = {}
    for name in CONDITIONS:
        if name in scores:
            mean, low, high = mean_ci(scores[name])
            summary[name] = {"distillmos": mean, "low": low, "high": high, "n": len(scores[name])}
    return {"data": str(data), "split": split, "limit": limit, "vocoder": vocoder_name, "stft": {"n_fft": FFT},
            "conditions": summary, "per_utterance": {"ids": ds.ids, **scores}}


def paired_difference(report: dict, other: dict) -> dict:
    """This report's `vocoder` DistillMOS minus `other`'s, utterance by utterance (the same ids in order)."""
    import numpy as np

    from tts.evaluation.report import mean_ci

    mine, theirs = report["per_utterance"], other["per_utterance"]
    if mine["ids"] != theirs["ids"]:
        raise SystemExit("error: --against: the two reports score different utterances")
    d = np.asarray(mine["vocoder"]) - np.asarray(theirs["vocoder"])
    mean, low, high = mean_ci(d)
    return {"against": other["vocoder"], "mean": mean, "low": low, "high": high, "wins": int((d > 0).sum()),
            "n": len(d)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="a corpus in LJSpeech layout (e.g. data/slt)")
    p.add_argument("--limit", type=int, default=20, help="the first N utterances of the split")
    p.add_argument("--split", default="test")
    p.add_argument("--vocoder", default="source-filter", help="a shipped vocoder name or a vocoder checkpoint")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="write DIR/report.json")
    p.add_argument("--against", type=Path, default=None, help="a report.json of another vocoder on the same utterances")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    report = run(args.data, args.limit, args.vocoder, args.split)
    for name, c in report["conditions"].items():
        print(f"{name:36s} DistillMOS {c['distillmos']:.2f} [{c['low']:.2f}, {c['high']:.2f}]  (n = {c['n']})")
    if args.against is not None:
        diff = report["paired"] = paired_difference(report, json.loads(args.against.read_text()))
        print(f"vocoder minus {diff['against']}: {diff['mean']:+.2f} [{diff['low']:+.2f}, {diff['high']:+.2f}], "
              f"better on {diff['wins']} of {diff['n']}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

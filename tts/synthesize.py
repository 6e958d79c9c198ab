"""Command line synthesis.

    python -m tts.synthesize --text "Hello world." --out out.wav
    python -m tts.synthesize --text-file story.txt --out story.wav --model nar --refine-steps 4
    echo "Read from stdin." | python -m tts.synthesize --out out.wav

Defaults come from checkpoints/default.json (the shipped models).  Exit codes: 0 ok, 2 bad usage,
3 bad input text, 4 missing/corrupt checkpoint or vocoder, 5 mel config mismatch.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import torch

from tts.audio import MelConfigMismatchError, save_wav
from tts.checkpoint import CheckpointError
from tts.text.errors import TextError

EXIT_TEXT, EXIT_CHECKPOINT, EXIT_MISMATCH = 3, 4, 5
log = logging.getLogger("tts.synthesize")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m tts.synthesize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="text to speak")
    src.add_argument("--text-file", type=Path, help="UTF-8 text file to speak ('-' = stdin)")
    p.add_argument("--out", type=Path, required=True, help="output wav (16-bit PCM)")
    p.add_argument("--model", choices=["nar", "ar"], default=None, help="shipped acoustic model (default: checkpoints/default.json)")
    p.add_argument("--checkpoint", type=Path, default=None, help="acoustic checkpoint file (overrides --model)")
    p.add_argument("--vocoder", default=None, help="source-filter | griffin-lim | hifigan | speechbrain-lj | checkpoint path | SpeechBrain folder (default: checkpoints/default.json)")
    p.add_argument("--refine-steps", type=int, default=None, help="NAR: K refinement steps (0 = coarse mel)")
    p.add_argument("--temperature", type=float, default=None,
                   help="NAR: refiner start-noise scale (default: the checkpoint's; 0 = deterministic)")
    p.add_argument("--speed", type=float, default=None, help="NAR: speaking rate (2 = twice as fast)")
    p.add_argument("--seed", type=int, default=0,
                   help="NAR: seed of the refiner's start noise (per sentence; the same command gives the same bytes)")
    p.add_argument("--pitch", type=float, default=None, help="NAR: pitch shift in semitones")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--batch-size", type=int, default=8, help="sentences per batch")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error("--batch-size must be >= 1")
    if args.refine_steps is not None and args.refine_steps < 0:
        p.error("--refine-steps must be >= 0")
    if args.temperature is not None and not 0 <= args.temperature <= 2:
        p.error("--temperature must be in [0, 2]")
    if args.speed is not None and not 0.1 <= args.speed <= 10:
        p.error("--speed must be in [0.1, 10]")
    if not 0 <= args.seed < 2**31:
        p.error("--seed must be in [0, 2**31)")
    return args


def read_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        return args.text
    if args.text_file is not None and str(args.text_file) != "-":
        if not args.text_file.is_file():
            raise TextError(f"text file not found: {args.text_file}")
        return args.text_file.read_text(encoding="utf-8")
    if sys.stdin is None or sys.stdin.isatty():
        raise TextError("no text: give --text, --text-file, or pipe text on stdin")
    return sys.stdin.read()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    from tts.inference import Synthesizer, shipped_checkpoint, shipped_defaults

    try:
        text = read_text(args)
        if not text.strip():
            raise TextError("the text is empty")
        defaults = shipped_defaults() if args.checkpoint is None or args.vocoder is None else {}
        acoustic = args.checkpoint or shipped_checkpoint(args.model or defaults["acoustic"])
        vocoder = args.vocoder or defaults["vocoder"]
        synth = Synthesizer.from_paths(acoustic, vocoder, device=args.device)
        progress = None
        if not args.quiet:
            def progress(done: int, total: int) -> None:
                if total > 1:
                    print(f"\r  {done}/{total} sentences", end="\n" if done == total else "", file=sys.stderr, flush=True)
        result = synth.synthesize(text, batch_size=args.batch_size, refine_steps=args.refine_steps,
                                  temperature=args.temperature, speed=args.speed, pitch_shift=args.pitch, progress=progress,
                                  seed=args.seed)
    except TextError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_TEXT
    except MelConfigMismatchError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_MISMATCH
    except (CheckpointError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except ValueError as e:  # an unsupported control for this model, an unknown vocoder name
        print(f"error: {e}", file=sys.stderr)
        return 2
    save_wav(args.out, result.wave, result.sample_rate)
    for note in result.notes:
        log.warning("note: %s", note)
    t = result.timings
    print(f"wrote {args.out} ({result.seconds:.2f} s of audio, {len(result.sentences)} sentence(s), {result.sample_rate} Hz)")
    print(f"timing: text {t.text_s:.3f} s, mel {t.mel_s:.3f} s, vocoder {t.vocoder_s:.3f} s, "
          f"first audio {t.first_audio_s:.3f} s, RTF {result.rtf:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

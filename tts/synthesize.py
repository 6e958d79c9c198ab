"""Command line synthesis.

    python -m tts.synthesize --text "Hello world." --out out.wav
    python -m tts.synthesize --text-file story.txt --out story.wav --model nar --refine-steps 4
    echo "Read from stdin." | python -m tts.synthesize --out out.wav
    python -m tts.synthesize --runtime onnx --onnx-dir export/ --text "Hi." --out hi.wav
    python -m tts.synthesize --checkpoint checkpoints/nar_block.pt --block-frames 16 --stream --text-file book.txt --out - | aplay -f S16_LE -r 22050

Streaming (--stream): audio is written as it is vocoded -- with a block-mode NAR (--block-frames B) and the
source-filter vocoder, block by block inside each sentence; otherwise a sentence at a time (Griffin-Lim
reconstructs phase over a whole sentence's spectrogram, so it is vocoded per sentence).  To a file, the wav
grows at --out itself (its header's sizes are fixed when the run ends; a failed run removes it); with
--out - the audio goes to stdout as raw 16-bit little-endian mono PCM at the model's sample rate (also
without --stream, a sentence batch at a time).  Either way memory stays bounded for any length of text.

Runtime (--runtime): "torch" runs the checkpoints; "onnx" runs the ONNX export of the default voice
(`python -m tts.export --out checkpoints/onnx`) with onnxruntime and numpy, without importing torch;
"auto" (the default) takes onnx when that export exists, is current (its source checkpoints' hashes
match) and the run asks for nothing it lacks (the default model and vocoder on the CPU), else torch.

Defaults come from checkpoints/default.json (the shipped models).  Exit codes: 0 ok, 1 internal error,
2 bad usage, 3 bad input text, 4 missing/corrupt checkpoint or vocoder, 5 mel config mismatch, 6 the output
cannot be written, 7 synthesis failed (non-finite audio; an AR attention failure after its retries),
130 interrupted.  A failing run writes nothing: an earlier file at --out is kept and no temp file is left.
"""

from __future__ import annotations

import argparse
import codecs
import io
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

# torch-free imports only: the ONNX engine must start without torch (the cold-start benchmark); torch and
# the model code load when open_pipeline chooses the torch engine
from tts.errors import CheckpointError, MelConfigMismatchError, SynthesisError
from tts.text.errors import TextError

EXIT_INTERNAL, EXIT_USAGE, EXIT_TEXT, EXIT_CHECKPOINT, EXIT_MISMATCH = 1, 2, 3, 4, 5
EXIT_OUTPUT, EXIT_SYNTHESIS, EXIT_INTERRUPTED = 6, 7, 130


class OutputError(OSError):
    """--out cannot be written (checked before synthesis; or the write itself failed, e.g. disk full)."""


def protect_text_values(argv: list[str]) -> list[str]:
    """`--text VALUE` -> `--text=VALUE`, so that text starting with "-" ("-1,234.56 is owed") is the value
    of --text instead of an unknown option: argparse reads any "-x" token as an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            out += argv[i:]
            break
        if argv[i] == "--text" and i + 1 < len(argv):
            out.append(f"--text={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from tts.runtime.controls import Controls

    p = argparse.ArgumentParser(prog="python -m tts.synthesize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="text to speak (may start with '-')")
    src.add_argument("--text-file", type=Path,
                     help="UTF-8 (or UTF-16 with a BOM) text file to speak; a pipe or /dev/stdin works ('-' = stdin)")
    p.add_argument("--out", type=Path, required=True,
                   help="output wav (16-bit PCM); '-' = raw 16-bit little-endian mono PCM on stdout")
    p.add_argument("--stream", action="store_true",
                   help="write audio as it is vocoded (block by block with --block-frames; see above)")
    p.add_argument("--block-frames", type=int, default=None,
                   help="NAR block-mode checkpoints: decode in blocks of B frames (0 = parallel; default: the checkpoint's)")
    p.add_argument("--model", choices=["nar", "ar", "nar_block"], default=None,
                   help="shipped acoustic model (default: checkpoints/default.json); nar_block: the block-wise NAR")
    p.add_argument("--checkpoint", type=Path, default=None, help="acoustic checkpoint file (overrides --model)")
    p.add_argument("--vocoder", default=None, help="source-filter | griffin-lim | hifigan | speechbrain-lj | checkpoint path | SpeechBrain folder (default: checkpoints/default.json)")
    p.add_argument("--refine-steps", type=int, default=None, help="NAR: K refinement steps (0 = coarse mel)")
    p.add_argument("--temperature", type=float, default=None,
                   help="NAR: refiner start-noise scale in [0, 2] (default: the checkpoint's; 0 = deterministic)")
    p.add_argument("--speed", type=float, default=None, help="NAR: speaking rate in [0.1, 10] (2 = twice as fast)")
    p.add_argument("--seed", type=int, default=0,
                   help="NAR: seed of the refiner's start noise (per sentence; the same command gives the same bytes)")
    p.add_argument("--pitch", type=float, default=None, help="NAR: pitch shift in semitones, in [-12, 12]")
    p.add_argument("--ar-retries", type=int, default=2,
                   help="AR: speak a sentence whose attention failed again with up to N other seeds (default 2)")
    p.add_argument("--keep-failed", action="store_true",
                   help="AR: keep a sentence still failing after its retries (a warning) instead of exit 7")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--batch-size", type=int, default=8, help="sentences per batch")
    p.add_argument("--threads", type=int, default=None, help="CPU threads of torch or onnxruntime (>= 1)")
    p.add_argument("--runtime", choices=["auto", "torch", "onnx"], default="auto",
                   help="torch | onnx (the ONNX export, no torch) | auto (default: onnx when a current export "
                        "of the default voice exists and the run needs nothing else; see above)")
    p.add_argument("--onnx-dir", type=Path, default=None,
                   help="ONNX export folder for --runtime onnx/auto (default: checkpoints/onnx)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.batch_size < 1:
        p.error("--batch-size must be >= 1")
    if args.threads is not None and args.threads < 1:
        p.error("--threads must be >= 1")
    if args.ar_retries < 0:
        p.error("--ar-retries must be >= 0")
    if args.block_frames is not None and args.block_frames < 0:
        p.error("--block-frames must be >= 0 (0 = parallel)")
    for flag, name, value in (("--refine-steps", "refine_steps", args.refine_steps), ("--temperature", "temperature", args.temperature),
                              ("--speed", "speed", args.speed), ("--pitch", "pitch_shift", args.pitch)):
        try:
            Controls().replace(**{name: value})
        except ValueError as e:
            p.error(f"{flag}: {e}")
    if not 0 <= args.seed < 2**31:
        p.error("--seed must be in [0, 2**31)")
    problem = device_problem(args.device)
    if problem:
        p.error(problem)
    return args


def device_problem(device: str) -> str | None:
    """Why `device` cannot run here (None when it can): a name torch does not know, or a GPU that is absent."""
    if device == "cpu":
        return None  # without importing torch (start-up time)
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        return f"--device {device!r}: expected cpu, cuda or cuda:N"
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        return f"--device {device!r}: expected cpu, cuda or cuda:N"
    if not torch.cuda.is_available():
        return f"--device {device!r}: no CUDA GPU is available here; use --device cpu"
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        return f"--device {device!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
    return None


def decode_text(data: bytes, source: str) -> str:
    """Bytes of a text file or stdin -> text, one rule for both: UTF-8 (a BOM is dropped), or UTF-16 when it
    starts with a UTF-16 BOM; anything else (Latin-1, binary) is bad text naming the first bad byte."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as e:
            raise TextError(f"{source} starts with a UTF-16 mark but is not valid UTF-16: {e.reason}") from e
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextError(f"{source} is not UTF-8 text (byte {data[e.start:e.start + 1]!r} at offset {e.start}); "
                        "convert it first, e.g. `iconv -f latin1 -t utf-8`") from e
    if "\x00" in text:  # UTF-16 without a mark, or a binary file that happens to decode
        raise TextError(f"{source} contains NUL bytes: not a UTF-8 text file (binary, or UTF-16 without a BOM)")
    return text


def read_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        return args.text
    if args.text_file is not None and str(args.text_file) != "-":
        path = args.text_file
        try:  # read_bytes, not is_file(): a pipe (<(...), /dev/stdin) is a text file too
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise TextError(f"text file not found: {path}") from None
        except IsADirectoryError:
            raise TextError(f"text file {path} is a directory") from None
        except OSError as e:
            raise TextError(f"cannot read text file {path}: {e.strerror or e}") from None
        return decode_text(data, f"text file {path}")
    if sys.stdin is None or sys.stdin.isatty():
        raise TextError("no text: give --text, --text-file, or pipe text on stdin")
    return decode_text(sys.stdin.buffer.read(), "stdin")


def reserve_output(path: Path) -> Path:
    """Check that `path` can be written BEFORE any synthesis, by creating the temp file the wav is written
    to (next to it, so that the final rename is atomic).  Its short name keeps a long valid --out name
    valid (`name + ".tmp"` could pass the 255-byte limit).  Returns the temp file's path."""
    if str(path) in ("", "."):
        raise OutputError("--out is empty: give a wav file name")
    if len(os.fsencode(path.name)) > 255:  # before any stat: a longer name is ENAMETOOLONG everywhere
        raise OutputError(f"--out file name is {len(os.fsencode(path.name))} bytes, more than the 255 a file system allows")
    if path.is_dir():
        raise OutputError(f"--out {path} is a directory: give a file name, e.g. {path / 'out.wav'}")
    if path.exists() and not path.is_file():
        raise OutputError(f"--out {path} exists and is not a regular file (a device or pipe): not replacing it")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot create the folder of --out {path}: {e.strerror or e}") from None
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(path.name)) > name_max:
        raise OutputError(f"--out file name is {len(os.fsencode(path.name))} bytes, more than this file system's {name_max}")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tts-", suffix=".wav.tmp", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot write in {parent} (for --out {path}): {e.strerror or e}") from None
    os.close(fd)
    return Path(tmp)


class PcmStdout:
    """--out -: each piece as raw 16-bit little-endian PCM on stdout, flushed at once (a player or pipe starts
    on the first piece).  The same write/commit/close as WavStream."""

    def __init__(self, sample_rate: int) -> None:
        self.out = sys.stdout.buffer
        self.sample_rate = sample_rate

    def write(self, wave: np.ndarray) -> None:
        samples = np.asarray(wave, dtype=np.float32).reshape(-1)
        if not np.isfinite(samples).all():
            raise OutputError("refusing to write non-finite audio")
        # libsndfile's float -> PCM_16 conversion, as the wav path: the same samples to the bit
        buf = io.BytesIO()
        with sf.SoundFile(buf, "w", samplerate=self.sample_rate, channels=1, subtype="PCM_16", format="RAW", endian="LITTLE") as f:
            f.write(np.clip(samples, -1.0, 1.0))
        try:
            self.out.write(buf.getvalue())
            self.out.flush()
        except (OSError, ValueError) as e:  # a closed pipe (the player quit)
            raise OutputError(f"writing to stdout failed: {e}") from None

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


class WavStream:
    """16-bit PCM written piece by piece into the reserved temp file as synthesis makes it (memory stays one
    batch for any length of text); `commit` renames it over --out (atomic: a reader or an earlier file never
    sees half a wav).  Disk full while writing is an OutputError; the caller removes the temp file."""

    def __init__(self, tmp: Path, path: Path, sample_rate: int) -> None:
        self.tmp, self.path = tmp, path
        try:
            self.file = sf.SoundFile(str(tmp), "w", samplerate=sample_rate, channels=1, subtype="PCM_16", format="WAV")
        except (OSError, RuntimeError) as e:  # soundfile raises LibsndfileError, a RuntimeError
            raise OutputError(f"cannot write {tmp}: {e}") from None

    def write(self, wave: np.ndarray) -> None:
        samples = np.asarray(wave, dtype=np.float32).reshape(-1)
        if not np.isfinite(samples).all():  # the inference path refuses these; never write one whatever happens
            raise OutputError("refusing to write non-finite audio")
        try:
            self.file.write(np.clip(samples, -1.0, 1.0))
        except (OSError, RuntimeError) as e:  # disk full
            raise OutputError(f"writing {self.path} failed: {e}") from None

    def commit(self) -> None:
        try:
            self.file.close()  # writes the header's final sizes
            os.replace(self.tmp, self.path)
        except (OSError, RuntimeError) as e:
            raise OutputError(f"writing {self.path} failed: {e}") from None

    def close(self) -> None:
        """Close without renaming (a no-op after `commit`)."""
        if self.file.closed:
            return
        try:
            self.file.close()
        except (OSError, RuntimeError):
            pass  # a failed run: the temp file is removed anyway


def main(argv: list[str] | None = None) -> int:
    args = parse_args(protect_text_values(list(sys.argv[1:] if argv is None else argv)))
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    reserved: list[Path] = []
    try:
        return _run(args, reserved)
    except KeyboardInterrupt:
        print("\ninterrupted: nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        for tmp in reserved:
            tmp.unlink(missing_ok=True)  # a failed or interrupted run leaves no temp file


def _run(args: argparse.Namespace, reserved: list[Path]) -> int:
    """main's work; `reserved` receives the temp output file, which main removes unless it was renamed."""
    PretrainedVocoderError: type[Exception] = CheckpointError  # the torch branch's own is caught as well
    try:
        text = read_text(args)
        if not text.strip():
            raise TextError("the text is empty")
        to_stdout = str(args.out) == "-"
        if not to_stdout:
            reserved.append(reserve_output(args.out))  # before the models load: a bad --out costs nothing
            if args.stream:  # the wav grows at --out itself; a failed run removes it (main removes `reserved`)
                reserved[0].unlink()
                reserved[0] = args.out
        from tts.runtime.release import choose_runtime, open_pipeline

        runtime = choose_runtime(args.runtime, args.model, args.checkpoint, args.vocoder, args.device, args.onnx_dir)
        if runtime == "torch":
            from tts.vocoder.pretrained import PretrainedVocoderError

            if args.vocoder is not None:
                check_vocoder_path(args.vocoder)
        pipeline = open_pipeline(args.model, args.checkpoint, args.vocoder, runtime, args.device, args.onnx_dir,
                                 args.threads)
        controls = pipeline.controls(refine_steps=args.refine_steps, temperature=args.temperature, speed=args.speed,
                                     pitch_shift=args.pitch, block_frames=args.block_frames, seed=args.seed)
        sample_rate = pipeline.sample_rate
        repairs = dict(ar_retries=args.ar_retries, fail_on_ar_failure=not args.keep_failed)
        stream = PcmStdout(sample_rate) if to_stdout else WavStream(reserved[0], args.out, sample_rate)
        progress = None
        if not args.quiet:
            def progress(done: int, total: int) -> None:
                if total > 1:
                    print(f"\r  {done}/{total} sentences", end="\n" if done == total else "", file=sys.stderr, flush=True)
        try:
            if args.stream:
                result = stream_to(pipeline, stream, text, controls, repairs)
            else:
                result = pipeline.synthesize(text, controls, batch_size=args.batch_size, progress=progress,
                                             sink=stream.write, **repairs)
            stream.commit()
            if args.stream:
                reserved.clear()  # the wav at --out is the result now, not a leftover to remove
        finally:
            stream.close()  # after a failure or Ctrl-C: closed before main removes the temp file
    except TextError as e:
        return _fail(e, EXIT_TEXT)
    except MelConfigMismatchError as e:
        return _fail(e, EXIT_MISMATCH)
    except (CheckpointError, PretrainedVocoderError, FileNotFoundError) as e:
        return _fail(e, EXIT_CHECKPOINT)
    except OutputError as e:
        return _fail(e, EXIT_OUTPUT)
    except SynthesisError as e:
        return _fail(e, EXIT_SYNTHESIS)
    except ValueError as e:  # an unsupported control for this model, an unknown vocoder name
        return _fail(e, EXIT_USAGE)
    except Exception as e:  # a bug: one line, not a traceback (TTS_DEBUG=1 shows it)
        if os.environ.get("TTS_DEBUG"):
            raise
        return _fail(f"internal error ({type(e).__name__}: {e}); rerun with TTS_DEBUG=1 for the traceback", EXIT_INTERNAL)
    for note in result.notes:  # printed even with --quiet: a repaired or failed sentence must not pass silently
        print(f"note: {note}", file=sys.stderr)
    t = result.timings
    report = sys.stderr if to_stdout else sys.stdout  # stdout carries the audio with --out -
    print(f"wrote {args.out} ({result.seconds:.2f} s of audio, {len(result.sentences)} sentence(s), {result.sample_rate} Hz)",
          file=report)
    print(f"timing: text {t.text_s:.3f} s, mel {t.mel_s:.3f} s, vocoder {t.vocoder_s:.3f} s, "
          f"first audio {t.first_audio_s:.3f} s, RTF {result.rtf:.3f}, runtime {runtime}", file=report)
    return 0


def stream_to(pipeline, writer: "PcmStdout | WavStream", text: str, controls, repairs: dict):
    """--stream: the pipeline's stream chunks into `writer` as they come -> a SynthesisResult."""
    from tts.runtime.pipeline import SynthesisResult

    utt = pipeline.utterance(text, controls, **repairs)
    n = 0
    for chunk in pipeline.stream_utterance(utt):
        writer.write(chunk)
        n += chunk.size
    return SynthesisResult(np.zeros(0, np.float32), pipeline.sample_rate, [p.text for p in utt.parts],
                           utt.run.timings, utt.run.notes, streamed_samples=n)


def check_vocoder_path(vocoder: str) -> None:
    """A --vocoder that is meant as a file (it has a folder part or a checkpoint suffix) but is missing is a
    missing vocoder (exit 4), not an unknown vocoder name (exit 2)."""
    from tts.vocoder.registry import NAMES

    path = Path(vocoder)
    if vocoder in NAMES or path.exists():
        return
    if os.sep in vocoder or path.suffix in (".pt", ".ckpt"):
        raise CheckpointError(f"vocoder checkpoint not found: {vocoder}")


def _fail(error: Exception | str, code: int) -> int:
    print(f"error: {error}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Command line synthesis.

    python -m tts.synthesize --text "Hello world." --out out.wav
    python -m tts.synthesize --voice joe --text "Hello world." --out joe.wav      (--list-voices)
    python -m tts.synthesize --text-file story.txt --out story.wav --model nar --refine-steps 4
    echo "Read from stdin." | python -m tts.synthesize --out out.wav
    python -m tts.synthesize --runtime onnx --onnx-dir export/ --text "Hi." --out hi.wav
    python -m tts.synthesize --text "Hello world." --rescore 4 --out best_of_4.wav     (AR rescoring, --scorer CKPT)
    python -m tts.synthesize --checkpoint TAR.ckpt --speculate 8 --text "Hello." --out s.wav  (speculative AR decoding)
    python -m tts.synthesize --checkpoint checkpoints/nar_block.pt --block-frames 16 --stream --text-file book.txt --out - | aplay -f S16_LE -r 22050

Output: the format follows --out's extension: .wav (16-bit PCM; also a name without an extension), .flac,
.ogg (Vorbis) or .mp3; any other is refused (exit 2).  --out - sends raw 16-bit little-endian mono PCM at
the model's sample rate to stdout, a sentence batch at a time (block by block with --stream): the only live
stream.  To a file, the audio is written as it is made into a temp file beside --out and renamed over it
when the run succeeds; a failed or interrupted run (Ctrl-C, SIGTERM, SIGHUP) leaves an earlier --out as it
was and no temp file.  Memory stays bounded for any length of text.

Streaming (--stream): audio is made as it is vocoded -- with a block-mode NAR (--block-frames B) and the
source-filter vocoder, block by block inside each sentence; otherwise a sentence at a time (Griffin-Lim
reconstructs phase over a whole sentence's spectrogram, so it is vocoded per sentence).

Voices (--voice, --list-voices): the shipped voices of checkpoints/default.json, each with its acoustic models
(--model picks another of the voice's), each speaking through its own vocoder (default.json's "voice_vocoders",
else the default vocoder) unless --vocoder names another.

Runtime (--runtime): "torch" runs the checkpoints; "onnx" runs the ONNX export of the shipped NAR models
(`python -m tts.export --out checkpoints/onnx`) with onnxruntime and numpy, without importing torch;
"auto" (the default) takes onnx when that export holds the model, is current (its source checkpoints' hashes
match) and the run asks for nothing it lacks (the voice's own vocoder on the CPU), else torch.

Input: --text, --text-file (UTF-8, or UTF-16/UTF-32 with a BOM; at most MAX_TEXT_BYTES) or stdin.
Checkpoints are data: a file that needs code to load is refused (exit 4).

Defaults come from checkpoints/default.json (the shipped voices and models).  Exit codes: 0 ok, 1 internal error,
2 bad usage, 3 bad input text, 4 missing, corrupt or untrusted checkpoint or vocoder, 5 mel config mismatch,
6 the output cannot be written, 7 synthesis failed (non-finite audio; an AR attention failure after its
retries), 130 interrupted by Ctrl-C (SIGINT), 143 by SIGTERM, 129 by SIGHUP.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

# torch-free imports only: the ONNX engine must start without torch (the cold-start benchmark); torch and
# the model code load when open_pipeline chooses the torch engine
from tts.errors import CheckpointError, MelConfigMismatchError, SynthesisError
from tts.pcm import pcm16
from tts.text.errors import TextError

EXIT_INTERNAL, EXIT_USAGE, EXIT_TEXT, EXIT_CHECKPOINT, EXIT_MISMATCH = 1, 2, 3, 4, 5
EXIT_OUTPUT, EXIT_SYNTHESIS, EXIT_INTERRUPTED = 6, 7, 130  # 130 = 128 + SIGINT; SIGTERM 143, SIGHUP 129

# The most text one run reads (a file, a pipe, stdin): 16 MiB is ~2.8 million words, some 300 hours of speech;
# without a limit `--text-file /dev/zero` grew to 2.9 GB before the kernel killed it.
MAX_TEXT_BYTES = 16 * 2**20
MAX_AR_RETRIES = 10  # each retry is a whole AR decode of the sentence
MAX_RESCORE = 16  # tts.runtime.rescoring.MAX_CANDIDATES (not imported: it loads torch)
MAX_SPECULATE = 64  # positions a network call: past it the drafts are rejected long before (tts.runtime.speculative)

# --out's extension -> (libsndfile format, subtype).  Opus is not offered: libsndfile's Opus takes 8, 12, 16,
# 24 or 48 kHz only, and the voices speak at 22 050 Hz.
FORMATS = {"": ("WAV", "PCM_16"), ".wav": ("WAV", "PCM_16"), ".flac": ("FLAC", "PCM_16"), ".ogg": ("OGG", "VORBIS"),
           ".mp3": ("MP3", "MPEG_LAYER_III")}
# signal -> name, for the signals that end a run cleanly (the temp file removed, an earlier --out kept)
STOP_SIGNALS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


class OutputError(OSError):
    """--out cannot be written (checked before synthesis; or the write itself failed, e.g. disk full)."""


class UsageError(ValueError):
    """A combination of options or files that cannot work (exit 2), found after argparse."""


class Interrupted(BaseException):
    """A stop signal arrived (SIGTERM, SIGHUP; SIGINT is KeyboardInterrupt).  A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


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


def given_path(value: str) -> Path:
    """A path option's value; an empty one is refused (Path("") is ".", the current folder, not "no value")."""
    if not value.strip():
        raise argparse.ArgumentTypeError("is empty: give a path, or leave the option out for the default")
    return Path(value)


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one `error:` line like every other failure (exit 2), not the usage block."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"error: {message} (see python -m tts.synthesize --help)\n")


def voices_listing() -> str:
    """The shipped voices, a line each: name, (default), its models (the first speaks for it)."""
    from tts.runtime.release import shipped_defaults

    defaults = shipped_defaults()
    return "".join(f"{voice}{' (default)' if voice == defaults['voice'] else ''}: {', '.join(models)}\n"
                   for voice, models in defaults["voices"].items())


class ListVoices(argparse.Action):
    """--list-voices: print the shipped voices and exit 0 (like --help: no other option is needed)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            listing = voices_listing()
        except CheckpointError as e:
            parser.exit(EXIT_CHECKPOINT, f"error: {e}\n")
        print(listing, end="", flush=True)  # to stdout: the listing is the output (argparse's exit writes stderr)
        parser.exit(0)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from tts.runtime.controls import MAX_BATCH_SIZE, MAX_THREADS, Controls

    p = Parser(prog="python -m tts.synthesize", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--text", help="text to speak (may start with '-')")
    src.add_argument("--text-file", type=given_path,
                     help="UTF-8 (or UTF-16/UTF-32 with a BOM) text file to speak, at most 16 MiB; a pipe or "
                          "/dev/stdin works ('-' = stdin)")
    p.add_argument("--out", type=Path, required=True,
                   help="output file: .wav (16-bit PCM, also without extension), .flac, .ogg or .mp3; '-' = raw "
                        "16-bit little-endian mono PCM on stdout (the only live stream)")
    p.add_argument("--stream", action="store_true",
                   help="make audio as it is vocoded (block by block with --block-frames; see above)")
    p.add_argument("--block-frames", type=int, default=None,
                   help="NAR block-mode checkpoints: decode in blocks of B frames (0 = parallel; default: the checkpoint's)")
    p.add_argument("--voice", default=None,
                   help="shipped voice, e.g. slt or joe (default: checkpoints/default.json's; see --list-voices)")
    p.add_argument("--list-voices", action=ListVoices, help="print the shipped voices and their models, and exit")
    p.add_argument("--model", default=None,
                   help="one of the voice's shipped acoustic models (default: the voice's first; --list-voices), "
                        "e.g. slt's nar, nar_block (the block-wise NAR) or ar")
    p.add_argument("--checkpoint", type=given_path, default=None, help="acoustic checkpoint file (overrides --model)")
    p.add_argument("--vocoder", default=None, help="source-filter | griffin-lim | hifigan | speechbrain-lj | checkpoint path | SpeechBrain folder (default: the voice's, checkpoints/default.json)")
    p.add_argument("--refine-steps", type=int, default=None, help="NAR: K refinement steps in [0, 32] (0 = coarse mel)")
    p.add_argument("--temperature", type=float, default=None,
                   help="NAR: refiner start-noise scale in [0, 2] (default: the checkpoint's; 0 = deterministic)")
    p.add_argument("--speed", type=float, default=None, help="NAR: speaking rate in [0.1, 2] (2 = twice as fast)")
    p.add_argument("--seed", type=int, default=0,
                   help="NAR: seed of the refiner's start noise (per sentence; the same command gives the same bytes)")
    p.add_argument("--pitch", type=float, default=None, help="NAR: pitch shift in semitones, in [-12, 12]")
    p.add_argument("--rescore", type=int, default=None, metavar="N",
                   help=f"the best of N seeded candidates per sentence under an AR scorer, N in [1, {MAX_RESCORE}] "
                        "(tts.runtime.rescoring; costs N acoustic runs plus the scoring)")
    p.add_argument("--scorer", type=given_path, default=None, metavar="CKPT",
                   help="the AR checkpoint that scores --rescore's candidates (default checkpoints/ar.pt)")
    p.add_argument("--speculate", type=int, default=None, metavar="K",
                   help=f"a Transformer AR voice (--checkpoint) decoded speculatively, K in [2, {MAX_SPECULATE}] "
                        "positions a network call (tts.runtime.speculative)")
    p.add_argument("--drafter", default=None, metavar="CKPT",
                   help="--speculate's drafter: a NAR checkpoint (default checkpoints/nar.pt) or `repeat`")
    p.add_argument("--tolerance", type=float, default=None, metavar="X",
                   help="--speculate's acceptance: a draft is kept within rms X of the AR's own frame (normalised "
                        "log-mel; default 0.5)")
    p.add_argument("--ar-retries", type=int, default=2,
                   help="AR: speak a sentence whose attention failed again with up to N (<= 10) other seeds (default 2)")
    p.add_argument("--keep-failed", action="store_true",
                   help="AR: keep a sentence still failing after its retries (a warning) instead of exit 7")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--batch-size", type=int, default=8, help=f"sentences per batch (1 to {MAX_BATCH_SIZE})")
    p.add_argument("--threads", type=int, default=None, help="CPU threads of torch or onnxruntime (>= 1)")
    p.add_argument("--runtime", choices=["auto", "torch", "onnx"], default="auto",
                   help="torch | onnx (the ONNX export, no torch) | auto (default: onnx when a current export "
                        "of the default voice exists and the run needs nothing else; see above)")
    p.add_argument("--onnx-dir", type=given_path, default=None,
                   help="ONNX export folder for --runtime onnx/auto (default: checkpoints/onnx)")
    p.add_argument("--ssml", action="store_true",
                   help="the text is SSML (also without this flag when it starts with <speak>): <break>, <prosody>, "
                        "<say-as>, <phoneme>, <sub>, <p>, <s>; malformed SSML is exit 3 with its line and column")
    p.add_argument("--lexicon", type=given_path, default=None, metavar="FILE",
                   help="user lexicon, one 'word<TAB>PHONES' per line (ARPAbet of the model's symbols, or /IPA/): "
                        "its pronunciations win over CMUdict and espeak-ng; inline [[HH AH0 L OW1]] in the text too")
    p.add_argument("--sentence-silence", type=float, default=None, metavar="SECONDS",
                   help="silence between sentences in seconds, exact to a sample (default 0.25; at most 10)")
    p.add_argument("--timestamps", type=Path, default=None, metavar="FILE",
                   help="also write each word's start and end (seconds) and phones: .json, or subtitles by word "
                        "(.srt, .vtt); from the model's own durations (the AR: from its attention)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if isinstance(args.text, list):  # `--text --`: argparse drops a lone "--" value and leaves []
        args.text = "--"
    if not 1 <= args.batch_size <= MAX_BATCH_SIZE:
        p.error(f"--batch-size must be in [1, {MAX_BATCH_SIZE}]")
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        p.error(f"--threads must be in [1, {MAX_THREADS}]")
    if not 0 <= args.ar_retries <= MAX_AR_RETRIES:
        p.error(f"--ar-retries must be in [0, {MAX_AR_RETRIES}]")
    if args.rescore is not None and not 1 <= args.rescore <= MAX_RESCORE:
        p.error(f"--rescore must be in [1, {MAX_RESCORE}] (candidates per sentence)")
    if args.scorer is not None and args.rescore is None:
        p.error("--scorer scores --rescore's candidates: give --rescore N too")
    if args.speculate is not None and not 2 <= args.speculate <= MAX_SPECULATE:
        p.error(f"--speculate must be in [2, {MAX_SPECULATE}] (positions a network call)")
    if (args.drafter is not None or args.tolerance is not None) and args.speculate is None:
        p.error("--drafter and --tolerance set --speculate's decoding: give --speculate K too")
    if args.tolerance is not None and not (0 <= args.tolerance < float("inf")):
        p.error("--tolerance must be a finite number >= 0")
    if args.speculate is not None and args.rescore is not None:
        p.error("--speculate (a Transformer AR's decode) and --rescore (NAR candidates) do not combine")
    if args.voice is not None and not args.voice.strip():
        p.error("--voice is empty: give a voice (--list-voices), or leave the option out for the default")
    if args.voice is not None and args.checkpoint is not None:
        p.error("--voice and --checkpoint: a checkpoint speaks with its own voice; give one of them")
    if args.vocoder is not None and not args.vocoder.strip():  # '' would mean "the default" further on
        p.error("--vocoder is empty: give a name or a path, or leave the option out for the default")
    for flag, name, value in (("--refine-steps", "refine_steps", args.refine_steps), ("--temperature", "temperature", args.temperature),
                              ("--speed", "speed", args.speed), ("--pitch", "pitch_shift", args.pitch),
                              ("--block-frames", "block_frames", args.block_frames)):
        try:
            Controls().replace(**{name: value})
        except ValueError as e:
            p.error(f"{flag}: {e}")
    if not 0 <= args.seed < 2**31:
        p.error("--seed must be in [0, 2**31)")
    from tts.runtime.pipeline import check_silence
    from tts.runtime.timestamps import TIMESTAMP_FORMATS

    if args.sentence_silence is not None:
        try:
            check_silence(args.sentence_silence)
        except ValueError as e:
            p.error(f"--sentence-silence: {e}")
    if args.timestamps is not None:
        if args.timestamps.suffix.lower() not in TIMESTAMP_FORMATS:
            p.error(f"--timestamps {args.timestamps}: the extension must be one of {', '.join(TIMESTAMP_FORMATS)}")
        if str(args.out) != "-" and args.timestamps.resolve() == args.out.resolve():
            p.error("--timestamps and --out are the same file")
    from tts.runtime.release import device_problem

    problem = device_problem(args.device)
    if problem:
        p.error(f"--device {problem}")
    return args


# Byte-order marks, longest first: UTF-32-LE's (FF FE 00 00) begins with UTF-16-LE's (FF FE).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))


def decode_text(data: bytes, source: str) -> str:
    """Bytes of a text file or stdin -> text, one rule for both: UTF-8 (a BOM is dropped), or UTF-32 / UTF-16 when
    it starts with that encoding's BOM; anything else (Latin-1, binary) is bad text naming the first bad byte."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as e:
                raise TextError(f"{source} starts with a {encoding.upper()} mark but is not valid "
                                f"{encoding.upper()}: {e.reason}") from None
            break
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise TextError(f"{source} is not UTF-8 text (byte {data[e.start:e.start + 1]!r} at offset {e.start}); "
                            "convert it first, e.g. `iconv -f latin1 -t utf-8`") from None
    if "\x00" in text:  # UTF-16/32 without a mark, or a binary file that happens to decode
        raise TextError(f"{source} is not UTF-8 text: it contains NUL characters (binary, or UTF-16/UTF-32 without a BOM)")
    return text


def read_limited(stream, source: str) -> bytes:
    """At most MAX_TEXT_BYTES of `stream` (a file or pipe); more is bad text, found after reading one byte past
    the limit, never the whole of an endless source (/dev/zero, /dev/urandom, `yes |`)."""
    data = stream.read(MAX_TEXT_BYTES + 1)
    if len(data) > MAX_TEXT_BYTES:
        raise TextError(f"{source} is larger than the {MAX_TEXT_BYTES // 2**20} MiB a run reads "
                        "(tts.synthesize.MAX_TEXT_BYTES): split it into several runs")
    return data


def read_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        return args.text
    if args.text_file is not None and str(args.text_file) != "-":
        path = args.text_file
        try:  # open, not is_file(): a pipe (<(...), /dev/stdin) is a text file too
            with open(path, "rb") as f:
                data = read_limited(f, f"text file {path}")
        except (FileNotFoundError, NotADirectoryError):
            raise TextError(f"text file not found: {path}") from None
        except IsADirectoryError:
            raise TextError(f"text file {path} is a directory") from None
        except OSError as e:
            raise TextError(f"cannot read text file {path}: {e.strerror or e}") from None
        return decode_text(data, f"text file {path}")
    if sys.stdin is None or sys.stdin.isatty():
        raise TextError("no text: give --text, --text-file, or pipe text on stdin")
    try:
        data = read_limited(sys.stdin.buffer, "stdin")
    except OSError as e:
        raise TextError(f"cannot read stdin: {e.strerror or e}") from None
    return decode_text(data, "stdin")


def output_format(path: Path) -> tuple[str, str]:
    """(libsndfile format, subtype) that --out's extension asks for; an unknown extension is a UsageError."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(k for k in FORMATS if k)
        raise UsageError(f"--out {path}: cannot write {suffix!r} audio; use {known} (16-bit WAV also without an "
                         "extension), or --out - for raw PCM")
    return FORMATS[suffix]


def check_not_input(out: Path, text_file: Path | None) -> None:
    """--out naming the --text-file would replace the text being read by the audio made from it."""
    if text_file is None or str(text_file) == "-":
        return
    try:
        same = os.path.samefile(out, text_file)
    except OSError:  # one of them does not exist (yet): compare the names the kernel would resolve
        same = os.path.realpath(out) == os.path.realpath(text_file)
    if same:
        raise UsageError(f"--out {out} is the --text-file: refusing to replace the text with its audio")


def reserve_output(path: Path) -> Path:
    """Check that `path` can be written BEFORE any synthesis, by creating the temp file the wav is written
    to (next to it, so that the final rename is atomic).  Its short name keeps a long valid --out name
    valid (`name + ".tmp"` could pass the 255-byte limit).  Returns the temp file's path."""
    if str(path) in ("", "."):
        raise OutputError("--out is empty: give a file name (.wav, .flac, .ogg, .mp3) or - for stdout")
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
        fd, tmp = tempfile.mkstemp(prefix=".tts-", suffix=f"{path.suffix or '.wav'}.tmp", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot write in {parent} (for --out {path}): {e.strerror or e}") from None
    os.close(fd)
    return Path(tmp)


class PcmStdout:
    """--out -: each piece as raw 16-bit little-endian PCM on stdout, flushed at once (a player or pipe starts
    on the first piece).  The same write/commit/close as AudioFile."""

    def __init__(self, sample_rate: int) -> None:
        self.out = stdout_buffer()
        self.sample_rate = sample_rate

    def write(self, wave: np.ndarray) -> None:
        samples = np.asarray(wave, dtype=np.float32).reshape(-1)
        if not np.isfinite(samples).all():
            raise OutputError("refusing to write non-finite audio")
        try:
            self.out.write(pcm16(samples).tobytes())
            self.out.flush()
        except (OSError, ValueError) as e:  # a closed pipe (the player quit)
            silence_stdout()
            raise OutputError(f"writing to stdout failed: {e.strerror if isinstance(e, OSError) and e.strerror else e}") from None

    def commit(self) -> None:
        pass

    def close(self) -> None:
        pass


def stdout_buffer():
    """sys.stdout's byte stream, or OutputError when there is none (fd 1 closed: `>&-`, a daemon)."""
    try:
        os.fstat(1)
        return sys.stdout.buffer
    except (OSError, AttributeError):  # EBADF; sys.stdout None (Python found fd 1 closed at start)
        raise OutputError("--out -: stdout is closed, there is nowhere to write the audio") from None


def silence_stdout() -> None:
    """After stdout broke (EPIPE), point fd 1 at /dev/null: Python flushes sys.stdout at exit, and a second
    broken-pipe error there would print a traceback-like "Exception ignored" message after our one line."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


class AudioFile:
    """Audio written piece by piece into the reserved temp file as synthesis makes it (memory stays one batch for
    any length of text), in the format of --out's extension; `commit` renames it over --out (atomic: a reader or
    an earlier file never sees half a file).  Disk full while writing is an OutputError; the caller removes the
    temp file."""

    def __init__(self, tmp: Path, path: Path, sample_rate: int) -> None:
        self.tmp, self.path = tmp, path
        fmt, subtype = output_format(path)
        try:
            self.file = sf.SoundFile(str(tmp), "w", samplerate=sample_rate, channels=1, subtype=subtype, format=fmt)
        except (OSError, RuntimeError) as e:  # soundfile raises LibsndfileError, a RuntimeError
            raise OutputError(f"cannot write {tmp}: {e}") from None

    def write(self, wave: np.ndarray) -> None:
        samples = np.asarray(wave, dtype=np.float32).reshape(-1)
        if not np.isfinite(samples).all():  # the inference path refuses these; never write one whatever happens
            raise OutputError("refusing to write non-finite audio")
        try:
            self.file.write(pcm16(samples))
        except (OSError, RuntimeError) as e:  # disk full
            raise OutputError(f"writing {self.path} failed: {e}") from None

    def commit(self) -> None:
        try:
            self.file.close()  # writes the header's final sizes (FLAC: its STREAMINFO)
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


@contextlib.contextmanager
def stop_signals_raise():
    """SIGTERM and SIGHUP raise Interrupted (SIGINT already raises KeyboardInterrupt), so that a stopped run
    unwinds through its clean-up like a failed one: the temp file removed, an earlier --out untouched.  A signal
    the caller ignores stays ignored (nohup's SIGHUP; a background job's SIGINT).  After the first stop signal
    the others are ignored, so that a second one cannot cut the clean-up short."""

    def stop(signum: int, frame) -> None:
        for sig in installed:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    installed: dict[int, object] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            installed[sig] = signal.signal(sig, stop)
    if signal.getsignal(signal.SIGINT) == signal.default_int_handler:
        installed[signal.SIGINT] = signal.default_int_handler
    try:
        yield
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(protect_text_values(list(sys.argv[1:] if argv is None else argv)))
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(message)s")
    reserved: list[Path] = []
    try:
        with stop_signals_raise():
            try:
                return _run(args, reserved)
            finally:
                for tmp in reserved:
                    tmp.unlink(missing_ok=True)  # a failed or interrupted run leaves no temp file
    except (KeyboardInterrupt, Interrupted) as e:
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        print(f"\ninterrupted ({STOP_SIGNALS.get(signum, signum)}): nothing written", file=sys.stderr)
        return 128 + signum


def _run(args: argparse.Namespace, reserved: list[Path]) -> int:
    """main's work; `reserved` receives the temp output file, which main removes unless it was renamed."""
    PretrainedVocoderError: type[Exception] = CheckpointError  # the torch branch's own is caught as well
    to_stdout = str(args.out) == "-"
    try:
        if to_stdout:
            stdout_buffer()  # a closed stdout fails before anything loads
        else:
            output_format(args.out)
            check_not_input(args.out, args.text_file)
            reserved.append(reserve_output(args.out))  # before the models load: a bad --out costs nothing
        text = read_text(args)
        if not text.strip():
            raise TextError("the text is empty")
        from tts.runtime.release import choose_runtime, open_pipeline

        runtime = choose_runtime(args.runtime, args.model, args.checkpoint, args.vocoder, args.device, args.onnx_dir,
                                 args.voice)
        if runtime == "torch":
            from tts.vocoder.pretrained import PretrainedVocoderError

            if args.vocoder is not None:
                check_vocoder_path(args.vocoder)
        lexicon = None
        if args.lexicon is not None:
            from tts.text.lexicon import Lexicon

            lexicon = Lexicon.load(args.lexicon)  # before the models: a bad lexicon costs nothing
        pipeline = open_pipeline(args.model, args.checkpoint, args.vocoder, runtime, args.device, args.onnx_dir,
                                 args.threads, args.voice)
        pipeline.use_lexicon(lexicon)
        if args.rescore is not None:  # the engine decorated: the pipeline is unchanged
            from tts.runtime.rescoring import DEFAULT_SCORER, RescoringEngine

            pipeline.engine = RescoringEngine(pipeline.engine, args.scorer or DEFAULT_SCORER, args.rescore)
        if args.speculate is not None:
            from tts.runtime.speculative import DEFAULT_DRAFTER, DEFAULT_TOLERANCE, SpeculativeEngine

            pipeline.engine = SpeculativeEngine(
                pipeline.engine, args.drafter or DEFAULT_DRAFTER, args.speculate,
                DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance)
        controls = pipeline.controls(refine_steps=args.refine_steps, temperature=args.temperature, speed=args.speed,
                                     pitch_shift=args.pitch, block_frames=args.block_frames, seed=args.seed)
        sample_rate = pipeline.sample_rate
        repairs = dict(ar_retries=args.ar_retries, fail_on_ar_failure=not args.keep_failed,
                       timestamps=args.timestamps is not None, sentence_silence=args.sentence_silence, ssml=args.ssml)
        stream = PcmStdout(sample_rate) if to_stdout else AudioFile(reserved[0], args.out, sample_rate)
        progress = None
        open_line: list[bool] = []  # a progress line without its total is ended after the run
        if not args.quiet:
            def progress(done: int, total: int | None) -> None:
                # total None: a pipeline that makes the parts as it speaks them knows it only at the end
                if total is None or total > 1:
                    shown = f"{done}/{total}" if total is not None else f"{done}"
                    print(f"\r  {shown} sentences", end="\n" if done == total else "", file=sys.stderr, flush=True)
                    open_line[:] = [total is None]
        try:
            if args.stream:
                result = stream_to(pipeline, stream, text, controls, repairs)
            else:
                result = pipeline.synthesize(text, controls, batch_size=args.batch_size, progress=progress,
                                             sink=stream.write, **repairs)
            stream.commit()
            if args.timestamps is not None:
                write_timestamps(args.timestamps, result)
            if any(open_line):
                print(file=sys.stderr, flush=True)
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
    except ValueError as e:  # an unsupported control for this model, an unknown vocoder name, UsageError
        return _fail(e, EXIT_USAGE)
    except Exception as e:  # a bug: one line, not a traceback (TTS_DEBUG=1 shows it)
        if os.environ.get("TTS_DEBUG"):
            raise
        return _fail(f"internal error ({type(e).__name__}: {e}); rerun with TTS_DEBUG=1 for the traceback", EXIT_INTERNAL)
    for note in result.notes:  # printed even with --quiet: a repaired or failed sentence must not pass silently
        print(f"note: {note}", file=sys.stderr)
    t = result.timings
    report = sys.stderr if to_stdout else sys.stdout  # stdout carries the audio with --out -
    try:
        print(f"wrote {args.out} ({result.seconds:.2f} s of audio, {len(result.sentences)} sentence(s), "
              f"{result.sample_rate} Hz)", file=report)
        print(f"timing: text {t.text_s:.3f} s, mel {t.mel_s:.3f} s, vocoder {t.vocoder_s:.3f} s, "
              f"first audio {t.first_audio_s:.3f} s, RTF {result.rtf:.3f}, runtime {runtime}", file=report, flush=True)
    except (OSError, ValueError):  # the report's reader went away (`| head -0`): the output is written, exit 0
        silence_stdout()
    return 0


def stream_to(pipeline, writer: "PcmStdout | AudioFile", text: str, controls, repairs: dict):
    """--stream: the pipeline's stream chunks into `writer` as they come -> a SynthesisResult."""
    from tts.runtime.pipeline import SynthesisResult

    utt = pipeline.utterance(text, controls, lazy=True, **repairs)
    n = 0
    for chunk in pipeline.stream_utterance(utt):
        writer.write(chunk)
        n += chunk.size
    return SynthesisResult(np.zeros(0, np.float32), pipeline.sample_rate, [p.text for p in utt.parts],
                           utt.run.timings, utt.run.notes, streamed_samples=n,
                           words=utt.run.words if repairs.get("timestamps") else None)


def write_timestamps(path: Path, result) -> None:
    """--timestamps: the words of `result` to `path` (format by extension), written whole or not at all."""
    from tts.runtime.timestamps import timestamp_text

    text = timestamp_text(path, result.words or [], result.sample_rate, result.seconds)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write --timestamps {path}: {e.strerror or e}") from None


def check_vocoder_path(vocoder: str) -> None:
    """A --vocoder that is meant as a file (it has a folder part or a dot: no vocoder name has either) but is
    missing, or is not a file or folder, is a missing vocoder (exit 4), not an unknown vocoder name (exit 2)."""
    from tts.vocoder.registry import NAMES

    path = Path(vocoder).expanduser()
    if vocoder in NAMES or path.is_file() or path.is_dir():
        return
    if path.exists():
        raise CheckpointError(f"vocoder {vocoder} is not a checkpoint file or a SpeechBrain folder (a device or pipe)")
    if os.sep in vocoder or "." in vocoder:
        raise CheckpointError(f"vocoder checkpoint not found: {vocoder}")


def _fail(error: Exception | str, code: int) -> int:
    print(f"error: {error}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

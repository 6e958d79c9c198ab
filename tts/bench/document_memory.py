"""Peak memory of the CLI against the length of the document (issue: memory must not grow with the text).

    python -m tts.bench.document_memory [--repeats 2 24] [--acoustic nar] [--threads 1]

Each size runs `python -m tts.synthesize` in a fresh process on one fixed paragraph repeated R times and
reads that process's RSS high-water mark (VmHWM) when it ends. Repeating one paragraph keeps the longest
sentence, hence the largest batch, the same at every size, so any growth of the peak is memory that
scales with the document (audio kept, per-sentence state), not a larger batch. The audio is written as
it is made (Synthesizer.synthesize(sink=...)); holding it all would add at least 4 bytes per sample
(`audio_float32_mb` below) to the peak of the longer document.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import soundfile as sf

PARAGRAPH = (
    "The old lighthouse keeper climbed the stairs every evening, counting each step aloud. "
    "Nobody in the village remembered when he had first arrived, or why he stayed. "
    "On stormy nights the lamp burned until dawn, and ships passed safely along the rocky coast. "
    "In the morning he walked to the bakery and bought two loaves of bread. "
    "Then he slept until noon, dreaming of distant harbours and quiet seas. "
)

# Runs inside the child: the real CLI entry point, then this process's own memory high-water mark.
_PROBE = """
import json, pathlib, sys
from tts.synthesize import main
rc = main(sys.argv[1:])
status = dict(l.split(":", 1) for l in pathlib.Path("/proc/self/status").read_text().splitlines() if ":" in l)
print("PEAK_KB " + status["VmHWM"].split()[0], file=sys.stderr)
sys.exit(rc)
"""


@dataclass(frozen=True)
class DocumentPeak:
    repeats: int
    text_bytes: int
    audio_s: float
    audio_float32_mb: float  # what keeping the whole wave once as float32 would cost
    peak_rss_mb: float
    wall_s: float


def measure(repeats: int, acoustic: str = "nar", threads: int = 1, workdir: Path | None = None) -> DocumentPeak:
    import time

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        text = Path(tmp) / "doc.txt"
        text.write_text(PARAGRAPH * repeats, encoding="utf-8")
        out = Path(tmp) / "doc.wav"
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, "--threads", str(threads), "--model", acoustic, "--text-file", str(text),
             "--out", str(out)], capture_output=True, text=True, env=_env(threads))
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"tts.synthesize exited {proc.returncode}: {proc.stderr[-2000:]}")
        peak_kb = next(int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_KB "))
        info = sf.info(str(out))
        return DocumentPeak(repeats=repeats, text_bytes=len(PARAGRAPH.encode()) * repeats,
                            audio_s=round(info.frames / info.samplerate, 2),
                            audio_float32_mb=round(info.frames * 4 / 2**20, 2), peak_rss_mb=round(peak_kb / 1024, 1),
                            wall_s=round(wall, 2))


def _env(threads: int) -> dict[str, str]:
    import os

    return {**os.environ, "OMP_NUM_THREADS": str(threads)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, nargs="+", default=[2, 24], help="paragraph repeats, one run each")
    ap.add_argument("--acoustic", default="nar", choices=["nar", "ar"])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    rows = [measure(r, args.acoustic, args.threads) for r in args.repeats]
    for row in rows:
        print(json.dumps(asdict(row)))
    first, last = rows[0], rows[-1]
    print(f"peak RSS {first.peak_rss_mb:.1f} MB for {first.audio_s:.0f} s of audio, {last.peak_rss_mb:.1f} MB for "
          f"{last.audio_s:.0f} s: growth {last.peak_rss_mb - first.peak_rss_mb:+.1f} MB while the extra audio alone "
          f"is {last.audio_float32_mb - first.audio_float32_mb:.1f} MB as float32")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory of the CLI against the length of the document (issue: memory must not grow with the text).

    python -m recipes.bench.document_memory [--repeats 2 24] [--acoustic nar] [--threads 1] [--runtime torch]

Each size runs `python -m tts.synthesize` in a fresh process on one fixed paragraph repeated R times and
reads that process's RSS high-water mark (VmHWM) when it ends. Repeating one paragraph keeps the longest
sentence, hence the largest batch, the same at every size, so any growth of the peak is memory that
scales with the document (audio kept, per-sentence state), not a larger batch. The audio is written as
it is made (Pipeline.synthesize(sink=...)); holding it all would add at least 4 bytes per sample
(`audio_float32_mb` below) to the peak heap (`peak_anon_mb`, sampled by this process) of the longer
document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import soundfile as sf

from recipes.bench.proc import status_mb

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
    peak_rss_mb: float  # the child's VmHWM: what a user sees, but it counts file-backed pages (model
    #                     files, libraries) that the kernel may or may not keep resident: +-25 MB noise
    peak_anon_mb: float  # highest RssAnon sampled every 10 ms: the heap alone; its level varies +-25 MB
    #                      from run to run (where the first batches leave the allocator), so runs are
    #                      compared by the growth *within* one run:
    anon_growth_mb: float  # median RssAnon while the last third of the audio is written - median while the first
    #                        third is; audio kept would grow it by ~2/3 of audio_float32_mb
    wall_s: float


def measure(repeats: int, acoustic: str = "nar", threads: int = 1, workdir: Path | None = None,
            runtime: str = "torch", extra: tuple[str, ...] = ()) -> DocumentPeak:
    """One fresh CLI run on PARAGRAPH * repeats; `extra`: more CLI options (e.g. --speed)."""
    import time

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        text = Path(tmp) / "doc.txt"
        text.write_text(PARAGRAPH * repeats, encoding="utf-8")
        out = Path(tmp) / "doc.wav"
        err = Path(tmp) / "stderr.txt"
        t0 = time.perf_counter()
        with open(err, "w") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-c", _PROBE, "--threads", str(threads), "--model", acoustic, "--runtime", runtime, *extra,
                 "--text-file", str(text), "--out", str(out)], stdout=subprocess.DEVNULL, stderr=err_file,
                env=_env(threads))
            series: list[tuple[int, float]] = []  # (audio bytes written so far, RssAnon kB)
            while proc.poll() is None:
                series.append((_written(Path(tmp), (text, err)), (status_mb("RssAnon", proc.pid) or 0.0) * 1024))
                time.sleep(0.01)
        wall = time.perf_counter() - t0
        stderr = err.read_text()
        if proc.returncode != 0:
            raise RuntimeError(f"tts.synthesize exited {proc.returncode}: {stderr[-2000:]}")
        anon_kb = max((kb for _, kb in series), default=0)
        # thirds of the document's progress (the audio written), not of the wall time, whose share taken by
        # start-up (imports, model load) depends on the machine's load; medians, not maxima: within a third the
        # heap swings +-20 MB with each batch's temporaries, while audio kept would move the median by ~2/3 of
        # the audio between the first and last thirds
        total = out.stat().st_size  # the CLI exited 0: its wav is there
        first = [kb for b, kb in series if 0 < b <= total / 3]
        last = [kb for b, kb in series if 2 * total / 3 <= b < total]
        if not first or not last:
            raise RuntimeError("the CLI did not write its audio as it made it (no sample while its first or last "
                               "third was being written): the heap cannot be followed along the document")
        peak_kb = next(int(line.split()[1]) for line in stderr.splitlines() if line.startswith("PEAK_KB "))
        info = sf.info(str(out))
        return DocumentPeak(repeats=repeats, text_bytes=len(PARAGRAPH.encode()) * repeats,
                            audio_s=round(info.frames / info.samplerate, 2),
                            audio_float32_mb=round(info.frames * 4 / 2**20, 2), peak_rss_mb=round(peak_kb / 1024, 1),
                            peak_anon_mb=round(anon_kb / 1024, 1),
                            anon_growth_mb=round((statistics.median(last) - statistics.median(first)) / 1024, 1),
                            wall_s=round(wall, 2))


def _written(folder: Path, skip: tuple[Path, ...]) -> int:
    """Bytes of audio the CLI has written into `folder` so far (its temporary output, then the wav)."""
    total = 0
    for p in folder.iterdir():
        if p not in skip:
            try:
                total += p.stat().st_size
            except FileNotFoundError:  # renamed between listing and stat
                pass
    return total


def _env(threads: int) -> dict[str, str]:
    import os

    return {**os.environ, "OMP_NUM_THREADS": str(threads)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, nargs="+", default=[2, 24], help="paragraph repeats, one run each")
    ap.add_argument("--acoustic", default="nar", choices=["nar", "ar"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runtime", default="torch", choices=["torch", "onnx", "auto"], help="the CLI's --runtime")
    args = ap.parse_args(argv)
    rows = [measure(r, args.acoustic, args.threads, runtime=args.runtime) for r in args.repeats]
    for row in rows:
        print(json.dumps(asdict(row)))
    first, last = rows[0], rows[-1]
    print(f"peak RSS {first.peak_rss_mb:.1f} MB for {first.audio_s:.0f} s of audio, {last.peak_rss_mb:.1f} MB for "
          f"{last.audio_s:.0f} s; within the longer run the heap's median moved {last.anon_growth_mb:+.1f} MB from "
          f"the first to the last third of the audio written, while keeping its audio would move it by "
          f"~{last.audio_float32_mb * 2 / 3:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

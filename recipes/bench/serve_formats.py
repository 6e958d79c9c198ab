"""The speech server's response formats measured (issue 36; the figures of README "Speech server"): for each
format, seconds to the first and to the last byte of a nine-sentence answer (median of `--repeats`), and the
waveform SNR of a two-sentence answer decoded against the same request as pcm (lossy formats after their
encoder delay; opus against the pcm resampled to 48 kHz the same way).

    python -m recipes.bench.serve_formats --repeats 3 --out docs/results/serve/formats.json
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from pathlib import Path

import httpx
import numpy as np
import soundfile as sf

from recipes.bench.speech_server import SpeechServer
from tts.serve.formats import FORMATS, OPUS_RATE

SHORT = "The first sentence comes here. The second one follows it."
PARAGRAPH = " ".join(["The package installs its files under the usual prefix.",
                      "Configuration lives in one file that the service reads at start.",
                      "Restart the service after you change it.",
                      "Logs go to the system journal by default.",
                      "Each request is answered in the order it arrives.",
                      "Errors name the file and the line they come from.",
                      "A second instance refuses to start while the first one runs.",
                      "The manual page lists every option with its default.",
                      "Report problems with the version you run."])
DELAY = {"mp3": 1105, "aac": 1024}  # samples of encoder delay a header-less stream starts with (tts/serve/formats.py)


def fetch(url: str, fmt: str, text: str) -> tuple[bytes, float, float]:
    """The answer's bytes, seconds to its first byte and to its last."""
    t0 = time.perf_counter()
    first, data = None, bytearray()
    with httpx.stream("POST", url + "/v1/audio/speech", timeout=300,
                      json={"model": "tts-1", "voice": "alloy", "input": text, "response_format": fmt}) as r:
        r.raise_for_status()
        for chunk in r.iter_bytes():
            first = first if first is not None else time.perf_counter() - t0
            data += chunk
    return bytes(data), first or 0.0, time.perf_counter() - t0


def decode(fmt: str, data: bytes) -> np.ndarray:
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768
    if fmt == "aac":
        import av

        with av.open(io.BytesIO(data)) as container:
            return np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    return sf.read(io.BytesIO(data), dtype="float32")[0]


def snr_db(fmt: str, got: np.ndarray, pcm: np.ndarray, rate: int) -> float:
    want = pcm
    if fmt == "opus":
        import soxr

        want = soxr.resample(pcm, rate, OPUS_RATE, "HQ")
    got = got[DELAY.get(fmt, 0):][: want.size]
    return float(10 * np.log10(np.sum(want**2) / max(np.sum((got - want) ** 2), 1e-20)))


def measure(repeats: int) -> dict:
    with SpeechServer("--runtime", "torch", "--rate-limit", "0", threads=1) as server:
        answer = httpx.post(server.url + "/v1/audio/speech", timeout=300,
                            json={"model": "tts-1", "voice": "alloy", "input": SHORT, "response_format": "pcm"})
        answer.raise_for_status()
        pcm, rate = decode("pcm", answer.content), int(answer.headers["x-sample-rate"])
        out: dict = {"text_sentences": PARAGRAPH.count("."), "repeats": repeats, "formats": {}}
        for fmt in FORMATS:
            runs = [fetch(server.url, fmt, PARAGRAPH) for _ in range(repeats)]
            short, _, _ = fetch(server.url, fmt, SHORT)
            out["formats"][fmt] = {
                "first_byte_s": round(statistics.median(r[1] for r in runs), 3),
                "last_byte_s": round(statistics.median(r[2] for r in runs), 3),
                "bytes": len(runs[0][0]),
                "snr_db_vs_pcm": None if fmt in ("pcm", "wav", "flac") else round(snr_db(fmt, decode(fmt, short), pcm, rate), 1),
                "lossless_equal": bool(np.array_equal(decode(fmt, short), pcm)) if fmt in ("wav", "flac") else None}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.bench.serve_formats", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    report = measure(args.repeats)
    for fmt, r in report["formats"].items():
        print(f"{fmt}: first byte {r['first_byte_s']:.2f} s, last {r['last_byte_s']:.2f} s, "
              f"SNR vs pcm {r['snr_db_vs_pcm']} dB, lossless equal {r['lossless_equal']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Load test of the speech server on loopback: a real `python -m tts.serve` in a subprocess, `--clients`
concurrent clients each sending `--requests` requests one after another (streamed responses, read to the
end), then the report: errors, p50/p95 total and first-byte latency, requests/s, audio seconds per second,
the server's resident memory before, at its peak during and after the load, and the batcher's statistics.

    python -m tts.serve.loadtest --clients 50 --requests 20 --baseline --out docs/results/serve/loadtest.json

--baseline first runs the same load against a server with --max-batch 1 (one request's sentence at a time)
and reports the throughput gain of dynamic batching against it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

from tts.serve.testing import SpeechServer

# What the clients ask for: one to three sentences, as a chat assistant or a screen reader would.
TEXTS = (
    "Hello, how can I help you today?",
    "The meeting has been moved to three o'clock. Please bring the quarterly report.",
    "Turn left at the next junction.",
    "Your order has shipped. It should arrive on Thursday. Thank you for shopping with us.",
    "The temperature outside is twelve degrees, with light rain expected this evening.",
    "Reading chapter one. It was a bright cold day in April, and the clocks were striking thirteen.",
    "Battery low.",
    "I could not find that file. Would you like me to search again?",
)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks."""
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q / 100
    lo, hi = int(pos), min(int(pos) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


async def _client(client: httpx.AsyncClient, url: str, cid: int, n: int, rows: list[dict]) -> None:
    for r in range(n):
        text = TEXTS[(cid * n + r) % len(TEXTS)]
        body = {"model": "tts-1", "voice": "default", "input": text, "response_format": "pcm"}
        t0 = time.perf_counter()
        first = None
        size = 0
        try:
            async with client.stream("POST", url + "/v1/audio/speech", json=body) as resp:
                async for chunk in resp.aiter_raw():
                    if first is None and chunk:
                        first = time.perf_counter() - t0
                    size += len(chunk)
                ok = resp.status_code == 200 and size > 0 and size % 2 == 0
                error = None if ok else f"status {resp.status_code}, {size} bytes"
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}"
        rows.append({"client": cid, "total_s": time.perf_counter() - t0, "first_byte_s": first, "bytes": size,
                     "error": error})


async def _load(url: str, clients: int, requests: int, timeout_s: float) -> tuple[list[dict], float]:
    rows: list[dict] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(_client(client, url, c, requests, rows) for c in range(clients)))
        return rows, time.perf_counter() - t0


def run_load(max_batch: int, clients: int, requests: int, threads: int, batch_wait_ms: float,
             timeout_s: float = 600.0, rounds: int = 1) -> dict:
    """One server, `rounds` times the load one after another: the report over all of them, with the
    server's memory after each round (a leak grows it round after round; a bounded server levels off)."""
    args = ("--max-batch", str(max_batch), "--batch-wait-ms", str(batch_wait_ms), "--rate-limit", "0",
            "--max-pending", str(max(256, 2 * clients)), "--first-audio-timeout", str(timeout_s),
            "--request-timeout", str(timeout_s))
    with SpeechServer(*args, threads=threads) as server:
        # one request first: the lazy parts of the first synthesis are not load
        warm = httpx.post(server.url + "/v1/audio/speech", timeout=60,
                          json={"model": "tts-1", "voice": "default", "input": TEXTS[0], "response_format": "pcm"})
        warm.raise_for_status()
        sample_rate = int(warm.headers["x-sample-rate"])
        rss_before = server.rss_bytes()
        peak = [rss_before]
        stop = threading.Event()

        def sample_rss() -> None:
            while not stop.wait(0.05):
                try:
                    peak[0] = max(peak[0], server.rss_bytes())
                except (OSError, RuntimeError):
                    return

        sampler = threading.Thread(target=sample_rss, daemon=True)
        sampler.start()
        rows, wall, after_each = [], 0.0, []
        for _ in range(rounds):
            more, took = asyncio.run(_load(server.url, clients, requests, timeout_s))
            rows += more
            wall += took
            after_each.append(server.rss_bytes())
        stop.set()
        sampler.join()
        rss_after = after_each[-1]
        health = httpx.get(server.url + "/health", timeout=10).json()
    good = [r for r in rows if r["error"] is None]
    errors = [r for r in rows if r["error"] is not None]
    audio_s = sum(r["bytes"] for r in good) / 2 / sample_rate
    totals = [r["total_s"] for r in good]
    firsts = [r["first_byte_s"] for r in good if r["first_byte_s"] is not None]
    mib = 1 / 2**20
    return {
        "max_batch": max_batch, "clients": clients, "requests_per_client": requests, "rounds": rounds,
        "requests": len(rows),
        "errors": len(errors), "error_examples": sorted({r["error"] for r in errors})[:5],
        "wall_s": round(wall, 3), "requests_per_s": round(len(good) / wall, 3),
        "audio_s_per_s": round(audio_s / wall, 3), "audio_s": round(audio_s, 2),
        "total_s": {"p50": round(percentile(totals, 50), 4), "p95": round(percentile(totals, 95), 4),
                    "max": round(max(totals, default=float("nan")), 4)},
        "first_byte_s": {"p50": round(percentile(firsts, 50), 4), "p95": round(percentile(firsts, 95), 4),
                         "max": round(max(firsts, default=float("nan")), 4)},
        "server_rss_mib": {"before": round(rss_before * mib, 1), "peak": round(peak[0] * mib, 1),
                           "after": round(rss_after * mib, 1),
                           "after_each_round": [round(b * mib, 1) for b in after_each]},
        "batches": health["batches"],
    }


def to_markdown(report: dict) -> str:
    """A saved report as a table (the README's figures): one row per server setting."""
    rows = ["| server | requests | errors | requests/s | audio s/s | total p50 / p95 s | first byte p50 / p95 s "
            "| RSS MiB before / peak / after | mean batch |", "|---|---|---|---|---|---|---|---|---|"]
    for name in ("one_at_a_time", "batched"):
        if name not in report:
            continue
        r = report[name]
        rss = r["server_rss_mib"]
        rows.append(f"| {name.replace('_', ' ')} (max batch {r['max_batch']}) | {r['requests']} | {r['errors']} "
                    f"| {r['requests_per_s']:.2f} | {r['audio_s_per_s']:.1f} "
                    f"| {r['total_s']['p50']:.2f} / {r['total_s']['p95']:.2f} "
                    f"| {r['first_byte_s']['p50']:.2f} / {r['first_byte_s']['p95']:.2f} "
                    f"| {rss['before']:.0f} / {rss['peak']:.0f} / {rss['after']:.0f} | {r['batches']['mean_batch']:.2f} |")
    if "throughput_gain" in report:
        rows.append(f"\nThroughput gain of dynamic batching: x{report['throughput_gain']:.2f} requests/s "
                    f"({report['batched']['clients']} clients x {report['batched']['requests_per_client']} requests).")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tts.serve.loadtest", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--requests", type=int, default=20, help="requests per client, one after another")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--batch-wait-ms", type=float, default=5.0)
    p.add_argument("--threads", type=int, default=1, help="the server's torch threads")
    p.add_argument("--baseline", action="store_true", help="also run --max-batch 1 and report the gain")
    p.add_argument("--rounds", type=int, default=1, help="the whole load this many times against one server")
    p.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    p.add_argument("--table", type=Path, default=None, help="print a saved report (--out) as a table and exit")
    args = p.parse_args(argv)
    if args.table is not None:
        print(to_markdown(json.loads(args.table.read_text())))
        return 0
    if min(args.clients, args.requests, args.max_batch, args.threads, args.rounds) < 1:
        p.error("--clients, --requests, --max-batch, --threads and --rounds must be >= 1")
    report: dict = {"command": "python -m tts.serve.loadtest " + " ".join(sys.argv[1:] if argv is None else argv),
                    "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
                    "texts": list(TEXTS)}
    if args.baseline:
        report["one_at_a_time"] = run_load(1, args.clients, args.requests, args.threads, args.batch_wait_ms,
                                           rounds=args.rounds)
        print(json.dumps(report["one_at_a_time"]), file=sys.stderr, flush=True)
    report["batched"] = run_load(args.max_batch, args.clients, args.requests, args.threads, args.batch_wait_ms,
                                 rounds=args.rounds)
    if args.baseline:
        base, batched = report["one_at_a_time"], report["batched"]
        report["throughput_gain"] = round(batched["requests_per_s"] / base["requests_per_s"], 3)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    errors = report["batched"]["errors"] + (report["one_at_a_time"]["errors"] if args.baseline else 0)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

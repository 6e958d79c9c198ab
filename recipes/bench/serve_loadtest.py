"""Load test of the speech server on loopback: a real `python -m tts.serve` in a subprocess, `--clients`
concurrent clients each sending `--requests` requests one after another (streamed responses, read to the
end), then the report: errors, p50/p95 total and first-byte latency, requests/s, audio seconds per second,
the server's resident memory before, at its peak during and after the load, and the batcher's statistics.

    python -m recipes.bench.serve_loadtest --clients 50 --requests 20 --baseline --out docs/results/serve/loadtest.json

--baseline also runs the same load against a second server with --max-batch 1 (one sentence at a time) and
reports the throughput gain of dynamic batching against it; with --rounds N the two servers' rounds
alternate, so that both see the same machine load.

--non-readers N measures back-pressure instead: N clients each ask for a long response (30 sentences) and
never read it (a 4 KiB receive window), while one other client is served; the report has the parts spoken
against those asked for, the server's memory before, at its peak and after the send timeout dropped them,
and the reading client's latency meanwhile:

    python -m recipes.bench.serve_loadtest --non-readers 40 --out docs/results/serve/non_readers.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import socket
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from recipes.bench.speech_server import SpeechServer

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


class ServerUnderLoad:
    """One server (`max_batch`) and the load rounds run against it; a context manager.  Several can be up
    at once so that their rounds interleave (--baseline): both settings then see the same machine load."""

    def __init__(self, max_batch: int, clients: int, requests: int, threads: int, batch_wait_ms: float,
                 timeout_s: float = 600.0) -> None:
        self.max_batch, self.clients, self.requests, self.timeout_s = max_batch, clients, requests, timeout_s
        self.server = SpeechServer("--max-batch", str(max_batch), "--batch-wait-ms", str(batch_wait_ms),
                                   "--rate-limit", "0", "--max-pending", str(max(256, 2 * clients)),
                                   # every client is 127.0.0.1: the per-address bound must hold them all
                                   "--max-connections-per-client", str(max(64, clients + 8)),
                                   "--first-audio-timeout", str(timeout_s), "--request-timeout", str(timeout_s),
                                   threads=threads)
        self.rows: list[dict] = []
        self.wall = 0.0
        self.after_each: list[int] = []
        self._stop = threading.Event()

    def __enter__(self) -> "ServerUnderLoad":
        self.server.start()
        # one request first: the lazy parts of the first synthesis are not load
        warm = httpx.post(self.server.url + "/v1/audio/speech", timeout=60,
                          json={"model": "tts-1", "voice": "default", "input": TEXTS[0], "response_format": "pcm"})
        warm.raise_for_status()
        self.sample_rate = int(warm.headers["x-sample-rate"])
        self.rss_before = self.peak = self.server.rss_bytes()
        self._sampler = threading.Thread(target=self._sample_rss, daemon=True)
        self._sampler.start()
        return self

    def _sample_rss(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, self.server.rss_bytes())
            except (OSError, RuntimeError):
                return

    def round(self) -> None:
        """The whole load once: `clients` concurrent clients, `requests` requests each."""
        rows, took = asyncio.run(_load(self.server.url, self.clients, self.requests, self.timeout_s))
        self.rows += rows
        self.wall += took
        self.after_each.append(self.server.rss_bytes())

    def report(self) -> dict:
        """Over all rounds so far, with the server's memory after each (a leak grows it round after round;
        a bounded server levels off)."""
        health = httpx.get(self.server.url + "/health", timeout=10).json()
        good = [r for r in self.rows if r["error"] is None]
        errors = [r for r in self.rows if r["error"] is not None]
        audio_s = sum(r["bytes"] for r in good) / 2 / self.sample_rate
        totals = [r["total_s"] for r in good]
        firsts = [r["first_byte_s"] for r in good if r["first_byte_s"] is not None]
        mib = 1 / 2**20
        return {
            "max_batch": self.max_batch, "clients": self.clients, "requests_per_client": self.requests,
            "rounds": len(self.after_each), "requests": len(self.rows),
            "errors": len(errors), "error_examples": sorted({r["error"] for r in errors})[:5],
            "wall_s": round(self.wall, 3), "requests_per_s": round(len(good) / self.wall, 3),
            "audio_s_per_s": round(audio_s / self.wall, 3), "audio_s": round(audio_s, 2),
            "total_s": {"p50": round(percentile(totals, 50), 4), "p95": round(percentile(totals, 95), 4),
                        "max": round(max(totals, default=float("nan")), 4)},
            "first_byte_s": {"p50": round(percentile(firsts, 50), 4), "p95": round(percentile(firsts, 95), 4),
                             "max": round(max(firsts, default=float("nan")), 4)},
            "server_rss_mib": {"before": round(self.rss_before * mib, 1), "peak": round(self.peak * mib, 1),
                               "after": round(self.after_each[-1] * mib, 1),
                               "after_each_round": [round(b * mib, 1) for b in self.after_each]},
            "batches": health["batches"],
        }

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.server.stop()


LONG_TEXT = " ".join(f"This is sentence number {i}, said slowly." for i in range(10, 40))  # 30 parts


def non_readers(n: int, threads: int, send_timeout_s: float, speed: float, runtime: str = "auto") -> dict:
    """N clients that ask for LONG_TEXT and read nothing (see the module's docstring)."""
    server = SpeechServer("--runtime", runtime, "--rate-limit", "0", "--send-timeout", f"{send_timeout_s:g}",
                          "--max-connections-per-client", str(max(64, n + 8)), threads=threads)
    mib = 1 / 2**20
    with server:
        url = server.url

        def health() -> dict:
            return httpx.get(url + "/health", timeout=30).json()

        def speak(text: str) -> float:
            t0 = time.perf_counter()
            httpx.post(url + "/v1/audio/speech", timeout=120, json={"model": "tts-1", "voice": "default",
                       "input": text, "response_format": "pcm", "speed": speed}).raise_for_status()
            return time.perf_counter() - t0

        # a batch of the load's shape first: the model's working memory for it is not what non-readers hold
        speak(" ".join(f"This is sentence number {i}, said slowly." for i in range(8)))
        idle_s = speak(TEXTS[1])
        before, peak = server.rss_bytes(), server.rss_bytes()
        parts0 = health()["batches"]["parts"]
        body = json.dumps({"model": "tts-1", "voice": "default", "input": LONG_TEXT, "response_format": "pcm",
                            "speed": speed}).encode()
        head = (f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        socks = []
        t0 = time.perf_counter()
        for _ in range(n):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(head + body)
            socks.append(sock)
        loaded_s = None
        history: list[int] = []
        while time.perf_counter() - t0 < send_timeout_s + 600:
            h = health()
            peak = max(peak, server.rss_bytes())
            history.append(h["batches"]["parts"])
            if loaded_s is None and h["pending_requests"] >= n:
                loaded_s = speak(TEXTS[1])  # another client meanwhile
            if h["connections"]["send_timeouts"] >= n and h["pending_requests"] == 0:
                break
            time.sleep(0.1)
        dropped_s = time.perf_counter() - t0
        for sock in socks:
            sock.close()
        time.sleep(1)
        h = health()
        return {"non_readers": n, "runtime": h["runtime"], "speed": speed, "send_timeout_s": send_timeout_s,
                "parts_asked": n * len(LONG_TEXT.split(". ")), "parts_spoken": history[-1] - parts0,
                "send_timeouts": h["connections"]["send_timeouts"], "all_dropped_after_s": round(dropped_s, 1),
                "other_client_s": {"idle_server": round(idle_s, 3), "during": loaded_s and round(loaded_s, 3)},
                "server_rss_mib": {"before": round(before * mib, 1), "peak": round(peak * mib, 1),
                                   "after": round(server.rss_bytes() * mib, 1),
                                   "growth_at_peak": round((peak - before) * mib, 1)}}


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
                    f"({report['batched']['clients']} clients x {report['batched']['requests_per_client']} requests"
                    f" x {report['batched'].get('rounds', 1)} rounds).")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m recipes.bench.serve_loadtest", description=__doc__,
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
    p.add_argument("--non-readers", type=int, default=0, metavar="N",
                   help="measure back-pressure instead: N clients that never read their long responses")
    p.add_argument("--send-timeout", type=float, default=20.0, help="the server's --send-timeout (--non-readers)")
    p.add_argument("--speed", type=float, default=1.0, help="speech speed of the --non-readers requests")
    p.add_argument("--runtime", choices=["auto", "torch", "onnx"], default="auto", help="the server's (--non-readers)")
    args = p.parse_args(argv)
    if args.table is not None:
        print(to_markdown(json.loads(args.table.read_text())))
        return 0
    if args.non_readers:
        report = {"command": "python -m recipes.bench.serve_loadtest " + " ".join(sys.argv[1:] if argv is None else argv),
                  **non_readers(args.non_readers, args.threads, args.send_timeout, args.speed, args.runtime)}
        text = json.dumps(report, indent=1)
        print(text)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
        return 0 if report["send_timeouts"] >= args.non_readers else 1
    if min(args.clients, args.requests, args.max_batch, args.threads, args.rounds) < 1:
        p.error("--clients, --requests, --max-batch, --threads and --rounds must be >= 1")
    report: dict = {"command": "python -m recipes.bench.serve_loadtest " + " ".join(sys.argv[1:] if argv is None else argv),
                    "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
                    "texts": list(TEXTS)}
    settings = {"one_at_a_time": 1, "batched": args.max_batch} if args.baseline else {"batched": args.max_batch}
    with ExitStack() as stack:
        servers = {name: stack.enter_context(ServerUnderLoad(max_batch, args.clients, args.requests, args.threads,
                                                             args.batch_wait_ms))
                   for name, max_batch in settings.items()}
        for _ in range(args.rounds):  # interleaved: round r of each setting, then round r + 1
            for name, server in servers.items():
                server.round()
                print(f"{name}: round {len(server.after_each)} done", file=sys.stderr, flush=True)
        for name, server in servers.items():
            report[name] = server.report()
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

"""Scripted raters: an honest client (what the page's script does, for load tests) and the hostile scripts
of issue 33, to check a deployment against them (recipes.listening_test attack; tests/test_listening_attacks.py).

Each rater is one session (one cookie) driven by a strategy:
  * honest:        downloads every clip, sends the proofs, waits as long as the page's audio, answers as told
                   by `answer(page, rater_id)` (tests pass the expected answers);
  * headers_only:  reads only the first 800 bytes of each clip through a small receive buffer, keeps the
                   sockets open, waits, then answers (the old "full download" fake);
  * no_wait:       downloads everything and answers at once;
  * by_size:       HEADs the clips and answers from sizes (A/B: the smaller file, MOS: a score from the
                   size), otherwise like honest (proofs, real-time waits): listening skipped, not the clock;
  * constant:      like by_size but always "A" and 5: a script that pushes one side/score;
  * random:        real-time, proofs, uniformly random answers.
Only loopback URLs are accepted: this is for one's own servers.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from .clips import proof

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
STRATEGIES = ("honest", "headers_only", "no_wait", "by_size", "constant", "random")


@dataclass
class RaterRun:
    strategy: str
    rater_id: str | None = None
    session_status: int | None = None
    answered: int = 0
    refused: dict[int, int] = field(default_factory=dict)  # status -> count of refused answers
    done: bool = False
    error: str | None = None


def _check_loopback(url: str) -> None:
    if urlparse(url).hostname not in LOOPBACK:
        raise ValueError(f"scripted raters only against loopback servers, not {urlparse(url).hostname!r}")


def _headers_only(url: str, path: str, cookie: str, keep: list[socket.socket]) -> None:
    """GET with a 1 KB receive buffer, read 800 bytes, leave the socket open (appended to `keep`)."""
    u = urlparse(url)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect((u.hostname, u.port or 80))
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.netloc}\r\nCookie: rater={cookie}\r\n\r\n".encode())
    s.recv(800)
    keep.append(s)


def run_rater(url: str, strategy: str, answer: Callable[[dict, str], dict] | None = None, seed: int = 0,
              forwarded_for: str | None = None, max_pages: int | None = None, deadline: float | None = None) -> RaterRun:
    """One scripted rater from consent to the end (or `max_pages`, or `deadline` on time.monotonic())."""
    _check_loopback(url)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}")
    rng = random.Random(seed)
    run = RaterRun(strategy)
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    keep: list[socket.socket] = []
    try:
        with httpx.Client(base_url=url, timeout=30, headers=headers) as c:
            r = c.post("/api/session", json={"consent": True})
            run.session_status = r.status_code
            if r.status_code != 200:
                return run
            run.rater_id = r.json()["rater_id"]
            pages = 0
            while max_pages is None or pages < max_pages:
                if deadline is not None and time.monotonic() > deadline:
                    break
                r = c.get("/api/next")
                if r.status_code != 200:  # refused (429: this address's request budget): the rater stops here
                    run.refused[r.status_code] = run.refused.get(r.status_code, 0) + 1
                    break
                nxt = r.json()
                if nxt["done"]:
                    run.done = True
                    break
                page = nxt["item"]
                body = _play(c, url, run, strategy, page, keep, rng, answer)
                status = c.post("/api/answer", json=body).status_code
                if status in (200, 201):
                    run.answered += 1
                else:
                    run.refused[status] = run.refused.get(status, 0) + 1
                    if strategy in ("headers_only", "no_wait") or run.refused[status] > 3:
                        break  # stuck: the server will not take this page
                pages += 1
    except httpx.HTTPError as e:
        run.error = repr(e)
    finally:
        for s in keep:
            s.close()
    return run


def _wav_seconds(data_len: int, content: bytes | None) -> float:
    """Duration of a 16-bit mono WAV from its header (byte rate at offset 28) and length."""
    if content is None or len(content) < 44:
        return 0.0
    byte_rate = int.from_bytes(content[28:32], "little")
    return (data_len - 44) / byte_rate if byte_rate else 0.0


def _play(c: httpx.Client, url: str, run: RaterRun, strategy: str, page: dict, keep: list, rng: random.Random,
          answer: Callable[[dict, str], dict] | None) -> dict:
    body: dict = {"item_id": page["item_id"]}
    if strategy == "headers_only":
        for a in page["audio"]:
            _headers_only(url, a, c.cookies.get("rater"), keep)
        time.sleep(1.0)
        body["proofs"] = ["0" * 8 for _ in page["audio"]]
    else:
        sizes = [int(c.head(a).headers["content-length"]) for a in page["audio"]]
        seconds = 0.0
        proofs = []
        for a in page["audio"]:
            r = c.get(a)
            proofs.append(proof(r.content))
            seconds += _wav_seconds(len(r.content), r.content)
        body["proofs"] = proofs
        if strategy != "no_wait":
            # the page's whole audio: the server takes 90 %, the report's timing rule wants 100 %
            time.sleep(seconds + 0.05)
        if strategy == "honest" and answer is not None:
            return {**body, **answer(page, run.rater_id)}
        if strategy == "by_size":
            if page["type"] == "ab":
                return {**body, "choice": "A" if sizes[0] <= sizes[-1] else "B"}
            return {**body, "score": 1 + sizes[0] % 5}
        if strategy == "constant":
            return {**body, **({"choice": "A"} if page["type"] == "ab" else {"score": 5})}
    if page["type"] == "ab":
        return {**body, "choice": rng.choice(["A", "B", "none"])}
    return {**body, "score": rng.randint(1, 5)}


def _in_threads(worker: Callable[[], None], concurrency: int, deadline: float) -> None:
    """Run `worker` in `concurrency` threads; wait for them until a minute past the deadline."""
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, deadline - time.monotonic() + 60))


def run_many(url: str, strategy: str, n: int, concurrency: int = 8, deadline_s: float = 120.0,
             forwarded_for: Callable[[int], str] | None = None, answer: Callable[[dict, str], dict] | None = None,
             seed: int = 0) -> list[RaterRun]:
    """n raters of one strategy, `concurrency` at a time, each stopping at the deadline."""
    _check_loopback(url)
    deadline = time.monotonic() + deadline_s
    out: list[RaterRun] = []
    lock = threading.Lock()
    todo = list(range(n))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                k = todo.pop(0)
            r = run_rater(url, strategy, answer=answer, seed=seed * 100_003 + k,
                          forwarded_for=forwarded_for(k) if forwarded_for else None, deadline=deadline)
            with lock:
                out.append(r)

    _in_threads(worker, concurrency, deadline)
    return out


HOSTILE = ("headers_only", "no_wait", "by_size", "constant", "random")


def measure_attack(url: str, minutes: float, ipv6_prefix: str = "2001:db8:77:1", strategies=HOSTILE,
                   concurrency: int = 10, seed: int = 0) -> list[RaterRun]:
    """One attacking machine for `minutes`: scripted raters of every hostile strategy in turn, `concurrency`
    at a time, each from a fresh address of one IPv6 /64 (sent as X-Forwarded-For: the server must trust
    127.0.0.1 as its proxy for this to mean anything), retrying a new session every 5 s while refused.
    Returns every session attempt; the caller counts what the report kept."""
    _check_loopback(url)
    rng = random.Random(seed)
    deadline = time.monotonic() + 60 * minutes
    out: list[RaterRun] = []
    lock = threading.Lock()
    turn = [0]

    def worker():
        while time.monotonic() < deadline:
            with lock:
                strategy = strategies[turn[0] % len(strategies)]
                turn[0] += 1
                address = f"{ipv6_prefix}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}"
            r = run_rater(url, strategy, seed=rng.getrandbits(32), forwarded_for=address, deadline=deadline)
            with lock:
                out.append(r)
            if r.session_status != 200:
                time.sleep(5.0)

    _in_threads(worker, concurrency, deadline)
    return out

"""Loopback load test of the listening app: N simultaneous simulated raters (threads + httpx) each complete
the whole test.

    python -m recipes.bench.listening_loadtest --url http://127.0.0.1:PORT --raters 50 --db TESTDIR/results.sqlite

Bounded: at most 200 raters, a wall-clock deadline, and only loopback URLs (127.0.0.1 / localhost /
::1). Each rater creates a session, then loops GET /api/next -> GET its audio and wait as long as the
page's audio lasts, sending a proof of every byte it received (the server refuses answers without them or sooner, 425) -> POST /api/answer, re-sending ~10 % of answers to exercise idempotent retries. Afterwards the SQLite
file (--db) is checked (`account`): answers the server acknowledged against the rows stored for these raters
(lost, duplicated), answers never sent because the deadline came first (unanswered: not lost), and every
answer row in the file (stored_in_db: what `python -m tts.listening report` counts, earlier runs and other
raters included -- why it can show more than this run's `stored`).

Exit status: 0 all raters finished and nothing was lost or duplicated; 1 answers were lost or duplicated
(the server's fault); 3 no loss, but raters were still answering at the deadline (--timeout).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sqlite3
import sys
import threading
import time
from urllib.parse import urlparse

import httpx
import soundfile as sf

from tts.listening.clips import proof

MAX_RATERS = 200
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _rater(url: str, seed: int, fetch_audio: bool, deadline: float, out: dict, lock: threading.Lock):
    rng = random.Random(seed)
    res = {"rater_id": None, "total": 0, "posted": 0, "retries": 0, "created": 0, "duplicate": 0,
           "errors": 0, "done": False}
    with lock:  # seen from the start: a rater still listening or posting at the deadline is counted too
        out[seed] = res
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            r = c.post("/api/session", json={"consent": True})
            r.raise_for_status()
            res["rater_id"], res["total"] = r.json()["rater_id"], r.json()["total"]
            while time.monotonic() < deadline:
                nxt = c.get("/api/next")
                nxt.raise_for_status()
                nxt = nxt.json()
                if nxt["done"]:
                    res["done"] = True
                    break
                it = nxt["item"]
                body = {"item_id": it["item_id"]}
                if fetch_audio:  # as a listener: download every clip, then "listen" to the whole page
                    heard, proofs = 0.0, []
                    for a in it["audio"]:
                        r = c.get(a)
                        r.raise_for_status()
                        heard += sf.info(io.BytesIO(r.content)).duration
                        proofs.append(proof(r.content))  # what the page's script sends: proof of every byte
                    body["proofs"] = proofs
                    time.sleep(heard + 0.02)
                if it["type"] == "ab":
                    body["choice"] = rng.choice(["A", "B", "none"])
                else:
                    body["score"] = rng.randint(1, 5)
                sends = 2 if rng.random() < 0.1 else 1
                for k in range(sends):
                    r = c.post("/api/answer", json=body)
                    if r.status_code in (200, 201):
                        res[r.json()["status"]] += 1
                    else:
                        res["errors"] += 1
                    res["posted"] += 1
                    res["retries"] += k
    except Exception as e:  # count, don't crash the other raters
        res["errors"] += 1
        res["exception"] = repr(e)


EXIT_LOST, EXIT_DEADLINE = 1, 3
# seconds past the deadline the raters are waited for (one may be listening to a page's audio or posting)
JOIN_GRACE_S = 5.0


def verify_db(db_path: str, rater_ids: list[str]) -> dict:
    """Rows of these raters (all, distinct (rater, item)) and of the whole file."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        q = ",".join("?" * len(rater_ids))
        stored = con.execute(f"SELECT COUNT(*) FROM answers WHERE rater_id IN ({q})", rater_ids).fetchone()[0]
        distinct = con.execute(f"SELECT COUNT(*) FROM (SELECT DISTINCT rater_id, item_id FROM answers "
                               f"WHERE rater_id IN ({q}))", rater_ids).fetchone()[0]
        in_db = con.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
    finally:
        con.close()
    return {"stored": stored, "distinct": distinct, "duplicated": stored - distinct, "stored_in_db": in_db}


def account(raters: list[dict], db: dict) -> dict:
    """What the raters sent against what the file holds.  `lost` counts only answers the server acknowledged
    as new ("created") and that are not stored; a rater stopped by the deadline left its remaining items
    `unanswered`, which are no loss (they were never sent)."""
    created = sum(r["created"] for r in raters)
    return {**db, "lost": max(0, created - db["distinct"]),
            "unanswered": max(0, sum(r["total"] for r in raters) - created)}


def verdict(summary: dict) -> tuple[int, str]:
    """Exit status and the one line that says it."""
    lost, dup = summary.get("lost", 0), summary.get("duplicated", 0)
    if lost or dup:
        return EXIT_LOST, f"FAILED: {lost} acknowledged answers lost, {dup} stored twice"
    stopped = summary["raters"] - summary["completed"]
    if stopped:
        return EXIT_DEADLINE, (f"incomplete: {stopped} of {summary['raters']} raters were still answering at the "
                               f"deadline ({summary.get('unanswered', '?')} answers never sent, none lost); "
                               f"raise --timeout")
    return 0, f"ok: {summary['raters']} raters finished, {summary.get('stored', summary['created'])} answers stored"


def run_loadtest(url: str, raters: int = 50, fetch_audio: bool = True, timeout_s: float = 120.0,
                 db_path: str | None = None, seed: int = 0) -> dict:
    host = urlparse(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"load test only against loopback, not {host!r}")
    if not 1 <= raters <= MAX_RATERS:
        raise ValueError(f"--raters must be in 1..{MAX_RATERS}")
    out: dict = {}
    lock = threading.Lock()
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    threads = [threading.Thread(target=_rater, args=(url, seed * 1000 + i, fetch_audio, deadline, out, lock),
                                daemon=True) for i in range(raters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic() + JOIN_GRACE_S))
    wall = time.monotonic() - t0
    # every rater, those still answering included (their threads run on: a snapshot of their counts, taken
    # before the file is read, so that an answer acknowledged in between is in the file, never "lost")
    with lock:
        rs = [dict(r) for r in out.values()]
    summary = {"raters": raters, "completed": sum(r["done"] for r in rs), "wall_s": round(wall, 2),
               "expected": sum(r["total"] for r in rs), "posted": sum(r["posted"] for r in rs),
               "retries": sum(r["retries"] for r in rs), "created": sum(r["created"] for r in rs),
               "duplicate_responses": sum(r["duplicate"] for r in rs), "errors": sum(r["errors"] for r in rs),
               "exceptions": [r["exception"] for r in rs if "exception" in r][:5]}
    if db_path:
        ids = [r["rater_id"] for r in rs if r["rater_id"]]
        v = verify_db(db_path, ids) if ids else {"stored": 0, "distinct": 0, "duplicated": 0, "stored_in_db": 0}
        summary.update(account(rs, v))
    summary["answers_per_s"] = round(summary["created"] / wall, 1) if wall > 0 else None
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m recipes.bench.listening_loadtest",
                                 description="simulated raters against a loopback listening-test server")
    ap.add_argument("--url", required=True)
    ap.add_argument("--raters", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=120.0, help="overall deadline in seconds")
    ap.add_argument("--db", help="SQLite file of that server, to count stored/duplicated/lost answers")
    ap.add_argument("--no-audio", action="store_true",
                    help="don't download the audio (the server then refuses every answer with 425: a bot check)")
    args = ap.parse_args(argv)
    try:
        summary = run_loadtest(args.url, args.raters, fetch_audio=not args.no_audio, timeout_s=args.timeout,
                               db_path=args.db)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1))
    status, line = verdict(summary)
    print(line, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())

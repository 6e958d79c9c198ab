"""SQLite storage (stdlib sqlite3, WAL): one connection per request, one answer per rater and item.

Schema:
  raters(rater_id TEXT PRIMARY KEY, created_at REAL, user_agent TEXT)
  answers(id INTEGER PRIMARY KEY, rater_id TEXT REFERENCES raters, item_id TEXT, item_type TEXT,
          position INTEGER, left_system TEXT, right_system TEXT, system TEXT, choice TEXT, preferred TEXT,
          score INTEGER, created_at REAL, UNIQUE(rater_id, item_id))
WAL + synchronous=NORMAL: a committed answer survives the server process being killed (SIGKILL);
only an OS crash/power loss may lose the last transactions.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS raters (
    rater_id   TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    user_agent TEXT
);
CREATE TABLE IF NOT EXISTS answers (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    rater_id     TEXT NOT NULL REFERENCES raters(rater_id),
    item_id      TEXT NOT NULL,
    item_type    TEXT NOT NULL CHECK (item_type IN ('ab', 'mos')),
    position     INTEGER NOT NULL,
    left_system  TEXT,
    right_system TEXT,
    system       TEXT,
    choice       TEXT CHECK (choice IS NULL OR choice IN ('A', 'B', 'none')),
    preferred    TEXT,
    score        INTEGER CHECK (score IS NULL OR score BETWEEN 1 AND 5),
    created_at   REAL NOT NULL,
    UNIQUE (rater_id, item_id)
);
CREATE INDEX IF NOT EXISTS answers_item ON answers(item_id);
"""


def connect(path: Path | str) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout = 30000")
    con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA foreign_keys = ON")
    return con


def init_db(path: Path | str) -> None:
    con = connect(path)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        con.executescript(SCHEMA)
    finally:
        con.close()


def add_rater(con: sqlite3.Connection, rater_id: str, user_agent: str | None) -> None:
    con.execute("INSERT OR IGNORE INTO raters(rater_id, created_at, user_agent) VALUES (?, ?, ?)",
                (rater_id, time.time(), (user_agent or "")[:300]))


def rater_exists(con: sqlite3.Connection, rater_id: str) -> bool:
    return con.execute("SELECT 1 FROM raters WHERE rater_id = ?", (rater_id,)).fetchone() is not None


def answered_items(con: sqlite3.Connection, rater_id: str) -> set[str]:
    return {r[0] for r in con.execute("SELECT item_id FROM answers WHERE rater_id = ?", (rater_id,))}


def insert_answer(con: sqlite3.Connection, row: dict) -> tuple[str, sqlite3.Row]:
    """Insert once; returns ("created" | "duplicate" | "conflict", stored row).

    A retry of the same answer is "duplicate" (idempotent success); a different answer to an item
    already answered is "conflict" (the first answer stands).
    """
    cols = ["rater_id", "item_id", "item_type", "position", "left_system", "right_system", "system", "choice",
            "preferred", "score", "created_at"]
    cur = con.execute(
        f"INSERT INTO answers({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        "ON CONFLICT(rater_id, item_id) DO NOTHING",
        [row.get(c) for c in cols])
    stored = con.execute("SELECT * FROM answers WHERE rater_id = ? AND item_id = ?",
                         (row["rater_id"], row["item_id"])).fetchone()
    if cur.rowcount == 1:
        return "created", stored
    same = stored["choice"] == row.get("choice") and stored["score"] == row.get("score")
    return ("duplicate" if same else "conflict"), stored


def all_answers(path: Path | str) -> list[dict]:
    con = connect(path)
    try:
        return [dict(r) for r in con.execute("SELECT * FROM answers ORDER BY id")]
    finally:
        con.close()

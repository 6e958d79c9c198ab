"""SQLite storage (stdlib sqlite3, WAL): one connection per request, one answer per rater and item.

Schema:
  meta(key TEXT PRIMARY KEY, value TEXT)          test_id of the test this file belongs to
  raters(rater_id TEXT PRIMARY KEY, created_at REAL, user_agent TEXT, invite_hash TEXT UNIQUE)
  answers(id INTEGER PRIMARY KEY, rater_id TEXT REFERENCES raters, item_id TEXT, item_type TEXT,
          position INTEGER, left_system TEXT, right_system TEXT, system TEXT, choice TEXT, preferred TEXT,
          score INTEGER, created_at REAL, UNIQUE(rater_id, item_id))
  served(rater_id, clip_id, first_at)            when each of a rater's clips was first requested (the
                                                 listening clock; the proof of download comes with the answer)
A file belongs to one test: init_db refuses a file whose test_id differs (a rebuilt test must not be
reported against the old answers, whose item ids would mean other systems), and any SQLite file that
already holds tables but is not a results file (serving another app's database must not alter it).
WAL + synchronous=NORMAL: a committed answer survives the server process being killed (SIGKILL);
only an OS crash/power loss may lose the last transactions.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS raters (
    rater_id    TEXT PRIMARY KEY,
    created_at  REAL NOT NULL,
    user_agent  TEXT,
    invite_hash TEXT UNIQUE
);
CREATE TABLE IF NOT EXISTS served (
    rater_id TEXT NOT NULL,
    clip_id  TEXT NOT NULL,
    first_at REAL NOT NULL,
    PRIMARY KEY (rater_id, clip_id)
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


def connect(path: Path | str, create: bool = False) -> sqlite3.Connection:
    """Only init_db creates the file: if it was moved away under a running server (a forced rebuild
    archives it), requests fail (503) instead of writing answers into a fresh, orphaned file."""
    uri = f"file:{Path(path).resolve()}?mode={'rwc' if create else 'rw'}"
    con = sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA busy_timeout = 30000")
    con.execute("PRAGMA synchronous = NORMAL")
    con.execute("PRAGMA foreign_keys = ON")
    return con


class WrongTestError(ValueError):
    """The results file belongs to another build of the test (or predates test ids)."""


def stored_test_id(path: Path | str) -> str | None:
    """The test_id recorded in an existing results file (None when it has none)."""
    con = connect(path)
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
            return None
        row = con.execute("SELECT value FROM meta WHERE key = 'test_id'").fetchone()
        return None if row is None else row[0]
    finally:
        con.close()


def check_test_id(path: Path | str, test_id: str) -> None:
    """Refuse a results file that belongs to another test (or holds answers but no test id)."""
    if not Path(path).is_file():
        raise WrongTestError(f"{path} not found")
    stored = stored_test_id(path)
    if stored != test_id:
        raise WrongTestError(f"{path} holds results of test {stored or '(unknown: no test id)'}, "
                             f"not of this test.json ({test_id}); was the test rebuilt? "
                             "Use the archived test.json, or a new results file")


def init_db(path: Path | str, test_id: str) -> None:
    """Create the schema and record test_id; refuse a file of another test, or another app's database."""
    fresh = not Path(path).is_file() or Path(path).stat().st_size == 0
    if not fresh:
        con = connect(path)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as e:
            raise WrongTestError(f"{path} is not an SQLite results file ({e})") from e
        finally:
            con.close()
        if tables and "meta" not in tables:
            raise WrongTestError(f"{path} is another application's database (tables: {', '.join(sorted(tables))}); "
                                 "refusing to add the listening test's tables to it: use a new results file")
        if tables:
            check_test_id(path, test_id)
    con = connect(path, create=True)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        con.executescript(SCHEMA)
        con.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('test_id', ?)", (test_id,))
    finally:
        con.close()
    check_test_id(path, test_id)


def add_rater(con: sqlite3.Connection, rater_id: str, user_agent: str | None, invite_hash: str | None = None) -> bool:
    """False when the invite code was already used by another rater (nothing inserted)."""
    try:
        con.execute("INSERT INTO raters(rater_id, created_at, user_agent, invite_hash) VALUES (?, ?, ?, ?)",
                    (rater_id, time.time(), (user_agent or "")[:300], invite_hash))
    except sqlite3.IntegrityError:
        return False
    return True


def rater_of_invite(con: sqlite3.Connection, invite_hash: str) -> str | None:
    row = con.execute("SELECT rater_id FROM raters WHERE invite_hash = ?", (invite_hash,)).fetchone()
    return None if row is None else row[0]


def record_served(con: sqlite3.Connection, rater_id: str, clip_id: str, at: float) -> None:
    """Remember the first request of a rater's clip (later requests keep the first time)."""
    con.execute("INSERT OR IGNORE INTO served(rater_id, clip_id, first_at) VALUES (?, ?, ?)", (rater_id, clip_id, at))


def first_served(con: sqlite3.Connection, rater_id: str, clip_id: str) -> float | None:
    """When this rater first requested this clip (None: never)."""
    row = con.execute("SELECT first_at FROM served WHERE rater_id = ? AND clip_id = ?", (rater_id, clip_id)).fetchone()
    return None if row is None else row[0]


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

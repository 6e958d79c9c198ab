"""recipes.bench.listening_loadtest's accounting (issue 32 item 8): a deadline is not a loss, and the file's
own count (what the report reads) is shown beside this run's."""

import sqlite3

from recipes.bench.listening_loadtest import EXIT_DEADLINE, EXIT_LOST, account, verdict, verify_db


def _db(path, rows):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE answers (id INTEGER PRIMARY KEY, rater_id TEXT, item_id TEXT)")
    con.executemany("INSERT INTO answers (rater_id, item_id) VALUES (?, ?)", rows)
    con.commit()
    con.close()
    return str(path)


def rater(rid, total, created):
    return {"rater_id": rid, "total": total, "created": created, "done": created == total}


def test_raters_stopped_by_the_deadline_lose_nothing(tmp_path):
    # r1 finished its 3 items, r2 answered 1 of 3 before the deadline; an earlier run's rater r0 is in the file
    db = _db(tmp_path / "r.sqlite", [("r0", "a"), ("r0", "b"), ("r1", "a"), ("r1", "b"), ("r1", "c"), ("r2", "a")])
    raters = [rater("r1", 3, 3), rater("r2", 3, 1)]
    summary = {"raters": 2, "completed": 1, "created": 4, **account(raters, verify_db(db, ["r1", "r2"]))}
    assert summary["stored"] == 4 and summary["stored_in_db"] == 6  # the report counts the whole file
    assert summary["lost"] == 0 and summary["unanswered"] == 2
    status, line = verdict(summary)
    assert status == EXIT_DEADLINE and "deadline" in line and "none lost" in line


def test_an_acknowledged_answer_missing_from_the_file_is_lost(tmp_path):
    db = _db(tmp_path / "r.sqlite", [("r1", "a"), ("r1", "a")])
    summary = {"raters": 1, "completed": 1, "created": 2, **account([rater("r1", 2, 2)], verify_db(db, ["r1"]))}
    assert summary["lost"] == 1 and summary["duplicated"] == 1
    assert verdict(summary)[0] == EXIT_LOST
    clean = _db(tmp_path / "c.sqlite", [("r1", "a"), ("r1", "b")])
    ok = {"raters": 1, "completed": 1, "created": 2, **account([rater("r1", 2, 2)], verify_db(clean, ["r1"]))}
    assert verdict(ok)[0] == 0

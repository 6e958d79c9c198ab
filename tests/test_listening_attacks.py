"""Listening-test app under attack (issue 21): each test runs the attack that used to work and checks that
it fails now. Real uvicorn / SQLite files / FastAPI apps; no mocks."""

import hashlib
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from recipes.listening_test import main as build_main
from tts.listening.__main__ import admin_token, main as cli_main
from tts.listening.app import SECURITY_HEADERS, create_app, layout_for
from tts.listening.build import ATTENTION_YES
from tts.listening.report import analyse, format_p, plot, to_markdown
from listening_server import REPO, ServerProcess, make_tone_systems
from recipes.bench.speech_server import free_port

ADMIN = "attack-test-admin-token-0123456789"
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def _build(tmp_path: Path, name: str, *extra: str, seed: int = 5) -> Path:
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 550.0}, ["a", "b"], seconds=0.3)
    out = tmp_path / name
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(out),
                       "--mos", "--seed", str(seed), *extra]) == 0
    return out


@pytest.fixture()
def built(tmp_path):
    return _build(tmp_path, "test")


def _test(d: Path) -> dict:
    return json.loads((d / "test.json").read_text())


def _session(c: TestClient) -> str:
    r = c.post("/api/session", json={"consent": True})
    assert r.status_code == 200, r.text
    return r.json()["rater_id"]


def _answer_body(test: dict, it: dict) -> dict:
    """The answer an honest, attentive rater gives."""
    ref = {x["id"]: x for x in test["items"]}[it["item_id"]]
    if it["type"] == "ab":
        if ref.get("attention"):
            return {"item_id": it["item_id"], "choice": "A" if it["audio"][0] == f"/audio/{ref['audio'][0]}" else "B"}
        return {"item_id": it["item_id"], "choice": "A"}
    return {"item_id": it["item_id"], "score": ref.get("expected", 4)}


# ---------------------------------------------------------------- High 1: blinding
def test_two_builds_of_same_inputs_and_seed_share_no_id(tmp_path):
    one, two = _build(tmp_path, "one"), _build(tmp_path, "two")
    t1, t2 = _test(one), _test(two)
    assert t1["sentences"] == t2["sentences"]  # the seed still picks the same sentences
    assert t1["test_id"] != t2["test_id"] and t1["secret"] != t2["secret"] and len(t1["secret"]) == 64
    assert not set(t1["audio"]) & set(t2["audio"])
    assert not {it["id"] for it in t1["items"]} & {it["id"] for it in t2["items"]}
    # the old dictionary attack: sha256(seed, system, sentence) no longer names any file
    guesses = {hashlib.sha256("\x1f".join([str(t1["seed"]), s, sid]).encode()).hexdigest()[:16]
               for s in t1["systems"] for sid in t1["sentences"]}
    assert not guesses & set(t1["audio"])
    for tok in t1["audio"]:
        assert HEX16.match(tok)
    for it in t1["items"]:  # one id form for every item: no type, no number, no block
        assert HEX16.match(it["id"]), it["id"]
    # per-rater order cannot be predicted from the public seed: same rater id, other secret, other order
    rid = "ab" * 16
    assert [i for i, _ in layout_for(t1, rid)] != [i for i, _ in layout_for({**t1, "secret": t2["secret"]}, rid)]


def test_audio_headers_identical_in_kind_across_systems(built, tmp_path):
    test = _test(built)
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN)) as c:
        _session(c)
        kinds = {}
        for tok, entry in test["audio"].items():
            r = c.get(f"/audio/{tok}")
            assert r.status_code == 200
            keys = frozenset(k.lower() for k in r.headers)
            assert "etag" not in keys and "last-modified" not in keys  # write times ordered files by system
            kinds.setdefault(keys, set()).add(entry["system"] or "attention")
            h = c.head(f"/audio/{tok}")
            assert h.status_code == 200 and h.content == b""  # HEAD used to give 405
            assert h.headers["content-length"] == r.headers["content-length"] == str(len(r.content))
        assert len(kinds) == 1, kinds  # one header set for every system and for the checks


def test_security_headers_and_cookie_flags(built, tmp_path):
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN)) as c:
        r = c.post("/api/session", json={"consent": True})
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie  # plain http: no Secure
        tok = next(iter(_test(built)["audio"]))
        for path in ["/", "/rate", "/api/next", f"/audio/{tok}", "/nothing-here", "/favicon.ico", "/done"]:
            r = c.get(path, follow_redirects=False)
            for k, v in SECURITY_HEADERS.items():
                assert r.headers.get(k) == v, (path, k)
        assert c.get("/favicon.ico").status_code == 200  # was a 404
    for secure_cookies, base in [(True, "http://testserver"), (False, "https://testserver")]:
        app = create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, secure_cookies=secure_cookies)
        with TestClient(app, base_url=base) as c:
            assert "secure" in c.post("/api/session", json={"consent": True}).headers["set-cookie"].lower()


# ---------------------------------------------------------------- High 3: safe rebuilds
def test_rebuild_refuses_results_force_archives_and_old_db_is_refused(tmp_path, capsys):
    test_dir = _build(tmp_path, "test")
    old = _test(test_dir)
    db = test_dir / "results.sqlite"
    with TestClient(create_app(test_dir, db, admin_token=ADMIN)) as c:
        _session(c)
        old_tok = next(iter(old["audio"]))
        dirs = {n: str(tmp_path / "sys" / n) for n in ("gt", "nar")}
        # the attack: rebuild with the systems in another order over a folder holding results
        rebuild = ["build", "--systems", f"nar={dirs['nar']}", f"gt={dirs['gt']}", "--out", str(test_dir), "--mos"]
        assert build_main(rebuild) == 2
        assert "holds results" in capsys.readouterr().err
        assert _test(test_dir)["test_id"] == old["test_id"]  # untouched
        assert build_main(rebuild + ["--force"]) == 0
        # a server still running on the old test.json keeps serving its audio (no 404s under raters)
        assert c.get(f"/audio/{old_tok}").status_code == 200
        assert c.get("/api/next").status_code == 503  # but stores nothing into an orphaned, fresh file
    new = _test(test_dir)
    assert new["test_id"] != old["test_id"] and not db.exists()
    (archive,) = (test_dir / "archive").iterdir()
    assert archive.name.endswith(old["test_id"])
    assert {"results.sqlite", "test.json"} <= {p.name for p in archive.iterdir()}
    assert json.loads((archive / "test.json").read_text())["test_id"] == old["test_id"]
    # serve and report refuse the old answers against the new test (they would swap systems' scores)
    old_db = archive / "results.sqlite"
    assert cli_main(["report", "--test", str(test_dir), "--db", str(old_db), "--out", str(tmp_path / "rep")]) == 2
    assert "holds results of test " + old["test_id"] in capsys.readouterr().err
    os.environ["LISTENING_ADMIN_TOKEN"] = ADMIN
    try:
        assert cli_main(["serve", "--test", str(test_dir), "--db", str(old_db), "--port", str(free_port())]) == 2
    finally:
        del os.environ["LISTENING_ADMIN_TOKEN"]
    assert "not of this test.json" in capsys.readouterr().err
    # the archived test.json still reports its own answers
    (test_dir / "archive-view").mkdir()
    (test_dir / "archive-view" / "test.json").write_text((archive / "test.json").read_text())
    assert cli_main(["report", "--test", str(test_dir / "archive-view"), "--db", str(old_db),
                     "--out", str(tmp_path / "rep")]) == 0


# ---------------------------------------------------------------- Medium: bodies, NaN, admin token
def test_oversized_bodies_get_413(built, tmp_path):
    with ServerProcess(built, tmp_path / "big.sqlite", admin_token=ADMIN) as srv, httpx.Client(base_url=srv.url) as c:
        c.post("/api/session", json={"consent": True}).raise_for_status()
        big = b'{"item_id": "' + b"a" * (65 * 1024) + b'"}'
        assert c.post("/api/answer", content=big, headers={"content-type": "application/json"}).status_code == 413
        # chunked, no Content-Length: cut off while reading, 20 MB never buffered
        chunks = (b"x" * 65536 for _ in range(320))
        r = c.post("/api/answer", content=chunks, headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.get("/healthz").status_code == 200  # still serving


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_scores_are_client_errors(built, tmp_path, value):
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN), raise_server_exceptions=False) as c:
        _session(c)
        item = c.get("/api/next").json()["item"]["item_id"]
        r = c.post("/api/answer", content=f'{{"item_id": "{item}", "score": {value}}}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text


def test_admin_token_env_file_generated_not_in_ps_and_rate_limited(built, tmp_path):
    with ServerProcess(built, tmp_path / "a.sqlite", admin_token=ADMIN) as srv:
        cmdline = Path(f"/proc/{srv.proc.pid}/cmdline").read_bytes()
        assert ADMIN.encode() not in cmdline  # `ps` shows the command line, never the token
        assert httpx.get(srv.url + "/admin/results", headers=srv.admin_headers()).status_code == 200
        codes = [httpx.get(srv.url + "/admin/results", headers={"Authorization": f"Bearer guess{k:030d}"}).status_code
                 for k in range(12)]
        assert codes[:10] == [403] * 10 and codes[10:] == [429, 429]  # guessing is throttled
    # no token given: a 256-bit one is generated into DB.admin-token (0600) and only its path printed
    db = tmp_path / "g.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "LISTENING_ADMIN_TOKEN"}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tts.listening", "serve", "--test", str(built), "--db", str(db),
                             "--port", str(port)], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        token_file = Path(f"{db}.admin-token")
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        token = token_file.read_text().strip()
        assert len(token) >= 43 and stat.S_IMODE(token_file.stat().st_mode) == 0o600  # >= 256 bits, private
        assert httpx.get(f"http://127.0.0.1:{port}/admin/results",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert token not in out and str(token_file) in out
    assert cli_main(["serve", "--test", str(built), "--db", str(db), "--admin-token", ADMIN]) == 2  # not in argv
    # from a file (the environment variable wins when both are set)
    (tmp_path / "tok").write_text(ADMIN + "\n")
    assert admin_token(tmp_path / "tok", db) == ADMIN


# ---------------------------------------------------------------- High 2: rater integrity
def test_answers_need_this_sessions_complete_download_and_the_clip_duration(built, tmp_path):
    test = _test(built)
    app = create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN)
    with TestClient(app) as bot, TestClient(app) as helper:
        _session(bot)
        _session(helper)
        it = bot.get("/api/next").json()["item"]
        body = _answer_body(test, it)
        assert bot.post("/api/answer", json=body).status_code == 425  # no audio fetched: the old bot
        for a in it["audio"]:
            assert helper.get(a).status_code == 200  # another session's download is no evidence
            assert bot.head(a).status_code == 200  # nor is a HEAD
        assert bot.post("/api/answer", json=body).status_code == 425
        t0 = time.time()
        for a in it["audio"]:
            assert bot.get(a).status_code == 200
        assert bot.post("/api/answer", json=body).status_code == 425  # too soon: the clip lasts longer
        longest = max(test["audio"][a.rsplit("/", 1)[1]]["duration_s"] for a in it["audio"])
        time.sleep(max(0.0, longest - (time.time() - t0)) + 0.05)
        r = bot.post("/api/answer", json=body)
        assert r.status_code == 201 and r.json()["answered"] == 1
        assert bot.post("/api/answer", json=body).status_code == 200  # retries stay idempotent


def test_scripted_ballot_stuffing_stores_nothing(built, tmp_path):
    """The issue's attack: scripted raters answering every page without downloading audio."""
    db = tmp_path / "stuff.sqlite"
    with ServerProcess(built, db, admin_token=ADMIN, extra_args=("--sessions-per-hour", "5")) as srv:
        codes = []
        for _ in range(7):
            with httpx.Client(base_url=srv.url) as c:
                r = c.post("/api/session", json={"consent": True})
                codes.append(r.status_code)
                if r.status_code != 200:
                    continue
                for _ in range(5):
                    it = c.get("/api/next").json()["item"]
                    body = {"item_id": it["item_id"], **({"choice": "B"} if it["type"] == "ab" else {"score": 1})}
                    assert c.post("/api/answer", json=body).status_code == 425
        assert codes == [200] * 5 + [429, 429]  # sessions per client address are limited
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0
    con.close()


def test_request_rate_limit_per_client(built, tmp_path):
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, requests_per_minute=30)) as c:
        codes = [c.get("/healthz").status_code for _ in range(35)]
        assert codes.count(200) == 30 and codes[-1] == 429
        assert c.get("/healthz").headers["retry-after"]


def test_invite_codes_required_and_single_rater_each(tmp_path, capsys):
    test_dir = _build(tmp_path, "inv", "--invite-codes", "3")
    codes = (test_dir / "invite_codes.txt").read_text().split()
    assert len(codes) == 3 and len(set(codes)) == 3 and "3 invite codes" in capsys.readouterr().out
    assert not set(codes) & set(json.dumps(_test(test_dir)).split('"'))  # test.json holds hashes only
    app = create_app(test_dir, tmp_path / "r.sqlite", admin_token=ADMIN)
    with TestClient(app) as c:
        assert 'id="invite"' in c.get("/").text
        assert c.post("/api/session", json={"consent": True}).status_code == 403
        assert c.post("/api/session", json={"consent": True, "invite": "not-a-code"}).status_code == 403
        rid = c.post("/api/session", json={"consent": True, "invite": codes[0]}).json()["rater_id"]
    with TestClient(app) as other:  # the same code elsewhere is the same rater, not a new ballot
        assert other.post("/api/session", json={"consent": True, "invite": codes[0]}).json()["rater_id"] == rid
        assert other.post("/api/session", json={"consent": True, "invite": codes[1]}).json()["rater_id"] == rid
    with TestClient(app) as third:
        assert third.post("/api/session", json={"consent": True, "invite": codes[1]}).json()["rater_id"] != rid


def test_attention_checks_look_like_items_and_vary_per_rater(built, tmp_path):
    test = _test(built)
    items = {it["id"]: it for it in test["items"]}
    att = {i for i, it in items.items() if it.get("attention")}
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False,
                               sessions_per_hour=100)) as c:
        mos_sets, ab_sides = set(), set()
        for _ in range(12):
            c.cookies.clear()
            rid = _session(c)
            lay = layout_for(test, rid)
            kinds = [(items[i]["type"], bool(items[i].get("attention"))) for i, _ in lay]
            assert ("ab", True) in kinds and ("mos", True) in kinds  # checks in both parts
            mos_sets.add(frozenset(items[i]["expected"] for i, _ in lay if i in att and items[i]["type"] == "mos"))
            while not (nxt := c.get("/api/next").json())["done"]:
                it = nxt["item"]
                assert set(it) == {"item_id", "type", "audio"} and HEX16.match(it["item_id"])
                page = c.get("/rate").text
                assert "attention" not in page.lower() and "beeps" not in page
                if it["item_id"] in att and it["type"] == "ab":
                    ab_sides.add(_answer_body(test, it)["choice"])
                c.post("/api/answer", json=_answer_body(test, it))
        assert len(mos_sets) > 1  # raters are asked for different scores
        assert ab_sides == {"A", "B"}  # and to pick different sides


# ---------------------------------------------------------------- report
def _report_test():
    return {"title": "t", "seed": 0, "systems": ["x", "y"], "ground_truth": [],
            "audio": {"c1": {"duration_s": 2.0}, "c2": {"duration_s": 2.0}},
            "items": [{"id": f"ab{k}", "type": "ab", "systems": ["x", "y"], "audio": ["c1", "c2"]} for k in range(40)]
            + [{"id": f"m{k}", "type": "mos", "system": "x", "audio": ["c1"]} for k in range(4)]
            + [{"id": "chk", "type": "ab", "attention": True, "expected": ATTENTION_YES, "systems": [ATTENTION_YES, "attention-no"],
               "audio": ["c1", "c2"]}]}


def test_report_flags_implausible_timing_and_prints_tiny_p():
    test = _report_test()
    ans = []
    for k in range(40):  # an honest rater: 5 s a page (4 s of audio)
        ans.append({"rater_id": "honest", "item_id": f"ab{k}", "preferred": "x", "score": None, "created_at": 5.0 * k})
    for k in range(40):  # a bot: 0.1 s a page, on the other side
        ans.append({"rater_id": "bot", "item_id": f"ab{k}", "preferred": "y", "score": None, "created_at": 0.1 * k})
    for r, score, t0 in [("honest", 5, 300), ("honest", 5, 303), ("honest", 5, 306), ("honest", 4, 309)]:
        ans.append({"rater_id": r, "item_id": f"m{(t0 - 300) // 3}", "preferred": None, "score": score, "created_at": t0})
    ans.append({"rater_id": "honest", "item_id": "chk", "preferred": ATTENTION_YES, "score": None, "created_at": 400})
    res = analyse(test, ans)
    assert res["too_fast"] == ["bot"] and res["excluded_raters"] == ["bot"] and res["failed_attention"] == []
    assert res["timing"]["bot"] == {"timed": 39, "fast": 39} and res["timing"]["honest"]["fast"] == 0
    (pair,) = res["ab"]
    assert (pair["wins_a"], pair["wins_b"]) == (40, 0)
    assert pair["p_value_sign_test"] == pytest.approx(2 * 0.5**40) and pair["p_value_sign_test"] > 0
    md = to_markdown(res)
    (row,) = [line for line in md.splitlines() if line.startswith("| x | y |")]
    assert row.endswith("| 1.82e-12 |") and format_p(0.0312) == "0.0312"  # p used to print as 0
    (m,) = res["mos"]  # 5, 5, 5, 4: the t interval reaches past 5
    assert m["ci95"][1] == 5.0 and m["ci95"][0] >= 1.0
    # A wrong answer to the A/B check excludes the rater
    bad = [dict(a, preferred="attention-no") if a["item_id"] == "chk" else a for a in ans]
    assert "honest" in analyse(test, bad)["failed_attention"]


def test_report_chart_legend_names_the_pairs_systems_not_sides(tmp_path):
    res = analyse(_report_test(), [{"rater_id": "r", "item_id": "ab0", "preferred": "x", "score": None,
                                    "created_at": 0.0}])
    labels = plot(res, tmp_path / "c.png")
    assert labels == ["first system of the pair preferred", "no preference", "second system of the pair preferred"]
    assert "A preferred" not in " ".join(labels)

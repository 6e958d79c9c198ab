"""Listening-test app: statistics, build, API (real SQLite file), security, report, load, kill/restart."""

import io
import json
import math
import sqlite3
import time
from math import comb

import httpx
import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from recipes.listening_test import main as build_main
from tts.listening.app import create_app, layout_for
from tts.listening.build import gated_loudness_db
from recipes.bench.listening_loadtest import run_loadtest
from tts.listening.report import analyse, write_report
from tts.listening.stats import mean_ci_t, sign_test, wilson_interval
from listening_server import ServerProcess, make_tone_systems

Z95 = 1.959963984540054


# ---------------------------------------------------------------- statistics on known counts
def _wilson_by_hand(k, n, z=Z95):
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return c - h, c + h


@pytest.mark.parametrize("k,n", [(8, 10), (0, 10), (10, 10), (37, 60), (1, 3)])
def test_wilson_matches_formula(k, n):
    lo, hi = wilson_interval(k, n)
    elo, ehi = _wilson_by_hand(k, n)
    assert lo == pytest.approx(max(0, elo), abs=1e-12) and hi == pytest.approx(min(1, ehi), abs=1e-12)


def test_wilson_published_values():
    assert wilson_interval(8, 10) == pytest.approx((0.4901625, 0.9433178), abs=1e-6)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775328), abs=1e-6)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def _sign_p_by_hand(k, n):
    # two-sided exact binomial with p = 0.5: sum of the probabilities no larger than P(k)
    probs = [comb(n, i) / 2**n for i in range(n + 1)]
    return min(1.0, sum(q for q in probs if q <= probs[k] * (1 + 1e-9)))


@pytest.mark.parametrize("a,b", [(9, 1), (0, 6), (5, 5), (12, 4), (3, 0)])
def test_sign_test_matches_exact_binomial(a, b):
    assert sign_test(a, b) == pytest.approx(_sign_p_by_hand(a, a + b), rel=1e-9)


def test_sign_test_known_values():
    assert sign_test(9, 1) == pytest.approx(22 / 1024)
    assert sign_test(0, 6) == pytest.approx(2 / 64)
    assert sign_test(0, 0) == 1.0


def test_mean_ci_t():
    m = mean_ci_t([1, 2, 3, 4, 5])
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)
    assert (m.mean, m.n) == (3, 5) and m.low == pytest.approx(3 - half) and m.high == pytest.approx(3 + half)
    assert math.isnan(mean_ci_t([4]).low)


def test_analyse_ties_excluded_and_attention_exclusion():
    test = {"title": "t", "seed": 0, "systems": ["x", "y"], "ground_truth": ["x"], "items": [
        {"id": "ab-0000", "type": "ab", "systems": ["x", "y"], "audio": []},
        {"id": "mos-0001", "type": "mos", "system": "x", "audio": []},
        {"id": "att-0000", "type": "mos", "attention": True, "expected": 4, "audio": []}]}
    ans = []
    for r, pref in enumerate(["x"] * 9 + ["y"] + [None] * 5):
        ans.append({"rater_id": f"r{r}", "item_id": "ab-0000", "preferred": pref, "score": None})
        ans.append({"rater_id": f"r{r}", "item_id": "mos-0001", "preferred": None, "score": 5})
        ans.append({"rater_id": f"r{r}", "item_id": "att-0000", "preferred": None, "score": 4})
    bad = "r99"  # prefers y and gives 1, but fails the attention check: must not count
    ans += [{"rater_id": bad, "item_id": "ab-0000", "preferred": "y", "score": None},
            {"rater_id": bad, "item_id": "mos-0001", "preferred": None, "score": 1},
            {"rater_id": bad, "item_id": "att-0000", "preferred": None, "score": 2}]
    res = analyse(test, ans)
    assert res["excluded_raters"] == [bad] and res["n_raters_kept"] == 15
    (p,) = res["ab"]
    assert (p["wins_a"], p["wins_b"], p["ties"], p["n"]) == (9, 1, 5, 15)
    assert p["p_value_sign_test"] == pytest.approx(22 / 1024, abs=1e-6)
    assert p["pref_a_ci95"] == pytest.approx(list(_wilson_by_hand(9, 10)), abs=1e-4)
    assert res["mos"][0]["mean"] == 5 and res["mos"][0]["n"] == 15 and res["mos"][0]["ground_truth"]
    # with one failure allowed, the rater is kept
    assert analyse(test, ans, max_attention_fails=1)["excluded_raters"] == []


# ---------------------------------------------------------------- build
@pytest.fixture()
def test_dir(tmp_path):
    # short clips: the server makes every answer wait as long as the page's audio lasts
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 550.0, "ar": 660.0}, ["a", "b", "c"], seconds=0.3)
    sf.write(str(dirs["nar"] / "extra.wav"), np.zeros(800), 16000)  # not common: must be ignored
    out = tmp_path / "test"
    args = ["build", "--systems"] + [f"{k}={v}" for k, v in dirs.items()] + ["--out", str(out), "--mos", "--seed", "7"]
    assert build_main(args) == 0
    return out


def test_build_layout_and_normalisation(test_dir):
    test = json.loads((test_dir / "test.json").read_text())
    assert test["seed"] == 7 and test["sentences"] == ["a", "b", "c"] and test["ground_truth"] == ["gt"]
    kinds = [("att-" if it.get("attention") else "") + it["type"] for it in test["items"]]
    assert kinds.count("ab") == 3 * 3 and kinds.count("mos") == 3 * 3
    assert kinds.count("att-ab") == 2 and kinds.count("att-mos") == 5  # A/B checks; one MOS check per score
    levels = []
    for tok, a in test["audio"].items():
        assert a["file"] == f"{tok}.wav" and (test_dir / test["audio_dir"] / a["file"]).is_file()
        assert len(tok) == 16 and set(tok) <= set("0123456789abcdef")  # opaque: no system/sentence names
        if not a.get("attention"):
            x, sr = sf.read(str(test_dir / test["audio_dir"] / a["file"]))
            levels.append(gated_loudness_db(x, sr))
    assert max(levels) - min(levels) < 0.1 and abs(np.mean(levels) + 23) < 0.1  # inputs differed by 9.5 dB
    att = [it for it in test["items"] if it.get("attention")]
    assert sorted(it["expected"] for it in att if it["type"] == "mos") == [1, 2, 3, 4, 5]
    assert all(sf.info(str(test_dir / test["audio_dir"] / f"{t}.wav")).duration > 1 for it in att for t in it["audio"])


def test_build_rejects_bad_input(tmp_path, capsys):
    dirs = make_tone_systems(tmp_path, {"x": 300.0}, ["a"])
    assert build_main(["build", "--systems", f"x={dirs['x']}", "--out", str(tmp_path / "o")]) == 2
    assert build_main(["build", "--systems", f"x={dirs['x']}", "y=/nonexistent", "--out", str(tmp_path / "o")]) == 2
    assert build_main(["build", "--systems", "bad", "--out", str(tmp_path / "o")]) == 2


def test_layout_randomised_per_rater(test_dir):
    test = json.loads((test_dir / "test.json").read_text())
    lays = [layout_for(test, f"{i:032x}") for i in range(20)]
    assert lays[0] == layout_for(test, f"{0:032x}")  # deterministic: reload shows the same
    assert len({tuple(i for i, _ in lay) for lay in lays}) > 10  # order varies
    types = {it["id"]: it["type"] for it in test["items"]}
    flips = {f for lay in lays for i, f in lay if types[i] == "ab"}
    assert flips == {True, False}  # side varies
    for lay in lays:  # A/B block (9 + 2 checks) first, then MOS (9 + 2 of the 5 checks)
        kinds = [types[i] for i, _ in lay]
        assert kinds == ["ab"] * 11 + ["mos"] * 11


# ---------------------------------------------------------------- API on a real SQLite file
@pytest.fixture()
def client(test_dir, tmp_path):
    # API semantics; the listening evidence (425) has its own tests in test_listening_attacks.py
    app = create_app(test_dir, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False)
    with TestClient(app) as c:
        yield c


ADMIN = "s3cret-admin-token-0123456789"


def _first(client, kind):
    """The id of an item of `kind` on the current rater's list."""
    while True:
        it = client.get("/api/next").json()["item"]
        if it["type"] == kind:
            return it["item_id"]
        client.post("/api/answer", json={"item_id": it["item_id"], **({"choice": "A"} if it["type"] == "ab" else {"score": 3})})


def _start(c):
    r = c.post("/api/session", json={"consent": True})
    assert r.status_code == 200
    return r.json()["rater_id"]


def test_session_requires_consent_and_cookie(client):
    assert client.get("/api/next").status_code == 401
    assert client.get("/rate", follow_redirects=False).headers["location"] == "/"
    assert client.post("/api/session", json={"consent": False}).status_code == 422
    assert client.post("/api/session", json={}).status_code == 422
    client.cookies.set("rater", "../../etc/passwd")
    assert client.get("/api/next").status_code == 401
    client.cookies.clear()
    rid = _start(client)
    assert rid == _start(client)  # existing session reused
    assert client.get("/", follow_redirects=False).headers["location"] == "/rate"  # no consent form again
    assert client.get("/rate").status_code == 200


def test_full_rater_flow_duplicates_and_report(client, test_dir, tmp_path):
    test = json.loads((test_dir / "test.json").read_text())
    items = {it["id"]: it for it in test["items"]}
    rid = _start(client)
    page = client.get("/rate").text
    assert "disabled" in page and "ended" in page and "Page 1 of 22" in page
    n = 0
    while True:
        nxt = client.get("/api/next").json()
        if nxt["done"]:
            break
        assert nxt["answered"] == n and nxt["position"] == n + 1
        it = nxt["item"]
        for a in it["audio"]:
            r = client.get(a)
            assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
        ref = items[it["item_id"]]
        assert set(it) == {"item_id", "type", "audio"}  # checks and real items: the same fields
        if it["type"] == "ab":
            yes = "A" if it["audio"][0] == f"/audio/{ref['audio'][0]}" else "B"
            body = {"item_id": it["item_id"], "choice": yes if ref.get("attention") else "A"}
        else:
            body = {"item_id": it["item_id"], "score": ref["expected"] if ref.get("attention") else 4}
        r = client.post("/api/answer", json=body)
        assert r.status_code == 201 and r.json()["status"] == "created"
        r = client.post("/api/answer", json=body)  # network retry: idempotent
        assert r.status_code == 200 and r.json()["status"] == "duplicate"
        if it["type"] == "ab":
            other = "B" if body["choice"] == "A" else "A"
            assert client.post("/api/answer", json={**body, "choice": other}).status_code == 409
        n += 1
    assert n == 22
    assert client.get("/rate", follow_redirects=False).headers["location"] == "/done"
    assert "completion code" in client.get("/done").text
    con = sqlite3.connect(tmp_path / "r.sqlite")
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT item_id) FROM answers").fetchone() == (22, 22)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    res = write_report(test_dir, tmp_path / "r.sqlite", tmp_path / "rep", max_fast_share=1.0)  # answered at once
    assert res["excluded_raters"] == [] and res["n_answers"] == 22
    assert sum(p["n"] for p in res["ab"]) == 9 and all(m["mean"] == 4 and m["n"] == 3 for m in res["mos"])
    # "A" was chosen every time: per pair, A-side wins follow the rater's flips exactly
    lay = dict(layout_for(test, rid))
    for p in res["ab"]:
        flips = [lay[i] for i, it in items.items() if it["type"] == "ab" and it["systems"] == [p["system_a"], p["system_b"]]
                 and not it.get("attention")]
        assert p["wins_a"] == flips.count(False) and p["wins_b"] == flips.count(True)
    assert {"report.md", "report.json", "report.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}


@pytest.mark.parametrize("body,code", [
    ({"item_id": "AB", "choice": "C"}, 422),
    ({"item_id": "MOS", "score": 6}, 422),
    ({"item_id": "MOS", "score": 0}, 422),
    ({"item_id": "MOS", "score": "3"}, 422),
    ({"item_id": "MOS", "score": 3.5}, 422),
    ({"item_id": "AB", "score": 3}, 422),        # wrong kind of answer for the item
    ({"item_id": "MOS", "choice": "A"}, 422),
    ({"item_id": "AB", "choice": "A", "score": 3}, 422),
    ({"item_id": "AB"}, 422),
    ({"item_id": "AB", "choice": "A", "rater_id": "x"}, 422),  # extra fields refused
    ({"item_id": "../../x", "choice": "A"}, 422),
    ({"item_id": "ab-0000", "choice": "A"}, 422),  # the old numbered ids are not ids any more
    ({"item_id": "0123456789abcdef", "choice": "A"}, 404),
])
def test_answer_validation(client, body, code):
    _start(client)
    ids = {"AB": _first(client, "ab"), "MOS": None}
    ids["MOS"] = _first(client, "mos")  # answers the A/B block on the way
    body = {**body, "item_id": ids.get(body["item_id"], body["item_id"])}
    assert client.post("/api/answer", json=body).status_code == code
    assert client.post("/api/answer", content=b"not json", headers={"content-type": "application/json"}).status_code == 422


def test_answer_requires_session(client):
    assert client.post("/api/answer", json={"item_id": "0123456789abcdef", "choice": "A"}).status_code == 401


@pytest.mark.parametrize("path", [
    "/audio/../test.json", "/audio/..%2Ftest.json", "/audio/%2e%2e%2ftest.json", "/audio/%2e%2e/test.json",
    "/audio/..%5Ctest.json", "/audio/%252e%252e%252ftest.json", "/audio/....//test.json",
    "/audio/0000000000000000", "/audio/test.json", "/audio/%2Fetc%2Fpasswd", "/audio/",
    "/audio/..", "/audio/0123456789abcdef/../../test.json",
])
def test_audio_path_traversal(client, path):
    r = client.get(path)
    if r.status_code == 200:  # only where the URL normalises away from /audio (e.g. "/audio/.." -> "/")
        assert not r.url.path.startswith("/audio") and r.headers["content-type"].startswith("text/html"), path
    else:
        assert r.status_code in (404, 422, 405), (path, r.status_code)
    assert not r.headers.get("content-type", "").startswith("audio")
    assert '"items"' not in r.text and "root:" not in r.text


def test_admin_token_required(client):
    _start(client)
    it = client.get("/api/next").json()["item"]
    client.post("/api/answer", json={"item_id": it["item_id"], "choice": "none"})
    bearer = {"Authorization": f"Bearer {ADMIN}"}
    assert client.get("/admin/results").status_code == 403
    assert client.get("/admin/results", headers={"Authorization": "Bearer wrong"}).status_code == 403
    assert client.get(f"/admin/results?token={ADMIN}").status_code == 403  # not in URLs (logs, history)
    assert client.get("/admin/results", headers={"Authorization": f"Basic {ADMIN}"}).status_code == 403
    assert client.get("/admin/results?format=xml", headers=bearer).status_code == 422
    j = client.get("/admin/results", headers=bearer).json()
    assert j["n_answers"] == 1 and j["answers"][0]["choice"] == "none"
    csv_ = client.get("/admin/results?format=csv", headers=bearer)
    assert csv_.headers["content-type"].startswith("text/csv") and len(csv_.text.strip().splitlines()) == 2


def test_admin_disabled_without_token(test_dir, tmp_path):
    with TestClient(create_app(test_dir, tmp_path / "x.sqlite", admin_token=None)) as c:
        assert c.get("/admin/results", headers={"Authorization": "Bearer "}).status_code == 403
        assert c.get("/admin/results", headers={"Authorization": "Bearer None"}).status_code == 403
    with pytest.raises(ValueError, match="too short"):
        create_app(test_dir, tmp_path / "x.sqlite", admin_token="short")


# ---------------------------------------------------------------- robustness on loopback
def test_loadtest_50_raters(test_dir, tmp_path):
    db = tmp_path / "load.sqlite"
    # 50 raters from one loopback address: lift the per-client limits meant for the public
    with ServerProcess(test_dir, db, extra_args=LOOSE_LIMITS) as srv:
        s = run_loadtest(srv.url, raters=50, fetch_audio=True, timeout_s=60, db_path=str(db))
    print("loadtest:", json.dumps(s))
    assert s["completed"] == 50 and s["errors"] == 0
    assert s["expected"] == 50 * 22 == s["stored"] == s["distinct"]
    assert s["lost"] == 0 and s["duplicated"] == 0 and s["retries"] == s["duplicate_responses"] > 0
    # every rater now has to listen (~15 s of audio each, in parallel); the rest is the server's overhead
    assert s["wall_s"] < 45


LOOSE_LIMITS = ("--sessions-per-hour", "1000", "--requests-per-minute", "100000")


def listen(c: httpx.Client, it: dict) -> None:
    """What the server asks of a rater: download every clip, then take as long as the longest lasts."""
    longest = 0.0
    for a in it["audio"]:
        r = c.get(a)
        assert r.status_code == 200
        longest = max(longest, sf.info(io.BytesIO(r.content)).duration)
    time.sleep(longest + 0.02)


def test_audio_path_traversal_raw_http(test_dir, tmp_path):
    """Literal, un-normalised request lines (a real client may send them) against the real server."""
    import http.client

    with ServerProcess(test_dir, tmp_path / "raw.sqlite") as srv:
        for path in ["/audio/../test.json", "/audio/..%2f..%2ftest.json", "/audio/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                     "/audio/..\\test.json", "/audio/../../../../etc/passwd", "/audio//etc/passwd"]:
            con = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
            con.putrequest("GET", path, skip_accept_encoding=True)
            con.endheaders()
            r = con.getresponse()
            body = r.read()
            assert r.status in (400, 404, 422), (path, r.status)
            assert b'"items"' not in body and b"root:" not in body
            con.close()


def test_loadtest_refuses_non_loopback():
    with pytest.raises(ValueError):
        run_loadtest("http://example.com:80", raters=1)
    with pytest.raises(ValueError):
        run_loadtest("http://127.0.0.1:9", raters=10_000)


def test_survives_sigkill_and_rater_resumes(test_dir, tmp_path):
    db = tmp_path / "kill.sqlite"
    srv = ServerProcess(test_dir, db).start()
    try:
        c = httpx.Client(base_url=srv.url, timeout=10)
        c.post("/api/session", json={"consent": True}).raise_for_status()
        answered = []
        for _ in range(5):
            it = c.get("/api/next").json()["item"]
            body = {"item_id": it["item_id"], **({"choice": "B"} if it["type"] == "ab" else {"score": 2})}
            listen(c, it)
            assert c.post("/api/answer", json=body).status_code == 201
            answered.append(it["item_id"])
        srv.kill()  # SIGKILL: no shutdown handlers, no checkpoint
        with pytest.raises(httpx.HTTPError):
            c.get("/api/next")
        srv.start()
        nxt = c.get("/api/next").json()  # same cookie: resumes at item 6
        assert nxt["answered"] == 5 and nxt["position"] == 6 and nxt["item"]["item_id"] not in answered
        r = httpx.get(f"{srv.url}/admin/results", headers=srv.admin_headers()).json()
        assert sorted(a["item_id"] for a in r["answers"]) == sorted(answered)
        assert c.post("/api/answer", json=body).json()["status"] == "duplicate"  # pre-kill answer still there
        c.close()
    finally:
        srv.stop()


def test_sigkill_under_load_loses_no_acknowledged_answer(test_dir, tmp_path):
    """Kill the server while 10 raters are posting: every answer acknowledged (201) before the kill is
    stored, the file passes integrity_check, and every rater resumes where the server says."""
    import threading

    db = tmp_path / "load-kill.sqlite"
    srv = ServerProcess(test_dir, db).start()
    acked: dict[str, list[str]] = {}
    cookies: dict[str, str] = {}
    lock = threading.Lock()

    def rater(k):
        with httpx.Client(base_url=srv.url, timeout=5) as c:
            rid = c.post("/api/session", json={"consent": True}).json()["rater_id"]
            with lock:
                cookies[rid], acked[rid] = rid, []
            try:
                while True:
                    nxt = c.get("/api/next").json()
                    if nxt["done"]:
                        return
                    it = nxt["item"]
                    body = {"item_id": it["item_id"], **({"choice": "A"} if it["type"] == "ab" else {"score": 3})}
                    listen(c, it)
                    if c.post("/api/answer", json=body).status_code == 201:
                        with lock:
                            acked[rid].append(it["item_id"])
            except httpx.HTTPError:
                return  # server gone

    threads = [threading.Thread(target=rater, args=(k,), daemon=True) for k in range(10)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while sum(map(len, acked.values())) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        srv.kill()
        for t in threads:
            t.join(10)
        n_acked = sum(map(len, acked.values()))
        assert 0 < n_acked < 10 * 22  # killed mid-test
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {(r, i) for r, i in con.execute("SELECT rater_id, item_id FROM answers")}
        con.close()
        want = {(r, i) for r, items in acked.items() for i in items}
        assert want <= stored and len(stored - want) <= 10  # at most one in-flight answer per rater
        srv.start()
        for rid in cookies:
            with httpx.Client(base_url=srv.url, cookies={"rater": rid}, timeout=5) as c:
                nxt = c.get("/api/next").json()
                assert nxt["answered"] == sum(1 for r, _ in stored if r == rid)
    finally:
        srv.stop()


def test_build_synthesises_held_out_sentences_through_each_system(featurised_corpus, tmp_path):
    """--synth speaks the same held-out sentences through real checkpoints; gt is the corpus audio."""
    import json as _json
    import subprocess
    import sys

    from helpers import TINY, tiny_checkpoint
    from tts.paths import REPO_ROOT

    ar = tiny_checkpoint(tmp_path / "ar.pt", "autoregressive", **TINY["autoregressive"])
    nar = tiny_checkpoint(tmp_path / "nar.pt", "nonautoregressive", **TINY["nonautoregressive"])
    out = tmp_path / "lt"
    cmd = [sys.executable, "-m", "recipes.listening_test", "build", "--data", str(featurised_corpus), "--n", "2",
           "--with-ground-truth", "--synth", f"ar={ar}", "--synth", f"nar_k2={nar},k=2", "--out", str(out), "--mos"]
    r = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    test = _json.loads((out / "test.json").read_text())
    assert set(test["systems"]) == {"gt", "ar", "nar_k2"}
    test_ids = sorted((featurised_corpus / "splits" / "test.txt").read_text().split())
    for system in ("gt", "ar", "nar_k2"):
        assert sorted(p.stem for p in (out / "sources" / system).glob("*.wav")) == test_ids
    bad = subprocess.run(cmd[:-5] + ["--synth", "x=/nonexistent.pt", "--out", str(tmp_path / "lt2")], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "not found" in bad.stderr

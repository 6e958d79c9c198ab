"""Listening-test app under attack (issues 21 and 33): each test runs an attack that used to work and checks
that it fails now. Real uvicorn / SQLite files / FastAPI apps / scripted raters over HTTP; no mocks."""

import hashlib
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient

from recipes.listening_test import main as build_main
from tts.listening.__main__ import admin_token, main as cli_main
from tts.listening.app import SECURITY_HEADERS, create_app
from tts.listening.clips import proof
from tts.listening.layout import layout_for, page_sources
from tts.listening.report import analyse, format_p, plot, to_markdown
from tts.listening.scripted import run_many, run_rater
from tts.listening.security import client_address, parse_networks
from tts.web_limits import PrefixLimiter, rate_key
from listening_server import ADMIN, REPO, ServerProcess, honest_answer, make_tone_systems
from recipes.bench.speech_server import free_port

HEX16 = re.compile(r"^[0-9a-f]{16}$")


def _build(tmp_path: Path, name: str, *extra: str, seed: int = 5, seconds: float = 0.3,
           systems: dict | None = None) -> Path:
    systems = systems or {"gt": 440.0, "nar": 550.0}
    dirs = make_tone_systems(tmp_path / f"sys-{name}", systems, ["a", "b", "c", "d"], seconds=seconds)
    out = tmp_path / name
    assert build_main(["build", "--systems", *[f"{k}={v}" for k, v in dirs.items()], "--out", str(out),
                       "--mos", "--seed", str(seed), "--padding-s", "0.05", *extra]) == 0
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


# ---------------------------------------------------------------- High 3: safe rebuilds
def test_rebuild_refuses_results_force_archives_and_old_db_is_refused(tmp_path, capsys):
    test_dir = _build(tmp_path, "test")
    old = _test(test_dir)
    db = test_dir / "results.sqlite"
    with TestClient(create_app(test_dir, db, admin_token=ADMIN)) as c:
        _session(c)
        clip = c.get("/api/next").json()["item"]["audio"][0]
        assert c.get(clip).status_code == 200
        dirs = {n: str(tmp_path / "sys-test" / n) for n in ("gt", "nar")}
        # the attack: rebuild with the systems in another order over a folder holding results
        rebuild = ["build", "--systems", f"nar={dirs['nar']}", f"gt={dirs['gt']}", "--out", str(test_dir), "--mos",
                   "--padding-s", "0.05"]
        assert build_main(rebuild) == 2
        assert "holds results" in capsys.readouterr().err
        assert _test(test_dir)["test_id"] == old["test_id"]  # untouched
        assert build_main(rebuild + ["--force"]) == 0
        # a server still running on the old test.json stops answering (503) rather than write sessions or
        # answers into an orphaned, fresh file; its raters' clips are looked up there too
        assert c.get(clip).status_code == 503
        assert c.get("/api/next").status_code == 503
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




# ---------------------------------------------------------------- issue 33, 1: checks answerable only by listening
def _all_pages(c: TestClient, test: dict, rid: str) -> list[tuple[dict, list[bytes]]]:
    """Walk a rater's whole test (listening evidence off): each page and the bytes of its clips."""
    pages = []
    while not (nxt := c.get("/api/next").json())["done"]:
        it = nxt["item"]
        data = [c.get(a).content for a in it["audio"]]
        pages.append((it, data))
        assert c.post("/api/answer", json={"item_id": it["item_id"], **honest_answer(test, rid, it)}).status_code == 201
    return pages


def test_checks_and_systems_cannot_be_told_from_bytes_sizes_or_ids(tmp_path):
    """The old answer table: check clips byte-identical across builds with unique sizes, the choose-me clip
    the shorter, systems named by their header's rate, their leading zeros and level, builds linked by hash.
    3 s clips so that the spoken checks fit a sentence's length."""
    one = _build(tmp_path, "one", seconds=3.0)
    two = _build(tmp_path, "two", seconds=3.0)
    t1, t2 = _test(one), _test(two)
    assert t1["normalisation"]["mos_checks_longer_than_sentences"] == 0  # redrawn faster until they fit
    items = {it["id"]: it for it in t1["items"]}
    hashes: dict[str, set] = {"one": set(), "two": set()}
    with TestClient(create_app(one, tmp_path / "r1.sqlite", admin_token=ADMIN, check_listening=False,
                               sessions_per_hour=100)) as c:
        raters = []
        for _ in range(2):
            c.cookies.clear()
            rid = _session(c)
            raters.append((rid, _all_pages(c, t1, rid)))
    real_sizes, leading_zeros = set(), set()
    for rid, pages in raters:
        flips = dict(layout_for(t1, rid))
        for it, data in pages:
            ref = items[it["item_id"]]
            for d in data:
                hashes["one"].add(hashlib.sha256(d).hexdigest())
                assert d[:4] == b"RIFF" and d[8:40] == data[0][8:40]  # one header layout, one rate, for all
                assert int.from_bytes(d[24:28], "little") == 16000
                # no fixed run of digital zeros to count (each system's was its own): the padding is dithered
                zeros = next(k for k in range(44, len(d), 2) if d[k:k + 2] != b"\0\0")
                leading_zeros.add((zeros - 44) // 2)
                # and silent on every clip, damaged ones too (noise in the padding would name the damaged side)
                lead = np.frombuffer(d[44:44 + 2 * 800], dtype="<i2")  # 0.05 s at 16 kHz
                assert np.abs(lead.astype(int)).max() <= 1
            assert len(set(map(len, data))) == 1  # both sides of every A/B page, checks included: one size
            if ref["type"] == "mos" and not ref.get("attention"):
                real_sizes.add(len(data[0]))
            if ref["type"] == "ab" and ref.get("attention"):
                # material of real pages: the undamaged side is one of the test's real clips
                srcs = page_sources(t1, items, rid, ref["id"], flips[ref["id"]])
                assert all(t1["audio"][s.token]["system"] in t1["systems"] for s in srcs)
        for it, data in pages:  # a spoken MOS check has the size of a real sentence group
            if items[it["item_id"]].get("attention") and it["type"] == "mos":
                assert len(data[0]) in real_sizes
    assert max(leading_zeros) < 60 and len(leading_zeros) > 5
    # every clip of every page of every rater: different bytes (nothing to compare across sessions)
    assert len(hashes["one"]) == sum(len(d) for _, pages in raters for _, d in pages)
    # the same clip for two raters, and for a second build: no shared hash; ids are per rater
    (r1, p1), (r2, p2) = raters
    assert not {a for it, _ in p1 for a in it["audio"]} & {a for it, _ in p2 for a in it["audio"]}
    with TestClient(create_app(two, tmp_path / "r2.sqlite", admin_token=ADMIN, check_listening=False)) as c:
        rid = _session(c)
        hashes["two"] = {hashlib.sha256(d).hexdigest() for _, data in _all_pages(c, t2, rid) for d in data}
    assert not hashes["one"] & hashes["two"]
    assert not set(t1["audio"]) & set(t2["audio"]) and not set(items) & {it["id"] for it in t2["items"]}


def test_a_script_that_remembers_clips_cannot_find_the_undamaged_side(tmp_path):
    """A script keeps every clip it received and, on each A/B page, picks the side that equals (to the dither)
    a clip heard before: a check's undamaged side used to be such a clip whenever its real pair came first.
    Now check material is drawn among pairs the rater has not heard yet."""
    from tts.listening.layout import check_material

    dirs = {}
    for name, base in [("gt", 440.0), ("nar", 550.0), ("ar", 660.0)]:  # every clip its own pitch
        d = tmp_path / "in" / name
        d.mkdir(parents=True)
        for k in range(4):
            t = np.arange(int(0.3 * 16000)) / 16000
            sf.write(str(d / f"s{k}.wav"), 0.2 * np.sin(2 * np.pi * (base + 23 * k) * t), 16000)
        dirs[name] = d
    test_dir = tmp_path / "t"
    assert build_main(["build", "--systems", *[f"{k}={v}" for k, v in dirs.items()], "--out", str(test_dir),
                       "--padding-s", "0.05"]) == 0
    test = _test(test_dir)
    items = {it["id"]: it for it in test["items"]}
    unheard_checks = matched = 0
    with TestClient(create_app(test_dir, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False,
                               sessions_per_hour=100)) as c:
        for _ in range(8):
            c.cookies.clear()
            rid = _session(c)
            heard: list[np.ndarray] = []
            while not (nxt := c.get("/api/next").json())["done"]:
                it = nxt["item"]
                if it["type"] != "ab":
                    break
                pcm = [np.frombuffer(c.get(a).content[44:], dtype="<i2").astype(int) for a in it["audio"]]
                if items[it["item_id"]].get("attention"):
                    known = [any(len(h) == len(x) and np.abs(h - x).max() <= 2 for h in heard) for x in pcm]
                    # were there pairs this rater had not heard yet (on real pages or earlier checks)?
                    lay = [i for i, _ in layout_for(test, rid)]
                    here = lay.index(it["item_id"])
                    earlier = {t for i in lay[:here] for t in items[i]["audio"]}
                    earlier |= {t for i, src in check_material(test, items, rid).items() if lay.index(i) < here
                                for t in items[src]["audio"]}
                    fresh = [i for i, x in items.items() if x["type"] == "ab" and not x.get("attention")
                             and not set(x["audio"]) & earlier]
                    if fresh:
                        unheard_checks += 1
                        matched += any(known)
                heard += pcm
                c.post("/api/answer", json={"item_id": it["item_id"], **honest_answer(test, rid, it)})
    # 8 raters x 3 checks; with 3 systems and 4 sentences every clip is met early, so fresh material runs out
    # for the later checks (they fall back to the pairs met longest ago)
    assert unheard_checks >= 8 and matched == 0


def test_check_answers_vary_per_rater_and_pages_look_alike(built, tmp_path):
    test = _test(built)
    items = {it["id"]: it for it in test["items"]}
    # 12 raters from one address in a few seconds: above the default 600 requests a minute on a fast machine;
    # the limiter has its own tests
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False,
                               sessions_per_hour=100, requests_per_minute=100_000)) as c:
        mos_sets, ab_sides, damages = set(), set(), set()
        for _ in range(12):
            c.cookies.clear()
            rid = _session(c)
            lay = layout_for(test, rid)
            mos_sets.add(frozenset(items[i]["expected"] for i, _ in lay if items[i].get("attention") and items[i]["type"] == "mos"))
            for i, flip in lay:
                if items[i].get("attention") and items[i]["type"] == "ab":
                    damages.add(next(s.damage for s in page_sources(test, items, rid, i, flip) if s.damage))
            while not (nxt := c.get("/api/next").json())["done"]:
                it = nxt["item"]
                assert set(it) == {"item_id", "type", "audio"} and HEX16.match(it["item_id"])
                page = c.get("/rate").text
                assert "attention" not in page.lower() and "damaged" not in page
                body = honest_answer(test, rid, it)
                if items[it["item_id"]].get("attention") and it["type"] == "ab":
                    ab_sides.add(body["choice"])
                c.post("/api/answer", json={"item_id": it["item_id"], **body})
        assert len(mos_sets) > 1 and ab_sides == {"A", "B"} and damages == {"noise", "dropouts", "crush"}


# ---------------------------------------------------------------- issue 33, 3: full downloads
def test_headers_only_reader_and_other_fakes_get_nothing_stored(built, tmp_path):
    """A client that reads 800 bytes through a 1 KB receive buffer and keeps the socket open; one that
    downloads and answers at once; one that sends another session's proofs or a HEAD only."""
    db = tmp_path / "r.sqlite"
    test = _test(built)
    with ServerProcess(built, db) as srv:
        (run,) = run_many(srv.url, "headers_only", 1)
        assert run.session_status == 200 and run.answered == 0 and run.refused == {425: 1}
        (run,) = run_many(srv.url, "no_wait", 1)
        assert run.answered == 0 and run.refused == {425: 1}
        with httpx.Client(base_url=srv.url) as bot, httpx.Client(base_url=srv.url) as helper:
            rid = bot.post("/api/session", json={"consent": True}).json()["rater_id"]
            helper.post("/api/session", json={"consent": True})
            it = bot.get("/api/next").json()["item"]
            body = {"item_id": it["item_id"], **honest_answer(test, rid, it)}
            for a in it["audio"]:
                assert helper.get(a).status_code == 404  # another session cannot even fetch this rater's clips
                assert bot.head(a).status_code == 200
            time.sleep(2.0)
            assert bot.post("/api/answer", json={**body, "proofs": ["0" * 8] * len(it["audio"])}).status_code == 425
            got = [bot.get(a).content for a in it["audio"]]
            assert bot.post("/api/answer", json={**body, "proofs": [proof(g[:-1]) for g in got]}).status_code == 425
            t0 = time.monotonic()
            # the clock runs from the first request: honest proofs, yet too soon after a fresh fetch?
            # (no: the HEAD did not start it, the GET above did; wait out the page's audio)
            seconds = sum((len(g) - 44) / 32000 for g in got)
            time.sleep(max(0.0, 0.9 * seconds - (time.monotonic() - t0)) + 0.05)
            assert bot.post("/api/answer", json={**body, "proofs": [proof(g) for g in got]}).status_code == 201
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 1  # only the honest answer
    con.close()


# ---------------------------------------------------------------- issue 33, 1 and 5: scripted raters, counted
def test_scripted_raters_with_real_time_are_not_counted(tmp_path):
    """Bots that fetch everything, send valid proofs and wait out every page in real time, but answer by file
    size, by a constant, or at random: none is counted; honest raters beside them are."""
    test_dir = _build(tmp_path, "t", systems={"gt": 440.0, "nar": 550.0, "ar": 660.0})
    test = _test(test_dir)
    db = tmp_path / "r.sqlite"

    def answer(page, rid):
        k = int(page["item_id"][:4], 16)
        return honest_answer(test, rid, page, ab_choice="AB"[k % 2], score=1 + k % 5)

    # 8 raters at once from one address: a request budget above their rate (600 a minute refuses some)
    args = ("--sessions-per-hour", "100", "--requests-per-minute", "6000")
    with ServerProcess(test_dir, db, extra_args=args) as srv:
        # the 4 strategies at once: a rater spends its time waiting out pages (sleeping), not computing
        with ThreadPoolExecutor(4) as pool:
            runs = [r for group in pool.map(lambda s: run_many(srv.url, s, 2, concurrency=2, deadline_s=400,
                                                               answer=answer),
                                            ["by_size", "constant", "random", "honest"]) for r in group]
    assert all(r.done and not r.refused for r in runs), [(r.strategy, r.refused, r.error) for r in runs]
    res = analyse(test, __import__("tts.listening.db", fromlist=["all_answers"]).all_answers(db), bootstrap=100)
    counted = {r for r, v in res["raters"].items() if v["counted"]}
    honest = {r.rater_id for r in runs if r.strategy == "honest"}
    assert counted == honest, {r.strategy: res["raters"][r.rater_id] for r in runs}
    by = {r.rater_id: r.strategy for r in runs}
    assert all("constant side" in res["flagged"].get(r, []) for r, s in by.items() if s in ("by_size", "constant"))


def test_skipping_checks_is_impossible_and_stopping_before_them_counts_nothing(built, tmp_path):
    test = _test(built)
    items = {it["id"]: it for it in test["items"]}
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False)) as c:
        rid = _session(c)
        lay = layout_for(test, rid)
        checks = [p for p, (i, _) in enumerate(lay) if items[i].get("attention")]
        other_prompts = [it["id"] for it in test["items"] if it.get("attention") and it["type"] == "mos"
                         and it["id"] not in dict(lay)]
        # another rater's MOS check is not on this list; a later page cannot be answered first
        assert c.post("/api/answer", json={"item_id": other_prompts[0], "score": 3}).status_code == 404
        for pos, (item_id, _) in enumerate(lay):
            it = c.get("/api/next").json()["item"]
            assert it["item_id"] == item_id
            if pos == checks[0]:  # the old bot answered around the checks
                later = lay[pos + 1][0]
                body = {"item_id": later, **({"choice": "A"} if items[later]["type"] == "ab" else {"score": 5})}
                r = c.post("/api/answer", json=body)
                assert r.status_code == 409 and "order" in r.json()["detail"]
            if pos == checks[2]:  # the A/B part's last check: stop here
                break
            c.post("/api/answer", json={"item_id": item_id, **honest_answer(test, rid, it, ab_choice="AB"[pos % 2])})
    res = analyse(test, __import__("tts.listening.db", fromlist=["all_answers"]).all_answers(tmp_path / "r.sqlite"),
                  max_fast_share=1.0)
    assert res["raters"][rid]["checks"]["ab"] == {"in_layout": 3, "answered": 2, "failed": 0}
    assert res["checks_incomplete"] == [rid] and res["n_raters_counted"] == 0 and res["n_answers_kept"] == 0


# ---------------------------------------------------------------- issue 33, 4: limits per /64, no reset, proxies
def test_many_sessions_from_one_ipv6_64_share_one_budget(built, tmp_path):
    db = tmp_path / "r.sqlite"
    args = ("--sessions-per-hour", "5", "--trusted-proxy", "127.0.0.1")
    with ServerProcess(built, db, extra_args=args) as srv:
        def session(xff):
            return httpx.post(srv.url + "/api/session", json={"consent": True},
                              headers={"X-Forwarded-For": xff}).status_code
        # 8 addresses of one /64 (the unlimited raters): one budget of 5
        assert [session(f"2001:db8:1:2::{k:x}") for k in range(8)] == [200] * 5 + [429] * 3
        assert session("2001:db8:1:2:ffff:ffff:ffff:ffff") == 429
        assert session("2001:db8:1:3::1") == 200  # the next /64 is another client
        # behind the trusted proxy, distinct IPv4 clients have their own budgets (they used to share one);
        # a client-written address on the left of the header is not believed
        assert [session(f"203.0.113.{k}") for k in range(6)] == [200] * 6
        assert [session(f"198.51.100.{k}, 203.0.113.9") for k in range(6)] == [200] * 5 + [429]
    with ServerProcess(built, tmp_path / "r2.sqlite", extra_args=("--sessions-per-hour", "5")) as srv:
        # no trusted proxy: X-Forwarded-For is the client's own claim and ignored
        codes = [httpx.post(srv.url + "/api/session", json={"consent": True},
                            headers={"X-Forwarded-For": f"2001:db8:{k}::1"}).status_code for k in range(7)]
        assert codes == [200] * 5 + [429] * 2


def test_client_address_and_rate_key():
    proxies = parse_networks(["10.0.0.0/8", "::1"])
    assert client_address("10.1.2.3", "203.0.113.5, 10.9.9.9", proxies) == "203.0.113.5"
    assert client_address("10.1.2.3", "evil, 203.0.113.5", proxies) == "203.0.113.5"
    assert client_address("10.1.2.3", "203.0.113.5, garbage", proxies) == "10.1.2.3"
    assert client_address("192.0.2.1", "203.0.113.5", proxies) == "192.0.2.1"  # peer not a proxy
    assert client_address("::ffff:192.0.2.1", None, ()) == "192.0.2.1"
    assert rate_key("2001:db8:1:2:3:4:5:6") == rate_key("2001:db8:1:2::9") == "2001:db8:1:2::/64"
    assert rate_key("192.0.2.1") == "192.0.2.1" and rate_key("::ffff:192.0.2.1") == "192.0.2.1"


def test_limiter_never_resets_budgets_under_address_spraying():
    # 3 tokens, refilled at 5 a second; a full table is swept for refilled buckets at most every 0.5 s
    lim = PrefixLimiter({"session": (3, 0.6)}, max_keys=50, sweep_every_s=0.5)
    assert [lim.allow("session", "192.0.2.1") for _ in range(4)] == [True] * 3 + [False]
    # the old attack: enough fresh addresses to overflow the table, which used to clear every bucket
    sprayed = [lim.allow("session", f"2001:db8:{k:x}::1") for k in range(500)]
    assert len(lim.buckets) <= 51 and lim.allow("session", "192.0.2.1") is False  # still spent
    assert sprayed[:49] == [True] * 49 and sum(sprayed[49:]) <= 3  # newcomers beyond room share one bucket
    time.sleep(0.7)  # buckets refill at their rate; full ones are dropped to make room, nothing else
    assert lim.allow("session", "192.0.2.1") is True and lim.allow("session", "2001:db8:ffff::1") is True
    assert ("session", "2001:db8:ffff::/64") in lim.buckets  # the newcomer has its own bucket again


def test_host_header_is_checked_against_dns_rebinding(built, tmp_path, capsys):
    """As the speech server (tts.web_limits.HostCheck): a page of evil.example re-pointed at 127.0.0.1 reaches
    the server from a rater's browser as same-origin, and only its Host header tells it apart."""
    with ServerProcess(built, tmp_path / "r.sqlite", extra_args=("--allow-host", "rate.example")) as srv:
        def get(host: str) -> httpx.Response:
            return httpx.get(srv.url + "/healthz", headers={"host": host})

        for host in ("evil.example", "evil.example:8000", "127.0.0.1.nip.io", "localhost.evil.example", "10.1.2.3"):
            r = get(host)
            assert r.status_code == 421 and "--allow-host" in r.json()["detail"], (host, r.text)
            assert r.headers["x-content-type-options"] == "nosniff"  # the security headers on refusals too
        for host in ("localhost", "LOCALHOST:8000", "127.0.0.1", "[::1]:8000", "rate.example:8000"):
            assert get(host).status_code == 200, host
        # no session is made, no page served for the rebinding page
        r = httpx.post(srv.url + "/api/session", json={"consent": True}, headers={"host": "evil.example"})
        assert r.status_code == 421 and "set-cookie" not in r.headers
        assert httpx.get(srv.url + "/", headers={"host": "evil.example"}).status_code == 421
    assert cli_main(["serve", "--test", str(built), "--db", str(tmp_path / "x.sqlite"), "--allow-host", "a b"]) == 2
    assert "--allow-host 'a b' is not a host name" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 33, 7: smaller ones
@pytest.mark.parametrize("name", ["results.sqlite3", "answers.data"])
def test_rebuild_guard_sees_results_by_content(tmp_path, name, capsys):
    test_dir = _build(tmp_path, "t")
    with TestClient(create_app(test_dir, test_dir / name, admin_token=ADMIN)) as c:
        _session(c)
    dirs = {n: str(tmp_path / "sys-t" / n) for n in ("gt", "nar")}
    rebuild = ["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir)]
    assert build_main(rebuild) == 2 and name in capsys.readouterr().err
    assert build_main(rebuild + ["--force"]) == 0 and not (test_dir / name).exists()
    (archive,) = (test_dir / "archive").iterdir()
    assert (archive / name).is_file()


def test_another_apps_sqlite_file_is_refused_untouched(built, tmp_path, capsys):
    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users(name) VALUES ('alice')")
    con.commit()
    con.close()
    before = other.read_bytes()
    os.environ["LISTENING_ADMIN_TOKEN"] = ADMIN
    try:
        assert cli_main(["serve", "--test", str(built), "--db", str(other), "--port", str(free_port())]) == 2
    finally:
        del os.environ["LISTENING_ADMIN_TOKEN"]
    assert "another application's database" in capsys.readouterr().err
    assert other.read_bytes() == before


def test_weak_admin_token_refused_at_start(built, tmp_path, capsys):
    os.environ["LISTENING_ADMIN_TOKEN"] = "a" * 22  # 22 characters, the old "128 bits", none of them random
    try:
        assert cli_main(["serve", "--test", str(built), "--db", str(tmp_path / "r.sqlite"), "--port", str(free_port())]) == 2
    finally:
        del os.environ["LISTENING_ADMIN_TOKEN"]
    assert "too weak" in capsys.readouterr().err


def test_audio_headers_identical_and_not_cached(built, tmp_path):
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False)) as c:
        rid = _session(c)
        kinds = set()
        for it, _ in _all_pages(c, _test(built), rid)[:6]:
            for a in it["audio"]:
                r = c.get(a)
                keys = frozenset(k.lower() for k in r.headers)
                assert "etag" not in keys and "last-modified" not in keys
                assert r.headers["cache-control"] == "no-store"  # cached clips stranded honest raters
                kinds.add(keys)
                h = c.head(a)
                assert h.status_code == 200 and h.content == b"" and h.headers["content-length"] == str(len(r.content))
        assert len(kinds) == 1


def test_security_headers_and_cookie_flags(built, tmp_path):
    with TestClient(create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN)) as c:
        r = c.post("/api/session", json={"consent": True})
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie and "secure" not in cookie  # plain http: no Secure
        clip = c.get("/api/next").json()["item"]["audio"][0]
        for path in ["/", "/rate", "/api/next", clip, "/nothing-here", "/favicon.ico", "/done"]:
            r = c.get(path, follow_redirects=False)
            for k, v in SECURITY_HEADERS.items():
                assert r.headers.get(k) == v, (path, k)
    for secure_cookies, base in [(True, "http://testserver"), (False, "https://testserver")]:
        app = create_app(built, tmp_path / "r.sqlite", admin_token=ADMIN, secure_cookies=secure_cookies)
        with TestClient(app, base_url=base) as c:
            assert "secure" in c.post("/api/session", json={"consent": True}).headers["set-cookie"].lower()


def test_scripted_ballot_stuffing_is_limited(built, tmp_path):
    db = tmp_path / "stuff.sqlite"
    with ServerProcess(built, db, extra_args=("--sessions-per-hour", "5")) as srv:
        runs = [run_rater(srv.url, "no_wait") for _ in range(7)]
    assert [r.session_status for r in runs] == [200] * 5 + [429, 429]
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM answers").fetchone()[0] == 0
    con.close()


def test_a_rater_over_the_request_budget_is_refused_and_stops(built, tmp_path):
    """A scripted rater whose address runs out of requests (429 at /api/next) records the refusal and stops."""
    args = ("--requests-per-minute", "4", "--trusted-proxy", "127.0.0.1")
    xff = {"X-Forwarded-For": "203.0.113.9"}  # an address of its own (the server's start-up probes are loopback's)
    with ServerProcess(built, tmp_path / "budget.sqlite", extra_args=args) as srv:
        for _ in range(3):  # it spends 3 of its 4 requests: the session is the 4th, /api/next the 5th
            assert httpx.get(srv.url + "/", headers=xff).status_code == 200
        run = run_rater(srv.url, "no_wait", forwarded_for=xff["X-Forwarded-For"])
    assert run.session_status == 200 and not run.done and run.error is None
    assert run.refused.get(429, 0) >= 1, run


# ---------------------------------------------------------------- issue 33, 5: statistics count raters
def _answers_for(test: dict, raters: list[str], pick, score=None) -> list[dict]:
    """Answers of raters who pass every check, choosing per real A/B page by `pick(rater, systems)`."""
    items = {it["id"]: it for it in test["items"]}
    rows, t = [], 0.0
    for rid in raters:
        for item_id, flip in layout_for(test, rid):
            it = items[item_id]
            t += 10.0
            row = {"rater_id": rid, "item_id": item_id, "created_at": t, "score": None, "preferred": None}
            if it["type"] == "ab":
                left, right = (it["systems"][1], it["systems"][0]) if flip else tuple(it["systems"])
                want = it["expected"] if it.get("attention") else pick(rid, it["systems"])
                row.update(preferred=want, choice="A" if want == left else "B" if want == right else "none")
            else:
                row["score"] = it["expected"] if it.get("attention") else score(rid, it)
            rows.append(row)
    return rows


def test_four_raters_cannot_make_a_result_significant(tmp_path):
    """The issue's 4 bots gave p = 1.2e-7 counted per answer; counted per rater, 4 raters of 4 cannot
    reach p < 0.05. The report shows both views, and raters decide."""
    test_dir = _build(tmp_path, "t", systems={"gt": 440.0, "nar": 550.0, "ar": 660.0})
    test = _test(test_dir)
    bots = [f"{k:032x}" for k in range(4)]
    rows = _answers_for(test, bots, pick=lambda rid, systems: "nar" if "nar" in systems else systems[0],
                        score=lambda rid, it: 5 if it["system"] == "nar" else 1 + int(rid[-1]) % 2)
    # the flags are not what this test is about: each build draws a new secret, hence new side swaps, and in a few
    # builds in a hundred a bot that always picks nar lands on the same side in >= 90 % of its A/B pages ("constant
    # side": not counted, which once failed this test in a full run); counted all, the statistics are the point
    res = analyse(test, rows, bootstrap=500, exclude_flagged=False)
    assert res["n_raters_counted"] == 4
    (pair,) = [p for p in res["ab"] if {p["system_a"], p["system_b"]} == {"gt", "nar"}]
    assert pair["p_value_sign_test"] < 1e-3  # 16 answers read as independent
    assert pair["raters_for_b"] == 4 and pair["p_value_raters"] == pytest.approx(0.125)
    mos = {m["system"]: m for m in res["mos"]}
    assert mos["nar"]["mean"] == 5 and mos["nar"]["raters"] == 4 and mos["nar"]["n"] == 16
    md = to_markdown(res)
    assert "p (raters)" in md and "p (answers)" in md and "0.125" in md


def test_report_flags_constant_and_length_following_raters(tmp_path):
    # two systems whose speech is the shorter on alternate sentences (0.3 s vs 0.45 s tones, plus 40 ms a sentence)
    ids = [f"s{k}" for k in range(12)]
    dirs = {}
    for name, freq, first in [("gt", 440.0, 0.3), ("slow", 550.0, 0.45)]:
        d = tmp_path / "in" / name
        d.mkdir(parents=True)
        for k, sid in enumerate(ids):
            seconds = (first if k % 2 == 0 else 0.75 - first) + 0.04 * k
            t = np.arange(int(seconds * 16000)) / 16000
            sf.write(str(d / f"{sid}.wav"), 0.2 * np.sin(2 * np.pi * freq * t), 16000)
        dirs[name] = d
    out = tmp_path / "t"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"slow={dirs['slow']}", "--out", str(out), "--mos",
                       "--padding-s", "0.05"]) == 0
    test = _test(out)
    items = {it["id"]: it for it in test["items"]}
    speech = {it["id"]: {test["audio"][t]["system"]: test["audio"][t]["speech_s"] for t in it["audio"]}
              for it in test["items"] if it["type"] == "ab" and not it.get("attention")}
    raters = [f"{k:032x}" for k in range(4)]
    rows = _answers_for(test, raters[:1], pick=lambda rid, s: "gt",  # steady taste for a system: not flagged
                        score=lambda rid, it: (4 if it["system"] == "gt" else 2) + int(it["id"][:2], 16) % 2)
    shorter_rows = []  # a rater choosing the shorter speech, whichever system that is
    for r in _answers_for(test, raters[1:2], pick=lambda rid, s: "gt", score=lambda rid, it: 3 + int(it["id"][:2], 16) % 2):
        it = items[r["item_id"]]
        if it["type"] == "ab" and not it.get("attention"):
            want = min(speech[r["item_id"]], key=speech[r["item_id"]].get)
            flip = dict(layout_for(test, r["rater_id"]))[r["item_id"]]
            left = it["systems"][1] if flip else it["systems"][0]
            r["preferred"], r["choice"] = want, "A" if want == left else "B"
        shorter_rows.append(r)
    rows += shorter_rows
    # a rater who always presses A (whatever system is there) and gives 3 to everything
    for r in _answers_for(test, raters[2:3], pick=lambda rid, s: s[0], score=lambda rid, it: 3):
        it = items[r["item_id"]]
        if it["type"] == "ab" and not it.get("attention"):
            flip = dict(layout_for(test, r["rater_id"]))[r["item_id"]]
            r["choice"], r["preferred"] = "A", (it["systems"][1] if flip else it["systems"][0])
        rows.append(r)
    # a MOS script scoring by clip length (longer clip, higher score)
    durations = [a["duration_s"] for a in test["audio"].values() if a["system"]]
    lo, hi = min(durations), max(durations)
    rows += _answers_for(test, raters[3:4], pick=lambda rid, s: s[hash(s[0]) % 2],
                         score=lambda rid, it: 1 + round(4 * (test["audio"][it["audio"][0]]["duration_s"] - lo) / (hi - lo)))
    res = analyse(test, rows, max_fast_share=1.0, bootstrap=100)
    assert raters[0] not in res["flagged"]
    assert res["flagged"][raters[1]] == ["follows length"]
    assert set(res["flagged"][raters[2]]) >= {"constant side", "constant score"}
    assert "follows length" in res["flagged"][raters[3]]
    assert res["n_raters_counted"] == 1 and "flagged as scripted (excluded): 3" in to_markdown(res)
    assert analyse(test, rows, max_fast_share=1.0, exclude_flagged=False, bootstrap=100)["n_raters_counted"] == 4


def test_report_prints_tiny_p_and_chart_legend(tmp_path):
    test = _test(_build(tmp_path, "t"))
    rows = _answers_for(test, [f"{k:032x}" for k in range(40)], pick=lambda rid, s: "gt",
                        score=lambda rid, it: 5 if it["system"] == "gt" else 4 - int(rid[-1], 16) % 3)
    res = analyse(test, rows, bootstrap=200)
    (pair,) = res["ab"]
    assert pair["raters_for_a"] == 40 and pair["p_value_raters"] == pytest.approx(2 * 0.5**40) and pair["p_value_raters"] > 0
    assert format_p(pair["p_value_raters"]) == "1.82e-12" and format_p(0.0312) == "0.0312"  # p used to print as 0
    (gt,) = [m for m in res["mos"] if m["system"] == "gt"]
    assert gt["ci95"][1] == 5.0 and gt["ci95_cluster"] == [5.0, 5.0]  # clipped to the scale
    labels = plot(res, tmp_path / "c.png")
    assert labels == ["first system of the pair preferred", "no preference", "second system of the pair preferred"]

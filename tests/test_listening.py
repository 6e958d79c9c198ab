"""Listening-test app: statistics (per answer and per rater), loudness, build normalisation, layout, API (real
SQLite file), report, load and kill/restart on a real uvicorn. Attacks: test_listening_attacks.py."""

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
from tts.listening.app import create_app
from tts.listening.clips import SILENCE_FLOOR_DB, proof, trim_silence
from tts.listening.layout import layout_for
from tts.listening.loudness import bs1770_lkfs, k_weighting, rms_db
from tts.listening.report import write_report
from tts.listening.scripted import run_many, run_rater
from tts.listening.stats import (cluster_bootstrap_ratio, mean_ci_t, paired_t, rater_sign_test, sign_test, spearman,
                                 wilson_interval)
from listening_server import ADMIN, ServerProcess, honest_answer, make_tone_systems

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


def test_rater_sign_test_counts_each_rater_once():
    # 4 raters each answered 156 pages for system a: 624 answers, but 4 raters
    r = rater_sign_test([(156, 0)] * 4)
    assert (r.for_a, r.for_b, r.even, r.p_value) == (4, 0, 0, pytest.approx(2 / 16))
    assert sign_test(624, 0) < 1e-180  # what counting answers said
    r = rater_sign_test([(3, 1), (0, 2), (2, 2), (0, 0), (5, 4)])
    assert (r.for_a, r.for_b, r.even) == (2, 1, 2) and r.p_value == pytest.approx(1.0)


def test_cluster_bootstrap_resamples_raters():
    # identical raters: every resample gives the same ratio
    assert cluster_bootstrap_ratio([3, 3, 3], [4, 4, 4]) == pytest.approx((0.75, 0.75))
    assert all(math.isnan(v) for v in cluster_bootstrap_ratio([3], [4]))
    # one rater with 100 answers for a, nine with 1 answer for b each: the answer share is 100/109 = 0.92 but
    # the raters disagree, so the interval over raters must be wide (it reaches below 0.5)
    lo, hi = cluster_bootstrap_ratio([100] + [0] * 9, [100] + [1] * 9, n_boot=4000)
    assert lo < 0.5 < 0.9 < hi <= 1.0
    assert wilson_interval(100, 109)[0] > 0.85  # the per-answer interval claims certainty


def test_paired_t_and_spearman_match_scipy():
    from scipy import stats

    d = [0.5, 1.0, -0.25, 0.75, 1.5, 0.0]
    r = paired_t(d)
    assert r.p_value == pytest.approx(stats.ttest_1samp(d, 0).pvalue) and r.n == 6
    assert r.low < r.mean < r.high and r.mean == pytest.approx(sum(d) / 6)
    assert spearman([1, 2, 3, 4], [2, 4, 6, 9]) == pytest.approx(1.0) and math.isnan(spearman([1, 2, 3], [5, 5, 5]))


# ---------------------------------------------------------------- loudness (ITU-R BS.1770-4)
def test_k_weighting_matches_the_standards_48k_table():
    (b, a), (hb, ha) = k_weighting(48000)
    assert b == pytest.approx([1.53512485958697, -2.69169618940638, 1.19839281085285], abs=1e-8)
    assert a == pytest.approx([1.0, -1.69065929318241, 0.73248077421585], abs=1e-8)
    assert hb == pytest.approx([1.0, -2.0, 1.0]) and ha == pytest.approx([1.0, -1.99004745483398, 0.99007225036621], abs=1e-8)


@pytest.mark.parametrize("sr", [48000, 22050, 16000])
def test_bs1770_reference_tone(sr):
    # BS.1770-4: a 0 dBFS 997 Hz sine in one channel reads -3.01 LKFS; 20 dB lower reads -23.01
    t = np.arange(5 * sr) / sr
    tone = np.sin(2 * np.pi * 997 * t)
    assert bs1770_lkfs(tone, sr) == pytest.approx(-3.01, abs=0.05)
    assert bs1770_lkfs(0.1 * tone, sr) == pytest.approx(-23.01, abs=0.05)
    # gating: 5 s of silence after the tone hardly matters (only the blocks across its end pass the gates),
    # where plain RMS drops by 3 dB
    padded = np.concatenate([0.1 * tone, np.zeros(5 * sr)])
    assert bs1770_lkfs(padded, sr) == pytest.approx(-23.01, abs=0.2)
    assert rms_db(padded, sr) == pytest.approx(-26.02, abs=0.02)


# ---------------------------------------------------------------- build
@pytest.fixture()
def test_dir(tmp_path):
    # short clips and padding: the server makes every answer wait as long as the page's audio lasts
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 550.0, "ar": 660.0}, ["a", "b", "c"], seconds=0.3)
    sf.write(str(dirs["nar"] / "extra.wav"), np.zeros(800), 16000)  # not common: must be ignored
    out = tmp_path / "test"
    args = ["build", "--systems"] + [f"{k}={v}" for k, v in dirs.items()] + ["--out", str(out), "--mos", "--seed", "7",
                                                                            "--padding-s", "0.05"]
    assert build_main(args) == 0
    return out


def _onset(x: np.ndarray, sr: int) -> int:
    """First sample of the first 10 ms frame above the silence floor."""
    hop = int(0.01 * sr)
    frames = x[: len(x) // hop * hop].reshape(-1, hop)
    return int(np.flatnonzero(10 * np.log10(np.mean(frames**2, axis=1) + 1e-20) > SILENCE_FLOOR_DB)[0]) * hop


def test_build_normalises_rate_silence_loudness_and_length(tmp_path):
    """Inputs that differ the way the issue's systems did: sample rate (16 kHz vs 22.05 kHz), leading silence
    (177 zero samples vs 0.4 s), level (12 dB apart), length. Every clip comes out alike."""
    ids = ["s1", "s2", "s3"]
    dirs = {}
    for name, sr, lead, amp, freq in [("gt", 22050, 0.4, 0.5, 220.0), ("low", 16000, 177, 0.125, 330.0)]:
        d = tmp_path / "in" / name
        d.mkdir(parents=True)
        for k, sid in enumerate(ids):
            n_lead = lead if isinstance(lead, int) else int(lead * sr)
            t = np.arange(int((0.8 + 0.2 * k + (0.1 if name == "low" else 0)) * sr)) / sr
            voiced = amp * np.sin(2 * np.pi * freq * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
            sf.write(str(d / f"{sid}.wav"), np.concatenate([np.zeros(n_lead), voiced, np.zeros(int(0.3 * sr))]), sr)
        dirs[name] = d
    out = tmp_path / "t"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"low={dirs['low']}", "--out", str(out),
                       "--attention-checks", "0"]) == 0
    test = json.loads((out / "test.json").read_text())
    norm = test["normalisation"]
    assert norm["sample_rate"] == 16000 and norm["input_sample_rates"] == {"gt": [22050], "low": [16000]}
    onsets, levels, lengths = {}, [], {}
    for tok, a in test["audio"].items():
        x, sr = sf.read(str(out / test["audio_dir"] / a["file"]))
        assert sr == 16000
        onsets.setdefault(a["system"], set()).add(_onset(x, sr))
        lengths.setdefault(a["sentence"], set()).add(len(x))
        levels.append(bs1770_lkfs(trim_silence(x, sr), sr))  # the speech's loudness, as normalised
    # one lead for both systems (the trimmed speech starts within a frame of the 0.25 s padding)
    assert all(abs(o - 4000) <= 160 for os_ in onsets.values() for o in os_), onsets
    assert all(len(v) == 1 for v in lengths.values())  # one length per sentence: size names no system
    assert max(levels) - min(levels) < 0.1  # the inputs differed by 12 dB
    # the common target: -23 LKFS, lowered for every clip alike so that none needs peak limiting at -1 dBFS
    assert -29 <= norm["applied_target_db"] <= -23 and norm["peak_limited_clips"] == 0
    assert abs(np.mean(levels) - norm["applied_target_db"]) < 0.1


def test_build_layout_and_checks(test_dir):
    test = json.loads((test_dir / "test.json").read_text())
    assert test["seed"] == 7 and test["sentences"] == ["a", "b", "c"] and test["ground_truth"] == ["gt"]
    kinds = [("att-" if it.get("attention") else "") + it["type"] for it in test["items"]]
    assert kinds.count("ab") == 3 * 3 and kinds.count("mos") == 3 * 3
    assert kinds.count("att-ab") == 3 and kinds.count("att-mos") == 20  # four spoken prompts per score
    att = [it for it in test["items"] if it.get("attention")]
    assert sorted(it["expected"] for it in att if it["type"] == "mos") == [s for s in range(1, 6) for _ in range(4)]
    assert all(it["audio"] == [] for it in att if it["type"] == "ab")  # drawn per rater from real pairs
    for tok, a in test["audio"].items():
        assert a["file"] == f"{tok}.wav" and (test_dir / test["audio_dir"] / a["file"]).is_file()
        assert len(tok) == 16 and set(tok) <= set("0123456789abcdef")  # opaque: no system/sentence names


def test_build_rejects_bad_input(tmp_path, capsys):
    dirs = make_tone_systems(tmp_path, {"x": 300.0}, ["a"])
    assert build_main(["build", "--systems", f"x={dirs['x']}", "--out", str(tmp_path / "o")]) == 2
    assert build_main(["build", "--systems", f"x={dirs['x']}", "y=/nonexistent", "--out", str(tmp_path / "o")]) == 2
    assert build_main(["build", "--systems", "bad", "--out", str(tmp_path / "o")]) == 2


def test_layout_randomised_per_rater_with_checks_spread(test_dir):
    test = json.loads((test_dir / "test.json").read_text())
    lays = [layout_for(test, f"{i:032x}") for i in range(40)]
    assert lays[0] == layout_for(test, f"{0:032x}")  # deterministic: reload shows the same
    assert len({tuple(i for i, _ in lay) for lay in lays}) > 30  # order varies
    items = {it["id"]: it for it in test["items"]}
    flips = {f for lay in lays for i, f in lay if items[i]["type"] == "ab"}
    assert flips == {True, False}  # side varies
    check_spots = set()
    for lay in lays:  # A/B block (9 + 3 checks) first, then MOS (9 + 3 of the 20 prompts, distinct scores)
        kinds = [items[i]["type"] for i, _ in lay]
        assert kinds == ["ab"] * 12 + ["mos"] * 12
        mos_checks = [items[i]["expected"] for i, _ in lay if items[i].get("attention") and items[i]["type"] == "mos"]
        assert len(set(mos_checks)) == 3
        ab_spots = [p for p, (i, _) in enumerate(lay[:12]) if items[i].get("attention")]
        assert len(ab_spots) == 3 and ab_spots[-1] >= 6  # one check per third: the last is in the last third
        check_spots.update(ab_spots)
    assert len(check_spots) >= 8  # mixed among ordinary pages, not at fixed places


# ---------------------------------------------------------------- API on a real SQLite file
@pytest.fixture()
def client(test_dir, tmp_path):
    # API semantics; the listening evidence (425) has its own tests in test_listening_attacks.py
    app = create_app(test_dir, tmp_path / "r.sqlite", admin_token=ADMIN, check_listening=False)
    with TestClient(app) as c:
        yield c


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


def test_full_rater_flow_duplicates_order_and_report(client, test_dir, tmp_path):
    test = json.loads((test_dir / "test.json").read_text())
    items = {it["id"]: it for it in test["items"]}
    rid = _start(client)
    page = client.get("/rate").text
    assert "disabled" in page and "ended" in page and "Page 1 of 24" in page
    lay = layout_for(test, rid)
    n = 0
    while True:
        nxt = client.get("/api/next").json()
        if nxt["done"]:
            break
        assert nxt["answered"] == n and nxt["position"] == n + 1 and nxt["item"]["item_id"] == lay[n][0]
        it = nxt["item"]
        assert set(it) == {"item_id", "type", "audio"}  # checks and real items: the same fields
        for a in it["audio"]:
            r = client.get(a)
            assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
        if n + 1 < len(lay):  # the next page cannot be answered before this one: no skipping a check
            later = lay[n + 1][0]
            body_later = {"item_id": later, **({"choice": "A"} if items[later]["type"] == "ab" else {"score": 3})}
            assert client.post("/api/answer", json=body_later).status_code == 409
        body = {"item_id": it["item_id"], **honest_answer(test, rid, it)}
        r = client.post("/api/answer", json=body)
        assert r.status_code == 201 and r.json()["status"] == "created"
        r = client.post("/api/answer", json=body)  # network retry: idempotent
        assert r.status_code == 200 and r.json()["status"] == "duplicate"
        if it["type"] == "ab":
            other = "none" if body["choice"] != "none" else "A"
            r = client.post("/api/answer", json={**body, "choice": other})
            assert r.status_code == 409 and "first answer stands" in r.json()["detail"]
        n += 1
    assert n == 24
    assert client.get("/rate", follow_redirects=False).headers["location"] == "/done"
    assert "completion code" in client.get("/done").text
    con = sqlite3.connect(tmp_path / "r.sqlite")
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT item_id) FROM answers").fetchone() == (24, 24)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
    # answered at once (check_listening off): keep the timing rule out of this test
    res = write_report(test_dir, tmp_path / "r.sqlite", tmp_path / "rep", max_fast_share=1.0, exclude_flagged=False)
    assert res["excluded_raters"] == [] and res["n_answers"] == 24 and res["n_answers_kept"] == 18
    assert res["raters"][rid]["checks"] == {"ab": {"in_layout": 3, "answered": 3, "failed": 0},
                                            "mos": {"in_layout": 3, "answered": 3, "failed": 0}}
    assert sum(p["n"] for p in res["ab"]) == 9 and all(m["mean"] == 4 and m["n"] == 3 for m in res["mos"])
    assert res["raters"][rid]["flags"] == ["constant side", "constant score"]  # "A" and 4 throughout
    # "A" was chosen every time: per pair, A-side wins follow the rater's flips exactly
    flips = dict(lay)
    for p in res["ab"]:
        fl = [flips[i] for i, it in items.items() if it["type"] == "ab" and it["systems"] == [p["system_a"], p["system_b"]]
              and not it.get("attention")]
        assert p["wins_a"] == fl.count(False) and p["wins_b"] == fl.count(True) and p["raters"] == 1
    assert {"report.md", "report.json", "report.png"} <= {f.name for f in (tmp_path / "rep").iterdir()}
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Audio normalised on build" in md and "loudness: bs1770" in md and "p (raters)" in md
    # with the flags applied (the default), the constant rater counts nowhere
    assert write_report(test_dir, tmp_path / "r.sqlite", tmp_path / "rep2", max_fast_share=1.0)["n_raters_counted"] == 0


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
    ({"item_id": "AB", "choice": "A", "proofs": ["xyz"]}, 422),
    ({"item_id": "AB", "choice": "A", "proofs": ["00000000"] * 3}, 422),
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
    _start(client)
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


@pytest.mark.parametrize("weak", ["short", "a" * 22, "a" * 64, "abcd" * 8, "0123456789abcdef" * 2,
                                  "abcdefghijklmnopqrstuvwxyz0123", "password1234567890123"])
def test_weak_admin_tokens_refused(test_dir, tmp_path, weak):
    with pytest.raises(ValueError, match="too weak"):
        create_app(test_dir, tmp_path / "x.sqlite", admin_token=weak)


def test_admin_disabled_without_token(test_dir, tmp_path):
    with TestClient(create_app(test_dir, tmp_path / "x.sqlite", admin_token=None)) as c:
        assert c.get("/admin/results", headers={"Authorization": "Bearer "}).status_code == 403
        assert c.get("/admin/results", headers={"Authorization": "Bearer None"}).status_code == 403


# ---------------------------------------------------------------- robustness on loopback
LOOSE_LIMITS = ("--sessions-per-hour", "1000", "--requests-per-minute", "100000")


def test_loadtest_honest_raters(test_dir, tmp_path):
    """20 attentive scripted raters at once (real downloads, proofs, real-time listening) on a real uvicorn:
    every answer stored once, every rater counted by the report."""
    db = tmp_path / "load.sqlite"
    test = json.loads((test_dir / "test.json").read_text())

    def answer(page, rid):  # each rater its own tastes: no constant side, no constant score
        k = len(page["item_id"]) + int(page["item_id"][:4], 16)
        return honest_answer(test, rid, page, ab_choice="AB"[k % 2], score=1 + k % 5)

    # from one loopback address: lift the per-client limits meant for the public
    with ServerProcess(test_dir, db, extra_args=LOOSE_LIMITS) as srv:
        t0 = time.monotonic()
        runs = run_many(srv.url, "honest", 20, concurrency=20, deadline_s=120, answer=answer)
        wall = time.monotonic() - t0
    print(f"loadtest: 20 raters x 24 pages in {wall:.1f} s")
    assert len(runs) == 20 and all(r.done and r.answered == 24 and not r.refused and r.error is None for r in runs)
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*), COUNT(DISTINCT rater_id || item_id) FROM answers").fetchone() == (480, 480)
    con.close()
    res = write_report(test_dir, db, tmp_path / "rep", bootstrap=200)
    assert res["n_raters_counted"] == 20 and res["excluded_raters"] == [] and res["n_answers_kept"] == 20 * 18
    assert wall < 90  # each rater listens ~14 s of audio; the rest is the server's overhead on 2 shared cores


def listen_and_answer(c: httpx.Client, test: dict, rid: str, it: dict, **choice) -> int:
    """What the server asks of a rater: download every clip, prove it, take as long as the page's audio."""
    proofs, seconds = [], 0.0
    for a in it["audio"]:
        r = c.get(a)
        assert r.status_code == 200
        proofs.append(proof(r.content))
        seconds += sf.info(io.BytesIO(r.content)).duration
    time.sleep(0.9 * seconds + 0.02)
    body = {"item_id": it["item_id"], "proofs": proofs, **(choice or honest_answer(test, rid, it))}
    return c.post("/api/answer", json=body).status_code


def test_serve_prints_its_url(test_dir, tmp_path):
    """A newcomer sees where the test is served (issue 32 item 8)."""
    srv = ServerProcess(test_dir, tmp_path / "url.sqlite").start()
    srv.stop()
    out = srv.proc.stdout.read().decode(errors="replace")
    assert f"serving the listening test at http://127.0.0.1:{srv.port}/" in out, out


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


def test_scripted_raters_refuse_non_loopback():
    with pytest.raises(ValueError):
        run_rater("http://example.com:80", "honest")
    with pytest.raises(ValueError):
        run_rater("http://127.0.0.1:9", "no-such-strategy")


def test_survives_sigkill_and_rater_resumes(test_dir, tmp_path):
    db = tmp_path / "kill.sqlite"
    test = json.loads((test_dir / "test.json").read_text())
    srv = ServerProcess(test_dir, db).start()
    try:
        c = httpx.Client(base_url=srv.url, timeout=10)
        rid = c.post("/api/session", json={"consent": True}).json()["rater_id"]
        answered = []
        for _ in range(5):
            it = c.get("/api/next").json()["item"]
            assert listen_and_answer(c, test, rid, it) == 201
            answered.append(it)
        srv.kill()  # SIGKILL: no shutdown handlers, no checkpoint
        with pytest.raises(httpx.HTTPError):
            c.get("/api/next")
        srv.start()
        nxt = c.get("/api/next").json()  # same cookie: resumes at item 6
        assert nxt["answered"] == 5 and nxt["position"] == 6 and nxt["item"]["item_id"] not in [a["item_id"] for a in answered]
        r = httpx.get(f"{srv.url}/admin/results", headers=srv.admin_headers()).json()
        assert sorted(a["item_id"] for a in r["answers"]) == sorted(a["item_id"] for a in answered)
        last = answered[-1]
        body = {"item_id": last["item_id"], **honest_answer(test, rid, last)}
        assert c.post("/api/answer", json=body).json()["status"] == "duplicate"  # pre-kill answer still there
        # the restarted server renders the same bytes for the same clip: proofs survive restarts
        it = nxt["item"]
        assert listen_and_answer(c, test, rid, it) == 201
        c.close()
    finally:
        srv.stop()


def test_sigkill_under_load_loses_no_acknowledged_answer(test_dir, tmp_path):
    """Kill the server while 10 raters are posting: every answer acknowledged (201) before the kill is
    stored, the file passes integrity_check, and every rater resumes where the server says."""
    import threading

    db = tmp_path / "load-kill.sqlite"
    test = json.loads((test_dir / "test.json").read_text())
    srv = ServerProcess(test_dir, db, extra_args=LOOSE_LIMITS).start()
    acked: dict[str, list[str]] = {}
    lock = threading.Lock()

    def rater(k):
        with httpx.Client(base_url=srv.url, timeout=5) as c:
            rid = c.post("/api/session", json={"consent": True}).json()["rater_id"]
            with lock:
                acked[rid] = []
            try:
                while True:
                    nxt = c.get("/api/next").json()
                    if nxt["done"]:
                        return
                    it = nxt["item"]
                    if listen_and_answer(c, test, rid, it) == 201:
                        with lock:
                            acked[rid].append(it["item_id"])
            except httpx.HTTPError:
                return  # server gone

    threads = [threading.Thread(target=rater, args=(k,), daemon=True) for k in range(10)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while sum(map(len, acked.values())) < 40 and time.monotonic() < deadline:
            time.sleep(0.02)
        srv.kill()
        for t in threads:
            t.join(10)
        n_acked = sum(map(len, acked.values()))
        assert 0 < n_acked < 10 * 24  # killed mid-test
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {(r, i) for r, i in con.execute("SELECT rater_id, item_id FROM answers")}
        con.close()
        want = {(r, i) for r, items in acked.items() for i in items}
        assert want <= stored and len(stored - want) <= 10  # at most one in-flight answer per rater
        srv.start()
        for rid in acked:
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

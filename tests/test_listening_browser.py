"""A real Chromium (Debian's, driven by Playwright) completes a small listening test as a rater, at desktop and
phone size (390x844): layout of the choices, playback state, load errors, resume and completion code; honest
raters who lose their cookie or answer from a second tab are not stuck or misled (issue 33)."""

import json
import re
import shutil
from contextlib import contextmanager
import tempfile

import pytest

from recipes.listening_test import main as build_main
from tts.listening.app import completion_code
from tts.listening.layout import clip_id, layout_for
from tts.listening.report import write_report
from listening_server import ServerProcess, honest_answer, make_tone_systems

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed: run scripts/setup_browser.sh")


VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--autoplay-policy=no-user-gesture-required"]


@contextmanager
def browser(sync_api, tmp_path, viewport: dict):
    user_data = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(user_data, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                    viewport=viewport)
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.set_default_timeout(15000)
            yield ctx, page
        finally:
            ctx.close()


def boxes(page, selector: str) -> list[dict]:
    return page.eval_on_selector_all(selector, "els => els.map(e => { const r = e.getBoundingClientRect(); "
                                               "return {x: r.x, y: r.y, right: r.right, id: e.id}; })")


def assert_one_row_in_order(page, selector: str, ids: list[str], width: int) -> None:
    """The answer buttons sit on one row, left to right in the order given, inside the viewport."""
    bs = boxes(page, selector)
    assert [b["id"] for b in bs] == ids
    assert max(b["y"] for b in bs) - min(b["y"] for b in bs) < 2, bs  # one row: nothing wrapped
    assert all(p["right"] <= n["x"] + 1 for p, n in zip(bs, bs[1:])), bs  # left to right, no overlap
    assert bs[0]["x"] >= 0 and bs[-1]["right"] <= width, bs


@pytest.mark.parametrize("size", list(VIEWPORTS))
def test_browser_completes_test_and_report_matches(tmp_path, size):
    sync_api = pytest.importorskip("playwright.sync_api")
    viewport = VIEWPORTS[size]
    expect = sync_api.expect  # polls by selector: works under the page's CSP (no eval), unlike wait_for_function
    # 1.2 s clips: long enough to see the "playing" state and the clock move
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 660.0}, ["s1", "s2"], seconds=1.2)
    test_dir = tmp_path / "test"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir),
                       "--mos", "--seed", "3", "--attention-checks", "1", "--padding-s", "0.1",
                       "--title", "Voices & more"]) == 0
    test = json.loads((test_dir / "test.json").read_text())
    items = {it["id"]: it for it in test["items"]}
    db = tmp_path / "results.sqlite"
    with ServerProcess(test_dir, db) as srv, browser(sync_api, tmp_path, viewport) as (ctx, page):
        page.goto(srv.url + "/")
        assert page.inner_text("h1") == "Voices & more"  # the consent page's heading is the test's title
        assert page.locator("#start").is_disabled()
        page.check("#consent")
        page.click("#start")
        page.wait_for_url("**/rate")
        rater = next(c["value"] for c in ctx.cookies() if c["name"] == "rater")
        layout = layout_for(test, rater)
        expected_answers = {}
        first_mos = next(p for p, (i, _) in enumerate(layout, start=1) if items[i]["type"] == "mos")
        for pos, (item_id, flip) in enumerate(layout, start=1):
            it = items[item_id]
            page.wait_for_selector("#answers")
            text = page.inner_text("body")
            assert f"Page {pos} of {len(layout)}" in text
            assert ("Part 2: quality pages" in text) == (pos == first_mos)  # the switch is announced
            assert "attention" not in text.lower()  # checks look like every other page
            if it["type"] == "ab":
                assert_one_row_in_order(page, ".ans", ["ans-A", "ans-none", "ans-B"], viewport["width"])
            else:
                assert_one_row_in_order(page, ".ans", [f"ans-{k}" for k in range(1, 6)], viewport["width"])
            n = 2 if it["type"] == "ab" else 1
            html_ = page.content()
            for slot in range(n):  # the page fetches this rater's own clip ids and plays them from memory
                assert f"/audio/{clip_id(test, rater, item_id, slot)}" in html_
            buttons = page.locator(".ans")
            assert all(buttons.nth(k).is_disabled() for k in range(buttons.count()))
            for i in range(n):
                expect(page.locator(f"#play{i}")).to_be_enabled()  # the clip is in: fetched, proof computed
                page.click(f"#play{i}")
                if pos == 1:  # playback is visible while it runs: state, Pause button, running clock
                    expect(page.locator(f"#state{i}")).to_have_text("playing")
                    expect(page.locator(f"#play{i}")).to_have_text("Pause")
                    # the clock runs in tenths of a second (whole seconds hid short clips' progress)
                    expect(page.locator(f"#time{i}")).to_have_text(re.compile(r"^0:00\.[1-9] / 0:0\d\.\d$"))
                expect(page.locator(f"#state{i}")).to_have_text("played")
                if i < n - 1:  # one audio played is not enough
                    assert buttons.first.is_disabled()
            for k in range(buttons.count()):
                expect(buttons.nth(k)).to_be_enabled()
            if it["type"] == "ab" and it.get("attention"):  # choose the undamaged sample
                choice = honest_answer(test, rater, {"item_id": item_id, "type": "ab"})["choice"]
                expected_answers[item_id] = "attention-yes"
                with page.expect_navigation():
                    page.click(f"#ans-{choice}")
            elif it["type"] == "ab":
                choice = "A" if pos % 2 else "B"
                left, right = (it["systems"][1], it["systems"][0]) if flip else tuple(it["systems"])
                expected_answers[item_id] = {"A": left, "B": right}[choice]
                with page.expect_navigation():
                    page.click(f"#ans-{choice}")
            else:
                score = it["expected"] if it.get("attention") else 1 + pos % 5
                expected_answers[item_id] = score
                with page.expect_navigation():
                    page.click(f"#ans-{score}")
        page.wait_for_url("**/done")
        assert "Thank you" in page.content() and page.inner_text("#code") == completion_code(test, rater)
        # Reload after finishing stays done; a returning rater is not shown the consent form again.
        page.goto(srv.url + "/rate")
        page.wait_for_url("**/done")
        page.goto(srv.url + "/")
        page.wait_for_url("**/done")
        # Back does not land on the consent page (pages replace each other in the history).
        page.go_back()
        assert page.url.endswith("/done") and "I agree" not in page.content()
    res = write_report(test_dir, db, tmp_path / "report", exclude_flagged=False)  # too few pages to judge style
    assert res["n_raters"] == 1 and res["excluded_raters"] == [] and res["n_answers"] == len(layout)
    assert res["raters"][rater]["checks"] == {"ab": {"in_layout": 1, "answered": 1, "failed": 0},
                                              "mos": {"in_layout": 1, "answered": 1, "failed": 0}}
    wins = [v for k, v in expected_answers.items() if items[k]["type"] == "ab" and not items[k].get("attention")]
    (pair,) = res["ab"]
    assert (pair["system_a"], pair["system_b"]) == ("gt", "nar")
    assert pair["wins_a"] == wins.count("gt") and pair["wins_b"] == wins.count("nar") and pair["ties"] == 0
    for m in res["mos"]:
        vals = [v for k, v in expected_answers.items()
                if items[k]["type"] == "mos" and not items[k].get("attention") and items[k]["system"] == m["system"]]
        assert m["n"] == len(vals) and m["mean"] == pytest.approx(sum(vals) / len(vals), abs=1e-4)
    assert (tmp_path / "report" / "report.png").stat().st_size > 1000


def test_browser_shows_load_errors(tmp_path):
    """Audio that cannot be loaded: a message and a per-sample state, buttons stay disabled."""
    sync_api = pytest.importorskip("playwright.sync_api")
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 660.0}, ["s1"], seconds=0.5)
    test_dir = tmp_path / "test"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir),
                       "--attention-checks", "0", "--padding-s", "0.05"]) == 0
    test = json.loads((test_dir / "test.json").read_text())
    with ServerProcess(test_dir, tmp_path / "r.sqlite") as srv, browser(sync_api, tmp_path, VIEWPORTS["phone"]) as (ctx, page):
        shutil.rmtree(test_dir / test["audio_dir"])  # the files vanish under the server: 404s
        page.goto(srv.url + "/")
        page.check("#consent")
        page.click("#start")
        page.wait_for_url("**/rate")
        sync_api.expect(page.locator("#state0")).to_have_text("could not load")
        assert "could not be loaded" in page.inner_text("#msg")
        assert page.locator("#ans-A").is_disabled()


def _play_all_and_answer(sync_api, page, choice: str | None = None) -> None:
    """Play every sample of the current page to the end, then press `choice` (default: the first button)."""
    expect = sync_api.expect
    for i in range(page.locator("audio").count()):
        expect(page.locator(f"#play{i}")).to_be_enabled()
        page.click(f"#play{i}")
        expect(page.locator(f"#state{i}")).to_have_text("played")
    button = page.locator(f"#ans-{choice}") if choice else page.locator(".ans").first
    expect(button).to_be_enabled()
    button.click()


def test_rater_who_loses_the_cookie_or_reloads_is_not_stuck(tmp_path):
    """The issue's stranded rater: audio cached for an hour, so after a cookie loss the clips came from the
    browser's cache, the server saw no download and answered 425 "play every sample" while both showed
    "played". Now clips are no-store, per rater, and the evidence is the bytes the page itself received."""
    sync_api = pytest.importorskip("playwright.sync_api")
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 660.0}, ["s1", "s2", "s3"], seconds=0.4)
    test_dir = tmp_path / "test"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir),
                       "--attention-checks", "0", "--padding-s", "0.05"]) == 0
    db = tmp_path / "r.sqlite"
    with ServerProcess(test_dir, db) as srv, browser(sync_api, tmp_path, VIEWPORTS["desktop"]) as (ctx, page):
        page.goto(srv.url + "/")
        page.check("#consent")
        page.click("#start")
        page.wait_for_url("**/rate")
        with page.expect_navigation():
            _play_all_and_answer(sync_api, page)
        page.reload()  # a reload mid-test: the page fetches its clips again and works
        with page.expect_navigation():
            _play_all_and_answer(sync_api, page)
        assert "Page 3 of 3" in page.inner_text("body")
        ctx.clear_cookies()  # the cookie is gone; the browser's cache is not
        page.goto(srv.url + "/")
        page.check("#consent")
        page.click("#start")
        page.wait_for_url("**/rate")
        assert "Page 1 of 3" in page.inner_text("body")  # a new rater, with new clip ids
        with page.expect_navigation():
            _play_all_and_answer(sync_api, page)
        assert "Page 2 of 3" in page.inner_text("body") and page.inner_text("#msg") == ""
    import sqlite3

    con = sqlite3.connect(db)
    assert sorted(n for (n,) in con.execute("SELECT COUNT(*) FROM answers GROUP BY rater_id")) == [1, 2]
    con.close()


def test_a_different_answer_from_another_tab_is_not_shown_as_saved(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 660.0}, ["s1", "s2"], seconds=0.4)
    test_dir = tmp_path / "test"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir),
                       "--attention-checks", "0", "--padding-s", "0.05"]) == 0
    with ServerProcess(test_dir, tmp_path / "r.sqlite") as srv, browser(sync_api, tmp_path, VIEWPORTS["phone"]) as (ctx, one):
        one.goto(srv.url + "/")
        one.check("#consent")
        one.click("#start")
        one.wait_for_url("**/rate")
        two = ctx.new_page()
        two.goto(srv.url + "/rate")  # the same rater, the same page, in a second tab
        with one.expect_navigation():
            _play_all_and_answer(sync_api, one, "A")
        _play_all_and_answer(sync_api, two, "B")
        sync_api.expect(two.locator("#msg")).to_contain_text("not saved")
        assert "first answer stands" in two.inner_text("#msg") and two.url.endswith("/rate")
        with two.expect_navigation():
            two.click("#continue")
        assert "Page 2 of 2" in two.inner_text("body")

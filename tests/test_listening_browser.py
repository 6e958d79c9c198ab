"""A real Chromium (Debian's, driven by Playwright) completes a small listening test as a rater, at desktop and
phone size (390x844): layout of the choices, playback state, load errors, resume and completion code."""

import json
import re
import shutil
from contextlib import contextmanager
import tempfile

import pytest

from recipes.listening_test import main as build_main
from tts.listening.app import completion_code, layout_for
from tts.listening.report import write_report
from listening_server import ServerProcess, make_tone_systems

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
                       "--mos", "--seed", "3", "--attention-checks", "1"]) == 0
    test = json.loads((test_dir / "test.json").read_text())
    items = {it["id"]: it for it in test["items"]}
    db = tmp_path / "results.sqlite"
    with ServerProcess(test_dir, db) as srv, browser(sync_api, tmp_path, viewport) as (ctx, page):
        page.goto(srv.url + "/")
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
            srcs = page.eval_on_selector_all("audio", "els => els.map(e => e.getAttribute('src'))")
            toks = list(reversed(it["audio"])) if it["type"] == "ab" and flip else it["audio"]
            assert srcs == [f"/audio/{t}" for t in toks]  # the server's blind, per-rater layout
            buttons = page.locator(".ans")
            assert all(buttons.nth(k).is_disabled() for k in range(buttons.count()))
            for i in range(len(srcs)):
                page.click(f"#play{i}")
                if pos == 1:  # playback is visible while it runs: state, Pause button, running clock
                    expect(page.locator(f"#state{i}")).to_have_text("playing")
                    expect(page.locator(f"#play{i}")).to_have_text("Pause")
                    # the clock runs: at least a second elapsed, of a clip whose length depends on which
                    # item the rater's random layout put first (1 s fixture clips, longer attention checks)
                    expect(page.locator(f"#time{i}")).to_have_text(re.compile(r"^0:0[1-9] / 0:\d\d$"))
                expect(page.locator(f"#state{i}")).to_have_text("played")
                if i < len(srcs) - 1:  # one audio played is not enough
                    assert buttons.first.is_disabled()
            for k in range(buttons.count()):
                expect(buttons.nth(k)).to_be_enabled()
            if it["type"] == "ab" and it.get("attention"):  # choose the sample that asks to be chosen
                choice = "A" if toks[0] == it["audio"][0] else "B"
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
    res = write_report(test_dir, db, tmp_path / "report")
    assert res["n_raters"] == 1 and res["excluded_raters"] == [] and res["n_answers"] == len(layout)
    assert res["attention"][rater] == {"answered": 2, "failed": 0}  # one check in each part
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
                       "--attention-checks", "0"]) == 0
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

"""A real Chromium (Debian's, driven by Playwright) completes a small listening test as a rater."""

import json
import shutil
import tempfile

import pytest

from recipes.listening_test import main as build_main
from tts.listening.app import layout_for
from tts.listening.report import write_report
from tts.listening.testing import ServerProcess, make_tone_systems

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed: run scripts/setup_browser.sh")


def test_browser_completes_test_and_report_matches(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    dirs = make_tone_systems(tmp_path / "sys", {"gt": 440.0, "nar": 660.0}, ["s1", "s2"], seconds=0.5)
    test_dir = tmp_path / "test"
    assert build_main(["build", "--systems", f"gt={dirs['gt']}", f"nar={dirs['nar']}", "--out", str(test_dir),
                       "--mos", "--seed", "3", "--attention-checks", "1"]) == 0
    test = json.loads((test_dir / "test.json").read_text())
    items = {it["id"]: it for it in test["items"]}
    db = tmp_path / "results.sqlite"
    user_data = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    with ServerProcess(test_dir, db, admin_token="tok") as srv, sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            user_data, executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--autoplay-policy=no-user-gesture-required"])
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.set_default_timeout(15000)
            page.goto(srv.url + "/")
            assert page.locator("#start").is_disabled()
            page.check("#consent")
            page.click("#start")
            page.wait_for_url("**/rate")
            rater = next(c["value"] for c in ctx.cookies() if c["name"] == "rater")
            layout = layout_for(test, rater)
            expected_answers = {}
            for pos, (item_id, flip) in enumerate(layout, start=1):
                it = items[item_id]
                page.wait_for_selector("#answers")
                assert f"Item {pos} of {len(layout)}" in page.inner_text("body")
                srcs = page.eval_on_selector_all("audio", "els => els.map(e => e.getAttribute('src'))")
                toks = list(reversed(it["audio"])) if it["type"] == "ab" and flip else it["audio"]
                assert srcs == [f"/audio/{t}" for t in toks]  # the server's blind, per-rater layout
                buttons = page.locator(".ans")
                assert all(buttons.nth(k).is_disabled() for k in range(buttons.count()))
                for i in range(len(srcs)):
                    page.click(f"#play{i}")
                    page.wait_for_function(f"document.getElementById('state{i}').textContent === 'played'")
                    if i < len(srcs) - 1:  # one audio played is not enough
                        assert buttons.first.is_disabled()
                page.wait_for_function("![...document.querySelectorAll('.ans')].some(b => b.disabled)")
                if it["type"] == "ab":
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
            assert "Thank you" in page.content()
            # Reload after finishing stays done (server knows everything is answered).
            page.goto(srv.url + "/rate")
            page.wait_for_url("**/done")
        finally:
            ctx.close()
    res = write_report(test_dir, db, tmp_path / "report")
    assert res["n_raters"] == 1 and res["excluded_raters"] == [] and res["n_answers"] == len(layout)
    wins = [v for k, v in expected_answers.items() if items[k]["type"] == "ab"]
    (pair,) = res["ab"]
    assert (pair["system_a"], pair["system_b"]) == ("gt", "nar")
    assert pair["wins_a"] == wins.count("gt") and pair["wins_b"] == wins.count("nar") and pair["ties"] == 0
    for m in res["mos"]:
        vals = [v for k, v in expected_answers.items()
                if items[k]["type"] == "mos" and not items[k].get("attention") and items[k]["system"] == m["system"]]
        assert m["n"] == len(vals) and m["mean"] == pytest.approx(sum(vals) / len(vals), abs=1e-4)
    assert (tmp_path / "report" / "report.png").stat().st_size > 1000

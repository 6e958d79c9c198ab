"""A real Chromium (Debian's, driven by Playwright) on the speech server's page: type text, press Speak, hear
it stream (Web Audio plays each piece as it arrives; the page's clock and state are checked), replay it as a
wav, and see a bad request's message."""

import pytest
from test_listening_browser import CHROMIUM, browser

from recipes.bench.speech_server import SpeechServer

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed: run scripts/setup_browser.sh")


@pytest.fixture(scope="module")
def server():
    with SpeechServer("--rate-limit", "0") as s:
        yield s


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}],
                         ids=["desktop", "phone"])
def test_page_speaks_typed_text(server, tmp_path, viewport):
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    with browser(sync_api, tmp_path, viewport) as (ctx, page):
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url + "/")
        page.fill("#text", "Hello from the browser. This second sentence streams in after the first.")
        page.click("#speak")
        status = page.locator("#status")
        expect(status).to_have_attribute("data-state", "playing", timeout=30000)
        # the audio context's clock runs: the pieces are really being played
        t0 = page.evaluate("ctx.currentTime")
        page.wait_for_timeout(300)
        assert page.evaluate("ctx.currentTime") > t0 and page.evaluate("ctx.state") == "running"
        # the words the events carry are shown and highlighted as they are heard, in order
        seen = []
        for _ in range(300):
            states = page.evaluate("[...document.querySelectorAll('#words span')].map(s => s.dataset.state)")
            seen.append(states)
            if status.get_attribute("data-state") == "done":
                break
            page.wait_for_timeout(50)
        expect(status).to_have_attribute("data-state", "done", timeout=30000)
        current = [s.index("current") for s in seen if "current" in s]
        assert len(set(current)) >= 3 and current == sorted(current), current  # the highlight moves forward
        for states in seen:  # spoken words before the current one, waiting ones after it
            k = states.index("current") if "current" in states else len([x for x in states if x == "spoken"])
            assert all(x == "spoken" for x in states[:k]) and all(x == "waiting" for x in states[k + 1:]), states
        words = page.locator("#words span")
        assert words.all_inner_texts() == ["Hello", "from", "the", "browser", "This", "second", "sentence",
                                           "streams", "in", "after", "the", "first"]
        expect(words.last).to_have_attribute("data-state", "spoken", timeout=5000)
        seconds = float(status.get_attribute("data-seconds"))
        assert 3 < seconds < 15
        assert "Done:" in status.inner_text() and "first audio after" in status.inner_text()
        # the whole answer is offered as a wav the <audio> element can play
        player = page.locator("#player")
        expect(player).to_be_visible()
        duration = page.evaluate("""() => new Promise((ok, bad) => { const a = document.getElementById('player');
            if (a.readyState >= 1) ok(a.duration); a.onloadedmetadata = () => ok(a.duration);
            a.onerror = () => bad('audio element error'); })""")
        assert abs(duration - seconds) < 0.05
        page.evaluate("document.getElementById('player').play()")
        for _ in range(100):  # polled from here: wait_for_function evaluates a string, which the CSP forbids
            if page.evaluate("document.getElementById('player').currentTime") > 0.2:
                break
            page.wait_for_timeout(100)
        assert page.evaluate("document.getElementById('player').currentTime") > 0.2
        # the page stays inside the viewport (no horizontal scrolling on a phone)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        assert not errors, errors


def test_page_shows_the_servers_error_message(server, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    with browser(sync_api, tmp_path, {"width": 1280, "height": 800}) as (ctx, page):
        page.goto(server.url + "/")
        page.fill("#text", "   ")
        page.click("#speak")
        status = page.locator("#status")
        sync_api.expect(status).to_have_attribute("data-state", "error", timeout=15000)
        assert status.inner_text() == "Error: input is empty"
        assert page.locator("#speak").is_enabled()

"""FastAPI app: consent -> rater session (cookie) -> blind A/B and MOS pages -> done; admin export.

Endpoints
  GET  /                 consent and instructions page (with an invite-code field when the test has codes)
  POST /api/session      {"consent": true[, "invite": CODE]} -> sets the `rater` cookie (reuses a valid one)
  GET  /rate             the rater's next unanswered item (HTML), or redirect to /done
  GET  /api/next         the same as JSON (used by the load test)
  POST /api/answer       {"item_id", "choice": "A"|"B"|"none"} or {"item_id", "score": 1..5}
                         201 created, 200 duplicate retry (same answer), 409 different answer,
                         425 when the rater's session has not downloaded every clip of the page completely,
                         or answers sooner than each clip's duration after that download
  GET|HEAD /audio/{id}   WAV by opaque id (16 hex chars); a complete download by a rater is recorded
  GET  /done             thank-you page with a completion code
  GET  /admin/results?format=json|csv   all answers; `Authorization: Bearer TOKEN` (403 otherwise)
  GET  /healthz
Order and side are randomised per rater from (test secret, rater id), so a reload shows the same layout
and the server can tell which system was on which side. Every response carries the same security
headers; audio responses carry no ETag or Last-Modified (a write time would order files by system).
Bodies over 64 KB get 413; each client address is rate limited (429).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import html
import io
import json
import random
import re
import secrets
import sqlite3
import time
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional

from fastapi import Cookie, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tts.web_limits import BodyLimit, RateLimiter

from . import db as dbm
from .build import hash_invite, load_test

RATER_RE = re.compile(r"^[0-9a-f]{32}$")
ID_PATTERN = r"^[0-9a-f]{16}$"
COOKIE = "rater"
MAX_BODY_BYTES = 64 * 1024
MIN_ADMIN_TOKEN_CHARS = 22  # token_urlsafe(16) = 128 bits
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    # inline scripts/styles are the page's own (no user content is ever rendered unescaped)
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; media-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
}
FAVICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" '
           b'fill="#4477aa"/></svg>')


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    consent: Literal[True]
    invite: Optional[str] = Field(default=None, max_length=64)


class AnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(pattern=ID_PATTERN, max_length=16)
    choice: Optional[Literal["A", "B", "none"]] = None
    score: Optional[int] = Field(default=None, ge=1, le=5, strict=True)

    @model_validator(mode="after")
    def _one_of(self):
        if (self.choice is None) == (self.score is None):
            raise ValueError("give exactly one of choice (A/B item) or score (MOS item)")
        return self


def layout_for(test: dict, rater_id: str) -> list[tuple[str, bool]]:
    """The rater's item order and, per A/B item, whether the sides are swapped (deterministic).

    Seeded by the build's secret, so neither a rater nor anyone knowing the public seed can predict it.
    A/B block first, then the MOS block; the A/B attention checks are spread among the A/B pages, a random
    `attention_per_part` of the five MOS checks among the MOS pages."""
    rng = random.Random(f"{test['secret']}:{rater_id}")
    real = [it for it in test["items"] if not it.get("attention")]
    ab = sorted(it["id"] for it in real if it["type"] == "ab")
    mos = sorted(it["id"] for it in real if it["type"] == "mos")
    att_ab = sorted(it["id"] for it in test["items"] if it.get("attention") and it["type"] == "ab")
    att_mos = sorted(it["id"] for it in test["items"] if it.get("attention") and it["type"] == "mos")
    rng.shuffle(ab)
    rng.shuffle(mos)
    for att in att_ab:
        ab.insert(rng.randint(0, len(ab)), att)
    for att in rng.sample(att_mos, min(test.get("attention_per_part", 0), len(att_mos))):
        mos.insert(rng.randint(0, len(mos)), att)
    return [(i, rng.random() < 0.5) for i in ab + mos]


def completion_code(test: dict, rater_id: str) -> str:
    """A code the rater can quote (e.g. to a crowdsourcing platform), verifiable with the test secret."""
    return hmac.new(test["secret"].encode(), f"done:{rater_id}".encode(), hashlib.sha256).hexdigest()[:10].upper()


def create_app(test_dir: Path | str, db_path: Path | str, admin_token: str | None = None,
               secure_cookies: bool = False, sessions_per_hour: float = 20, requests_per_minute: float = 600,
               check_listening: bool = True) -> FastAPI:
    """`secure_cookies`: mark the cookie Secure (serve behind HTTPS); it is also set on https requests.
    Rate limits per client address: new sessions per hour, requests per minute, 10 admin attempts/minute."""
    test_dir = Path(test_dir).resolve()
    test = load_test(test_dir)
    audio_dir = (test_dir / test["audio_dir"]).resolve()
    items = {it["id"]: it for it in test["items"]}
    audio = test["audio"]
    invites = set(test.get("invite_hashes", []))
    if admin_token is not None and len(admin_token) < MIN_ADMIN_TOKEN_CHARS:
        raise ValueError(f"admin token too short: at least {MIN_ADMIN_TOKEN_CHARS} characters (128 bits)")
    dbm.init_db(db_path, test["test_id"])
    app = FastAPI(title="tts listening test", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES, too_large=lambda message: JSONResponse(
        {"detail": message}, status_code=413, headers={**SECURITY_HEADERS, "Connection": "close"}))
    app.state.test = test
    limiter = RateLimiter({"session": (sessions_per_hour, 3600.0), "request": (requests_per_minute, 60.0),
                           "admin": (10.0, 60.0)})

    @app.middleware("http")
    async def headers_and_limits(request: Request, call_next):
        client = request.client.host if request.client else "?"
        if not limiter.allow("request", client):
            resp = JSONResponse({"detail": "too many requests"}, status_code=429, headers={"Retry-After": "10"})
        else:
            resp = await call_next(request)
        resp.headers.update(SECURITY_HEADERS)
        return resp

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        # The default handler echoes the input, and NaN/Infinity in it cannot be JSON-encoded (a 500):
        # answer with the locations and messages only.
        errs = [{"loc": list(map(str, e.get("loc", ()))), "msg": str(e.get("msg", ""))} for e in exc.errors()]
        return JSONResponse({"detail": errs}, status_code=422)

    @app.exception_handler(sqlite3.OperationalError)
    async def db_gone(request: Request, exc: sqlite3.OperationalError):
        # e.g. the results file was archived by a forced rebuild under this server: refuse, don't orphan
        return JSONResponse({"detail": "results database unavailable; the test may have been rebuilt"},
                            status_code=503)

    @lru_cache(maxsize=4096)
    def layout(rater_id: str) -> tuple[tuple[str, bool], ...]:
        return tuple(layout_for(test, rater_id))

    def get_db():
        con = dbm.connect(db_path)
        try:
            yield con
        finally:
            con.close()

    def current_rater(con: sqlite3.Connection, rater: Optional[str]) -> Optional[str]:
        if rater and RATER_RE.match(rater) and dbm.rater_exists(con, rater):
            return rater
        return None

    def served_audio(item_id: str, flip: bool) -> list[str]:
        it = items[item_id]
        return list(reversed(it["audio"])) if (it["type"] == "ab" and flip) else list(it["audio"])

    def next_item(con: sqlite3.Connection, rater_id: str) -> dict:
        lay = layout(rater_id)
        done = dbm.answered_items(con, rater_id)
        total = len(lay)
        first_mos = next((p for p, (i, _) in enumerate(lay, start=1) if items[i]["type"] == "mos"), None)
        for pos, (item_id, flip) in enumerate(lay, start=1):
            if item_id in done:
                continue
            # Same fields for every item, real or attention check: nothing in the payload tells them apart.
            return {"done": False, "answered": len(done), "total": total, "position": pos,
                    "part_starts": pos == first_mos and pos > 1,
                    "item": {"item_id": item_id, "type": items[item_id]["type"],
                             "audio": [f"/audio/{t}" for t in served_audio(item_id, flip)]}}
        return {"done": True, "answered": len(done), "total": total}

    def check_admin(request: Request, authorization: Optional[str]):
        client = request.client.host if request.client else "?"
        scheme, _, given = (authorization or "").partition(" ")
        ok = bool(admin_token) and scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), admin_token.encode())
        if not ok:
            if not limiter.allow("admin", client):  # guessing: ~10 tries a minute, not hundreds a second
                raise HTTPException(429, "too many admin attempts", headers={"Retry-After": "60"})
            raise HTTPException(403, "admin token required: Authorization: Bearer TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})

    def set_cookie(resp: Response, request: Request, rid: str) -> None:
        resp.set_cookie(COOKIE, rid, max_age=30 * 86400, httponly=True, samesite="lax", path="/",
                        secure=secure_cookies or request.url.scheme == "https")

    @app.get("/healthz")
    def healthz():
        return {"ok": True}

    @app.get("/favicon.ico")
    def favicon():
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})

    @app.get("/", response_class=HTMLResponse)
    def consent_page(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is not None:  # a returning rater goes on (or to the done page), not through consent again
            return RedirectResponse("/rate", status_code=303)
        n_pages = len(layout("0" * 32))
        seconds = sum(sum(audio[t].get("duration_s", 3.0) for t in items[i]["audio"]) for i, _ in layout("0" * 32))
        minutes = max(1, round((seconds * 1.5 + 6 * n_pages) / 60))  # listening plus ~6 s to answer a page
        body = (CONSENT_HTML.replace("{pages}", str(n_pages)).replace("{minutes}", str(minutes))
                .replace("{invite_row}", INVITE_ROW if invites else "")
                .replace("{needs_invite}", "true" if invites else "false"))
        return HTMLResponse(_page(test["title"], body))

    @app.post("/api/session")
    def new_session(body: SessionIn, request: Request, rater: Optional[str] = Cookie(default=None),
                    con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            invite_hash = None
            if invites:
                invite_hash = hash_invite(body.invite or "")
                if invite_hash not in invites:
                    raise HTTPException(403, "a valid invite code is required")
                rid = dbm.rater_of_invite(con, invite_hash)  # the same code on another device resumes
            if rid is None:
                client = request.client.host if request.client else "?"
                if not limiter.allow("session", client):
                    raise HTTPException(429, "too many new sessions from this address", headers={"Retry-After": "600"})
                rid = secrets.token_hex(16)
                if not dbm.add_rater(con, rid, request.headers.get("user-agent"), invite_hash):
                    rid = dbm.rater_of_invite(con, invite_hash)  # lost a race for the same code
        resp = JSONResponse({"rater_id": rid, "total": len(layout(rid))})
        set_cookie(resp, request, rid)
        return resp

    @app.get("/api/next")
    def api_next(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            raise HTTPException(401, "no rater session: POST /api/session first")
        return next_item(con, rid)

    @app.get("/rate", response_class=HTMLResponse)
    def rate_page(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            return RedirectResponse("/", status_code=303)
        nxt = next_item(con, rid)
        if nxt["done"]:
            return RedirectResponse("/done", status_code=303)
        return HTMLResponse(_page(test["title"], _item_html(nxt)), headers={"Cache-Control": "no-store"})

    def check_listened(con: sqlite3.Connection, rid: str, toks: list[str]) -> None:
        now = time.time()
        for tok in toks:
            fetched = dbm.first_fetch(con, rid, tok)
            if fetched is None:
                raise HTTPException(425, "a sample was not loaded completely: play every sample to the end first")
            if now - fetched < audio[tok]["duration_s"]:
                raise HTTPException(425, "answered before the samples could have been heard: play every sample "
                                         "to the end first")

    @app.post("/api/answer")
    def api_answer(body: AnswerIn, rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            raise HTTPException(401, "no rater session")
        it = items.get(body.item_id)
        lay = layout(rid)
        where = next(((p, f) for p, (i, f) in enumerate(lay, start=1) if i == body.item_id), None)
        if it is None or where is None:  # an item not on this rater's list (e.g. another rater's check)
            raise HTTPException(404, "unknown item")
        if it["type"] == "ab" and body.choice is None or it["type"] == "mos" and body.score is None:
            raise HTTPException(422, f"item {body.item_id} is a {it['type']} item")
        pos, flip = where
        if check_listening and body.item_id not in dbm.answered_items(con, rid):
            check_listened(con, rid, served_audio(body.item_id, flip))
        row = {"rater_id": rid, "item_id": body.item_id, "item_type": it["type"], "position": pos,
               "created_at": time.time(), "choice": body.choice, "score": body.score}
        if it["type"] == "ab":
            left, right = (it["systems"][1], it["systems"][0]) if flip else tuple(it["systems"])
            row.update(left_system=left, right_system=right,
                       preferred={"A": left, "B": right, "none": None}[body.choice])
        else:
            row["system"] = it.get("system")
        status, _ = dbm.insert_answer(con, row)
        if status == "conflict":
            raise HTTPException(409, "this item was already answered differently")
        nxt = next_item(con, rid)
        return JSONResponse({"status": status, "answered": nxt["answered"], "total": nxt["total"],
                             "done": nxt["done"]}, status_code=201 if status == "created" else 200)

    @app.api_route("/audio/{audio_id}", methods=["GET", "HEAD"])
    def get_audio(request: Request, audio_id: str = PathParam(pattern=ID_PATTERN),
                  rater: Optional[str] = Cookie(default=None)):
        entry = audio.get(audio_id)
        if entry is None:
            raise HTTPException(404, "unknown audio id")
        path = (audio_dir / entry["file"]).resolve()
        if path.parent != audio_dir or not path.is_file():  # test.json is trusted, but be strict anyway
            raise HTTPException(404, "unknown audio id")
        data = path.read_bytes()  # small files; no Range/ETag/Last-Modified: the same headers for every clip
        headers = {"Cache-Control": "private, max-age=3600", "Content-Length": str(len(data)),
                   "Accept-Ranges": "none"}
        if request.method == "HEAD":
            return Response(b"", media_type="audio/wav", headers=headers)
        rid = rater if rater and RATER_RE.match(rater) else None

        def body():
            sent_at = time.time()
            for k in range(0, len(data), 65536):
                sent_at = time.time()  # when the last chunk is handed over (the client has it soon after)
                yield data[k:k + 65536]
            # Reached only once the last chunk went out: evidence that this session got the whole clip.
            # The time recorded is the hand-over, not now: under load this thread may resume late.
            if rid is not None:
                try:
                    con = dbm.connect(db_path)
                except sqlite3.OperationalError:  # results file gone (rebuilt): answers are refused anyway
                    return
                try:
                    if dbm.rater_exists(con, rid):
                        dbm.record_fetch(con, rid, audio_id, sent_at)
                finally:
                    con.close()

        return StreamingResponse(body(), media_type="audio/wav", headers=headers)

    @app.get("/done", response_class=HTMLResponse)
    def done_page(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            return RedirectResponse("/", status_code=303)
        if not next_item(con, rid)["done"]:
            return RedirectResponse("/rate", status_code=303)
        code = completion_code(test, rid)
        return HTMLResponse(_page(test["title"], "<h1>Thank you!</h1><p>All pages are answered. Your completion "
                                  f'code is <b id="code">{code}</b>. You can close this page.</p>'))

    @app.get("/admin/results")
    def admin_results(request: Request, format: Literal["json", "csv"] = Query(default="json"),
                      authorization: Optional[str] = Header(default=None, max_length=300)):
        check_admin(request, authorization)
        rows = dbm.all_answers(db_path)
        for r in rows:
            it = items.get(r["item_id"], {})
            r["sentence"] = it.get("sentence")
            r["attention"] = bool(it.get("attention"))
            r["expected"] = it.get("expected")
        if format == "json":
            return {"test": test["title"], "test_id": test["test_id"], "seed": test["seed"],
                    "n_answers": len(rows), "answers": rows}
        buf = io.StringIO()
        fields = list(rows[0]) if rows else ["id", "rater_id", "item_id"]
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        return PlainTextResponse(buf.getvalue(), media_type="text/csv",
                                 headers={"Content-Disposition": "attachment; filename=results.csv"})

    return app


def _page(title: str, body: str) -> str:
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title>
<link rel="icon" href="/favicon.ico">
<style>body{{font-family:sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}
button{{font-size:1.05rem;padding:.5rem .8rem}} button:disabled{{opacity:.45}}
.row{{margin:1rem 0}} .ok{{color:#070}} .err{{color:#b00}} progress{{width:100%}}
.player{{display:flex;align-items:center;gap:.6rem;flex-wrap:wrap}}
.choices{{display:flex;flex-wrap:nowrap;gap:.4rem}} .choices button{{flex:1 1 0;min-width:0;padding:.5rem .2rem}}
.choices button small{{display:block;font-size:.7rem}}
@media (max-width:480px){{body{{margin:1rem auto}} button{{font-size:.95rem}}}}</style>
</head><body>{body}</body></html>"""


INVITE_ROW = """<p><label>Invite code: <input id="invite" autocomplete="off" maxlength="64"></label></p>"""

CONSENT_HTML = """
<h1>Listening test</h1>
<p>You will hear short recordings of speech, some synthetic and some natural, and judge them. There are
{pages} pages; this takes about {minutes} minutes. Please use headphones in a quiet place.</p>
<p>The test is anonymous: we store your answers, their times, a random rater id (in a cookie) and your
browser's identification string (User-Agent). You may stop at any time; opening this page again resumes
where you left off.</p>
<ul>
<li><b>Part 1, A/B pages</b>: play both samples to the end, then choose the one that sounds better
overall (or "no preference").</li>
<li><b>Part 2, quality pages</b> (if the test has them): play the sample to the end and rate its overall
quality from 1 (bad) to 5 (excellent).</li>
<li>Some recordings ask you for a particular answer: please give that answer. If a recording only beeps,
choose the number of beeps, or on an A/B page the sample that beeps.</li>
</ul>
{invite_row}
<p><label><input type="checkbox" id="consent"> I agree to take part and to the storage of my answers.</label></p>
<button id="start" disabled>Start</button> <span id="msg" class="err" role="alert"></span>
<script>
const cb = document.getElementById('consent'), start = document.getElementById('start');
const msg = document.getElementById('msg');
cb.addEventListener('change', () => { start.disabled = !cb.checked; });
start.addEventListener('click', async () => {
  start.disabled = true; msg.textContent = '';
  const body = {consent: true};
  if ({needs_invite}) body.invite = document.getElementById('invite').value.trim();
  try {
    const r = await fetch('/api/session', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                            body: JSON.stringify(body)});
    if (r.ok) { location.replace('/rate'); return; }
    msg.textContent = r.status === 403 ? 'This invite code is not valid.'
                    : r.status === 429 ? 'Too many attempts from your network; please try again later.'
                    : 'The server could not start your session (error ' + r.status + '); please try again later.';
  } catch (e) { msg.textContent = 'No connection to the server; check your network and try again.'; }
  start.disabled = false;
});
</script>"""


def _item_html(nxt: dict) -> str:
    it = nxt["item"]
    labels = ["A", "B"] if it["type"] == "ab" else ["the sample"]
    players = "".join(
        f'<div class="row player"><audio id="audio{i}" preload="auto" src="{html.escape(src)}"></audio>'
        f'<button class="play" data-i="{i}" id="play{i}">Play {lab}</button>'
        f'<span id="time{i}">0:00 / –</span> <span id="state{i}" role="status">not played yet</span></div>'
        for i, (src, lab) in enumerate(zip(it["audio"], labels)))
    if it["type"] == "ab":
        question = "<h2>Which sample sounds better overall?</h2>"
        answers = ('<button class="ans" data-choice="A" id="ans-A" disabled>A is better</button>'
                   '<button class="ans" data-choice="none" id="ans-none" disabled>No preference</button>'
                   '<button class="ans" data-choice="B" id="ans-B" disabled>B is better</button>')
    else:
        question = "<h2>How good is the overall quality of this sample?</h2>"
        names = {1: "Bad", 2: "Poor", 3: "Fair", 4: "Good", 5: "Excellent"}
        answers = "".join(f'<button class="ans" data-score="{s}" id="ans-{s}" disabled>{s}<small>{names[s]}</small></button>'
                          for s in range(1, 6))
    part = ('<p class="ok" id="part"><b>Part 2: quality pages.</b> From now on you hear one sample per page and '
            'rate its quality from 1 to 5.</p>') if nxt.get("part_starts") else ""
    data = json.dumps({"item_id": it["item_id"], "n": len(it["audio"])})
    return f"""
<p>Page {nxt['answered'] + 1} of {nxt['total']}</p>
<progress id="progress" value="{nxt['answered']}" max="{nxt['total']}"></progress>
{part}{question}{players}
<div class="row choices" id="answers">{answers}</div>
<p id="hint">Play every sample to the end to enable the answer buttons.</p><p id="msg" class="err" role="alert"></p>
<script>
const ITEM = {data};
const audios = [...Array(ITEM.n).keys()].map(i => document.getElementById('audio' + i));
const finished = new Set();
const msg = document.getElementById('msg');
const fmt = t => isFinite(t) ? Math.floor(t / 60) + ':' + String(Math.floor(t % 60)).padStart(2, '0') : '–';
function playedFraction(a) {{
  let s = 0; for (let k = 0; k < a.played.length; k++) s += a.played.end(k) - a.played.start(k);
  return a.duration > 0 ? s / a.duration : 0;
}}
function setState(i, text, cls) {{
  const el = document.getElementById('state' + i); el.textContent = text; el.className = cls || '';
}}
audios.forEach((a, i) => {{
  const btn = document.getElementById('play' + i), label = btn.textContent;
  const showTime = () => {{ document.getElementById('time' + i).textContent = fmt(a.currentTime) + ' / ' + fmt(a.duration); }};
  a.addEventListener('loadedmetadata', showTime);
  a.addEventListener('timeupdate', showTime);
  a.addEventListener('playing', () => {{ setState(i, 'playing'); btn.textContent = 'Pause'; }});
  a.addEventListener('pause', () => {{
    btn.textContent = label;
    if (!a.ended) setState(i, finished.has(i) ? 'played (paused)' : 'paused: play to the end');
  }});
  a.addEventListener('error', () => {{
    setState(i, 'could not load', 'err');
    msg.textContent = 'A sample could not be loaded. Check your connection and reload the page.';
  }});
  a.addEventListener('ended', () => {{
    btn.textContent = label;
    if (playedFraction(a) < 0.9) {{ setState(i, 'skipped: play it to the end'); return; }}  // must have listened
    finished.add(i);
    setState(i, 'played', 'ok');
    if (finished.size === ITEM.n) {{
      document.querySelectorAll('.ans').forEach(b => b.disabled = false);
      document.getElementById('hint').textContent = '';
    }}
  }});
}});
document.querySelectorAll('.play').forEach(btn => btn.addEventListener('click', () => {{
  const a = audios[+btn.dataset.i];
  if (!a.paused) {{ a.pause(); return; }}
  audios.forEach(o => o.pause());
  if (a.ended || a.currentTime === 0) a.currentTime = 0;
  a.play().catch(() => {{ msg.textContent = 'The browser refused to play the sample; click Play again.'; }});
}}));
document.querySelectorAll('.ans').forEach(btn => btn.addEventListener('click', async () => {{
  document.querySelectorAll('.ans').forEach(b => b.disabled = true);
  msg.textContent = '';
  const body = {{item_id: ITEM.item_id}};
  if (btn.dataset.choice) body.choice = btn.dataset.choice; else body.score = +btn.dataset.score;
  let answered = false;
  for (let attempt = 0; attempt < 3; attempt++) {{   // retries are safe: the server is idempotent
    try {{
      const r = await fetch('/api/answer', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
                                              body: JSON.stringify(body)}});
      if (r.ok || r.status === 409) {{ location.replace('/rate'); return; }}
      answered = true;
      const detail = await r.json().then(j => j.detail, () => '');
      msg.textContent = r.status === 425 ? 'Please play every sample to the end before answering.'
                      : r.status === 429 ? 'Too many requests; please wait a few seconds and try again.'
                      : 'The server could not save your answer (error ' + r.status + (typeof detail === 'string' ? ': ' + detail : '') + '); please try again.';
      break;
    }} catch (e) {{
      msg.textContent = 'No connection to the server; retrying...';
      await new Promise(res => setTimeout(res, 1000));
    }}
  }}
  if (!answered) msg.textContent = 'No connection to the server; check your network and try again.';
  document.querySelectorAll('.ans').forEach(b => b.disabled = false);
}}));
</script>"""

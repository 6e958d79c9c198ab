"""FastAPI app: consent -> rater session (cookie) -> blind A/B and MOS pages, in order -> done; admin export.

Endpoints
  GET  /                 consent and instructions page (with an invite-code field when the test has codes)
  POST /api/session      {"consent": true[, "invite": CODE]} -> sets the `rater` cookie (reuses a valid one)
  GET  /rate             the rater's next unanswered page (HTML), or redirect to /done
  GET  /api/next         the same as JSON: {"item": {"item_id", "type", "audio": [URL, ...]}, ...}
  POST /api/answer       {"item_id", "choice": "A"|"B"|"none" | "score": 1..5, "proofs": [HEX8, ...]}
                         201 created, 200 duplicate retry (same answer); 409 a different answer to an answered
                         page, or a page that is not the current one (pages are answered in the order served);
                         425 without a valid proof of each clip's complete download, or sooner than 90 % of the
                         page's audio after its first clip was requested
  GET|HEAD /audio/{id}   a clip of the rater's own pages (ids are per rater, page and slot; 404 for anyone
                         else), fresh dithered bytes, Cache-Control: no-store
  GET  /done             thank-you page with a completion code
  GET  /admin/results?format=json|csv   all answers; `Authorization: Bearer TOKEN` (403 otherwise)
  GET  /healthz
Listening evidence: a clip's bytes are unique to (rater, page, slot) (clips.render_wav), so the proof the
page's script computes over the received bytes (clips.proof) cannot be made without the whole download;
the clock starts at the clip's first request. Nothing depends on the browser's cache or on the server
seeing a download end (a client that reads only the headers proves nothing).
Every response carries the same security headers; audio responses carry no ETag, Last-Modified or Range.
Bodies over 64 KB get 413; each client (IPv4 address, IPv6 /64; behind --trusted-proxy the forwarded
address) is rate limited (429): security.py, tts.web_limits.PrefixLimiter. A Host header outside the allow-list
(`hosts`: localhost, loopback, the bind address, --allow-host names) is 421 before anything else, against DNS
rebinding (tts.web_limits.HostCheck).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import html
import io
import json
import re
import secrets
import sqlite3
import time
from functools import lru_cache
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import soundfile as sf
from fastapi import Cookie, Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tts.web_limits import BodyLimit, HostCheck, PrefixLimiter

from . import db as dbm
from .build import hash_invite, load_test
from .checks import degrade
from .clips import gain_for, proof, render_wav
from .layout import clip_id, clip_ids, dither_seed, layout_for, page_sources
from .security import MIN_ADMIN_TOKEN_BITS, IPNetwork, client_address, token_bits

RATER_RE = re.compile(r"^[0-9a-f]{32}$")
ID_PATTERN = r"^[0-9a-f]{16}$"
COOKIE = "rater"
MAX_BODY_BYTES = 64 * 1024
LISTEN_SHARE = 0.9  # of the page's audio that must have passed since its first clip was requested
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    # inline scripts/styles are the page's own (no user content is ever rendered unescaped); blob: media
    # are the clips the page fetched itself (it needs their bytes for the proof)
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; media-src 'self' blob:; img-src 'self' data:; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
}
AUDIO_HEADERS = {"Cache-Control": "no-store", "Accept-Ranges": "none"}
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
    proofs: Optional[list[str]] = Field(default=None, max_length=2)

    @model_validator(mode="after")
    def _one_of(self):
        if (self.choice is None) == (self.score is None):
            raise ValueError("give exactly one of choice (A/B item) or score (MOS item)")
        if self.proofs is not None and not all(re.fullmatch(r"[0-9a-f]{8}", p) for p in self.proofs):
            raise ValueError("proofs are 8 lowercase hex digits each")
        return self


def completion_code(test: dict, rater_id: str) -> str:
    """A code the rater can quote (e.g. to a crowdsourcing platform), verifiable with the test secret."""
    return hmac.new(test["secret"].encode(), f"done:{rater_id}".encode(), hashlib.sha256).hexdigest()[:10].upper()


def check_admin_token(token: str | None) -> None:
    if token is not None and token_bits(token) < MIN_ADMIN_TOKEN_BITS:
        raise ValueError(f"admin token too weak: about {token_bits(token):.0f} bits estimated, at least "
                         f"{MIN_ADMIN_TOKEN_BITS} needed (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")


class ClipRenderer:
    """The bytes of a rater's clip: stored float audio (damaged for an A/B check's bad side and loudness-
    normalised again), dithered per (rater, page, slot)."""

    def __init__(self, test: dict, audio_dir: Path):
        self.test, self.audio_dir = test, audio_dir
        self.items = {it["id"]: it for it in test["items"]}
        norm = test["normalisation"]
        self.sr, self.loudness, self.target = norm["sample_rate"], norm["loudness"], norm["applied_target_db"]
        self.stored = lru_cache(maxsize=256)(self._stored)
        self.render = lru_cache(maxsize=512)(self._render)

    def _stored(self, token: str) -> np.ndarray:
        path = (self.audio_dir / self.test["audio"][token]["file"]).resolve()
        if path.parent != self.audio_dir:  # test.json is trusted, but be strict anyway
            raise FileNotFoundError(path)
        x, _ = sf.read(str(path), dtype="float32")
        return x

    def _render(self, rater_id: str, item_id: str, slot: int, flip: bool) -> bytes:
        src = page_sources(self.test, self.items, rater_id, item_id, flip)[slot]
        x = self.stored(src.token).astype(np.float64)
        if src.damage is not None:  # damage the speech only: the padding stays as silent as every clip's
            start = int(round(self.test["normalisation"]["padding_s"] * self.sr))
            span = (start, start + int(round(self.test["audio"][src.token]["speech_s"] * self.sr)))
            x = degrade(x, self.sr, src.damage, np.random.default_rng(list(src.seed)), span)
            x = x * 10 ** (gain_for(x, self.sr, self.loudness, self.target).gain_db / 20)
        return render_wav(x, self.sr, dither_seed(self.test, rater_id, item_id, slot))

    def seconds(self, data: bytes) -> float:
        return (len(data) - 44) / 2 / self.sr


def create_app(test_dir: Path | str, db_path: Path | str, admin_token: str | None = None,
               secure_cookies: bool = False, sessions_per_hour: float = 20, requests_per_minute: float = 600,
               check_listening: bool = True, trusted_proxies: tuple[IPNetwork, ...] = (),
               hosts: HostCheck | None = None) -> FastAPI:
    """`secure_cookies`: mark the cookie Secure (serve behind HTTPS); it is also set on https requests.
    Rate limits per client (tts.web_limits.rate_key): new sessions per hour, requests per minute, 10 admin
    attempts a minute. `trusted_proxies`: networks whose X-Forwarded-For names the client. `hosts`: the
    Host allow-list (None: any Host; the CLI passes one).
    `check_listening=False` skips the listening evidence (tests of the API's other rules only)."""
    test_dir = Path(test_dir).resolve()
    test = load_test(test_dir)
    audio_dir = (test_dir / test["audio_dir"]).resolve()
    items = {it["id"]: it for it in test["items"]}
    invites = set(test.get("invite_hashes", []))
    check_admin_token(admin_token)
    dbm.init_db(db_path, test["test_id"])
    renderer = ClipRenderer(test, audio_dir)
    app = FastAPI(title="tts listening test", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES, too_large=lambda message: JSONResponse(
        {"detail": message}, status_code=413, headers={**SECURITY_HEADERS, "Connection": "close"}))
    app.state.test = test
    limiter = PrefixLimiter({"session": (sessions_per_hour, 3600.0), "request": (requests_per_minute, 60.0),
                             "admin": (10.0, 60.0)})

    def client_of(request: Request) -> str:
        return client_address(request.client.host if request.client else None,
                              request.headers.get("x-forwarded-for"), trusted_proxies)

    @app.middleware("http")
    async def headers_and_limits(request: Request, call_next):
        host = request.headers.get("host")
        if hosts is not None and not hosts.allows(None if host is None else host.encode("latin-1")):
            resp = JSONResponse({"detail": f"this server does not answer for the Host {host[:100]!r} (start it "
                                           "with --allow-host NAME)"}, status_code=421)
        elif not limiter.allow("request", client_of(request)):
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

    @lru_cache(maxsize=1024)
    def clips_of(rater_id: str) -> dict[str, tuple[str, int, bool]]:
        return clip_ids(test, items, rater_id)

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

    def n_clips(item_id: str) -> int:
        return 2 if items[item_id]["type"] == "ab" else 1

    def next_item(con: sqlite3.Connection, rater_id: str) -> dict:
        lay = layout(rater_id)
        done = dbm.answered_items(con, rater_id)
        total = len(lay)
        first_mos = next((p for p, (i, _) in enumerate(lay, start=1) if items[i]["type"] == "mos"), None)
        for pos, (item_id, _) in enumerate(lay, start=1):
            if item_id in done:
                continue
            # Same fields for every item, real or attention check: nothing in the payload tells them apart.
            return {"done": False, "answered": len(done), "total": total, "position": pos,
                    "part_starts": pos == first_mos and pos > 1,
                    "item": {"item_id": item_id, "type": items[item_id]["type"],
                             "audio": [f"/audio/{clip_id(test, rater_id, item_id, k)}" for k in range(n_clips(item_id))]}}
        return {"done": True, "answered": len(done), "total": total}

    def check_admin(request: Request, authorization: Optional[str]):
        scheme, _, given = (authorization or "").partition(" ")
        ok = bool(admin_token) and scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), admin_token.encode())
        if not ok:
            if not limiter.allow("admin", client_of(request)):  # guessing: ~10 tries a minute
                raise HTTPException(429, "too many admin attempts", headers={"Retry-After": "60"})
            raise HTTPException(403, "admin token required: Authorization: Bearer TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})

    def set_cookie(resp: Response, request: Request, rid: str) -> None:
        resp.set_cookie(COOKIE, rid, max_age=30 * 86400, httponly=True, samesite="lax", path="/",
                        secure=secure_cookies or request.url.scheme == "https")

    def estimated_minutes() -> int:
        someone = "0" * 32
        seconds = sum(test["audio"][src.token]["duration_s"] for i, f in layout(someone)
                      for src in page_sources(test, items, someone, i, f))
        return max(1, round((seconds * 1.5 + 6 * len(layout(someone))) / 60))  # plus ~6 s to answer a page

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
        body = (CONSENT_HTML.replace("{title}", html.escape(test["title"]))
                .replace("{pages}", str(len(layout("0" * 32)))).replace("{minutes}", str(estimated_minutes()))
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
                if not limiter.allow("session", client_of(request)):
                    raise HTTPException(429, "too many new sessions from this network", headers={"Retry-After": "600"})
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
        return JSONResponse(next_item(con, rid), headers={"Cache-Control": "no-store"})

    @app.get("/rate", response_class=HTMLResponse)
    def rate_page(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            return RedirectResponse("/", status_code=303)
        nxt = next_item(con, rid)
        if nxt["done"]:
            return RedirectResponse("/done", status_code=303)
        return HTMLResponse(_page(test["title"], _item_html(nxt)), headers={"Cache-Control": "no-store"})

    def check_listened(con: sqlite3.Connection, rid: str, item_id: str, flip: bool, proofs: list[str] | None) -> None:
        n = n_clips(item_id)
        ids = [clip_id(test, rid, item_id, k) for k in range(n)]
        first = [dbm.first_served(con, rid, c) for c in ids]
        if any(t is None for t in first):
            raise HTTPException(425, "a sample was not loaded: play every sample to the end first")
        data = [renderer.render(rid, item_id, k, flip) for k in range(n)]
        if proofs is None or len(proofs) != n or any(p != proof(d) for p, d in zip(proofs, data)):
            raise HTTPException(425, "a sample was not received completely: reload the page and play every sample")
        if time.time() - min(first) < LISTEN_SHARE * sum(map(renderer.seconds, data)):
            raise HTTPException(425, "answered before the samples could have been heard: play every sample to the end")

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
        answered = dbm.answered_items(con, rid)
        if body.item_id not in answered:
            current = next((i for i, _ in lay if i not in answered), None)
            if body.item_id != current:  # skipping a page (a check, say) is not possible
                raise HTTPException(409, "this page is not the current one: pages are answered in the order served")
            if check_listening:
                check_listened(con, rid, body.item_id, flip, body.proofs)
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
            raise HTTPException(409, "this page was already answered differently (in another tab or window?): "
                                     "the first answer stands")
        nxt = next_item(con, rid)
        return JSONResponse({"status": status, "answered": nxt["answered"], "total": nxt["total"],
                             "done": nxt["done"]}, status_code=201 if status == "created" else 200)

    @app.api_route("/audio/{audio_id}", methods=["GET", "HEAD"])
    def get_audio(request: Request, audio_id: str = PathParam(pattern=ID_PATTERN),
                  rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        where = clips_of(rid).get(audio_id) if rid else None
        if where is None:  # ids are per rater: another rater's id, or any id without a session, is unknown
            raise HTTPException(404, "unknown audio id")
        item_id, slot, flip = where
        try:
            data = renderer.render(rid, item_id, slot, flip)
        except (FileNotFoundError, RuntimeError, sf.LibsndfileError) as e:  # files gone under the server
            raise HTTPException(404, "audio unavailable") from e
        headers = {**AUDIO_HEADERS, "Content-Length": str(len(data))}
        if request.method == "HEAD":
            return Response(b"", media_type="audio/wav", headers=headers)
        dbm.record_served(con, rid, audio_id, time.time())  # the listening clock starts at the first request
        return Response(data, media_type="audio/wav", headers=headers)

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
<h1>{title}</h1>
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
<li>Some pages check that you are listening: a recording may ask you for a particular score (please give
it; if it only beeps, give the number of beeps), or one of the two samples may be clearly damaged (loud
noise, dropouts, harsh distortion), and then the other one is the better.</li>
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
        f'<div class="row player"><audio id="audio{i}" preload="auto"></audio>'
        f'<button class="play" data-i="{i}" id="play{i}" disabled>Play {lab}</button>'
        f'<span id="time{i}">0:00.0 / –</span> <span id="state{i}" role="status">loading</span></div>'
        for i, lab in enumerate(labels))
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
    data = json.dumps({"item_id": it["item_id"], "n": len(it["audio"]), "audio": it["audio"]})
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
// m:ss.t: whole seconds alone made a 0.9 s clip look like it never ran
const fmt = t => isFinite(t) ? Math.floor(t / 60) + ':' + (t % 60).toFixed(1).padStart(4, '0') : '–';
// the server's proof (tts/listening/clips.py proof): sum of (position + 1) * byte, mod 2^32, as 8 hex digits
function proofOf(bytes) {{
  let h = 0;
  for (let i = 0; i < bytes.length; i++) h = (h + bytes[i] * (i + 1)) % 4294967296;
  return h.toString(16).padStart(8, '0');
}}
const proofs = new Array(ITEM.n).fill(null);
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
// Each clip is fetched by the page itself (never from a cache: the server sends no-store, the ids are
// this rater's own), its proof computed from the bytes received, then played from memory.
audios.forEach((a, i) => {{
  fetch(ITEM.audio[i], {{cache: 'no-store'}}).then(r => {{
    if (!r.ok) throw new Error('HTTP ' + r.status);
    return r.arrayBuffer();
  }}).then(buf => {{
    proofs[i] = proofOf(new Uint8Array(buf));
    a.src = URL.createObjectURL(new Blob([buf], {{type: 'audio/wav'}}));
    document.getElementById('play' + i).disabled = false;
    setState(i, 'not played yet');
  }}).catch(() => {{
    setState(i, 'could not load', 'err');
    msg.textContent = 'A sample could not be loaded. Check your connection and reload the page.';
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
  const body = {{item_id: ITEM.item_id, proofs: proofs}};
  if (btn.dataset.choice) body.choice = btn.dataset.choice; else body.score = +btn.dataset.score;
  let answered = false;
  for (let attempt = 0; attempt < 3; attempt++) {{   // retries are safe: the server is idempotent
    try {{
      const r = await fetch('/api/answer', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
                                              body: JSON.stringify(body)}});
      if (r.ok) {{ location.replace('/rate'); return; }}
      answered = true;
      const detail = await r.json().then(j => j.detail, () => '');
      if (r.status === 409) {{  // not saved: say so, and let the rater go on to the page the server expects
        msg.innerHTML = '';
        msg.append('This answer was not saved: ' + detail + '. ');
        const go = document.createElement('a'); go.href = '/rate'; go.id = 'continue'; go.textContent = 'Continue';
        msg.append(go);
        return;
      }}
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

"""FastAPI app: consent -> rater session (cookie) -> blind A/B and MOS pages -> done; admin export.

Endpoints
  GET  /                 consent and instructions page
  POST /api/session      {"consent": true} -> sets the `rater` cookie (reuses a valid existing one)
  GET  /rate             the rater's next unanswered item (HTML), or redirect to /done
  GET  /api/next         the same as JSON (used by the load test)
  POST /api/answer       {"item_id", "choice": "A"|"B"|"none"} or {"item_id", "score": 1..5}
                         201 created, 200 duplicate retry (same answer), 409 different answer
  GET  /audio/{audio_id} WAV by opaque id (16 hex chars, looked up in test.json; no file paths)
  GET  /done             thank-you page
  GET  /admin/results?token=T&format=json|csv   all answers (403 without the right token)
  GET  /healthz
Order and side are randomised per rater from (test seed, rater id), so a reload shows the same layout
and the server can tell which system was on which side.
"""

from __future__ import annotations

import csv
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

from fastapi import Cookie, Depends, FastAPI, HTTPException, Path as PathParam, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import db as dbm
from .build import load_test

RATER_RE = re.compile(r"^[0-9a-f]{32}$")
COOKIE = "rater"


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    consent: Literal[True]


class AnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(pattern=r"^[a-z]{2,3}-[0-9]{4}$", max_length=16)
    choice: Optional[Literal["A", "B", "none"]] = None
    score: Optional[int] = Field(default=None, ge=1, le=5, strict=True)

    @model_validator(mode="after")
    def _one_of(self):
        if (self.choice is None) == (self.score is None):
            raise ValueError("give exactly one of choice (A/B item) or score (MOS item)")
        return self


def layout_for(test: dict, rater_id: str) -> list[tuple[str, bool]]:
    """The rater's item order and, per A/B item, whether the sides are swapped (deterministic)."""
    rng = random.Random(f"{test['seed']}:{rater_id}")
    ab = [it["id"] for it in test["items"] if it["type"] == "ab"]
    mos = [it["id"] for it in test["items"] if it["type"] == "mos"]
    rng.shuffle(ab)
    rng.shuffle(mos)
    if not any(not it.get("attention") for it in test["items"] if it["type"] == "mos"):
        # A/B-only test: spread the attention checks among the A/B pages instead of putting them last.
        for att in mos:
            ab.insert(rng.randint(0, len(ab)), att)
        mos = []
    return [(i, rng.random() < 0.5) for i in ab + mos]


def create_app(test_dir: Path | str, db_path: Path | str, admin_token: str | None = None) -> FastAPI:
    test_dir = Path(test_dir).resolve()
    audio_dir = (test_dir / "audio").resolve()
    test = load_test(test_dir)
    items = {it["id"]: it for it in test["items"]}
    audio = test["audio"]
    dbm.init_db(db_path)
    app = FastAPI(title="tts listening test", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.test = test

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

    def next_item(con: sqlite3.Connection, rater_id: str) -> dict:
        lay = layout(rater_id)
        done = dbm.answered_items(con, rater_id)
        total = len(lay)
        for pos, (item_id, flip) in enumerate(lay, start=1):
            if item_id in done:
                continue
            it = items[item_id]
            toks = list(reversed(it["audio"])) if (it["type"] == "ab" and flip) else list(it["audio"])
            return {"done": False, "answered": len(done), "total": total, "position": pos,
                    "item": {"item_id": item_id, "type": it["type"], "hint": it.get("hint"),
                             "audio": [f"/audio/{t}" for t in toks]}}
        return {"done": True, "answered": len(done), "total": total}

    def check_admin(token: Optional[str]):
        if not admin_token or not token or not hmac.compare_digest(token.encode(), admin_token.encode()):
            raise HTTPException(403, "admin token required")

    @app.get("/healthz")
    def healthz():
        return {"ok": True}

    @app.get("/", response_class=HTMLResponse)
    def consent_page(rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        resume = current_rater(con, rater) is not None
        return HTMLResponse(_page(test["title"], CONSENT_HTML.replace("{resume}", "true" if resume else "false")))

    @app.post("/api/session")
    def new_session(body: SessionIn, request: Request, rater: Optional[str] = Cookie(default=None),
                    con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            rid = secrets.token_hex(16)
            dbm.add_rater(con, rid, request.headers.get("user-agent"))
        resp = JSONResponse({"rater_id": rid, "total": len(layout(rid))})
        resp.set_cookie(COOKIE, rid, max_age=30 * 86400, httponly=True, samesite="lax")
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
        return HTMLResponse(_page(test["title"], _item_html(nxt)))

    @app.post("/api/answer")
    def api_answer(body: AnswerIn, rater: Optional[str] = Cookie(default=None), con=Depends(get_db)):
        rid = current_rater(con, rater)
        if rid is None:
            raise HTTPException(401, "no rater session")
        it = items.get(body.item_id)
        if it is None:
            raise HTTPException(404, "unknown item")
        if it["type"] == "ab" and body.choice is None or it["type"] == "mos" and body.score is None:
            raise HTTPException(422, f"item {body.item_id} is a {it['type']} item")
        lay = layout(rid)
        pos, flip = next((p, f) for p, (i, f) in enumerate(lay, start=1) if i == body.item_id)
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

    @app.get("/audio/{audio_id}")
    def get_audio(audio_id: str = PathParam(pattern=r"^[0-9a-f]{16}$")):
        entry = audio.get(audio_id)
        if entry is None:
            raise HTTPException(404, "unknown audio id")
        path = (audio_dir / entry["file"]).resolve()
        if path.parent != audio_dir or not path.is_file():  # test.json is trusted, but be strict anyway
            raise HTTPException(404, "unknown audio id")
        return FileResponse(path, media_type="audio/wav", headers={"Cache-Control": "private, max-age=3600"})

    @app.get("/done", response_class=HTMLResponse)
    def done_page():
        return HTMLResponse(_page(test["title"], "<h1>Thank you!</h1><p>All items are answered. You can close this page.</p>"))

    @app.get("/admin/results")
    def admin_results(token: Optional[str] = Query(default=None, max_length=200),
                      format: Literal["json", "csv"] = Query(default="json")):
        check_admin(token)
        rows = dbm.all_answers(db_path)
        for r in rows:
            it = items.get(r["item_id"], {})
            r["sentence"] = it.get("sentence")
            r["attention"] = bool(it.get("attention"))
            r["expected"] = it.get("expected")
        if format == "json":
            return {"test": test["title"], "seed": test["seed"], "n_answers": len(rows), "answers": rows}
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
<style>body{{font-family:sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;line-height:1.5}}
button{{font-size:1.05rem;padding:.5rem 1rem;margin:.25rem}} button:disabled{{opacity:.45}}
.row{{margin:1rem 0}} .ok{{color:#070}} .err{{color:#b00}} progress{{width:100%}}</style>
</head><body>{body}</body></html>"""


CONSENT_HTML = """
<h1>Listening test</h1>
<p>You will hear short synthetic and natural speech recordings and judge them. Please use headphones
in a quiet place. The test is anonymous: we store only your answers, a random rater id (in a cookie)
and your browser's name. You may stop at any time; reloading the page resumes where you left off.</p>
<ul>
<li><b>A/B pages</b>: play both samples to the end, then choose the one that sounds better overall
(or "no preference").</li>
<li><b>Quality pages</b>: play the sample to the end and rate it from 1 (bad) to 5 (excellent).
Some pages check attention by asking you to pick a particular score: please follow them.</li>
</ul>
<p><label><input type="checkbox" id="consent"> I agree to take part and to the storage of my answers.</label></p>
<button id="start" disabled>Start</button> <span id="msg" class="err"></span>
<script>
const cb = document.getElementById('consent'), start = document.getElementById('start');
if ({resume}) { start.textContent = 'Continue'; }
cb.addEventListener('change', () => { start.disabled = !cb.checked; });
start.addEventListener('click', async () => {
  start.disabled = true;
  const r = await fetch('/api/session', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                          body: JSON.stringify({consent: true})});
  if (r.ok) { location.href = '/rate'; } else { document.getElementById('msg').textContent = 'Error ' + r.status; start.disabled = false; }
});
</script>"""


def _item_html(nxt: dict) -> str:
    it = nxt["item"]
    labels = ["A", "B"] if it["type"] == "ab" else ["sample"]
    players = "".join(
        f'<div class="row"><audio id="audio{i}" preload="auto" src="{html.escape(src)}"></audio>'
        f'<button class="play" data-i="{i}" id="play{i}">Play {lab}</button> '
        f'<span id="state{i}">not played yet</span></div>'
        for i, (src, lab) in enumerate(zip(it["audio"], labels)))
    if it["type"] == "ab":
        question = "<h2>Which sample sounds better overall?</h2>"
        answers = ('<button class="ans" data-choice="A" id="ans-A" disabled>A is better</button>'
                   '<button class="ans" data-choice="none" id="ans-none" disabled>No preference</button>'
                   '<button class="ans" data-choice="B" id="ans-B" disabled>B is better</button>')
    else:
        hint = " (if you hear beeps, choose the number of beeps)" if it.get("hint") == "beeps" else ""
        question = f"<h2>How natural does this sample sound?{hint}</h2>"
        names = {1: "Bad", 2: "Poor", 3: "Fair", 4: "Good", 5: "Excellent"}
        answers = "".join(f'<button class="ans" data-score="{s}" id="ans-{s}" disabled>{s} {names[s]}</button>'
                          for s in range(1, 6))
    data = json.dumps({"item_id": it["item_id"], "n": len(it["audio"])})
    return f"""
<p>Item {nxt['answered'] + 1} of {nxt['total']}</p>
<progress id="progress" value="{nxt['answered']}" max="{nxt['total']}"></progress>
{question}{players}
<p class="row" id="answers">{answers}</p>
<p id="hint">Play every sample to the end to enable the answer buttons.</p><p id="msg" class="err"></p>
<script>
const ITEM = {data};
const audios = [...Array(ITEM.n).keys()].map(i => document.getElementById('audio' + i));
const finished = new Set();
function playedFraction(a) {{
  let s = 0; for (let k = 0; k < a.played.length; k++) s += a.played.end(k) - a.played.start(k);
  return a.duration > 0 ? s / a.duration : 0;
}}
audios.forEach((a, i) => {{
  a.addEventListener('ended', () => {{
    if (playedFraction(a) < 0.9) return;  // must have actually listened, not skipped
    finished.add(i);
    document.getElementById('state' + i).textContent = 'played';
    document.getElementById('state' + i).className = 'ok';
    if (finished.size === ITEM.n) {{
      document.querySelectorAll('.ans').forEach(b => b.disabled = false);
      document.getElementById('hint').textContent = '';
    }}
  }});
}});
document.querySelectorAll('.play').forEach(btn => btn.addEventListener('click', () => {{
  audios.forEach(a => a.pause());
  const a = audios[+btn.dataset.i]; a.currentTime = 0; a.play();
}}));
document.querySelectorAll('.ans').forEach(btn => btn.addEventListener('click', async () => {{
  document.querySelectorAll('.ans').forEach(b => b.disabled = true);
  const body = {{item_id: ITEM.item_id}};
  if (btn.dataset.choice) body.choice = btn.dataset.choice; else body.score = +btn.dataset.score;
  for (let attempt = 0; attempt < 3; attempt++) {{   // retries are safe: the server is idempotent
    try {{
      const r = await fetch('/api/answer', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
                                              body: JSON.stringify(body)}});
      if (r.ok || r.status === 409) {{ location.href = '/rate'; return; }}
      document.getElementById('msg').textContent = 'Error ' + r.status; break;
    }} catch (e) {{ await new Promise(res => setTimeout(res, 500)); }}
  }}
  document.querySelectorAll('.ans').forEach(b => b.disabled = false);
}}));
</script>"""

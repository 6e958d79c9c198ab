"""The speech server's FastAPI app (`python -m tts.serve`; tts/serve/__init__.py lists the endpoints).

Requests are checked before any synthesis (4xx with an OpenAI-style JSON error, never a 500 for bad input);
the text is prepared (`Pipeline.utterance`: sentence split, over-long sentences cut at clause
boundaries) on the thread pool, its parts are spoken by the shared `Batcher`, and the response streams each
part as soon as its batch is vocoded.  The status line waits for the first part, so a request that cannot
start (busy server, a failed batch) still gets a proper status; a failure after that ends the stream early.

A client that hangs up cancels its request at once, before its first audio as after it (no more parts
of it are spoken).  Each response has at most `ServeLimits.parts_ahead` parts spoken and not yet sent
(the batcher's job window): a client that stops reading pauses its own synthesis, and the connection
layer (tts/serve/connections.py) drops it after its send timeout.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException

from tts.api import Voice
from tts.runtime.controls import RANGES
from tts.serve.batcher import Batcher, BatcherBusy, Job
from tts.serve.formats import ALL_FORMATS, DEFAULT_FORMAT, FORMATS, MEDIA_TYPES, encoder, to_int16
from tts.serve.page import page_html
from tts.text.errors import TextError
from tts.web_limits import BodyLimit, HostCheck, PrefixLimiter

# OpenAI's model names (openai.types.audio.SpeechModel), accepted for client compatibility: the request's voice
# picks the model that speaks
MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
DEFAULT_VOICE = "default"  # the request's voice that means the server's first (default) voice
# OpenAI's built-in voice names: each speaks with the server's default voice (unless a served voice has the name)
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
                 "marin", "cedar")
STREAM_FORMATS = ("audio", "sse")  # the response's bytes as they are, or OpenAI's server-sent events
# OpenAI's range, cut to the controls' own (tts.runtime.controls.RANGES: above 2 a short text is inaudible)
SPEED_RANGE = (max(0.25, RANGES["speed"][0]), min(4.0, RANGES["speed"][1]))
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # the page's own inline script and style; Web Audio plays the stream, the <audio> a blob: of it
    "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
                               "'unsafe-inline'; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; "
                               "base-uri 'none'; form-action 'self'",
}


@dataclass(frozen=True)
class ServeLimits:
    max_chars: int = 4096  # input characters per request (OpenAI's limit)
    max_body_bytes: int = 64 * 1024  # request body; bigger gets 413 before it is read whole
    first_audio_timeout_s: float = 60.0  # queueing + first part; past it 503 (the server is overloaded)
    request_timeout_s: float = 300.0  # the whole response; past it the stream is ended early
    requests_per_minute: float = 600.0  # per client address; 0 = no limit (the loopback load test)
    seed: int = 0  # the refiner noise seed of every request (the same text gives the same audio)
    parts_ahead: int = 4  # parts of a response spoken and not yet sent (back-pressure; memory per client)
    max_head_bytes: int = 16 * 1024  # request line + headers (431 past it)

    def __post_init__(self) -> None:
        # "not x <= v <= y" also refuses NaN; the upper bounds only catch absurd values (a year of seconds)
        for name, low, high in (("max_chars", 1, 10**7), ("max_body_bytes", 64, 2**30),
                                ("first_audio_timeout_s", 1e-3, 86400), ("request_timeout_s", 1e-3, 86400 * 7),
                                ("requests_per_minute", 0, 10**9), ("seed", 0, 2**31 - 1), ("parts_ahead", 1, 1024),
                                ("max_head_bytes", 1024, 2**20)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")


Name = Annotated[str, StringConstraints(max_length=128)]


class VoiceId(BaseModel):
    """OpenAI's custom-voice reference {"id": ...}: here the id is a voice name as a plain `voice` is."""

    model_config = ConfigDict(extra="forbid")
    id: Name


class SpeechIn(BaseModel):
    """POST /v1/audio/speech: OpenAI's request.  response_format defaults to mp3 as OpenAI's (the official
    client leaves it out); `instructions` is not supported (no model here follows instructions) and is
    refused like any unknown field."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(max_length=128)
    input: str
    voice: Name | VoiceId = Field(union_mode="left_to_right")
    response_format: str = Field(default=DEFAULT_FORMAT, max_length=16)
    speed: float = Field(default=1.0, allow_inf_nan=False)
    stream_format: str = Field(default="audio", max_length=16)

    @property
    def voice_name(self) -> str:
        return self.voice if isinstance(self.voice, str) else self.voice.id


def sse_event(kind: str, **fields: Any) -> bytes:
    """One server-sent event of stream_format "sse": `data: {"type": kind, **fields}` and a blank line (OpenAI's
    speech.audio.delta {audio: base64} and speech.audio.done {usage})."""
    return b"data: " + json.dumps({"type": kind, **fields}, separators=(",", ":")).encode() + b"\n\n"


class StreamAborted(RuntimeError):
    """A response whose status line was sent could not be completed (timeout, failed batch)."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_body(message: str, param: str | None = None, code: str | None = None,
               kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class RequestGate:
    """Before any route: a Host outside the allow-list is 421 (DNS rebinding, tts.web_limits.HostCheck), a
    request head over `max_head_bytes` 431 (one that arrived whole in one read: the connection layer
    refuses an incomplete one), and a client address over its requests per minute on /v1/ 429; and
    SECURITY_HEADERS go on every response.  Plain ASGI, not @app.middleware("http"): that one re-wraps a
    streamed body and ends it normally when the app fails mid-stream, so a cut response would reach the
    client looking complete."""

    def __init__(self, app, limiter: PrefixLimiter | None, hosts: HostCheck | None, max_head_bytes: int) -> None:
        self.app, self.limiter, self.hosts, self.max_head_bytes = app, limiter, hosts, max_head_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        def refuse(status: int, message: str, code: str, headers: dict[str, str] | None = None):
            return JSONResponse(error_body(message, code=code), status_code=status, headers=headers)

        headers = scope["headers"]
        head = len(scope.get("raw_path") or b"") + len(scope["query_string"]) + sum(len(k) + len(v) + 4
                                                                                    for k, v in headers)
        host = next((v for k, v in headers if k == b"host"), None)
        client = scope["client"][0] if scope.get("client") else "?"
        if head > self.max_head_bytes:
            resp = refuse(431, f"request head over {self.max_head_bytes} bytes", "header_too_large",
                          {"Connection": "close"})
        elif self.hosts is not None and not self.hosts.allows(host):
            resp = refuse(421, "this server does not answer for the Host "
                               f"{host.decode('latin-1')[:100]!r} (start it with --allow-host NAME)", "bad_host")
        elif (self.limiter is not None and scope["path"].startswith("/v1/")
              and not self.limiter.allow("request", client)):
            resp = refuse(429, "too many requests from this address", "rate_limited", {"Retry-After": "10"})
        else:
            return await self.app(scope, receive, with_headers)
        return await resp(scope, receive, with_headers)


async def client_gone(receive) -> None:
    """Returns when the client has hung up (its request body already read: the next ASGI message is the
    disconnect)."""
    while (await receive())["type"] != "http.disconnect":
        pass


@dataclass(frozen=True)
class Speaker:
    """A voice the server speaks with and the batcher that runs its pipeline (one worker thread each)."""

    voice: Voice
    batcher: Batcher


def create_app(speakers: dict[str, Speaker], limits: ServeLimits = ServeLimits(), hosts: HostCheck | None = None,
               connections: Callable[[], dict[str, int]] | None = None) -> FastAPI:
    """The app over loaded voices (name -> Speaker; the first is the default, which a request's voice
    "default" also names) and their running batchers (the caller stops them); `hosts` the Host allow-list
    (None: any Host), `connections` the connection layer's counters for /health."""
    if not speakers:
        raise ValueError("the server needs at least one voice")
    default_name = next(iter(speakers))
    app = FastAPI(title="tts speech server", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes, too_large=lambda message: JSONResponse(
        error_body(message, code="body_too_large"), status_code=413,
        headers={**SECURITY_HEADERS, "Connection": "close"}))
    limiter = PrefixLimiter({"request": (limits.requests_per_minute, 60.0)}) if limits.requests_per_minute else None
    # outermost: its headers go on every answer
    app.add_middleware(RequestGate, limiter=limiter, hosts=hosts, max_head_bytes=limits.max_head_bytes)
    rates = {s.voice.sample_rate for s in speakers.values()}
    if len(rates) != 1:
        raise ValueError(f"the voices speak at different sample rates {sorted(rates)}; serve them apart")
    sample_rate = rates.pop()
    model_ids = {name: s.voice.name for name, s in speakers.items()}
    # what a request may name: the one place these are decided (check(), /v1/models and the voice lists read them)
    accepted_models = list(dict.fromkeys([*model_ids.values(), *MODEL_ALIASES]))
    voice_names = {**{name: name for name in speakers}, DEFAULT_VOICE: default_name,
                   **{alias: default_name for alias in OPENAI_VOICES if alias not in speakers}}
    started = int(time.time())


    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return JSONResponse(error_body(exc.message, exc.param, exc.code), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        # the input itself is never echoed (NaN in it cannot be JSON-encoded; it may be huge)
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(x) for x in first.get("loc", ()) if x != "body"]
        field = ".".join(loc) or None
        msg = str(first.get("msg", "invalid request"))
        if first.get("type") == "json_invalid":  # loc is the character offset, not a field
            field, msg = None, "the body is not valid JSON"
        elif first.get("type") in ("model_attributes_type", "dict_type"):
            msg = "the body must be a JSON object (Content-Type: application/json)"
        message = f"{field}: {msg}" if field else msg
        return JSONResponse(error_body(message, field), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = str(exc.detail)
        if exc.status_code == 400 and message == "There was an error parsing the body":  # FastAPI's words
            message = "the body could not be parsed (not JSON, or nested too deeply)"  # e.g. RecursionError
        return JSONResponse(error_body(message), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception):
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}", kind="server_error"), status_code=500)

    def voice_health(s: Speaker) -> dict[str, Any]:
        return {"model": s.voice.name, "runtime": s.voice.runtime, "pending_requests": s.batcher.pending(),
                "max_batch": s.batcher.max_batch, "batches": s.batcher.stats.as_dict()}

    @app.get("/health")
    async def health():
        # the top level is the default voice's (as with one voice); "voices" has each voice's
        return {"status": "ok", **voice_health(speakers[default_name]), "torch_loaded": "torch" in sys.modules,
                "sample_rate": sample_rate, "default_voice": default_name,
                "voices": {name: voice_health(s) for name, s in speakers.items()},
                **({"connections": connections()} if connections is not None else {})}

    @app.get("/v1/models")
    async def models():
        # a served voice's own model names its voice; OpenAI's names speak with the requested voice's model
        voice_of = {model_id: name for name, model_id in reversed(model_ids.items())}
        return {"object": "list", "data": [{"id": model_id, "object": "model", "created": started, "owned_by": "tts",
                                            "voice": voice_of.get(model_id)} for model_id in accepted_models]}

    @app.get("/v1/voices")
    @app.get("/v1/audio/voices")
    async def voices():
        # data: the served voices; aliases: every other accepted name (OpenAI's voices, "default") -> its voice
        return {"object": "list", "default": default_name,
                "data": [{"id": name, "object": "voice", "model": model_ids[name]} for name in speakers],
                "aliases": {alias: name for alias, name in voice_names.items() if alias not in speakers}}

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return HTMLResponse(page_html(model_ids[default_name], list(speakers), sample_rate, limits.max_chars,
                                      SPEED_RANGE))

    @app.get("/favicon.ico")
    async def favicon():
        return Response(status_code=204)

    def check(req: SpeechIn) -> Speaker:
        """The request's speaker, once every field is checked."""
        if req.model not in accepted_models:
            raise ApiError(400, f"unknown model {req.model!r}; this server has {accepted_models}", "model",
                           "model_not_found")
        if req.voice_name not in voice_names:
            raise ApiError(400, f"unknown voice {req.voice_name!r}; this server has {list(voice_names)}", "voice")
        if req.response_format not in FORMATS:
            missing = " (aac needs PyAV: pip install av)" if req.response_format in ALL_FORMATS else ""
            raise ApiError(400, f"response_format {req.response_format!r} is not supported{missing}; use one of "
                                f"{list(FORMATS)}", "response_format")
        if req.stream_format not in STREAM_FORMATS:
            raise ApiError(400, f"stream_format must be one of {list(STREAM_FORMATS)}, got {req.stream_format!r}",
                           "stream_format")
        if not SPEED_RANGE[0] <= req.speed <= SPEED_RANGE[1]:
            raise ApiError(400, f"speed must be in [{SPEED_RANGE[0]}, {SPEED_RANGE[1]}], got {req.speed} (OpenAI "
                                f"allows up to 4; above {SPEED_RANGE[1]} this model's speech falls to near-silence)",
                           "speed")
        if not req.input.strip():
            raise ApiError(400, "input is empty", "input")
        if len(req.input) > limits.max_chars:
            raise ApiError(400, f"input is {len(req.input)} characters, over the limit of {limits.max_chars}; "
                                "send it in several requests", "input", "input_too_long")
        return speakers[voice_names[req.voice_name]]

    @app.post("/v1/audio/speech")
    async def speech(req: SpeechIn, request: Request):
        speaker = check(req)
        voice, batcher = speaker.voice, speaker.batcher
        speed = None if req.speed == 1.0 else req.speed  # 1.0 = the voice's own rate, as with no control
        loop = asyncio.get_running_loop()
        parts: asyncio.Queue = asyncio.Queue()

        def deliver(k: int, item) -> None:
            if k >= 0:  # a part waits as the 16-bit samples it will be sent as: half the memory of float32
                item = to_int16(item)
            loop.call_soon_threadsafe(parts.put_nowait, (k, item))

        # the body is read: the next message is the hang-up.  Watched until the response starts (then
        # StreamingResponse watches it and cancels body()), so a client that leaves while its request waits
        # for the first audio frees its place and has nothing more spoken
        gone = asyncio.ensure_future(client_gone(request.receive))
        job = None
        try:
            try:
                controls = voice.controls(seed=limits.seed, speed=speed)
                # sse events carry each part's words (timestamps from the model's durations)
                utt = await run_in_threadpool(voice.pipeline.utterance, req.input, controls,
                                              timestamps=req.stream_format == "sse")
                job = Job(utt, deliver, window=limits.parts_ahead)
            except TextError as e:
                raise ApiError(400, f"input: {e}", "input", "bad_text") from e
            except ValueError as e:  # a control this model lacks (speed on an AR voice)
                raise ApiError(400, str(e), "speed") from e
            if gone.done():
                return Response(status_code=499)  # nginx's "client closed request": for the log only
            try:
                batcher.submit(job)
            except BatcherBusy as e:
                raise ApiError(503, f"server busy: {e}; retry later", code="busy") from e
            deadline = time.monotonic() + limits.request_timeout_s
            getter = asyncio.ensure_future(parts.get())
            try:
                await asyncio.wait({getter, gone}, timeout=limits.first_audio_timeout_s,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                getter.cancel()  # a no-op once it has its part
            if not getter.done() or getter.cancelled():
                batcher.cancel(job)
                if gone.done():
                    return Response(status_code=499)
                raise ApiError(503, f"server busy: no audio within {limits.first_audio_timeout_s:g} s; retry later",
                               code="busy")
            first = getter.result()
        except BaseException:
            if job is not None:
                batcher.cancel(job)
            raise
        finally:
            gone.cancel()
        if first[0] < 0 and isinstance(first[1], TextError):
            raise ApiError(400, f"input: {first[1]}", "input", "bad_text")
        if first[0] < 0:
            batcher.cancel(job)
            raise ApiError(503 if isinstance(first[1], BatcherBusy) else 500, f"synthesis failed: {first[1]}",
                           code="synthesis_failed")
        audio = encoder(req.response_format, sample_rate)
        sse = req.stream_format == "sse"
        samples = 0
        fresh_words: list[dict] = []  # words placed since the last event (sse)

        def chunk(k: int, wave: np.ndarray, head: bytes) -> bytes:
            """Part k with the pause before it, encoded (after `head`, the format's header before part 0)."""
            nonlocal samples
            pause = to_int16(voice.pipeline.silence(utt.parts[k].pause_s))
            placed = len(utt.run.words)
            voice.pipeline.place_words(utt, k, samples + pause.size)  # (timestamps asked for: sse)
            fresh_words.extend(w.to_dict() for w in utt.run.words[placed:])
            wave = np.concatenate([pause, wave])
            samples += wave.size
            return head + audio.piece(wave)

        def tail() -> bytes:
            """An SSML document's final break, as silence after the last part."""
            nonlocal samples
            silence = to_int16(voice.pipeline.silence(utt.tail_s))
            samples += silence.size
            return audio.piece(silence) if silence.size else b""

        async def encoded(fn, *args) -> bytes:
            """The encoder's bytes, as server-sent events for "sse" (with the words of the audio in them, seconds
            from the start of the answer); a costly encoder runs on a worker thread (the event loop keeps
            streaming the other responses)."""
            data = await run_in_threadpool(fn, *args) if audio.costly else fn(*args)
            if sse and (data or fresh_words):
                words = {"words": fresh_words[:]} if fresh_words else {}
                fresh_words.clear()
                return sse_event("speech.audio.delta", audio=base64.b64encode(data).decode("ascii"), **words)
            return data

        def done() -> bytes:
            # usage as OpenAI's: input tokens are the symbols the model read, output tokens the samples spoken
            tokens = sum(len(part.ids) for part in utt.parts)
            return sse_event("speech.audio.done", usage={"input_tokens": tokens, "output_tokens": samples,
                                                         "total_tokens": tokens + samples}) if sse else b""

        async def body(k: int, item: np.ndarray):
            # an error after the status line is raised: uvicorn then drops the connection without the final
            # chunk, so the client sees an incomplete response rather than a short "complete" one
            head = audio.start()
            try:
                while True:
                    data, head = await encoded(chunk, k, item, head), b""
                    del item  # the wave is encoded: while the send below waits, only its bytes are held
                    if data:
                        yield data  # returns when the bytes are in the transport (which pauses a non-reader)
                    batcher.consumed(job)  # part k is passed on: the job's window opens by one
                    left = deadline - time.monotonic()
                    try:
                        k, item = await asyncio.wait_for(parts.get(), max(left, 0.0))
                    except asyncio.TimeoutError:
                        raise StreamAborted(f"request_timeout_s={limits.request_timeout_s:g} passed") from None
                    if k < 0:
                        if item is not None:
                            raise StreamAborted(f"synthesis failed: {item}")
                        yield await encoded(tail) + await encoded(audio.finish) + done()
                        return
            finally:
                batcher.cancel(job)  # the client went away or the stream ended: drop what is left

        headers = {"X-Sample-Rate": str(audio.rate), "Cache-Control": "no-store", "X-Parts": str(len(utt.parts)),
                   "X-Audio-Format": req.response_format}
        return StreamingResponse(body(*first), media_type="text/event-stream" if sse else MEDIA_TYPES[req.response_format],
                                 headers=headers)

    return app


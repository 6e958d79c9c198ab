"""Connection handling of the speech server below the app: a uvicorn h11 protocol that idle or slow sockets
cannot use to starve other clients, and a client that stops reading cannot hold for ever.

uvicorn alone has no timer on a fresh connection (one that sends nothing, or trickles its request head,
is held until the client leaves) and its `limit_concurrency` answers 503 to *every* request once that many
connections are open, so 1,100 silent sockets from one client stopped the server (issue 35).  Here:

- **Per-client and total bounds with eviction of idle connections.**  A connection is idle while it waits
  for a request head (fresh, trickling, or keep-alive between requests); one with a request in progress is
  busy.  A new connection over `max_per_client` (per IPv4 address, per IPv6 /64) or over `max_connections`
  closes the oldest idle connection of that client (or, at the total bound, the oldest idle one anywhere)
  instead of being refused: a client's silent sockets can only push out its own silent sockets, and a
  newcomer (/health, a real request) always gets in while any connection is idle.  Only when every counted
  connection is busy is the newcomer refused (503, `Connection: close`).
- **Receive deadlines.**  A request head must arrive whole within `head_timeout_s` of the connection's
  start (or of the previous response's end), and its body within `body_timeout_s` of the head: a deadline
  on the whole, not per byte, so trickling a byte at a time does not extend it.  Past it: 408 and close.
- **Head size.**  A request head (request line + headers) over `max_head_bytes` is answered 431 and closed
  before h11 parses it, whether it arrives in one read or trickles in (h11's own bound applies only to an
  incomplete head, and answers a plain-text 400).
- **Send deadline.**  Each socket's kernel send buffer is fixed at `send_buffer_bytes` (Linux would grow it
  to 4 MiB for a loopback peer: 24 sentences a client that does not read would still have made us speak);
  the transport pauses the response when its own write buffer passes 64 KiB (asyncio's high-water mark)
  and uvicorn then awaits `drain`, which pauses the response generator and, through the
  batcher's per-job window (tts/serve/batcher.py), that request's synthesis.  A client that accepts no
  bytes for `send_timeout_s` while we have some for it is aborted (RST, buffer dropped): its request is
  cancelled and its memory freed.

The counters (`ConnectionGuard.stats`) are in GET /health under "connections".
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# the address a per-client bound counts: the IPv4 address, or the /64 of an IPv6 one (one host commonly
# holds a whole /64); the same key as the request rate limit's
from tts.web_limits import rate_key as client_key

log = logging.getLogger("tts.serve")
HEAD_END = re.compile(rb"\n\r?\n")  # the blank line after the headers (h11 takes bare LF line ends too)


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1024  # open connections in all
    max_per_client: int = 64  # open connections per client address (IPv6: per /64)
    head_timeout_s: float = 10.0  # a request head, whole, from connection start or the previous response
    body_timeout_s: float = 30.0  # a request body, whole, from the end of its head
    send_timeout_s: float = 30.0  # a paused response: the client must accept some bytes within this
    max_head_bytes: int = 16 * 1024  # request line + headers
    send_buffer_bytes: int = 128 * 1024  # SO_SNDBUF (the kernel doubles it): ~3 s of 16-bit audio in flight

    def __post_init__(self) -> None:
        for name, low in (("max_connections", 1), ("max_per_client", 1), ("max_head_bytes", 1024),
                          ("send_buffer_bytes", 4096)):
            if not low <= getattr(self, name) <= 10**7:
                raise ValueError(f"{name} must be in [{low}, 10**7], got {getattr(self, name)!r}")
        for name in ("head_timeout_s", "body_timeout_s", "send_timeout_s"):
            if not 0 < getattr(self, name) <= 86400:  # also refuses NaN
                raise ValueError(f"{name} must be in (0, 86400] seconds, got {getattr(self, name)!r}")


def raw_response(status: int, reason: str, message: str, code: str) -> bytes:
    """A whole HTTP/1.1 error response with the app's JSON error shape, written straight to a transport
    (outside h11's state machine: the connection is closed right after)."""
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"connection: close\r\n\r\n").encode() + body


class ConnectionGuard:
    """The shared state of all connections: who is open, per client, in arrival order, and the counters."""

    def __init__(self, limits: ConnectionLimits = ConnectionLimits()) -> None:
        self.limits = limits
        self.open: dict[GuardedH11Protocol, None] = {}  # insertion-ordered: oldest first
        self.by_client: dict[str, dict[GuardedH11Protocol, None]] = {}
        self.counts = {"refused": 0, "evicted": 0, "head_timeouts": 0, "body_timeouts": 0, "send_timeouts": 0,
                       "head_too_large": 0}

    def stats(self) -> dict[str, int]:
        return {"open": len(self.open), "clients": len(self.by_client), **self.counts}

    def admit(self, conn: "GuardedH11Protocol") -> bool:
        """Count `conn` in, closing the oldest idle connection where a bound is reached; False (refuse it)
        when only busy connections fill the bound."""
        mine = self.by_client.get(conn.client_key, {})
        for pool, bound in ((mine, self.limits.max_per_client), (self.open, self.limits.max_connections)):
            if len(pool) >= bound:
                victim = next((c for c in pool if c.idle()), None)
                if victim is None:
                    self.counts["refused"] += 1
                    return False
                self.counts["evicted"] += 1
                victim.drop()
        self.open[conn] = None
        self.by_client.setdefault(conn.client_key, {})[conn] = None
        return True

    def forget(self, conn: "GuardedH11Protocol") -> None:
        self.open.pop(conn, None)
        mine = self.by_client.get(conn.client_key)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.by_client[conn.client_key]


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard` (set by `guarded_protocol`)."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client_key = "?"
        self._phase: str | None = None  # "head" (waiting for a request head), "body", or None
        self._deadline: asyncio.TimerHandle | None = None
        self._send_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # bytes received in this head phase
        self._head_tail = b""  # their last 2 bytes: a blank line split across reads is still found
        self._closed = False

    # --- connection lifetime ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.client_key = client_key(self.client[0] if self.client else None)
        if not self.guard.admit(self):
            self._closed = True
            transport.write(raw_response(503, "Service Unavailable", "too many connections busy from this address"
                                         if len(self.guard.by_client.get(self.client_key, ())) >=
                                         self.guard.limits.max_per_client else "too many connections busy",
                                         "too_many_connections"))
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # set, not left to autotuning, so that back-pressure reaches us (see above)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.guard.limits.send_buffer_bytes)
        self._sync_phase()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._cancel_timers()
        self.guard.forget(self)
        super().connection_lost(exc)

    def idle(self) -> bool:
        """Waiting for a request head, no response in progress: closing it loses no one's work."""
        return (not self._closed and self.conn.their_state is h11.IDLE
                and (self.cycle is None or self.cycle.response_complete))

    def drop(self) -> None:
        """Close this connection now (evicted): it leaves the counts at once, not when the loop gets to it."""
        self._closed = True
        self._cancel_timers()
        self.guard.forget(self)
        self.transport.close()

    def _cancel_timers(self) -> None:
        for timer in (self._deadline, self._send_deadline):
            if timer is not None:
                timer.cancel()
        self._deadline = self._send_deadline = None

    # --- receiving: deadlines and the head size ---------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._closed:
            return  # a refused or dropped connection: its bytes are not parsed
        if self._phase == "head" and self._head_too_large(data):
            self.guard.counts["head_too_large"] += 1
            self._refuse(431, "Request Header Fields Too Large",
                         f"request head over {self.guard.limits.max_head_bytes} bytes", "header_too_large")
            return
        super().data_received(data)
        if not self._closed and not self.transport.is_closing():
            self._sync_phase()

    def _head_too_large(self, data: bytes) -> bool:
        """Would the head being received, with `data`, end past max_head_bytes (or not end by then)?"""
        limit = self.guard.limits.max_head_bytes
        seen, tail = self._head_bytes, self._head_tail
        self._head_bytes += len(data)
        self._head_tail = (tail + data)[-2:]
        if self._head_bytes <= limit:
            return False
        end = HEAD_END.search(tail + data, 0, limit - seen + len(tail))  # a blank line ending inside the limit
        return end is None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self._closed and not self.transport.is_closing():
            self._sync_phase()  # a keep-alive connection waits for its next head: the head deadline again

    def _sync_phase(self) -> None:
        """Arm the deadline of the phase the connection is in, when it enters it."""
        state = self.conn.their_state
        phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase:
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase, self._head_bytes, self._head_tail = phase, 0, b""
        limits = self.guard.limits
        if phase is not None:
            timeout = limits.head_timeout_s if phase == "head" else limits.body_timeout_s
            self._deadline = self.loop.call_later(timeout, self._receive_timed_out, phase)

    def _receive_timed_out(self, phase: str) -> None:
        self._deadline = None
        if self._closed or self.transport.is_closing():
            return
        self.guard.counts[f"{phase}_timeouts"] += 1
        if phase == "head" and self._head_bytes == 0:
            self.drop()  # nothing asked (a fresh or keep-alive connection): close without a word
        elif self.cycle is not None and self.cycle.response_started:
            self.drop()  # the app already answered (e.g. 413 early): only the connection is left to end
        else:
            what = "request head" if phase == "head" else "request body"
            seconds = self.guard.limits.head_timeout_s if phase == "head" else self.guard.limits.body_timeout_s
            self._refuse(408, "Request Timeout", f"the {what} did not arrive within {seconds:g} s", "timeout")

    def _refuse(self, status: int, reason: str, message: str, code: str) -> None:
        """Answer with `status` outside h11 and close; an app already running on this connection sees the
        client gone (http.disconnect) and its request is cancelled."""
        self.transport.write(raw_response(status, reason, message, code))
        self.drop()

    # --- sending: a deadline while the client does not read ---------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_deadline is None and not self._closed:
            self._send_deadline = self.loop.call_later(self.guard.limits.send_timeout_s, self._send_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_deadline is not None:
            self._send_deadline.cancel()
            self._send_deadline = None

    def _send_timed_out(self) -> None:
        self._send_deadline = None
        if self._closed:
            return
        self.guard.counts["send_timeouts"] += 1
        log.warning("%s: read nothing for %g s: dropped", self.client_key, self.guard.limits.send_timeout_s)
        self._closed = True
        self._cancel_timers()
        self.guard.forget(self)
        self.transport.abort()  # close() would wait to flush the buffer this client does not read


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """A protocol class (uvicorn's `http=`) whose connections share `guard`."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})

"""ASGI pieces shared by the project's two web servers (tts.serve, tts.listening), so that neither imports
the other.

`RateLimiter` keeps token buckets per (kind, client address).

`HostCheck` is the Host header allow-list against DNS rebinding.

`BodyLimit` refuses a request body over `limit` bytes: at once by its Content-Length, and while it is
read for chunked bodies (no length), so a huge request is never buffered. Each server keeps its own
error shape: `too_large(message)` makes the 413 response for the Content-Length case; in the chunked
case a Starlette HTTPException(413, message) is raised into the app, whose own exception handler
renders it (FastAPI's body parsing passes an HTTPException on instead of turning it into a 400).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import Response


class BodyLimit:
    def __init__(self, app: Any, limit: int, too_large: Callable[[str], Response]) -> None:
        self.app, self.limit, self.too_large = app, limit, too_large

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        message = f"request body over {self.limit} bytes"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await self.too_large(message)(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, message)
            return msg

        return await self.app(scope, limited, send)


class RateLimiter:
    """Token buckets per (kind, client address): `rate` tokens per `per_s` seconds, burst = rate."""

    def __init__(self, limits: dict[str, tuple[float, float]]):
        self.limits = limits
        self.buckets: dict[tuple[str, str], tuple[float, float]] = {}
        self.lock = threading.Lock()

    def allow(self, kind: str, client: str) -> bool:
        rate, per_s = self.limits[kind]
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get((kind, client), (rate, now))
            tokens = min(rate, tokens + (now - last) * rate / per_s)
            ok = tokens >= 1
            self.buckets[(kind, client)] = (tokens - 1 if ok else tokens, now)
            if len(self.buckets) > 100_000:  # bounded memory under address spraying
                self.buckets.clear()
        return ok


WILDCARD_ADDRESSES = ("", "0.0.0.0", "::")
LOOPBACK_NAMES = ("localhost", "localhost.")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostCheck:
    """Which Host headers a server answers, against DNS rebinding: a web page of evil.example whose name
    the attacker re-points at 127.0.0.1 reaches a loopback server from the victim's browser as a same-origin
    page, and only its Host header ("evil.example") tells it apart.  Allowed: "localhost", loopback
    addresses, the bind address, and the names in `allow` ("*" allows any Host).  When bound to a wildcard
    address any IP literal is allowed too (a rebinding needs a name; an address as Host is what a client of
    a LAN server sends).  A request without Host (HTTP/1.0; a browser always sends one) is allowed.  The port
    in the header is not checked."""

    def __init__(self, bind_host: str, allow: Iterable[str] = ()) -> None:
        self.any = "*" in allow
        self.any_ip = bind_host in WILDCARD_ADDRESSES
        names = {*LOOPBACK_NAMES, *(a.lower().rstrip(".") for a in allow if a != "*")}
        bind = _ip(bind_host.strip("[]"))
        if bind is None and bind_host not in WILDCARD_ADDRESSES:
            names.add(bind_host.lower().rstrip("."))
        self.names = frozenset(names)
        self.bind_ip = bind

    def allows(self, host: bytes | None) -> bool:
        if host is None or self.any:
            return True
        try:
            text = host.decode("ascii").strip().lower()
        except UnicodeDecodeError:
            return False
        if text.startswith("["):  # [IPv6]:port
            name, sep, rest = text[1:].partition("]")
            if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
                return False
        else:
            name, sep, port = text.rpartition(":")
            if not sep:
                name = text
            elif not port.isdigit():
                return False
        ip = _ip(name)
        if ip is None:
            return name.rstrip(".") in self.names
        return ip.is_loopback or ip == self.bind_ip or self.any_ip

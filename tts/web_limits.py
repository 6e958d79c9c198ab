"""ASGI pieces shared by the project's two web servers (tts.serve, tts.listening), so that neither imports
the other.

`rate_key` is the unit a per-client bound counts: one machine owns a whole IPv6 /64 (SLAAC hands out 2^64
addresses), so an IPv6 client is keyed by its /64; IPv4 by its address; an IPv4-mapped IPv6 address as its
IPv4 (`client_ip`).  The speech server's connection bounds (tts.serve.connections) count the same key.

`PrefixLimiter` keeps token buckets per (kind, rate_key) in a bounded table that is never cleared wholesale
(emptying every bucket when the table filled up let a client spraying addresses reset everyone's budget).
When full, buckets that have refilled completely are dropped (they are equal to a fresh one), in a sweep of
the table at most once per `sweep_every_s` (a sweep per newcomer would cost a whole table scan per request);
newcomers that find no room share one strict overflow bucket per kind until room frees up: an
address-spraying client then slows other newcomers down, but no one's spent budget ever comes back early.

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


OVERFLOW = "*overflow*"


def client_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address in `text` ("[...]" and blanks around it allowed); an IPv4-mapped IPv6 address as its IPv4;
    None when it is no address."""
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def rate_key(address: str | None) -> str:
    """IPv6 -> its /64, IPv4 (also mapped into IPv6) -> itself; "?" when missing; anything else as it is."""
    if not address:
        return "?"
    ip = client_ip(address)
    if ip is None:
        return address
    if ip.version == 6:
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


class PrefixLimiter:
    """Token buckets: `limits[kind] = (rate, per_s)`, burst = rate, per (kind, rate_key(address)); at most
    `max_keys` buckets in all (plus one overflow bucket per kind), never cleared wholesale (module doc)."""

    def __init__(self, limits: dict[str, tuple[float, float]], max_keys: int = 100_000,
                 sweep_every_s: float = 1.0) -> None:
        self.limits = limits
        self.max_keys = max_keys
        self.sweep_every_s = sweep_every_s
        self.buckets: dict[tuple[str, str], tuple[float, float]] = {}
        self.next_sweep = float("-inf")
        self.lock = threading.Lock()

    def _refilled(self, kind: str, tokens: float, last: float, now: float) -> float:
        rate, per_s = self.limits[kind]
        return min(rate, tokens + (now - last) * rate / per_s)

    def _make_room(self, now: float) -> bool:
        if now < self.next_sweep:
            return False
        self.next_sweep = now + self.sweep_every_s
        full = [k for k, (tokens, last) in self.buckets.items()
                if k[1] != OVERFLOW and self._refilled(k[0], tokens, last, now) >= self.limits[k[0]][0]]
        for k in full:
            del self.buckets[k]
        return len(self.buckets) < self.max_keys

    def allow(self, kind: str, address: str | None) -> bool:
        """Take one token for `address` (keyed by rate_key); False when its bucket is empty."""
        rate, _ = self.limits[kind]
        key = (kind, rate_key(address))
        now = time.monotonic()
        with self.lock:
            if key not in self.buckets and len(self.buckets) >= self.max_keys and not self._make_room(now):
                key = (kind, OVERFLOW)
            tokens, last = self.buckets.get(key, (rate, now))
            tokens = self._refilled(kind, tokens, last, now)
            ok = tokens >= 1
            self.buckets[key] = (tokens - 1 if ok else tokens, now)
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

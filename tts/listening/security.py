"""Who a request comes from, how often it may come, and whether an admin token is strong enough.

* `client_address`: the TCP peer, unless the peer is one of the operator's trusted proxies; then the
  right-most address of X-Forwarded-For that is not itself a trusted proxy (the left part of that header
  is written by the client and proves nothing). Nothing is trusted by default.
* `rate_key`: the unit a limit counts. One machine owns a whole IPv6 /64 (SLAAC hands out 2^64 addresses),
  so an IPv6 client is keyed by its /64; IPv4 by its address; an IPv4-mapped IPv6 address as its IPv4.
* `PrefixLimiter`: token buckets per (kind, key) in a bounded table that is never cleared wholesale (the
  old limiter emptied every bucket after 100,001 addresses: spraying addresses reset everyone's budget).
  When full, buckets that have refilled completely are dropped (they are equal to a fresh one); if none
  is, newcomers share one strict overflow bucket per kind until room frees up: an address-spraying client
  then slows other newcomers down, but no one's spent budget ever comes back early.
* `token_bits`: a conservative estimate of an admin token's entropy: length x log2(alphabet of the
  character classes used), capped by what its character statistics support (repeats, runs), so 'a'*22
  or 'abcd'*8 are refused although they are long.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import Counter
from typing import Iterable

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
OVERFLOW = "*overflow*"


def parse_networks(specs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """'10.0.0.5', '10.0.0.0/8', '::1' -> networks; ValueError on anything else."""
    return tuple(ipaddress.ip_network(s.strip(), strict=False) for s in specs if s.strip())


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _trusted(ip, proxies: tuple[IPNetwork, ...]) -> bool:
    return any(ip.version == n.version and ip in n for n in proxies)


def client_address(peer: str | None, forwarded_for: str | None, proxies: tuple[IPNetwork, ...]) -> str:
    """The client's address as the operator can vouch for it (see the module doc)."""
    peer_ip = _ip(peer or "")
    if peer_ip is None:
        return peer or "?"
    if not proxies or not forwarded_for or not _trusted(peer_ip, proxies):
        return str(peer_ip)
    for hop in reversed(forwarded_for.split(",")):
        ip = _ip(hop)
        if ip is None:  # garbage in the header: stop at the last address we could vouch for
            break
        if not _trusted(ip, proxies):
            return str(ip)
        peer_ip = ip
    return str(peer_ip)


def rate_key(address: str) -> str:
    """IPv6 -> its /64, IPv4 (also mapped into IPv6) -> itself; anything unparsable as it is."""
    ip = _ip(address)
    if ip is None:
        return address
    if ip.version == 6:
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


class PrefixLimiter:
    """Token buckets: `limits[kind] = (rate, per_s)`, burst = rate; at most `max_keys` buckets in all."""

    def __init__(self, limits: dict[str, tuple[float, float]], max_keys: int = 100_000):
        self.limits = limits
        self.max_keys = max_keys
        self.buckets: dict[tuple[str, str], tuple[float, float]] = {}
        self.lock = threading.Lock()

    def _refilled(self, kind: str, tokens: float, last: float, now: float) -> float:
        rate, per_s = self.limits[kind]
        return min(rate, tokens + (now - last) * rate / per_s)

    def _make_room(self, now: float) -> bool:
        full = [k for k, (tokens, last) in self.buckets.items()
                if k[1] != OVERFLOW and self._refilled(k[0], tokens, last, now) >= self.limits[k[0]][0]]
        for k in full:
            del self.buckets[k]
        return len(self.buckets) < self.max_keys

    def allow(self, kind: str, address: str) -> bool:
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


LOWER, UPPER = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MIN_ADMIN_TOKEN_BITS = 128


def token_bits(token: str) -> float:
    """Conservative entropy estimate of a token in bits (see the module doc).

    A random token of n characters from an alphabet of k shows about min(n, k) distinct characters and
    few neighbours that differ by one code point; a typed or patterned one does not. The estimate is
    n * log2(k) scaled down by how far the token's observed per-character entropy falls short of what a
    random draw of that length would show, and by the share of its neighbours that form runs."""
    n = len(token)
    if n == 0:
        return 0.0
    alphabet = _alphabet(token)
    bits = n * math.log2(alphabet)
    counts = Counter(token)
    observed = -sum(c / n * math.log2(c / n) for c in counts.values())
    # a uniform draw of n characters from `alphabet` shows about this many distinct symbols; its
    # per-character entropy is a little below log2 of that: allow half of it before counting a shortfall
    expected_distinct = alphabet * (1 - (1 - 1 / alphabet) ** n)
    ideal = 0.5 * math.log2(max(expected_distinct, 2.0))
    shortfall = min(1.0, observed / ideal) ** 2
    # neighbours one code point apart: ~2/alphabet of them in a random token, nearly all in 'abcdef...'
    runs = sum(abs(ord(a) - ord(b)) <= 1 for a, b in zip(token, token[1:])) / max(n - 1, 1)
    run_penalty = max(0.0, 1.0 - max(0.0, runs - 0.45) * 2)
    return bits * shortfall * run_penalty


def _alphabet(token: str) -> int:
    """The smallest usual alphabet the token's characters fit: hex, else the character classes used."""
    if all(c in "0123456789abcdef" for c in token) or all(c in "0123456789ABCDEF" for c in token):
        return 16
    size = sum(26 for chars in (LOWER, UPPER) if any(c in chars for c in token))
    size += 10 if any(c.isdigit() for c in token) else 0
    size += 2 if any(c in "-_" for c in token) else 0  # base64url
    size += 30 if any(not c.isalnum() and c not in "-_" for c in token) else 0
    return max(size, 2)

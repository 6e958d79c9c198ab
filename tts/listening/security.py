"""Who a request comes from, how often it may come, and whether an admin token is strong enough.

* `client_address`: the TCP peer, unless the peer is one of the operator's trusted proxies; then the
  right-most address of X-Forwarded-For that is not itself a trusted proxy (the left part of that header
  is written by the client and proves nothing). Nothing is trusted by default.
* `rate_key`, `PrefixLimiter`: the unit a limit counts (IPv4 address, IPv6 /64) and the bounded token
  buckets over it, never cleared wholesale. They live in tts.web_limits, shared with the speech server;
  re-exported here for the listening code.
* `token_bits`: a conservative estimate of an admin token's entropy: length x log2(alphabet of the
  character classes used), capped by what its character statistics support (repeats, runs), so 'a'*22
  or 'abcd'*8 are refused although they are long.
"""

from __future__ import annotations

import ipaddress
import math
from collections import Counter
from typing import Iterable

from tts.web_limits import OVERFLOW, PrefixLimiter, client_ip, rate_key

__all__ = ["IPNetwork", "MIN_ADMIN_TOKEN_BITS", "OVERFLOW", "PrefixLimiter", "client_address", "client_ip",
           "parse_networks", "rate_key", "token_bits"]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(specs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """'10.0.0.5', '10.0.0.0/8', '::1' -> networks; ValueError on anything else."""
    return tuple(ipaddress.ip_network(s.strip(), strict=False) for s in specs if s.strip())


def _trusted(ip, proxies: tuple[IPNetwork, ...]) -> bool:
    return any(ip.version == n.version and ip in n for n in proxies)


def client_address(peer: str | None, forwarded_for: str | None, proxies: tuple[IPNetwork, ...]) -> str:
    """The client's address as the operator can vouch for it (see the module doc)."""
    peer_ip = client_ip(peer or "")
    if peer_ip is None:
        return peer or "?"
    if not proxies or not forwarded_for or not _trusted(peer_ip, proxies):
        return str(peer_ip)
    for hop in reversed(forwarded_for.split(",")):
        ip = client_ip(hop)
        if ip is None:  # garbage in the header: stop at the last address we could vouch for
            break
        if not _trusted(ip, proxies):
            return str(ip)
        peer_ip = ip
    return str(peer_ip)


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

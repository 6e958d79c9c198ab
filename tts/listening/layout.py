"""What one rater sees, drawn from (test secret, rater id): deterministic, so a reload shows the same, and
unpredictable to anyone without the secret (the public seed only picks the sentences).

* Order: the A/B block, then the MOS block, each shuffled. The part's checks are spread: the part is cut
  into as many segments as it has checks and each check lands at a random place of its own segment, so
  the last one is near the end and a rater who stops early has not passed the part.
* Sides: per A/B page, whether the served order is swapped.
* A/B check material: one of the test's real A/B items whose clips the rater has not met yet, which of its
  two clips is damaged, the damage.
* MOS checks: `attention_per_part` of the spoken prompts, each asking for a different score.
* Clip ids: every clip of every page of every rater has its own 64-bit id, HMAC(secret, rater, page,
  slot): ids never repeat across pages or raters, so no id (and, with per-clip dither, no byte string)
  tells a check clip from a real one or links sessions.
"""

from __future__ import annotations

import hashlib
import hmac
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One served clip: the stored audio token, and the damage applied for an A/B check (None: none)."""
    token: str
    damage: str | None = None
    seed: bytes = b""


def _spread(real: list[str], checks: list[str], rng: random.Random) -> list[str]:
    """Insert one check per equal segment of `real`, at a random place within it."""
    k, n = len(checks), len(real)
    spots = [rng.randint(j * n // k, (j + 1) * n // k) for j in range(k)]
    out = list(real)
    for spot, check in sorted(zip(spots, checks), reverse=True):  # from the back: earlier spots stay valid
        out.insert(spot, check)
    return out


def layout_for(test: dict, rater_id: str) -> list[tuple[str, bool]]:
    """The rater's (item id, sides swapped) list, A/B block first (see the module doc)."""
    rng = random.Random(f"{test['secret']}:{rater_id}")
    items = test["items"]
    ab = sorted(it["id"] for it in items if it["type"] == "ab" and not it.get("attention"))
    mos = sorted(it["id"] for it in items if it["type"] == "mos" and not it.get("attention"))
    ab_checks = sorted(it["id"] for it in items if it["type"] == "ab" and it.get("attention"))
    prompts = sorted((it for it in items if it["type"] == "mos" and it.get("attention")), key=lambda it: it["id"])
    rng.shuffle(ab)
    rng.shuffle(mos)
    rng.shuffle(ab_checks)
    by_score: dict[int, list[str]] = {}
    for it in prompts:
        by_score.setdefault(it["expected"], []).append(it["id"])
    scores = rng.sample(sorted(by_score), min(test.get("attention_per_part", 0), len(by_score)))
    mos_checks = [rng.choice(by_score[s]) for s in scores]
    order = _spread(ab, ab_checks, rng) + (_spread(mos, mos_checks, rng) if mos else [])
    return [(i, rng.random() < 0.5) for i in order]


def _digest(test: dict, *parts: str) -> bytes:
    return hmac.new(bytes.fromhex(test["secret"]), ":".join(parts).encode(), hashlib.sha256).digest()


def page_sources(test: dict, items: dict[str, dict], rater_id: str, item_id: str, flip: bool) -> list[Source]:
    """The clips of one page in served (left-to-right) order."""
    it = items[item_id]
    if it.get("attention") and it["type"] == "ab":
        source = items[check_material(test, items, rater_id)[item_id]]
        rng = random.Random(_digest(test, "check-side", rater_id, item_id))
        damaged_slot = rng.randrange(2)
        clean = Source(source["audio"][1 - damaged_slot])
        bad = Source(source["audio"][damaged_slot], rng.choice(("noise", "dropouts", "crush")),
                     _digest(test, "damage", rater_id, item_id))
        served = [clean, bad]  # the clean one is the check's "first system" (ATTENTION_YES)
    else:
        served = [Source(t) for t in it["audio"]]
    return list(reversed(served)) if (it["type"] == "ab" and flip) else served


def check_material(test: dict, items: dict[str, dict], rater_id: str) -> dict[str, str]:
    """A/B check id -> the real A/B item whose clips it uses, for one rater: drawn, in page order, among the
    pairs whose clips the rater has not met on any earlier page (real or check), so a script that keeps
    every clip it received cannot find the undamaged side as the one it heard before. When every pair has
    been met (a check late in a test of few sentences), among the pairs met longest ago."""
    lay = [i for i, _ in layout_for(test, rater_id)]
    real = sorted(i for i, x in items.items() if x["type"] == "ab" and not x.get("attention"))
    first_met: dict[str, int] = {}
    for pos, i in enumerate(lay):
        for tok in items[i]["audio"]:
            first_met.setdefault(tok, pos)
    out: dict[str, str] = {}
    for pos, i in enumerate(lay):
        if not (items[i].get("attention") and items[i]["type"] == "ab"):
            continue
        met = {r: min(first_met.get(t, len(lay)) for t in items[r]["audio"]) for r in real}
        unheard = [r for r in real if met[r] > pos]
        pool = unheard or [r for r in real if met[r] == min(met.values())]
        out[i] = random.Random(_digest(test, "check", rater_id, i)).choice(pool)
        for tok in items[out[i]]["audio"]:  # met here, by this check
            first_met[tok] = min(first_met.get(tok, len(lay)), pos)
    return out


def clip_id(test: dict, rater_id: str, item_id: str, slot: int) -> str:
    return _digest(test, "clip", rater_id, item_id, str(slot)).hex()[:16]


def dither_seed(test: dict, rater_id: str, item_id: str, slot: int) -> bytes:
    return _digest(test, "dither", rater_id, item_id, str(slot))


def clip_ids(test: dict, items: dict[str, dict], rater_id: str) -> dict[str, tuple[str, int, bool]]:
    """clip id -> (item id, slot, flip) for every page of this rater."""
    out = {}
    for item_id, flip in layout_for(test, rater_id):
        n = 2 if items[item_id]["type"] == "ab" else 1
        for slot in range(n):
            out[clip_id(test, rater_id, item_id, slot)] = (item_id, slot, flip)
    return out

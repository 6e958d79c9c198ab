"""Which raters and answers count: attention checks per part, timing, and flags for scripted answering.

Rules (each rater is judged on their own layout, layout.layout_for):
  * checks: a rater who failed more than `max_attention_fails` (default 0) of the checks they answered,
    in either part, counts nowhere; otherwise a part's answers count only if the rater answered every
    check that part holds in their sequence. Pages are answered in order (the server refuses skipping),
    so a rater who stops before a part's last check has not passed that part: none of its answers count.
  * timing: a rater is excluded when more than `max_fast_share` (0.2) of their answers came sooner after
    the previous answer than the page's audio lasts (every clip played once).
  * flags (excluded unless the report is told to keep them), over the rater's real pages, from 8 pages on:
      - constant side: one button (A, B or no preference) on >= 90 % of A/B pages. Sides are drawn at
        random per page, so an honest preference for a system is never a preference for a side;
      - constant score: one score on >= 90 % of MOS pages;
      - follows length: on A/B pages whose clips' speech lasts >= 5 % longer on one side, the shorter (or
        the longer) chosen >= 90 % of the time, counting only pairs where each system is the shorter on at
        least 3 pages (else a steady preference for a system that happens to speak faster would look the
        same); on MOS pages, |Spearman| >= 0.8 between score and clip length within systems (each
        system's mean taken out of both, for the same reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .layout import layout_for, page_sources
from .stats import spearman

MIN_PAGES_FOR_FLAGS = 8
CONSTANT_SHARE = 0.9
LENGTH_SHARE = 0.9
LENGTH_RHO = 0.8
LENGTH_MIN_RATIO = 1.05


@dataclass
class RaterCheck:
    rater_id: str
    checks: dict[str, dict] = field(default_factory=dict)  # part -> {"in_layout", "answered", "failed"}
    parts_counted: list[str] = field(default_factory=list)
    timed: int = 0
    fast: int = 0
    flags: list[str] = field(default_factory=list)


def _speech(test: dict, items: dict, rater: str, item_id: str, flip: bool) -> list[float]:
    return [test["audio"][s.token].get("speech_s", test["audio"][s.token]["duration_s"])
            for s in page_sources(test, items, rater, item_id, flip)]


def page_seconds(test: dict, items: dict, rater: str, item_id: str, flip: bool) -> float:
    """How long the page's audio lasts for this rater: every clip played once."""
    return sum(test["audio"][s.token]["duration_s"] for s in page_sources(test, items, rater, item_id, flip))


def judge(test: dict, rater: str, answers: list[dict], max_attention_fails: int = 0) -> RaterCheck:
    """The rater's checks per part, timing and flags (see the module doc); `answers` are this rater's."""
    items = {it["id"]: it for it in test["items"]}
    lay = layout_for(test, rater)
    flips = dict(lay)
    by_item = {a["item_id"]: a for a in answers if a["item_id"] in items}
    out = RaterCheck(rater)
    for part in ("ab", "mos"):
        part_items = [i for i, _ in lay if items[i]["type"] == part]
        if not part_items:
            continue
        checks = [i for i in part_items if items[i].get("attention")]
        answered = [i for i in checks if i in by_item]
        failed = sum(_got(items[i], by_item[i]) != items[i]["expected"] for i in answered)
        out.checks[part] = {"in_layout": len(checks), "answered": len(answered), "failed": failed}
    if sum(c["failed"] for c in out.checks.values()) <= max_attention_fails:  # a failed check anywhere: no part
        out.parts_counted = [p for p, c in out.checks.items() if c["answered"] == c["in_layout"]]
    timed = sorted((a for a in by_item.values() if a.get("created_at") is not None), key=lambda a: a["created_at"])
    for prev, cur in zip(timed, timed[1:]):
        out.timed += 1
        out.fast += cur["created_at"] - prev["created_at"] < page_seconds(test, items, rater, cur["item_id"],
                                                                         flips[cur["item_id"]])
    out.flags = _flags(test, items, rater, flips, [a for a in by_item.values() if not items[a["item_id"]].get("attention")])
    return out


def _got(item: dict, answer: dict):
    return answer.get("preferred") if item["type"] == "ab" else answer.get("score")


def _flags(test: dict, items: dict, rater: str, flips: dict, real: list[dict]) -> list[str]:
    flags = []
    ab = [a for a in real if items[a["item_id"]]["type"] == "ab"]
    mos = [a for a in real if items[a["item_id"]]["type"] == "mos"]
    if len(ab) >= MIN_PAGES_FOR_FLAGS:
        choices = [a["choice"] for a in ab]
        if max(map(choices.count, set(choices))) >= CONSTANT_SHARE * len(choices):
            flags.append("constant side")
        by_direction: dict[tuple, list[bool]] = {}  # (pair, system of the shorter side) -> chose the shorter
        for a in ab:
            if a["choice"] not in ("A", "B"):
                continue
            it = items[a["item_id"]]
            flip = flips[a["item_id"]]
            left, right = _speech(test, items, rater, a["item_id"], flip)
            if max(left, right) >= LENGTH_MIN_RATIO * min(left, right):
                left_system, right_system = (it["systems"][1], it["systems"][0]) if flip else tuple(it["systems"])
                shorter_system = left_system if left < right else right_system
                by_direction.setdefault((frozenset(it["systems"]), shorter_system), []).append(
                    (a["choice"] == "A") == (left < right))
        pairs: dict[frozenset, list[list[bool]]] = {}
        for (pair, _), chose in by_direction.items():
            if len(chose) >= 3:
                pairs.setdefault(pair, []).append(chose)
        shorter = [c for groups in pairs.values() if len(groups) == 2 for chose in groups for c in chose]
        if len(shorter) >= MIN_PAGES_FOR_FLAGS:
            share = sum(shorter) / len(shorter)
            if share >= LENGTH_SHARE or share <= 1 - LENGTH_SHARE:
                flags.append("follows length")
    if len(mos) >= MIN_PAGES_FOR_FLAGS:
        scores = [a["score"] for a in mos]
        if max(map(scores.count, set(scores))) >= CONSTANT_SHARE * len(scores):
            flags.append("constant score")
        # what a script sees of a MOS page is its clip's length; take each system's mean out of both sides
        length = {a["item_id"]: page_seconds(test, items, rater, a["item_id"], flips[a["item_id"]]) for a in mos}
        by_system: dict[str, list[dict]] = {}
        for a in mos:
            by_system.setdefault(items[a["item_id"]]["system"], []).append(a)
        xs, ys = [], []
        for rows in by_system.values():
            mx = sum(length[a["item_id"]] for a in rows) / len(rows)
            my = sum(a["score"] for a in rows) / len(rows)
            xs += [length[a["item_id"]] - mx for a in rows]
            ys += [a["score"] - my for a in rows]
        rho = spearman(xs, ys)
        if rho == rho and abs(rho) >= LENGTH_RHO and "follows length" not in flags:
            flags.append("follows length")
    return flags

"""Report: A/B preference per system pair (Wilson 95 % CI, exact sign test excluding ties), MOS per
system (mean, t 95 % CI), raters excluded for failed attention checks. Writes report.md, report.json,
report.png.

Exclusion rules:
  * attention: more than `max_attention_fails` (default 0) of the attention checks a rater answered got
    another answer than the one asked for (A/B: the sample that asked to be chosen; MOS: the score).
    Raters who did not reach an attention check are kept (their answers so far count).
  * timing: more than `max_fast_share` (default 0.2) of a rater's answers came sooner after their previous
    answer than the page's audio lasts (all its clips played once) — nobody listens that fast.
p-values are printed in scientific notation when small (never as 0); MOS intervals are clipped to 1-5.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

from . import db as dbm
from .build import ATTENTION_YES, load_test
from .stats import mean_ci_t, sign_test, wilson_interval


def _r(x, nd=4):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, nd)


def page_seconds(test: dict, item: dict) -> float:
    """How long the page's audio lasts: every clip played once."""
    return sum(test.get("audio", {}).get(t, {}).get("duration_s", 0.0) for t in item["audio"])


def fast_answers(test: dict, answers: list[dict]) -> dict[str, dict]:
    """Per rater: answers timed (all but the first) and how many came sooner after the previous answer
    than the page's audio lasts."""
    items = {it["id"]: it for it in test["items"]}
    by_rater: dict[str, list[dict]] = {}
    for a in answers:
        if a["item_id"] in items and a.get("created_at") is not None:
            by_rater.setdefault(a["rater_id"], []).append(a)
    out = {}
    for r, rows in by_rater.items():
        rows.sort(key=lambda a: a["created_at"])
        gaps = [(b["created_at"] - a["created_at"], page_seconds(test, items[b["item_id"]])) for a, b in zip(rows, rows[1:])]
        out[r] = {"timed": len(gaps), "fast": sum(g < need for g, need in gaps)}
    return out


def analyse(test: dict, answers: list[dict], max_attention_fails: int = 0, max_fast_share: float = 0.2) -> dict:
    items = {it["id"]: it for it in test["items"]}
    fails: dict[str, int] = {}
    checks: dict[str, int] = {}
    for a in answers:
        it = items.get(a["item_id"])
        if it and it.get("attention"):
            checks[a["rater_id"]] = checks.get(a["rater_id"], 0) + 1
            got = a.get("preferred") if it["type"] == "ab" else a["score"]
            if got != it.get("expected", ATTENTION_YES if it["type"] == "ab" else None):
                fails[a["rater_id"]] = fails.get(a["rater_id"], 0) + 1
    raters = sorted({a["rater_id"] for a in answers})
    timing = fast_answers(test, answers)
    too_fast = sorted(r for r, t in timing.items() if t["timed"] and t["fast"] / t["timed"] > max_fast_share)
    failed = sorted(r for r in raters if fails.get(r, 0) > max_attention_fails)
    excluded = sorted(set(failed) | set(too_fast))
    kept = [a for a in answers if a["rater_id"] not in excluded and a["item_id"] in items]

    pairs = []
    for s1, s2 in itertools.combinations(test["systems"], 2):
        w1 = w2 = ties = 0
        for a in kept:
            it = items[a["item_id"]]
            if it["type"] != "ab" or it.get("attention") or set(it["systems"]) != {s1, s2}:
                continue
            if a["preferred"] == s1:
                w1 += 1
            elif a["preferred"] == s2:
                w2 += 1
            else:
                ties += 1
        n = w1 + w2 + ties
        if n == 0:
            continue
        lo, hi = wilson_interval(w1, w1 + w2) if w1 + w2 else (math.nan, math.nan)
        pairs.append({"system_a": s1, "system_b": s2, "wins_a": w1, "wins_b": w2, "ties": ties, "n": n,
                      "pref_a_excl_ties": _r(w1 / (w1 + w2)) if w1 + w2 else None,
                      "pref_a_ci95": [_r(lo), _r(hi)],
                      "rate_a": _r(w1 / n), "rate_b": _r(w2 / n), "rate_ties": _r(ties / n),
                      "p_value_sign_test": sign_test(w1, w2)})  # unrounded: tiny p-values stay > 0
    mos = []
    for s in test["systems"]:
        vals = [a["score"] for a in kept if items[a["item_id"]]["type"] == "mos"
                and not items[a["item_id"]].get("attention") and items[a["item_id"]].get("system") == s]
        if not vals:
            continue
        m = mean_ci_t(vals)
        # the scale is 1-5: a t interval reaching past it is clipped (the mean cannot be outside)
        lo, hi = (m.low, m.high) if math.isnan(m.low) else (max(1.0, m.low), min(5.0, m.high))
        mos.append({"system": s, "ground_truth": s in test.get("ground_truth", []), "n": m.n,
                    "mean": _r(m.mean), "ci95": [_r(lo), _r(hi)], "sd": _r(m.sd)})
    return {"title": test["title"], "seed": test["seed"], "n_raters": len(raters),
            "n_raters_kept": len(raters) - len(excluded), "excluded_raters": excluded,
            "failed_attention": failed, "too_fast": too_fast, "max_fast_share": max_fast_share,
            "timing": timing,
            "attention": {r: {"answered": checks.get(r, 0), "failed": fails.get(r, 0)} for r in raters if r in checks},
            "max_attention_fails": max_attention_fails, "n_answers": len(answers), "n_answers_kept": len(kept),
            "ab": pairs, "mos": mos}


def format_p(p: float) -> str:
    """p-values: 4 significant digits; below 1e-4 in scientific notation, so a tiny p never prints as 0."""
    return f"{p:.4g}" if p >= 1e-4 else f"{p:.2e}"


def to_markdown(res: dict) -> str:
    L = [f"# {res['title']}: results", "",
         f"Raters: {res['n_raters']} ({len(res['excluded_raters'])} excluded: {len(res['failed_attention'])} for "
         f"failed attention checks, rule: more than {res['max_attention_fails']} failed; {len(res['too_fast'])} for "
         f"implausible timing, rule: more than {res['max_fast_share']:.0%} of answers sooner than the page's audio "
         f"lasts). Answers used: {res['n_answers_kept']} of {res['n_answers']}.", ""]
    if res["ab"]:
        L += ["## A/B preference", "",
              "Sides were randomised per rater; \"1\" and \"2\" are the pair's first and second system, not the sides shown. "
              "Preference for 1 excludes ties; 95 % Wilson interval; p: two-sided exact binomial (sign) test, ties excluded.", "",
              "| system 1 | system 2 | 1 wins | 2 wins | no pref. | pref. 1 (excl. ties) | 95 % CI | p |", "|---|---|---|---|---|---|---|---|"]
        for p in res["ab"]:
            lo, hi = p["pref_a_ci95"]
            pa = "—" if p["pref_a_excl_ties"] is None else f"{p['pref_a_excl_ties']:.3f}"
            ci = "—" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
            L.append(f"| {p['system_a']} | {p['system_b']} | {p['wins_a']} | {p['wins_b']} | {p['ties']} | {pa} | {ci} | {format_p(p['p_value_sign_test'])} |")
        L.append("")
    if res["mos"]:
        L += ["## MOS", "", "Mean opinion score (1–5) with a 95 % t interval; attention checks not counted.", "",
              "| system | n | MOS | 95 % CI | sd |", "|---|---|---|---|---|"]
        for m in res["mos"]:
            lo, hi = m["ci95"]
            ci = "—" if lo is None else f"[{lo:.2f}, {hi:.2f}]"
            gt = " (ground truth)" if m["ground_truth"] else ""
            sd = "—" if m["sd"] is None else f"{m['sd']:.2f}"
            L.append(f"| {m['system']}{gt} | {m['n']} | {m['mean']:.2f} | {ci} | {sd} |")
        L.append("")
    return "\n".join(L)


def plot(res: dict, path: Path) -> list[str]:
    """Write the chart; returns the legend labels (what a reader is told the colours mean)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels_out: list[str] = []
    ncol = int(bool(res["ab"])) + int(bool(res["mos"])) or 1
    fig, axes = plt.subplots(1, ncol, figsize=(6 * ncol, 3.5), squeeze=False)
    k = 0
    if res["ab"]:
        ax = axes[0][k]; k += 1
        labels = [f"{p['system_a']} vs {p['system_b']}" for p in res["ab"]]
        y = range(len(labels))
        a = [p["rate_a"] for p in res["ab"]]; t = [p["rate_ties"] for p in res["ab"]]; b = [p["rate_b"] for p in res["ab"]]
        # Raters saw random sides; the colours are the pair's first / second named system, not sides A/B.
        ax.barh(y, a, color="#4477aa", label="first system of the pair preferred")
        ax.barh(y, t, left=a, color="#bbbbbb", label="no preference")
        ax.barh(y, b, left=[x + z for x, z in zip(a, t)], color="#ee6677", label="second system of the pair preferred")
        ax.set_yticks(list(y), labels); ax.set_xlim(0, 1); ax.set_xlabel("share of answers")
        ax.legend(fontsize=7, loc="lower right"); ax.set_title("A/B preference")
        labels_out = [t.get_text() for t in ax.get_legend().get_texts()]
    if res["mos"]:
        ax = axes[0][k]
        names = [m["system"] for m in res["mos"]]
        means = [m["mean"] for m in res["mos"]]
        err = [[0 if m["ci95"][0] is None else m["mean"] - m["ci95"][0] for m in res["mos"]],
               [0 if m["ci95"][1] is None else m["ci95"][1] - m["mean"] for m in res["mos"]]]
        ax.bar(names, means, yerr=err, capsize=4, color="#228833")
        ax.set_ylim(1, 5); ax.set_ylabel("MOS (95 % CI)"); ax.set_title("MOS")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return labels_out


def write_report(test_dir: Path, db_path: Path, out: Path, max_attention_fails: int = 0,
                 max_fast_share: float = 0.2) -> dict:
    test = load_test(test_dir)
    dbm.check_test_id(db_path, test["test_id"])  # answers of another build would be misattributed
    res = analyse(test, dbm.all_answers(db_path), max_attention_fails, max_fast_share)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(res, indent=1))
    (out / "report.md").write_text(to_markdown(res) + "\n![chart](report.png)\n")
    plot(res, out / "report.png")
    return res

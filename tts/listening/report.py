"""Report: who counted, and the results with the rater as the unit beside the per-answer view.
Writes report.md, report.json, report.png.

Raters and answers (tts/listening/raters.py): raters who failed more than `max_attention_fails` checks
count nowhere, and a part's answers count only when the rater answered all the part's checks in their
sequence; raters answering faster
than the audio (`max_fast_share`) are excluded, and so are raters flagged as scripted (constant side,
constant score, answers following clip length) unless `exclude_flagged` is off.

A/B, per system pair (ties = "no preference"):
  * per rater (the headline): each rater counts once, for the system they preferred on more of the pair's
    pages; exact sign test over raters (raters without a majority left out); the share of pages won by
    the first system (ties excluded) with a 95 % cluster-bootstrap interval (raters resampled).
  * per answer (for reference; treats answers as independent, which they are not): wins, ties, Wilson
    95 % interval, exact sign test over answers.
MOS, per system: the pooled mean with a 95 % cluster-bootstrap interval; the mean of the raters' means
with a t interval over raters; per answer, the t interval over answers (clipped to 1-5). Between
systems: the per-rater difference of means (raters who scored both), t interval and paired t-test.
p-values print in scientific notation when small (never as 0).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

from . import db as dbm
from .build import load_test
from .raters import judge
from .stats import cluster_bootstrap_ratio, mean_ci_t, paired_t, rater_sign_test, sign_test, wilson_interval


def _r(x, nd=4):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(x, nd)


def _clip15(lo: float, hi: float) -> list:
    # the scale is 1-5: an interval reaching past it is clipped (the mean cannot be outside)
    return [None, None] if math.isnan(lo) else [_r(max(1.0, lo)), _r(min(5.0, hi))]


def analyse(test: dict, answers: list[dict], max_attention_fails: int = 0, max_fast_share: float = 0.2,
            exclude_flagged: bool = True, bootstrap: int = 2000) -> dict:
    items = {it["id"]: it for it in test["items"]}
    answers = [a for a in answers if a["item_id"] in items]
    by_rater: dict[str, list[dict]] = {}
    for a in answers:
        by_rater.setdefault(a["rater_id"], []).append(a)
    raters, kept = {}, []
    for rid, rows in sorted(by_rater.items()):
        j = judge(test, rid, rows, max_attention_fails)
        too_fast = bool(j.timed) and j.fast / j.timed > max_fast_share
        dropped_for = ([] if not too_fast else ["too fast"]) + (["flagged"] if j.flags and exclude_flagged else [])
        parts = [] if dropped_for else j.parts_counted
        mine = [a for a in rows if items[a["item_id"]]["type"] in parts and not items[a["item_id"]].get("attention")]
        kept += mine
        raters[rid] = {"checks": j.checks, "parts_counted": parts, "timed": j.timed, "fast": j.fast,
                       "too_fast": too_fast, "flags": j.flags, "counted": bool(mine)}
    failed = sorted(r for r, v in raters.items() if sum(c["failed"] for c in v["checks"].values()) > max_attention_fails)
    incomplete = sorted(r for r, v in raters.items() if r not in failed
                        and any(c["answered"] < c["in_layout"] for c in v["checks"].values()))
    res = {"title": test["title"], "seed": test["seed"], "normalisation": test.get("normalisation", {}),
           "rules": {"max_attention_fails": max_attention_fails, "max_fast_share": max_fast_share,
                     "exclude_flagged": exclude_flagged, "bootstrap": bootstrap},
           "n_raters": len(raters), "n_raters_counted": sum(v["counted"] for v in raters.values()),
           "excluded_raters": sorted(r for r, v in raters.items() if not v["counted"]),
           "failed_attention": failed, "checks_incomplete": incomplete,
           "too_fast": sorted(r for r, v in raters.items() if v["too_fast"]),
           "flagged": {r: v["flags"] for r, v in raters.items() if v["flags"]},
           "raters": raters, "n_answers": len(answers), "n_answers_kept": len(kept)}
    res["ab"] = [p for s1, s2 in itertools.combinations(test["systems"], 2)
                 if (p := _pair(items, kept, s1, s2, bootstrap)) is not None]
    res["mos"], res["mos_pairs"] = _mos(test, items, kept, bootstrap)
    return res


def _pair(items: dict, kept: list[dict], s1: str, s2: str, bootstrap: int) -> dict | None:
    per: dict[str, list[int]] = {}  # rater -> [wins s1, wins s2, ties]
    for a in kept:
        it = items[a["item_id"]]
        if it["type"] != "ab" or set(it["systems"]) != {s1, s2}:
            continue
        w = per.setdefault(a["rater_id"], [0, 0, 0])
        w[0 if a["preferred"] == s1 else 1 if a["preferred"] == s2 else 2] += 1
    if not per:
        return None
    w1, w2, ties = (sum(w[k] for w in per.values()) for k in range(3))
    lo, hi = wilson_interval(w1, w1 + w2) if w1 + w2 else (math.nan, math.nan)
    rst = rater_sign_test([(w[0], w[1]) for w in per.values()])
    clo, chi = cluster_bootstrap_ratio([w[0] for w in per.values()], [w[0] + w[1] for w in per.values()], bootstrap)
    n = w1 + w2 + ties
    return {"system_a": s1, "system_b": s2, "raters": len(per), "raters_for_a": rst.for_a,
            "raters_for_b": rst.for_b, "raters_even": rst.even, "p_value_raters": rst.p_value,
            "pref_a_ci95_cluster": [_r(clo), _r(chi)],
            "wins_a": w1, "wins_b": w2, "ties": ties, "n": n,
            "pref_a_excl_ties": _r(w1 / (w1 + w2)) if w1 + w2 else None, "pref_a_ci95": [_r(lo), _r(hi)],
            "rate_a": _r(w1 / n), "rate_b": _r(w2 / n), "rate_ties": _r(ties / n),
            "p_value_sign_test": sign_test(w1, w2)}  # unrounded: tiny p-values stay > 0


def _mos(test: dict, items: dict, kept: list[dict], bootstrap: int) -> tuple[list[dict], list[dict]]:
    scores: dict[str, dict[str, list[int]]] = {}  # system -> rater -> scores
    for a in kept:
        it = items[a["item_id"]]
        if it["type"] == "mos":
            scores.setdefault(it["system"], {}).setdefault(a["rater_id"], []).append(a["score"])
    mos = []
    for s in test["systems"]:
        per = scores.get(s)
        if not per:
            continue
        vals = [v for vs in per.values() for v in vs]
        m = mean_ci_t(vals)
        rm = mean_ci_t([sum(vs) / len(vs) for vs in per.values()])
        clo, chi = cluster_bootstrap_ratio([sum(vs) for vs in per.values()], [len(vs) for vs in per.values()], bootstrap)
        mos.append({"system": s, "ground_truth": s in test.get("ground_truth", []), "raters": len(per),
                    "mean": _r(m.mean), "ci95_cluster": _clip15(clo, chi),
                    "rater_mean": _r(rm.mean), "rater_ci95": _clip15(rm.low, rm.high),
                    "n": m.n, "ci95": _clip15(m.low, m.high), "sd": _r(m.sd)})
    pairs = []
    for s1, s2 in itertools.combinations([m["system"] for m in mos], 2):
        both = sorted(set(scores[s1]) & set(scores[s2]))
        d = paired_t([sum(scores[s1][r]) / len(scores[s1][r]) - sum(scores[s2][r]) / len(scores[s2][r]) for r in both])
        pairs.append({"system_a": s1, "system_b": s2, "raters": d.n, "diff": _r(d.mean),
                      "ci95": [_r(d.low), _r(d.high)], "p_value": d.p_value})
    return mos, pairs


def format_p(p: float | None) -> str:
    """p-values: 4 significant digits; below 1e-4 in scientific notation, so a tiny p never prints as 0."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    return f"{p:.4g}" if p >= 1e-4 else f"{p:.2e}"


def _ci(pair: list, nd: int) -> str:
    lo, hi = pair
    return "—" if lo is None else f"[{lo:.{nd}f}, {hi:.{nd}f}]"


def to_markdown(res: dict) -> str:
    rules = res["rules"]
    flag_counts: dict[str, int] = {}
    for flags in res["flagged"].values():
        for f in flags:
            flag_counts[f] = flag_counts.get(f, 0) + 1
    flags_txt = ", ".join(f"{k}: {v}" for k, v in sorted(flag_counts.items())) or "none"
    L = [f"# {res['title']}: results", "",
         f"Raters: {res['n_raters']}, counted: {res['n_raters_counted']} (not counted: {len(res['excluded_raters'])}). "
         f"Failed attention checks (more than {rules['max_attention_fails']} wrong): {len(res['failed_attention'])}; "
         f"a part's checks not all answered (that part dropped): {len(res['checks_incomplete'])}; "
         f"too fast (over {rules['max_fast_share']:.0%} of answers sooner than the page's audio lasts): "
         f"{len(res['too_fast'])}; flagged as scripted ({'excluded' if rules['exclude_flagged'] else 'kept'}): "
         f"{len(res['flagged'])} ({flags_txt}). Answers used: {res['n_answers_kept']} of {res['n_answers']} "
         "(attention checks never count).", ""]
    norm = res.get("normalisation") or {}
    if norm:
        L += ["Audio normalised on build: " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in norm.items()) + ".", ""]
    if res["ab"]:
        L += ["## A/B preference", "",
              "Sides were randomised per page; \"1\" and \"2\" are the pair's first and second system. **Per rater** "
              "(the unit of the test): raters preferring 1 / 2 on most of their pages of the pair, exact sign test over "
              "raters; share of pages won by 1 (ties excluded) with a 95 % cluster-bootstrap interval (raters "
              "resampled). **Per answer**, for reference only (answers of one rater are not independent): wins, "
              "Wilson interval, sign test over answers.", "",
              "| system 1 | system 2 | raters | for 1 | for 2 | even | p (raters) | pref. 1 | 95 % CI (raters) "
              "| 1 wins | 2 wins | no pref. | 95 % CI (answers) | p (answers) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in res["ab"]:
            pa = "—" if p["pref_a_excl_ties"] is None else f"{p['pref_a_excl_ties']:.3f}"
            L.append(f"| {p['system_a']} | {p['system_b']} | {p['raters']} | {p['raters_for_a']} | {p['raters_for_b']} "
                     f"| {p['raters_even']} | {format_p(p['p_value_raters'])} | {pa} | {_ci(p['pref_a_ci95_cluster'], 3)} "
                     f"| {p['wins_a']} | {p['wins_b']} | {p['ties']} | {_ci(p['pref_a_ci95'], 3)} "
                     f"| {format_p(p['p_value_sign_test'])} |")
        L.append("")
    if res["mos"]:
        L += ["## MOS", "", "Mean opinion score (1–5), attention checks not counted. Per rater: 95 % cluster-bootstrap "
              "interval of the mean, and the mean of the raters' means with a t interval over raters; per answer "
              "(reference only): t interval over answers.", "",
              "| system | raters | MOS | 95 % CI (raters, bootstrap) | mean of rater means | 95 % CI (t over raters) "
              "| answers | 95 % CI (answers) | sd |", "|---|---|---|---|---|---|---|---|---|"]
        for m in res["mos"]:
            gt = " (ground truth)" if m["ground_truth"] else ""
            sd = "—" if m["sd"] is None else f"{m['sd']:.2f}"
            L.append(f"| {m['system']}{gt} | {m['raters']} | {m['mean']:.2f} | {_ci(m['ci95_cluster'], 2)} "
                     f"| {m['rater_mean']:.2f} | {_ci(m['rater_ci95'], 2)} | {m['n']} | {_ci(m['ci95'], 2)} | {sd} |")
        L.append("")
        if res["mos_pairs"]:
            L += ["Differences between systems, per rater (raters who scored both): mean of the per-rater difference, "
                  "t interval, paired t-test.", "", "| system 1 | system 2 | raters | 1 − 2 | 95 % CI | p |",
                  "|---|---|---|---|---|---|"]
            for d in res["mos_pairs"]:
                diff = "—" if d["diff"] is None else f"{d['diff']:+.2f}"
                L.append(f"| {d['system_a']} | {d['system_b']} | {d['raters']} | {diff} | {_ci(d['ci95'], 2)} "
                         f"| {format_p(d['p_value'])} |")
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
        # the rater-level (cluster bootstrap) interval: the one that holds when raters differ
        err = [[0 if m["ci95_cluster"][0] is None else m["mean"] - m["ci95_cluster"][0] for m in res["mos"]],
               [0 if m["ci95_cluster"][1] is None else m["ci95_cluster"][1] - m["mean"] for m in res["mos"]]]
        ax.bar(names, means, yerr=err, capsize=4, color="#228833")
        ax.set_ylim(1, 5); ax.set_ylabel("MOS (95 % CI over raters)"); ax.set_title("MOS")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return labels_out


def write_report(test_dir: Path, db_path: Path, out: Path, max_attention_fails: int = 0,
                 max_fast_share: float = 0.2, exclude_flagged: bool = True, bootstrap: int = 2000) -> dict:
    test = load_test(test_dir)
    dbm.check_test_id(db_path, test["test_id"])  # answers of another build would be misattributed
    res = analyse(test, dbm.all_answers(db_path), max_attention_fails, max_fast_share, exclude_flagged, bootstrap)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(res, indent=1))
    (out / "report.md").write_text(to_markdown(res) + "\n![chart](report.png)\n")
    plot(res, out / "report.png")
    return res

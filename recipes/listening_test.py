"""Build a listening test from systems' audio folders.

    python -m recipes.listening_test build --systems gt=DIR1 nar=DIR2 ar=DIR3 --out TESTDIR \
        [--n 20] [--mos] [--seed 0] [--ground-truth gt] [--attention-checks 3] [--loudness bs1770|rms]
        [--target-db -23] [--sample-rate HZ] [--padding-s 0.25] [--invite-codes N] [--force]

Each DIR holds ID.wav for the same held-out sentence IDs; the common IDs are used (a random --n of
them).  Or let the builder synthesise them: --data DIR [--split test] picks --n held-out sentences,
--synth NAME=CHECKPOINT[,vocoder=V][,k=K][,temperature=T] (repeatable; a tts.evaluation.systems.SystemSpec) speaks
them through each system by THE inference path, as recipes.evaluate does (one token sequence per sentence,
seeded by --seed), into TESTDIR/sources/NAME/, and --with-ground-truth adds the corpus recordings as the
hidden reference "gt":

    python -m recipes.listening_test build --data data/slt --with-ground-truth \
        --synth ar=checkpoints/ar.pt --synth nar_k4=checkpoints/nar.pt,k=4 --out TESTDIR --mos See tts/listening/build.py for the
normalisation and the test.json layout; then serve with `python -m tts.listening serve --test TESTDIR`.

Measure a build against scripted raters (issue 33): how many fake raters one machine gets counted in
--minutes, against a fresh server of the test on loopback with the default limits (the attacker's one
IPv6 /64 arrives through a trusted local proxy); writes OUT/attack.json and OUT/attack.md:

    python -m recipes.listening_test attack --test TESTDIR --out docs/results/listening_attack [--minutes 6]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tts.listening.build import build_test, parse_systems, results_in


def synthesised_systems(args: argparse.Namespace) -> dict[str, Path]:
    from tts.checkpoint import CheckpointError
    from tts.listening.synth import ground_truth_folder, parse_synth, pick_sentences, synthesise_folder

    if args.data is None:
        raise ValueError("--synth and --with-ground-truth need --data CORPUS_DIR")
    sentences = pick_sentences(args.data, args.split, args.n, args.seed)
    out: dict[str, Path] = {}
    if args.with_ground_truth:
        out["gt"] = ground_truth_folder(args.data, sentences, args.out / "sources" / "gt")
    for spec in args.synth:
        system = parse_synth(spec)
        try:
            out[system.name] = synthesise_folder(system, sentences, args.out / "sources" / system.name, args.seed)
        except CheckpointError as e:
            raise ValueError(str(e)) from e
        print(f"synthesised {len(sentences)} sentences with {system.name}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m recipes.listening_test")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="make TESTDIR/test.json and TESTDIR/audio/ from audio folders")
    b.add_argument("--systems", nargs="+", default=[], metavar="NAME=DIR")
    b.add_argument("--synth", action="append", default=[], metavar="NAME=CKPT[,vocoder=V][,k=K][,temperature=T]",
                   help="synthesise the held-out sentences of --data with this system")
    b.add_argument("--data", type=Path, default=None, help="corpus for --synth / --with-ground-truth")
    b.add_argument("--split", default="test")
    b.add_argument("--with-ground-truth", action="store_true", help="add the corpus recordings as system gt")
    b.add_argument("--out", required=True, type=Path)
    b.add_argument("--n", type=int, default=20, help="number of sentences (default 20)")
    b.add_argument("--mos", action="store_true", help="add MOS pages (one per system and sentence)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--ground-truth", nargs="*", default=None, metavar="NAME",
                   help="systems that are ground truth (default: any named gt, ground_truth, or reference)")
    b.add_argument("--attention-checks", type=int, default=3, help="checks per part (A/B, and MOS with --mos)")
    b.add_argument("--loudness", choices=["bs1770", "rms"], default="bs1770",
                   help="BS.1770-4 integrated loudness (LKFS) or plain RMS")
    b.add_argument("--target-db", type=float, default=-23.0)
    b.add_argument("--sample-rate", type=int, default=None,
                   help="one rate for every clip (default: the lowest of the inputs')")
    b.add_argument("--padding-s", type=float, default=0.25, help="silence before and after the trimmed speech")
    b.add_argument("--title", default="Listening test")
    b.add_argument("--force", action="store_true",
                   help="rebuild a folder that holds results, after moving them to TESTDIR/archive/")
    b.add_argument("--invite-codes", type=int, default=0, metavar="N",
                   help="write N single-use invite codes to TESTDIR/invite_codes.txt; serve then requires one")
    a = sub.add_parser("attack", help="measure how many scripted raters one machine gets counted")
    a.add_argument("--test", required=True, type=Path, help="a built TESTDIR (its results are not touched)")
    a.add_argument("--out", required=True, type=Path)
    a.add_argument("--minutes", type=float, default=6.0)
    a.add_argument("--concurrency", type=int, default=10)
    args = ap.parse_args(argv)
    if args.cmd == "attack":
        return attack(args)
    try:
        if results_in(args.out) and not args.force:  # before any synthesis: fail fast
            raise ValueError(f"{args.out} holds results ({', '.join(p.name for p in results_in(args.out))}); "
                             "use --force to archive them first, or build into a new folder")
        systems = parse_systems(args.systems) if args.systems else {}
        if args.synth or args.with_ground_truth:
            systems.update(synthesised_systems(args))
        if len(systems) < 2:
            raise ValueError("need at least two systems (--systems and/or --synth / --with-ground-truth)")
        gt = args.ground_truth
        if gt is None:
            gt = [s for s in systems if s.lower() in {"gt", "ground_truth", "groundtruth", "reference"}]
        if args.n < 1 or args.attention_checks < 0 or args.invite_codes < 0 or not 0 <= args.padding_s <= 2:
            raise ValueError("--n must be >= 1, --attention-checks and --invite-codes >= 0, --padding-s in 0..2")
        test = build_test(systems, args.out, n=args.n, mos=args.mos, seed=args.seed, ground_truth=gt,
                          attention_checks=args.attention_checks, loudness=args.loudness,
                          target_db=args.target_db, title=args.title, force=args.force,
                          invite_codes=args.invite_codes, sample_rate=args.sample_rate, padding_s=args.padding_s)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kinds = {}
    for it in test["items"]:
        k = "attention" if it.get("attention") else it["type"]
        kinds[k] = kinds.get(k, 0) + 1
    print(f"wrote {args.out}/test.json (test id {test['test_id']}): {len(test['sentences'])} sentences, "
          f"systems {test['systems']}, items {kinds}")
    if args.invite_codes:
        print(f"wrote {args.invite_codes} invite codes to {args.out}/invite_codes.txt")
    norm = test["normalisation"]
    if norm.get("mos_checks_longer_than_sentences"):
        print(f"warning: {norm['mos_checks_longer_than_sentences']} spoken MOS checks are longer than every sentence "
              "even when spoken fast: their file size sets them apart (use longer sentences)", file=sys.stderr)
    if "beeps" in norm.get("mos_checks", []):
        print("warning: espeak-ng not found: MOS checks are beeps, which a script can count", file=sys.stderr)
    return 0


def attack(args: argparse.Namespace) -> int:
    """Serve a copy of the test with default limits, attack it from one /64 for --minutes, report."""
    import json
    import shutil
    import subprocess
    import tempfile
    import time

    from recipes.bench.speech_server import free_port, wait_until_healthy
    from tts.listening.build import load_test
    from tts.listening.db import all_answers
    from tts.listening.report import analyse
    from tts.listening.scripted import HOSTILE, measure_attack

    test = load_test(args.test)
    work = Path(tempfile.mkdtemp(prefix="listening-attack-"))
    shutil.copy(args.test / "test.json", work / "test.json")
    (work / test["audio_dir"]).parent.mkdir(parents=True)
    (work / test["audio_dir"]).symlink_to((args.test / test["audio_dir"]).resolve())
    db, port = work / "results.sqlite", free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tts.listening", "serve", "--test", str(work), "--db", str(db),
                             "--port", str(port), "--trusted-proxy", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until_healthy(proc, url + "/healthz", 60, proc.stdout)
        t0 = time.monotonic()
        runs = measure_attack(url, args.minutes, concurrency=args.concurrency)
        wall = time.monotonic() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    res = analyse(test, all_answers(db), bootstrap=500)
    by_id = {r.rater_id: r.strategy for r in runs if r.rater_id}
    per = {s: {"attempts": 0, "sessions": 0, "answers_stored": 0, "finished": 0, "counted": 0} for s in HOSTILE}
    for r in runs:
        p = per[r.strategy]
        p["attempts"] += 1
        p["sessions"] += r.session_status == 200
        p["answers_stored"] += r.answered
        p["finished"] += r.done
        p["counted"] += bool(r.rater_id and res["raters"].get(r.rater_id, {}).get("counted"))
    counted = sum(p["counted"] for p in per.values())
    summary = {"test_id": test["test_id"], "minutes": round(wall / 60, 2), "concurrency": args.concurrency,
               "limits": "defaults: 20 sessions/hour per client (IPv6 /64), 600 requests/minute",
               "per_strategy": per, "sessions": sum(p["sessions"] for p in per.values()),
               "attempts": len(runs), "counted": counted, "counted_per_hour": round(counted * 60 / (wall / 60), 2),
               "excluded": {"failed_attention": len(set(res["failed_attention"]) & set(by_id)),
                            "checks_incomplete": len(set(res["checks_incomplete"]) & set(by_id)),
                            "flagged": len(set(res["flagged"]) & set(by_id)),
                            "too_fast": len(set(res["too_fast"]) & set(by_id))},
               "ab_rater_level_p_of_counted_bots": [p["p_value_raters"] for p in res["ab"]]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attack.json").write_text(json.dumps(summary, indent=1))
    lines = [f"# Scripted raters against one listening test, {summary['minutes']} minutes from one machine", "",
             f"Server: loopback, default limits ({summary['limits']}); the attacker's addresses: one IPv6 /64, "
             f"fresh address per session, through a trusted proxy. Test {test['test_id']}.", "",
             "| strategy | session attempts | sessions | answers stored | finished | counted |", "|---|---|---|---|---|---|"]
    lines += [f"| {s} | {p['attempts']} | {p['sessions']} | {p['answers_stored']} | {p['finished']} | {p['counted']} |"
              for s, p in per.items()]
    lines += ["", f"Counted: {counted} fake raters ({summary['counted_per_hour']} per hour). Not counted: "
              + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in summary["excluded"].items()) + "."]
    (args.out / "attack.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

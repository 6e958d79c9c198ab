"""python -m tts.listening {serve,report,loadtest} — see tts/listening/__init__.py."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tts.listening")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the listening-test web app")
    s.add_argument("--test", required=True, type=Path, help="TESTDIR made by recipes.listening_test build")
    s.add_argument("--db", type=Path, default=Path("results.sqlite"))
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--admin-token", default=os.environ.get("LISTENING_ADMIN_TOKEN"),
                   help="token for /admin/results (default: $LISTENING_ADMIN_TOKEN, else a random one, printed)")
    r = sub.add_parser("report", help="statistics, markdown, JSON and a chart from the results")
    r.add_argument("--test", required=True, type=Path)
    r.add_argument("--db", required=True, type=Path)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--max-attention-fails", type=int, default=0)
    lt = sub.add_parser("loadtest", help="simulated raters against a loopback server")
    lt.add_argument("--url", required=True)
    lt.add_argument("--raters", type=int, default=50)
    lt.add_argument("--timeout", type=float, default=120.0, help="overall deadline in seconds")
    lt.add_argument("--db", help="SQLite file of that server, to count stored/duplicated/lost answers")
    lt.add_argument("--no-audio", action="store_true", help="don't download the audio of each item")
    args = ap.parse_args(argv)

    if args.cmd == "serve":
        import uvicorn

        from .app import create_app

        token = args.admin_token or secrets.token_urlsafe(16)
        if not args.admin_token:
            print(f"admin token (generated): {token}", flush=True)
        app = create_app(args.test, args.db, admin_token=token)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    if args.cmd == "report":
        if not args.db.is_file():
            print(f"error: {args.db} not found", file=sys.stderr)
            return 2
        from .report import to_markdown, write_report

        res = write_report(args.test, args.db, args.out, args.max_attention_fails)
        print(to_markdown(res))
        print(f"wrote {args.out}/report.md, report.json, report.png")
        return 0
    from .loadtest import run_loadtest

    try:
        summary = run_loadtest(args.url, args.raters, fetch_audio=not args.no_audio, timeout_s=args.timeout,
                               db_path=args.db)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1))
    ok = summary["completed"] == args.raters and summary.get("lost", 0) == 0 and summary.get("duplicated", 0) == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

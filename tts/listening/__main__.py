"""python -m tts.listening {serve,report} — see tts/listening/__init__.py."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path


def admin_token(token_file: Path | None, db: Path) -> str:
    """$LISTENING_ADMIN_TOKEN, else the first line of token_file, else a generated 256-bit token written to
    DB.admin-token (mode 0600, reused on restart); only its path is printed."""
    token = os.environ.get("LISTENING_ADMIN_TOKEN", "").strip()
    if token:
        return token
    if token_file is not None:
        return token_file.read_text().strip()
    path = Path(f"{db}.admin-token")
    if not path.is_file():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    print(f"admin token in {path} (send it as: Authorization: Bearer TOKEN)", flush=True)
    return path.read_text().strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tts.listening")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the listening-test web app")
    s.add_argument("--test", required=True, type=Path, help="TESTDIR made by recipes.listening_test build")
    s.add_argument("--db", type=Path, default=Path("results.sqlite"))
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a Host header to answer besides localhost, loopback and the bind address (repeatable; "
                        "'*' any): other Hosts get 421, against DNS rebinding. Serving raters at a DNS name, or "
                        "behind a proxy that passes the public Host on, name it here")
    s.add_argument("--admin-token-file", type=Path, default=None,
                   help="file holding the token for /admin/results (default: $LISTENING_ADMIN_TOKEN; else a "
                        "random 256-bit one is written to DB.admin-token, mode 0600). Not a command-line "
                        "value: those show in `ps`")
    s.add_argument("--admin-token", default=None, help=argparse.SUPPRESS)  # refused below, with the way to do it
    s.add_argument("--secure-cookies", action="store_true", help="mark the rater cookie Secure (behind HTTPS)")
    s.add_argument("--sessions-per-hour", type=float, default=20,
                   help="new rater sessions per client (IPv4 address, IPv6 /64)")
    s.add_argument("--requests-per-minute", type=float, default=600, help="requests per client")
    s.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS[/PREFIX]",
                   help="a reverse proxy (address or network) whose X-Forwarded-For names the client; repeatable. "
                        "Without it the TCP peer is the client (behind an untrusted proxy every rater shares one budget)")
    r = sub.add_parser("report", help="statistics, markdown, JSON and a chart from the results")
    r.add_argument("--test", required=True, type=Path)
    r.add_argument("--db", required=True, type=Path)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("--max-attention-fails", type=int, default=0)
    r.add_argument("--max-fast-share", type=float, default=0.2,
                   help="exclude raters with more than this share of answers faster than the audio")
    r.add_argument("--keep-flagged", action="store_true",
                   help="keep raters flagged as scripted (constant side or score, answers following clip length)")
    r.add_argument("--bootstrap", type=int, default=2000, help="cluster-bootstrap resamples of raters")
    args = ap.parse_args(argv)

    if args.cmd == "serve":
        import uvicorn

        from tts.web_limits import HostCheck

        from .app import create_app

        from .db import WrongTestError
        from .security import parse_networks

        if args.admin_token is not None:
            print("error: --admin-token is no longer accepted (command lines show in `ps`): set "
                  "$LISTENING_ADMIN_TOKEN or pass --admin-token-file FILE", file=sys.stderr)
            return 2
        bad_host = next((h for h in args.allow_host if not h or any(c.isspace() or c in "/@" for c in h)), None)
        if bad_host is not None:
            print(f"error: --allow-host {bad_host!r} is not a host name", file=sys.stderr)
            return 2
        try:
            token = admin_token(args.admin_token_file, args.db)
            app = create_app(args.test, args.db, admin_token=token, secure_cookies=args.secure_cookies,
                             sessions_per_hour=args.sessions_per_hour, requests_per_minute=args.requests_per_minute,
                             trusted_proxies=parse_networks(args.trusted_proxy),
                             hosts=HostCheck(args.host, args.allow_host))
        except (WrongTestError, ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        # proxy_headers off: uvicorn would otherwise take X-Forwarded-For from any 127.0.0.1 peer; the app
        # decides itself, from --trusted-proxy only
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(f"serving the listening test at http://{host}:{args.port}/ (results: /admin/results with the admin token as Bearer)",
              file=sys.stderr, flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", proxy_headers=False)
        return 0
    # args.cmd == "report"
    from .build import load_test
    from .db import WrongTestError, check_test_id
    from .report import to_markdown, write_report

    try:
        check_test_id(args.db, load_test(args.test)["test_id"])
    except (WrongTestError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res = write_report(args.test, args.db, args.out, args.max_attention_fails, args.max_fast_share,
                       exclude_flagged=not args.keep_flagged, bootstrap=args.bootstrap)
    print(to_markdown(res))
    print(f"wrote {args.out}/report.md, report.json, report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())

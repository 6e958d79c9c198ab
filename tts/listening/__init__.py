"""Listening-test web app: blind A/B preference and MOS tests.

Pipeline (each step is a CLI):
  python -m recipes.listening_test build --systems NAME=DIR ... --out TESTDIR   # audio folders -> TESTDIR
  LISTENING_ADMIN_TOKEN=T python -m tts.listening serve  --test TESTDIR --db results.sqlite
  python -m tts.listening report --test TESTDIR --db results.sqlite --out DIR
  python -m recipes.bench.listening_loadtest --url http://127.0.0.1:PORT --raters 50 --db results.sqlite  (the lab's)

Modules: build (test.json + normalised audio), db (SQLite schema), app (FastAPI), stats (Wilson,
sign test, t intervals), report. README.md there: blinding, rater integrity, rebuilds.
"""

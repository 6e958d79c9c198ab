"""Listening-test web app: blind A/B preference and MOS tests that hold against scripted raters.

Pipeline (each step is a CLI):
  python -m recipes.listening_test build --systems NAME=DIR ... --out TESTDIR   # audio folders -> TESTDIR
  LISTENING_ADMIN_TOKEN=T python -m tts.listening serve  --test TESTDIR --db results.sqlite
  python -m tts.listening report --test TESTDIR --db results.sqlite --out DIR
  python -m recipes.listening_test attack --test TESTDIR --out DIR            # scripted raters, measured

Modules: build (test.json), clips (normalisation, per-rater bytes, proof of download), loudness (BS.1770-4),
checks (attention checks), layout (what one rater sees), app (FastAPI), db (SQLite), security (client
address, /64 rate limits, token strength), raters (who counts), stats (per answer and per rater), report,
scripted (honest and hostile scripted raters). README.md there: the design and the statistics.
"""

#!/usr/bin/env bash
# Installs Debian's Chromium for the listening-test browser tests (tests/test_listening_browser.py),
# idempotently. Playwright (PyPI) drives this binary through executable_path=shutil.which('chromium');
# never run `playwright install` (no browser downloads here).
exec bash "$(dirname "$0")/setup_system.sh" chromium

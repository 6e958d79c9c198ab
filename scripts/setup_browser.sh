#!/usr/bin/env bash
# Installs Debian's Chromium for the listening-test browser tests (tests/test_listening_browser.py),
# idempotently: nothing is fetched when it is there. Playwright (PyPI) drives this binary through
# executable_path=shutil.which('chromium'); never run `playwright install` (no browser downloads here).
set -euo pipefail
PKGS=(chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "browser packages: all present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "browser packages: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

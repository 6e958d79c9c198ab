#!/usr/bin/env bash
# Installs the Debian packages the project needs, idempotently: nothing is fetched when all are there.
#   festival + festvox-us-slt-hts + festlex-cmu: the teacher voice that builds the built-in corpus
#   sox: resampling Festival's 32 kHz output; fortunes*: the sentence source; espeak-ng: G2P for
#   words outside CMUdict.
# With arguments, installs those packages instead (scripts/setup_browser.sh uses this).
set -euo pipefail
PKGS=(festival festvox-us-slt-hts festlex-cmu sox fortunes fortunes-min espeak-ng)
[ $# -gt 0 ] && PKGS=("$@")
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "system packages: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs Chromium from Debian when it is missing, for the report tests (test/report/report.test.ts
# opens every report page in headless Chromium through puppeteer-core, pointed at /usr/bin/chromium,
# or at DETSIM_CHROMIUM). Idempotent: a Chromium that is already there is left alone. Needs root
# (apt-get). If it fails, the browser tests skip saying why, and scripts/test-summary.mjs fails CI
# on those skips. NOT a browser download: only the distribution's package.
set -euo pipefail

BROWSER=${DETSIM_CHROMIUM:-/usr/bin/chromium}

die() {
  echo "chromium-up: $*" >&2
  exit 1
}

if [ -x "$BROWSER" ]; then
  echo "chromium-up: $("$BROWSER" --version 2>/dev/null || echo "$BROWSER") already installed"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "$BROWSER is missing and installing it needs root (apt-get install chromium)"
echo "chromium-up: installing chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || die "apt-get update failed"
apt-get install -y -qq chromium >/dev/null || die "apt-get install chromium failed"
[ -x "$BROWSER" ] || die "apt-get installed chromium, but $BROWSER is still missing"
echo "chromium-up: $("$BROWSER" --version 2>/dev/null) installed"

#!/usr/bin/env bash
# run-dashboard-test.sh DELAYQD TEST_DIR WORK_DIR — installs playwright-core from npm into
# WORK_DIR (once, the version locked in package-lock.json), then runs dashboard.test.js, which
# starts DELAYQD itself and drives its dashboard in Debian's headless Chromium. Screenshots land
# in WORK_DIR/screenshots. Exit status: the test's; 77 (CTest's skip) when the npm registry cannot
# be reached to install playwright-core.
set -euo pipefail
delayqd=$1 test=$2 work=$3
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "node and npm are needed (scripts/install-deps.sh installs them)"; exit 1; }
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "$chromium is missing (scripts/install-deps.sh installs chromium)"; exit 1; }
mkdir -p "$work"
cp "$test/package.json" "$test/package-lock.json" "$test/dashboard.test.js" "$work/"
if [ ! -d "$work/node_modules/playwright-core" ]; then
  if ! timeout 30 npm ping >/dev/null 2>&1; then
    echo "skipped: the npm registry ($(npm config get registry)) cannot be reached to install playwright-core"
    exit 77
  fi
  if ! (cd "$work" && npm ci --no-audit --no-fund >"$work/npm-install.log" 2>&1); then
    echo "npm ci failed:"
    cat "$work/npm-install.log"
    rm -rf "$work/node_modules"
    exit 1
  fi
fi
CHROMIUM=$chromium node "$work/dashboard.test.js" "$delayqd" "$work/screenshots"

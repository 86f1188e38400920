#!/usr/bin/env bash
# run-dashboard-test.sh DELAYQD TEST_DIR WORK_DIR — installs playwright-core from npm into
# WORK_DIR (once, the version locked in package-lock.json), then runs dashboard.test.js, which
# starts DELAYQD itself and drives its dashboard in Debian's headless Chromium. Screenshots land
# in WORK_DIR/screenshots. Exit status: the test's; 77 (CTest's skip) when the npm registry cannot
# be reached to install playwright-core.
set -euo pipefail
delayqd=$1 test=$2 work=$3
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "$chromium is missing (scripts/install-deps.sh installs chromium)"; exit 1; }
"$(dirname "$0")/../support/npm-install.sh" "$test" "$work" playwright-core || exit $?
cp "$test/dashboard.test.js" "$work/"
CHROMIUM=$chromium node "$work/dashboard.test.js" "$delayqd" "$work/screenshots"

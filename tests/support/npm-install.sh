#!/usr/bin/env bash
# npm-install.sh SOURCE_DIR WORK_DIR WHAT — copies SOURCE_DIR's package.json and package-lock.json
# into WORK_DIR and installs exactly the locked versions there (npm ci), once: later runs reuse
# WORK_DIR/node_modules. WHAT names the package for messages. Exit status: 0 when installed;
# 77 (CTest's skip) when the npm registry cannot be reached; 1 when node, npm or npm ci fail.
set -euo pipefail
source=$1 work=$2 what=$3
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "node and npm are needed (scripts/install-deps.sh installs them)"; exit 1; }
mkdir -p "$work"
cp "$source/package.json" "$source/package-lock.json" "$work/"
[ -d "$work/node_modules" ] && exit 0
if ! timeout 30 npm ping >/dev/null 2>&1; then
  echo "skipped: the npm registry ($(npm config get registry)) cannot be reached to install $what"
  exit 77
fi
if ! (cd "$work" && npm ci --no-audit --no-fund >"$work/npm-install.log" 2>&1); then
  echo "npm ci failed:"
  cat "$work/npm-install.log"
  rm -rf "$work/node_modules"
  exit 1
fi

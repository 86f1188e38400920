#!/usr/bin/env bash
# run-client-test.sh DELAYQD CLIENT_DIR WORK_DIR — installs a third-party client from npm into
# WORK_DIR (once), starts DELAYQD on a free loopback port with a fresh data directory, runs the
# client's scenario.js against it, and stops the server by its PID. Exit status: the scenario's;
# 77 (CTest's skip) when the npm registry cannot be reached to install the client.
set -euo pipefail
delayqd=$1 client=$2 work=$3
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "node and npm are needed (scripts/install-deps.sh installs them)"; exit 1; }
mkdir -p "$work"
cp "$client/package.json" "$client/package-lock.json" "$client/scenario.js" "$work/"
if [ ! -d "$work/node_modules" ]; then
  if ! timeout 30 npm ping >/dev/null 2>&1; then
    echo "skipped: the npm registry ($(npm config get registry)) cannot be reached to install the client"
    exit 77
  fi
  # npm ci installs exactly the versions locked in package-lock.json.
  if ! (cd "$work" && npm ci --no-audit --no-fund >"$work/npm-install.log" 2>&1); then
    echo "npm ci failed:"
    cat "$work/npm-install.log"
    rm -rf "$work/node_modules"
    exit 1
  fi
fi
data=$(mktemp -d)
out="$data/stdout"
"$delayqd" -p 0 -b "$data/db" >"$out" 2>"$data/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^delayqd listening on .*:\([0-9]*\)$/\1/p' "$out")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { echo "delayqd did not start:"; cat "$data/stderr"; exit 1; }
node "$work/scenario.js" "$port"

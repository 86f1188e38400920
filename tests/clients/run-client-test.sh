#!/usr/bin/env bash
# run-client-test.sh DELAYQD CLIENT_DIR WORK_DIR — installs a third-party client from npm into
# WORK_DIR (once), starts DELAYQD on a free loopback port with a fresh data directory, runs the
# client's scenario.js against it, and stops the server by its PID. Exit status: the scenario's;
# 77 (CTest's skip) when the npm registry cannot be reached to install the client.
set -euo pipefail
delayqd=$1 client=$2 work=$3
"$(dirname "$0")/../support/npm-install.sh" "$client" "$work" "the client" || exit $?
cp "$client/scenario.js" "$work/"
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

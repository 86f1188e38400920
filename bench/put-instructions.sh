#!/usr/bin/env bash
# put-instructions.sh [PUTS] — the instructions delayqd runs per pipelined put, counted by
# valgrind's callgrind (stable on a noisy machine, unlike CPU time): delayqd on its embedded
# store (a scratch directory, `--fsync always`) under callgrind, the load generator's puts as
# `bench/compare-beanstalkd.sh` makes them (100-byte bodies, due in an hour), 16 connections of
# 16 in flight. 20,000 puts warm it up, then the counts are zeroed and PUTS more (default 40,000)
# are counted, every thread of the process included (the committer's, RocksDB's). Prints the
# instructions per put, then the 25 functions that ran most of them (their own instructions, not
# their callees'). DELAYQD names another server binary (side-by-side runs). Ends what it
# started, by PID.
set -euo pipefail
puts=${1:-40000}
cd "$(dirname "$0")/.."
loadgen=build/release/bench/loadgen
delayqd=${DELAYQD:-build/release/apps/delayqd}
[ -x "$loadgen" ] && [ -x "$delayqd" ] || { echo "put-instructions: make build first" >&2; exit 2; }
work=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP:-}" ] && cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; cp "$work"/callgrind.out.* "$KEEP" 2>/dev/null; rm -rf "$work"; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  "$delayqd" -p "$port" --http off -b "$work/data" --fsync always >"$work/delayqd.out" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q listening "$work/delayqd.out" && break; sleep 0.2; done
grep -q listening "$work/delayqd.out" || { echo "put-instructions: delayqd did not start" >&2; exit 1; }
load() {
  "$loadgen" --port "$port" --mode put --connections 16 --depth 16 --delay 3600 --seconds 600 \
    --count "$1" >/dev/null
}
load 20000
callgrind_control -z "$pid" >/dev/null 2>&1
load "$puts"
callgrind_control -d "$pid" >/dev/null 2>&1
out=$(ls -t "$work"/callgrind.out.* | head -1)
total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "instructions per put: $(( total / puts ))"
callgrind_annotate --inclusive=no --threshold=100 "$out" | grep -E '^ *[0-9,]+ \(' | grep -vE 'PROGRAM TOTALS|below main|libc_start|:main$|clone|start_thread|_State_impl|\?\?\?:0x' |
  sed -E 's/ \[[^]]*\]$//' | head -25 | cut -c1-160

#!/usr/bin/env bash
# webhook-load.sh [REPEATS] — push delivery end to end (bench/webhook_bench.cc), each mode
# REPEATS times (default 3), against one delayqd with its defaults (--fsync always) on a fresh
# data directory under build/, on free loopback ports, stopped by its PID:
#   late        1,000 jobs/s due 1 s after their put, for 5 s: lateness from due to arrival;
#   throughput  40,000 jobs due in the same millisecond, concurrency 64: deliveries per second;
#   rate        20,000 jobs due at once to a webhook limited to 1,000/s: the burst's length.
# Figures for docs/BENCHMARKS.md ("Push delivery").
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
delayqd=build/release/apps/delayqd
bench=build/release/bench/webhook_bench
data=build/webhook-load-data
rm -rf "$data"
mkdir -p "$data"
"$delayqd" -p 0 --http 127.0.0.1:0 -b "$data/db" >"$data/stdout" 2>"$data/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
  grep -q "http listening" "$data/stdout" 2>/dev/null && break
  sleep 0.05
done
http=$(sed -n 's/^delayqd http listening on .*:\([0-9]*\)$/\1/p' "$data/stdout")
beanstalk=$(sed -n 's/^delayqd listening on .*:\([0-9]*\)$/\1/p' "$data/stdout")
echo "delayqd pid $pid: http port $http, beanstalk port $beanstalk, fsync always"
run() { "$bench" --port "$beanstalk" --http "$http" --pid "$pid" "$@"; }
for _ in $(seq 1 "$repeats"); do
  run --mode late --rate 1000 --delay 1000 --seconds 5
  run --mode throughput --count 40000 --concurrency 64
  run --mode rate --count 20000 --limit 1000 --concurrency 64
done

#!/usr/bin/env bash
# http-load.sh [SECONDS] [CONNECTIONS] — HTTP load on delayqd with wrk (Debian's), keep-alive:
#   1. put: POST /v1/tubes/load/jobs, one small job with a 1 h delay per request;
#   2. batch put: POST /v1/jobs, 100 such jobs per request;
#   3. work: POST /v1/reserve then DELETE /v1/jobs/{id}, over a tube filled with jobs first;
#   4. the same, each reserve taking up to 10 jobs ("count": 10), then deleting each.
# delayqd runs with its defaults (--fsync always) on a fresh data directory under build/, on
# free loopback ports, and is stopped by its PID. Figures for docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-64}
delayqd=build/release/apps/delayqd
command -v wrk >/dev/null || scripts/ensure-packages.sh wrk
data=build/http-load-data
rm -rf "$data"
mkdir -p "$data"
"$delayqd" -p 0 --http 127.0.0.1:0 -b "$data/db" >"$data/stdout" 2>"$data/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do
  grep -q "http listening" "$data/stdout" 2>/dev/null && break
  sleep 0.05
done
http=$(sed -n 's/^delayqd http listening on \(.*\)$/\1/p' "$data/stdout")
beanstalk=$(sed -n 's/^delayqd listening on .*:\([0-9]*\)$/\1/p' "$data/stdout")
echo "delayqd pid $pid: http $http, beanstalk port $beanstalk, fsync always"

echo "== put: $connections connections, ${seconds}s"
wrk -t 1 -c "$connections" -d "${seconds}s" --latency -s bench/http/put.lua "http://$http" |
  grep -E "Requests/sec|Latency|50%|99%|requests in|Non-2xx"
stored=$(curl -s "http://$http/v1/tubes/load" | sed -n 's/.*"delayed":\([0-9]*\).*/\1/p')
echo "jobs stored (delayed in tube load): $stored"

echo "== batch put (POST /v1/jobs, 100 jobs a request): $connections connections, ${seconds}s"
wrk -t 1 -c "$connections" -d "${seconds}s" --latency -s bench/http/batch.lua "http://$http" |
  grep -E "Requests/sec|Latency|50%|99%|requests in|Non-2xx"
stored=$(curl -s "http://$http/v1/tubes/batch" | sed -n 's/.*"delayed":\([0-9]*\).*/\1/p')
echo "jobs stored (delayed in tube batch): $stored ($((stored / seconds))/s)"

# Fill tube "work" over HTTP with twice what the workers could take, then run them.
echo "== work (reserve + delete): $connections connections, ${seconds}s"
sed 's/"load"/"work"/; s|/v1/tubes/load/jobs|/v1/tubes/work/jobs|; s/"delay":"1h"/"delay":0/' \
  bench/http/put.lua >"$data/fill.lua"
wrk -t 1 -c "$connections" -d "$((seconds))s" -s "$data/fill.lua" "http://$http" >/dev/null
ready=$(curl -s "http://$http/v1/tubes/work" | sed -n 's/.*"ready":\([0-9]*\).*/\1/p')
echo "filled: $ready ready jobs"
wrk -t 1 -c "$connections" -d "${seconds}s" --latency -s bench/http/work.lua "http://$http" |
  grep -E "Requests/sec|Latency|50%|99%|requests in"
deleted=$(curl -s "http://$http/v1/tubes/work" | sed -n 's/.*"deletes":\([0-9]*\).*/\1/p')
echo "jobs done (reserved and deleted): $deleted in ${seconds}s ($((deleted / seconds))/s)"

echo "== work, reserves of up to 10 jobs (count 10) + a delete each: $connections connections, ${seconds}s"
wrk -t 1 -c "$connections" -d "$((seconds))s" -s "$data/fill.lua" "http://$http" >/dev/null
before=$deleted
RESERVE_COUNT=10 wrk -t 1 -c "$connections" -d "${seconds}s" --latency -s bench/http/work.lua \
  "http://$http" | grep -E "Requests/sec|Latency|50%|99%|requests in"
deleted=$(curl -s "http://$http/v1/tubes/work" | sed -n 's/.*"deletes":\([0-9]*\).*/\1/p')
echo "jobs done (reserved and deleted): $((deleted - before)) in ${seconds}s ($(((deleted - before) / seconds))/s)"

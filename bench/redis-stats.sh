#!/usr/bin/env bash
# [RUNS=1] redis-stats.sh [SHARDS] [TUBES] — what one `GET /v1/stats` (as a /metrics scrape or the
# dashboard's refresh reads) costs in Redis mode: one Redis of the script's own (no cluster, no
# persistence), one node over it with SHARDS shards (default 128), TUBES tubes (default 1) of
# 200 jobs each put over a connection of their own; then 20 requests one after another. Prints
# a Markdown row per run and build: script calls (FCALL), Redis's FCALL time (INFO
# commandstats), the node's CPU and the wall time, each per request. With DELAYQD_ALT naming
# another build, each run does both builds, that one second. Ends what it started, by PID.
set -euo pipefail
shards=${1:-128}
tubes=${2:-1}
runs=${RUNS:-1}
requests=20
source "$(dirname "$0")/common.sh"
cleanup() {
  stop_started
  rm -rf "$work"
}
trap cleanup EXIT

fcall() {  # "calls usec" of FCALL so far
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    awk -F'[=,:]' '/^cmdstat_fcall:/ {print $3, $5}'
}

start_redis
builds=("$delayqd")
[ -n "${DELAYQD_ALT:-}" ] && builds+=("$DELAYQD_ALT")
hz=$(getconf CLK_TCK)
echo "| run | build | shards | tubes | script calls | Redis us | node CPU ms | wall ms |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for run in $(seq "$runs"); do
  for b in "${!builds[@]}"; do
    port=$(free_port)
    http=$(free_port)
    "${builds[$b]}" --redis "127.0.0.1:$redis_port" -p "$port" --http "127.0.0.1:$http" \
      --redis-shards "$shards" --redis-prefix "s$run$b" >"$work/node-$run-$b.out" 2>&1 &
    node=$!
    pids+=("$node")
    for _ in $(seq 100); do curl -sf "127.0.0.1:$http/readyz" >/dev/null && break; sleep 0.1; done
    sleep 2  # leases
    python3 - "$port" "$tubes" <<'EOF'
import socket, sys
port, tubes = int(sys.argv[1]), int(sys.argv[2])
for t in range(tubes):
    s = socket.create_connection(("127.0.0.1", port))
    out = b"use tube%d\r\n" % t
    for i in range(200):
        out += b"put 0 %d 60 5\r\nhello\r\n" % (i % 3 * 100)
    s.sendall(out)
    got = b""
    while got.count(b"\r\n") < 201:
        got += s.recv(65536)
    s.close()
EOF
    curl -sf "127.0.0.1:$http/v1/stats" >/dev/null  # the first, which learns the tubes
    read -r calls0 usec0 < <(fcall)
    ticks0=$(cpu_ticks "$node")
    t0=$(date +%s%N)
    for _ in $(seq "$requests"); do curl -sf "127.0.0.1:$http/v1/stats" >/dev/null; done
    t1=$(date +%s%N)
    ticks1=$(cpu_ticks "$node")
    read -r calls1 usec1 < <(fcall)
    python3 -c "
n = $requests
print(f'| $run | ${builds[$b]} | $shards | $tubes | {($calls1 - $calls0) / n:.0f} | {($usec1 - $usec0) / n:.0f} '
      f'| {($ticks1 - $ticks0) * 1000 / $hz / n:.1f} | {($t1 - $t0) / 1e6 / n:.1f} |')"
    kill "$node"
    wait "$node" 2>/dev/null || true
  done
done

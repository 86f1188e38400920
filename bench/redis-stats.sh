#!/usr/bin/env bash
# [RUNS=1] [COMMAND=LINE] redis-stats.sh [SHARDS] [TUBES] — what one `GET /v1/stats` (as a
# /metrics scrape or the dashboard's refresh reads) costs in Redis mode: one Redis of the
# script's own (no cluster, no persistence), one node over it with SHARDS shards (default 128),
# TUBES tubes (default 1) of 200 jobs each (a third ready, the rest delayed 100 or 200 s) put
# over a connection of their own; once the node holds every shard, 20 requests one after
# another. With COMMAND, the request is that beanstalkd command line instead (such as
# `peek-delayed`, `kick 1` or `cancel-group g`), sent on one connection using tube0. Prints a
# Markdown row per run and build: script calls (FCALL), Redis's FCALL time (INFO commandstats),
# the node's CPU and the wall time, each per request, less what the node spends by itself
# (renewals, looks, heartbeats: measured over 3 s with no request, just before). With
# DELAYQD_ALT naming another build, each run does both builds, that one second. Ends what it
# started, by PID.
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
    for _ in $(seq 300); do [ "$(leases_held "s$run$b" "$node" "$shards")" -ge "$shards" ] && break; sleep 0.2; done
    python3 - "$port" "$tubes" <<'PY'
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
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("the node closed the connection")
        got += chunk
    s.close()
PY
    curl -sf "127.0.0.1:$http/v1/stats" >/dev/null  # the first, which learns the tubes
    sleep 1
    read -r idle_calls0 idle_usec0 < <(fcall)
    idle_ticks0=$(cpu_ticks "$node")
    idle_t0=$(date +%s%N)
    sleep 3
    read -r idle_calls1 idle_usec1 < <(fcall)
    idle_ticks1=$(cpu_ticks "$node")
    idle_t1=$(date +%s%N)
    read -r calls0 usec0 < <(fcall)
    ticks0=$(cpu_ticks "$node")
    t0=$(date +%s%N)
    if [ -n "${COMMAND:-}" ]; then
      python3 - "$port" "$requests" "$COMMAND" <<'PY'
import socket, sys
port, n, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
s.sendall(b"use tube0\r\n")
f.readline()
for _ in range(n):
    s.sendall(command + b"\r\n")
    line = f.readline()
    if line.startswith((b"FOUND", b"OK")):
        f.read(int(line.split()[-1]) + 2)
    elif not line.startswith((b"KICKED", b"CANCELLED", b"NOT_FOUND")):
        sys.exit("unexpected reply: %r" % line)
PY
    else
      for _ in $(seq "$requests"); do curl -sf "127.0.0.1:$http/v1/stats" >/dev/null; done
    fi
    t1=$(date +%s%N)
    ticks1=$(cpu_ticks "$node")
    read -r calls1 usec1 < <(fcall)
    python3 -c "
n = $requests
idle = ($t1 - $t0) / ($idle_t1 - $idle_t0)  # the requests' time, in idle windows
calls = ($calls1 - $calls0) - idle * ($idle_calls1 - $idle_calls0)
usec = ($usec1 - $usec0) - idle * ($idle_usec1 - $idle_usec0)
ticks = ($ticks1 - $ticks0) - idle * ($idle_ticks1 - $idle_ticks0)
print(f'| $run | ${builds[$b]} | $shards | $tubes | {calls / n:.0f} | {usec / n:.0f} '
      f'| {ticks * 1000 / $hz / n:.1f} | {($t1 - $t0) / 1e6 / n:.1f} |')"
    kill "$node"
    wait "$node" 2>/dev/null || true
  done
done

#!/usr/bin/env bash
# redis-life-instructions.sh [SECONDS] — the instructions one delayqd node over Redis runs per
# job of a whole life (put, firing, reserve, delete), counted by valgrind's callgrind (stable on
# a noisy machine, unlike CPU time; the kernel's part is not counted): one Redis (Debian's, no
# AOF), the node under callgrind, the load generator's `late` mode at RATE jobs a second
# (default 100: callgrind slows the node about 25 times), 1 s delays, two workers. Three seconds
# warm it up, then the counts are zeroed and SECONDS (default 20) are counted, the idle node's
# own calls (leases, looks at its 128 shards) included. Prints the instructions per job, then
# the 25 functions that ran most of them (their own instructions). DELAYQD and DELAYQD_FLAGS
# as for every script of common.sh; KEEP=path keeps callgrind's output there. Ends what it
# started, by PID.
set -euo pipefail
seconds=${1:-20}
source "$(dirname "$0")/common.sh"
trap 'stop_started; rm -rf "$work"' EXIT
start_redis
port=$(free_port)
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
  "$delayqd" --redis "127.0.0.1:$redis_port" -p "$port" --http off ${DELAYQD_FLAGS:-} \
  >"$work/delayqd.out" 2>&1 &
node=$!
pids+=("$node")
for _ in $(seq 300); do grep -q listening "$work/delayqd.out" && break; sleep 0.2; done
grep -q listening "$work/delayqd.out" || { echo "redis-life-instructions: no node" >&2; exit 1; }
sleep 3  # leases
late() {
  "$loadgen" --port "$port" --mode late --rate "${RATE:-100}" --delay 1 --seconds "$1" \
    --connections 2 --jitter on | head -1
}
late 3 >/dev/null
callgrind_control -z "$node" >/dev/null 2>&1
jobs=$(late "$seconds" | sed -E 's/.* ops=([0-9]+) .*/\1/')
callgrind_control -d "$node" >/dev/null 2>&1
out=$(ls -t "$work"/callgrind.out.* | head -1)
[ -n "${KEEP:-}" ] && cp "$out" "$KEEP"
total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "jobs: $jobs, node instructions per job: $(( total / jobs ))"
callgrind_annotate --inclusive=no --threshold=100 "$out" | grep -E '^ *[0-9,]+ \(' |
  grep -vE 'PROGRAM TOTALS|below main|libc_start|:main$|clone|start_thread|\?\?\?:0x' |
  sed -E 's/ \[[^]]*\]$//' | head -25 | cut -c1-160

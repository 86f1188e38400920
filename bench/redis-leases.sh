#!/usr/bin/env bash
# [RUNS=3] redis-leases.sh [SHARDS] — how soon nodes hold the shards they should fire (a shard
# nobody holds is not fired). One Redis of the script's own (no cluster, no persistence), SHARDS
# shards (default 16384), a fresh prefix each run. Prints a Markdown row per run and build:
#   start     seconds from one node's start until it holds every shard
#   takeover  a second node started, both holding half; the second killed (SIGKILL): seconds
#             from the kill until the first holds every shard again, its leases' 5 s included
# Held leases are counted in Redis (a GET of each shard's owner key, every 100 ms). With
# DELAYQD_ALT naming another build, each run does both builds, that one second. Ends what it
# started, by PID.
set -euo pipefail
shards=${1:-16384}
runs=${RUNS:-3}
source "$(dirname "$0")/common.sh"
cleanup() {
  stop_started
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
# Seconds from $3 until the node of PID $2 holds every shard under prefix $1 (at most 60 s).
until_held() {
  local n
  for _ in $(seq 600); do
    n=$(leases_held "$1" "$2" "$shards")
    if [ "$n" -ge "$shards" ]; then
      python3 -c "print(f'{$(now) - $3:.1f}')"
      return
    fi
    sleep 0.1
  done
  echo "over 60"
}
# One node over the Redis: $node_pid.
node() {
  "$1" --redis "127.0.0.1:$redis_port" -p "$(free_port)" --http off --redis-shards "$shards" \
    --redis-prefix "$2" >"$work/$2-$3.out" 2>&1 &
  node_pid=$!
  pids+=("$node_pid")
}

start_redis
builds=("$delayqd")
[ -n "${DELAYQD_ALT:-}" ] && builds+=("$DELAYQD_ALT")
echo "| run | build | start: every shard held (s) | takeover after a SIGKILL (s) |"
echo "|---:|---|---:|---:|"
for run in $(seq "$runs"); do
  for b in "${!builds[@]}"; do
    prefix="l$run$b"
    t0=$(now)
    node "${builds[$b]}" "$prefix" a
    first=$node_pid
    start=$(until_held "$prefix" "$first" "$t0")
    node "${builds[$b]}" "$prefix" b
    second=$node_pid
    sleep 8  # both hold half
    kill -9 "$second"
    t1=$(now)
    wait "$second" 2>/dev/null || true
    takeover=$(until_held "$prefix" "$first" "$t1")
    echo "| $run | ${builds[$b]} | $start | $takeover |"
    kill "$first"
    wait "$first" 2>/dev/null || true
  done
done

#!/usr/bin/env bash
# redis-put-cpu.sh [ROUNDS] — the node's own CPU per put in Redis mode: one redis-server on CPU 0,
# one delayqd and the load generator on CPU 1, 100,000 puts of 100-byte jobs due in an hour, 64 in
# flight (as compare-bullmq.sh's puts); delayqd's CPU time (utime + stime) over the puts, per put,
# and the puts' rate, ROUNDS times (default 3), a fresh Redis and node each. DELAYQD=another
# build's server, for a side-by-side run.
set -euo pipefail
rounds=${1:-3}
source "$(dirname "$0")/common.sh"
trap 'stop_started; rm -rf "$work"' EXIT
hz=$(getconf CLK_TCK)
echo "| round | puts/s | delayqd CPU per put (us) |"
echo "|---|---:|---:|"
for round in $(seq "$rounds"); do
  start_redis taskset -c 0
  start_node taskset -c 1
  node=${pids[-1]}
  before=$(cpu_ticks "$node")
  line=$(taskset -c 1 "$loadgen" --port "$port" --mode put --connections 4 --depth 16 --count 100000 \
    --delay 3600 --bytes 100)
  ticks=$(( $(cpu_ticks "$node") - before ))
  rate=$(echo "$line" | sed -E 's#.* ops/s=([0-9]+).*#\1#')
  echo "| $round | $rate | $(awk -v t="$ticks" -v hz="$hz" 'BEGIN { printf "%.2f", t * 1e6 / hz / 100000 }') |"
  stop_started; pids=(); sleep 0.5
done

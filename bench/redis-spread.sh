#!/usr/bin/env bash
# redis-spread.sh [JOBS] — how delayqd --redis spreads Redis's work over the primaries of a
# cluster: the same puts (JOBS, default 100,000, 100-byte bodies, due in an hour; the load
# generator, 4 connections x 16 in flight) into a cluster of 1 primary and into one of 3
# (scripts/redis-cluster.sh, no replicas, AOF everysec, --redis-wait off), one after the other in
# one run. For each: puts/s, Redis CPU per put over all primaries (utime + stime of each
# redis-server over the puts), and each primary's share of it. Prints a Markdown table. Ends
# what it started, by PID. With SCALED=1 the load grows with the primaries (4 connections x 16 in
# flight per primary), as a throughput curve offers it: each primary then sees as many calls at a
# time as the single one did.
set -euo pipefail
jobs=${1:-100000}
source "$(dirname "$0")/common.sh"
cleanup() {
  stop_started
  for cluster in "$work"/cluster-*; do scripts/redis-cluster.sh stop "$cluster" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

field() { sed -E "s#.* $1=([0-9.]+).*#\1#"; }
hz=$(getconf CLK_TCK)

echo "| primaries | puts/s | Redis CPU per put (us), all primaries | share of each primary |"
echo "|---:|---:|---:|---|"
for primaries in 1 3; do
  dir="$work/cluster-$primaries"
  seeds=$(scripts/redis-cluster.sh start "$dir" "$primaries" 0)
  servers=()
  for pidfile in "$dir"/*/redis.pid; do servers+=("$(cat "$pidfile")"); done
  port=$(free_port)
  "$delayqd" --redis "$seeds" --redis-wait off -p "$port" --http off >"$work/delayqd-$primaries.out" \
    2>"$work/delayqd-$primaries.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q listening "$work/delayqd-$primaries.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1  # leases
  connections=$(( ${SCALED:-0} == 1 ? 4 * primaries : 4 ))
  before=()
  for pid in "${servers[@]}"; do before+=("$(cpu_ticks "$pid")"); done
  line=$("$loadgen" --port "$port" --mode put --connections "$connections" --depth 16 \
    --count "$jobs" --delay 3600 --bytes 100)
  echo "$primaries primaries: $line" >&2
  used=(); total=0
  for i in "${!servers[@]}"; do
    used+=($(( $(cpu_ticks "${servers[$i]}") - before[i] ))); total=$(( total + used[i] ))
  done
  shares=$(for u in "${used[@]}"; do python3 -c "print(f'{$u/max($total,1):.2f}')"; done | paste -sd' ')
  # Per put acknowledged (the line's ops), to a tenth of a microsecond.
  ops=$(echo "$line" | field ops)
  per_put=$(python3 -c "print(f'{$total * 1e6 / $hz / max($ops, 1):.1f}')")
  echo "| $primaries | $(echo "$line" | field ops/s) | $per_put | $shares |"
  kill "${pids[-1]}"; unset 'pids[-1]'
  scripts/redis-cluster.sh stop "$dir" >/dev/null
done

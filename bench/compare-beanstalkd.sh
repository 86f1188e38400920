#!/usr/bin/env bash
# compare-beanstalkd.sh — delayqd and beanstalkd side by side in one run, on loopback, driven by
# the same load generator, alternating A/B so the noise of this shared machine hits both.
# Pairs: durable (delayqd --fsync always vs beanstalkd -b DIR -f 0, an fsync per write) and
# in memory (delayqd --fsync none vs beanstalkd without -b). Prints Markdown rows with ratios.
# Usage: bench/compare-beanstalkd.sh [SECONDS_PER_RUN] (default 5). Needs beanstalkd (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
loadgen=build/release/bench/loadgen
delayqd=build/release/apps/delayqd
command -v beanstalkd >/dev/null || { echo "compare-beanstalkd: apt-get install beanstalkd" >&2; exit 2; }
[ -x "$loadgen" ] && [ -x "$delayqd" ] || { echo "compare-beanstalkd: make build first" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
wait_port() {
  for _ in $(seq 1 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.1)" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "compare-beanstalkd: nothing listens on $1" >&2; exit 1
}
# run LABEL PORT ARGS... -> prints ops/s (and keeps the whole line in $work/LABEL)
measure() {
  local label=$1 port=$2; shift 2
  "$loadgen" --port "$port" --seconds "$seconds" "$@" | tee "$work/$label" >&2
  sed -E 's/.*ops\/s=([0-9]+).*/\1/' "$work/$label"
}

start_pair() {  # $1: durable|memory
  bport=$(free_port); dport=$(free_port)
  if [ "$1" = durable ]; then
    beanstalkd -l 127.0.0.1 -p "$bport" -b "$work/binlog-$bport" -f 0 & pids+=($!)
    mkdir -p "$work/binlog-$bport"
    "$delayqd" -p "$dport" -b "$work/delayq-$dport" --fsync always >/dev/null 2>&1 & pids+=($!)
  else
    beanstalkd -l 127.0.0.1 -p "$bport" & pids+=($!)
    "$delayqd" -p "$dport" -b "$work/delayq-$dport" --fsync none >/dev/null 2>&1 & pids+=($!)
  fi
  wait_port "$bport"; wait_port "$dport"
}

echo "| load | durability | delayqd ops/s | beanstalkd ops/s | delayqd / beanstalkd |"
echo "|---|---|---:|---:|---:|"
for durability in durable memory; do
  start_pair "$durability"
  for load in "put --connections 4 --depth 16" "work --connections 4" "work --connections 1"; do
    set -- $load
    mode=$1; shift
    d1=$(measure "d1" "$dport" --mode "$mode" "$@")
    b1=$(measure "b1" "$bport" --mode "$mode" "$@")
    d2=$(measure "d2" "$dport" --mode "$mode" "$@")
    b2=$(measure "b2" "$bport" --mode "$mode" "$@")
    d=$(( (d1 + d2) / 2 )); b=$(( (b1 + b2) / 2 ))
    ratio=$(python3 -c "print(f'{$d / max($b, 1):.2f}x')")
    echo "| $mode $* | $durability | $d | $b | $ratio |"
  done
done
# Lateness of delayed jobs (1 s delays): how long after its due time each job is handed out.
echo
echo "Lateness of 1 s delayed jobs (put, then reserve on another connection), in one run:"
measure "dl" "$dport" --mode delay --connections 2 --delay-ms 1000 >/dev/null
sed 's/^/  delayqd:    /' "$work/dl"
measure "bl" "$bport" --mode delay --connections 2 --delay-ms 1000 >/dev/null
sed 's/^/  beanstalkd: /' "$work/bl"

#!/usr/bin/env bash
# compare-beanstalkd.sh — delayqd and beanstalkd side by side in one run, on loopback, driven by
# the same load generator: delayqd with its default durability (fsync before every reply),
# beanstalkd with a binlog and its default fsync (at most every 50 ms: it can lose that much), and
# beanstalkd in memory. Each load runs twice, alternating servers, and the two runs are averaged;
# servers are pinned to CPU 0 and the load generator to CPU 1. Prints Markdown tables: rates and
# ratios, lateness of delayed jobs and CPU per fired job (delayqd under each durability mode),
# RSS per pending delayed job.
# Usage: bench/compare-beanstalkd.sh [SECONDS_PER_RUN] (default 5). SECTIONS picks tables
# (default "rates late rss"). DELAYQD_ALT=PATH adds another delayqd binary (the same code
# built another way, such as against another RocksDB) to the rates, beside the first in each
# round, with both one's server CPU per operation. Installs beanstalkd if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
sections="${SECTIONS:-rates late rss}"
loadgen=build/release/bench/loadgen
delayqd=build/release/apps/delayqd
[ -x "$loadgen" ] && [ -x "$delayqd" ] || { echo "compare-beanstalkd: make build first" >&2; exit 2; }
command -v beanstalkd >/dev/null || scripts/ensure-packages.sh beanstalkd

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
  for _ in $(seq 1 200); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.1)" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "compare-beanstalkd: nothing listens on $1" >&2; exit 1
}
# start NAME: starts one server pinned to CPU 0; sets port_NAME and pid_NAME.
start() {
  local name=$1 port; port=$(free_port)
  case $name in
    delayqd) taskset -c 0 "$delayqd" -p "$port" -b "$work/delayq-$port" --http off \
               >/dev/null 2>&1 & ;;
    delayqd_alt) taskset -c 0 "$DELAYQD_ALT" -p "$port" -b "$work/delayq-$port" --http off \
                   >/dev/null 2>&1 & ;;
    delayqd_interval) taskset -c 0 "$delayqd" -p "$port" -b "$work/delayq-$port" --http off \
                        --fsync interval:50 >/dev/null 2>&1 & ;;
    delayqd_none) taskset -c 0 "$delayqd" -p "$port" -b "$work/delayq-$port" --http off \
                    --fsync none >/dev/null 2>&1 & ;;
    binlog) mkdir -p "$work/binlog-$port"
            taskset -c 0 beanstalkd -l 127.0.0.1 -p "$port" -b "$work/binlog-$port" & ;;
    memory) taskset -c 0 beanstalkd -l 127.0.0.1 -p "$port" & ;;
  esac
  local pid=$!; pids+=("$pid")
  wait_port "$port"
  printf -v "port_$name" '%s' "$port"; printf -v "pid_$name" '%s' "$pid"
}
stop() {
  local pid_var="pid_$1"; kill "${!pid_var}" 2>/dev/null || true; wait "${!pid_var}" 2>/dev/null || true
}
load() {  # load NAME ARGS... -> the loadgen line on stdout
  local port_var="port_$1"; shift
  taskset -c 1 "$loadgen" --port "${!port_var}" "$@"
}
rate() { sed -E 's/.*ops\/s=([0-9]+).*/\1/'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

servers=(delayqd binlog memory)
if [[ " $sections " == *" rates "* ]]; then
rated=("${servers[@]}")
[ -n "${DELAYQD_ALT:-}" ] && rated=(delayqd delayqd_alt binlog memory)
echo "## Rates (ops/s), each the mean of two alternating runs of ${seconds} s"
echo
if [ -n "${DELAYQD_ALT:-}" ]; then
  echo "delayqd_alt: $DELAYQD_ALT"
  echo
  echo "| load | delayqd (fsync always) | delayqd_alt | alt / delayqd | CPU per op, delayqd / alt (us) | beanstalkd binlog | beanstalkd memory | vs binlog | alt vs binlog |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
else
  echo "| load | delayqd (fsync always) | beanstalkd binlog | beanstalkd memory | vs binlog | vs memory |"
  echo "|---|---:|---:|---:|---:|---:|"
fi
# Pipelined loads at two concurrencies: 64 and 256 commands in flight. delayqd's replies wait
# for an fsync, so at a given number in flight its rate is bounded by the fsync's latency;
# beanstalkd acknowledges before its binlog reaches the disk and is bounded by its one CPU.
loads=("put --connections 4 --depth 16"
       "put --connections 16 --depth 16"
       "drain --connections 4 --depth 16 --count 200000"
       "drain --connections 16 --depth 16 --count 200000"
       "work --connections 1")
for spec in "${loads[@]}"; do
  declare -A sum=() ticks=() ops=()
  for round in 1 2; do
    for name in "${rated[@]}"; do
      start "$name"
      pid_var="pid_$name"; before=$(cpu_ticks "${!pid_var}")
      # shellcheck disable=SC2086
      line=$(load "$name" --mode $spec --seconds "$seconds")
      ticks[$name]=$(( ${ticks[$name]:-0} + $(cpu_ticks "${!pid_var}") - before ))
      ops[$name]=$(( ${ops[$name]:-0} + $(echo "$line" | sed -E 's/.*ops=([0-9]+).*/\1/') ))
      echo "$name: $line" >&2
      sum[$name]=$(( ${sum[$name]:-0} + $(echo "$line" | rate) ))
      stop "$name"
    done
  done
  d=$(( sum[delayqd] / 2 )); b=$(( sum[binlog] / 2 )); m=$(( sum[memory] / 2 ))
  if [ -n "${DELAYQD_ALT:-}" ]; then
    a=$(( sum[delayqd_alt] / 2 ))
    cells=$(python3 -c "
cpu = lambda t, n: t / $hz * 1e6 / max(n, 1)
print(f'{$a/max($d,1):.2f}x | {cpu(${ticks[delayqd]}, ${ops[delayqd]}):.2f} / '
      f'{cpu(${ticks[delayqd_alt]}, ${ops[delayqd_alt]}):.2f} | $b | $m | {$d/max($b,1):.2f}x | '
      f'{$a/max($b,1):.2f}x')")
    echo "| ${spec%% *} (${spec#* }) | $d | $a | $cells |"
  else
    ratios=$(python3 -c "print(f'{$d/max($b,1):.2f}x | {$d/max($m,1):.2f}x')")
    echo "| ${spec%% *} (${spec#* }) | $d | $b | $m | $ratios |"
  fi
done
fi

if [[ " $sections " == *" late "* ]]; then
echo
echo "## Delayed jobs: 1 s delays at 1,000 jobs/s (jittered gaps) for ${seconds} s, 2 workers"
echo
echo "Each fired job is a put, its firing, a reserve and a delete. delayqd under its three"
echo "durability modes: always (fsync before a reply), interval:50 (beanstalkd's own: fsync at"
echo "most every 50 ms), none."
echo
echo "| server | lateness p50 (us) | p99 (us) | max (us) | server CPU per fired job (us) |"
echo "|---|---:|---:|---:|---:|"
for name in delayqd delayqd_interval delayqd_none binlog memory; do
  start "$name"
  pid_var="pid_$name"; before=$(cpu_ticks "${!pid_var}")
  line=$(load "$name" --mode late --connections 2 --delay 1 --rate 1000 --jitter on \
    --seconds "$seconds")
  after=$(cpu_ticks "${!pid_var}")
  echo "$name: $line" >&2
  jobs=$(echo "$line" | sed -E 's/.*ops=([0-9]+).*/\1/')
  p50=$(echo "$line" | sed -E 's/.*p50=([0-9]+).*/\1/')
  p99=$(echo "$line" | sed -E 's/.*p99=([0-9]+).*/\1/')
  max=$(echo "$line" | sed -E 's/.*max=([0-9]+).*/\1/')
  cpu=$(python3 -c "print(f'{($after - $before) / $hz * 1e6 / max($jobs, 1):.1f}')")
  echo "| $name | $p50 | $p99 | $max | $cpu |"
  stop "$name"
done
fi

if [[ " $sections " == *" rss "* ]]; then
echo
echo "## RSS per pending delayed job: 10^6 jobs of 100 bytes, delayed 1 h"
echo
echo "| server | RSS before (KiB) | RSS after (KiB) | bytes per job |"
echo "|---|---:|---:|---:|"
for name in "${servers[@]}"; do
  start "$name"
  pid_var="pid_$name"; before=$(rss_kb "${!pid_var}")
  load "$name" --mode put --connections 4 --depth 64 --delay 3600 --count 1000000 --seconds 600 >&2
  sleep 1
  after=$(rss_kb "${!pid_var}")
  echo "| $name | $before | $after | $(( (after - before) * 1024 / 1000000 )) |"
  stop "$name"
done
fi

#!/usr/bin/env bash
# redis-life.sh [SECONDS] — what a job's whole life (put, firing, reserve, delete) costs Redis:
# one delayqd over one Redis (Debian's redis-server, no AOF), Redis on CPU 0 and the node and the
# load generator on CPU 1, the load generator's `late` mode (1,000 jobs/s, 1 s delays, two
# workers). Prints one Markdown row: jobs, Redis CPU (utime + stime) per job, FCALLs per job
# (INFO commandstats, the idle node's own calls included), fire lateness p50 / p99, and the CPU
# time the hypervisor stole meanwhile. DELAYQD names another server binary (side-by-side runs).
# Ends what it started, by PID.
set -euo pipefail
seconds=${1:-10}
source "$(dirname "$0")/common.sh"
cleanup() { stop_started; rm -rf "$work"; }
trap cleanup EXIT

start_redis taskset -c 0
start_node taskset -c 1

fcalls() { redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
  sed -nE 's/^cmdstat_fcall:calls=([0-9]+),.*/\1/p'; }
calls_before=$(fcalls)
ticks_before=$(cpu_ticks "$redis_pid")
stolen_before=$(stolen_ms)
late=$(taskset -c 1 "$loadgen" --port "$port" --mode late --rate 1000 --delay 1 \
  --seconds "$seconds" --connections 2 --jitter on | head -1)
stolen=$(( $(stolen_ms) - stolen_before ))
ticks=$(( $(cpu_ticks "$redis_pid") - ticks_before ))
calls=$(( $(fcalls) - calls_before ))
jobs=$(echo "$late" | sed -E 's/.* ops=([0-9]+) .*/\1/')
hz=$(getconf CLK_TCK)
echo "| $jobs | $(( ticks * 1000000 / hz / jobs )) us | $(python3 -c "print(f'{$calls / $jobs:.2f}')") | $(echo "$late" | sed -E 's/.*p50=([0-9]+) p99=([0-9]+).*/\1 \/ \2 us/') | $stolen ms |"

#!/usr/bin/env bash
# redis-life.sh [SECONDS] — what a job's whole life (put, firing, reserve, delete) costs Redis:
# one delayqd over one Redis (Debian's redis-server, no AOF), Redis on CPU 0 and the node and the
# load generator on CPU 1, the load generator's `late` mode (1,000 jobs/s, 1 s delays, two
# workers). Prints one Markdown row: jobs, Redis CPU (utime + stime) per job, FCALLs per job
# (INFO commandstats, the idle node's own calls included), fire lateness p50 / p99, the CPU
# time the hypervisor stole meanwhile, and the node's (or both nodes') CPU per job. DELAYQD
# names another server binary (side-by-side runs).
# CLUSTER=1: over a 3-primary + 3-replica cluster instead (scripts/redis-cluster.sh, AOF), two
# nodes, the producer on one and the workers on the other, no CPU pinning; Redis CPU and FCALLs
# summed over the six redis-servers. DELAY=0: jobs put ready (the figures are then from the put
# to the worker), default 1 s. RATE: jobs a second (default 1,000). WORKERS: the workers
# (default 2). SHARDS: the node's --redis-shards (default 128). CALLGRIND=1 (one Redis only):
# redis-server runs under valgrind's
# callgrind, and the Redis column counts its instructions per job over the run instead of its
# CPU time (stable on a noisy machine; use a low RATE, such as 40, which callgrind can follow).
# Ends what it started, by PID.
set -euo pipefail
seconds=${1:-10}
source "$(dirname "$0")/common.sh"
trap stop_all_and_cluster EXIT

if [ "${CLUSTER:-0}" = 1 ]; then
  seeds=$(scripts/redis-cluster.sh start "$work/cluster" 3 1)
  redis_pids=$(cat "$work"/cluster/*/redis.pid)
  redis_ports=${seeds//127.0.0.1:/}
  start_node
  producer_port=$port
  node_pids=${pids[-1]}
  start_node
  node_pids+=" ${pids[-1]}"
  sleep 1  # leases, shared by the two
  pin=()
  targets=(--port "$producer_port" --worker-port "$port")
else
  if [ "${CALLGRIND:-0}" = 1 ]; then
    start_redis valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out"
    for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  else
    start_redis taskset -c 0
  fi
  start_node taskset -c 1
  node_pids=${pids[-1]}
  redis_pids=$redis_pid
  redis_ports=$redis_port
  pin=(taskset -c 1)
  targets=(--port "$port")
fi

fcalls() {
  for p in ${redis_ports//,/ }; do
    redis-cli -p "$p" info commandstats | tr -d '\r' |
      sed -nE 's/^cmdstat_fcall:calls=([0-9]+),.*/\1/p'
  done | awk '{n += $1} END {print n + 0}'
}
redis_ticks() { for pid in $redis_pids; do cpu_ticks "$pid"; done | awk '{n += $1} END {print n}'; }
node_ticks() { for pid in $node_pids; do cpu_ticks "$pid"; done | awk '{n += $1} END {print n}'; }
calls_before=$(fcalls)
ticks_before=$(redis_ticks)
node_before=$(node_ticks)
stolen_before=$(stolen_ms)
[ "${CALLGRIND:-0}" = 1 ] && callgrind_control -z "$redis_pid" >/dev/null
late=$("${pin[@]}" "$loadgen" "${targets[@]}" --mode late --rate "${RATE:-1000}" \
  --delay "${DELAY:-1}" --seconds "$seconds" --connections "${WORKERS:-2}" --jitter on | head -1)
stolen=$(( $(stolen_ms) - stolen_before ))
ticks=$(( $(redis_ticks) - ticks_before ))
node=$(( $(node_ticks) - node_before ))
calls=$(( $(fcalls) - calls_before ))
jobs=$(echo "$late" | sed -E 's/.* ops=([0-9]+) .*/\1/')
hz=$(getconf CLK_TCK)
redis_per_job="$(( ticks * 1000000 / hz / jobs )) us"
if [ "${CALLGRIND:-0}" = 1 ]; then
  callgrind_control -d "$redis_pid" >/dev/null
  instructions=$(callgrind_annotate "$(ls -t "$work"/callgrind.out.* | head -1)" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  redis_per_job="$(( instructions / jobs )) instructions"
fi
echo "| $jobs | $redis_per_job | $(python3 -c "print(f'{$calls / $jobs:.2f}')") | $(echo "$late" | sed -E 's/.*p50=([0-9]+) p99=([0-9]+).*/\1 \/ \2 us/') | $stolen ms | $(( node * 1000000 / hz / jobs )) us |"

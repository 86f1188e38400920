#!/usr/bin/env bash
# [RUNS=5] [WORKERS=2] redis-cross.sh [SECONDS] — fire lateness in Redis mode by where the
# workers are: one 3-primary cluster with a replica each (scripts/redis-cluster.sh, AOF everysec,
# WAIT on), the load generator's `late` mode (1 s delays at 1,000 jobs/s for SECONDS, default 5,
# put through node A; WORKERS connections reserve and delete them), RUNS times each of:
#   same     the workers on node A too
#   cross    every worker on node B
#   spread   the workers over nodes A, B and C, worker i on the (i mod 3)-th
# Each run starts its nodes afresh (a prefix of its own) and ends them. Prints a Markdown row per
# run and set-up: lateness p50 and p99, the p99 from a free worker (the later of the job's due
# time and the reserve that got it: leaves out the time every worker was busy), a delete's p99,
# the script calls a job (FCALLs in the primaries' INFO commandstats, over the jobs), how busy
# the machine's CPUs were over it (both cores: 200 %), and the CPU time the hypervisor took
# meanwhile. DELAYQD_FLAGS adds flags to every node; SETUPS runs only those named ("spread").
# Ends what it started, by PID.
set -euo pipefail
seconds=${1:-5}
runs=${RUNS:-5}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh"
trap stop_all_and_cluster EXIT
field() { sed -E "s#.* $1=([0-9.]+).*#\1#"; }
fcalls() {  # FCALLs run so far, summed over the cluster's primaries
  local total=0 address calls
  for address in ${seeds//,/ }; do
    calls=$(redis-cli -p "${address##*:}" info commandstats | tr -d '\r' |
      awk -F'[=,:]' '/^cmdstat_fcall:/ {print $3}')
    total=$((total + ${calls:-0}))
  done
  echo "$total"
}
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
hz=$(getconf CLK_TCK)

seeds=$(scripts/redis-cluster.sh start "$work/cluster" 3 1)
flags=${DELAYQD_FLAGS:-}
echo "| run | set-up | lateness p50 (us) | p99 (us) | p99 from a free worker (us) | delete p99 (us) | calls a job | CPU busy (%) | CPU stolen (ms) |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
for run in $(seq "$runs"); do
  for setup in ${SETUPS:-same cross spread}; do
    DELAYQD_FLAGS="$flags --redis-prefix $setup$run"
    first=${#pids[@]}
    start_node
    nodes=("$port")
    if [ "$setup" != same ]; then
      start_node
      nodes+=("$port")
    fi
    if [ "$setup" = spread ]; then
      start_node
      nodes+=("$port")
    fi
    case $setup in
      same) at=${nodes[0]} ;;
      cross) at=${nodes[1]} ;;
      spread) at=$(IFS=,; echo "${nodes[*]}") ;;
    esac
    stolen=$(stolen_ms)
    calls=$(fcalls)
    busy=$(busy_ticks)
    began=$(date +%s.%N)
    late=$("$loadgen" --port "${nodes[0]}" --worker-port "$at" --mode late --rate 1000 --delay 1 \
      --seconds "$seconds" --connections "$workers" --jitter on)
    stolen=$(( $(stolen_ms) - stolen ))
    calls=$(echo "$(fcalls) $calls $late" | sed -E 's#^([0-9]+) ([0-9]+) .* ops=([0-9]+) .*#\1 \2 \3#' |
      awk '{printf "%.2f", ($1 - $2) / $3}')
    busy=$(echo "$(busy_ticks) $busy $began $(date +%s.%N)" | awk -v hz="$hz" '{printf "%.0f", ($1 - $2) / hz / ($4 - $3) * 100}')
    echo "$setup $run: $late" >&2
    echo "| $run | $setup | $(echo "$late" | field p50) | $(echo "$late" | field p99) | $(echo "$late" | field handed_p99) | $(echo "$late" | field delete_p99) | $calls | $busy | $stolen |"
    for pid in "${pids[@]:$first}"; do kill "$pid" 2>/dev/null || true; done
  done
done

#!/usr/bin/env bash
# [WORKERS=2] redis-load.sh [SECONDS] — delayqd --redis under the load generator, on this machine's Redis
# (Debian's redis-server), in three set-ups started here on free loopback ports:
#   single   one Redis, no cluster, no replica, no AOF
#   cluster  3 primaries with a replica each, AOF everysec (scripts/redis-cluster.sh), WAIT on
#   nowait   the same cluster, --redis-wait off
#   cross    the same cluster, WAIT on, two nodes: the producer on one, the workers on the other
#            (lateness only: half the shards are the other node's, whose jobs reach the workers'
#            node as a message on the shard's channel, from the shard's primary)
# For each: fire lateness of 1 s delays at 1,000 jobs/s (WORKERS workers; also counted from when
# a worker was free to take the job, which leaves out the workers' own queue), the put rate (4
# connections, 16 in flight each), the drain rate (20,000 ready jobs put first, then reserved and
# deleted by 8 workers, one at a time each), and Redis's memory per pending job (100,000 jobs,
# 100-byte bodies, due in an hour): used_memory over every primary, before and after, divided by
# the jobs.
# Prints a Markdown table. Ends what it started, by PID.
set -euo pipefail
seconds=${1:-5}
workers=${WORKERS:-2}  # the lateness phases' workers
source "$(dirname "$0")/common.sh"
trap stop_all_and_cluster EXIT

used_memory() {  # the sum over the primaries of SEEDS
  local total=0
  for address in ${1//,/ }; do
    role=$(redis-cli -p "${address##*:}" info replication | tr -d '\r' | awk -F: '/^role/ {print $2}')
    [ "$role" = master ] || continue
    bytes=$(redis-cli -p "${address##*:}" info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}')
    total=$((total + bytes))
  done
  echo "$total"
}
start_delayqd() {  # SEEDS PREFIX [ARGS...] -> port in $port
  local seeds=$1 prefix=$2; shift 2
  port=$(free_port)
  local log="$work/delayqd-$prefix-${#pids[@]}"
  "$delayqd" --redis "$seeds" --redis-prefix "$prefix" -p "$port" --http off "$@" \
    >"$log.out" 2>"$log.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q listening "$log.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1  # leases
}
field() { sed -E "s#.* $1=([0-9.]+).*#\1#"; }

run() {  # NAME SEEDS [delayqd ARGS...]
  local name=$1 seeds=$2; shift 2
  start_delayqd "$seeds" "$name-late" "$@"
  local stolen
  stolen=$(stolen_ms)
  late=$("$loadgen" --port "$port" --mode late --rate 1000 --delay 1 --seconds "$seconds" \
    --connections "$workers" --jitter on)
  stolen=$(( $(stolen_ms) - stolen ))
  echo "$name late: $late" >&2
  start_delayqd "$seeds" "$name-put" "$@"
  put=$("$loadgen" --port "$port" --mode put --connections 4 --depth 16 --seconds "$seconds")
  echo "$name put: $put" >&2
  start_delayqd "$seeds" "$name-drain" "$@"
  drain=$("$loadgen" --port "$port" --mode drain --connections 8 --depth 1 --count 20000)
  echo "$name drain: $drain" >&2
  echo "| $name | $(echo "$late" | field p50) | $(echo "$late" | field p99) | $(echo "$late" | field handed_p99) | $stolen | $(echo "$put" | field ops/s) | $(echo "$drain" | field ops/s) |"
}

# Memory, on a Redis of its own that holds nothing else: 100,000 jobs due in an hour.
memory_port=$(free_port)
redis-server --port "$memory_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize no >"$work/memory.log" 2>&1 &
pids+=($!)
sleep 0.5
start_delayqd "127.0.0.1:$memory_port" memory
before=$(used_memory "127.0.0.1:$memory_port")
"$loadgen" --port "$port" --mode put --connections 4 --depth 16 --count 100000 --delay 3600 \
  --bytes 100 >/dev/null
after=$(used_memory "127.0.0.1:$memory_port")
echo "Redis memory per pending job (100-byte body, 100,000 jobs): $(( (after - before) / 100000 )) bytes"
echo

echo "| set-up | lateness p50 (us) | p99 (us) | p99 from a free worker (us) | CPU stolen meanwhile (ms) | puts/s | drained/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
single_port=$(free_port)
redis-server --port "$single_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize no >"$work/single.log" 2>&1 &
pids+=($!)
sleep 0.5
run single "127.0.0.1:$single_port"
seeds=$(scripts/redis-cluster.sh start "$work/cluster" 3 1)
run cluster "$seeds"
run nowait "$seeds" --redis-wait off
start_delayqd "$seeds" cross-late
producer_port=$port
start_delayqd "$seeds" cross-late
stolen=$(stolen_ms)
late=$("$loadgen" --port "$producer_port" --worker-port "$port" --mode late --rate 1000 --delay 1 \
  --seconds "$seconds" --connections "$workers" --jitter on)
stolen=$(( $(stolen_ms) - stolen ))
echo "cross late: $late" >&2
echo "| cross | $(echo "$late" | field p50) | $(echo "$late" | field p99) | $(echo "$late" | field handed_p99) | $stolen | | |"

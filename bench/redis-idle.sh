#!/usr/bin/env bash
# redis-idle.sh [SECONDS] [SHARDS...] — what idle shards cost, and whether jobs still fire on time
# among many of them. For each shard count (default: 128 and 16384), one Redis of the script's own
# (no cluster, no persistence) and two delayqd nodes over it (--redis-shards, a fresh prefix);
# once their leases have settled (10 s), with no client: Redis's script calls per second over
# SECONDS (default 20; INFO commandstats, FCALL), per shard, and by the calls' operation (5 s of
# MONITOR); then the fire lateness of 1 s delays at 200 jobs/s put and taken through one node
# (two workers): over the first 5 s of the tube (its first reserves ask every shard what it
# holds), then over SECONDS. Prints a Markdown table. Ends what it started, by PID.
set -euo pipefail
seconds=${1:-20}
shift || true
shard_counts=("$@")
[ ${#shard_counts[@]} -gt 0 ] || shard_counts=(128 16384)
source "$(dirname "$0")/common.sh"
cleanup() {
  stop_started
  rm -rf "$work"
}
trap cleanup EXIT

fcalls() {  # the FCALLs Redis has run
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    sed -nE 's/^cmdstat_fcall:calls=([0-9]+),.*/\1/p'
}
by_op() {  # FCALLs per second by operation, over 5 s of MONITOR: "op n/s, ..."
  timeout 5 redis-cli -p "$redis_port" monitor >"$work/monitor" 2>/dev/null || true
  python3 - "$work/monitor" <<'EOF'
import collections, re, sys
ops = collections.Counter()
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r'"FCALL" "[^"]*" "(\d+)" (.*)', line)
    if not m:
        continue
    args = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
    if len(args) > int(m.group(1)):
        ops[args[int(m.group(1))]] += 1
print(", ".join(f"{op} {n / 5:.1f}" for op, n in ops.most_common()))
EOF
}

late() {  # late SECONDS STAT STAT: the load generator's lateness over SECONDS, two of its figures
  local out
  out=$("$loadgen" --port "$first" --mode late --rate 200 --delay 1 --seconds "$1" \
    --connections 2 --jitter on 2>&1) || true
  echo "$shards shards, $1 s late: $out" >&2
  if [[ $out == *" p99="* ]]; then
    local a b
    a=$(echo "$out" | sed -E "s/.*lateness us: .*\b$2=([0-9.]+).*/\1/")
    b=$(echo "$out" | sed -E "s/.*lateness us: .*\b$3=([0-9.]+).*/\1/")
    python3 -c "print(f'{$a / 1000:.1f} / {$b / 1000:.1f} ms')"
  else  # the load generator stops when jobs are still missing 2 s after the last one's due time
    echo "failed: ${out##*loadgen: }"
  fi
}

echo "| shards | FCALLs/s, idle | per shard | by operation (calls/s) | lateness p99 / max, a new tube's first 5 s | lateness p50 / p99 at 200 jobs/s |"
echo "|---|---|---|---|---|---|"
for shards in "${shard_counts[@]}"; do
  start_redis
  SHARDS=$shards start_node
  first=$port
  SHARDS=$shards start_node
  sleep 10  # both nodes' leases taken and settled
  before=$(fcalls)
  sleep "$seconds"
  after=$(fcalls)
  rate=$(python3 -c "print(f'{($after - $before) / $seconds:.1f}')")
  per_shard=$(python3 -c "print(f'{($after - $before) / $seconds / $shards:.3f}')")
  ops=$(by_op)
  first_late=$(late 5 p99 max)
  late=$(late "$seconds" p50 p99)
  echo "| $shards | $rate | $per_shard | $ops | $first_late | $late |"
  stop_started
  pids=()
  sleep 1
done

#!/usr/bin/env bash
# redis-drain.sh [CONNECTIONS] — how fast worker connections take a backlog through one delayqd
# over one Redis (Debian's redis-server, no AOF), Redis on CPU 0 and the node and the load
# generator on CPU 1: 20,000 ready jobs put first, then CONNECTIONS workers (default 1) each
# take one job at a time (`reserve-with-timeout 0`, then `delete`) until none is left; DEPTH=n:
# n reserves in one write, then their n deletes in one write. Prints one Markdown row:
# connections, jobs/s, Redis script calls (FCALL) per job, Redis's time inside them per job
# (`INFO commandstats`), delayqd's CPU (utime + stime) per job. DELAYQD and DELAYQD_FLAGS as in
# common.sh. Ends what it started, by PID.
set -euo pipefail
connections=${1:-1}
source "$(dirname "$0")/common.sh"
cleanup() { stop_started; rm -rf "$work"; }
trap cleanup EXIT

jobs=20000
start_redis taskset -c 0
start_node taskset -c 1
node_pid=${pids[-1]}
taskset -c 1 "$loadgen" --port "$port" --mode put --connections 4 --depth 16 --count "$jobs" \
  --delay 0 >/dev/null
fcalls() {
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    sed -nE "s/^cmdstat_fcall:calls=([0-9]+),usec=([0-9]+),.*/\\$1/p"
}
calls_before=$(fcalls 1)
usec_before=$(fcalls 2)
ticks_before=$(cpu_ticks "$node_pid")
line=$(taskset -c 1 "$loadgen" --port "$port" --mode drain --connections "$connections" \
  --depth "${DEPTH:-1}" --fill off --seconds 600)
calls=$(( $(fcalls 1) - calls_before ))
usec=$(( $(fcalls 2) - usec_before ))
ticks=$(( $(cpu_ticks "$node_pid") - ticks_before ))
echo "| $connections | $(echo "$line" | sed -E 's/.* ops\/s=([0-9]+).*/\1/') |" \
  "$(python3 -c "print(f'{$calls / $jobs:.2f}')") |" "$(( usec / jobs )) us |" \
  "$(( ticks * 1000000 / $(getconf CLK_TCK) / jobs )) us |"

#!/usr/bin/env bash
# redis-poll.sh [POLLS] — what a worker that polls costs Redis: one delayqd over one Redis
# (Debian's redis-server, no AOF), one beanstalkd connection watching an empty tube and sending
# `reserve-with-timeout 0` POLLS times (default 2,000), one at a time. Prints one Markdown row:
# Redis commands per poll (INFO commandstats: FCALLs and PINGs, the idle node's own calls
# included), Redis CPU (utime + stime) per poll, and the poll's round trip p50 / p99 as the
# worker sees it. DELAYQD names another server binary (side-by-side runs). Ends what it started,
# by PID.
set -euo pipefail
polls=${1:-2000}
source "$(dirname "$0")/common.sh"
cleanup() { stop_started; rm -rf "$work"; }
trap cleanup EXIT

start_redis
start_node

calls() {  # FCALLs + PINGs so far
  redis-cli -p "$redis_port" info commandstats | tr -d '\r' |
    sed -nE 's/^cmdstat_(fcall|ping):calls=([0-9]+),.*/\2/p' | awk '{n += $1} END {print n}'
}
# The worker: its first poll learns that no shard holds a job of the tube (not counted).
# It says so in $work/ready, then waits a second for the counters to be read.
python3 - "$port" "$polls" "$work/ready" >"$work/times" <<'EOF' &
import socket, sys, time
port, polls, ready = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def call(line):
    s.sendall(line)
    return f.readline()
assert call(b"watch polled\r\n") == b"WATCHING 2\r\n"
assert call(b"reserve-with-timeout 0\r\n") == b"TIMED_OUT\r\n"
open(ready, "w").close()
time.sleep(1)
for _ in range(polls):
    start = time.perf_counter()
    reply = call(b"reserve-with-timeout 0\r\n")
    assert reply == b"TIMED_OUT\r\n", reply
    print(int((time.perf_counter() - start) * 1e6))
EOF
worker=$!
for _ in $(seq 100); do [ -e "$work/ready" ] && break; sleep 0.05; done
calls_before=$(calls)
ticks_before=$(cpu_ticks "$redis_pid")
wait "$worker"
ticks=$(( $(cpu_ticks "$redis_pid") - ticks_before ))
made=$(( $(calls) - calls_before ))
hz=$(getconf CLK_TCK)
sort -n "$work/times" | awk -v made="$made" -v ticks="$ticks" -v hz="$hz" '
  { t[NR] = $1 }
  END {
    printf "| %d | %.1f | %.0f us | %d / %d us |\n", NR, made / NR, ticks * 1e6 / hz / NR,
      t[int(NR * 0.5)], t[int(NR * 0.99)]
  }'

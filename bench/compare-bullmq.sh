#!/usr/bin/env bash
# compare-bullmq.sh [SECONDS] — delayq (delayqd --redis), BullMQ 6.7 (npm, bench/bullmq) and a
# plain sorted-set poller (ZADD by due time; a script every 10 ms takes what is due) side by side
# on one Redis (Debian's redis-server, no AOF, no replica, started here on a free
# loopback port), one after the other in one run:
#   puts    100,000 jobs with 100-byte bodies due in an hour, 64 in flight (delayq: loadgen, 4
#           connections x 16 pipelined; BullMQ: 64 concurrent Queue.add): jobs/s, Redis CPU per
#           job (redis-server's utime + stime over the run), Redis bytes per pending job
#   late    1 s delays at 1,000 jobs/s for SECONDS (default 5), two workers: lateness p50, p99
#   drain   20,000 jobs due now put first, then one worker connection takes them one at a time
#           (delayq: loadgen's drain, reserve then delete; BullMQ: a Worker of concurrency 1; the
#           poller: one script call a job): jobs/s, and per job meanwhile Redis's script calls
#           and commands (those the scripts run included; the delayq node's own heartbeats too),
#           and delayqd's CPU (utime + stime) per job
# DELAYQD and DELAYQD_FLAGS as in common.sh.
# Redis is flushed between the systems. Redis runs on CPU 0 and every client (delayqd and the load
# generator, the Node script) on CPU 1: floating over the two cores, Redis's cost per put moved
# between two modes from run to run. Prints a Markdown table with the ratios of delayq to each.
set -euo pipefail
seconds=${1:-5}
source "$(dirname "$0")/common.sh"
[ -d bench/bullmq/node_modules/bullmq ] || (cd bench/bullmq && npm ci --no-audit --no-fund >/dev/null)
cleanup() { stop_started; rm -rf "$work"; }
trap cleanup EXIT

redis_port=$(free_port)
taskset -c 0 redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize no >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
sleep 0.5
cli() { redis-cli -p "$redis_port" "$@"; }
# commands: Redis's script calls (EVAL, EVALSHA, FCALL, their _RO) and commands (those the
# scripts run included) so far.
commands() {
  cli info commandstats | tr -d '\r' | python3 -c '
import re, sys
scripts = every = 0
for name, calls in re.findall(r"cmdstat_([a-z_|]+):calls=(\d+)", sys.stdin.read()):
    every += int(calls)
    if re.fullmatch(r"(eval|evalsha|fcall)(_ro)?", name):
        scripts += int(calls)
print(scripts, every)'
}
used() { cli info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
field() { sed -E "s#.* $1=([0-9.]+).*#\1#"; }
hz=$(getconf CLK_TCK)
# per_put TICKS: microseconds of CPU per put of the 100,000, to a tenth.
per_put() { awk -v t="$1" -v hz="$hz" 'BEGIN { printf "%.1f", t * 1000000 / hz / 100000 }'; }

# --- delayq
delayq_port=$(free_port)
# shellcheck disable=SC2086  # DELAYQD_FLAGS is a list of words
taskset -c 1 "$delayqd" --redis "127.0.0.1:$redis_port" -p "$delayq_port" --http off \
  ${DELAYQD_FLAGS:-} >"$work/delayqd.out" 2>"$work/delayqd.err" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/delayqd.out" 2>/dev/null && break; sleep 0.1; done
sleep 1
before_ticks=$(cpu_ticks "$redis_pid"); before_bytes=$(used)
line=$(taskset -c 1 "$loadgen" --port "$delayq_port" --mode put --connections 4 --depth 16 --count 100000 \
  --delay 3600 --bytes 100)
echo "delayq put: $line" >&2
d_rate=$(echo "$line" | field ops/s)
d_cpu=$(per_put $(( $(cpu_ticks "$redis_pid") - before_ticks )))
d_bytes=$(( ($(used) - before_bytes) / 100000 ))
d_stolen=$(stolen_ms)
line=$(taskset -c 1 "$loadgen" --port "$delayq_port" --mode late --rate 1000 --delay 1 --seconds "$seconds" \
  --connections 2 --jitter on)
d_stolen=$(( $(stolen_ms) - d_stolen ))
echo "delayq late: $line" >&2
d_p50=$(echo "$line" | field p50); d_p99=$(echo "$line" | field p99)
backlog=20000
taskset -c 1 "$loadgen" --port "$delayq_port" --mode put --connections 4 --depth 16 --count "$backlog" \
  --delay 0 >/dev/null
read -r before_scripts before_commands < <(commands)
before_node=$(cpu_ticks "${pids[-1]}")
line=$(taskset -c 1 "$loadgen" --port "$delayq_port" --mode drain --connections 1 --depth 1 --fill off \
  --seconds 600)
echo "delayq drain: $line" >&2
d_drain=$(echo "$line" | field ops/s)
read -r after_scripts after_commands < <(commands)
d_node=$(awk -v t="$(( $(cpu_ticks "${pids[-1]}") - before_node ))" -v hz="$hz" -v n="$backlog" \
  'BEGIN { printf "%.0f", t * 1000000 / hz / n }')
per_job() { awk -v c="$1" -v n="$backlog" 'BEGIN { printf "%.2f", c / n }'; }
d_scripts=$(per_job $(( after_scripts - before_scripts )))
d_commands=$(per_job $(( after_commands - before_commands - 1 )))  # less the first INFO
kill "${pids[-1]}"; sleep 0.5
cli flushall >/dev/null

# --- BullMQ, then the poller: bench.js's put, late and drain modes each. node_system PREFIX ADD
# LATE DRAIN sets PREFIX_rate, _cpu, _bytes, _p50, _p99, _stolen, _drain, _scripts and _commands.
node_system() {
  local prefix=$1 add=$2 late=$3 drain=$4 line before_ticks before_bytes stolen
  before_ticks=$(cpu_ticks "$redis_pid"); before_bytes=$(used)
  line=$(taskset -c 1 node bench/bullmq/bench.js "$add" "$redis_port")
  echo "$add: $line" >&2
  printf -v "${prefix}_rate" %s "$(echo "$line" | field adds/s)"
  printf -v "${prefix}_cpu" %s "$(per_put $(( $(cpu_ticks "$redis_pid") - before_ticks )))"
  printf -v "${prefix}_bytes" %s $(( ($(used) - before_bytes) / 100000 ))
  stolen=$(stolen_ms)
  line=$(taskset -c 1 node bench/bullmq/bench.js "$late" "$redis_port" "$seconds")
  printf -v "${prefix}_stolen" %s $(( $(stolen_ms) - stolen ))
  echo "$late: $line" >&2
  printf -v "${prefix}_p50" %s "$(echo "$line" | field p50)"
  printf -v "${prefix}_p99" %s "$(echo "$line" | field p99)"
  line=$(BENCH_DRAIN=$backlog taskset -c 1 node bench/bullmq/bench.js "$drain" "$redis_port")
  echo "$drain: $line" >&2
  printf -v "${prefix}_drain" %s "$(echo "$line" | field jobs/s)"
  printf -v "${prefix}_scripts" %s "$(echo "$line" | field scripts/job)"
  printf -v "${prefix}_commands" %s "$(echo "$line" | field commands/job)"
  cli flushall >/dev/null
}
node_system b add late drain
node_system z zadd zlate zdrain

ratio() { python3 -c "print(f'{$1/max($2,1):.2f}x')"; }
row() {  # NAME DELAYQ BULLMQ POLLER
  echo "| $1 | $2 | $3 | $4 | $(ratio "$2" "$3") | $(ratio "$2" "$4") |"
}
echo "| measure | delayq | BullMQ 6.7 | sorted-set poller | delayq / BullMQ | delayq / poller |"
echo "|---|---:|---:|---:|---:|---:|"
row "puts/s, 64 in flight" "$d_rate" "$b_rate" "$z_rate"
row "Redis CPU per put (us)" "$d_cpu" "$b_cpu" "$z_cpu"
row "Redis bytes per pending job" "$d_bytes" "$b_bytes" "$z_bytes"
row "lateness p50 (us)" "$d_p50" "$b_p50" "$z_p50"
row "lateness p99 (us)" "$d_p99" "$b_p99" "$z_p99"
echo "| CPU stolen during the lateness run (ms) | $d_stolen | $b_stolen | $z_stolen | | |"
row "jobs/s of one worker connection, a backlog taken one at a time" "$d_drain" "$b_drain" "$z_drain"
row "Redis script calls per job of that backlog" "$d_scripts" "$b_scripts" "$z_scripts"
row "Redis commands per job of that backlog, those scripts run included" "$d_commands" "$b_commands" "$z_commands"
echo "| delayqd's CPU per job of that backlog (us) | $d_node | | | | |"

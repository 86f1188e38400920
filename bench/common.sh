# common.sh — sourced by the Redis-mode benchmark scripts (redis-load.sh, redis-spread.sh,
# redis-life.sh, redis-poll.sh, redis-idle.sh, redis-drain.sh, compare-bullmq.sh,
# redis-put-cpu.sh, redis-leases.sh, redis-stats.sh): the checkout's root as the working
# directory, the built load generator and
# server (or a clear stop), Debian's redis-server, a scratch directory ($work), the PIDs the
# script starts ($pids, ended by stop_started, which each script's cleanup calls), a free
# loopback port, a process's CPU ticks (utime + stime), and the machine's stolen CPU time (a
# virtual machine's hypervisor running someone else: lateness measured meanwhile is the host's,
# so the scripts print it beside each lateness figure), one Redis with one node over it, and the
# leases a node holds in it.
# DELAYQD names another server binary
# (another build, for a side-by-side run); DELAYQD_FLAGS adds flags to it (start_node(), and
# compare-bullmq.sh's node), e.g. "--redis-prefetch 20".
cd "$(dirname "${BASH_SOURCE[0]}")/.."
loadgen=build/release/bench/loadgen
delayqd=${DELAYQD:-build/release/apps/delayqd}
[ -x "$loadgen" ] && [ -x "$delayqd" ] || { echo "$(basename "$0" .sh): make build first" >&2; exit 2; }
command -v redis-server >/dev/null || scripts/ensure-packages.sh redis-server
work=$(mktemp -d)
pids=()
stop_started() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
# What a script that starts a cluster in $work/cluster (scripts/redis-cluster.sh) traps on EXIT.
stop_all_and_cluster() {
  stop_started
  scripts/redis-cluster.sh stop "$work/cluster" >/dev/null 2>&1 || true
  rm -rf "$work"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Milliseconds of CPU time the hypervisor took from this machine, all CPUs, since boot.
stolen_ms() { awk '/^cpu / {print $9 * 1000 / '"$(getconf CLK_TCK)"'}' /proc/stat; }
# The leases held under key prefix $1 by the node of PID $2 (its name is host:pid:...), of $3
# shards, as the Redis of start_redis says.
leases_held() {
  redis-cli -p "$redis_port" eval "local n = 0
    for s = 0, $3 - 1 do
      local owner = redis.call('GET', ARGV[1] .. ':{' .. s .. '}:owner')
      if owner and string.find(owner, ':' .. ARGV[2] .. ':', 1, true) then n = n + 1 end
    end
    return n" 0 "$1" "$2"
}
# A redis-server of the script's own (no AOF, no snapshots) on a free port: $redis_port and
# $redis_pid. Arguments go before the command (taskset -c 0).
start_redis() {
  redis_port=$(free_port)
  "$@" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$work" --daemonize no >"$work/redis-$redis_port.log" 2>&1 &
  redis_pid=$!
  pids+=("$redis_pid")
  sleep 0.5
}
# A delayqd over that Redis (or over $seeds, when set) on a free port ($port), once it listens
# and has taken its leases. Arguments go before the command (taskset -c 1).
start_node() {
  port=$(free_port)
  "$@" "$delayqd" --redis "${seeds:-127.0.0.1:$redis_port}" -p "$port" --http off \
    ${SHARDS:+--redis-shards "$SHARDS"} ${DELAYQD_FLAGS:-} \
    >"$work/delayqd-$port.out" 2>"$work/delayqd-$port.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q listening "$work/delayqd-$port.out" 2>/dev/null && break; sleep 0.1; done
  sleep 1  # leases
}

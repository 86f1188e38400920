#!/usr/bin/env bash
# redis-cluster.sh start DIR [PRIMARIES [REPLICAS]] | stop DIR — a Redis Cluster of Debian's
# redis-server on free loopback ports, for delayqd --redis and the Redis tests.
#   start: PRIMARIES (default 3) primaries with REPLICAS (default 1) replicas each, one
#          directory per node under DIR (AOF on, everysec), joined with `redis-cli --cluster
#          create` (or, for 1 primary without replicas, given every slot); waits until every
#          node reports cluster_state:ok and every replica is in sync, then writes the seeds
#          ("127.0.0.1:P,...") to DIR/seeds and prints them.
#   stop:  stops every node it started, by the PIDs in DIR/*/redis.pid (SIGTERM, then SIGKILL);
#          Redis writes its AOF out as it stops.
#   restart: starts the stopped nodes again on their ports, from their directories (nodes.conf,
#          AOF), and waits until the cluster is ok again.
# Needs redis-server, redis-cli and python3 (scripts/install-deps.sh).
set -euo pipefail

usage() { echo "usage: $0 start DIR [PRIMARIES [REPLICAS]] | stop DIR | restart DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
action=$1
dir=$2

stop() {
  local pids=()
  for pidfile in "$dir"/*/redis.pid; do
    [ -f "$pidfile" ] || continue
    pids+=("$(cat "$pidfile")")
    rm -f "$pidfile"
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

# N free loopback ports (bound, read and released by the kernel's choice).
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

start_node() {  # DIR: a node from its directory, on the ports in DIR/ports
  local node=$1 port bus
  read -r port bus <"$node/ports"
  redis-server --port "$port" --cluster-port "$bus" --bind 127.0.0.1 --dir "$node" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --appendonly yes --appendfsync everysec --save "" \
    --daemonize yes --pidfile "$node/redis.pid" --logfile "$node/redis.log"
}

# Whether every node of DIR/node*, at ADDRESSES, answers on its port as the process its pid
# file names (waiting up to 5 s each).
all_up() {
  local i=0 address node pid
  for address in "$@"; do
    node="$dir/node$i"
    i=$((i + 1))
    local up=no
    for _ in $(seq 100); do
      pid=$(cat "$node/redis.pid" 2>/dev/null || true)
      if [ -n "$pid" ] &&
        redis-cli -p "${address##*:}" info server 2>/dev/null | grep -q "^process_id:$pid"; then
        up=yes
        break
      fi
      sleep 0.05
    done
    [ "$up" = yes ] || return 1
  done
}

restart() {
  for node in "$dir"/node*; do start_node "$node"; done
  for node in "$dir"/node*; do
    read -r port _ <"$node/ports"
    for _ in $(seq 300); do
      redis-cli -p "$port" cluster info 2>/dev/null | grep -q "cluster_state:ok" && break
      sleep 0.1
    done
  done
  cat "$dir/seeds"
}

start() {
  local primaries=${1:-3} replicas=${2:-1}
  local count=$((primaries * (1 + replicas)))
  stop  # what an earlier run left
  rm -rf "$dir"
  mkdir -p "$dir"
  # The ports were free when chosen, not reserved: another process may bind one first, and then
  # that node exits (after forking, so its start looked fine). Every node must be answering as
  # itself (its process id on its port) or all start again on other ports.
  local addresses=() attempt
  for attempt in 1 2 3 4 5; do
    read -r -a ports <<<"$(free_ports $((count * 2)))"
    addresses=()
    for ((i = 0; i < count; i++)); do
      local port=${ports[$i]} bus=${ports[$((count + i))]} node="$dir/node$i"
      mkdir -p "$node"
      echo "$port $bus" >"$node/ports"
      start_node "$node" || true
      addresses+=("127.0.0.1:$port")
    done
    all_up "${addresses[@]}" && break
    echo "redis-cluster: a node did not start on its ports (attempt $attempt); trying others" >&2
    stop
    rm -rf "$dir"/node*
    [ "$attempt" -lt 5 ] || exit 1
  done
  if [ "$primaries" -ge 3 ]; then
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas "$replicas" --cluster-yes \
      >"$dir/create.log" 2>&1 || { cat "$dir/create.log" >&2; stop; exit 1; }
  elif [ "$count" -eq 1 ]; then
    # `--cluster create` wants 3 primaries; one node takes every slot by itself.
    redis-cli -p "${ports[0]}" cluster addslotsrange 0 16383 >"$dir/create.log" 2>&1
  else
    echo "redis-cluster: 1 primary without replicas, or 3 and more primaries" >&2; stop; exit 2
  fi
  for address in "${addresses[@]}"; do
    for _ in $(seq 300); do
      redis-cli -p "${address##*:}" cluster info 2>/dev/null | grep -q "cluster_state:ok" && break
      sleep 0.1
    done
  done
  # Replicas that have not finished their first sync cannot take over: wait for every link.
  for address in "${addresses[@]}"; do
    for _ in $(seq 300); do
      info=$(redis-cli -p "${address##*:}" info replication 2>/dev/null)
      if grep -q "role:master" <<<"$info"; then
        grep -q "connected_slaves:$replicas" <<<"$info" && break
      else
        grep -q "master_link_status:up" <<<"$info" && break
      fi
      sleep 0.1
    done
  done
  local seeds
  seeds=$(IFS=,; echo "${addresses[*]}")
  echo "$seeds" >"$dir/seeds"
  echo "$seeds"
}

case $action in
  start) shift 2; start "$@" ;;
  stop) stop ;;
  restart) restart ;;
  *) usage ;;
esac

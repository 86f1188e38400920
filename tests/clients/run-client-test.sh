#!/usr/bin/env bash
# run-client-test.sh DELAYQD SCENARIO [WORK_DIR] — runs a third-party beanstalkd client's scenario
# against delayqd: starts DELAYQD on a free loopback port with a fresh data directory, runs
# SCENARIO PORT with the interpreter its extension names, and stops the server by its PID.
#   .js   node; the client comes from npm, installed (locked) into WORK_DIR on first run
#   .php  php (Debian's php-pda-pheanstalk and php-symfony-beanstalkd-messenger)
#   .rb   ruby (Debian's ruby-beaneater)
# With DELAYQ_TEST_REDIS_SEEDS_FILE set (a file whose first line is a Redis Cluster's seeds), the
# server keeps its jobs there (--redis, under a prefix of its own) and the scenario sees
# DELAYQ_REDIS_MODE=1, for the orders docs/redis-mode.md says differ.
# Exit status: the scenario's; 77 (CTest's skip) when the npm registry cannot be reached to
# install an npm client. The Debian clients are installed by scripts/install-deps.sh.
set -euo pipefail
delayqd=$1 scenario=$2 work=${3:-}
case $scenario in
  *.js) "$(dirname "$0")/../support/npm-install.sh" "$(dirname "$scenario")" "$work" "the client" ||
          exit $?
        cp "$scenario" "$work/"
        run=(node "$work/$(basename "$scenario")") ;;
  *.php) run=(php "$scenario") ;;
  *.rb) run=(ruby "$scenario") ;;
  *) echo "run-client-test: no interpreter for $scenario"; exit 2 ;;
esac
command -v "${run[0]}" >/dev/null ||
  { echo "${run[0]} is needed (scripts/install-deps.sh installs it)"; exit 1; }
data=$(mktemp -d)
out="$data/stdout"
: >"$out"  # there before the server's own redirection, which may come after the first look
store=(-b "$data/db")
if [ -n "${DELAYQ_TEST_REDIS_SEEDS_FILE:-}" ]; then
  store=(--redis "$(head -n 1 "$DELAYQ_TEST_REDIS_SEEDS_FILE")" --redis-prefix "client-$$")
  export DELAYQ_REDIS_MODE=1
fi
"$delayqd" -p 0 "${store[@]}" --http off >"$out" 2>"$data/stderr" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^delayqd listening on .*:\([0-9]*\)$/\1/p' "$out")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { echo "delayqd did not start:"; cat "$data/stderr"; exit 1; }
"${run[@]}" "$port"

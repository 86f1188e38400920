#!/usr/bin/env bash
# install-deps.sh [run|all] — installs the Debian packages delayq needs: `run`, what building and
# running the server and the CLI need (make run); `all` (the default), those and what the tests
# need (make test, CI): other languages' clients, a browser, Redis, the sanitizers' and the
# fuzzer's compiler.
# Idempotent: installs only what is missing, so it is cheap to run before every build, and says
# what it installs when it does. Uses sudo when not run as root. What only benchmarks need
# (beanstalkd, wrk) the benchmark scripts install themselves (scripts/ensure-packages.sh), without
# starting a service that would take delayq's ports.
set -euo pipefail
mode=${1:-all}
case $mode in run | all) ;; *) echo "usage: install-deps.sh [run|all]" >&2; exit 2 ;; esac

packages=(
  build-essential   # g++ 12 (C++20)
  cmake             # >= 3.25, presets
  ninja-build
  pkg-config
  libgtest-dev      # GoogleTest (the build defines the tests, even where only the server is built)
  libgmock-dev
  libbenchmark-dev  # Google Benchmark (the same, for the benchmarks)
  librocksdb-dev    # the embedded store
  libboost1.81-dev  # Asio (delayqd's event loop) and Beast (HTTP)
  libboost-json1.81-dev  # Boost.JSON (the HTTP API)
  libcli11-dev      # command-line flags (delayqd, delayq)
  libspdlog-dev     # structured logs
  libssl-dev        # OpenSSL: https webhooks and their HMAC signatures
  libfmt-dev
  libhiredis-dev    # hiredis's RESP reader (the Redis client)
  libmsgpuck-dev    # msgpuck: reads the MessagePack records of Redis mode (jobs.lua)
  libcctz-dev       # cctz: recurring schedules' time zones (src/schedule)
  tzdata            # the tz database cctz reads (/usr/share/zoneinfo)
  libjs-chart.js    # Chart.js, built into delayqd's web dashboard
  ca-certificates   # https webhooks check their receivers' certificates; npm reaches its registry
  curl              # the README's tour speaks HTTP with it
)
test_packages=(
  clang-format      # the house format, checked in CI
  clang             # builds the libFuzzer targets (make fuzz)
  libclang-rt-14-dev  # libFuzzer and the sanitizers' runtime for clang
  openssl           # the webhook tests make their TLS certificates with it
  python3           # test drivers (tests/schedule, tests/tour) and bench/wheel_table.py (make bench)
  faketime          # libfaketime: the clock-step test moves delayqd's wall clock while it runs
  file              # cpack reads the binaries' types with it (make deb)
  chromium          # headless Chromium: the dashboard's browser test (tests/dashboard)
  php-cli           # runs the PHP clients' scenarios (tests/clients), unmodified from Debian:
  php-pda-pheanstalk  # Pheanstalk
  php-symfony-beanstalkd-messenger  # Symfony Messenger's beanstalkd transport
  ruby              # the Ruby client's scenario (tests/clients): beaneater, from Debian
  ruby-beaneater    # (which does not depend on ruby itself)
  python3-pytest    # runs the Python client's tests (clients/python/tests)
  node-typescript   # tsc: the TypeScript client's tests check its committed dist/ (clients/typescript)
)
[ "$mode" = all ] && packages+=("${test_packages[@]}")

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ "$mode" = all ]; then
  # Node and npm run the third-party client test (tests/clients). Debian's, unless a node and an
  # npm are already there (another packaging of Node, whose npm Debian's would conflict with).
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    missing+=(nodejs npm)
  fi
  # Debian's redis-server (and redis-cli) run the Redis tests, which start their own servers on
  # free loopback ports; installed without the service its package would start on port 6379.
  "$(dirname "$0")/ensure-packages.sh" redis-server
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# install-deps.sh — installs every Debian package delayq needs to build and test.
# Idempotent: installs only what is missing, so it is cheap to run before every build, and says
# what it installs when it does. Uses sudo when not run as root. What only benchmarks need
# (beanstalkd, wrk) the benchmark scripts install themselves (scripts/ensure-packages.sh), without
# starting a service that would take delayq's ports.
set -euo pipefail

packages=(
  build-essential   # g++ 12 (C++20)
  cmake             # >= 3.25, presets
  ninja-build
  pkg-config
  clang-format      # the house format, checked in CI
  clang             # builds the libFuzzer targets (make fuzz)
  libclang-rt-14-dev  # libFuzzer and the sanitizers' runtime for clang
  libgtest-dev      # GoogleTest
  libgmock-dev
  libbenchmark-dev  # Google Benchmark
  librocksdb-dev    # the embedded store
  libboost1.81-dev  # Asio (delayqd's event loop) and Beast (HTTP)
  libboost-json1.81-dev  # Boost.JSON (the HTTP API)
  libcli11-dev      # command-line flags (delayqd, delayq)
  libspdlog-dev     # structured logs
  libssl-dev        # OpenSSL: https webhooks and their HMAC signatures
  openssl           # the webhook tests make their TLS certificates with it
  libfmt-dev
  libhiredis-dev    # hiredis's RESP reader (the Redis client)
  libmsgpuck-dev    # msgpuck: reads the MessagePack records of Redis mode (jobs.lua)
  libcctz-dev       # cctz: recurring schedules' time zones (src/schedule)
  tzdata            # the tz database cctz reads (/usr/share/zoneinfo)
  python3           # bench/wheel_table.py (make bench)
  ca-certificates   # npm reaches its registry over https (the client test)
  faketime          # libfaketime: the clock-step test moves delayqd's wall clock while it runs
  file              # cpack reads the binaries' types with it (make deb)
  libjs-chart.js    # Chart.js, built into delayqd's web dashboard
  chromium          # headless Chromium: the dashboard's browser test (tests/dashboard)
  php-cli           # runs the PHP clients' scenarios (tests/clients), unmodified from Debian:
  php-pda-pheanstalk  # Pheanstalk
  php-symfony-beanstalkd-messenger  # Symfony Messenger's beanstalkd transport
  ruby              # the Ruby client's scenario (tests/clients): beaneater, from Debian
  ruby-beaneater    # (which does not depend on ruby itself)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
# Node and npm run the third-party client test (tests/clients). Debian's, unless a node and an
# npm are already there (another packaging of Node, whose npm Debian's would conflict with).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

# Debian's redis-server (and redis-cli) run the Redis tests, which start their own servers on
# free loopback ports; installed without the service its package would start on port 6379.
"$(dirname "$0")/ensure-packages.sh" redis-server

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

#!/usr/bin/env bash
# install-deps.sh — installs every Debian package delayq needs to build, test and benchmark.
# Idempotent: installs only what is missing, so it is cheap to run before every build.
# Uses sudo when not run as root.
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
  libfmt-dev
  beanstalkd        # bench/compare-beanstalkd.sh runs it side by side
  wrk               # HTTP load (docs/BENCHMARKS.md)
  python3           # bench/wheel_table.py (make bench)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

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

#!/usr/bin/env bash
# install-deps.sh [run|all|rocksdb] — installs the Debian packages delayq needs: `run`, what
# building and running the server and the CLI need (make run); `all` (the default), those and what
# the tests need (make test, CI): other languages' clients, a browser, Redis, the sanitizers' and
# the fuzzer's compiler. Both then build RocksDB for production from Debian's source package,
# once a machine, into a cache outside the checkout (below; `rocksdb` does only that, and fails
# if it cannot; DELAYQ_ROCKSDB=debian skips it, and delayq links Debian's librocksdb).
# Idempotent: installs only what is missing, so it is cheap to run before every build, and says
# what it installs when it does. Uses sudo when not run as root. What only benchmarks need
# (beanstalkd, wrk) the benchmark scripts install themselves (scripts/ensure-packages.sh), without
# starting a service that would take delayq's ports.
set -euo pipefail
mode=${1:-all}
case $mode in run | all | rocksdb) ;; *) echo "usage: install-deps.sh [run|all|rocksdb]" >&2; exit 2 ;; esac

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

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "$mode" != rocksdb ]; then
  [ "${DELAYQ_ROCKSDB:-}" = debian ] && exit 0
  "$0" rocksdb ||
    echo "install-deps: RocksDB was not built (above): delayq links Debian's librocksdb" >&2
  exit 0
fi

# RocksDB built for production. Debian's librocksdb is built without NDEBUG (its assertions run
# in delayqd: 30 % of RocksDB's instructions, and one of them aborts on a full disk) and without
# SSE 4.2 (CRC32C in software). This builds the same source, Debian's source package of the
# installed librocksdb-dev with Debian's patches and compiler flags, with NDEBUG and, on amd64,
# SSE 4.2, as a static library installed in $DELAYQ_CACHE/rocksdb/VERSION (default
# ~/.cache/delayq/rocksdb/VERSION). The build (cmake/rocksdb.cmake) links it when it is there for
# the installed version, and Debian's library otherwise. About 6 minutes on two cores, once.
version=$(dpkg-query -W -f='${Version}' librocksdb-dev)
cache=${DELAYQ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/delayq}/rocksdb
prefix=$cache/$version
if [ -f "$prefix/lib/librocksdb.a" ]; then
  exit 0
fi
echo "install-deps: building RocksDB $version from Debian's source package into $prefix"
work=$(mktemp -d "${TMPDIR:-/tmp}/delayq-rocksdb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The source comes through apt, checked against Debian's signed index, with a list of its own
# (the machine's sources need no deb-src line, and nothing of the machine's apt state changes).
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
  "http://deb.debian.org/debian $(. /etc/os-release && echo "$VERSION_CODENAME") main" \
  >"$work/apt/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
  -o APT::Sandbox::User="$(id -un)")
apt-get "${apt_options[@]}" -qq update
(cd "$work" && apt-get "${apt_options[@]}" -qq source --only-source "rocksdb=$version" >/dev/null)
source_dir=$(find "$work" -maxdepth 1 -type d -name 'rocksdb-*' | head -n 1)
# Debian's flags (dpkg-buildflags: -O2, the hardening options) without -g, plus NDEBUG.
cppflags="$(dpkg-buildflags --get CPPFLAGS) -DNDEBUG"
cxxflags="$(dpkg-buildflags --get CXXFLAGS | sed 's/\(^\| \)-g\( \|$\)/ /') $cppflags"
cflags="$(dpkg-buildflags --get CFLAGS | sed 's/\(^\| \)-g\( \|$\)/ /') $cppflags"
sse=()
[ "$(dpkg --print-architecture)" = amd64 ] && sse=(-DFORCE_SSE42=ON)
# Debian's options (debian/rules), without the shared library, the tools and the tests.
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_C_FLAGS="$cflags" -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DPORTABLE=ON "${sse[@]}" -DFAIL_ON_WARNINGS=OFF \
  -DWITH_BZ2=ON -DWITH_LZ4=ON -DWITH_ZLIB=ON -DWITH_ZSTD=ON -DWITH_SNAPPY=ON -DWITH_GFLAGS=OFF \
  -DWITH_LIBURING=OFF -DROCKSDB_BUILD_SHARED=OFF -DWITH_TESTS=OFF -DWITH_TOOLS=OFF \
  -DWITH_CORE_TOOLS=OFF -DWITH_BENCHMARK_TOOLS=OFF -DWITH_TRACE_TOOLS=OFF >/dev/null
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log" >&2
  exit 1
}
# Installed into a directory of its own, renamed into place when complete.
cmake --install "$work/build" --prefix "$work/install" >/dev/null
mkdir -p "$cache"
rm -rf "$prefix"
mv "$work/install" "$prefix"
echo "install-deps: RocksDB $version without assertions is in $prefix"

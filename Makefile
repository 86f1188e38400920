# The two commands of the README: `make run` and `make test`. Both install missing Debian
# packages (scripts/install-deps.sh) and build first: `make run` only what the server and the CLI
# need, `make test` everything.
.PHONY: all deps build server run test deb bench bench-wheel bench-engine bench-scheduler asan-test tsan-test fuzz \
	format format-check clean

JOBS ?= $(shell nproc)
# Tests run two per core: most of their time is spent waiting on timers and sockets (the whole
# suite used 0.9 cores of 2 at four at a time, and took 236 s against 443 s at two).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

# The server (delayqd) and the CLI (delayq) alone, with the packages building them takes.
server:
	@scripts/install-deps.sh run
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS) --target delayqd delayq

# The server on its embedded default: beanstalkd protocol on 127.0.0.1:11300, data in var/delayq.
run: server
	@build/release/apps/delayqd -b var/delayq $(RUN_ARGS)

test: build
	@ctest --preset release -j $(TEST_JOBS)

# The Debian package, build/release/delayq_<version>_<arch>.deb (docs/operations.md), then its
# checks: contents, RocksDB built for production linked in, maintainer scripts, and the unit
# through systemd-analyze verify.
deb: build
	@cd build/release && cpack -G DEB >/dev/null
	@scripts/check-deb.sh build/release/delayq_*.deb

# Every benchmark of docs/BENCHMARKS.md, at the sizes quoted there (minutes; 10^7 jobs is
# ENGINE_JOBS=10000000 and ~6 GB of disk).
bench: bench-wheel bench-engine bench-scheduler

# Google Benchmark over the three timer queues, three repetitions, then the medians as the
# Markdown tables of docs/BENCHMARKS.md. BENCH_ARGS adds wheel_bench flags (e.g. a filter).
bench-wheel: build
	@build/release/bench/wheel_bench --benchmark_repetitions=3 \
	  --benchmark_report_aggregates_only=true \
	  --benchmark_out=build/wheel_bench.json --benchmark_out_format=json $(BENCH_ARGS)
	@python3 bench/wheel_table.py build/wheel_bench.json

# The engine and RocksDB in one process: puts, reschedules, reserve+deletes in batches of 256
# under `always` and `none`, RAM per pending job, and the restart of what is left.
ENGINE_JOBS ?= 1000000
bench-engine: build
	@build/release/bench/engine_bench --jobs $(ENGINE_JOBS) --durability always
	@build/release/bench/engine_bench --jobs $(ENGINE_JOBS) --durability none
	@rm -rf build/engine-bench-data

# The embedded scheduler against a naive ScheduledThreadPoolExecutor-style one at 10^4 and 10^6
# pending tasks: schedule and cancel throughput, fire lateness, idle CPU (about two minutes).
bench-scheduler: build
	@build/release/bench/scheduler_bench $(BENCH_ARGS)

# The unit, protocol and Redis tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
# Run once, in `make test`, and not here: the client and browser tests (their time is npm's,
# PHP's, Chromium's), the time zone reference check (Python's: schedule_test covers its code), and
# the protocol suites' Redis-mode reruns (redis.*: the broker contract, the cluster tests and the
# Redis broker's unit tests run its code under the sanitizers). The engine's simulations run 5,000
# steps a seed here (DELAYQ_SIM_STEPS, CMakePresets.json) against 20,000 to 25,000 in `make test`:
# under the sanitizers they run 10 to 20 times slower.
asan-test: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -L 'unit|protocol|redis' -LE 'client|browser' \
	  -E '^(schedule_reference|redis\..+)$$' -j $(JOBS)

# The embedded scheduler's tests (the ones whose names start with Scheduler) under
# ThreadSanitizer; only their binary is built.
tsan-test: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan --target scheduler_test -j $(JOBS)
	@ctest --preset tsan -L unit -R '^Scheduler' -j $(JOBS)

# The libFuzzer targets, built with clang, each run for FUZZ_SECONDS. tests/fuzz/ holds inputs
# that once failed; they are run first, as seeds.
FUZZ_SECONDS ?= 30
fuzz: deps
	@CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DDELAYQ_FUZZ=ON -DDELAYQ_BENCH=OFF >/dev/null
	@cmake --build build/fuzz --target beanstalk_parser_fuzz -j $(JOBS)
	@mkdir -p build/fuzz/corpus/beanstalk_parser
	@build/fuzz/src/front/beanstalk_parser_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  build/fuzz/corpus/beanstalk_parser tests/fuzz/beanstalk_parser

format:
	@git ls-files '*.h' '*.cc' | xargs -r clang-format -i

format-check:
	@git ls-files '*.h' '*.cc' | xargs -r clang-format --dry-run --Werror

clean:
	rm -rf build

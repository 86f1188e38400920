#!/usr/bin/env python3
"""flow.py [DELAYQD] [--phase fair|concurrency|check|rate|all] [--jobs N] [--seconds S] [--redis]
[--callgrind]
-- flow control (fair turns, group concurrency, a rate per group) over the beanstalkd protocol,
measured.

Each phase runs on a fresh delayqd (default build/release/apps/delayqd) on a free loopback port
(no HTTP listener), with a scratch data directory and `--fsync always`, the default and the mode
schedules.py measures the local store in: every put and delete is answered after its fsync; or
with --redis a node over a redis-server of the script's own (redis_server.py; a fresh prefix
each phase). The server is stopped by its PID. Producers pipeline their `putx` commands, 1,000
at a time.

  fair         Tenant A puts 10,000 jobs (group=A), then tenant B 10 (group=B), all ready. Four
               worker connections take turns, one reserve + delete at a time, until all 10,010
               are done: the reserve numbers (1-based) that took B's jobs, on a tube with fair=1,
               then on a tube with no flow control (there, B waits for all of A's).
  concurrency  N jobs (--jobs, default 100,000) over 100 groups, round-robin, then 8 worker
               threads, each on its own connection: reserve-with-timeout 1, delete (sent in one
               write with its next reserve). On a tube with concurrency=1: how often two jobs of
               one group were held at once as the client sees it (must be 0) and jobs/s; then
               the same on a tube with no flow control, and the ratio. Also the server's CPU
               time per job (user + system, /proc), which does not depend on this client's speed.
               With round-robin puts and no work per job, the 8 jobs in flight are of 8 groups
               even without a limit, so there the count stays 0 on the unlimited tube too.
  check        The count with teeth: 10,000 jobs put group by group, each held 1 ms by its
               worker. Without a limit, workers hold several jobs of one group at once (the
               count is large); with concurrency=1 it must be 0.
  rate         A tube with rate=10/1000 (burst 1), 10 groups of 400 ready jobs, 4 workers for S
               seconds (default 20): each group's reserves per second, from its first reserve
               (the bucket's burst of one) to its last, as (reserves - 1) / (last - first).
With --callgrind (implies --redis and the concurrency phase; use a smaller --jobs, such as
5,000): each tube's run gets a redis-server of its own under valgrind's callgrind, counting only
while the workers run, and the node has 4 shards (--redis-shards 4: few idle shards' calls in the
count); prints Redis's instructions per job on each tube and their ratio, a figure that does not
vary with the machine's load as Redis's CPU time does.
Every loop is bounded. Prints one line per figure.
"""
import argparse
import collections
import concurrent.futures
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import stop_process  # this directory's
from redis_server import collect, instructions, redis_command, start_redis, stop_redis

REDIS = None  # (process, port) with --redis
CALLGRIND = None  # with --callgrind: a scratch directory for callgrind's files
PHASES = iter(range(1000))

RESERVE = b"reserve-with-timeout 1\r\n"


@contextlib.contextmanager
def delayqd(binary):
    """A fresh delayqd; yields its beanstalkd port, then stops it by its PID."""
    data = tempfile.mkdtemp(prefix="delayq-flow-")
    store = ["-b", data + "/db", "--fsync", "always"]
    if REDIS is not None:
        store = ["--redis", f"127.0.0.1:{REDIS[1]}", "--redis-prefix",
                 f"flow{os.getpid()}-{next(PHASES)}"]
        if CALLGRIND:
            store += ["--redis-shards", "4"]
    server = subprocess.Popen(
        [binary, "-p", "0", "--http", "off", "--min-free-disk", "0"] + store,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = server.stdout.readline().decode()  # "" if it exits first
        if "listening on" not in line:
            sys.exit("delayqd did not say its port")
        yield server.pid, int(line.strip().rsplit(":", 1)[1])
    finally:
        stop_process(server)
        shutil.rmtree(data, ignore_errors=True)


class Conn:
    """One beanstalkd connection. Errors raise, so that a worker thread's failure reaches the
    main thread through its future rather than ending the thread quietly."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def send(self, data):
        self.sock.sendall(data)

    def line(self):
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise RuntimeError("delayqd closed the connection")
        return line[:-2]

    def call(self, command, expect):
        self.send(command.encode() + b"\r\n")
        reply = self.line().decode()
        if not reply.startswith(expect):
            raise RuntimeError(f"{command!r} answered {reply!r}")
        return reply

    def reserved(self):
        """A reserve's reply: the job as (id, body), or None for TIMED_OUT."""
        reply = self.line()
        if reply == b"TIMED_OUT":
            return None
        word, job, size = reply.split()
        if word != b"RESERVED":
            raise RuntimeError(f"reserve answered {reply!r}")
        return int(job), self.file.read(int(size) + 2)[:-2]

    def stats_tube(self, tube):
        size = int(self.call(f"stats-tube {tube}", "OK ").split()[1])
        yaml = self.file.read(size + 2).decode()
        return dict(line.split(": ", 1) for line in yaml.splitlines() if ": " in line)


def watching(port, tube):
    conn = Conn(port)
    conn.call(f"watch {tube}", "WATCHING")
    conn.call("ignore default", "WATCHING")
    return conn


def put_many(port, tube, groups):
    """One job per entry of `groups` (bytes), in that order, each with its group as its body;
    their ids. Pipelined 1,000 at a time: one by one, each put would wait for its own fsync."""
    conn = Conn(port)
    conn.call(f"use {tube}", "USING")
    ids = []
    for start in range(0, len(groups), 1000):
        batch = groups[start:start + 1000]
        conn.send(b"".join(b"putx 1024 0 60 %d group=%s\r\n%s\r\n" % (len(g), g, g)
                           for g in batch))
        for _ in batch:
            reply = conn.line()
            if not reply.startswith(b"INSERTED "):
                raise RuntimeError(f"putx answered {reply!r}")
            ids.append(int(reply.split()[1]))
    return ids


def cpu_seconds(pid):
    """The process's user + system CPU time so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def work(port, tube, keep_going, on_job):
    """One worker on a connection of its own: reserve, on_job(body), delete, until keep_going()
    is false. The delete and the next reserve go in one write: each reply still comes in order,
    and the client makes half the system calls. Returns the time of its last DELETED."""
    conn = watching(port, tube)
    conn.send(RESERVE)
    last = None
    for _ in range(10_000_000):
        job = conn.reserved()
        if job is None:
            if not keep_going():
                break
            conn.send(RESERVE)
            continue
        on_job(job[1])
        more = keep_going()
        conn.send(b"delete %d\r\n" % job[0] + (RESERVE if more else b""))
        if conn.line() != b"DELETED":
            raise RuntimeError(f"delete {job[0]} failed")
        last = time.perf_counter()
        if not more:
            break
    return last


def run_workers(n, *args):
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return [f.result() for f in [pool.submit(work, *args) for _ in range(n)]]


def fair_phase(binary, a_jobs=10_000, b_jobs=10, workers=4):
    for fair in (True, False):
        with delayqd(binary) as (_, port):
            tube = "fair" if fair else "plain"
            if fair:
                Conn(port).call(f"flow-tube {tube} fair=1", "FLOW 0 1 ")
            put_many(port, tube, [b"A"] * a_jobs)
            b_ids = set(put_many(port, tube, [b"B"] * b_jobs))
            conns = [watching(port, tube) for _ in range(workers)]
            # One reserve at a time, so that the reserve numbers are the server's order.
            b_at, reserves = [], 0
            while reserves < a_jobs + b_jobs:
                conn = conns[reserves % workers]
                conn.send(RESERVE)
                job = conn.reserved()
                if job is None:
                    break
                reserves += 1
                if job[0] in b_ids:
                    b_at.append(reserves)
                conn.call(f"delete {job[0]}", "DELETED")
            print(f"fair: {'fair=1' if fair else 'no flow control'}: {reserves} of "
                  f"{a_jobs + b_jobs} jobs reserved; B's {len(b_at)} at reserves "
                  f"{', '.join(map(str, b_at))}; B's last at reserve {b_at[-1] if b_at else '-'}")


class InFlight:
    """Per group, the jobs a worker holds as this client sees them: from the RESERVED read to
    just before its delete is sent. That window lies inside the server's (from its RESERVED
    sent to its delete read), so an overlap seen here is the server's doing; the converse does
    not hold. The times are taken under the lock, so the spans agree with the counts."""

    def __init__(self, jobs, hold=0.0):
        self.hold = hold
        self.lock = threading.Lock()
        self.held = collections.Counter()
        self.violations = 0
        self.taken, self.jobs = 0, jobs
        self.spans = []  # (group, reserved at, delete about to be sent)

    def job(self, group):
        with self.lock:
            self.taken += 1
            self.held[group] += 1
            self.violations += self.held[group] > 1
            reserved_at = time.perf_counter()
        # No work, or `hold` seconds of it: the window a second job of the group could fall in.
        if self.hold:
            time.sleep(self.hold)
        with self.lock:
            self.held[group] -= 1
            self.spans.append((group, reserved_at, time.perf_counter()))

    def more(self):
        return self.taken < self.jobs

    def overlaps(self):
        """Spans of a group that began before an earlier one of that group ended."""
        count, ended = 0, {}
        for group, begin, end in sorted(self.spans, key=lambda s: s[1]):
            count += begin < ended.get(group, 0.0)
            ended[group] = max(end, ended.get(group, 0.0))
        return count


def redis_cpu_seconds():
    """Redis's CPU time so far (user + system, INFO cpu); 0 without --redis."""
    if REDIS is None:
        return 0.0
    info = redis_command(REDIS[1], "INFO", "cpu").decode()
    return sum(float(info.split(f"{field}:")[1].split("\r\n")[0])
               for field in ("used_cpu_user", "used_cpu_sys"))


def concurrency_phase(binary, jobs, workers=8, groups=100, hold=0.0, name="concurrency"):
    global REDIS
    rates, counted = {}, {}
    for limited in (True, False):
        if CALLGRIND:
            out = f"{CALLGRIND}/{'limited' if limited else 'unlimited'}.callgrind"
            REDIS = start_redis(callgrind=[f"--callgrind-out-file={out}", "--instr-atstart=no"],
                                work=CALLGRIND)
        with delayqd(binary) as (pid, port):
            tube = "limited" if limited else "unlimited"
            if limited:
                Conn(port).call(f"flow-tube {tube} concurrency=1", "FLOW 1 0 ")
            if hold:
                # Group by group, each job held a while: without a limit, the workers take
                # several jobs of one group at once, which the count must then show.
                order = [b"g%d" % (i * groups // jobs) for i in range(jobs)]
            else:
                order = [b"g%d" % (i % groups) for i in range(jobs)]
            put_many(port, tube, order)
            tracker = InFlight(jobs, hold)
            deadline = time.monotonic() + 600  # a bound, far above a healthy run

            def keep_going():
                return tracker.more() and time.monotonic() < deadline

            cpu, start = cpu_seconds(pid), time.perf_counter()
            redis_cpu = redis_cpu_seconds()
            if CALLGRIND:
                collect(REDIS[0], True)
            ends = run_workers(workers, port, tube, keep_going, tracker.job)
            if CALLGRIND:
                collect(REDIS[0], False)
            took = max(e for e in ends if e is not None) - start
            cpu = cpu_seconds(pid) - cpu
            redis_cpu = redis_cpu_seconds() - redis_cpu
            rates[limited] = tracker.taken / took
            print(f"{name}: {tube} ({'concurrency=1' if limited else 'no flow control'}), "
                  f"{workers} workers, {groups} groups: {tracker.taken} of {jobs} jobs in "
                  f"{took:.1f} s, {rates[limited]:.0f} jobs/s, server CPU "
                  f"{cpu * 1e6 / tracker.taken:.0f} us per job"
                  + (f", Redis CPU {redis_cpu * 1e6 / tracker.taken:.0f} us per job" if REDIS else "")
                  + f"; two jobs of one group held at once: {tracker.violations} "
                  f"(spans overlapping: {tracker.overlaps()})")
        if CALLGRIND:
            stats = redis_command(REDIS[1], "INFO", "commandstats").decode()
            print(f"{name}: {tube}: Redis commands per job, its put included: " + ", ".join(
                f"{line.split(':')[0][8:]} {int(line.split('calls=')[1].split(',')[0]) / jobs:.2f}"
                for line in stats.split("\r\n") if line.startswith("cmdstat_")))
            stop_redis(REDIS)
            counted[limited] = instructions(out) / tracker.taken
            print(f"{name}: {tube}: {counted[limited]:,.0f} instructions of Redis per job "
                  f"(callgrind, all of redis-server while the workers ran)")
    print(f"{name}: limited / unlimited jobs/s: {rates[True] / rates[False]:.3f}")
    if CALLGRIND:
        print(f"{name}: Redis instructions per job, limited / unlimited: "
              f"{counted[True] / counted[False]:.3f}")


def rate_phase(binary, seconds, groups=10, per_group=400, workers=4):
    with delayqd(binary) as (_, port):
        tube = "rated"
        Conn(port).call(f"flow-tube {tube} rate=10/1000", "FLOW 0 0 10/1000 1")
        put_many(port, tube, [b"g%d" % (i % groups) for i in range(groups * per_group)])
        times = collections.defaultdict(list)  # group -> reserve replies' times
        start = time.perf_counter()
        end = start + seconds

        def on_job(group):
            times[group].append(time.perf_counter())

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(run_workers, workers, port, tube,
                                  lambda: time.perf_counter() < end, on_job)
            time.sleep(seconds / 2)
            stats = Conn(port).stats_tube(tube)
            running.result()
        print(f"rate: halfway, stats-tube says groups-held {stats.get('groups-held')}, "
              f"groups-ready {stats.get('groups-ready')}, ready {stats.get('current-jobs-ready')}")
        per_second = {}
        for group, seen in sorted(times.items()):
            seen = sorted(t for t in seen if t < end)
            if len(seen) < 2:
                continue
            # The first reserve spends the full bucket; the rate shows in the gaps after it.
            per_second[group.decode()] = (len(seen) - 1) / (seen[-1] - seen[0])
        total = sum(len([t for t in seen if t < end]) for seen in times.values())
        print(f"rate: rate=10/1000, {groups} groups, {workers} workers, {seconds} s: {total} "
              f"reserves; per group, reserves/s after its first: " +
              ", ".join(f"{g} {r:.3f}" for g, r in per_second.items()))
        print(f"rate: per group min {min(per_second.values()):.3f}/s, "
              f"max {max(per_second.values()):.3f}/s (target 10 +- 0.5)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--phase", choices=["fair", "concurrency", "check", "rate", "all"],
                        default="all")
    parser.add_argument("--jobs", type=int, default=100_000, help="concurrency phase's jobs")
    parser.add_argument("--seconds", type=int, default=20, help="rate phase's length")
    parser.add_argument("--redis", action="store_true")
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    global REDIS, CALLGRIND
    if args.callgrind:
        CALLGRIND = tempfile.mkdtemp(prefix="delayq-flow-callgrind-")
        try:
            concurrency_phase(args.binary, args.jobs)
        finally:
            shutil.rmtree(CALLGRIND, ignore_errors=True)
        return
    if args.redis:
        REDIS = start_redis()
    try:
        if args.phase in ("fair", "all"):
            fair_phase(args.binary)
        if args.phase in ("concurrency", "all"):
            concurrency_phase(args.binary, args.jobs)
        if args.phase in ("check", "all"):
            concurrency_phase(args.binary, 10_000, hold=0.001, name="check")
        if args.phase in ("rate", "all"):
            rate_phase(args.binary, args.seconds)
    finally:
        if REDIS:
            stop_redis(REDIS)


if __name__ == "__main__":
    main()

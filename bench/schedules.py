#!/usr/bin/env python3
"""schedules.py [DELAYQD] [--lateness-schedules N] [--seconds S] [--stored N] [--redis] --
recurring schedules on one delayqd: local store (`--fsync always`, a scratch data directory), or
with --redis a node over a redis-server of the script's own (Debian's, on a free loopback port,
no persistence, stopped by its PID; the jobs under a fresh prefix each phase).

Three phases, each on a fresh server started on free loopback ports and stopped by its PID:
  lateness  N schedules (default 1,000) `every 1s`, run for S seconds (default 20) after a 3 s
            warm-up, nobody reserving: the server's fire lateness histogram
            (delayq_fire_lateness_seconds, from a run's due time to the moment it is ready) over
            the window, as p50/p99 interpolated inside the buckets as Prometheus's
            histogram_quantile() does, and the runs put per second (delayq_schedule_runs_total).
  stored    --stored schedules (default 100,000) `0 9 * * *` in five zones, put over 32 HTTP
            connections: RSS per schedule (a run is put 10 s before its instant, so unless the
            run is at 09:00 in one of the zones, none has a job yet); with --redis also Redis's
            used_memory per schedule. Then the server is restarted (local store only) and the
            RSS per schedule measured again, against a fresh server's.
  reads     on that server: GET /v1/schedules?limit=100 from the middle of the names, GET
            .../{name}/next?count=10, POST /v1/schedules/preview (count 10), each 50 times on one
            kept-alive connection; the median and the largest, in ms.
Every loop is bounded. Prints one line per figure.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import rss_kib, stop_process  # this directory's
from redis_server import redis_command, start_redis, stop_redis  # this directory's


REDIS = None  # (process, port) with --redis
PHASES = iter(range(1000))


def redis_used_memory():
    info = redis_command(REDIS[1], "INFO", "memory").decode()
    return int(info.split("used_memory:")[1].split("\r\n")[0])


def start(binary, data):
    store = ["-b", data]
    if REDIS is not None:
        store = ["--redis", f"127.0.0.1:{REDIS[1]}", "--redis-prefix",
                 f"bench{os.getpid()}-{next(PHASES)}"]
    server = subprocess.Popen(
        [binary, "-p", "0", "--http", "127.0.0.1:0", "--min-free-disk", "0"] + store,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    http_port = None
    deadline = time.time() + 30
    while http_port is None and time.time() < deadline:
        line = server.stdout.readline().decode()
        if "http listening on" in line:
            http_port = int(line.strip().rsplit(":", 1)[1])
    if http_port is None:
        server.kill()
        sys.exit("delayqd did not say its HTTP port")
    return server, http_port


def call(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        sys.exit(f"{method} {path}: {response.status} {data[:200]!r}")
    return data


def metrics(conn):
    """The fire lateness buckets (cumulative, by upper bound) and the runs put, from /metrics."""
    text = call(conn, "GET", "/metrics").decode()
    buckets, runs = {}, 0
    for line in text.splitlines():
        if line.startswith("delayq_fire_lateness_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if bound == "+Inf" else float(bound)] = float(line.split()[-1])
        elif line.startswith("delayq_schedule_runs_total"):
            runs = int(line.split()[-1])
    return buckets, runs


def quantile(q, before, after):
    """histogram_quantile() over the difference of two cumulative histograms."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    total = counts[-1]
    if total == 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 0)
        lower, below = bound, cumulative
    return lower


def lateness(binary, n, seconds):
    data = tempfile.mkdtemp(prefix="delayq-schedules-")
    server, port = start(binary, data + "/db")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(n):
            call(conn, "PUT", f"/v1/schedules/tick-{i}",
                 {"tube": f"ticks-{i % 10}", "every": "1s", "body": "x"})
        time.sleep(3)
        before, runs_before = metrics(conn)
        time.sleep(seconds)
        after, runs_after = metrics(conn)
        p50, p99 = quantile(0.5, before, after), quantile(0.99, before, after)
        print(f"lateness: {n} schedules every 1s, {seconds} s: "
              f"{(runs_after - runs_before) / seconds:.0f} runs/s, fire lateness "
              f"p50 {p50 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us")
    finally:
        stop_process(server)
        shutil.rmtree(data, ignore_errors=True)


def stored_and_reads(binary, n):
    data = tempfile.mkdtemp(prefix="delayq-schedules-")
    server, port = start(binary, data + "/db")
    zones = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Lord_Howe"]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        call(conn, "GET", "/v1/stats")
        time.sleep(0.5)
        before = rss_kib(server.pid)
        redis_before = redis_used_memory() if REDIS else 0
        started = time.time()

        def put_some(first):  # every 32nd schedule from `first`, over a connection of its own
            own = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for i in range(first, n, 32):
                call(own, "PUT", f"/v1/schedules/report-{i:07d}",
                     {"tube": "reports", "cron": "0 9 * * *", "tz": zones[i % len(zones)],
                      "body": "report"})

        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            list(pool.map(put_some, range(32)))
        took = time.time() - started
        time.sleep(1)
        after = rss_kib(server.pid)
        print(f"stored: {n} schedules put in {took:.1f} s ({n / took:.0f}/s), RSS "
              f"{(after - before) * 1024 / n:.0f} B per schedule")
        if REDIS:
            print(f"stored: Redis used_memory {(redis_used_memory() - redis_before) / n:.0f} B "
                  f"per schedule (its record, its name in the index)")
        middle = f"report-{n // 2:07d}"
        conn.close()  # idle through the puts: the server may have closed it
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        reads = {
            "list 100": ("GET", f"/v1/schedules?limit=100&after={middle}", None),
            "next 10": ("GET", f"/v1/schedules/{middle}/next?count=10", None),
            "preview 10": ("POST", "/v1/schedules/preview",
                           {"tube": "t", "cron": "*/5 9-17 * * MON-FRI",
                            "tz": "Europe/Paris", "count": 10}),
        }
        for name, (method, path, body) in reads.items():
            times = []
            for _ in range(50):
                t0 = time.perf_counter()
                call(conn, method, path, body)
                times.append((time.perf_counter() - t0) * 1000)
            print(f"reads: {name}: median {statistics.median(times):.2f} ms, "
                  f"largest {max(times):.2f} ms ({n} schedules stored)")
        if not REDIS:
            stop_process(server)
            restarted(binary, data, n)
    finally:
        stop_process(server)
        shutil.rmtree(data, ignore_errors=True)


def restarted(binary, data, n):
    """The RSS of a server restarted over `n` stored schedules, less a fresh server's, per schedule;
    and the time from its start to its first answer (/v1/stats)."""
    rss = {}
    for which, directory in (("fresh", data + "/fresh"), ("restarted", data + "/db")):
        started = time.time()
        server, port = start(binary, directory)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            call(conn, "GET", "/v1/stats")
            took = time.time() - started
            time.sleep(1)
            rss[which] = rss_kib(server.pid)
            if which == "restarted":
                print(f"restart: first answer {took:.2f} s after the start; RSS "
                      f"{(rss['restarted'] - rss['fresh']) * 1024 / n:.0f} B per schedule "
                      f"over a fresh server's")
        finally:
            stop_process(server)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--lateness-schedules", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--redis", action="store_true")
    args = parser.parse_args()
    global REDIS
    if args.redis:
        REDIS = start_redis()
    try:
        if args.lateness_schedules > 0:  # 0: the stored phase alone
            lateness(args.binary, args.lateness_schedules, args.seconds)
        stored_and_reads(args.binary, args.stored)
    finally:
        if REDIS:
            stop_redis(REDIS)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""far-tier.py — delayqd with and without its far tier, side by side: pending jobs put over the
beanstalkd port, the server's RSS per pending job, reschedules of random jobs, and the time from
a restart after kill -9 to the first answered reserve.

For each round and each window (--windows, seconds; 0: every job in memory) a fresh delayqd
takes --jobs puts of 100 bytes delayed --delay seconds (loadgen, 4 connections, 64 in flight
each); its RSS before and after (once RocksDB has flushed what it would) gives bytes a job. Then
--reschedules `reschedule`s of random ones of those jobs to 2 h to 4 h ahead (loadgen, 4
connections, 64 in flight each: with a window of an hour, far to far). Then SIGKILL, a start on
the same directory, and `reserve-with-timeout 0` sent as soon as the port takes connections: the
seconds from the start to its answer. Rounds alternate the windows.

Usage: python3 bench/far-tier.py [--jobs 1000000] [--delay 86400] [--windows 0,3600]
                                 [--rounds 2] [--reschedules 200000] [BINARY]
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import free_port, rss_kib  # this directory's

LOADGEN = "build/release/bench/loadgen"


def start(binary, data, port, window):
    return subprocess.Popen(
        [binary, "-p", str(port), "-b", data, "--http", "off", "--min-free-disk", "0",
         "--window", str(window)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def first_answer(port, deadline):
    """Seconds until a reserve-with-timeout 0 is answered, from now; connects until it can."""
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(b"reserve-with-timeout 0\r\n")
                reply = s.recv(64)
                if reply:
                    return reply
        except OSError:
            time.sleep(0.005)
    raise RuntimeError("no answer")


def loadgen(port, *args):
    """Runs the load generator; its ops/s and how long it took."""
    began = time.time()
    out = subprocess.run(
        [LOADGEN, "--port", str(port), "--connections", "4", "--depth", "64", "--seconds", "3600",
         *args], check=True, capture_output=True, text=True).stdout
    return float(out.split("ops/s=")[1].split()[0]), time.time() - began


def run(binary, window, jobs, delay, reschedules):
    data = tempfile.mkdtemp(prefix="far-tier-")
    port = free_port()
    server = start(binary, data, port, window)
    try:
        first_answer(port, time.time() + 30)
        time.sleep(1)
        before = rss_kib(server.pid)
        rate, took = loadgen(port, "--mode", "put", "--delay", str(delay), "--count", str(jobs))
        time.sleep(5)  # RocksDB's flushes settle
        after = rss_kib(server.pid)
        moves = "-"
        if reschedules > 0:
            moved, _ = loadgen(port, "--mode", "reschedule", "--max-id", str(jobs), "--delay",
                               "7200", "--count", str(reschedules))
            moves = f"{moved:,.0f}"
        server.send_signal(signal.SIGKILL)
        server.wait()
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(data) for f in fs)
        started = time.time()
        server = start(binary, data, port, window)
        first_answer(port, started + 600)
        restart = time.time() - started
        time.sleep(1)
        after_restart = rss_kib(server.pid)
        print(f"| {window} | {jobs:,} | {rate:,.0f} ({took:.0f} s) | {moves} | "
              f"{(after - before) * 1024 / jobs:.1f} | {restart:.2f} | "
              f"{after_restart / 1024:.0f} | {size / jobs:.0f} |", flush=True)
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
        shutil.rmtree(data, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--delay", type=int, default=86_400)
    parser.add_argument("--windows", default="0,3600")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reschedules", type=int, default=200_000)
    args = parser.parse_args()
    print("| window (s) | jobs | puts/s | reschedules/s | RSS growth, B/job | "
          "restart to first answer (s) | RSS after restart (MiB) | disk, B/job |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for _ in range(args.rounds):
        for window in (int(w) for w in args.windows.split(",")):
            run(args.binary, window, args.jobs, args.delay, args.reschedules)


if __name__ == "__main__":
    main()

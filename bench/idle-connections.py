#!/usr/bin/env python3
"""idle-connections.py [DELAYQD] [--connections N] [--rounds R] -- RSS per idle beanstalkd
connection, delayqd and beanstalkd side by side.

For each round, starts delayqd (default build/release/apps/delayqd, `--fsync none`, a scratch
data directory) and then beanstalkd (Debian's; installed with scripts/ensure-packages.sh if
missing, its service not started) on free loopback
ports, opens N connections to each and leaves them idle (one round trip on the last, so that all
are accepted), and reads the server's RSS from /proc/PID/status before and after. Prints bytes
per connection for each server and round, and the ratio. Every loop is bounded; each server is
stopped by its PID. Needs a file limit above N + 100 (the script raises its soft limit to the
hard one).
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

from overload import free_port, raise_file_limit, rss_kib, wait_port  # this directory's


def round_trip(sock):
    sock.sendall(b"stats-tube default\r\n")
    sock.settimeout(10)
    data = b""
    while b"\n" not in data:
        data += sock.recv(4096)


def measure(pid, port, n):
    first = socket.create_connection(("127.0.0.1", port))
    round_trip(first)  # the server has done its first work: its buffers and caches exist
    time.sleep(0.5)
    before = rss_kib(pid)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    round_trip(socks[-1])
    time.sleep(0.5)
    after = rss_kib(pid)
    for s in socks + [first]:
        s.close()
    return (after - before) * 1024 / n


def run_delayqd(binary, n):
    data = tempfile.mkdtemp(prefix="delayq-idle-")
    server = subprocess.Popen([binary, "-p", "0", "--http", "off", "-b", data + "/db",
                               "--fsync", "none"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(server.stdout.readline().split(b":")[-1])
        return measure(server.pid, port, n)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


def run_beanstalkd(n):
    port = free_port()
    server = subprocess.Popen(["beanstalkd", "-l", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, time.time() + 10):
            return None
        return measure(server.pid, port, n)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description="RSS per idle beanstalkd connection, delayqd "
                                     "and beanstalkd side by side")
    parser.add_argument("delayqd", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    binary, n, rounds = args.delayqd, args.connections, args.rounds
    raise_file_limit(n + 100, "idle-connections")
    if shutil.which("beanstalkd") is None:
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([os.path.join(here, "..", "scripts", "ensure-packages.sh"), "beanstalkd"],
                       check=False)
    have_beanstalkd = shutil.which("beanstalkd") is not None
    for r in range(rounds):
        ours = run_delayqd(binary, n)
        line = f"round {r + 1}: {n} idle connections: delayqd {ours:.0f} B each"
        if have_beanstalkd:
            theirs = run_beanstalkd(n)
            if theirs:
                line += f", beanstalkd {theirs:.0f} B each, ratio {ours / theirs:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()

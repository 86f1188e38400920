#!/usr/bin/env python3
"""redis-idle-waiters.py [--idle N] [--seconds S] [DELAYQD] -- what reserves of another tube,
waiting idle on a node, cost the jobs that flow through it in Redis mode.

Starts a redis-server of its own (redis_server.py) and one delayqd node over it (default
build/release/apps/delayqd), on free loopback ports. Opens N connections (default 1,000), each
waiting in `reserve` on a tube no job is put in, then runs the load generator's `late` mode
through the node (1 s delays at 1,000 jobs/s for S seconds, default 5, two workers). Prints the
node's CPU (utime + stime) per job over the run and the load generator's line (lateness, and
counted from a free worker). Every loop is bounded; Redis and delayqd are stopped by their PIDs.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import raise_file_limit, stop_process  # this directory's
from redis_server import start_redis, stop_redis  # this directory's

LOADGEN = "build/release/bench/loadgen"


def cpu_ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    raise_file_limit(args.idle + 100, "redis-idle-waiters")
    redis = start_redis()
    node = subprocess.Popen(
        [args.binary, "-p", "0", "--http", "off", "--redis", f"127.0.0.1:{redis[1]}",
         "--redis-prefix", f"idle{os.getpid()}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    idle = []
    try:
        line = node.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit("delayqd did not say its port")
        port = int(line.strip().rsplit(":", 1)[1])
        time.sleep(1.5)  # leases
        for _ in range(args.idle):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"watch idle\r\nignore default\r\nreserve\r\n")
            idle.append(sock)
        time.sleep(2)
        before = cpu_ticks(node.pid)
        out = subprocess.run(
            [LOADGEN, "--port", str(port), "--mode", "late", "--rate", "1000", "--delay", "1",
             "--seconds", str(args.seconds), "--connections", "2", "--jitter", "on"],
            capture_output=True, text=True, check=True, timeout=args.seconds + 60).stdout.strip()
        used = cpu_ticks(node.pid) - before
        jobs = int(out.split(" ops=")[1].split()[0])
        print(f"{args.idle} reserves of another tube waiting: the node's CPU per job "
              f"{used / os.sysconf('SC_CLK_TCK') / jobs * 1e6:.0f} us; {out}")
    finally:
        for sock in idle:
            sock.close()
        stop_process(node)
        stop_redis(redis)


if __name__ == "__main__":
    main()

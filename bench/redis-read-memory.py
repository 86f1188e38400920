#!/usr/bin/env python3
"""redis-read-memory.py [DELAYQD] [--names N] [--readers R] [--seconds S] -- what reads of every
tube (`stats`, `list-tubes`) cost a node in Redis mode while the shards remember many tubes.

Starts a redis-server of its own (redis_server.py) and one delayqd node over it (default
build/release/apps/delayqd), on free loopback ports. Leaves N tube names (default 12,000) in the
shards, each by a put and a delete through 8 connections, so that each name holds no job (the
shards remember such a tube for about an hour). Then R connections (default 4) loop `stats` and
`list-tubes` for S seconds (default 30). Prints the node's RSS before the reads, its largest RSS
(VmHWM) and its RSS after, and the reads a second. Every loop is bounded; Redis and delayqd are
stopped by their PIDs.
"""
import argparse
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import stop_process  # this directory's
from redis_server import start_redis, stop_redis  # this directory's


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("delayqd closed the connection")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n", 1)
        return head.decode()

    def cmd(self, command, body=None):
        data = command.encode() + b"\r\n" + (body + b"\r\n" if body is not None else b"")
        self.sock.sendall(data)
        head = self.line()
        if head.startswith("OK "):
            size = int(head.split()[1]) + 2
            while len(self.buf) < size:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("delayqd closed the connection")
                self.buf += chunk
            self.buf = self.buf[size:]
        return head


def run_threads(target, count):
    """Runs target in `count` threads; an error in any is raised here, once they are done."""
    errors = []

    def guarded():
        try:
            target()
        except BaseException as error:  # a thread's SystemExit too
            errors.append(error)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit(f"redis-read-memory: {errors[0]}")


def make_names(port, count, connections=8):
    left = [count]
    lock = threading.Lock()

    def one():
        conn = Conn(port)
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            conn.cmd(f"use tr-{random.getrandbits(48):012x}")
            head = conn.cmd("put 0 100 5 3", b"abc")
            if not head.startswith("INSERTED"):
                sys.exit(f"put: {head}")
            conn.cmd(f"delete {head.split()[1]}")

    run_threads(one, connections)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--names", type=int, default=12000)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()

    redis = start_redis()
    node = subprocess.Popen(
        [args.binary, "-p", "0", "--http", "off", "--redis", f"127.0.0.1:{redis[1]}",
         "--redis-prefix", f"readmem{os.getpid()}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = node.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit("delayqd did not say its port")
        port = int(line.strip().rsplit(":", 1)[1])
        began = time.monotonic()
        make_names(port, args.names)
        print(f"names made: {args.names} in {time.monotonic() - began:.1f} s")
        before = status_kib(node.pid, "VmRSS")
        reads = [0]
        lock = threading.Lock()
        end = time.monotonic() + args.seconds

        def reader():
            conn = Conn(port)
            while time.monotonic() < end:
                for command in ("stats", "list-tubes"):
                    head = conn.cmd(command)
                    if not head.startswith("OK "):
                        sys.exit(f"{command}: {head}")
                    with lock:
                        reads[0] += 1

        run_threads(reader, args.readers)
        print(f"readers: {args.readers}, reads/s: {reads[0] / args.seconds:.1f}")
        print(f"node RSS before the reads: {before} KiB; largest: "
              f"{status_kib(node.pid, 'VmHWM')} KiB; after: {status_kib(node.pid, 'VmRSS')} KiB")
        print(f"largest growth a name a reader: "
              f"{(status_kib(node.pid, 'VmHWM') - before) * 1024 / args.names / args.readers:.0f} B")
    finally:
        stop_process(node)
        stop_redis(redis)


if __name__ == "__main__":
    main()

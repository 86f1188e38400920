#!/usr/bin/env python3
"""redis-put-cost.py [--callgrind] [--calls N] [--shards S] — what a put costs Redis inside the
jobs' function, without delayqd or its load: loads src/broker/redis/jobs.lua into a fresh
redis-server (Debian's, on a free loopback port, stopped by PID) and makes N putmany calls of 24
jobs each (100-byte bodies due in an hour, spread over S shards), the arguments built as the node
builds them (redis_broker.cc, layout.cc's new_record_tail).

Prints microseconds per put inside FCALL (INFO commandstats) and Redis bytes per job. With
--callgrind, redis-server runs under valgrind's callgrind with only FCALL counted, and the figure
is instructions per put: stable on a shared machine where the microseconds are not. The default
for --callgrind is 300 calls over 4 shards (each shard's sets then pass Redis's small-encoding
limits, as in a loaded server); without it, 3,000 calls over 128 shards."""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from overload import free_port, wait_port

JOBS_PER_CALL = 24


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def read_reply(stream):
    line = stream.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"-":
        sys.exit(f"redis-put-cost: Redis answered {rest.decode()}")
    if kind in (b"+", b":"):
        return rest
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else stream.read(size + 2)[:-2]
    if kind == b"*":
        return [read_reply(stream) for _ in range(max(int(rest), 0))]
    sys.exit(f"redis-put-cost: an unexpected reply {line!r}")


def record_tail(ttr, tube, key, group, body):
    def text(value):
        return struct.pack(">I", len(value)) + value
    return struct.pack(">IIIIII", ttr, 0, 0, 0, 0, 0) + text(tube) + text(key) + text(group) + \
        text(b"") + body


def main():
    args = sys.argv[1:]
    callgrind = "--callgrind" in args
    calls = 300 if callgrind else 3000
    shards = 4 if callgrind else 128
    if "--calls" in args:
        calls = int(args[args.index("--calls") + 1])
    if "--shards" in args:
        shards = int(args[args.index("--shards") + 1])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    source = open(os.path.join(root, "src/broker/redis/jobs.lua")).read()
    work = tempfile.mkdtemp(prefix="delayq-put-cost-")
    port = free_port()
    prefix = []
    if callgrind:
        prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/callgrind.out",
                  "--toggle-collect=fcallCommand"]
    server = subprocess.Popen(prefix + ["redis-server", "--port", str(port), "--bind",
                                        "127.0.0.1", "--save", "", "--appendonly", "no",
                                        "--dir", work],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port(port, time.time() + 30):
            sys.exit("redis-put-cost: redis-server did not listen")
        sock = socket.create_connection(("127.0.0.1", port))
        stream = sock.makefile("rb")

        def ask(*words):
            sock.sendall(command(*words))
            return read_reply(stream)

        def used_memory():
            info = ask("INFO", "memory").decode()
            return int(next(line.split(":")[1] for line in info.split("\r\n")
                            if line.startswith("used_memory:")))

        ask("FUNCTION", "LOAD", "#!lua name=cost\n" + source +
            "\nredis.register_function('cost', run)\n")
        job = [b"default", b"1024", b"3600000", b"0", b"0", b"", b"", b"",
               record_tail(60, b"default", b"", b"", b"x" * 100)]
        before = used_memory()
        done = 0
        while done < calls:
            batch = min(50, calls - done)
            requests = []
            for i in range(batch):
                shard = (done + i) % shards
                base = f"dq:{{{shard}}}"
                keys = [base + suffix for suffix in
                        (":seq", ":j", ":a", ":t", ":r", ":b", ":k", ":g", ":c", ":m", ":p",
                         ":tubes", ":owner", ":epoch")]
                requests.append(command("FCALL", "cost", len(keys), *keys, "putmany", 128, shard,
                                        *(job * JOBS_PER_CALL)))
            sock.sendall(b"".join(requests))
            for _ in range(batch):
                read_reply(stream)
            done += batch
        puts = calls * JOBS_PER_CALL
        stats = ask("INFO", "commandstats").decode()
        fcall = next(line for line in stats.split("\r\n") if line.startswith("cmdstat_fcall:"))
        usec = int(fcall.split("usec=")[1].split(",")[0])
        print(f"{puts} puts in {calls} calls over {shards} shards: "
              f"{usec / puts:.2f} us per put inside FCALL, {(used_memory() - before) // puts} "
              f"bytes per job")
        sock.close()
    finally:
        server.terminate()
        server.wait(timeout=120)
    if callgrind:
        annotate = subprocess.run(["callgrind_annotate", f"{work}/callgrind.out"],
                                  capture_output=True, text=True, check=True).stdout
        total = next(line for line in annotate.splitlines() if "PROGRAM TOTALS" in line)
        instructions = int(total.split()[0].replace(",", ""))
        print(f"callgrind: {instructions // puts} instructions per put inside FCALL")
    subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()

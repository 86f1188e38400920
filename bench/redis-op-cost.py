#!/usr/bin/env python3
"""redis-op-cost.py [--calls N] [--keep] — what a worker's calls cost Redis, in instructions
(stable on a shared machine): loads jobs.lua as the build assembles it
(build/release/src/broker/redis/jobs.lua: `make build` first) into a fresh redis-server under
valgrind's callgrind (Debian's, on a free loopback port, stopped by its PID), puts ready jobs
into one shard, then counts each kind of call N times (default 300), alone, counting every
instruction Redis runs for it (the command's parsing and reply included, not the kernel's part).
Calls that change something are numbered as the node numbers them (their answers kept):

  a jobs.lua call that finds nothing (peek of no job): what every call costs
  reserve: the best ready job of `default`
  erase: a reserved job, by id
  erase with a prefetch: a reserved job, and the next reserved in the same call
  a function that does nothing, called with 1 key and with jobs.lua's 23: what the keys cost

Prints instructions per call of each."""
import glob
import os
import subprocess
import sys
import tempfile

from redis_server import SHARD_KEYS, Connection, Numbers, command, leave, read_reply, \
    record_tail, start_redis, stop_redis

KEYS = ["dq:{0}" + suffix for suffix in SHARD_KEYS]
NUMBERS = Numbers()


def jobs_call(*words):
    """A call that changes something, numbered as the node numbers it."""
    keys = KEYS + ["dq:{0}:ans:bench"]
    return ("FCALL", "cost", len(keys), *keys, *words, NUMBERS.tag(), "bench")


def jobs_read(*words):
    return ("FCALL", "cost", len(KEYS), *KEYS, *words, "", "bench")


class Counter:
    """Instructions counted between two dumps of a redis-server under callgrind
    (--instr-atstart=no): count() runs `work` with counting on and answers its instructions."""

    def __init__(self, process, work):
        self.process, self.work = process, work

    def control(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.process.pid)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    def count(self, work):
        self.control("-z")
        self.control("-i", "on")
        work()
        self.control("-i", "off")
        self.control("-d")
        latest = max(glob.glob(f"{self.work}/op.callgrind*"), key=os.path.getmtime)
        annotate = subprocess.run(["callgrind_annotate", latest], capture_output=True, text=True,
                                  check=True).stdout
        total = next(line for line in annotate.splitlines() if "PROGRAM TOTALS" in line)
        return int(total.split()[0].replace(",", ""))


def main():
    args = sys.argv[1:]
    calls = int(args[args.index("--calls") + 1]) if "--calls" in args else 300
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    script = os.path.join(root, "build/release/src/broker/redis/jobs.lua")
    if not os.path.exists(script):
        sys.exit("redis-op-cost.py: " + script + " is missing: run `make build` first")
    work = tempfile.mkdtemp(prefix="delayq-op-cost-")
    try:
        server, port = start_redis(callgrind=[f"--callgrind-out-file={work}/op.callgrind",
                                              "--instr-atstart=no"], work=work)
        try:
            conn = Connection(port)
            conn.ask("FUNCTION", "LOAD", "#!lua name=cost\n" + open(script).read() +
                     "\nredis.register_function('cost', run)\n")
            conn.ask("FUNCTION", "LOAD", "#!lua name=nothing\n"
                     "redis.register_function('nothing', function(keys, args) return 1 end)\n")
            job = [b"default", b"1024", b"0", b"0", b"0", b"", b"", b"",
                   record_tail(60, b"default", b"", b"", b"x" * 100)]
            for _ in range(4 * calls // 50 + 2):  # ready jobs, more than every phase takes
                conn.ask(*jobs_call("putmany", 1, 0, 50, *(job * 50)))
            counter = Counter(server, work)

            def repeat(make):
                def run():
                    for _ in range(calls):
                        conn.sock.sendall(command(*make()))
                        read_reply(conn.stream)
                return run

            def taken(reply):  # the id of a job reply ({'ok', id, ...} inside run()'s wrapping)
                return reply[0][1].decode()

            holder = "bench/1"
            rows = [("a jobs.lua call that finds nothing (peek of no job)",
                     counter.count(repeat(lambda: jobs_read("peek", "999999999", "", ""))))]
            held = []

            def reserve():
                for _ in range(calls):
                    held.append(taken(conn.ask(*jobs_call("reserve", holder, "", "default"))))
            rows.append(("reserve", counter.count(reserve)))
            ids = iter(held)
            rows.append(("erase", counter.count(
                repeat(lambda: jobs_call("erase", holder, next(ids), "", "")))))
            current = [taken(conn.ask(*jobs_call("reserve", holder, "", "default")))]

            def erase_and_prefetch():
                for _ in range(calls):
                    reply = conn.ask(*jobs_call("erase", holder, current[0], "", "", "",
                                                "default"))
                    current[0] = reply[0][2][1].decode()
            rows.append(("erase with a prefetch", counter.count(erase_and_prefetch)))
            rows.append(("a function that does nothing, 1 key", counter.count(
                repeat(lambda: ("FCALL", "nothing", 1, KEYS[0], "a", "b", "c")))))
            rows.append(("a function that does nothing, 23 keys", counter.count(
                repeat(lambda: ("FCALL", "nothing", len(KEYS), *KEYS, "a", "b", "c")))))
            conn.close()
        finally:
            stop_redis((server, port))
        print("| call | Redis instructions per call |")
        print("|---|---:|")
        for name, total in rows:
            print(f"| {name} | {total // calls:,} |")
    finally:
        leave(work, "--keep" in args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""redis-tidy-cost.py [--tubes N] [--rounds N] — how long a tidy_all call (a shard owner's look
for tubes that hold nothing, every 10 minutes) holds Redis: loads jobs.lua as the build assembles
it (build/release/src/broker/redis/jobs.lua: `make build` first) into a fresh redis-server
(Debian's, on a free loopback port, stopped by its PID), gives each of 64 shards N tubes
(default 200) that hold nothing and 20 that hold a ready job, then times tidy_all over the 64
shards as a node sends them (a call, then one with the shards it left when it had looked at 100
tubes): N rounds of looks that only mark (after an hour), then looks that forget (after 0)
until every empty tube is gone, then N rounds with only the busy tubes left. Prints, for each,
Redis's own time per call (INFO commandstats), calls per look and tubes forgotten per call."""
import os
import sys

from redis_server import SHARD_KEYS, Connection, start_redis, stop_redis, record_tail

SHARDS = 64


def main():
    args = sys.argv[1:]
    tubes = int(args[args.index("--tubes") + 1]) if "--tubes" in args else 200
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 5
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    script = os.path.join(root, "build/release/src/broker/redis/jobs.lua")
    if not os.path.exists(script):
        sys.exit("redis-tidy-cost.py: " + script + " is missing: run `make build` first")
    server = start_redis()
    try:
        conn = Connection(server[1])
        conn.ask("FUNCTION", "LOAD", "#!lua name=cost\n" + open(script).read() +
                 "\nredis.register_function{function_name='cost', callback=run, "
                 "flags={'allow-cross-slot-keys'}}\n")
        for shard in range(SHARDS):
            base = "dq:{%d}" % shard
            names = ["empty%d" % i for i in range(tubes)]
            conn.ask("SADD", base + ":tubes", *names)
            conn.ask("HSET", base + ":c", *[f for name in names for f in (name + "\0n", 1)])
            keys = [base + suffix for suffix in SHARD_KEYS]
            for i in range(20):
                tube = b"busy%d" % i
                job = [tube, b"1024", b"0", b"0", b"0", b"", b"", b"",
                       record_tail(60, tube, b"", b"", b"x" * 100)]
                conn.ask("FCALL", "cost", len(keys), *keys, "putmany", SHARDS, shard, 1, *job,
                         "", "bench")
        keys = ["dq:{0}" + suffix for suffix in SHARD_KEYS]
        bases = ["dq:{%d}" % shard for shard in range(SHARDS)]
        fcalls = [0]

        def look(after):
            """A node's look at its 64 shards: a call, then one with the shards it left ('-1')
            while some are left. The tubes it forgot."""
            forgotten, shards = 0, bases
            while shards:
                reply = conn.ask("FCALL", "cost", len(keys), *keys, "tidy_all", after, 100,
                                 *shards, "", "bench")
                counts = reply[0][1]
                forgotten += sum(int(n) for n in counts if n not in (b"-1", b"-2"))
                shards = [b for b, n in zip(shards, counts) if n == b"-1"]
                fcalls[0] += 1
            return forgotten

        def left():
            return sum(int(conn.ask("SCARD", "dq:{%d}:tubes" % shard)) for shard in range(SHARDS))

        def measure(name, looks):
            """Runs `looks` (a function that looks some times, returning the tubes forgotten);
            a row: the look, Redis's time per call, calls per look, tubes forgotten per call."""
            before, calls_before, done = conn.fcall_usec(), fcalls[0], [0]

            def counted(after):
                done[0] += 1
                return look(after)
            forgotten = looks(counted)
            calls = fcalls[0] - calls_before
            rows.append((name, (conn.fcall_usec() - before) / calls, calls / done[0],
                         forgotten / calls))

        rows = []
        measure("marking (after an hour)",
                lambda one: sum(one(3600000) for _ in range(rounds)))

        def forget_all(one):
            # Counted from the sets: a call answers no count for a shard it did not finish.
            before = left()
            for _ in range(10000):
                if left() <= 20 * SHARDS:
                    break
                one(0)
            return before - left()
        measure("forgetting (after 0), until none is left", forget_all)
        measure("only tubes with jobs left", lambda one: sum(one(0) for _ in range(rounds)))
        conn.close()
    finally:
        stop_redis(server)
    print(f"64 shards, {tubes} empty tubes and 20 with a job each")
    print("| look | Redis time per call (us) | calls per look at the 64 | tubes forgotten per call |")
    print("|---|---:|---:|---:|")
    for name, usec, per_look, gone in rows:
        print(f"| {name} | {usec:,.0f} | {per_look:.1f} | {gone:,.0f} |")


if __name__ == "__main__":
    main()

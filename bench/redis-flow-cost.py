#!/usr/bin/env python3
"""redis-flow-cost.py [--phase limit|fair|all] [--jobs N] [--groups G,G,...] [--lua FILE] — what flow control costs Redis, counted in
instructions (valgrind's callgrind: stable on a shared machine, where Redis's CPU time is not),
without delayqd: jobs.lua as the build assembles it (build/release/src/broker/redis/jobs.lua:
`make build` first; or FILE, such as an older commit's assembled from its parts, for a before
and after) loaded into a redis-server of its own (redis_server.py) under callgrind,
called as a node calls it, on one shard; only the calls measured are counted.

  limit  N jobs (default 2,000) of 100 groups, put round-robin, then taken as eight workers
         take them: eight reservations held, the oldest deleted before each next reserve. On a
         tube with no flow control and on one with group_concurrency 1: Redis's instructions
         per job (a reserve and a delete), and their ratio.
  fair   On a tube with fair turns, G groups (default 10, 1,000, 100,000) of two ready jobs
         each; 1,000 reserves, each followed by a release of its job (ready again, its group's
         turn over): instructions per reserve + release, which should grow with log(G).
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from redis_server import (SHARD_KEYS, Connection, Numbers, collect, instructions,  # this directory's
                          record_tail, start_redis, stop_redis)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "build/release/src/broker/redis/jobs.lua")
KEYS = ["dq:{0}" + suffix for suffix in SHARD_KEYS]
TUBE = b"t"


class Shard:
    """A redis-server under callgrind (counting off) with jobs.lua loaded, called as shard 0 of
    a one-shard layout."""

    def __init__(self, work, name):
        self.out = f"{work}/{name}.callgrind"
        self.redis = start_redis(callgrind=[f"--callgrind-out-file={self.out}",
                                            "--instr-atstart=no"], work=work)
        self.conn = Connection(self.redis[1])
        self.numbers = Numbers()
        self.conn.ask("FUNCTION", "LOAD", "#!lua name=cost\n" + open(SCRIPT).read() +
                      "\nredis.register_function('cost', run)\n")

    def call(self, *args):
        keys = KEYS + [KEYS[0].replace(":seq", ":ans:bench")]
        reply = self.conn.ask("FCALL", "cost", len(keys), *keys, *args, self.numbers.tag(),
                              "bench")[0]
        if reply[0] != b"ok":
            sys.exit(f"redis-flow-cost: {args[0]} answered {reply}")
        return reply

    def flow(self, concurrency, fair):
        self.call("flow", TUBE, 0, concurrency, 1 if fair else 0, 0, 1000, 1)

    def put(self, groups):
        """One ready job per entry of `groups`, 24 to a putmany call (as a node sends them)."""
        for start in range(0, len(groups), 24):
            batch = groups[start:start + 24]
            args = []
            for group in batch:
                args += [TUBE, 1024, 0, 0, 0, b"", group, b"",
                         record_tail(60, TUBE, b"", group, b"x" * 100)]
            self.call("putmany", 1, 0, len(batch), *args)

    def reserve(self):
        return self.call("reserve", "w", "", TUBE)[1]

    def counted(self, work):
        """Instructions of Redis while work() runs; stops the server."""
        collect(self.redis[0], True)
        work()
        collect(self.redis[0], False)
        stop_redis(self.redis)
        return instructions(self.out)


def limit_phase(work, jobs):
    per_job = {}
    for concurrency in (0, 1):
        shard = Shard(work, f"limit{concurrency}")
        if concurrency:
            shard.flow(concurrency, False)
        shard.put([b"g%d" % (i % 100) for i in range(jobs)])

        def take():
            held = []
            for _ in range(jobs):
                if len(held) == 8:
                    shard.call("erase", "w", held.pop(0), TUBE, "")
                held.append(shard.reserve())
            for job in held:
                shard.call("erase", "w", job, TUBE, "")
        per_job[concurrency] = shard.counted(take) / jobs
        print(f"limit: {'group_concurrency 1' if concurrency else 'no flow control'}: "
              f"{per_job[concurrency]:,.0f} instructions of Redis per job (reserve + delete)")
    print(f"limit: group_concurrency 1 / no flow control: {per_job[1] / per_job[0]:.3f}")


def fair_phase(work, groups):
    for count in groups:
        shard = Shard(work, f"fair{count}")
        shard.flow(0, True)
        shard.put([b"g%d" % (i % count) for i in range(2 * count)])

        def turns():
            for _ in range(1000):
                shard.call("release", "w", shard.reserve(), "", "", "")
        print(f"fair: {count:,} groups of 2 ready jobs: "
              f"{shard.counted(turns) / 1000:,.0f} instructions of Redis per reserve + release")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phase", choices=["limit", "fair", "all"], default="all")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--groups", default="10,1000,100000")
    parser.add_argument("--lua", help="the script to load instead of the build's")
    args = parser.parse_args()
    global SCRIPT
    SCRIPT = args.lua or SCRIPT
    if not os.path.exists(SCRIPT):
        sys.exit(f"redis-flow-cost: {SCRIPT} is missing: run `make build` first")
    work = tempfile.mkdtemp(prefix="delayq-flow-cost-")
    try:
        if args.phase in ("limit", "all"):
            limit_phase(work, args.jobs)
        if args.phase in ("fair", "all"):
            fair_phase(work, [int(g) for g in args.groups.split(",")])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

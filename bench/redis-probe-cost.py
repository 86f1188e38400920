#!/usr/bin/env python3
"""redis-probe-cost.py [--tubes 1000,5000] [--rounds 3] [SCRIPT...] — what a reserve over many
tubes costs Redis when its node knows nothing of them yet: the `probe_all` call that asks 128
shards on one Redis for the heads of every tube (docs/redis-mode.md, "Waking reserves"), one job
put in one of the tubes. Loads each SCRIPT (an assembled jobs.lua; default the build's,
build/release/src/broker/redis/jobs.lua: `make build` first) into a fresh redis-server (Debian's,
on a free loopback port, stopped by its PID), and times the call by Redis's own account (INFO
commandstats: the microseconds FCALL spent), not by the client, whose parsing of the answer
would count too. Scripts alternate round by round. Prints a Markdown row per script and number
of tubes: the median over the rounds, in ms."""
import os
import sys

from redis_server import SHARD_KEYS, Connection, Numbers, record_tail, start_redis, stop_redis

SHARDS = 128


def fcall_usec(conn):
    """Microseconds Redis has spent in FCALL so far."""
    stats = conn.ask("INFO", "commandstats").decode()
    for line in stats.splitlines():
        if line.startswith("cmdstat_fcall:"):
            return int(line.split("usec=")[1].split(",")[0])
    return 0


def probe_once(script, tubes):
    """Redis's time (ms) for one probe_all of `tubes` over SHARDS shards."""
    server, port = start_redis()
    try:
        conn = Connection(port)
        conn.ask("FUNCTION", "LOAD", "#!lua name=cost\n" + open(script).read() +
                 "\nredis.register_function('cost', run)\n")
        keys = ["dq:{0}" + suffix for suffix in SHARD_KEYS]
        name = tubes[3].encode()
        job = [name, b"10", b"0", b"0", b"0", b"", b"", b"", record_tail(60, name, b"", b"", b"x")]
        conn.ask("FCALL", "cost", len(keys) + 1, *keys, "dq:{0}:ans:bench", "putmany", 1, 0, 1,
                 *job, Numbers().tag(), "bench")
        bases = ["dq:{%d}" % shard for shard in range(SHARDS)]
        before = fcall_usec(conn)
        conn.ask("FCALL", "cost", len(keys), *keys, "probe_all", len(bases), *bases, *tubes, "",
                 "bench")
        return (fcall_usec(conn) - before) / 1000
    finally:
        stop_redis((server, port))


def main():
    args = sys.argv[1:]
    counts = [1000, 5000]
    rounds = 3
    if "--tubes" in args:
        at = args.index("--tubes")
        counts = [int(n) for n in args[at + 1].split(",")]
        del args[at:at + 2]
    if "--rounds" in args:
        at = args.index("--rounds")
        rounds = int(args[at + 1])
        del args[at:at + 2]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    scripts = args or [os.path.join(root, "build/release/src/broker/redis/jobs.lua")]
    for script in scripts:
        if not os.path.exists(script):
            sys.exit("redis-probe-cost.py: " + script + " is missing: run `make build` first")
    print(f"| script | tubes | Redis's time a probe over {SHARDS} shards (ms), median |")
    print("|---|---:|---:|")
    for count in counts:
        tubes = ["tube-%05d" % i for i in range(count)]
        times = {script: [] for script in scripts}
        for _ in range(rounds):
            for script in scripts:
                times[script].append(probe_once(script, tubes))
        for script in scripts:
            median = sorted(times[script])[len(times[script]) // 2]
            print(f"| {script} | {count:,} | {median:,.1f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""redis-put-cost.py [--callgrind | --whole] [--calls N] [--shards S] [--per-call J] [--keep]
[--lua FILE] — what a put costs Redis, without delayqd or its load: loads jobs.lua as the build
assembles it (build/release/src/broker/redis/jobs.lua: `make build` first; or FILE, such as an
older commit's, assembled by hand, for a before and after) into a fresh redis-server
(Debian's, on a free loopback port, stopped by PID) and makes N putmany calls
of J jobs each (default 24; 100-byte bodies due in an hour, spread over S shards), the arguments
built as the node builds them (redis_broker.cc, layout.cc's new_record_tail). 24 is about what a
node sends per call under bench/compare-bullmq.sh's put load (100,000 puts in 3,800 to 4,100
calls).

Prints microseconds per put inside FCALL (INFO commandstats) and Redis bytes per job. With
--callgrind, redis-server runs under valgrind's callgrind with only FCALL counted, and the figure
is instructions per put: stable on a shared machine where the microseconds are not. The default
for --callgrind is 300 calls over 4 shards (each shard's sets then pass Redis's small-encoding
limits, as in a loaded server); without it, 3,000 calls over 128 shards.

--whole counts every instruction Redis runs while the calls are made (reading and parsing them,
the function, the replies: all but the kernel's part), 1,000 calls over 128 shards by default;
and then, on a second redis-server under callgrind, those of BullMQ's adds of the same number of
jobs (bench/bullmq/bench.js add, 64 in flight): the side-by-side ratio of Redis CPU per put
without the machine's noise. Both start warm: 144 jobs in each shard and 200 in BullMQ's queue
first, so that their sorted sets are past Redis's small encoding (a listpack of at most 128
entries, where each insert walks the list), as with compare-bullmq.sh's 100,000 jobs. --keep
leaves callgrind's files (for callgrind_annotate) and says where."""
import os
import subprocess
import sys
import tempfile

from redis_server import (SHARD_KEYS, Connection, Numbers, collect, command, instructions, leave,
                          read_reply, record_tail, start_redis, stop_redis)

JOBS_PER_CALL = 24  # --per-call sets another number


def start(work, name, valgrind):
    """A redis-server (redis_server.py), under callgrind when `valgrind` names its options;
    (process, port, callgrind's output file)."""
    out = f"{work}/{name}.callgrind"
    process, port = start_redis(callgrind=[f"--callgrind-out-file={out}"] + valgrind
                                if valgrind else None, work=work)
    return process, port, out


NUMBERS = {}  # per shard, as a node numbers its calls


def putmany_calls(conn, calls, shards, first=0, per_call=JOBS_PER_CALL):
    """Calls number first to first + calls - 1 of putmany, per_call jobs each, shard by shard in
    turn, 50 pipelined at a time."""
    job = [b"default", b"1024", b"3600000", b"0", b"0", b"", b"", b"",
           record_tail(60, b"default", b"", b"", b"x" * 100)]
    done = first
    while done < first + calls:
        batch = min(50, first + calls - done)
        requests = []
        for i in range(batch):
            shard = (done + i) % shards
            base = f"dq:{{{shard}}}"
            keys = [base + suffix for suffix in SHARD_KEYS] + [base + ":ans:bench"]
            requests.append(command("FCALL", "cost", len(keys), *keys, "putmany", 128, shard, per_call,
                                    *(job * per_call), NUMBERS.setdefault(shard, Numbers()).tag(), "bench"))
        conn.sock.sendall(b"".join(requests))
        for _ in range(batch):
            read_reply(conn.stream)
        done += batch


def main():
    args = sys.argv[1:]
    callgrind = "--callgrind" in args
    whole = "--whole" in args
    calls = 300 if callgrind else 1000 if whole else 3000
    shards = 4 if callgrind else 128
    if "--calls" in args:
        calls = int(args[args.index("--calls") + 1])
    if "--shards" in args:
        shards = int(args[args.index("--shards") + 1])
    per_call = JOBS_PER_CALL
    if "--per-call" in args:
        per_call = int(args[args.index("--per-call") + 1])
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    script = os.path.join(root, "build/release/src/broker/redis/jobs.lua")
    if "--lua" in args:
        script = args[args.index("--lua") + 1]
    if not os.path.exists(script):
        sys.exit("redis-put-cost.py: " + script + " is missing: run `make build` first")
    source = open(script).read()
    work = tempfile.mkdtemp(prefix="delayq-put-cost-")
    valgrind = ["--toggle-collect=fcallCommand"] if callgrind else \
        ["--instr-atstart=no"] if whole else []
    puts = calls * per_call
    try:
        server, port, out = start(work, "delayq", valgrind)
        try:
            conn = Connection(port)
            conn.ask("FUNCTION", "LOAD", "#!lua name=cost\n" + source +
                     "\nredis.register_function('cost', run)\n")
            if whole:
                # A warm server: every shard's sets past Redis's small-encoding limit (128 entries),
                # as they are with the 100,000 jobs of compare-bullmq.sh
                putmany_calls(conn, shards * 6, shards)
                conn.ask("CONFIG", "RESETSTAT")
            before = conn.used_memory()
            if whole:
                collect(server, True)
            putmany_calls(conn, calls, shards, shards * 6 if whole else 0, per_call)
            if whole:
                collect(server, False)
            print(f"{puts} puts in {calls} calls over {shards} shards: "
                  f"{conn.fcall_usec() / puts:.2f} us per put inside FCALL, "
                  f"{(conn.used_memory() - before) // puts} bytes per job")
            conn.close()
        finally:
            stop_redis((server, port))
        if callgrind:
            print(f"callgrind: {instructions(out) // puts} instructions per put inside FCALL")
        if not whole:
            return
        delayq = instructions(out) / puts
        print(f"callgrind: {delayq:,.0f} instructions of Redis per put (all of redis-server "
              f"while the calls ran)")
        bullmq_dir = os.path.join(root, "bench", "bullmq")
        if not os.path.isdir(os.path.join(bullmq_dir, "node_modules", "bullmq")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=bullmq_dir,
                           stdout=subprocess.DEVNULL, check=True)
        server, port, out = start(work, "bullmq", valgrind)
        try:
            def adds(n):
                subprocess.run(["node", "bench.js", "add", str(port)], cwd=bullmq_dir,
                               env=dict(os.environ, BENCH_JOBS=str(n)), check=True,
                               stdout=subprocess.DEVNULL)
            adds(200)  # the warm-up: its scripts loaded, its delayed set past 128 entries
            collect(server, True)
            adds(puts)
            collect(server, False)
        finally:
            stop_redis((server, port))
        bullmq = instructions(out) / puts
        print(f"callgrind: {bullmq:,.0f} instructions of Redis per BullMQ add of the same jobs; "
              f"delayq / BullMQ = {delayq / bullmq:.2f}")
    finally:
        leave(work, "--keep" in args)


if __name__ == "__main__":
    main()

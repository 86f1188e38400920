"""redis_server.py -- the benchmarks' own redis-server: Debian's, on a free loopback port, no
persistence, stopped by its PID (schedules.py, flow.py, redis-outage.py, redis-put-cost.py);
optionally under valgrind's callgrind, with the helpers that count its instructions."""
import socket
import subprocess
import sys
import time


def start_redis(port=None, callgrind=None, work=None):
    """A redis-server on `port` (default: a free one); (process, port). With `callgrind` (a list
    of valgrind's options, such as --callgrind-out-file=...), under valgrind's callgrind; `work`
    is its directory (for an RDB file; default: where this runs)."""
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    prefix = ["valgrind", "--tool=callgrind"] + callgrind if callgrind is not None else []
    where = ["--dir", work] if work else []
    process = subprocess.Popen(
        prefix + ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no"] + where,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + (60 if callgrind is not None else 10)
    while time.time() < deadline:
        try:
            if redis_command(port, "PING") == b"PONG":
                return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("redis-server did not answer")


def stop_redis(redis):
    redis[0].terminate()
    redis[0].wait(timeout=300)


def instructions(out):
    """The instructions a callgrind output file counted."""
    annotate = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True,
                              check=True).stdout
    total = next(line for line in annotate.splitlines() if "PROGRAM TOTALS" in line)
    return int(total.split()[0].replace(",", ""))


def leave(work, keep):
    """Removes the scratch directory `work` of callgrind's files; with `keep`, says where it is
    instead."""
    if keep:
        print(f"callgrind's files are in {work}")
    else:
        subprocess.run(["rm", "-rf", work], check=False)


def collect(process, on):
    """Turns callgrind's counting on or off in a running redis-server (started with
    --instr-atstart=no)."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(process.pid)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


# A shard's keys, in the order every FCALL of jobs.lua names them (head.lua).
SHARD_KEYS = (":seq", ":j", ":a", ":t", ":r", ":b", ":k", ":g", ":c", ":m", ":p", ":tubes",
              ":owner", ":epoch", ":ti", ":tp", ":s", ":sm", ":st", ":f", ":fg", ":fw", ":fz")


class Numbers:
    """A node's call numbers (run.lua): a call that changes something is numbered and names its
    node's kept answers as a 24th key, `<shard>:ans:<node>`; each says that the one before it was
    answered, as delayqd's calls do when one at a time."""

    def __init__(self):
        self.last = 0

    def tag(self):
        """The next call's; its hash's life renewed every 1,000 calls (the node: every 10 s)."""
        self.last += 1
        refresh = "+" if self.last % 1000 == 1 else ""
        return refresh + (f"{self.last},{self.last - 1}" if self.last > 1 else "1")


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
        sys.exit(f"redis_server: Redis answered {rest.decode()}")
    if kind in (b"+", b":"):
        return rest
    if kind == b"$":
        size = int(rest)
        return None if size < 0 else stream.read(size + 2)[:-2]
    if kind == b"*":
        return [read_reply(stream) for _ in range(max(int(rest), 0))]
    sys.exit(f"redis_server: an unexpected reply {line!r}")


def record_tail(ttr, tube, key, group, body):
    """As layout.cc's new_record_tail: MessagePack unsigned integers and strings, then the body
    (small values only: a TTR below 128 and names below 32 bytes)."""
    assert ttr < 128 and all(len(name) < 32 for name in (tube, key, group))
    def text(value):
        return bytes([0xa0 | len(value)]) + value
    return bytes([ttr, 0, 0, 0, 0, 0]) + text(tube) + text(key) + text(group) + text(b"") + body


class Connection:
    """A connection to a redis-server on loopback; ask() sends one command and reads its reply
    (an error reply ends the script)."""

    def __init__(self, port, timeout=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.stream = self.sock.makefile("rb")

    def close(self):
        self.stream.close()
        self.sock.close()

    def ask(self, *words):
        self.sock.sendall(command(*words))
        return read_reply(self.stream)

    def used_memory(self):
        info = self.ask("INFO", "memory").decode()
        return int(next(line.split(":")[1] for line in info.split("\r\n")
                        if line.startswith("used_memory:")))

    def fcall_usec(self):
        stats = self.ask("INFO", "commandstats").decode()
        fcall = next(line for line in stats.split("\r\n") if line.startswith("cmdstat_fcall:"))
        return int(fcall.split("usec=")[1].split(",")[0])


def redis_command(port, *words):
    """One command to the redis-server on `port`, on a connection of its own; its reply."""
    conn = Connection(port, timeout=10)
    try:
        return conn.ask(*words)
    finally:
        conn.close()

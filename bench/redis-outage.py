#!/usr/bin/env python3
"""redis-outage.py [DELAYQD] [--reserves N] [--outage S] [--kill] -- what a Redis out of reach
costs a node in Redis mode: its memory for waiting reserves, how late their timeouts come, and
what puts answer meanwhile.

Starts a redis-server of its own (redis_server.py) and one delayqd node over it (default
build/release/apps/delayqd), on free loopback ports. Puts 100 delayed jobs (acknowledged:
checked again at the end), then opens N connections (default 1,000), each sending
`reserve-with-timeout T` with T from 4 to 19 s (N / 16 of each), and waits 2 s. Then stops Redis
with SIGSTOP (with --kill: SIGKILL, and starts it again on the same port with an empty data set,
so only the check of the acknowledged puts is left out) for S seconds (default 30), meanwhile:
  - samples the node's RSS every 100 ms: its growth over the RSS before the outage;
  - reads every reserve's answer: TIMED_OUT expected at its own T, and how late it came (the
    answer's arrival minus its send plus T), apart for those due in the outage's first 2.5 s
    (before the node's heartbeat has gone unanswered for half a lease);
  - sends a put every second on a connection of its own: what each answers, and how long it
    took.
Then SIGCONT (or the restart), and checks that the node serves again: a put, a reserve of it.
Every loop is bounded; Redis and delayqd are stopped by their PIDs. Prints one line per figure.
"""
import argparse
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overload import raise_file_limit, rss_kib, stop_process  # this directory's
from redis_server import start_redis, stop_redis  # this directory's


def start_node(binary, redis_port):
    server = subprocess.Popen(
        [binary, "-p", "0", "--http", "off", "--redis", f"127.0.0.1:{redis_port}",
         "--redis-prefix", f"outage{os.getpid()}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = server.stdout.readline().decode()
    if "listening on" not in line:
        server.kill()
        sys.exit("delayqd did not say its port")
    return server, int(line.strip().rsplit(":", 1)[1])


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def call(sock, command, timeout=30):
    """One command and its first reply line, and the seconds it took."""
    sock.settimeout(timeout)
    began = time.monotonic()
    sock.sendall(command)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n")[0].decode(errors="replace"), time.monotonic() - began


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", nargs="?", default="build/release/apps/delayqd")
    parser.add_argument("--reserves", type=int, default=1000)
    parser.add_argument("--outage", type=int, default=30)
    parser.add_argument("--kill", action="store_true")
    args = parser.parse_args()
    raise_file_limit(args.reserves + 200, "redis-outage.py")
    redis = start_redis()
    node, port = start_node(args.binary, redis[1])
    try:
        producer = connect(port)
        for i in range(100):
            reply, _ = call(producer, b"put 0 3600 60 1\r\nx\r\n")
            if not reply.startswith("INSERTED"):
                sys.exit(f"put {i}: {reply}")
        time.sleep(1)
        before = rss_kib(node.pid)
        selector = selectors.DefaultSelector()
        due = {}  # socket -> when its TIMED_OUT is due (monotonic)
        for i in range(args.reserves):
            sock = connect(port)
            seconds = 4 + i % 16
            sock.sendall(b"reserve-with-timeout %d\r\n" % seconds)
            due[sock] = time.monotonic() + seconds
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        time.sleep(2)
        waiting_rss = rss_kib(node.pid)
        print(f"before the outage: RSS {before} KiB; with {args.reserves} reserves waiting "
              f"{waiting_rss} KiB ({(waiting_rss - before) * 1024 / args.reserves:.0f} B each)")
        if args.kill:
            redis[0].kill()
            redis[0].wait()
        else:
            os.kill(redis[0].pid, signal.SIGSTOP)
        began = time.monotonic()
        end = began + args.outage
        peak = waiting_rss
        late, early, answers = [], [], {}
        puts = []
        put_conn = connect(port)
        next_put = began
        sampled = 0.0
        while time.monotonic() < end:
            if time.monotonic() - sampled >= 0.1:
                peak, sampled = max(peak, rss_kib(node.pid)), time.monotonic()
            if time.monotonic() >= next_put and len(puts) < args.outage:
                # Sent without waiting: its answer is read below, with the reserves'.
                put_conn.settimeout(1)
                put_conn.sendall(b"put 0 0 60 1\r\np\r\n")
                put_conn.setblocking(False)
                puts.append([time.monotonic(), None, None])
                next_put += 1
            for key, _ in selector.select(timeout=0.01):
                sock = key.fileobj
                try:
                    data = sock.recv(4096)
                except BlockingIOError:
                    continue
                selector.unregister(sock)
                answers[data.split(b"\r\n")[0].decode(errors="replace")] = \
                    answers.get(data.split(b"\r\n")[0].decode(errors="replace"), 0) + 1
                late.append(time.monotonic() - due[sock])
                if due[sock] < began + 2.5:
                    early.append(late[-1])
            try:
                data = put_conn.recv(4096)
                for line in data.split(b"\r\n")[:-1]:
                    for entry in puts:
                        if entry[1] is None:
                            entry[1], entry[2] = line.decode(errors="replace"), \
                                time.monotonic() - entry[0]
                            break
            except (socket.timeout, BlockingIOError, InterruptedError):
                pass
        print(f"outage of {args.outage} s ({'SIGKILL' if args.kill else 'SIGSTOP'}): RSS peak "
              f"{peak} KiB, {peak - waiting_rss} KiB over the RSS with the reserves waiting "
              f"({(peak - waiting_rss) * 1024 / args.reserves:.0f} B per reserve)")
        late.sort()
        if late:
            print(f"reserves answered during the outage: {len(late)} of {args.reserves} "
                  f"({answers}); lateness after their timeout: min {late[0] * 1000:.0f} ms, "
                  f"median {late[len(late) // 2] * 1000:.0f} ms, max {late[-1] * 1000:.0f} ms")
        early.sort()
        if early:
            print(f"of them due in the outage's first 2.5 s: {len(early)}; lateness: median "
                  f"{early[len(early) // 2] * 1000:.0f} ms, max {early[-1] * 1000:.0f} ms")
        answered = [p for p in puts if p[1] is not None]
        if answered:
            kinds = {}
            for _, reply, _ in answered:
                kinds[reply] = kinds.get(reply, 0) + 1
            print(f"puts during the outage: {len(puts)} sent, {len(answered)} answered "
                  f"({kinds}); slowest answer {max(p[2] for p in answered):.1f} s")
        if args.kill:
            stop_redis(redis)
            redis = start_redis(redis[1])
        else:
            os.kill(redis[0].pid, signal.SIGCONT)
        back = time.monotonic()
        ok = False
        while not ok and time.monotonic() < back + 30:
            reply, _ = call(connect(port), b"put 0 0 60 4\r\nback\r\n")
            ok = reply.startswith("INSERTED")
            if not ok:
                time.sleep(0.2)
        print(f"after Redis came back: a put {'INSERTED' if ok else 'still refused'} "
              f"{time.monotonic() - back:.1f} s later")
        if not args.kill:
            checker = connect(port)
            checker.sendall(b"stats-tube default\r\n")
            time.sleep(0.5)
            text = checker.recv(65536).decode(errors="replace")
            delayed = [line for line in text.splitlines() if line.startswith("current-jobs-delayed")]
            print(f"acknowledged delayed puts before the outage: 100; now {delayed}")
    finally:
        stop_process(node)
        if redis[0].poll() is None:
            os.kill(redis[0].pid, signal.SIGCONT)
        stop_redis(redis)


if __name__ == "__main__":
    main()

"""redis_server.py -- the benchmarks' own redis-server: Debian's, on a free loopback port, no
persistence, stopped by its PID (schedules.py, flow.py)."""
import socket
import subprocess
import sys
import time


def redis_command(port, *words):
    """One command to the script's redis-server; its reply's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(("*%d\r\n" % len(words) + "".join(
            "$%d\r\n%s\r\n" % (len(w), w) for w in words)).encode())
        reply = b""
        while b"\r\n" not in reply:
            reply += conn.recv(65536)
        head, _, rest = reply.partition(b"\r\n")
        if head.startswith(b"$") and int(head[1:]) >= 0:
            while len(rest) < int(head[1:]) + 2:
                rest += conn.recv(65536)
            return rest[:int(head[1:])]
        reply = head
        return reply


def start_redis(port=None):
    """A redis-server on `port` (default: a free one); (process, port)."""
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if redis_command(port, "PING").startswith(b"+PONG"):
                return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit("redis-server did not answer")


def stop_redis(redis):
    redis[0].terminate()
    redis[0].wait()

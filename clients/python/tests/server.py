"""server.py — starts a real delayqd for the tests, and stops it by its PID.

The binary is $DELAYQ_DELAYQD (CTest passes the one it built), else build/release/apps/delayqd
of this checkout. Each server listens on free loopback ports (-p 0 --http 127.0.0.1:0); the
ports are read from its stdout lines `delayqd listening on ADDR:PORT` and `delayqd http
listening on ADDR:PORT`. Its jobs go to a fresh data directory (-b), or, when
$DELAYQ_TEST_REDIS_SEEDS_FILE names a file whose first line is a Redis Cluster's seeds, to that
cluster under a prefix of its own (py-<pid>-<n>).
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_LISTENING = re.compile(r"^delayqd (http )?listening on (\S+):(\d+)$")
_serial = itertools.count(1)


def delayqd_path() -> str:
    path = os.environ.get("DELAYQ_DELAYQD") or str(REPO / "build/release/apps/delayqd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no delayqd at {path}: set DELAYQ_DELAYQD to the server binary")
    return path


def redis_seeds() -> str | None:
    """The Redis Cluster's seeds when the tests run in Redis mode, else None."""
    seeds_file = os.environ.get("DELAYQ_TEST_REDIS_SEEDS_FILE")
    if not seeds_file:
        return None
    with open(seeds_file, encoding="utf-8") as f:
        seeds = f.readline().strip()
    if not seeds:
        raise RuntimeError(f"{seeds_file}: no seeds on its first line")
    return seeds


class Server:
    """One delayqd process. `url` is its HTTP API, `port` its beanstalkd port."""

    def __init__(self, *flags: str, start_timeout_s: float = 30.0) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="delayq-py-")
        self.dir = Path(self._dir.name)
        seeds = redis_seeds()
        if seeds is None:
            store = ["-b", str(self.dir / "db")]
        else:
            store = ["--redis", seeds, "--redis-prefix", f"py-{os.getpid()}-{next(_serial)}"]
        self.redis = seeds is not None
        self._out = open(self.dir / "stdout", "w+", encoding="utf-8")
        self._err = open(self.dir / "stderr", "w+", encoding="utf-8")
        self.process = subprocess.Popen(
            [delayqd_path(), "-p", "0", "--http", "127.0.0.1:0", *store, *flags],
            stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err)
        self.pid = self.process.pid
        try:
            self.port, http_port = self._wait_for_ports(start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{http_port}"

    def _wait_for_ports(self, timeout_s: float) -> tuple[int, int]:
        deadline = time.monotonic() + timeout_s
        ports: dict[bool, int] = {}
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"delayqd exited with {self.process.returncode}: {self.log()}")
            for line in (self.dir / "stdout").read_text(encoding="utf-8").splitlines():
                match = _LISTENING.match(line)
                if match:
                    ports[bool(match.group(1))] = int(match.group(3))
            if len(ports) == 2:
                return ports[False], ports[True]
            time.sleep(0.02)
        raise RuntimeError(f"delayqd did not print both ports within {timeout_s} s: {self.log()}")

    def log(self) -> str:
        return (self.dir / "stderr").read_text(encoding="utf-8", errors="replace")

    def signal(self, number: signal.Signals) -> None:
        """Sends a signal to this server, by its PID."""
        if self.process.poll() is None:
            os.kill(self.pid, number)

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL by PID if it has not stopped within 10 s."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.process.wait(10)
        self._out.close()
        self._err.close()
        self._dir.cleanup()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

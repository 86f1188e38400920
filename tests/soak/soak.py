#!/usr/bin/env python3
"""soak.py DELAYQD [--minutes N] [--kill-every S] [--rate R] — a long mixed load on a real
delayqd over its HTTP API, with kill -9 and checks.

Threads put jobs with delays of 0 to 5 s (some with keys), reserve them (TTR 1 s) and delete
most, release some with a delay, leave some to lapse their TTR, and reschedule pending ones. The
server is killed with SIGKILL every --kill-every seconds (0: never) and restarted on the same
data directory. Checked throughout and after each restart:
  - nothing early: a reserved job's due time (as answered, and as last acknowledged when no
    other operation on it was under way) is not after the moment the answer arrived;
  - nothing lost: every job whose put or last change was acknowledged, and not deleted since, is
    there after the restart; every acknowledged delete stays deleted (all deletes since the last
    restart, and a sample of older ones).
RSS (VmRSS) is sampled every 30 s; with --kill-every 0 and at least 30 minutes, the run fails if
the highest sample of the last 15 minutes is more than 10 % above the highest of minutes 5 to 20
(RSS saws up and down as RocksDB fills and flushes its memtables). Prints one line per minute and a summary; exit status 0
when every check passed. Not part of `make test`: run by hand (docs/failures.md has figures).
"""
import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

TUBE = "soak"


class Server:
    def __init__(self, binary, data):
        self.binary, self.data = binary, data
        self.proc, self.port = None, None
        self.up = threading.Event()

    def start(self):
        out = open(os.path.join(self.data, "stdout"), "w+")
        err = open(os.path.join(self.data, "stderr"), "a")
        self.proc = subprocess.Popen([self.binary, "-p", "0", "--http", "127.0.0.1:0", "-b",
                                      os.path.join(self.data, "db")], stdout=out, stderr=err)
        for _ in range(600):
            out.seek(0)
            for line in out.read().splitlines():
                if line.startswith("delayqd http listening on "):
                    self.port = int(line.rsplit(":", 1)[1])
                    self.up.set()
                    return
            if self.proc.poll() is not None:
                raise RuntimeError("delayqd exited with %s" % self.proc.returncode)
            time.sleep(0.05)
        raise RuntimeError("delayqd did not start")

    def kill(self):
        self.up.clear()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


class Client:
    """One keep-alive HTTP connection; call() returns (status, body) or None if the server went
    away (the operation's outcome is then unknown)."""

    def __init__(self, server, gate=None):
        self.server, self.gate, self.conn = server, gate, None

    def call(self, method, path, body=None, timeout=10):
        if self.gate is not None:
            self.gate.wait()
        self.server.up.wait()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=timeout)
            self.conn.request(method, path, None if body is None else json.dumps(body),
                              {"Content-Type": "application/json"})
            response = self.conn.getresponse()
            data = response.read()
            return response.status, (json.loads(data) if data else {})
        except (OSError, http.client.HTTPException):
            self.conn = None
            return None


class Soak:
    def __init__(self, server, args):
        self.server, self.args = server, args
        self.lock = threading.Lock()
        self.jobs = {}        # id -> {"due": ms} of jobs acknowledged and not deleted
        self.busy = {}        # id -> operations under way on it
        self.unsure = set()   # ids whose last operation's outcome is unknown (server killed)
        self.deleted = []     # ids whose delete was acknowledged, in order
        self.reserved = set()  # ids a worker has reserved
        self.checked_upto = 0  # deleted[:checked_upto] were checked after a restart
        self.failures = []
        self.counts = {k: 0 for k in ("put", "reserve", "delete", "release", "lapse",
                                      "reschedule", "restart", "checked")}
        self.stop = threading.Event()
        self.history = {}  # id -> what happened to it, for a failure's message
        self.go = threading.Event()  # cleared while the server is killed and checked
        self.go.set()

    def note(self, job_id, what):
        with self.lock:
            self.history.setdefault(job_id, []).append(
                "%.3f %s (restart %d)" % (time.time(), what, self.counts["restart"]))

    def fail(self, text):
        with self.lock:
            self.failures.append(text)
        print("FAIL " + text, flush=True)

    def begin(self, job_id):
        with self.lock:
            self.busy[job_id] = self.busy.get(job_id, 0) + 1

    def end(self, job_id, result, apply=None):
        """Ends an operation on a job: `apply` records its acknowledged effect. When its outcome
        is unknown, or another operation on the job was under way meanwhile (HTTP reservations
        are shared, so a worker whose TTR lapsed can release what another worker holds now, and
        acknowledgements may be seen out of the server's order), the job is marked unsure
        instead: checks skip it until a restart settles it by asking the server."""
        with self.lock:
            if result is None or self.busy[job_id] > 1:
                self.unsure.add(job_id)
            elif apply is not None:
                apply()
            self.busy[job_id] -= 1
            if self.busy[job_id] == 0:
                del self.busy[job_id]

    def producer(self):
        client = Client(self.server, self.go)
        n = 0
        while not self.stop.is_set():
            n += 1
            job = {"body": "soak %d" % n, "delay": random.randint(0, 5000), "ttr": "1s"}
            if n % 4 == 0:
                job["key"] = "k%d" % n
            got = client.call("POST", "/v1/tubes/%s/jobs" % TUBE, job)
            if got and got[0] == 201:
                with self.lock:
                    # A worker may have reserved it, even deleted it, before this answer was
                    # read here (the replies to two connections leave in no set order): then
                    # what it is now is settled by asking, after the next restart.
                    if got[1]["id"] in self.reserved:
                        self.unsure.add(got[1]["id"])
                    else:
                        self.jobs[got[1]["id"]] = {"due": got[1]["due_unix_ms"]}
                    self.counts["put"] += 1
                self.note(got[1]["id"], "put acknowledged")
            elif got:
                self.fail("put answered %s %s" % got)
            time.sleep(1.0 / self.args.rate)

    def consumer(self):
        client = Client(self.server, self.go)
        while not self.stop.is_set():
            got = client.call("POST", "/v1/reserve", {"tubes": [TUBE], "timeout": "1s"})
            arrived = time.time() * 1000
            if not got or got[0] != 200:
                if got and got[0] not in (204, 408):
                    self.fail("reserve answered %s %s" % got)
                continue
            job = got[1]
            job_id = job["id"]
            self.note(job_id, "reserved")
            with self.lock:
                self.counts["reserve"] += 1
                self.reserved.add(job_id)
                known = self.jobs.get(job_id)
                quiet = self.busy.get(job_id, 0) == 0 and job_id not in self.unsure
            if job["due_unix_ms"] > arrived:
                self.fail("job %d reserved before its due time: due %d, answered at %.0f"
                          % (job_id, job["due_unix_ms"], arrived))
            if known and quiet and known["due"] > arrived:
                self.fail("job %d reserved before its acknowledged due time %d (at %.0f)"
                          % (job_id, known["due"], arrived))
            choice = random.random()
            if choice < 0.1:  # let the TTR lapse
                with self.lock:
                    self.counts["lapse"] += 1
                continue
            self.begin(job_id)
            apply = None
            if choice < 0.2:
                delay = random.randint(0, 2000)
                result = client.call("POST", "/v1/jobs/%d/release" % job_id, {"delay": delay})
                if result and result[0] == 200:
                    def apply(due=result[1]["due_unix_ms"]):
                        self.jobs[job_id] = {"due": due}
                        self.counts["release"] += 1
            else:
                result = client.call("DELETE", "/v1/jobs/%d" % job_id)
                if result and result[0] == 200:
                    def apply():
                        self.jobs.pop(job_id, None)
                        self.deleted.append(job_id)
                        self.counts["delete"] += 1
            if result and result[0] not in (200, 404, 409):
                self.fail("job %d: answered %s %s" % (job_id, result[0], result[1]))
            self.note(job_id, "%s answered %s" % ("release" if choice < 0.2 else "delete",
                                                   result[0] if result else "nothing"))
            self.end(job_id, result, apply)

    def rescheduler(self):
        client = Client(self.server, self.go)
        while not self.stop.is_set():
            time.sleep(0.02)
            with self.lock:
                if not self.jobs:
                    continue
                job_id = random.choice(list(self.jobs)) if len(self.jobs) < 5000 else \
                    next(iter(self.jobs))
            self.begin(job_id)
            result = client.call("PATCH", "/v1/jobs/%d" % job_id, {"delay": random.randint(0, 3000)})
            self.note(job_id, "reschedule answered %s" % (result[0] if result else "nothing"))
            apply = None
            if result and result[0] == 200:
                def apply(due=result[1]["due_unix_ms"]):
                    if job_id in self.jobs:
                        self.jobs[job_id] = {"due": due}
                    self.counts["reschedule"] += 1
            elif result and result[0] not in (404, 409):
                self.fail("reschedule of %d answered %s %s" % (job_id, result[0], result[1]))
            self.end(job_id, result, apply)

    def check_after_restart(self):
        """Nothing acknowledged lost, no acknowledged delete undone."""
        client = Client(self.server)
        with self.lock:
            present = [i for i in self.jobs if i not in self.unsure and i not in self.busy]
            recent = self.deleted[self.checked_upto:]
            older = random.sample(self.deleted[:self.checked_upto], min(1000, self.checked_upto))
            self.checked_upto = len(self.deleted)
        for job_id in present:
            got = client.call("GET", "/v1/jobs/%d" % job_id)
            if got and got[0] != 200:
                with self.lock:
                    still = (job_id in self.jobs and job_id not in self.unsure and
                             job_id not in self.busy)
                if still:
                    self.fail("job %d, acknowledged, is missing after a restart (%s); its history: %s"
                              % (job_id, got[0], "; ".join(self.history.get(job_id, []))))
        for job_id in recent + older:
            got = client.call("GET", "/v1/jobs/%d" % job_id)
            if got and got[0] != 404:
                self.fail("job %d, whose delete was acknowledged, is back after a restart"
                          % job_id)
        # What was unsure is settled by asking.
        with self.lock:
            unsure, self.unsure = self.unsure, set()
        for job_id in unsure:
            got = client.call("GET", "/v1/jobs/%d" % job_id)
            with self.lock:
                if got and got[0] == 200:
                    self.jobs[job_id] = {"due": got[1]["due_unix_ms"]}
                elif got and got[0] == 404:
                    self.jobs.pop(job_id, None)
        with self.lock:
            self.counts["checked"] += len(present) + len(recent) + len(older)

    def run(self):
        threads = [threading.Thread(target=f, daemon=True) for f in
                   (self.producer, self.consumer, self.consumer, self.rescheduler)]
        for t in threads:
            t.start()
        start = time.time()
        end = start + self.args.minutes * 60
        next_kill = start + self.args.kill_every if self.args.kill_every else float("inf")
        next_line = start + 60
        rss = []  # (seconds, KiB)
        next_rss = start + 30
        while time.time() < end and not self.failures:
            time.sleep(0.2)
            now = time.time()
            if now >= next_rss:
                rss.append((now - start, self.server.rss_kib()))
                next_rss += 30
            if now >= next_kill:
                # Killed under load: operations under way then have unknown outcomes. New ones
                # wait until the restarted server has been checked.
                self.go.clear()
                self.server.kill()
                self.server.start()
                with self.lock:
                    self.counts["restart"] += 1
                self.check_after_restart()
                self.go.set()
                next_kill = time.time() + self.args.kill_every
            if now >= next_line:
                with self.lock:
                    print("%3d min  %s  pending %d  rss %d KiB" % (
                        (now - start) // 60, " ".join("%s %d" % kv for kv in self.counts.items()),
                        len(self.jobs), rss[-1][1] if rss else 0), flush=True)
                next_line += 60
        self.stop.set()
        for t in threads:
            t.join(timeout=15)
        if self.args.kill_every == 0 and rss:
            # RSS rises and falls as RocksDB fills its memtables and flushes them (minutes apart
            # at this rate), so peaks are compared with peaks: the highest sample of minutes 5
            # to 20 against the highest of the last 15 minutes.
            print("rss every 30 s (KiB): " + " ".join(str(k) for _, k in rss))
            early = [k for s, k in rss if 300 <= s < 1200]
            late = [k for s, k in rss if s >= rss[-1][0] - 900]
            if early and late and rss[-1][0] >= 1800:
                print("rss peak in minutes 5-20 %d KiB, in the last 15 minutes %d KiB: %+.1f %%" % (
                    max(early), max(late), 100.0 * (max(late) - max(early)) / max(early)))
                if max(late) > max(early) * 1.10:
                    self.fail("RSS peaks grew more than 10 %% after the first minutes")
        print("summary: " + " ".join("%s %d" % kv for kv in self.counts.items()))
        print("%d failures" % len(self.failures))
        return not self.failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("delayqd")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--kill-every", type=float, default=60, help="seconds; 0: never")
    parser.add_argument("--rate", type=float, default=200, help="puts per second, at most")
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="delayq-soak-")
    server = Server(args.delayqd, data)
    server.start()
    try:
        ok = Soak(server, args).run()
    finally:
        server.stop()
    print("data directory (logs in stderr): " + data)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""overload.py [DELAYQD] [--connections N] [--pipelined N] [--phases LIST] -- delayqd under
abuse, measured.

Starts its own delayqd (default build/release/apps/delayqd) on free loopback ports and a
scratch data directory, then, one phase at a time:

  idle      N beanstalkd connections opened and left idle, then each blocked in `reserve`, then
            N HTTP connections (to a second server of its own): RSS per connection and per
            waiting client (from /proc/PID/status, before and after).
  pipeline  one client writes N puts without reading a reply: the server's peak RSS over the
            phase, and whether it answered them all once the client read.
  slowloris N/10 connections on each listener sending a command or a request one byte a second.

During the last three phases a probe client (a process of its own) does put + delete round trips
on its own connection; its p50 / p99 are printed beside the same probe on an idle server. Loopback only;
every loop is bounded; the server is stopped by its PID at the end. --phases names the phases
to run, comma-separated (default idle,pipeline,slowloris). With a DELAYQD path ending in
"beanstalkd", that server (without a binlog) is measured instead, in the pipeline phase only: the
reference for the probe's figures on the same machine. Needs a file limit above
2N + 100 (ulimit -n).
"""
import multiprocessing
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

def probe_main(port, stop, out):
    """The probe's process: put + delete round trips 5 ms apart until told to stop."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    file = sock.makefile("rb")
    latencies = []
    while not stop.is_set() and len(latencies) < 100000:
        start = time.perf_counter()
        sock.sendall(b"put 0 0 60 5\r\nprobe\r\n")
        job = file.readline().split()[1]
        sock.sendall(b"delete " + job + b"\r\n")
        file.readline()
        latencies.append((time.perf_counter() - start) * 1e6)
        time.sleep(0.005)
    out.send(latencies)

class Probe:
    """put + delete round trips on a connection of its own, in a process of its own: a thread
    of this script would measure its wait for this script's GIL (the flood's loop holds it), not
    the server. Latencies in microseconds."""
    def __init__(self, port):
        context = multiprocessing.get_context("spawn")  # inherits none of this script's sockets
        self.stop = context.Event()
        self.results, sender = context.Pipe(duplex=False)
        self.process = context.Process(target=probe_main, args=(port, self.stop, sender),
                                       daemon=True)
    def start(self):
        self.stolen = stolen_ms()
        self.process.start()
    def finish(self):
        self.stop.set()
        lat = sorted(self.results.recv()) if self.results.poll(60) else []
        self.process.join(timeout=30)
        stolen = stolen_ms() - self.stolen
        if not lat:
            return "no round trip"
        return "p50 %.0f us, p99 %.0f us (%d round trips; %d ms of CPU stolen meanwhile)" % (
            lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))], len(lat), stolen)

def stolen_ms():
    """The CPU time, all CPUs, that this virtual machine's hypervisor gave to something else since
    boot: a probe's tail measured while it grows is the host's, not the server's."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) * 1000 // os.sysconf("SC_CLK_TCK")

def probe_for(port, seconds):
    probe = Probe(port)
    probe.start()
    time.sleep(seconds)
    return probe.finish()

def raise_file_limit(needed, name):
    """The soft limit on open files raised to the hard one; exits if that is below `needed`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < needed:
        sys.exit(f"{name}: the file limit ({hard}) is below {needed}")

def stop_process(process, timeout=30):
    """Ends a server started by a script: SIGTERM, then SIGKILL if it is not gone in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def wait_port(port, deadline):
    """Whether a server accepts on the loopback port before `deadline` (time.time())."""
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False

def open_many(port, n):
    socks = []
    for _ in range(n):
        socks.append(socket.create_connection(("127.0.0.1", port)))
    return socks

def start_delayqd(binary, db, n):
    """delayqd on free loopback ports, with room for the probe beside N connections on each
    listener (the default limit is 10,000). Its first two lines name the ports."""
    limit = str(max(10000, n + 10))
    return subprocess.Popen([binary, "-p", "0", "--http", "127.0.0.1:0", "-b", db, "--fsync",
                             "none", "--max-connections", limit, "--http-max-connections", limit],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

def idle_http(binary, n):
    """RSS per idle HTTP connection, on a server of its own: on the first one, the memory that
    the closed beanstalkd connections left free would be reused and the figure flattered."""
    data = tempfile.mkdtemp(prefix="delayq-overload-http-")
    server = start_delayqd(binary, data + "/db", n)
    try:
        server.stdout.readline()
        http_port = int(server.stdout.readline().split(b":")[-1])
        time.sleep(0.5)
        before = rss_kib(server.pid)
        idle = open_many(http_port, n)
        time.sleep(1)
        after = rss_kib(server.pid)
        print("idle HTTP connections: %.0f bytes of RSS each" % ((after - before) * 1024 / n))
        for s in idle:
            s.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        subprocess.run(["rm", "-rf", data])

def idle_phase(port, binary, pid, n):
    before = rss_kib(pid)
    idle = open_many(port, n)
    probe_for(port, 0.5)  # a round trip after the last: all accepted
    after = rss_kib(pid)
    print("idle beanstalkd connections: %.0f bytes of RSS each" % ((after - before) * 1024 / n))
    before = after
    for s in idle:
        s.sendall(b"watch empty\r\nignore default\r\nreserve\r\n")
    time.sleep(2)
    after = rss_kib(pid)
    print("the same, each now blocked in reserve: %.0f more bytes each" %
          ((after - before) * 1024 / n))
    print("probe, with them waiting:", probe_for(port, 5))
    # Closed before the HTTP ones open: 2N sockets at once would not fit a hard limit of 20,000
    # open files with N = 10,000.
    for s in idle:
        s.close()
    idle_http(binary, n)
    time.sleep(2)

def pipeline_phase(port, pid, pipelined):
    before = rss_kib(pid)
    flood = socket.create_connection(("127.0.0.1", port))
    peak = [before]
    done = threading.Event()
    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            time.sleep(0.05)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    probe = Probe(port)
    probe.start()
    command = b"put 0 3600 60 3\r\nabc\r\n"
    flood.setblocking(True)
    flood.settimeout(5)
    sent = 0
    chunk = command * 1000
    blocked_at = None
    try:
        while sent < pipelined:
            flood.sendall(chunk)
            sent += 1000
    except socket.timeout:
        blocked_at = sent
    flood.settimeout(60)
    replies = 0
    buffer = b""
    deadline = time.time() + 120
    while replies < sent and time.time() < deadline:
        if blocked_at is not None and replies >= blocked_at:
            break
        data_in = flood.recv(1 << 20)
        if not data_in:
            break
        buffer += data_in
        replies += buffer.count(b"\r\n")
        buffer = buffer[buffer.rfind(b"\r\n") + 2:] if b"\r\n" in buffer else buffer
    probe_result = probe.finish()
    done.set()
    watcher.join()
    print("pipelining client: %s puts written without reading%s; peak RSS +%.1f MiB; "
          "%d replies read back" % (
              sent, " (the server stopped reading: its send buffer was full)" if blocked_at
              is not None else "", (peak[0] - before) / 1024, replies))
    print("probe, while the flood is written and answered:", probe_result)
    flood.close()

def slowloris_phase(port, http_port, n):
    slow = open_many(port, n // 10) + open_many(http_port, n // 10)
    probe = Probe(port)
    probe.start()
    request = {True: b"stats-tube default\r\n", False: b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\n"}
    for second in range(10):
        for k, s in enumerate(slow):
            text = request[k < n // 10]
            try:
                s.send(text[second:second + 1])
            except OSError:
                pass
        time.sleep(1)
    print("probe, during a slowloris of %d connections on each listener:" % (n // 10),
          probe.finish())
    for s in slow:
        s.close()

def main():
    args = sys.argv[1:]
    binary = "build/release/apps/delayqd"
    n = 10000
    pipelined = 1000000
    phases = {"idle", "pipeline", "slowloris"}
    i = 0
    while i < len(args):
        if args[i] == "--connections":
            n = int(args[i + 1]); i += 2
        elif args[i] == "--pipelined":
            pipelined = int(args[i + 1]); i += 2
        elif args[i] == "--phases":
            phases = set(args[i + 1].split(",")); i += 2
        else:
            binary = args[i]; i += 1
    raise_file_limit(n + 100 if phases & {"idle", "slowloris"} else 100, "overload")
    data = tempfile.mkdtemp(prefix="delayq-overload-")
    beanstalkd = os.path.basename(binary) == "beanstalkd"
    if beanstalkd:
        # The reference: beanstalkd without a binlog (as delayqd runs here, without fsyncs), on a
        # port picked free; it has no HTTP listener, so only the pipeline phase runs.
        phases &= {"pipeline"}
        port = free_port()
        server = subprocess.Popen([binary, "-l", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        server = start_delayqd(binary, data + "/db", n)
    try:
        if beanstalkd:
            if not wait_port(port, time.time() + 10):
                sys.exit(f"overload: {binary} did not listen on port {port}")
            http_port = None
            pid = server.pid
            print(f"beanstalkd {pid}: port {port}")
        else:
            port = int(server.stdout.readline().split(b":")[-1])
            http_port = int(server.stdout.readline().split(b":")[-1])
            pid = server.pid
            print(f"delayqd {pid}: beanstalkd port {port}, HTTP {http_port}; {n} connections")
        print("probe, idle server:", probe_for(port, 5))

        if "idle" in phases:
            idle_phase(port, binary, pid, n)
        if "pipeline" in phases:
            pipeline_phase(port, pid, pipelined)
        if "slowloris" in phases:
            slowloris_phase(port, http_port, n)
        print("server RSS at the end: %.1f MiB" % (rss_kib(pid) / 1024))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        subprocess.run(["rm", "-rf", data])

if __name__ == "__main__":
    main()

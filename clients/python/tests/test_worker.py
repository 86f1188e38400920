"""The worker loop against the real server: a handler that returns deletes its job, one that
raises releases it with a growing delay, a slow one keeps its job by touching it; stop() and
KeyboardInterrupt end it within bounds."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

import delayq
from conftest import gone, wait_for, wait_for_job
from server import Server

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def test_a_handler_that_returns_deletes_its_job(client: delayq.Client, tube: str) -> None:
    ids = [client.put(tube, f"job {i}").id for i in range(6)]
    seen: list[str] = []
    lock = threading.Lock()

    def handler(job: delayq.Job) -> None:
        assert job.state == "reserved"
        with lock:
            seen.append(job.text)

    worker = client.worker(tube, handler, concurrency=3, wait=timedelta(milliseconds=500))
    worker.start()
    try:
        wait_for(lambda: all(gone(client, i) for i in ids), what="every job deleted")
        assert sorted(seen) == sorted(f"job {i}" for i in range(6))
        assert worker.handled == 6 and worker.failed == 0
    finally:
        worker.stop()
        assert worker.join(timedelta(seconds=5))


def test_a_handler_that_raises_releases_its_job_with_a_growing_delay(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "fails")
    attempts: list[int] = []

    def handler(reserved: delayq.Job) -> None:
        attempts.append(reserved.counters.reserves)
        raise RuntimeError("the mail server is down")

    worker = client.worker(tube, handler, wait=timedelta(milliseconds=500),
                           backoff_min=timedelta(seconds=2), backoff_max=timedelta(seconds=3))
    worker.start()
    try:
        first = wait_for_job(client, job.id, lambda j: j.counters.releases == 1,
                             "the first release")
        assert first.state == "delayed"
        assert timedelta(seconds=1) <= first.delay <= timedelta(seconds=2)  # half to all of 2 s
        client.kick_job(job.id)  # ready again now rather than after the delay
        second = wait_for_job(client, job.id, lambda j: j.counters.releases == 2,
                              "the second release")
        # 2 s x 2 = 4 s, capped at backoff_max 3 s: drawn between 1.5 s and 3 s.
        assert second.state == "delayed"
        assert timedelta(seconds=1.5) <= second.delay <= timedelta(seconds=3)
        assert attempts == [1, 2] and worker.failed == 2 and worker.handled == 0
    finally:
        worker.stop()
        assert worker.join(timedelta(seconds=5))
    assert client.get_job(job.id).state == "delayed"  # released, never deleted


def test_retry_delays_follow_the_backoff(client: delayq.Client) -> None:
    worker = client.worker("unused", lambda job: None, backoff_min=timedelta(seconds=1),
                           backoff_max=timedelta(minutes=1), backoff_factor=2)
    for attempt, nominal in [(1, 1), (2, 2), (3, 4), (7, 60), (1000, 60)]:
        delay = worker.retry_delay(attempt).total_seconds()
        assert nominal / 2 <= delay <= nominal


def test_a_slow_handler_keeps_its_job_by_touching_it(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "slow", ttr=timedelta(seconds=1))
    during: list[delayq.Job] = []

    def handler(reserved: delayq.Job) -> None:
        time.sleep(2.6)  # more than twice the TTR
        during.append(client.get_job(reserved.id))

    worker = client.worker(tube, handler, concurrency=2, wait=timedelta(milliseconds=500))
    worker.start()
    try:
        wait_for(lambda: gone(client, job.id), timeout_s=15, what="the slow job's delete")
        assert len(during) == 1, "handled once: its TTR never lapsed for the other thread"
        assert during[0].state == "reserved" and during[0].counters.timeouts == 0
        assert during[0].counters.reserves == 1
        assert worker.touched >= 3 and worker.handled == 1
    finally:
        worker.stop()
        assert worker.join(timedelta(seconds=5))


def test_stop_from_the_handler_ends_run(client: delayq.Client, tube: str) -> None:
    client.put(tube, "a")
    holder: list[delayq.Worker] = []

    def handler(job: delayq.Job) -> None:
        holder[0].stop()

    worker = client.worker(tube, handler, concurrency=2, wait=timedelta(seconds=1))
    holder.append(worker)
    runner = threading.Thread(target=worker.run)
    started = time.monotonic()
    runner.start()
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - started < 10
    assert worker.stopping and worker.handled == 1


def test_stop_ends_waiting_reserves_at_once_and_takes_no_job(client: delayq.Client, tube: str) -> None:
    worker = client.worker(tube, lambda job: None, concurrency=3, wait=timedelta(seconds=30))
    worker.start()
    wait_for(lambda: client.stats().waiting >= 3, what="three reserves waiting")
    started = time.monotonic()
    worker.stop()
    assert worker.join(timedelta(seconds=5)) and time.monotonic() - started < 3
    wait_for(lambda: client.stats().waiting == 0, what="no reserve waiting")
    job = client.put(tube, "after the stop")
    assert client.get_job(job.id).state == "ready" and worker.handled == 0


def test_stop_from_another_thread_waits_no_longer_than_the_drain_timeout(
        client: delayq.Client, tube: str) -> None:
    client.put(tube, "slow")
    began = threading.Event()

    def handler(job: delayq.Job) -> None:
        began.set()
        time.sleep(6)

    worker = client.worker(tube, handler, wait=timedelta(seconds=1),
                           drain_timeout=timedelta(seconds=1))
    runner = threading.Thread(target=worker.run)
    runner.start()
    assert began.wait(10)
    started = time.monotonic()
    worker.stop()
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - started < 4


def test_a_job_reserved_as_the_worker_stops_is_finished_and_its_handler_can_call_the_server(
        client: delayq.Client, tube: str) -> None:
    # The stop half-closes the connection of a reserve under way; when the reserve's answer (a
    # job) was on its way already, the handler's own requests go on a new connection.
    for round_ in range(5):
        own = f"{tube}-{round_}"  # a job left ready by one round is not the next one's
        job = client.put(own, "x", delay=timedelta(hours=1))
        done: list[str] = []

        def handler(j: delayq.Job, done: list[str] = done) -> None:
            done.append(client.put(own + "-side", "side effect").state)

        worker = client.worker(own, handler, wait=timedelta(seconds=5))
        worker.start()
        wait_for(lambda: client.stats().waiting >= 1, what="a reserve waiting")
        client.kick_job(job.id)
        worker.stop()
        assert worker.join(timedelta(seconds=10))
        # A job the cut reserve had taken is released once the server has seen the connection
        # end, which may come after this client's next request (in Redis mode, a call later).
        def settled(job_id: int = job.id) -> str | None:
            try:
                state = client.get_job(job_id).state
            except delayq.NotFound:
                return "gone"
            return None if state == "reserved" else state

        state = wait_for(settled, what="the job out of the cut reserve")
        # Either the stop came first (no job taken: ready) or the job was handled in full.
        assert (state, done) in (("ready", []), ("gone", ["ready"])), (state, done)


def test_an_error_no_retry_cures_stops_the_worker_and_run_raises_it(client: delayq.Client) -> None:
    worker = client.worker("-bad", lambda job: None, wait=timedelta(seconds=1))
    started = time.monotonic()
    with pytest.raises(delayq.BadRequest):
        worker.run()
    assert time.monotonic() - started < 5 and isinstance(worker.error, delayq.BadRequest)


def test_a_worker_whose_server_is_down_retries_and_still_stops(tube: str) -> None:
    with Server() as own:
        url = own.url
    down = delayq.Client(url, timeout=2)
    worker = down.worker(tube, lambda job: None, wait=timedelta(seconds=1))
    worker.start()
    time.sleep(0.3)
    worker.stop()
    assert worker.join(timedelta(seconds=5))
    assert worker.handled == 0


SCRIPT = """
import sys
from datetime import timedelta
import delayq

client = delayq.Client(sys.argv[1])

def handler(job):
    print("started", job.id, flush=True)
    import time
    time.sleep(1.0)
    print("finished", job.id, flush=True)

client.work(sys.argv[2], handler, concurrency=2, wait=timedelta(seconds=1))
print("work returned", flush=True)
"""


def test_ctrl_c_finishes_the_job_in_hand_and_returns(server: Server, client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), PYTHONDONTWRITEBYTECODE="1")
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SCRIPT), server.url, tube],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 15)
        assert ready, "the handler did not start within 15 s"
        line = child.stdout.readline()
        assert line.strip() == f"started {job.id}", child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGINT)  # our own child, by its PID
        out, err = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(5)
    assert child.returncode == 0, err
    assert out.splitlines() == [f"finished {job.id}", "work returned"]
    assert gone(client, job.id)


def test_worker_options_are_checked(client: delayq.Client) -> None:
    with pytest.raises(ValueError):
        client.worker("t", lambda job: None, concurrency=0)
    with pytest.raises(ValueError):
        client.worker("t", lambda job: None, wait=timedelta(0))
    with pytest.raises(ValueError):
        client.worker("t", lambda job: None, backoff_factor=0.5)


def test_an_interrupt_while_the_threads_start_stops_the_worker_and_run_returns(
        client: delayq.Client, tube: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C can come while run() is still starting its threads (the first already working)."""
    real_start = threading.Thread.start
    started: list[str] = []

    def start(thread: threading.Thread) -> None:
        if started:
            raise KeyboardInterrupt  # as a SIGINT would, in the main thread, at the second start
        started.append(thread.name)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    worker = client.worker(tube, lambda job: None, concurrency=2, wait=timedelta(seconds=1),
                           drain_timeout=timedelta(seconds=1))
    worker.run()  # returns normally, as after any Ctrl-C
    assert started == ["delayq-worker-0"]
    assert worker.stopping
    assert worker.join(timedelta(seconds=5)), "the started thread did not end"

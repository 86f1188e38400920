"""Reserving over HTTP: reserve and its long-poll, release, bury, touch, kick, and the jobs()
generator."""

from __future__ import annotations

import signal
import threading
import time
from datetime import timedelta

import pytest

import delayq
from server import Server


def test_reserve_hands_out_the_most_urgent_job_of_its_tubes(client: delayq.Client, tube: str) -> None:
    other = tube + "-b"
    client.put(tube, "late", priority=100)
    urgent = client.put(other, "urgent", priority=1)
    job = client.reserve([tube, other])
    assert job is not None and job.id == urgent.id and job.text == "urgent"
    assert job.state == "reserved" and job.counters.reserves == 1
    assert job.reserved_until is not None and job.reserved_until > job.created


def test_reserve_answers_none_when_no_job_is_ready(client: delayq.Client, tube: str) -> None:
    client.put(tube, "later", delay="1h")
    start = time.monotonic()
    assert client.reserve(tube) is None
    assert client.reserve(tube, timeout=timedelta(milliseconds=300)) is None
    assert time.monotonic() - start >= 0.3


def test_a_long_poll_answers_when_a_delayed_job_falls_due(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "soon", delay=timedelta(seconds=1))
    start = time.monotonic()
    got = client.reserve(tube, timeout="20s")
    took = time.monotonic() - start
    assert got is not None and got.id == job.id
    assert 0.5 < took < 10


def test_release_makes_a_job_ready_or_delayed_with_a_new_priority(client: delayq.Client, tube: str) -> None:
    client.put(tube, "x")
    job = client.reserve(tube)
    assert job is not None
    released = client.release(job.id, delay=timedelta(seconds=30), priority=5)
    assert released.state == "delayed" and released.priority == 5
    assert released.delay == timedelta(seconds=30) and released.counters.releases == 1
    with pytest.raises(delayq.Conflict):
        client.release(job.id)
    client.kick_job(job.id)
    again = client.reserve(tube)
    assert again is not None and client.release(again.id).state == "ready"
    with pytest.raises(delayq.NotFound):
        client.release(10**12)


def test_bury_and_kick(client: delayq.Client, tube: str) -> None:
    first = client.put(tube, "a")
    second = client.put(tube, "b")
    for _ in range(2):
        job = client.reserve(tube)
        assert job is not None
        buried = client.bury(job.id, priority=2000)
        assert buried.state == "buried" and buried.priority == 2000
        assert buried.counters.buries == 1
    with pytest.raises(delayq.Conflict):
        client.bury(first.id)  # not reserved
    assert client.tube_stats(tube).buried == 2
    kicked = client.kick_job(second.id)
    assert kicked.state == "ready" and kicked.counters.kicks == 1
    with pytest.raises(delayq.Conflict):
        client.kick_job(second.id)  # ready already
    assert client.kick(tube, bound=10) == 1
    assert client.get_job(first.id).state == "ready"
    client.put(tube, "c", delay="1h")
    assert client.kick(tube) == 1  # no buried job left: the delayed one
    assert client.tube_stats(tube).ready == 3
    assert client.kick(tube + "-none", bound=5) == 0


def test_touch_restarts_the_ttr(client: delayq.Client, tube: str) -> None:
    client.put(tube, "x", ttr="10s")
    job = client.reserve(tube)
    assert job is not None and job.reserved_until is not None
    time.sleep(0.05)
    touched = client.touch(job.id)
    assert touched.reserved_until is not None and touched.reserved_until > job.reserved_until
    client.delete_job(job.id)
    with pytest.raises(delayq.NotFound):
        client.touch(job.id)
    ready = client.put(tube, "y")
    with pytest.raises(delayq.Conflict):
        client.touch(ready.id)


def test_a_lapsed_ttr_makes_the_job_ready_again(client: delayq.Client, tube: str) -> None:
    client.put(tube, "x", ttr=timedelta(seconds=1))
    job = client.reserve(tube)
    assert job is not None
    again = client.reserve(tube, timeout="5s")
    assert again is not None and again.id == job.id
    assert again.counters.timeouts == 1 and again.counters.reserves == 2


def test_jobs_yields_until_empty_in_priority_order(client: delayq.Client, tube: str) -> None:
    ids = [client.put(tube, str(priority), priority=priority).id for priority in (30, 10, 20)]
    seen = []
    for job in client.jobs(tube, wait=timedelta(milliseconds=200), until_empty=True):
        seen.append(job.text)
        client.delete_job(job.id)
    assert seen == ["10", "20", "30"]
    for job_id in ids:
        with pytest.raises(delayq.NotFound):
            client.get_job(job_id)


def test_jobs_ends_when_stop_is_set(client: delayq.Client, tube: str) -> None:
    stop = threading.Event()
    client.put(tube, "a")
    client.put(tube, "b")
    seen = []
    for job in client.jobs(tube, wait=timedelta(milliseconds=200), stop=stop):
        seen.append(job.text)
        client.delete_job(job.id)
        stop.set()
    assert seen == ["a"]
    assert client.tube_stats(tube).ready == 1


def test_a_reserve_waiting_when_the_server_stops_raises_stopping(tube: str) -> None:
    with Server() as own, delayq.Client(own.url, timeout=5) as c:
        outcome: list[BaseException | object] = []

        def poll() -> None:
            try:
                outcome.append(c.reserve(tube, timeout="30s"))
            except BaseException as error:  # noqa: B036 - the outcome under test
                outcome.append(error)

        waiter = threading.Thread(target=poll)
        waiter.start()
        with delayq.Client(own.url) as watcher:
            deadline = time.monotonic() + 10
            while watcher.stats().waiting == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
        own.signal(signal.SIGTERM)
        waiter.join(20)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], delayq.Stopping), outcome
        assert outcome[0].retry_after == 1 and outcome[0].status == 503

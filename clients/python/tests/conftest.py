"""Fixtures: one real delayqd for the session (server.py), a Client of it per test, a tube
name of its own per test, and helpers for bounded waits and Redis-mode skips."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package, uninstalled

import delayq  # noqa: E402
from server import Server, redis_seeds  # noqa: E402

T = TypeVar("T")

REDIS_MODE = redis_seeds() is not None


def local_only(reason: str) -> pytest.MarkDecorator:
    """Skips a test in Redis mode, for something docs/redis-mode.md says it cannot do."""
    return pytest.mark.skipif(REDIS_MODE, reason=f"Redis mode: {reason} (docs/redis-mode.md)")


redis_only = pytest.mark.skipif(
    not REDIS_MODE, reason="Redis mode only: checks its 501 for a route it does not serve")


def wait_for(check: Callable[[], T], timeout_s: float = 10.0, what: str = "condition") -> T:
    """Polls `check` until it answers something true, at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s} s (last: {value!r})")
        time.sleep(0.05)


def wait_for_job(client: delayq.Client, job_id: int, check: Callable[[delayq.Job], bool],
                 what: str, timeout_s: float = 10.0) -> delayq.Job:
    """Polls the job until `check` holds for it, at most `timeout_s`; answers it."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get_job(job_id)
        if check(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout_s} s (last: {job!r})")
        time.sleep(0.05)


def gone(client: delayq.Client, job_id: int) -> bool:
    """True once the job no longer exists."""
    try:
        client.get_job(job_id)
    except delayq.NotFound:
        return True
    return False


def deleted(client: delayq.Client, job_id: int) -> bool:
    """Deletes the job; False while it is reserved by someone else (409), to be tried again."""
    try:
        client.delete_job(job_id)
    except delayq.Conflict:
        return False
    return True


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    with Server() as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[delayq.Client]:
    with delayq.Client(server.url, timeout=15) as c:
        yield c


@pytest.fixture
def tube() -> str:
    """A tube no other test uses."""
    return f"t-{uuid.uuid4().hex[:12]}"

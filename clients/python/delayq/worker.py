"""worker.py — Worker: runs a handler on reserved jobs, in threads, and finishes each job.

    loop thread (x concurrency)                 keeper thread (one)
    ───────────────────────────                 ───────────────────
    reserve(tubes, timeout=wait) ── None ─┐     sleeps until the earliest lease's touch time,
      │ job                               │     at most 0.25 s; touches each job whose handler
      ▼                                   │     has run half its TTR since the reserve or the
    lease it (keeper touches it) ◀────────┘     last touch. A touch that finds the job gone,
    handler(job)                                not reserved, or reserved again by someone else
      ├─ returned ─▶ delete_job                 (its `reserves` grew) marks the lease lost:
      └─ raised ───▶ release(delay=backoff)     the job is then left alone at the end.

Backoff: after the handler failed on the job's n-th reservation (n = counters.reserves), the
job is released with a delay drawn between half and all of
min(backoff_max, backoff_min * backoff_factor ** (n - 1)), the webhooks' rule, so that jobs
failing together do not all come back at once. A tube's max_attempts (set_max_attempts) turns
the release of a job's last allowed attempt into a bury, on the server.

Tracing: with OpenTelemetry installed, each handler runs in a span continuing the job's trace
(tracing.py).

Stopping: stop() (from any thread, a handler included) ends the reserves waiting (it
half-closes their connections: the server then ends the long-poll and takes no job for it) and
lets each thread finish the job in hand; KeyboardInterrupt in run() calls stop(). Nothing
waits without a bound: run() then waits at most wait + drain_timeout for handlers to finish,
and returns; a handler still running then is left to its daemon thread, and its job comes back
when its TTR lapses; the same bound holds after a stop() from another thread. Errors reaching
the server are logged (logger "delayq.worker") and retried after a pause growing from 1 s to
30 s, if a later try may succeed; one no retry cures (a bad tube name, a wrong token) stops the
worker, and run() raises it.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Callable, Sequence

from .errors import (Conflict, DelayqError, Internal, NotFound, ServiceUnavailable,
                     TransportError)
from .models import Job
from .tracing import processing

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("delayq.worker")

_KEEPER_TICK_S = 0.25


def _retryable(error: DelayqError) -> bool:
    """Errors a later try may not meet: no answer, a 500, a 503 (stopping, starting, ...), a
    proxy's 502 or 504, a 429."""
    return isinstance(error, (TransportError, Internal, ServiceUnavailable)) or \
        error.status in (429, 502, 503, 504)


@dataclass(slots=True)
class _Lease:
    """A job whose handler runs, and when the keeper touches it next (monotonic seconds)."""

    job: Job
    next_touch: float
    lost: bool = False


class Worker:
    """Runs `handler(job)` on the jobs of `tubes` in `concurrency` threads.

    concurrency     handler threads, each reserving only when it is free. Default 1
    wait            how long each reserve long-polls (at most 1 h); stop() takes effect within
                    it. Default 5 s
    backoff_min, backoff_max, backoff_factor
                    the release delay after a failure (see the module's comment). Defaults
                    1 s, 10 min, 2
    drain_timeout   after stop(), how long run() waits for handlers beyond `wait`. Default 30 s
    """

    def __init__(
        self,
        client: Client,
        tubes: str | Sequence[str],
        handler: Callable[[Job], object],
        *,
        concurrency: int = 1,
        wait: timedelta = timedelta(seconds=5),
        backoff_min: timedelta = timedelta(seconds=1),
        backoff_max: timedelta = timedelta(minutes=10),
        backoff_factor: float = 2.0,
        drain_timeout: timedelta = timedelta(seconds=30),
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        for name, value in (("wait", wait), ("backoff_min", backoff_min),
                            ("backoff_max", backoff_max), ("drain_timeout", drain_timeout)):
            if not isinstance(value, timedelta):
                raise TypeError(f"{name}: a timedelta, such as timedelta(seconds=5), "
                                f"not {value!r}")
        if not timedelta(0) < wait <= timedelta(hours=1):
            raise ValueError("wait must be more than 0 and at most 1 hour")
        if backoff_min < timedelta(0) or backoff_max < backoff_min or backoff_factor < 1:
            raise ValueError("backoff: 0 <= backoff_min <= backoff_max, backoff_factor >= 1")
        self._client = client
        self._tubes = [tubes] if isinstance(tubes, str) else list(tubes)
        self._handler = handler
        self._concurrency = concurrency
        self._wait = wait
        self._backoff = (backoff_min.total_seconds(), backoff_max.total_seconds(), backoff_factor)
        self._drain = drain_timeout
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._leases: dict[int, _Lease] = {}
        self._loops_running = 0
        self._threads: list[threading.Thread] = []
        self._polling: set[threading.Thread] = set()
        self._fatal: DelayqError | None = None
        self._handled = 0
        self._failed = 0
        self._touched = 0

    # -- control -------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the threads and returns; see run() for a blocking start."""
        with self._cond:
            if self._threads:
                raise RuntimeError("this worker has been started already")
            self._loops_running = self._concurrency
            self._threads = [threading.Thread(target=self._loop, name=f"delayq-worker-{i}",
                                              daemon=True) for i in range(self._concurrency)]
            self._threads.append(threading.Thread(target=self._keep, name="delayq-keeper",
                                                  daemon=True))
        try:
            for thread in self._threads:
                thread.start()
        except KeyboardInterrupt:
            # Threads not started never will be, and join() does not wait for them. The keeper
            # starts last: while it has not, no loop is waited for.
            with self._cond:
                self._threads = [t for t in self._threads if t.ident is not None]
            raise

    def run(self) -> None:
        """Starts and blocks until stop() has taken effect, or until KeyboardInterrupt, after
        which it stops, waits at most wait + drain_timeout for the handlers under way, and
        returns normally (a second KeyboardInterrupt is not caught)."""
        try:
            self.start()  # a KeyboardInterrupt may come while it starts the threads
            while not self.join(timedelta(seconds=0.2)):
                if self._stop.is_set():  # stop() from another thread: the same bound
                    self._drained()
                    break
        except KeyboardInterrupt:
            log.info("interrupted: finishing the jobs under way")
            self.stop()
            self._drained()
        if self._fatal is not None:
            raise self._fatal

    def _drained(self) -> None:
        if not self.join(self._wait + self._drain):
            log.warning("handlers still running after the drain timeout; their jobs come "
                        "back when their TTR lapses")

    def stop(self) -> None:
        """Asks the worker to stop: no new reserve, the reserves waiting end, the jobs in hand
        are finished. Returns at once; join() waits."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
            # The server ends a long-poll whose client half-closes, taking no job for it. Under
            # the lock a loop thread takes to leave _polling: only a reserve still under way is
            # cut, never a request the thread's handler has begun since (its connection, cut,
            # is replaced at the thread's next request).
            for thread in self._polling:
                self._client._http.shutdown_sending(thread)

    def join(self, timeout: timedelta | None = None) -> bool:
        """Waits for every thread to end, at most `timeout` (None: without bound); True if
        they all have."""
        deadline = None if timeout is None else time.monotonic() + timeout.total_seconds()
        for thread in list(self._threads):
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            thread.join(left)
        return bool(self._threads) and not any(t.is_alive() for t in self._threads)

    @property
    def error(self) -> DelayqError | None:
        """The error no retry cures that stopped the worker (run() raises it), or None."""
        return self._fatal

    @property
    def stopping(self) -> bool:
        """True once stop() was called."""
        return self._stop.is_set()

    @property
    def handled(self) -> int:
        """Jobs whose handler returned."""
        return self._handled

    @property
    def failed(self) -> int:
        """Jobs whose handler raised."""
        return self._failed

    @property
    def touched(self) -> int:
        """Touches sent for slow handlers."""
        return self._touched

    def retry_delay(self, attempt: int) -> timedelta:
        """The release delay after a failure of the job's `attempt`-th reservation."""
        low, high, factor = self._backoff
        nominal = low
        for _ in range(max(attempt - 1, 0)):
            if nominal >= high:
                break
            nominal *= factor
        nominal = min(nominal, high)
        return timedelta(seconds=random.uniform(nominal / 2, nominal))

    # -- loop threads --------------------------------------------------------------------

    def _loop(self) -> None:
        failures = 0
        try:
            me = threading.current_thread()
            while True:
                with self._cond:
                    if self._stop.is_set():
                        break
                    self._polling.add(me)
                try:
                    job = self._client.reserve(self._tubes, timeout=self._wait)
                except DelayqError as error:
                    if self._stop.is_set():
                        break  # the reserve stop() ended
                    if not _retryable(error):
                        # A bad tube name, a wrong token: no retry cures it. run() raises it.
                        log.error("reserve failed (%s); stopping", error)
                        self._fatal = error
                        self.stop()
                        break
                    failures += 1
                    pause = min(30.0, 0.5 * 2 ** min(failures, 6))
                    log.warning("reserve failed (%s); again in %.1f s", error, pause)
                    self._stop.wait(pause)
                    continue
                finally:
                    with self._cond:
                        self._polling.discard(me)
                failures = 0
                if job is not None:
                    self._handle(job)
        finally:
            with self._cond:
                self._loops_running -= 1
                self._cond.notify_all()

    def _handle(self, job: Job) -> None:
        lease = _Lease(job, time.monotonic() + job.ttr.total_seconds() / 2)
        with self._cond:
            self._leases[job.id] = lease
            self._cond.notify_all()
        succeeded = False
        try:
            with processing(job):
                self._handler(job)
            succeeded = True
        except Exception:
            log.exception("job %d (tube %s): the handler raised", job.id, job.tube)
        finally:
            with self._cond:
                self._leases.pop(job.id, None)
                if succeeded:
                    self._handled += 1
                else:
                    self._failed += 1
        if lease.lost:
            log.warning("job %d: its reservation was lost while the handler ran; left alone",
                        job.id)
            return
        try:
            if succeeded:
                self._client.delete_job(job.id)
            else:
                self._client.release(job.id, delay=self.retry_delay(job.counters.reserves))
        except NotFound:
            pass  # the handler finished the job itself, or someone deleted it
        except DelayqError as error:
            log.warning("job %d: could not %s it: %s", job.id,
                        "delete" if succeeded else "release", error)

    # -- keeper thread -------------------------------------------------------------------

    def _keep(self) -> None:
        while True:
            with self._cond:
                if self._loops_running == 0 and not self._leases:
                    return
                now = time.monotonic()
                due = [lease for lease in self._leases.values() if lease.next_touch <= now]
                if not due:
                    soonest = min((lease.next_touch for lease in self._leases.values()),
                                  default=math.inf)
                    self._cond.wait(min(max(soonest - now, 0.01), _KEEPER_TICK_S))
                    continue
            for lease in due:
                self._touch(lease)

    def _touch(self, lease: _Lease) -> None:
        half_ttr = lease.job.ttr.total_seconds() / 2
        try:
            touched = self._client.touch(lease.job.id)
        except (NotFound, Conflict) as error:
            lease.lost, lease.next_touch = True, math.inf
            log.warning("job %d: touch failed, its reservation is lost: %s", lease.job.id, error)
            return
        except DelayqError as error:
            lease.next_touch = time.monotonic() + min(1.0, half_ttr / 2)
            log.warning("job %d: touch failed (%s); trying again", lease.job.id, error)
            return
        if touched.counters.reserves != lease.job.counters.reserves:
            # Its TTR lapsed before this touch and another client reserved it since.
            lease.lost, lease.next_touch = True, math.inf
            log.warning("job %d: reserved again by another client; left to it", lease.job.id)
            return
        lease.next_touch = time.monotonic() + half_ttr
        with self._cond:
            self._touched += 1

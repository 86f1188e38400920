"""client.py — delayq.Client: one method per route of the HTTP API (docs/http-api.md).

A Client is cheap to make and safe to share between threads: each thread talks over a
kept-alive connection of its own (transport.py). Methods answer the dataclasses of models.py and
raise the exceptions of errors.py, one per error code the server documents. Durations are
timedeltas or the server's strings ("10m"); times are aware datetimes (times.py). A field left
as None is not sent, so the server's default applies; set_flow() alone differs: there None turns
a setting off, and KEEP, its default, leaves one as it is.

    jobs        put, put_many, get_job, reschedule, delete_job, get_key, reschedule_key, delete_key
    groups      list_group, cancel_group
    reserving   reserve, release, bury, touch, kick_job; jobs() and worker()/work() on top
    tubes       list_tubes, tube_stats, list_jobs, due_counts, set_max_attempts, set_flow,
                kick, pause_tube
    webhooks    set_webhook, get_webhook, remove_webhook
    schedules   set_schedule, get_schedule, list_schedules, schedules, remove_schedule,
                pause_schedule, resume_schedule, trigger_schedule, backfill_schedule,
                next_runs, preview_schedule
    server      stats, health, ready, metrics, backup; request() for anything else
"""

from __future__ import annotations

import base64
import enum
import os
import threading
from datetime import datetime, timedelta
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterable, Iterator, Mapping, Sequence

from .errors import DelayqError, UnexpectedResponse, error_for
from .models import (
    Backup,
    DueCounts,
    FlowSettings,
    Job,
    JobList,
    Schedule,
    SchedulePage,
    Stats,
    TubeStats,
    Webhook,
    read_int,
    runs_from_json,
)
from .times import Duration, encode_duration, parse_duration, unix_ms
from .tracing import caller_trace_headers
from .transport import Transport, segment
from .worker import Worker

Body = str | bytes
"""A job body: text (sent as `body`) or bytes (sent as `body_base64`)."""


class Keep(enum.Enum):
    """The type of KEEP."""

    KEEP = "KEEP"

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = Keep.KEEP
"""set_flow()'s default for each setting: leave it as it is. None cannot say this, since None
turns a setting off."""


def _body(fields: dict[str, Any], body: Body | None) -> None:
    if body is None:
        return
    if isinstance(body, str):
        fields["body"] = body
    elif isinstance(body, (bytes, bytearray, memoryview)):
        fields["body_base64"] = base64.b64encode(bytes(body)).decode("ascii")
    else:
        raise TypeError(f"body: str or bytes, not {type(body).__name__}")


@dataclass(frozen=True, slots=True)
class PutJob:
    """One job of put_many(): its tube and put()'s arguments, with put()'s defaults."""

    tube: str
    body: Body = ""
    delay: Duration | None = None
    at: datetime | None = None
    priority: int | None = None
    ttr: Duration | None = None
    key: str | None = None
    group: str | None = None
    replace: bool = False
    debounce: Duration | None = None
    max_wait: Duration | None = None
    url: str | None = None
    content_type: str | None = None


def _put_fields(job: PutJob) -> dict[str, Any]:
    """The fields of a put's JSON (the tube is not among them: it goes in the path)."""
    fields: dict[str, Any] = {}
    if job.body is None:  # put's default is "": a None is a mistake, not an empty job
        raise TypeError("body: str or bytes, not NoneType")
    _body(fields, job.body)
    _duration(fields, "delay", job.delay)
    _time(fields, "at", job.at)
    _integer(fields, "priority", job.priority)
    _duration(fields, "ttr", job.ttr)
    _duration(fields, "debounce", job.debounce)
    _duration(fields, "max_wait", job.max_wait)
    texts = (("key", job.key), ("group", job.group), ("url", job.url),
             ("content_type", job.content_type))
    fields.update((name, value) for name, value in texts if value is not None)
    if not isinstance(job.replace, bool):
        raise TypeError(f"replace: a bool, not {type(job.replace).__name__}")
    if job.replace:
        fields["replace"] = True
    return fields


def _trace(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """A put's trace headers: those given, else the current span's (tracing.py)."""
    if traceparent is None and tracestate is None:
        return caller_trace_headers()
    given = (("traceparent", traceparent), ("tracestate", tracestate))
    return {name: value for name, value in given if value is not None}


def _duration(fields: dict[str, Any], name: str, value: Duration | None) -> None:
    if value is not None:
        fields[name] = encode_duration(value, name)


def _time(fields: dict[str, Any], name: str, value: datetime | None) -> None:
    if value is not None:
        fields[name] = unix_ms(value, name)


def _job_id(job_id: int) -> int:
    # int() would take 1.9 or True for job 1, and act on a job the caller did not name.
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise TypeError(f"job_id: an int, not {type(job_id).__name__}")
    return job_id


def _integer(fields: dict[str, Any], name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: an int, not {type(value).__name__}")
    fields[name] = value


def _weights(weights: Mapping[str, int | None]) -> dict[str, int | None]:
    if weights is None:
        raise TypeError("group_weights: None cannot reset every group; name each: {group: None}")
    if not isinstance(weights, Mapping):
        raise TypeError(f"group_weights: a mapping group -> weight, not {type(weights).__name__}")
    out: dict[str, int | None] = {}
    for group, weight in weights.items():
        if not isinstance(group, str):
            raise TypeError(f"group_weights: a group name is a str, not {type(group).__name__}")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int)):
            raise TypeError(f"group_weights[{group!r}]: an int or None, not {weight!r}")
        out[group] = weight
    return out


def _wait_seconds(timeout: Duration | None) -> float:
    """How long a long-poll may wait, for the read timeout; 0 for one the server will
    refuse."""
    if timeout is None:
        return 0.0
    if isinstance(timeout, timedelta):
        return max(timeout.total_seconds(), 0.0)
    try:
        return parse_duration(timeout).total_seconds()
    except ValueError:
        return 0.0


class Client:
    """A client of one delayqd's HTTP API.

    base_url   the server's HTTP address, http:// or https://, optionally with a path prefix
               (behind a proxy); default delayqd's default, http://127.0.0.1:8080
    token      a bearer token of the server's --http-token-file; default none
    timeout    seconds (or a timedelta) to connect and to wait for each answer; a long-poll
               reserve adds its own wait. Default 30 s
    ca_file    PEM file of CAs to trust for https://, beside the system's; default none
    headers    more headers for every request (a proxy's); default none
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        timeout: float | timedelta = 30.0,
        *,
        ca_file: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        if seconds <= 0:
            raise ValueError("timeout must be positive: every wait is bounded")
        self.base_url = base_url
        self.timeout = seconds
        self._http = Transport(base_url, token=token, timeout=seconds, ca_file=ca_file,
                               headers=headers)

    @classmethod
    def from_env(cls, **kwargs: Any) -> Client:
        """A client configured as the delayq CLI is: $DELAYQ_SERVER (default
        http://127.0.0.1:8080), $DELAYQ_TOKEN, $DELAYQ_CA_FILE."""
        kwargs.setdefault("base_url", os.environ.get("DELAYQ_SERVER", "http://127.0.0.1:8080"))
        kwargs.setdefault("token", os.environ.get("DELAYQ_TOKEN") or None)
        kwargs.setdefault("ca_file", os.environ.get("DELAYQ_CA_FILE") or None)
        return cls(**kwargs)

    def close(self) -> None:
        """Closes the client's connections (a later call opens new ones)."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"delayq.Client({self.base_url!r})"

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        query: Mapping[str, str] | None = None,
    ) -> Any:
        """Any route, for what this client has no method for: the answer's JSON (None for a
        204). Errors raise as for every method."""
        return self._http.request(method, path, query=query, body=body).data

    # -- jobs ----------------------------------------------------------------------------

    def put(
        self,
        tube: str,
        body: Body = "",
        *,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: int | None = None,
        ttr: Duration | None = None,
        key: str | None = None,
        group: str | None = None,
        replace: bool = False,
        debounce: Duration | None = None,
        max_wait: Duration | None = None,
        url: str | None = None,
        content_type: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> Job:
        """Puts a job into `tube` (POST /v1/tubes/{tube}/jobs), durable when this returns.

        delay or at   when it becomes ready (not both); default at once
        priority      0 (most urgent) to 4294967295; default 1024
        ttr           time to run once reserved; default 60 s
        key           unique in the tube: if a job holds it, nothing is put and that job is
                      answered with `existed` True (or, with replace=True, it is replaced)
        group         tags the job for list_group()/cancel_group()
        debounce      with a key, instead of delay or at and replace: if a delayed or ready job
                      holds the key, it takes this put's body and fields and is due `debounce`
                      from now, answered with `debounced` True (same id); a buried holder is
                      replaced; otherwise a new job is due in `debounce`
        max_wait      with debounce: a moved job is never due later than its first put plus
                      this
        url, content_type   push delivery: this job's own URL (the tube needs a webhook) and
                      the Content-Type it is POSTed with
        traceparent, tracestate   a W3C Trace Context kept with the job: Job.traceparent
                      wherever the job is read or reserved, and sent with each push delivery;
                      default, when neither is given: the current span's, if OpenTelemetry
                      is installed (tracing.py)
        Raises BadRequest, Conflict (replace or debounce of a reserved job; url without a
        webhook), TooLarge, Draining, NoSpace, Limit.
        """
        fields = _put_fields(PutJob(tube, body, delay=delay, at=at, priority=priority, ttr=ttr,
                                    key=key, group=group, replace=replace, debounce=debounce,
                                    max_wait=max_wait, url=url, content_type=content_type))
        answer = self._http.request("POST", f"/v1/tubes/{segment(tube)}/jobs", body=fields,
                                    headers=_trace(traceparent, tracestate))
        return Job.from_json(answer.data, existed=answer.status == 200)

    def put_many(
        self,
        jobs: Iterable[PutJob],
        *,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> list[Job | DelayqError]:
        """Puts up to 1000 jobs, into any tubes, in one request (POST /v1/jobs), each as put()
        would put it, all durable when this returns (they share the server's writes to disk).

        Answers one entry per job, in their order: the Job (with `existed` and `debounced` as
        put() sets them), or the DelayqError that refused that job, not raised: one refused
        does not stop the others. The trace context goes with every job, as put()'s. Raises
        BadRequest if `jobs` is empty or holds more than 1000, TooLarge if the request is over
        the server's request body limit (1 MiB by default).
        """
        body = {"jobs": [{"tube": job.tube, **_put_fields(job)} for job in jobs]}
        answer = self._http.request("POST", "/v1/jobs", body=body,
                                    headers=_trace(traceparent, tracestate))
        entries = answer.data.get("jobs") if isinstance(answer.data, dict) else None
        if not isinstance(entries, list) or len(entries) != len(body["jobs"]):
            raise UnexpectedResponse(f"POST /v1/jobs: not one answer per job: {answer.data!r}")
        out: list[Job | DelayqError] = []
        for entry in entries:
            status = entry.get("status") if isinstance(entry, dict) else None
            if not isinstance(status, int):
                raise UnexpectedResponse(f"POST /v1/jobs: an answer without a status: {entry!r}")
            if "job" in entry:
                out.append(Job.from_json(entry["job"], existed=status == 200))
                continue
            error = entry.get("error") if isinstance(entry.get("error"), dict) else {}
            code = error.get("code") if isinstance(error.get("code"), str) else None
            message = error.get("message") if isinstance(error.get("message"), str) else ""
            out.append(error_for(status, code, message or f"HTTP {status}"))
        return out

    def get_job(self, job_id: int) -> Job:
        """The job, in any state, with its body (GET /v1/jobs/{id}). Raises NotFound."""
        return Job.from_json(self._http.request("GET", f"/v1/jobs/{_job_id(job_id)}").data)

    def reschedule(
        self,
        job_id: int,
        *,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: int | None = None,
    ) -> Job:
        """A new due time (delay or at) and/or priority for a job (PATCH /v1/jobs/{id}).
        A new due time needs a ready or delayed job: Conflict otherwise. Raises NotFound."""
        return Job.from_json(self._http.request(
            "PATCH", f"/v1/jobs/{_job_id(job_id)}", body=_reschedule(delay, at, priority)).data)

    def delete_job(self, job_id: int) -> int:
        """Deletes a job that is ready, delayed, buried or reserved over HTTP
        (DELETE /v1/jobs/{id}); answers its id. Raises NotFound, Conflict (a beanstalkd
        connection holds it)."""
        data = self._http.request("DELETE", f"/v1/jobs/{_job_id(job_id)}").data
        return read_int(data, "deleted", "delete")

    def get_key(self, tube: str, key: str) -> Job:
        """The job of `tube` holding `key`, with its body (GET /v1/tubes/{tube}/keys/{key}).
        Raises NotFound."""
        return Job.from_json(self._http.request("GET", self._key_path(tube, key)).data)

    def reschedule_key(
        self,
        tube: str,
        key: str,
        *,
        delay: Duration | None = None,
        at: datetime | None = None,
        priority: int | None = None,
    ) -> Job:
        """reschedule() for the job of `tube` holding `key` (PATCH .../keys/{key})."""
        return Job.from_json(self._http.request(
            "PATCH", self._key_path(tube, key), body=_reschedule(delay, at, priority)).data)

    def delete_key(self, tube: str, key: str) -> int:
        """Deletes the job of `tube` holding `key`, freeing the key; answers its id."""
        data = self._http.request("DELETE", self._key_path(tube, key)).data
        return read_int(data, "deleted", "delete")

    @staticmethod
    def _key_path(tube: str, key: str) -> str:
        return f"/v1/tubes/{segment(tube)}/keys/{segment(key)}"

    # -- groups --------------------------------------------------------------------------

    def list_group(self, tube: str, group: str) -> list[Job]:
        """Every job of the group, in any state, by id, without bodies (an unknown group: [])."""
        data = self._http.request("GET", self._group_path(tube, group)).data
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, list):
            raise UnexpectedResponse(f"list_group: no jobs in {data!r}")
        return [Job.from_json(job) for job in jobs]

    def cancel_group(self, tube: str, group: str) -> int:
        """Deletes every job of the group that is not reserved; answers how many."""
        data = self._http.request("DELETE", self._group_path(tube, group)).data
        return read_int(data, "cancelled", "cancel_group")

    @staticmethod
    def _group_path(tube: str, group: str) -> str:
        return f"/v1/tubes/{segment(tube)}/groups/{segment(group)}"

    # -- reserving -----------------------------------------------------------------------

    def reserve(self, tubes: str | Sequence[str] = "default", *,
                timeout: Duration | None = None) -> Job | None:
        """Reserves the most urgent ready job of `tubes` (POST /v1/reserve), waiting up to
        `timeout` (at most 1 h; default: answer at once) for one; None if none came. The job
        is then held over HTTP: finish it with delete_job(), release(), bury(), or ask for
        more time with touch(), before its TTR (`reserved_until`) lapses. Raises Stopping if
        the server was told to stop during the wait."""
        names = [tubes] if isinstance(tubes, str) else list(tubes)
        fields: dict[str, Any] = {"tubes": names}
        _duration(fields, "timeout", timeout)
        answer = self._http.request("POST", "/v1/reserve", body=fields,
                                    extra_wait=_wait_seconds(timeout))
        if answer.status == 204:
            return None
        return Job.from_json(answer.data)

    def reserve_many(self, tubes: str | Sequence[str] = "default", count: int = 10, *,
                     timeout: Duration | None = None) -> list[Job]:
        """Reserves up to `count` (1 to 100) jobs of `tubes` in one request (POST /v1/reserve
        with a count): waits up to `timeout` for the first, as reserve() does, then takes the
        jobs ready at that moment, most urgent first, until `count` or 1 MiB of bodies. An
        empty list if none came. Each job is held as reserve()'s is: finish each by its id."""
        names = [tubes] if isinstance(tubes, str) else list(tubes)
        fields: dict[str, Any] = {"tubes": names}
        _integer(fields, "count", count)
        _duration(fields, "timeout", timeout)
        answer = self._http.request("POST", "/v1/reserve", body=fields,
                                    extra_wait=_wait_seconds(timeout))
        if answer.status == 204:
            return []
        jobs = answer.data.get("jobs") if isinstance(answer.data, dict) else None
        if not isinstance(jobs, list) or not jobs:
            raise UnexpectedResponse(f"POST /v1/reserve: no list of jobs: {answer.data!r}")
        return [Job.from_json(job) for job in jobs]

    def release(self, job_id: int, *, delay: Duration | None = None,
                priority: int | None = None) -> Job:
        """Gives back a job reserved over HTTP: ready, or delayed for `delay`, with a new
        priority if given (buried instead if the tube's max_attempts is used up). Raises
        NotFound, Conflict (not reserved over HTTP)."""
        fields: dict[str, Any] = {}
        _duration(fields, "delay", delay)
        _integer(fields, "priority", priority)
        return Job.from_json(self._http.request(
            "POST", f"/v1/jobs/{_job_id(job_id)}/release", body=fields).data)

    def bury(self, job_id: int, *, priority: int | None = None) -> Job:
        """Sets aside a job reserved over HTTP until a kick or a delete. Raises NotFound,
        Conflict."""
        fields: dict[str, Any] = {}
        _integer(fields, "priority", priority)
        return Job.from_json(self._http.request(
            "POST", f"/v1/jobs/{_job_id(job_id)}/bury", body=fields).data)

    def touch(self, job_id: int) -> Job:
        """Restarts the TTR of a job reserved over HTTP; the answer has the new
        `reserved_until`. Raises NotFound, Conflict."""
        return Job.from_json(self._http.request("POST", f"/v1/jobs/{_job_id(job_id)}/touch").data)

    def kick_job(self, job_id: int) -> Job:
        """Makes one buried or delayed job ready. Raises NotFound, Conflict (ready or
        reserved)."""
        return Job.from_json(self._http.request("POST", f"/v1/jobs/{_job_id(job_id)}/kick").data)

    def jobs(
        self,
        tubes: str | Sequence[str] = "default",
        *,
        wait: Duration = timedelta(seconds=20),
        stop: threading.Event | None = None,
        until_empty: bool = False,
    ) -> Iterator[Job]:
        """Yields reserved jobs of `tubes` one at a time, long-polling up to `wait` for each.
        The caller finishes each job (delete_job(), release(), ...). Ends when `stop` is set
        (checked between polls, so within `wait`), when the caller stops iterating, or, with
        until_empty, at the first poll that finds no job."""
        encode_duration(wait, "wait")  # its error names this parameter, not reserve()'s
        while stop is None or not stop.is_set():
            job = self.reserve(tubes, timeout=wait)
            if job is not None:
                yield job
            elif until_empty:
                return

    def worker(
        self,
        tubes: str | Sequence[str],
        handler: Callable[[Job], object],
        *,
        concurrency: int = 1,
        wait: timedelta = timedelta(seconds=5),
        backoff_min: timedelta = timedelta(seconds=1),
        backoff_max: timedelta = timedelta(minutes=10),
        backoff_factor: float = 2.0,
        drain_timeout: timedelta = timedelta(seconds=30),
    ) -> Worker:
        """A Worker (worker.py) that runs `handler` on the jobs of `tubes`: start it with
        run() (blocking) or start(), end it with stop(). The options are Worker's."""
        return Worker(self, tubes, handler, concurrency=concurrency, wait=wait,
                      backoff_min=backoff_min, backoff_max=backoff_max,
                      backoff_factor=backoff_factor, drain_timeout=drain_timeout)

    def work(
        self,
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
        """Runs `handler` on the jobs of `tubes` in `concurrency` threads until Ctrl-C
        (KeyboardInterrupt): deletes each job whose handler returned, releases with a
        growing delay each whose handler raised, and touches a job whose handler runs past
        half its TTR. To stop it from elsewhere, use worker(...).run() and its stop()."""
        self.worker(tubes, handler, concurrency=concurrency, wait=wait,
                    backoff_min=backoff_min, backoff_max=backoff_max,
                    backoff_factor=backoff_factor, drain_timeout=drain_timeout).run()

    # -- tubes ---------------------------------------------------------------------------

    def list_tubes(self) -> list[TubeStats]:
        """Every tube that exists, by name, with its counts."""
        data = self._http.request("GET", "/v1/tubes").data
        tubes = data.get("tubes") if isinstance(data, dict) else None
        if not isinstance(tubes, list):
            raise UnexpectedResponse(f"list_tubes: no tubes in {data!r}")
        return [TubeStats.from_json(tube) for tube in tubes]

    def tube_stats(self, tube: str) -> TubeStats:
        """One tube's counts. Raises NotFound (looking does not create it)."""
        return TubeStats.from_json(self._http.request("GET", f"/v1/tubes/{segment(tube)}").data)

    def list_jobs(self, tube: str, state: str = "ready", *, limit: int | None = None) -> JobList:
        """The tube's first jobs in `state` ("ready", "delayed", "reserved", "buried"), in
        the order they will be served, without bodies; `limit` 1 to 1000, default 20. Raises
        NotFound, Unsupported (Redis mode)."""
        query = {"state": state}
        if limit is not None:
            query["limit"] = str(int(limit))
        return JobList.from_json(
            self._http.request("GET", f"/v1/tubes/{segment(tube)}/jobs", query=query).data)

    def due_counts(
        self,
        tube: str | None = None,
        *,
        edges: Sequence[Duration | datetime] | None = None,
    ) -> DueCounts:
        """How many delayed jobs of `tube` (None: of every tube) come due between `edges`:
        all durations from now, or all aware datetimes; default the server's 0s,1m,1h,1d,7d.
        Raises NotFound, Unsupported (Redis mode)."""
        query: dict[str, str] = {}
        if edges:
            times = [edge for edge in edges if isinstance(edge, datetime)]
            durations = [edge for edge in edges if not isinstance(edge, datetime)]
            if times and durations:
                raise TypeError("edges: all durations or all datetimes, not both")
            if times:
                query["at"] = ",".join(str(unix_ms(edge, "edges")) for edge in times)
            else:
                query["in"] = ",".join(encode_duration(edge, "edges") for edge in durations)
        path = "/v1/due" if tube is None else f"/v1/tubes/{segment(tube)}/due"
        return DueCounts.from_json(self._http.request("GET", path, query=query).data)

    def set_max_attempts(self, tube: str, max_attempts: int) -> int:
        """Reservations each job of the tube gets before a failed one buries it (0: no
        limit); durable, and kept while the tube does not exist. Answers the limit in force."""
        fields: dict[str, Any] = {}
        _integer(fields, "max_attempts", max_attempts)
        data = self._http.request("PATCH", f"/v1/tubes/{segment(tube)}", body=fields).data
        return read_int(data, "max_attempts", "set_max_attempts")

    def set_flow(
        self,
        tube: str,
        *,
        group_concurrency: int | None | Keep = KEEP,
        fair: bool | Keep = KEEP,
        group_rate: str | None | Keep = KEEP,
        group_burst: int | Keep = KEEP,
        group_weights: Mapping[str, int | None] | Keep = KEEP,
    ) -> FlowSettings:
        """Sets the tube's flow control over the groups of its jobs (PATCH /v1/tubes/{tube});
        durable, and kept while the tube does not exist. Only the settings given change: each
        defaults to KEEP (leave it as it is), since None already means "off".

        group_concurrency   at most this many jobs of one group reserved at once (webhook
                            deliveries count), up to 1000000; None or 0 turns it off
        fair                True: groups take turns among the ready jobs of the best priority
        group_rate          at most <jobs> reserves of one group per <duration>: "10/s",
                            "600/1m", "1/1500ms"; None turns it off
        group_burst         the reserves a group may take at once after a quiet spell, 1 to
                            1000000 (the server's default 1)
        group_weights       under fair, turns in proportion to weight: group -> 1 to 1000, or
                            None (or 1) to set a group back to the default 1; only the
                            groups named change
        Answers the settings in force, group_rate as the server writes it ("10/1s"). Raises
        TypeError if no setting is given, BadRequest, Conflict (Redis mode: first settings of a
        tube that already has jobs)."""
        fields: dict[str, Any] = {}
        if group_concurrency is None:
            fields["group_concurrency"] = None
        elif group_concurrency is not KEEP:
            _integer(fields, "group_concurrency", group_concurrency)
        if fair is not KEEP:
            if not isinstance(fair, bool):
                raise TypeError(f"fair: a bool, not {type(fair).__name__}")
            fields["fair"] = fair
        if group_rate is None or isinstance(group_rate, str):
            fields["group_rate"] = group_rate
        elif group_rate is not KEEP:
            raise TypeError(f"group_rate: a string such as '10/s', not {type(group_rate).__name__}")
        if group_burst is not KEEP:
            if group_burst is None:
                raise TypeError("group_burst: an int from 1; it cannot be turned off")
            _integer(fields, "group_burst", group_burst)
        if group_weights is not KEEP:
            fields["group_weights"] = _weights(group_weights)
        if not fields:
            raise TypeError(
                "set_flow: give group_concurrency, fair, group_rate, group_burst or group_weights")
        return FlowSettings.from_json(
            self._http.request("PATCH", f"/v1/tubes/{segment(tube)}", body=fields).data)

    def kick(self, tube: str, bound: int = 1) -> int:
        """Makes up to `bound` jobs of the tube ready: its buried jobs if it has any, else its
        delayed ones, soonest first. Answers how many."""
        fields: dict[str, Any] = {}
        _integer(fields, "bound", bound)
        data = self._http.request("POST", f"/v1/tubes/{segment(tube)}/kick", body=fields).data
        return read_int(data, "kicked", "kick")

    def pause_tube(self, tube: str, delay: Duration) -> timedelta:
        """Hands out no job of the tube for `delay` (zero ends a pause); not durable.
        Answers the pause in force, in whole seconds. Raises NotFound."""
        fields: dict[str, Any] = {"delay": encode_duration(delay, "delay")}
        data = self._http.request("POST", f"/v1/tubes/{segment(tube)}/pause", body=fields).data
        return timedelta(seconds=read_int(data, "pause_s", "pause_tube"))

    # -- webhooks ------------------------------------------------------------------------

    def set_webhook(
        self,
        tube: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: Duration | None = None,
        max_attempts: int | None = None,
        backoff_min: Duration | None = None,
        backoff_max: Duration | None = None,
        backoff_factor: float | None = None,
        rate: float | None = None,
        concurrency: int | None = None,
        secrets: Sequence[str] | None = None,
    ) -> Webhook:
        """Sets the tube's webhook, replacing its previous one as a whole (an option left
        out takes the server's default, not its former value). `secrets`: one or two
        (while rotating) HMAC keys that sign every request (see verify_signature). Answers
        the webhook in force; the secrets are shown only as their number."""
        fields: dict[str, Any] = {"url": url}
        if headers is not None:
            fields["headers"] = dict(headers)
        _duration(fields, "timeout", timeout)
        _integer(fields, "max_attempts", max_attempts)
        backoff: dict[str, Any] = {}
        _duration(backoff, "min", backoff_min)
        _duration(backoff, "max", backoff_max)
        if backoff_factor is not None:
            backoff["factor"] = float(backoff_factor)
        if backoff:
            fields["backoff"] = backoff
        if rate is not None:
            fields["rate"] = float(rate)
        _integer(fields, "concurrency", concurrency)
        if secrets is not None:
            if isinstance(secrets, str):
                raise TypeError("secrets: a list of one or two strings, not one string")
            fields["secrets"] = list(secrets)
        return Webhook.from_json(
            self._http.request("PUT", f"/v1/tubes/{segment(tube)}/webhook", body=fields).data)

    def get_webhook(self, tube: str) -> Webhook:
        """The tube's webhook. Raises NotFound if it has none."""
        return Webhook.from_json(
            self._http.request("GET", f"/v1/tubes/{segment(tube)}/webhook").data)

    def remove_webhook(self, tube: str) -> Webhook:
        """Removes the tube's webhook and stops its delivery; answers the webhook removed.
        Raises NotFound if it has none."""
        return Webhook.from_json(
            self._http.request("DELETE", f"/v1/tubes/{segment(tube)}/webhook").data)

    # -- schedules -----------------------------------------------------------------------

    def set_schedule(
        self,
        name: str,
        tube: str,
        *,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str | None = None,
        body: Body | None = None,
        priority: int | None = None,
        ttr: Duration | None = None,
        group: str | None = None,
        url: str | None = None,
        content_type: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        limit: int | None = None,
        jitter: Duration | None = None,
        misfire: str | None = None,
        max_lateness: Duration | None = None,
        overlap: str | None = None,
        paused: bool | None = None,
    ) -> Schedule:
        """Creates the schedule `name`, or replaces it as a whole (PUT /v1/schedules/{name}):
        a job into `tube` at each instant of `cron` (in `tz`, default UTC) or of `every`.
        misfire: "skip", "once" (default) or "all"; overlap: "allow" (default), "skip" or
        "buffer_one". docs/schedules.md has the rules. Raises BadRequest, Conflict."""
        fields = _schedule_fields(tube, cron, every, tz, body, priority, ttr, group, url,
                                  content_type, start_at, end_at, limit, jitter, misfire,
                                  max_lateness, overlap, paused)
        return Schedule.from_json(
            self._http.request("PUT", f"/v1/schedules/{segment(name)}", body=fields).data)

    def get_schedule(self, name: str) -> Schedule:
        """The schedule, with its next run and counts. Raises NotFound."""
        return Schedule.from_json(self._http.request("GET", f"/v1/schedules/{segment(name)}").data)

    def list_schedules(self, *, after: str | None = None, limit: int | None = None) -> SchedulePage:
        """One page of schedules by name, those after `after`; `limit` 1 to 1000 (default
        100). `more` says whether to ask again with after=<the last name>."""
        query: dict[str, str] = {}
        if after is not None:
            query["after"] = after
        if limit is not None:
            query["limit"] = str(int(limit))
        return SchedulePage.from_json(self._http.request("GET", "/v1/schedules", query=query).data)

    def schedules(self, *, page_size: int = 100) -> Iterator[Schedule]:
        """Every schedule, by name, a page at a time."""
        after: str | None = None
        while True:
            page = self.list_schedules(after=after, limit=page_size)
            yield from page.schedules
            if not page.more or not page.schedules:
                return
            after = page.schedules[-1].name

    def remove_schedule(self, name: str) -> Schedule:
        """Deletes the schedule (and its run put ahead, if still delayed); answers it as it
        was. Raises NotFound."""
        return Schedule.from_json(
            self._http.request("DELETE", f"/v1/schedules/{segment(name)}").data)

    def pause_schedule(self, name: str) -> Schedule:
        """Puts no run until resumed; the run put ahead is deleted if still delayed."""
        return Schedule.from_json(
            self._http.request("POST", f"/v1/schedules/{segment(name)}/pause").data)

    def resume_schedule(self, name: str) -> Schedule:
        """Runs again; the instants missed meanwhile go by the schedule's misfire rule."""
        return Schedule.from_json(
            self._http.request("POST", f"/v1/schedules/{segment(name)}/resume").data)

    def trigger_schedule(self, name: str) -> Job:
        """One run now, paused or not: a job keyed `<name>@<now in Unix ms>`, due now."""
        answer = self._http.request("POST", f"/v1/schedules/{segment(name)}/trigger")
        return Job.from_json(answer.data, existed=answer.status == 200)

    def backfill_schedule(self, name: str, start: datetime, end: datetime) -> list[Job]:
        """A run due now for each instant from `start` to `end`, both included (at most
        1000); an instant whose job is still in the tube is answered, not put again."""
        fields: dict[str, Any] = {}
        _time(fields, "from", start)
        _time(fields, "to", end)
        data = self._http.request("POST", f"/v1/schedules/{segment(name)}/backfill",
                                  body=fields).data
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if not isinstance(jobs, list):
            raise UnexpectedResponse(f"backfill_schedule: no jobs in {data!r}")
        return [Job.from_json(job) for job in jobs]

    def next_runs(self, name: str, *, count: int | None = None,
                  after: datetime | None = None) -> list[datetime]:
        """The schedule's next `count` instants (1 to 1000, default 10) strictly after `after`
        (default now), as start_at and end_at allow."""
        query: dict[str, str] = {}
        if count is not None:
            query["count"] = str(int(count))
        if after is not None:
            query["after"] = str(unix_ms(after, "after"))
        return runs_from_json(
            self._http.request("GET", f"/v1/schedules/{segment(name)}/next", query=query).data)

    def preview_schedule(
        self,
        tube: str,
        *,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str | None = None,
        body: Body | None = None,
        priority: int | None = None,
        ttr: Duration | None = None,
        group: str | None = None,
        url: str | None = None,
        content_type: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        limit: int | None = None,
        jitter: Duration | None = None,
        misfire: str | None = None,
        max_lateness: Duration | None = None,
        overlap: str | None = None,
        paused: bool | None = None,
        count: int | None = None,
        after: datetime | None = None,
    ) -> list[datetime]:
        """The instants a definition would run at, without setting it (also in Redis mode):
        the arguments of set_schedule(), and `count` (1 to 1000, default 10) instants after
        `after` (default now)."""
        fields = _schedule_fields(tube, cron, every, tz, body, priority, ttr, group, url,
                                  content_type, start_at, end_at, limit, jitter, misfire,
                                  max_lateness, overlap, paused)
        _integer(fields, "count", count)
        _time(fields, "after", after)
        return runs_from_json(self._http.request("POST", "/v1/schedules/preview", body=fields).data)

    # -- server --------------------------------------------------------------------------

    def stats(self) -> Stats:
        """Server-wide counts (GET /v1/stats)."""
        return Stats.from_json(self._http.request("GET", "/v1/stats").data)

    def health(self) -> str:
        """Liveness (GET /healthz): "ok" whenever the process answers."""
        return _status(self._http.request("GET", "/healthz").data, "health")

    def ready(self) -> str:
        """Readiness (GET /readyz): "ready", or raises Draining, NoSpace, Unavailable or
        Starting, the reason not to send this server new jobs."""
        return _status(self._http.request("GET", "/readyz").data, "ready")

    def metrics(self) -> str:
        """The Prometheus text of GET /metrics."""
        data = self._http.request("GET", "/metrics").data
        if not isinstance(data, str):
            raise UnexpectedResponse("metrics: not text")
        return data

    def backup(self, directory: str) -> Backup:
        """Writes a consistent copy of the data directory into `directory`, a new absolute
        path on the server's machine. Raises BadRequest, Conflict (one runs already),
        Unsupported (Redis mode)."""
        return Backup.from_json(
            self._http.request("POST", "/v1/admin/backup", body={"dir": directory}).data)


def _reschedule(delay: Duration | None, at: datetime | None, priority: int | None) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    _duration(fields, "delay", delay)
    _time(fields, "at", at)
    _integer(fields, "priority", priority)
    return fields


def _status(data: Any, what: str) -> str:
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, str):
        raise UnexpectedResponse(f"{what}: no status in {data!r}")
    return status


def _schedule_fields(
    tube: str,
    cron: str | None,
    every: Duration | None,
    tz: str | None,
    body: Body | None,
    priority: int | None,
    ttr: Duration | None,
    group: str | None,
    url: str | None,
    content_type: str | None,
    start_at: datetime | None,
    end_at: datetime | None,
    limit: int | None,
    jitter: Duration | None,
    misfire: str | None,
    max_lateness: Duration | None,
    overlap: str | None,
    paused: bool | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {"tube": tube}
    strings = {"cron": cron, "tz": tz, "group": group, "url": url,
               "content_type": content_type, "misfire": misfire, "overlap": overlap}
    fields.update({name: value for name, value in strings.items() if value is not None})
    _duration(fields, "every", every)
    _body(fields, body)
    _integer(fields, "priority", priority)
    _duration(fields, "ttr", ttr)
    _time(fields, "start_at", start_at)
    _time(fields, "end_at", end_at)
    _integer(fields, "limit", limit)
    _duration(fields, "jitter", jitter)
    _duration(fields, "max_lateness", max_lateness)
    if paused is not None:
        fields["paused"] = bool(paused)
    return fields

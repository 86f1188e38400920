"""models.py — the objects the HTTP API answers, as small frozen dataclasses.

Each class has a `from_json` that reads the server's JSON object: the fields this client knows
become typed attributes (times as aware datetimes, durations as timedeltas, bodies as bytes),
and every other field is kept, as the server sent it, in `extra`, so that a newer server's
additions neither break this client nor get lost. A field this client needs that is missing,
or of the wrong type, raises UnexpectedResponse.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, TypeVar

from .errors import UnexpectedResponse
from .times import from_unix_ms, parse_duration, parse_time

T = TypeVar("T")


class _Fields:
    """Takes the known fields out of one JSON object; what is left is `rest()`."""

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, Mapping):
            raise UnexpectedResponse(f"{what}: expected a JSON object, got {data!r}")
        self._data = dict(data)
        self._what = what

    def _take(self, name: str, kind: type | tuple[type, ...], required: bool) -> Any:
        value = self._data.pop(name, None)
        if value is None:
            if required:
                raise UnexpectedResponse(f"{self._what}: no field {name!r}")
            return None
        # bool is an int in Python; no field here takes both.
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
            raise UnexpectedResponse(f"{self._what}: field {name!r} is {value!r}")
        return value

    def integer(self, name: str) -> int:
        return int(self._take(name, int, True))

    def integer_or_none(self, name: str) -> int | None:
        value = self._take(name, int, False)
        return None if value is None else int(value)

    def number(self, name: str) -> float:
        return float(self._take(name, (int, float), True))

    def number_or_none(self, name: str) -> float | None:
        value = self._take(name, (int, float), False)
        return None if value is None else float(value)

    def string(self, name: str) -> str:
        return str(self._take(name, str, True))

    def string_or_none(self, name: str) -> str | None:
        value = self._take(name, str, False)
        return None if value is None else str(value)

    def boolean(self, name: str) -> bool:
        return bool(self._take(name, bool, True))

    def boolean_or_none(self, name: str) -> bool | None:
        value = self._take(name, bool, False)
        return None if value is None else bool(value)

    def obj(self, name: str, read: Callable[[Any], T]) -> T:
        return read(self._take(name, dict, True))

    def obj_or_none(self, name: str, read: Callable[[Any], T]) -> T | None:
        value = self._take(name, dict, False)
        return None if value is None else read(value)

    def array(self, name: str, read: Callable[[Any], T]) -> list[T]:
        return [read(item) for item in self._take(name, list, True)]

    def mapping(self, name: str) -> dict[str, Any]:
        value = self._take(name, dict, False)
        return {} if value is None else dict(value)

    def integers(self, name: str) -> dict[str, int]:
        """An object of name -> int; {} if absent."""
        value = self.mapping(name)
        for key, item in value.items():
            if isinstance(item, bool) or not isinstance(item, int):
                raise UnexpectedResponse(f"{self._what}: field {name!r} has {key!r}: {item!r}")
        return value

    def ms(self, name: str) -> timedelta:
        return timedelta(milliseconds=self.integer(name))

    def time_ms(self, name: str) -> datetime:
        return from_unix_ms(self.integer(name))

    def time_ms_or_none(self, name: str) -> datetime | None:
        value = self.integer_or_none(name)
        return None if value is None else from_unix_ms(value)

    def time_text(self, name: str) -> datetime:
        return self._parse(name, self.string(name), parse_time)

    def time_text_or_none(self, name: str) -> datetime | None:
        value = self.string_or_none(name)
        return None if value is None else self._parse(name, value, parse_time)

    def duration(self, name: str) -> timedelta:
        return self._parse(name, self.string(name), parse_duration)

    def duration_or_none(self, name: str) -> timedelta | None:
        value = self.string_or_none(name)
        return None if value is None else self._parse(name, value, parse_duration)

    def body(self) -> bytes | None:
        text = self.string_or_none("body")
        encoded = self.string_or_none("body_base64")
        if text is not None:
            return text.encode("utf-8")
        if encoded is not None:
            return self._parse("body_base64", encoded, base64.b64decode)
        return None

    def drop(self, *names: str) -> None:
        for name in names:
            self._data.pop(name, None)

    def rest(self) -> dict[str, Any]:
        return self._data

    def _parse(self, name: str, value: str, parse: Callable[[str], T]) -> T:
        try:
            return parse(value)
        except ValueError as error:
            raise UnexpectedResponse(f"{self._what}: field {name!r} is {value!r}") from error


# --- jobs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counters:
    """How often each thing has happened to a job."""

    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Counters:
        f = _Fields(data, "counters")
        return cls(f.integer("reserves"), f.integer("timeouts"), f.integer("releases"), f.integer("buries"),
                   f.integer("kicks"), f.rest())


@dataclass(frozen=True, slots=True)
class ScheduleRun:
    """The schedule run a job is, read from its key `<name>@<instant in Unix ms>`."""

    name: str
    instant: datetime
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> ScheduleRun:
        f = _Fields(data, "schedule")
        name = f.string("name")
        instant = f.time_ms("instant_unix_ms")
        f.drop("instant")
        return cls(name, instant, f.rest())


@dataclass(frozen=True, slots=True)
class Job:
    """A job as the server shows it.

    `state` is "ready", "delayed", "reserved" or "buried". `due` is when a delayed job becomes
    ready (for the other states, when it last became ready); `delay` the delay it was last
    put, released or rescheduled with. `body` is there only in the answers that carry it (get,
    get by key, reserve); `text` and `json()` read it. `existed` is True when a put found its
    key held and created nothing: this is then the job that holds the key. `debounced` is True
    when a put with a debounce found its key held by a pending job and moved it: the same id
    and `created` (its first put), with the put's body and fields and a new due time.
    """

    id: int
    tube: str
    state: str
    priority: int
    due: datetime
    delay: timedelta
    ttr: timedelta
    created: datetime
    counters: Counters
    reserved_until: datetime | None = None
    key: str | None = None
    group: str | None = None
    schedule: ScheduleRun | None = None
    url: str | None = None
    content_type: str | None = None
    last_attempt: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    body: bytes | None = None
    existed: bool = False
    debounced: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, *, existed: bool = False) -> Job:
        f = _Fields(data, "job")
        # A debounced put answers 200 too, but it did take the put's body and fields.
        debounced = f.boolean_or_none("debounced") or False
        job = cls(
            id=f.integer("id"),
            tube=f.string("tube"),
            state=f.string("state"),
            priority=f.integer("priority"),
            due=f.time_ms("due_unix_ms"),
            delay=f.ms("delay_ms"),
            ttr=f.ms("ttr_ms"),
            created=f.time_text("created"),
            counters=f.obj("counters", Counters.from_json),
            reserved_until=f.time_ms_or_none("reserved_until_unix_ms"),
            key=f.string_or_none("key"),
            group=f.string_or_none("group"),
            schedule=f.obj_or_none("schedule", ScheduleRun.from_json),
            url=f.string_or_none("url"),
            content_type=f.string_or_none("content_type"),
            last_attempt=f.time_text_or_none("last_attempt"),
            last_status=f.integer_or_none("last_status"),
            last_error=f.string_or_none("last_error"),
            traceparent=f.string_or_none("traceparent"),
            tracestate=f.string_or_none("tracestate"),
            body=f.body(),
            existed=existed and not debounced,
            debounced=debounced,
            extra=f.rest(),
        )
        # The RFC 3339 twins of the *_unix_ms fields say nothing more.
        job.extra.pop("due", None)
        job.extra.pop("reserved_until", None)
        return job

    @property
    def text(self) -> str:
        """The body as UTF-8 text; ValueError if this answer carried no body."""
        if self.body is None:
            raise ValueError(f"job {self.id}: this answer carries no body (get_job() has it)")
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.text)


@dataclass(frozen=True, slots=True)
class JobList:
    """A page of a tube's jobs in one state. `complete` is False when the server's search cap
    cut the list short."""

    jobs: list[Job]
    complete: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> JobList:
        f = _Fields(data, "job list")
        return cls(f.array("jobs", Job.from_json), f.boolean("complete"), f.rest())


# --- tubes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TubeStats:
    """A tube's counts. `pause` is the pause in force (zero if none), `pause_left` how much of
    it is left. `group_concurrency`, `fair`, `group_rate`, `group_burst` and `group_weights` are
    its flow control (FlowSettings); `groups_held` counts the groups whose ready jobs are held
    back by concurrency or rate, `groups_ready` those with a job that may be taken now.
    `webhook_url` and `webhook_deliveries` only in list_tubes() for a tube with a webhook."""

    name: str
    ready: int
    delayed: int
    reserved: int
    buried: int
    urgent: int
    total_jobs: int
    deletes: int
    waiting: int
    watching: int
    using: int
    pause: timedelta
    pause_left: timedelta
    max_attempts: int
    group_concurrency: int
    fair: bool
    group_rate: str | None
    group_burst: int
    group_weights: dict[str, int]
    groups_held: int
    groups_ready: int
    oldest_ready_age: timedelta = timedelta(0)
    webhook_url: str | None = None
    webhook_deliveries: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> TubeStats:
        f = _Fields(data, "tube")
        return cls(
            name=f.string("name"),
            ready=f.integer("ready"),
            delayed=f.integer("delayed"),
            reserved=f.integer("reserved"),
            buried=f.integer("buried"),
            urgent=f.integer("urgent"),
            total_jobs=f.integer("total_jobs"),
            deletes=f.integer("deletes"),
            waiting=f.integer("waiting"),
            watching=f.integer("watching"),
            using=f.integer("using"),
            pause=timedelta(seconds=f.integer("pause_s")),
            pause_left=f.ms("pause_left_ms"),
            max_attempts=f.integer("max_attempts"),
            group_concurrency=f.integer("group_concurrency"),
            fair=f.boolean("fair"),
            group_rate=f.string_or_none("group_rate"),
            group_burst=f.integer("group_burst"),
            group_weights=f.integers("group_weights"),
            groups_held=f.integer("groups_held"),
            groups_ready=f.integer("groups_ready"),
            oldest_ready_age=timedelta(milliseconds=f.integer_or_none("oldest_ready_age_ms") or 0),
            webhook_url=f.string_or_none("webhook_url"),
            webhook_deliveries={k: int(v) for k, v in f.mapping("webhook_deliveries").items()},
            extra=f.rest(),
        )


@dataclass(frozen=True, slots=True)
class FlowSettings:
    """A tube's flow control, as set_flow() answers it. `group_concurrency`: at most this many
    jobs of one group reserved at once (0: off). `fair`: groups take turns among the ready jobs
    of the best priority. `group_rate`: at most so many reserves of one group per duration, as
    the server writes it ("10/1s"; None: off), from a bucket of `group_burst` reserves.
    `group_weights`: under `fair`, a group of weight 3 gets three turns for one of weight 1;
    only the groups whose weight is not 1 are named ({}: none)."""

    tube: str
    group_concurrency: int
    fair: bool
    group_rate: str | None
    group_burst: int
    group_weights: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> FlowSettings:
        f = _Fields(data, "flow")
        return cls(f.string("tube"), f.integer("group_concurrency"), f.boolean("fair"),
                   f.string_or_none("group_rate"), f.integer("group_burst"),
                   f.integers("group_weights"), f.rest())


@dataclass(frozen=True, slots=True)
class DueBucket:
    """Delayed jobs due from `start` (None: since ever) up to `end` (None: for ever)."""

    start: datetime | None
    end: datetime | None
    jobs: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> DueBucket:
        f = _Fields(data, "due bucket")
        return cls(f.time_ms_or_none("from_unix_ms"), f.time_ms_or_none("to_unix_ms"),
                   f.integer("jobs"), f.rest())


@dataclass(frozen=True, slots=True)
class DueCounts:
    """How many delayed jobs come due between edges (rounded down to `resolution`); `tube` is
    None for the counts over every tube."""

    tube: str | None
    as_of: datetime
    resolution: timedelta
    delayed: int
    buckets: list[DueBucket]
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> DueCounts:
        f = _Fields(data, "due counts")
        return cls(f.string_or_none("tube"), f.time_ms("as_of_unix_ms"), f.ms("resolution_ms"),
                   f.integer("delayed"), f.array("buckets", DueBucket.from_json), f.rest())


# --- webhooks -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Backoff:
    """A webhook's retry waits: after failed attempt n, between half and all of
    min(max, min * factor ** (n - 1))."""

    min: timedelta
    max: timedelta
    factor: float
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Backoff:
        f = _Fields(data, "backoff")
        return cls(f.duration("min"), f.duration("max"), f.number("factor"), f.rest())


@dataclass(frozen=True, slots=True)
class Webhook:
    """A tube's webhook, every field filled in. `secrets` is how many secrets sign its
    requests (0, 1 or 2): the server never shows them back."""

    url: str
    headers: dict[str, str]
    timeout: timedelta
    max_attempts: int
    backoff: Backoff
    rate: float
    concurrency: int
    secrets: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Webhook:
        f = _Fields(data, "webhook")
        return cls(
            url=f.string("url"),
            headers={str(k): str(v) for k, v in f.mapping("headers").items()},
            timeout=f.duration("timeout"),
            max_attempts=f.integer("max_attempts"),
            backoff=f.obj("backoff", Backoff.from_json),
            rate=f.number("rate"),
            concurrency=f.integer("concurrency"),
            secrets=f.integer("secrets"),
            extra=f.rest(),
        )


# --- schedules ------------------------------------------------------------------------------


def _schedule_time(data: Any) -> datetime:
    """A schedule's {"at", "unix_ms"}: the instant, with the offset of the schedule's tz."""
    f = _Fields(data, "schedule time")
    at = f.time_text_or_none("at")
    unix = f.integer("unix_ms")
    return at if at is not None else from_unix_ms(unix)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A recurring schedule as the server shows it: its definition with every field filled
    in (exactly one of `cron` and `every`), and where it has got to (`next`, `last_run`,
    `waiting_run`, `runs`, `misfires`, `overlaps_skipped`). Times carry the offset of `tz`."""

    name: str
    tube: str
    cron: str | None
    every: timedelta | None
    tz: str
    body: bytes
    priority: int
    ttr: timedelta
    group: str | None
    url: str | None
    content_type: str | None
    start_at: datetime | None
    end_at: datetime | None
    limit: int | None
    jitter: timedelta
    misfire: str
    max_lateness: timedelta
    overlap: str
    paused: bool
    next: datetime | None
    last_run: datetime | None
    waiting_run: datetime | None
    runs: int
    misfires: int
    overlaps_skipped: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Schedule:
        f = _Fields(data, "schedule")
        return cls(
            name=f.string("name"),
            tube=f.string("tube"),
            cron=f.string_or_none("cron"),
            every=f.duration_or_none("every"),
            tz=f.string("tz"),
            body=f.body() or b"",
            priority=f.integer("priority"),
            ttr=f.duration("ttr"),
            group=f.string_or_none("group"),
            url=f.string_or_none("url"),
            content_type=f.string_or_none("content_type"),
            start_at=f.obj_or_none("start_at", _schedule_time),
            end_at=f.obj_or_none("end_at", _schedule_time),
            limit=f.integer_or_none("limit"),
            jitter=f.duration("jitter"),
            misfire=f.string("misfire"),
            max_lateness=f.duration("max_lateness"),
            overlap=f.string("overlap"),
            paused=f.boolean("paused"),
            next=f.obj_or_none("next", _schedule_time),
            last_run=f.obj_or_none("last_run", _schedule_time),
            waiting_run=f.obj_or_none("waiting_run", _schedule_time),
            runs=f.integer("runs"),
            misfires=f.integer("misfires"),
            overlaps_skipped=f.integer("overlaps_skipped"),
            extra=f.rest(),
        )


@dataclass(frozen=True, slots=True)
class SchedulePage:
    """A page of schedules by name; `more` is True when the page is full and more may
    follow."""

    schedules: list[Schedule]
    more: bool
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> SchedulePage:
        f = _Fields(data, "schedule page")
        return cls(f.array("schedules", Schedule.from_json), f.boolean("more"), f.rest())


def runs_from_json(data: Any) -> list[datetime]:
    """The instants of a `next` or a preview answer."""
    f = _Fields(data, "runs")
    return f.array("runs", _schedule_time)


# --- server ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatenessBucket:
    """Fires whose lateness was at most `le_ms` (None: the unbounded last bucket); not
    cumulative."""

    le_ms: float | None
    jobs: int
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> LatenessBucket:
        f = _Fields(data, "lateness bucket")
        return cls(f.number_or_none("le_ms"), f.integer("jobs"), f.rest())


@dataclass(frozen=True, slots=True)
class FireLateness:
    """From a delayed job's due time to its becoming ready; percentiles None before any
    fire."""

    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    buckets: list[LatenessBucket]
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> FireLateness:
        f = _Fields(data, "fire_lateness")
        return cls(f.number_or_none("p50_ms"), f.number_or_none("p90_ms"),
                   f.number_or_none("p99_ms"), f.array("buckets", LatenessBucket.from_json),
                   f.rest())


@dataclass(frozen=True, slots=True)
class Health:
    """"ok", "draining", "no_space" or "unavailable", with a message for the last three."""

    status: str
    message: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Health:
        f = _Fields(data, "health")
        return cls(f.string("status"), f.string_or_none("message"), f.rest())


@dataclass(frozen=True, slots=True)
class Stats:
    """Server-wide counts (GET /v1/stats)."""

    version: str
    uptime: timedelta
    draining: bool
    ready: int
    delayed: int
    reserved: int
    buried: int
    urgent: int
    total_jobs: int
    job_timeouts: int
    tubes: int
    next_id: int
    waiting: int
    deletes: int
    buries: int
    fired: int
    fire_lateness: FireLateness
    connections: dict[str, int]
    health: Health
    # "local" (the embedded store) or "redis"; "local" from a server too old to say.
    mode: str = "local"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Stats:
        f = _Fields(data, "stats")
        return cls(
            version=f.string("version"),
            mode=f.string_or_none("mode") or "local",
            uptime=timedelta(seconds=f.integer("uptime_s")),
            draining=f.boolean("draining"),
            ready=f.integer("ready"),
            delayed=f.integer("delayed"),
            reserved=f.integer("reserved"),
            buried=f.integer("buried"),
            urgent=f.integer("urgent"),
            total_jobs=f.integer("total_jobs"),
            job_timeouts=f.integer("job_timeouts"),
            tubes=f.integer("tubes"),
            next_id=f.integer("next_id"),
            waiting=f.integer("waiting"),
            deletes=f.integer("deletes"),
            buries=f.integer("buries"),
            fired=f.integer("fired"),
            fire_lateness=f.obj("fire_lateness", FireLateness.from_json),
            connections={k: int(v) for k, v in f.mapping("connections").items()},
            health=f.obj("health", Health.from_json),
            extra=f.rest(),
        )


@dataclass(frozen=True, slots=True)
class Backup:
    """A finished backup: the copy's directory, the jobs held then, its size, its time."""

    dir: str
    jobs: int
    bytes: int
    took: timedelta
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Backup:
        f = _Fields(data, "backup")
        return cls(f.string("dir"), f.integer("jobs"), f.integer("bytes"), f.ms("took_ms"), f.rest())


def read_int(data: Any, name: str, what: str) -> int:
    """One integer field of a small answer ({"deleted": 3}, {"kicked": 2}, ...)."""
    return _Fields(data, what).integer(name)

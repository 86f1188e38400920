"""times.py — durations and times between Python and the HTTP API.

Requests: a duration is a `datetime.timedelta` (sent as whole milliseconds, rounded up, as the
server rounds) or one of the server's own strings ("10m", "1h30m", "250ms"), passed through
for the server to check; plain numbers are refused, since whether 10 means seconds or
milliseconds is exactly the mistake they invite. A time is an aware `datetime`, sent as Unix
milliseconds rounded up (the server rounds a time up too, so a job is never due early); a
naive one is refused with ValueError, since it names no instant.

Answers: `*_unix_ms` integers become aware UTC datetimes, RFC 3339 strings keep their offset,
`*_ms`/`*_s` integers and duration strings ("1m30s") become timedeltas.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Union

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Duration = Union[timedelta, str]
"""A request's duration: a timedelta, or the server's duration string ("10m", "1h30m")."""

_ONE_US = timedelta(microseconds=1)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def duration_ms(value: timedelta) -> int:
    """A timedelta in whole milliseconds, rounded up; ValueError if negative."""
    if value < timedelta(0):
        raise ValueError(f"a duration cannot be negative: {value!r}")
    return _ceil_div(value // _ONE_US, 1000)


def encode_duration(value: Duration, name: str) -> str:
    """The request form of a duration field `name`."""
    if isinstance(value, timedelta):
        return f"{duration_ms(value)}ms"
    if isinstance(value, str):
        return value
    raise TypeError(
        f"{name}: a duration is a datetime.timedelta or a string such as '10m', "
        f"not {type(value).__name__}"
    )


def unix_ms(value: datetime, name: str = "time") -> int:
    """An aware datetime as Unix milliseconds, rounded up; ValueError for a naive one."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name}: a time is an aware datetime.datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name}: {value.isoformat()} is naive (no time zone), so it names no instant; "
            "give it a tzinfo, e.g. datetime.now(timezone.utc)"
        )
    return _ceil_div((value - EPOCH) // _ONE_US, 1000)


def from_unix_ms(value: int) -> datetime:
    """Unix milliseconds as an aware UTC datetime (exact, no float)."""
    return EPOCH + timedelta(milliseconds=value)


def parse_time(text: str) -> datetime:
    """An RFC 3339 time from an answer ("2026-11-24T08:00:00.000Z", "...+01:00"), with its
    offset."""
    return datetime.fromisoformat(text)


_UNIT = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1),
         "s": timedelta(seconds=1), "ms": timedelta(milliseconds=1)}
_PART = re.compile(r"(\d+(?:\.\d*)?)(ms|d|h|m|s)")


def parse_duration(text: str) -> timedelta:
    """A duration string of an answer ("1m30s", "0ms", "250", "2.5s") as a timedelta."""
    if text.isdigit():
        return timedelta(milliseconds=int(text))
    total = timedelta(0)
    at = 0
    for part in _PART.finditer(text):
        if part.start() != at:
            break
        total += _UNIT[part.group(2)] * float(part.group(1))
        at = part.end()
    if at != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total

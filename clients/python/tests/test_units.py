"""The conversions and the error table, without a server: durations and times as sent,
answers as read (unknown fields kept), and error codes to classes."""

from __future__ import annotations

import http.server
import threading
from datetime import datetime, timedelta, timezone

import pytest

import delayq
from delayq.errors import error_for
from delayq.times import encode_duration, parse_duration, unix_ms


def test_a_timedelta_is_sent_in_whole_milliseconds_rounded_up() -> None:
    assert encode_duration(timedelta(minutes=10), "delay") == "600000ms"
    assert encode_duration(timedelta(microseconds=1001), "delay") == "2ms"
    assert encode_duration(timedelta(0), "delay") == "0ms"


def test_the_servers_duration_strings_pass_through_and_numbers_are_refused() -> None:
    assert encode_duration("1h30m", "delay") == "1h30m"
    with pytest.raises(TypeError, match="timedelta"):
        encode_duration(10, "delay")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        encode_duration(timedelta(seconds=-1), "delay")


def test_a_naive_datetime_is_refused_and_an_aware_one_is_exact() -> None:
    with pytest.raises(ValueError, match="naive"):
        unix_ms(datetime(2030, 1, 1, 9, 0))
    paris_winter = timezone(timedelta(hours=1))
    assert unix_ms(datetime(2026, 11, 24, 11, 0, tzinfo=paris_winter)) == 1795514400000
    # A fraction beyond the millisecond rounds up, so a job is never due early.
    assert unix_ms(datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc)) == 1


@pytest.mark.parametrize("text, expected", [
    ("1m30s", timedelta(seconds=90)), ("0ms", timedelta(0)), ("250", timedelta(milliseconds=250)),
    ("1.5s", timedelta(milliseconds=1500)), ("1d2h", timedelta(hours=26)),
    ("48h", timedelta(hours=48)), ("1h0m0s5ms", timedelta(hours=1, milliseconds=5)),
])
def test_duration_strings_of_answers_are_read(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "soon", "1 h", "5x", "m"])
def test_malformed_duration_strings_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


JOB = {
    "id": 7, "tube": "orders", "state": "reserved", "priority": 10,
    "due": "2026-11-26T09:00:00.000Z", "due_unix_ms": 1795683600000, "delay_ms": 1882,
    "ttr_ms": 60000, "created": "2026-11-25T14:40:02.118Z",
    "reserved_until": "2026-11-26T09:01:00.000Z", "reserved_until_unix_ms": 1795683660000,
    "key": "expire:123",
    "counters": {"reserves": 2, "timeouts": 0, "releases": 2, "buries": 0, "kicks": 0,
                 "touches": 4},
    "body_base64": "AP8BgA==", "shard": 5,
}


def test_a_job_is_read_with_its_types_and_keeps_unknown_fields() -> None:
    job = delayq.Job.from_json(JOB)
    assert job.id == 7 and job.state == "reserved" and job.priority == 10
    assert job.due == datetime(2026, 11, 26, 9, 0, tzinfo=timezone.utc)
    assert job.delay == timedelta(milliseconds=1882) and job.ttr == timedelta(minutes=1)
    assert job.created == datetime(2026, 11, 25, 14, 40, 2, 118000, tzinfo=timezone.utc)
    assert job.reserved_until == datetime(2026, 11, 26, 9, 1, tzinfo=timezone.utc)
    assert job.body == b"\x00\xff\x01\x80"
    assert job.extra == {"shard": 5}
    assert job.counters.releases == 2 and job.counters.extra == {"touches": 4}
    with pytest.raises(UnicodeDecodeError):
        job.text


def test_a_debounced_put_is_read_as_debounced_not_existed() -> None:
    job = delayq.Job.from_json(dict(JOB, debounced=True), existed=True)  # its 200
    assert job.debounced and not job.existed and "debounced" not in job.extra
    assert not delayq.Job.from_json(JOB).debounced


def test_an_answer_without_a_needed_field_is_an_unexpected_response() -> None:
    broken = dict(JOB)
    del broken["tube"]
    with pytest.raises(delayq.UnexpectedResponse, match="tube"):
        delayq.Job.from_json(broken)
    with pytest.raises(delayq.UnexpectedResponse, match="priority"):
        delayq.Job.from_json(dict(JOB, priority="high"))


@pytest.mark.parametrize("status, code, cls", [
    (400, "bad_request", delayq.BadRequest), (401, "unauthorized", delayq.Unauthorized),
    (403, "forbidden", delayq.Forbidden), (404, "not_found", delayq.NotFound),
    (404, "no_route", delayq.NoRoute), (405, "method_not_allowed", delayq.MethodNotAllowed),
    (409, "conflict", delayq.Conflict), (413, "too_large", delayq.TooLarge),
    (431, "headers_too_large", delayq.HeadersTooLarge), (500, "internal", delayq.Internal),
    (501, "unsupported", delayq.Unsupported), (503, "draining", delayq.Draining),
    (503, "unavailable", delayq.Unavailable), (503, "stopping", delayq.Stopping),
    (503, "starting", delayq.Starting), (503, "limit", delayq.Limit),
    (507, "no_space", delayq.NoSpace), (503, "no_space", delayq.NoSpace),
])
def test_each_documented_code_has_its_class(status: int, code: str, cls: type) -> None:
    error = error_for(status, code, "why")
    assert type(error) is cls
    assert isinstance(error, delayq.DelayqError)
    assert (error.status, error.code, error.message) == (status, code, "why")


def test_an_unknown_code_falls_back_to_its_status_and_keeps_the_code() -> None:
    error = error_for(503, "overloaded", "later", retry_after=2)
    assert type(error) is delayq.ServiceUnavailable
    assert error.code == "overloaded" and error.retry_after == 2
    assert type(error_for(418, "teapot", "no")) is delayq.DelayqError


def test_an_error_page_that_is_not_delayqds_is_an_unexpected_response() -> None:
    # A proxy's pages, or a wrong base URL: a 404 there says nothing of a job.
    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status = 404 if self.path.startswith("/v1/jobs/") else 503
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            if status == 503:
                self.send_header("Retry-After", "3")
            self.end_headers()
            self.wfile.write(b"<html>not here</html>")

        def log_message(self, *args: object) -> None:
            pass

    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        wrong = delayq.Client(f"http://127.0.0.1:{proxy.server_address[1]}")
        with pytest.raises(delayq.UnexpectedResponse, match="is it delayqd") as missing:
            wrong.get_job(1)
        assert not isinstance(missing.value, delayq.NotFound)
        assert missing.value.status == 404
        with pytest.raises(delayq.UnexpectedResponse) as busy:
            wrong.stats()
        assert (busy.value.status, busy.value.retry_after) == (503, 3.0)
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()


@pytest.mark.parametrize("job_id", [1.9, True, "1", None])
def test_a_job_id_that_is_not_an_int_is_refused_before_anything_is_sent(job_id: object) -> None:
    offline = delayq.Client("http://127.0.0.1:9")
    for call in (offline.get_job, offline.delete_job, offline.touch, offline.kick_job):
        with pytest.raises(TypeError, match="job_id: an int"):
            call(job_id)  # type: ignore[arg-type]


def test_a_put_of_the_wrong_types_is_refused_before_anything_is_sent() -> None:
    offline = delayq.Client("http://127.0.0.1:9")
    with pytest.raises(TypeError, match="name is a str, not int"):
        offline.put(123, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="body: str or bytes, not NoneType"):
        offline.put("t", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="replace: a bool, not str"):
        offline.put("t", "x", replace="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wait: a duration"):
        next(offline.jobs("t", wait=1))  # type: ignore[arg-type]

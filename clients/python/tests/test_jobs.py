"""Jobs, keys and groups against the real server: put, get, reschedule, delete, by id and by
(tube, key); list and cancel a group."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

import delayq


def now() -> datetime:
    return datetime.now(timezone.utc)


def test_put_a_ready_job_and_get_it_with_its_body(client: delayq.Client, tube: str) -> None:
    before = now()
    job = client.put(tube, "hello", priority=10, ttr=timedelta(seconds=30))
    assert (job.tube, job.state, job.priority) == (tube, "ready", 10)
    assert job.ttr == timedelta(seconds=30) and job.delay == timedelta(0)
    assert job.body is None and not job.existed
    assert before - timedelta(seconds=1) <= job.created <= now() + timedelta(seconds=1)
    got = client.get_job(job.id)
    assert got.id == job.id and got.text == "hello" and got.state == "ready"


def test_put_many_puts_each_job_as_put_would_and_answers_each(client: delayq.Client, tube: str) -> None:
    answers = client.put_many([
        delayq.PutJob(tube, "one", key="k"),
        delayq.PutJob(tube, "two", key="k"),
        delayq.PutJob(f"{tube}-later", b"\x00\xff", delay=timedelta(hours=1), priority=7),
        delayq.PutJob(tube, "x", priority=-1),
    ])
    first, again, later, refused = answers
    assert isinstance(first, delayq.Job) and first.state == "ready" and not first.existed
    assert isinstance(again, delayq.Job) and again.id == first.id and again.existed
    assert isinstance(later, delayq.Job) and later.state == "delayed" and later.priority == 7
    assert isinstance(refused, delayq.BadRequest) and refused.status == 400
    assert client.get_job(later.id).body == b"\x00\xff"
    assert client.reserve(tube, timeout=timedelta(0)).text == "one"
    with pytest.raises(delayq.BadRequest):
        client.put_many([])


def test_reserve_many_takes_the_ready_jobs_most_urgent_first(client: delayq.Client, tube: str) -> None:
    for priority in (5, 1, 3):
        client.put(tube, f"p{priority}", priority=priority)
    taken = client.reserve_many(tube, 2)
    assert [job.text for job in taken] == ["p1", "p3"]
    assert all(job.state == "reserved" and job.reserved_until is not None for job in taken)
    rest = client.reserve_many([tube], 10, timeout=timedelta(seconds=5))
    assert [job.text for job in rest] == ["p5"]
    assert client.reserve_many(tube, 10, timeout=timedelta(milliseconds=200)) == []
    for job in taken + rest:
        client.delete_job(job.id)
    with pytest.raises(delayq.BadRequest):
        client.reserve_many(tube, 101)


def test_put_binary_bytes_and_json(client: delayq.Client, tube: str) -> None:
    binary = client.put(tube, b"\x00\xff\x01\x80")
    assert client.get_job(binary.id).body == b"\x00\xff\x01\x80"
    text = client.put(tube, '{"user": 42}'.encode())
    assert client.get_job(text.id).json() == {"user": 42}


def test_put_with_a_delay_is_delayed_until_due(client: delayq.Client, tube: str) -> None:
    before = now()
    job = client.put(tube, "x", delay=timedelta(minutes=10))
    assert job.state == "delayed" and job.delay == timedelta(minutes=10)
    assert timedelta(minutes=9) < job.due - before < timedelta(minutes=11)
    assert client.put(tube, "y", delay="1h30m").delay == timedelta(minutes=90)


def test_put_at_an_aware_time_and_refuse_a_naive_one(client: delayq.Client, tube: str) -> None:
    at = datetime(2031, 6, 1, 9, 30, 0, 250500, tzinfo=timezone(timedelta(hours=2)))
    job = client.put(tube, "x", at=at)
    assert job.state == "delayed"
    # Fractions beyond the millisecond round up.
    assert job.due == datetime(2031, 6, 1, 7, 30, 0, 251000, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="naive"):
        client.put(tube, "x", at=datetime(2031, 6, 1, 9, 30))
    assert client.tube_stats(tube).total_jobs == 1  # the naive put sent nothing


def test_a_time_not_in_the_future_makes_the_job_ready(client: delayq.Client, tube: str) -> None:
    assert client.put(tube, "x", at=now() - timedelta(hours=1)).state == "ready"


def test_a_key_makes_a_retried_put_harmless(client: delayq.Client, tube: str) -> None:
    first = client.put(tube, "first", delay="1h", key="welcome:42")
    again = client.put(tube, "second", key="welcome:42")
    assert again.existed and again.id == first.id and again.state == "delayed"
    assert client.get_key(tube, "welcome:42").text == "first"
    replaced = client.put(tube, "third", key="welcome:42", replace=True)
    assert not replaced.existed and replaced.id != first.id
    with pytest.raises(delayq.NotFound):
        client.get_job(first.id)
    assert client.get_key(tube, "welcome:42").text == "third"


def test_replace_of_a_reserved_holder_is_a_conflict(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x", key="k")
    assert client.reserve(tube).id == job.id  # type: ignore[union-attr]
    with pytest.raises(delayq.Conflict) as error:
        client.put(tube, "y", key="k", replace=True)
    assert error.value.status == 409 and error.value.code == "conflict"
    assert client.get_key(tube, "k").id == job.id


def test_a_debounce_moves_the_pending_holder_of_its_key(client: delayq.Client, tube: str) -> None:
    first = client.put(tube, "first", key="k", debounce="1h")
    assert first.state == "delayed" and not first.debounced and not first.existed
    assert timedelta(minutes=59) < first.due - now() <= timedelta(hours=1)
    moved = client.put(tube, "second", key="k", debounce=timedelta(hours=2), priority=7)
    assert moved.debounced and not moved.existed
    assert moved.id == first.id and moved.created == first.created
    assert timedelta(minutes=119) < moved.due - now() <= timedelta(hours=2)
    got = client.get_job(first.id)
    assert got.text == "second" and got.priority == 7 and not got.debounced
    stats = client.tube_stats(tube)
    assert (stats.ready, stats.delayed) == (0, 1)
    for bad in ({"debounce": "1m"}, {"key": "k", "debounce": "1m", "delay": "1m"},
                {"key": "k", "debounce": "1m", "replace": True}, {"key": "k", "max_wait": "1m"}):
        with pytest.raises(delayq.BadRequest):
            client.put(tube, "x", **bad)  # type: ignore[arg-type]


def test_max_wait_caps_how_far_a_debounce_moves_a_job(client: delayq.Client, tube: str) -> None:
    first = client.put(tube, "a", key="k", debounce="10m", max_wait="30m")
    moved = client.put(tube, "b", key="k", debounce="1h", max_wait="30m")
    assert moved.debounced and moved.id == first.id
    assert abs(moved.due - (first.created + timedelta(minutes=30))) <= timedelta(milliseconds=1)


def test_a_debounce_replaces_a_buried_holder_and_conflicts_with_a_reserved_one(
        client: delayq.Client, tube: str) -> None:
    held = client.put(tube, "x", key="k")
    reserved = client.reserve(tube, timeout=timedelta(0))
    assert reserved is not None and reserved.id == held.id
    with pytest.raises(delayq.Conflict):
        client.put(tube, "y", key="k", debounce="1m")
    client.bury(held.id)
    replaced = client.put(tube, "z", key="k", debounce="1m")
    assert replaced.id != held.id and not replaced.debounced and replaced.state == "delayed"
    assert client.get_key(tube, "k").text == "z"


def test_a_url_needs_a_webhook_and_a_content_type_is_kept(client: delayq.Client, tube: str) -> None:
    with pytest.raises(delayq.Conflict):
        client.put(tube, "x", url="http://127.0.0.1:9/hook")
    job = client.put(tube, "{}", content_type="application/json")
    got = client.get_job(job.id)
    assert got.content_type == "application/json" and got.url is None


def test_a_trace_context_is_kept_and_comes_back_reserved(client: delayq.Client, tube: str) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    job = client.put(tube, "x", traceparent=parent, tracestate="rojo=1")
    assert job.traceparent == parent and job.tracestate == "rojo=1"
    assert client.get_job(job.id).traceparent == parent
    reserved = client.reserve(tube, timeout=timedelta(0))
    assert reserved is not None and reserved.id == job.id and reserved.traceparent == parent
    with pytest.raises(delayq.BadRequest) as error:
        client.put(tube, "x", traceparent="00-not-a-trace")
    assert "traceparent" in str(error.value)


def test_names_with_slashes_spaces_and_non_ascii(client: delayq.Client, tube: str) -> None:
    name = f"eu/{tube}"
    key = "order 7/é%"
    job = client.put(name, "x", key=key, group="user 42/β")
    assert job.tube == name and job.key == key
    assert client.get_key(name, key).id == job.id
    assert [j.id for j in client.list_group(name, "user 42/β")] == [job.id]
    assert client.delete_key(name, key) == job.id


def test_reschedule_by_id(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x", delay="1h")
    ready = client.reschedule(job.id, delay=timedelta(0))
    assert ready.state == "ready" and ready.delay == timedelta(0)
    at = now() + timedelta(days=2)
    later = client.reschedule(job.id, at=at, priority=5)
    assert later.state == "delayed" and later.priority == 5
    assert abs(later.due - at) < timedelta(milliseconds=2)
    with pytest.raises(delayq.BadRequest):
        client.reschedule(job.id)  # no field
    with pytest.raises(delayq.NotFound):
        client.reschedule(10**12, delay="1s")


def test_a_reserved_job_gets_a_priority_but_no_new_due_time(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x")
    client.reserve(tube)
    assert client.reschedule(job.id, priority=3).priority == 3
    with pytest.raises(delayq.Conflict):
        client.reschedule(job.id, delay="1m")
    assert client.get_job(job.id).priority == 3


def test_reschedule_get_and_delete_by_key(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "mail", delay="48h", key="welcome:42")
    now_ready = client.reschedule_key(tube, "welcome:42", delay="0s")
    assert now_ready.id == job.id and now_ready.state == "ready"
    assert client.reschedule_key(tube, "welcome:42", priority=1).priority == 1
    assert client.get_key(tube, "welcome:42").text == "mail"
    assert client.delete_key(tube, "welcome:42") == job.id
    with pytest.raises(delayq.NotFound):
        client.get_key(tube, "welcome:42")
    with pytest.raises(delayq.NotFound):
        client.reschedule_key(tube, "welcome:42", delay="1s")
    with pytest.raises(delayq.NotFound):
        client.delete_key(tube, "welcome:42")
    assert not client.put(tube, "again", key="welcome:42").existed  # the key is free again


def test_delete_a_job(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x", delay="1h")
    assert client.delete_job(job.id) == job.id
    with pytest.raises(delayq.NotFound):
        client.get_job(job.id)
    with pytest.raises(delayq.NotFound):
        client.delete_job(job.id)


def test_groups_list_every_state_and_cancel_leaves_reserved_jobs(client: delayq.Client, tube: str) -> None:
    delayed = client.put(tube, "a", delay="1h", group="user:42")
    ready = client.put(tube, "b", group="user:42")
    listed = client.list_group(tube, "user:42")
    assert sorted(j.id for j in listed) == sorted([delayed.id, ready.id])
    assert all(j.group == "user:42" and j.body is None for j in listed)
    reserved = client.reserve(tube)
    assert reserved is not None and reserved.id == ready.id
    # Put after the reserve: in Redis mode a reserve takes the oldest put of the first shard it
    # finds holding a ready job, and another group's job may sit on another shard.
    client.put(tube, "other", group="user:7")
    assert client.cancel_group(tube, "user:42") == 1
    assert [j.id for j in client.list_group(tube, "user:42")] == [reserved.id]
    assert client.list_group(tube, "nobody") == [] and client.cancel_group(tube, "nobody") == 0
    assert len(client.list_group(tube, "user:7")) == 1


def test_refusals_of_a_put(client: delayq.Client, tube: str) -> None:
    with pytest.raises(delayq.BadRequest):
        client.put("-bad", "x")
    with pytest.raises(delayq.BadRequest):
        client.put(tube, "x", delay="soon")
    with pytest.raises(delayq.BadRequest):
        client.put(tube, "x", key="k" * 201)
    with pytest.raises(delayq.TooLarge) as error:
        client.put(tube, b"x" * 70000)
    assert error.value.status == 413
    with pytest.raises(TypeError):
        client.put(tube, "x", priority=True)
    with pytest.raises(TypeError):
        client.put(tube, "x", delay=5)  # type: ignore[arg-type]
    # Refused before sending: an empty name (a path of no route), a name that is not text, a
    # number JSON cannot carry.
    with pytest.raises(ValueError, match="empty"):
        client.put("", "x")
    with pytest.raises(ValueError, match="empty"):
        client.get_key(tube, "")
    with pytest.raises(ValueError, match="UTF-8"):
        client.get_key(tube, "\udcff")
    with pytest.raises(ValueError, match="JSON"):
        client.set_webhook(tube, "http://127.0.0.1:9/", rate=float("nan"))
    with pytest.raises(TypeError, match="timedelta"):
        client.worker(tube, lambda job: None, wait="5s")  # type: ignore[arg-type]
    with pytest.raises(delayq.NotFound):
        client.tube_stats(tube)  # nothing was put

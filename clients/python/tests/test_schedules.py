"""Schedules: set, get, list, next, preview, pause, resume, trigger, backfill, remove; the same
in both modes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Callable

import pytest

import delayq

UTC = timezone.utc


def name() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def test_set_and_get_an_interval_schedule(client: delayq.Client, tube: str) -> None:
    n = name()
    start = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    schedule = client.set_schedule(
        n, tube, every=timedelta(hours=1), body=b"\x00report", priority=7, ttr="5m",
        group="reports", start_at=start, end_at=start + timedelta(days=1), limit=100,
        jitter=timedelta(seconds=30), misfire="all", max_lateness="2h", overlap="skip")
    assert (schedule.name, schedule.tube, schedule.every, schedule.cron) == (
        n, tube, timedelta(hours=1), None)
    assert schedule.body == b"\x00report" and schedule.priority == 7
    assert schedule.ttr == timedelta(minutes=5) and schedule.group == "reports"
    assert schedule.start_at == start and schedule.end_at == start + timedelta(days=1)
    assert schedule.limit == 100 and schedule.jitter == timedelta(seconds=30)
    assert (schedule.misfire, schedule.overlap, schedule.paused) == ("all", "skip", False)
    assert schedule.max_lateness == timedelta(hours=2) and schedule.next == start
    assert schedule.runs == 0 and schedule.last_run is None and schedule.waiting_run is None
    assert client.get_schedule(n) == schedule
    client.remove_schedule(n)


def test_a_cron_schedule_follows_its_zone(client: delayq.Client, tube: str) -> None:
    n = name()
    schedule = client.set_schedule(n, tube, cron="0 3 * * *", tz="Europe/Paris", body="daily")
    assert schedule.cron == "0 3 * * *" and schedule.tz == "Europe/Paris"
    # Its run is put 10 s before its instant: none yet.
    assert schedule.next is not None and schedule.runs == 0
    assert (schedule.next.hour, schedule.next.minute) == (3, 0)  # Paris time, its offset kept
    with pytest.raises(delayq.NotFound):
        client.get_key(tube, f"{n}@{int(schedule.next.timestamp() * 1000)}")
    runs = client.next_runs(n, count=3)
    assert runs[0] == schedule.next and all((r.hour, r.minute) == (3, 0) for r in runs)
    assert all(timedelta(hours=23) <= b - a <= timedelta(hours=25) for a, b in zip(runs, runs[1:]))
    after = datetime(2031, 7, 1, tzinfo=UTC)
    summer = client.next_runs(n, count=1, after=after)[0]
    assert summer.utcoffset() == timedelta(hours=2) and summer.hour == 3
    assert client.remove_schedule(n).next is None
    with pytest.raises(delayq.NotFound):
        client.get_schedule(n)


def test_a_run_within_ten_seconds_waits_as_a_delayed_job(client: delayq.Client, tube: str) -> None:
    n = name()
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=8)
    schedule = client.set_schedule(n, tube, every="1h", start_at=start, body="soon")
    assert schedule.next == start and schedule.runs == 1
    ahead = client.get_key(tube, f"{n}@{int(start.timestamp() * 1000)}")
    assert ahead.state == "delayed" and ahead.text == "soon" and ahead.due == start
    assert ahead.schedule is not None and ahead.schedule.name == n
    assert client.remove_schedule(n).next is None
    with pytest.raises(delayq.NotFound):  # withdrawn with its schedule
        client.get_key(tube, ahead.key or "")


def test_pause_resume_and_trigger(client: delayq.Client, tube: str) -> None:
    n = name()
    client.set_schedule(n, tube, every="1h", body="tick")
    paused = client.pause_schedule(n)
    assert paused.paused and paused.next is None
    assert client.pause_schedule(n) == paused  # twice changes nothing
    run = client.trigger_schedule(n)
    assert run.state == "ready" and run.key is not None and run.key.startswith(f"{n}@")
    assert run.schedule is not None and run.schedule.name == n and not run.existed
    assert client.get_job(run.id).text == "tick"
    resumed = client.resume_schedule(n)
    assert not resumed.paused and resumed.next is not None
    assert resumed.last_run is not None
    client.remove_schedule(n)


def test_backfill_puts_one_run_per_instant_once(client: delayq.Client, tube: str) -> None:
    n = name()
    client.set_schedule(n, tube, cron="0 * * * *", body="hourly")
    top = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = top - timedelta(hours=3), top - timedelta(hours=1)
    jobs = client.backfill_schedule(n, start, end)
    assert [j.schedule.instant for j in jobs if j.schedule] == [
        start, start + timedelta(hours=1), end]
    assert all(j.state == "ready" for j in jobs)
    again = client.backfill_schedule(n, start, end)
    assert [j.id for j in again] == [j.id for j in jobs]  # the jobs standing, not new ones
    with pytest.raises(delayq.BadRequest):
        client.backfill_schedule(n, end, start)
    client.remove_schedule(n)


def test_list_schedules_a_page_at_a_time(client: delayq.Client, tube: str) -> None:
    prefix = name()
    names = [f"{prefix}-{i}" for i in range(3)]
    for n in names:
        client.set_schedule(n, tube, every="1h", paused=True)
    page = client.list_schedules(after=f"{prefix}-", limit=2)
    assert [s.name for s in page.schedules] == names[:2] and page.more
    rest = client.list_schedules(after=names[1], limit=2)
    assert [s.name for s in rest.schedules][:1] == names[2:]
    every = [s.name for s in client.schedules(page_size=1)]
    assert [x for x in every if x.startswith(prefix)] == names and every == sorted(every)
    for n in names:
        client.remove_schedule(n)


def test_schedule_refusals(client: delayq.Client, tube: str) -> None:
    with pytest.raises(delayq.BadRequest):
        client.set_schedule(name(), tube, cron="0 9 32 * *")
    with pytest.raises(delayq.BadRequest):
        client.set_schedule(name(), tube, cron="@daily", every="1h")
    with pytest.raises(delayq.BadRequest):
        client.set_schedule("bad name", tube, every="1h")
    with pytest.raises(delayq.Conflict):
        client.set_schedule(name(), tube, every="1h", url="http://127.0.0.1:9/x")
    calls: list[Callable[[str], object]] = [
        client.get_schedule, client.remove_schedule, client.pause_schedule,
        client.resume_schedule, client.trigger_schedule, client.next_runs]
    for call in calls:
        with pytest.raises(delayq.NotFound):
            call(name())


def test_preview_without_setting_anything(client: delayq.Client, tube: str) -> None:
    start = datetime(2026, 3, 27, 9, 0, tzinfo=timezone(timedelta(hours=1)))
    runs = client.preview_schedule(tube, every="24h", tz="Europe/Paris", start_at=start,
                                   after=datetime(2026, 3, 27, tzinfo=UTC), count=4)
    assert [r.isoformat() for r in runs] == [
        "2026-03-27T09:00:00+01:00", "2026-03-28T09:00:00+01:00",
        "2026-03-29T10:00:00+02:00", "2026-03-30T10:00:00+02:00"]
    with pytest.raises(delayq.BadRequest):
        client.preview_schedule(tube, cron="not cron")

"""Tubes: list, stats, pause, max_attempts, kick (test_reserve), flow control, the job list
and the due counts (local store only: Redis mode answers 501 for those two)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

import delayq
from conftest import local_only, redis_only


def test_tube_stats_count_each_state(client: delayq.Client, tube: str) -> None:
    client.put(tube, "urgent", priority=5)
    client.put(tube, "ready")
    client.put(tube, "later", delay="1h")
    client.put(tube, "buried")
    reserved = client.reserve(tube)
    assert reserved is not None
    buried = client.reserve(tube)
    assert buried is not None
    client.bury(buried.id)
    stats = client.tube_stats(tube)
    assert stats.name == tube
    assert (stats.ready, stats.delayed, stats.reserved, stats.buried) == (1, 1, 1, 1)
    assert stats.urgent == 0 and stats.total_jobs == 4 and stats.deletes == 0
    assert stats.pause == timedelta(0) and stats.max_attempts == 0 and stats.group_weights == {}
    listed = {t.name: t for t in client.list_tubes()}
    assert listed[tube].buried == 1 and listed[tube].total_jobs == 4
    assert "default" in listed
    names = [t.name for t in client.list_tubes()]
    assert names == sorted(names)


def test_an_unknown_tube_is_not_found_and_looking_does_not_create_it(client: delayq.Client, tube: str) -> None:
    with pytest.raises(delayq.NotFound):
        client.tube_stats(tube)
    assert tube not in [t.name for t in client.list_tubes()]


def test_a_paused_tube_hands_out_nothing(client: delayq.Client, tube: str) -> None:
    job = client.put(tube, "x")
    assert client.pause_tube(tube, timedelta(minutes=1)) == timedelta(minutes=1)
    stats = client.tube_stats(tube)
    assert stats.pause == timedelta(minutes=1)
    # The server rounds the time left up: 60001 ms of a 60 s pause have been seen.
    assert timedelta(seconds=50) < stats.pause_left <= timedelta(seconds=61)
    assert client.reserve(tube, timeout="200ms") is None
    assert client.pause_tube(tube, "0s") == timedelta(0)
    got = client.reserve(tube)
    assert got is not None and got.id == job.id
    with pytest.raises(delayq.NotFound):
        client.pause_tube(tube + "-none", "10s")


def test_max_attempts_buries_after_the_last_allowed_reservation(client: delayq.Client, tube: str) -> None:
    assert client.set_max_attempts(tube, 2) == 2
    job = client.put(tube, "x")
    assert client.tube_stats(tube).max_attempts == 2
    first = client.reserve(tube)
    assert first is not None and client.release(first.id).state == "ready"
    second = client.reserve(tube)
    assert second is not None and second.id == job.id
    buried = client.release(second.id)
    assert buried.state == "buried" and buried.counters.buries == 1
    assert client.set_max_attempts(tube, 0) == 0
    with pytest.raises(delayq.BadRequest):
        client.set_max_attempts(tube, 1000001)


def test_set_flow_changes_only_the_settings_given(client: delayq.Client, tube: str) -> None:
    flow = client.set_flow(tube, group_concurrency=2, fair=True, group_rate="10/s", group_burst=3)
    assert flow == delayq.FlowSettings(tube, 2, True, "10/1s", 3)
    client.put(tube, "x", group="g")  # the settings were kept while the tube did not exist
    stats = client.tube_stats(tube)
    assert (stats.group_concurrency, stats.fair, stats.group_rate, stats.group_burst) == (2, True, "10/1s", 3)
    assert (stats.groups_held, stats.groups_ready) == (0, 1) and stats.extra == {}
    listed = {t.name: t for t in client.list_tubes()}[tube]
    assert listed.group_rate == "10/1s" and listed.extra == {}
    off = client.set_flow(tube, group_concurrency=None, group_rate=None)
    assert off == delayq.FlowSettings(tube, 0, True, None, 3)
    assert client.set_flow(tube, fair=False, group_rate="1/1500ms").group_rate == "1/1s500ms"
    assert client.set_flow(tube, group_concurrency=0).group_concurrency == 0
    for bad in ({"group_burst": 0}, {"group_rate": "fast"}, {"group_concurrency": 1000001}):
        with pytest.raises(delayq.BadRequest):
            client.set_flow(tube, **bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.set_flow(tube)
    with pytest.raises(TypeError):
        client.set_flow(tube, group_burst=None)  # type: ignore[arg-type]
    assert client.tube_stats(tube).group_rate == "1/1s500ms"


def test_set_flow_changes_only_the_group_weights_named(client: delayq.Client, tube: str) -> None:
    weighted = client.set_flow(tube, fair=True, group_weights={"gold": 3, "silver": 2})
    client.put(tube, "x", group="gold")
    assert weighted == delayq.FlowSettings(tube, 0, True, None, 1, {"gold": 3, "silver": 2})
    assert client.tube_stats(tube).group_weights == {"gold": 3, "silver": 2}
    listed = {t.name: t for t in client.list_tubes()}[tube]
    assert listed.group_weights == {"gold": 3, "silver": 2} and listed.extra == {}
    # None and 1 both set a group back to the default, which the server then leaves unnamed.
    assert client.set_flow(tube, group_weights={"gold": None}).group_weights == {"silver": 2}
    assert client.set_flow(tube, group_weights={"silver": 1}).group_weights == {}
    assert client.tube_stats(tube).group_weights == {}
    for weight in (0, 1001):
        with pytest.raises(delayq.BadRequest):
            client.set_flow(tube, group_weights={"gold": weight})
    for bad in ({"gold": "3"}, {"gold": True}, None, ["gold"]):
        with pytest.raises(TypeError):
            client.set_flow(tube, group_weights=bad)  # type: ignore[arg-type]
    assert client.tube_stats(tube).group_weights == {}


def test_group_concurrency_holds_back_a_groups_second_job(client: delayq.Client, tube: str) -> None:
    client.set_flow(tube, group_concurrency=1)
    first = client.put(tube, "a1", group="a")
    second = client.put(tube, "a2", group="a")
    other = client.put(tube, "b1", group="b")
    assert client.tube_stats(tube).groups_ready == 2
    taken = client.reserve(tube, timeout=timedelta(0))
    assert taken is not None and taken.id == first.id
    # a2 is next by id, but group a has a job reserved: b1 comes instead.
    taken = client.reserve(tube, timeout=timedelta(0))
    assert taken is not None and taken.id == other.id
    assert client.reserve(tube, timeout=timedelta(0)) is None
    stats = client.tube_stats(tube)
    assert (stats.ready, stats.groups_held, stats.groups_ready) == (1, 1, 0)
    client.delete_job(first.id)
    taken = client.reserve(tube, timeout=timedelta(0))
    assert taken is not None and taken.id == second.id


@redis_only
def test_redis_mode_sets_flow_control_only_before_a_tubes_first_job(
    client: delayq.Client, tube: str
) -> None:
    # Flow control keeps all of a tube's jobs in one shard there.
    client.put(tube, "x", group="a")
    with pytest.raises(delayq.Conflict) as error:
        client.set_flow(tube, group_concurrency=1)
    assert "before its first job" in str(error.value)
    stats = client.tube_stats(tube)
    assert (stats.group_concurrency, stats.fair, stats.group_rate, stats.group_weights) == (0, False, None, {})


@local_only("GET /v1/tubes/{tube}/jobs answers 501 unsupported")
def test_list_jobs_in_the_order_they_will_be_served(client: delayq.Client, tube: str) -> None:
    low = client.put(tube, "low", priority=900)
    high = client.put(tube, "high", priority=1)
    late = client.put(tube, "late", delay="2h")
    soon = client.put(tube, "soon", delay="1h")
    ready = client.list_jobs(tube)
    assert [j.id for j in ready.jobs] == [high.id, low.id] and ready.complete
    assert all(j.body is None for j in ready.jobs)
    assert [j.id for j in client.list_jobs(tube, "delayed").jobs] == [soon.id, late.id]
    assert [j.id for j in client.list_jobs(tube, "delayed", limit=1).jobs] == [soon.id]
    assert client.list_jobs(tube, "buried").jobs == []
    with pytest.raises(delayq.BadRequest):
        client.list_jobs(tube, "sleeping")
    with pytest.raises(delayq.NotFound):
        client.list_jobs(tube + "-none")


@local_only("the due counts answer 501 unsupported")
def test_due_counts_between_edges(client: delayq.Client, tube: str) -> None:
    client.put(tube, "a", delay="10m")
    client.put(tube, "b", delay="3h")
    client.put(tube, "c", delay="3h")
    counts = client.due_counts(tube, edges=[timedelta(0), timedelta(hours=1), "1d"])
    assert counts.tube == tube and counts.delayed == 3
    assert counts.resolution == timedelta(minutes=1)
    assert [b.jobs for b in counts.buckets] == [0, 1, 2, 0]
    assert counts.buckets[0].start is None and counts.buckets[-1].end is None
    start = datetime.now(timezone.utc)
    by_time = client.due_counts(tube, edges=[start + timedelta(hours=2), start + timedelta(hours=4)])
    assert [b.jobs for b in by_time.buckets] == [1, 2, 0]
    everywhere = client.due_counts()
    assert everywhere.tube is None and everywhere.delayed >= 3 and len(everywhere.buckets) == 6
    with pytest.raises(TypeError):
        client.due_counts(tube, edges=[timedelta(0), start])
    with pytest.raises(delayq.NotFound):
        client.due_counts(tube + "-none")


@redis_only
def test_redis_mode_answers_unsupported_for_job_lists_and_due_counts(client: delayq.Client, tube: str) -> None:
    client.put(tube, "x", delay="1h")
    with pytest.raises(delayq.Unsupported) as error:
        client.list_jobs(tube)
    assert error.value.status == 501
    with pytest.raises(delayq.Unsupported):
        client.due_counts(tube)
    with pytest.raises(delayq.Unsupported):
        client.due_counts()


@local_only("a tube's oldest_ready_age_ms is always 0")
def test_oldest_ready_age_grows(client: delayq.Client, tube: str) -> None:
    client.put(tube, "x")
    time.sleep(1.1)
    assert client.tube_stats(tube).oldest_ready_age >= timedelta(seconds=1)

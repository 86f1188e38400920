"""OpenTelemetry trace propagation (delayq/tracing.py) against the real server, with a STAND-IN
for opentelemetry-api: Debian 12 packages no OpenTelemetry for Python, and this project takes
no pip dependencies, so there is no real one to test with. tests/otel_standin/opentelemetry has
the few names of the real API that tracing.py uses, in the real package's modules and with its
signatures (checked against open-telemetry/opentelemetry-python's opentelemetry-api), and a
tracer that records its spans as the SDK's InMemorySpanExporter would. The `otel` fixture puts
a copy of it on sys.path for one test and takes it off after; `no_otel` makes every import of
opentelemetry fail, whatever is installed.

Checked: a put sends the current span's traceparent and tracestate (and nothing without a valid
span, and an explicit traceparent wins); without OpenTelemetry puts and workers run as before;
a job's first attempt runs in a child span of the producer's, a retry in a trace of its own
linked to it.
"""

from __future__ import annotations

import shutil
import sys
import threading
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

import delayq
from conftest import gone, wait_for
from delayq import tracing

STANDIN = Path(__file__).resolve().parent / "otel_standin"
_OTEL_MODULES = ("opentelemetry", "opentelemetry.context", "opentelemetry.trace",
                 "opentelemetry.trace.propagation.tracecontext")


def _take_opentelemetry_modules() -> dict[str, ModuleType]:
    """Removes every opentelemetry module from sys.modules; answers them, to put back."""
    taken = {name: module for name, module in sys.modules.items()
             if name == "opentelemetry" or name.startswith("opentelemetry.")}
    for name in taken:
        del sys.modules[name]
    return taken


@pytest.fixture
def otel(tmp_path: Path) -> Iterator[Any]:
    """The stand-in's opentelemetry.trace, importable during the test only."""
    site = tmp_path / "site"
    shutil.copytree(STANDIN, site)
    saved = _take_opentelemetry_modules()
    sys.path.insert(0, str(site))
    tracing._api.cache_clear()
    try:
        import opentelemetry.trace

        yield opentelemetry.trace
    finally:
        sys.path.remove(str(site))
        _take_opentelemetry_modules()
        sys.modules.update(saved)
        tracing._api.cache_clear()


@pytest.fixture
def no_otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every import of opentelemetry fails (None in sys.modules), installed or not."""
    for name in _OTEL_MODULES:
        monkeypatch.setitem(sys.modules, name, None)
    tracing._api.cache_clear()
    yield
    tracing._api.cache_clear()


def finished(tube: str) -> list[Any]:
    from opentelemetry import _standin

    return [span for span in _standin.finished if span.name == f"delayq process {tube}"]


def traceparent_of(span_context: Any) -> str:
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-01"


def run_until_gone(client: delayq.Client, worker: delayq.Worker, job_id: int) -> None:
    worker.start()
    try:
        wait_for(lambda: gone(client, job_id), what="the job done and deleted")
    finally:
        worker.stop()
        assert worker.join(timedelta(seconds=5))


def test_a_put_sends_the_current_spans_trace_context(otel: Any, client: delayq.Client,
                                                      tube: str) -> None:
    with otel.get_tracer("tests").start_as_current_span("produce") as producer:
        job = client.put(tube, "x")
    assert job.traceparent == traceparent_of(producer.get_span_context())
    assert job.tracestate is None

    from opentelemetry import context

    remote = otel.SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True,
                              otel.TraceFlags(0),
                              otel.TraceState([("rojo", "00f067aa0ba902b7"), ("congo", "t61rcWkgMzE")]))
    token = context.attach(otel.set_span_in_context(otel.NonRecordingSpan(remote)))
    try:
        stated = client.put(tube, "y")
        # Over the server's 512 bytes: left out, and the put goes through.
        long_state = otel.TraceState([(f"k{i}", "v" * 200) for i in range(3)])
        token_long = context.attach(otel.set_span_in_context(otel.NonRecordingSpan(
            otel.SpanContext(remote.trace_id, remote.span_id, True, otel.TraceFlags(1), long_state))))
        try:
            too_long = client.put(tube, "z")
        finally:
            context.detach(token_long)
    finally:
        context.detach(token)
    assert stated.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    assert stated.tracestate == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
    assert too_long.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert too_long.tracestate is None


def test_an_explicit_traceparent_wins_and_no_span_sends_nothing(otel: Any, client: delayq.Client,
                                                                tube: str) -> None:
    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with otel.get_tracer("tests").start_as_current_span("produce"):
        assert client.put(tube, "x", traceparent=given).traceparent == given
    assert not otel.get_current_span().get_span_context().is_valid
    assert client.put(tube, "x").traceparent is None
    assert tracing._api() is not None, "the stand-in was found, so the test checked something"


def test_without_opentelemetry_puts_and_workers_run_as_before(no_otel: None, client: delayq.Client,
                                                              tube: str) -> None:
    job = client.put(tube, "x")
    assert job.traceparent is None and job.tracestate is None
    assert tracing._api() is None
    seen: list[int] = []
    worker = client.worker(tube, lambda reserved: seen.append(reserved.id),
                           wait=timedelta(milliseconds=500))
    run_until_gone(client, worker, job.id)
    assert seen == [job.id] and worker.handled == 1 and worker.failed == 0


def test_a_first_attempt_runs_in_a_child_span_of_the_producers(otel: Any, client: delayq.Client,
                                                               tube: str) -> None:
    with otel.get_tracer("tests").start_as_current_span("produce") as producer_span:
        job = client.put(tube, "x")
    producer = producer_span.get_span_context()
    seen: dict[str, Any] = {}

    def handler(reserved: delayq.Job) -> None:
        seen["current"] = otel.get_current_span().get_span_context()
        seen["next"] = client.put(f"{tube}-next", "y")  # from the handler: continues its span
        seen["thread"] = threading.current_thread().name

    worker = client.worker(tube, handler, wait=timedelta(milliseconds=500))
    run_until_gone(client, worker, job.id)

    [span] = finished(tube)
    assert span.kind == otel.SpanKind.CONSUMER
    assert span.context.trace_id == producer.trace_id
    assert span.parent is not None and span.parent.span_id == producer.span_id
    assert span.parent.is_remote
    assert span.links == []
    assert span.attributes == {
        "messaging.system": "delayq",
        "messaging.operation.type": "process",
        "messaging.destination.name": tube,
        "messaging.message.id": str(job.id),
    }
    assert span.status.status_code == otel.StatusCode.UNSET
    assert seen["current"] == span.context, "the handler ran inside the span"
    assert seen["thread"].startswith("delayq-worker-")
    assert seen["next"].traceparent == traceparent_of(span.context)


def test_a_retry_runs_in_a_trace_of_its_own_linked_to_the_producer(otel: Any, client: delayq.Client,
                                                                   tube: str) -> None:
    with otel.get_tracer("tests").start_as_current_span("produce") as producer_span:
        job = client.put(tube, "x")
    producer = producer_span.get_span_context()
    attempts: list[int] = []

    def handler(reserved: delayq.Job) -> None:
        attempts.append(reserved.counters.reserves)
        if len(attempts) == 1:
            raise RuntimeError("the mail server is down")

    worker = client.worker(tube, handler, wait=timedelta(milliseconds=500),
                           backoff_min=timedelta(0), backoff_max=timedelta(0))
    run_until_gone(client, worker, job.id)
    assert attempts == [1, 2]

    first, retry = finished(tube)
    assert first.context.trace_id == producer.trace_id
    assert first.parent is not None and first.parent.span_id == producer.span_id
    assert first.status.status_code == otel.StatusCode.ERROR
    assert first.status.description == "RuntimeError: the mail server is down"
    assert [name for name, _ in first.events] == ["exception"]

    assert retry.context.trace_id != producer.trace_id
    assert retry.parent is None
    assert [(link.context.trace_id, link.context.span_id) for link in retry.links] == \
        [(producer.trace_id, producer.span_id)]
    assert retry.status.status_code == otel.StatusCode.UNSET
    assert retry.kind == otel.SpanKind.CONSUMER

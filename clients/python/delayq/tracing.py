"""tracing.py — OpenTelemetry, when the application has opentelemetry-api: Client.put() sends
the caller's trace context, and Worker runs each handler in a span that continues the job's.

The API is imported on first need and the answer kept (never a dependency of this package):
without it, puts send no trace context and handlers run exactly as before.

    put() without traceparent/tracestate, a valid current span ─▶ that span's context is sent
    Worker, the job's 1st reservation ─▶ span "delayq process <tube>", child of job.traceparent
    Worker, a later reservation       ─▶ the same span in a trace of its own, linked to it

A retry starts a trace of its own because it belongs to no request of the producer's: retries
minutes or hours apart would otherwise stretch the producer's trace to their last one. Only W3C
Trace Context is written and read (the API's TraceContextTextMapPropagator), whatever
propagators the application set globally: it is what the server keeps. Client.jobs() starts no
span: its loop body is the caller's, who has Job.traceparent.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass
from typing import Any, Iterator

from ._version import __version__
from .models import Job

_MAX_TRACESTATE_BYTES = 512  # the server's limit (docs/http-api.md, the put's headers)


@dataclass(frozen=True, slots=True)
class _Api:
    """The parts of opentelemetry-api used here (typed Any: it is not a dependency)."""

    trace: Any  # opentelemetry.trace
    context: Any  # opentelemetry.context
    w3c: Any  # an opentelemetry.trace.propagation.tracecontext.TraceContextTextMapPropagator


@functools.cache
def _api() -> _Api | None:
    """opentelemetry-api, or None when it cannot be imported; asked once per process."""
    try:
        trace = importlib.import_module("opentelemetry.trace")
        context = importlib.import_module("opentelemetry.context")
        tracecontext = importlib.import_module("opentelemetry.trace.propagation.tracecontext")
    except ImportError:
        return None
    return _Api(trace, context, tracecontext.TraceContextTextMapPropagator())


def caller_trace_headers() -> dict[str, str]:
    """The current span's context as a put's headers; {} without the API or a valid span."""
    api = _api()
    if api is None or not api.trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    api.w3c.inject(carrier)
    headers = {"traceparent": carrier["traceparent"]} if "traceparent" in carrier else {}
    # A tracestate the server would refuse is left out rather than failing the put.
    state = carrier.get("tracestate")
    if headers and state and len(state) <= _MAX_TRACESTATE_BYTES and state.isascii() \
            and state.isprintable():
        headers["tracestate"] = state
    return headers


@contextlib.contextmanager
def processing(job: Job) -> Iterator[None]:
    """Runs the `with` body in a span continuing the job's trace, when the API is there (see
    the module's comment); the span records an exception and ends when the body does."""
    api = _api()
    if api is None:
        yield
        return
    empty = api.context.Context()
    carrier = {name: value for name, value in
               (("traceparent", job.traceparent), ("tracestate", job.tracestate)) if value}
    stored_context = api.w3c.extract(carrier, context=empty)
    stored = api.trace.get_current_span(stored_context).get_span_context()
    child = stored.is_valid and job.counters.reserves <= 1
    links = [api.trace.Link(stored)] if stored.is_valid and not child else []
    tracer = api.trace.get_tracer("delayq", __version__)
    with tracer.start_as_current_span(
            f"delayq process {job.tube}",
            context=stored_context if child else empty,
            kind=api.trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "delayq",
                "messaging.operation.type": "process",
                "messaging.destination.name": job.tube,
                "messaging.message.id": str(job.id),
            },
            links=links):
        yield

"""Stand-in of opentelemetry.trace: the real module's names that delayq/tracing.py and its test
use, and a tracer that records its spans (in opentelemetry._standin.finished) as the SDK's
BasicTracerProvider with an InMemorySpanExporter would: a span's parent is the span current in
the `context` given (else the current context), a span without a valid parent starts a new
trace, and an exception leaving start_as_current_span is recorded and sets the status to
ERROR, as the SDK's defaults (record_exception, set_status_on_exception) do."""

from __future__ import annotations

import contextlib
import enum
import random
from typing import Any, Iterator, Mapping, Sequence

from opentelemetry import _standin
from opentelemetry.context import Context, attach, detach
from opentelemetry.trace.propagation import get_current_span, set_span_in_context
from opentelemetry.trace.span import (
    INVALID_SPAN,
    INVALID_SPAN_CONTEXT,
    NonRecordingSpan,
    Span,
    SpanContext,
    TraceFlags,
    TraceState,
    format_span_id,
    format_trace_id,
)
from opentelemetry.trace.status import Status, StatusCode

__all__ = [
    "INVALID_SPAN", "INVALID_SPAN_CONTEXT", "Link", "NonRecordingSpan", "Span", "SpanContext",
    "SpanKind", "Status", "StatusCode", "TraceFlags", "TraceState", "Tracer", "format_span_id",
    "format_trace_id", "get_current_span", "get_tracer", "set_span_in_context",
]


class SpanKind(enum.Enum):
    INTERNAL = 0
    SERVER = 1
    CLIENT = 2
    PRODUCER = 3
    CONSUMER = 4


class Link:
    def __init__(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        self.context = context
        self.attributes = attributes


class RecordedSpan(Span):
    """Not in the real API: what the stand-in tracer makes (the SDK's ReadableSpan's fields)."""

    def __init__(self, name: str, context: SpanContext, parent: SpanContext | None,
                 kind: SpanKind, attributes: Mapping[str, Any], links: Sequence[Link]) -> None:
        self.name, self.context, self.parent, self.kind = name, context, parent, kind
        self.attributes = dict(attributes)
        self.links = list(links)
        self.status = Status()
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.ended = False

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return not self.ended

    def set_status(self, status: Any, description: str | None = None) -> None:
        self.status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(self, exception: BaseException,
                         attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        self.events.append(("exception", {"exception.type": type(exception).__name__,
                                          "exception.message": str(exception)}))

    def end(self, end_time: int | None = None) -> None:
        if not self.ended:
            self.ended = True
            _standin.finished.append(self)


class Tracer:
    def __init__(self, name: str, version: str | None) -> None:
        self.name, self.version = name, version

    def start_span(self, name: str, context: Context | None = None,
                   kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any] | None = None,
                   links: Sequence[Link] | None = None, start_time: int | None = None,
                   record_exception: bool = True,
                   set_status_on_exception: bool = True) -> RecordedSpan:
        parent = get_current_span(context).get_span_context()
        trace_id = parent.trace_id if parent.is_valid else random.getrandbits(128) or 1
        span_context = SpanContext(trace_id, random.getrandbits(64) or 1, False,
                                   TraceFlags(TraceFlags.SAMPLED))
        return RecordedSpan(name, span_context, parent if parent.is_valid else None, kind,
                            attributes or {}, links or [])

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, context: Context | None = None,
                              kind: SpanKind = SpanKind.INTERNAL,
                              attributes: Mapping[str, Any] | None = None,
                              links: Sequence[Link] | None = None,
                              start_time: int | None = None, record_exception: bool = True,
                              set_status_on_exception: bool = True,
                              end_on_exit: bool = True) -> Iterator[RecordedSpan]:
        span = self.start_span(name, context, kind, attributes, links, start_time,
                               record_exception, set_status_on_exception)
        token = attach(set_span_in_context(span))
        try:
            yield span
        except BaseException as error:
            if record_exception:
                span.record_exception(error, escaped=True)
            if set_status_on_exception:
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            raise
        finally:
            detach(token)
            if end_on_exit:
                span.end()


def get_tracer(instrumenting_module_name: str, instrumenting_library_version: str | None = None,
               tracer_provider: Any = None, schema_url: str | None = None,
               attributes: Any = None) -> Tracer:
    return Tracer(instrumenting_module_name, instrumenting_library_version)

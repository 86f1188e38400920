"""Stand-in of opentelemetry.trace.span: SpanContext and its parts, Span, NonRecordingSpan."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence


class TraceFlags(int):
    DEFAULT = 0x00
    SAMPLED = 0x01

    @property
    def sampled(self) -> bool:
        return bool(self & TraceFlags.SAMPLED)


class TraceState(Mapping[str, str]):
    """Vendor entries in order (the real one also checks keys, values and their number)."""

    def __init__(self, entries: Sequence[tuple[str, str]] | None = None) -> None:
        self._dict = dict(entries or [])

    def __getitem__(self, key: str) -> str:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def to_header(self) -> str:
        return ",".join(key + "=" + value for key, value in self._dict.items())

    @classmethod
    def from_header(cls, header_list: list[str]) -> TraceState:
        pairs = [member.strip().split("=", 1) for header in header_list
                 for member in header.split(",") if member.strip()]
        return cls([(key, value) for key, value in pairs])


DEFAULT_TRACE_OPTIONS = TraceFlags(TraceFlags.DEFAULT)
DEFAULT_TRACE_STATE = TraceState()
INVALID_SPAN_ID = 0
INVALID_TRACE_ID = 0


class SpanContext(tuple[int, int, bool, TraceFlags, TraceState, bool]):
    """As the real one: an immutable tuple, valid when both ids are non-zero."""

    def __new__(cls, trace_id: int, span_id: int, is_remote: bool,
                trace_flags: TraceFlags | None = DEFAULT_TRACE_OPTIONS,
                trace_state: TraceState | None = DEFAULT_TRACE_STATE) -> SpanContext:
        is_valid = 0 < trace_id < 2**128 and 0 < span_id < 2**64
        return tuple.__new__(cls, (trace_id, span_id, is_remote,
                                   trace_flags if trace_flags is not None else DEFAULT_TRACE_OPTIONS,
                                   trace_state if trace_state is not None else DEFAULT_TRACE_STATE,
                                   is_valid))

    @property
    def trace_id(self) -> int:
        return self[0]

    @property
    def span_id(self) -> int:
        return self[1]

    @property
    def is_remote(self) -> bool:
        return self[2]

    @property
    def trace_flags(self) -> TraceFlags:
        return self[3]

    @property
    def trace_state(self) -> TraceState:
        return self[4]

    @property
    def is_valid(self) -> bool:
        return self[5]


INVALID_SPAN_CONTEXT = SpanContext(INVALID_TRACE_ID, INVALID_SPAN_ID, False)


class Span:
    """The interface; the stand-in tracer's spans are trace.RecordedSpan."""

    def get_span_context(self) -> SpanContext:
        raise NotImplementedError

    def is_recording(self) -> bool:
        return False

    def set_status(self, status: Any, description: str | None = None) -> None:
        pass

    def record_exception(self, exception: BaseException,
                         attributes: Mapping[str, Any] | None = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        pass

    def end(self, end_time: int | None = None) -> None:
        pass


class NonRecordingSpan(Span):
    def __init__(self, context: SpanContext) -> None:
        self._context = context

    def get_span_context(self) -> SpanContext:
        return self._context


INVALID_SPAN = NonRecordingSpan(INVALID_SPAN_CONTEXT)


def format_trace_id(trace_id: int) -> str:
    return format(trace_id, "032x")


def format_span_id(span_id: int) -> str:
    return format(span_id, "016x")

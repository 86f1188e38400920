"""Stand-in of opentelemetry.trace.propagation.tracecontext: W3C traceparent and tracestate."""

from __future__ import annotations

import re
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context

_TRACEPARENT = re.compile(r"^[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*$")


class TraceContextTextMapPropagator:
    """Carriers are dicts here (the real one takes any carrier through its getter and setter)."""

    def extract(self, carrier: dict[str, Any], context: Context | None = None,
                getter: Any = None) -> Context:
        if context is None:
            context = Context()
        match = _TRACEPARENT.search(carrier.get("traceparent") or "")
        if not match or match.group(1) == "ff" or (match.group(1) == "00" and match.group(5)):
            return context
        if int(match.group(2), 16) == 0 or int(match.group(3), 16) == 0:
            return context
        state = carrier.get("tracestate")
        span_context = trace.SpanContext(
            trace_id=int(match.group(2), 16), span_id=int(match.group(3), 16), is_remote=True,
            trace_flags=trace.TraceFlags(int(match.group(4), 16)),
            trace_state=None if state is None else trace.TraceState.from_header([state]))
        return trace.set_span_in_context(trace.NonRecordingSpan(span_context), context)

    def inject(self, carrier: dict[str, str], context: Context | None = None,
               setter: Any = None) -> None:
        span_context = trace.get_current_span(context).get_span_context()
        if span_context == trace.INVALID_SPAN_CONTEXT:
            return
        carrier["traceparent"] = (f"00-{trace.format_trace_id(span_context.trace_id)}-"
                                  f"{trace.format_span_id(span_context.span_id)}-"
                                  f"{span_context.trace_flags:02x}")
        if span_context.trace_state:
            carrier["tracestate"] = span_context.trace_state.to_header()

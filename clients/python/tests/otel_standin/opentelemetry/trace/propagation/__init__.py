"""Stand-in of opentelemetry.trace.propagation: the current span, kept in a Context."""

from __future__ import annotations

from opentelemetry.context import Context, create_key, get_value, set_value
from opentelemetry.trace.span import INVALID_SPAN, Span

_SPAN_KEY = create_key("current-span")


def set_span_in_context(span: Span, context: Context | None = None) -> Context:
    return set_value(_SPAN_KEY, span, context=context)


def get_current_span(context: Context | None = None) -> Span:
    span = get_value(_SPAN_KEY, context=context)
    if span is None or not isinstance(span, Span):
        return INVALID_SPAN
    return span

"""Not in the real API: what the stand-in tracer records, as the SDK's InMemorySpanExporter
would (spans, once ended, in the order they ended)."""

from __future__ import annotations

from typing import Any

finished: list[Any] = []

"""Stand-in of opentelemetry.trace.status."""

from __future__ import annotations

import enum


class StatusCode(enum.Enum):
    UNSET = 0
    OK = 1
    ERROR = 2


class Status:
    def __init__(self, status_code: StatusCode = StatusCode.UNSET,
                 description: str | None = None) -> None:
        self.status_code = status_code
        self.description = description

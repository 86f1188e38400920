"""errors.py — the exceptions the client raises, one class per error code of the HTTP API.

Every error the server answers is {"error": {"code": ..., "message": ...}}; `code` is stable and
chooses the class (ERRORS_BY_CODE below, the one table), `message` is for people. Two classes
are the client's own: TransportError (no answer: the connection failed or timed out) and
UnexpectedResponse (an answer this client cannot read). All derive from DelayqError, so one
`except delayq.DelayqError` catches everything the client raises about the server.
"""

from __future__ import annotations

from typing import Any


class DelayqError(Exception):
    """Base of every error the client raises about the server or the way to it.

    `status` is the HTTP status (0 when no answer came), `code` the server's error code
    ("not_found", ...), `message` its explanation, `retry_after` the seconds of a Retry-After
    header (503 answers), and `details` the error object's other fields (a `starting` server's
    `progress`).
    """

    code: str = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str | None = None,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        self.retry_after = retry_after
        self.details: dict[str, Any] = details or {}

    def __str__(self) -> str:
        if self.status:
            return f"{self.status} {self.code}: {self.message}"
        return f"{self.code}: {self.message}"


class BadRequest(DelayqError):
    """400 bad_request: a field unknown, missing, of the wrong type or out of range."""

    code = "bad_request"


class Unauthorized(DelayqError):
    """401 unauthorized: the server wants a bearer token (--http-token-file) and got none or a
    wrong one."""

    code = "unauthorized"


class Forbidden(DelayqError):
    """403 forbidden: no tokens are set and the request looks like a web page's (an Origin of
    another site, or a domain-name Host on a loopback listener)."""

    code = "forbidden"


class NotFound(DelayqError):
    """404 not_found: no such job, key holder, tube, webhook or schedule."""

    code = "not_found"


class NoRoute(DelayqError):
    """404 no_route: no endpoint has this path (a server older than this client?)."""

    code = "no_route"


class MethodNotAllowed(DelayqError):
    """405 method_not_allowed: the path exists, not with this method."""

    code = "method_not_allowed"


class Conflict(DelayqError):
    """409 conflict: the job is in a state the request cannot act on, a `url` was given for a
    tube without a webhook, a backup is already running, or (Redis mode) a tube's first flow
    control settings came after its first job."""

    code = "conflict"


class TooLarge(DelayqError):
    """413 too_large: the job body is over the server's maximum job size (-z), or the request
    body over its limit."""

    code = "too_large"


class HeadersTooLarge(DelayqError):
    """431 headers_too_large: the request line and headers are over 8192 bytes."""

    code = "headers_too_large"


class Internal(DelayqError):
    """500 internal: the server could not read a job back from its store (or, in Redis mode,
    Redis did not answer in time)."""

    code = "internal"


class Unsupported(DelayqError):
    """501 unsupported: the route is not served in this mode (backups, job lists and due counts in
    Redis mode)."""

    code = "unsupported"


class ServiceUnavailable(DelayqError):
    """A 503: the server cannot do this now. Its subclasses say why; `retry_after` may say
    when to try again."""

    code = "service_unavailable"


class Draining(ServiceUnavailable):
    """503 draining: the server is in drain mode (SIGUSR1) and takes no new jobs; everything
    else is served."""

    code = "draining"


class Unavailable(ServiceUnavailable):
    """503 unavailable (readiness only): the store has failed, or Redis has not answered."""

    code = "unavailable"


class Stopping(ServiceUnavailable):
    """503 stopping: a long-poll reserve was waiting when the server was told to stop; no job
    was taken. Retry (on another node in Redis mode)."""

    code = "stopping"


class Starting(ServiceUnavailable):
    """503 starting: the server is loading its jobs; `details["progress"]` says how far."""

    code = "starting"


class Limit(ServiceUnavailable):
    """503 limit: job ids are used up, too many jobs are held at once, or too many
    connections are open."""

    code = "limit"


class NoSpace(DelayqError):
    """507 no_space (503 from readiness): the data directory's disk is below --min-free-disk,
    or Redis is over its maxmemory; puts are refused until there is room."""

    code = "no_space"


class TransportError(DelayqError):
    """No answer: the connection could not be made, broke, or timed out. The request may or
    may not have been carried out (a put with a key can be retried safely)."""

    code = "transport"


class UnexpectedResponse(DelayqError):
    """An answer this client cannot read: not JSON, or without a field it needs."""

    code = "unexpected_response"


# The one table from the server's codes to the classes.
ERRORS_BY_CODE: dict[str, type[DelayqError]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        NoRoute,
        MethodNotAllowed,
        Conflict,
        TooLarge,
        HeadersTooLarge,
        Internal,
        Unsupported,
        Draining,
        Unavailable,
        Stopping,
        Starting,
        Limit,
        NoSpace,
    )
}

# For an answer whose code this client does not know (a newer server), the class its status
# implies.
ERRORS_BY_STATUS: dict[int, type[DelayqError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: TooLarge,
    431: HeadersTooLarge,
    500: Internal,
    501: Unsupported,
    503: ServiceUnavailable,
    507: NoSpace,
}


def error_for(
    status: int,
    code: str | None,
    message: str,
    *,
    retry_after: float | None = None,
    details: dict[str, Any] | None = None,
) -> DelayqError:
    """The exception for an error answer: by its code, else by its status, else DelayqError.
    An unknown code is kept in the exception's `code`."""
    cls = ERRORS_BY_CODE.get(code or "") or ERRORS_BY_STATUS.get(status) or DelayqError
    return cls(message, status=status, code=code, retry_after=retry_after, details=details)

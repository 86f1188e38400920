"""webhooks.py — checking the Delayq-Signature of push deliveries (docs/webhooks.md).

With `secrets` on a tube's webhook, every request delayqd POSTs carries

    Delayq-Signature: t=<unix ms>,v1=<hex>[,v1=<hex>]

where each v1 is the lowercase hex HMAC-SHA256, keyed with one secret (two while rotating), of
the bytes `<t>.<raw body>`. A request is genuine when `t` is within `tolerance` of the
receiver's clock (this bounds replays) and some v1 equals the HMAC under some accepted secret,
compared in constant time. Parts other than `t` and `v1` are ignored, so a later scheme can be
added beside v1.

verify_signature() is the check; WsgiVerifier and AsgiVerifier wrap an application and answer
401 to a request that fails it, before the application sees it, passing the others on with
their body intact. Both read at most `max_body` bytes (a request over it gets 413).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import time
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence, Union

from .times import unix_ms

HEADER = "Delayq-Signature"
DEFAULT_TOLERANCE = timedelta(minutes=5)
DEFAULT_MAX_BODY = 16 * 1024 * 1024

Secret = Union[str, bytes]
Secrets = Union[Secret, Sequence[Secret]]
Headers = Union[str, Mapping[str, str], Iterable[tuple[str, str]]]


def _secret_list(secrets: Secrets) -> list[bytes]:
    items: Sequence[Secret] = [secrets] if isinstance(secrets, (str, bytes)) else secrets
    keys = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in items]
    if not keys or any(not key for key in keys):
        raise ValueError("secrets: one or more non-empty secrets")
    return keys


def _header_value(headers: Headers) -> str | None:
    """The Delayq-Signature value of `headers` (names ignore case), or `headers` itself when
    it is the value."""
    if isinstance(headers, str):
        return headers
    # A Mapping, or a header object with items() that is not one (http.server's
    # email.message.Message), or pairs.
    items = getattr(headers, "items", None)
    pairs = items() if isinstance(headers, Mapping) or callable(items) else headers
    wanted = HEADER.lower()
    for name, value in pairs:
        if name.lower() == wanted:
            return value
    return None


def signature_problem(
    secrets: Secrets,
    headers: Headers,
    body: bytes,
    *,
    now: datetime | None = None,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> str | None:
    """Why the request fails the check ("no Delayq-Signature header", "stale timestamp",
    ...), or None when it is genuine. verify_signature() is the same as a bool."""
    keys = _secret_list(secrets)
    value = _header_value(headers)
    if value is None:
        return f"no {HEADER} header"
    stamp: str | None = None
    given: list[bytes] = []
    for part in value.split(","):
        name, _, item = part.strip().partition("=")
        if name == "t":
            stamp = item
        elif name == "v1":
            given.append(item.encode("ascii", errors="replace"))
    # At most 16 digits, as the TypeScript client: a longer t is no time this clock could be
    # near, and int() of thousands of digits raises.
    if stamp is None or not stamp.isascii() or not stamp.isdigit() or len(stamp) > 16:
        return f"{HEADER} has no t=<unix ms>"
    if not given:
        return f"{HEADER} has no v1 signature"
    now_ms = unix_ms(now, "now") if now is not None else time.time_ns() // 1_000_000
    if abs(now_ms - int(stamp)) > tolerance / timedelta(milliseconds=1):
        return f"stale timestamp: t={stamp} is more than {tolerance} from this clock"
    message = stamp.encode("ascii") + b"." + bytes(body)
    for key in keys:
        expected = hmac.new(key, message, hashlib.sha256).hexdigest().encode("ascii")
        # Every candidate is compared, in constant time each.
        if any([hmac.compare_digest(expected, candidate) for candidate in given]):
            return None
    return "no v1 signature matches the body under the accepted secrets"


def verify_signature(
    secrets: Secrets,
    headers: Headers,
    body: bytes,
    now: datetime | None = None,
    tolerance: timedelta = DEFAULT_TOLERANCE,
) -> bool:
    """True if `headers` (a mapping or pairs of the request's headers, or the
    Delayq-Signature value alone) sign the raw request `body` with one of `secrets` (one, or
    a list of the secrets accepted, e.g. [new, old] while rotating), with a timestamp within
    `tolerance` (default 5 min) of `now` (default the system clock, or an aware datetime)."""
    return signature_problem(secrets, headers, body, now=now, tolerance=tolerance) is None


def _refusal(reason: str) -> bytes:
    return json.dumps({"error": {"code": "bad_signature", "message": reason}}).encode() + b"\n"


# --- WSGI -----------------------------------------------------------------------------------

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WsgiVerifier:
    """WSGI middleware: `WsgiVerifier(app, secrets)` answers 401 to a request whose
    Delayq-Signature fails verify_signature(), and passes the others to `app` with
    wsgi.input holding the same body and environ["delayq.signature_verified"] True."""

    def __init__(
        self,
        app: WsgiApp,
        secrets: Secrets,
        *,
        tolerance: timedelta = DEFAULT_TOLERANCE,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self._secrets = _secret_list(secrets)
        self._tolerance = tolerance
        self._max_body = max_body

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > self._max_body:
            return self._answer(start_response, "413 Content Too Large", "bad or too large body")
        body = environ["wsgi.input"].read(length) if length else b""
        header = environ.get("HTTP_DELAYQ_SIGNATURE")
        problem = signature_problem(self._secrets, header if header is not None else [], body,
                                    tolerance=self._tolerance)
        if problem is not None:
            return self._answer(start_response, "401 Unauthorized", problem)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["delayq.signature_verified"] = True
        return self.app(environ, start_response)

    @staticmethod
    def _answer(start_response: Callable[..., Any], status: str, reason: str) -> list[bytes]:
        payload = _refusal(reason)
        start_response(status, [("Content-Type", "application/json"),
                                ("Content-Length", str(len(payload)))])
        return [payload]


# --- ASGI -----------------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class AsgiVerifier:
    """ASGI middleware: `AsgiVerifier(app, secrets)` answers 401 to an HTTP request whose
    Delayq-Signature fails verify_signature(), and passes the others to `app`, which then
    receives the same body; scope["delayq.signature_verified"] is True for them. Other
    scopes (lifespan, websocket) pass through unchecked."""

    def __init__(
        self,
        app: AsgiApp,
        secrets: Secrets,
        *,
        tolerance: timedelta = DEFAULT_TOLERANCE,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self._secrets = _secret_list(secrets)
        self._tolerance = tolerance
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message.get("type") == "http.disconnect":
                return
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self._max_body:
                await self._answer(send, 413, "body too large")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        headers = [(bytes(name).decode("latin-1"), bytes(value).decode("latin-1"))
                   for name, value in scope.get("headers", [])]
        problem = signature_problem(self._secrets, headers, body, tolerance=self._tolerance)
        if problem is not None:
            await self._answer(send, 401, problem)
            return
        scope = dict(scope, **{"delayq.signature_verified": True})
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _answer(send: Send, status: int, reason: str) -> None:
        payload = _refusal(reason)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

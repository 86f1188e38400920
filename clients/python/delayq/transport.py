"""transport.py — HTTP/1.1 requests to delayqd over kept-alive connections, one per thread.

The Client calls `request()` from any thread; each thread gets a connection of its own (the
server handles one connection's requests in order, so sharing one would serialise a worker's
threads behind each other's long-polls). Every wait is bounded: connecting and each read take
at most `timeout` seconds, and a long-poll reserve adds its own wait to that.

The server closes a connection that has been idle for 60 s. A connection idle for more than
`_IDLE_REUSE_S` is therefore replaced before use rather than risk being closed under the
request; and a request that finds its kept-alive connection closed before any answer is sent
once more on a new one, but only if it is idempotent (GET, HEAD, PUT, DELETE): a POST or PATCH
that may have been carried out is never repeated behind the caller's back.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlsplit

from ._version import __version__
from .errors import DelayqError, TransportError, UnexpectedResponse, error_for

_IDLE_REUSE_S = 30.0
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: http.client.HTTPMessage
    data: Any  # the parsed JSON, the text of a non-JSON answer, or None for a 204


class _Slot:
    """One thread's connection and when it was last used."""

    def __init__(self) -> None:
        self.conn: http.client.HTTPConnection | None = None
        self.used_at = 0.0
        self.cut = False  # half-closed by shutdown_sending(): the next request opens a new one


def segment(value: str) -> str:
    """A path parameter, percent-encoded as one segment (`/` becomes %2F, a space %20). An
    empty one (a path of no route) or one that is not text (a lone surrogate) is a ValueError,
    as the TypeScript client's TypeError; one that is no str, a TypeError."""
    if not isinstance(value, str):
        raise TypeError(f"a tube, key, group or schedule name is a str, not {type(value).__name__}")
    if not value:
        raise ValueError("a tube, key, group or schedule name is empty")
    try:
        return quote(value, safe="")
    except UnicodeEncodeError as error:
        raise ValueError(f"a name that is not UTF-8 text: {value!r}") from error


class Transport:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        timeout: float,
        ca_file: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"base_url must be http://HOST[:PORT] or https://..., not {base_url!r}")
        self.base_url = base_url
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._timeout = timeout
        self._context: ssl.SSLContext | None = None
        if self._https:
            # The system's authorities, and those of ca_file beside them (a private CA, a
            # self-signed certificate).
            self._context = ssl.create_default_context()
            if ca_file:
                self._context.load_verify_locations(cafile=ca_file)
        self._headers = {"User-Agent": f"delayq-python/{__version__}", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._headers.update(headers or {})
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()
        self._slots: dict[int, tuple[threading.Thread, _Slot]] = {}

    # -- connections ---------------------------------------------------------------------

    def _slot(self) -> _Slot:
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            slot = _Slot()
            self._local.slot = slot
            with self._lock:
                # Threads that have ended leave their connections: close those now.
                for ident, (thread, old) in list(self._slots.items()):
                    if not thread.is_alive() and old.conn is not None:
                        self._open.discard(old.conn)
                        old.conn.close()
                    if not thread.is_alive():
                        del self._slots[ident]
                self._slots[threading.get_ident()] = (threading.current_thread(), slot)
        return slot

    def shutdown_sending(self, thread: threading.Thread) -> None:
        """Half-closes `thread`'s connection: a long-poll reserve waiting on it ends at once
        and takes no job (the server sees its client go), while an answer already on its way
        can still be read. The request then fails with TransportError (or answers its job)."""
        with self._lock:
            entry = self._slots.get(thread.ident or 0)
            slot = entry[1] if entry is not None and entry[0] is thread else None
            sock = slot.conn.sock if slot is not None and slot.conn is not None else None
            if slot is not None:
                slot.cut = True
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # closed already

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._context)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        with self._lock:
            self._open.add(conn)
        return conn

    def _drop(self, slot: _Slot) -> None:
        if slot.conn is not None:
            with self._lock:
                self._open.discard(slot.conn)
            slot.conn.close()
            slot.conn = None

    def close(self) -> None:
        """Closes every thread's connection; a later request opens a new one."""
        with self._lock:
            conns, self._open = list(self._open), set()
        for conn in conns:
            conn.close()

    # -- requests ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
        extra_wait: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Sends one request and answers its status, headers and JSON; raises the DelayqError
        of an error answer, or TransportError when no answer came. `extra_wait` lengthens the
        read timeout (a long-poll's own wait); `headers` are this request's own."""
        target = self._prefix + path
        if query:
            target += "?" + "&".join(f"{quote(k, safe='')}={quote(v, safe='')}"
                                     for k, v in query.items())
        # NaN and infinities are not JSON: refused here (ValueError), where the server would
        # answer only "the body is not JSON".
        payload = (None if body is None
                   else json.dumps(body, separators=(",", ":"), allow_nan=False).encode())
        if payload is None and method in ("POST", "PUT", "PATCH"):
            payload = b""
        headers = {**self._headers, **(headers or {})}
        if payload:
            headers["Content-Type"] = "application/json"
        timeout = self._timeout + extra_wait
        slot = self._slot()
        if slot.cut or (slot.conn is not None and time.monotonic() - slot.used_at > _IDLE_REUSE_S):
            slot.cut = False
            self._drop(slot)
        for attempt in (1, 2):
            reused = slot.conn is not None
            if slot.conn is None:
                slot.conn = self._connect(timeout)
            conn = slot.conn
            try:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, target, body=payload, headers=headers)
                answer = conn.getresponse()
                raw = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
                self._drop(slot)
                if reused and attempt == 1 and method in _IDEMPOTENT:
                    continue
                raise TransportError(f"{method} {target}: connection closed: {error}") from error
            except (socket.timeout, TimeoutError) as error:
                self._drop(slot)
                raise TransportError(f"{method} {target}: no answer within {timeout:g} s") from error
            except (OSError, http.client.HTTPException) as error:
                self._drop(slot)
                raise TransportError(f"{method} {target}: {error}") from error
            slot.used_at = time.monotonic()
            if answer.will_close:
                self._drop(slot)
            return self._response(method, target, answer, raw)
        raise AssertionError("unreachable")  # pragma: no cover

    def _response(
        self, method: str, target: str, answer: http.client.HTTPResponse, raw: bytes
    ) -> Response:
        data: Any = None
        content_type = answer.headers.get("Content-Type", "")
        if raw and content_type.startswith("application/json"):
            try:
                data = json.loads(raw)
            except ValueError as error:
                raise UnexpectedResponse(
                    f"{method} {target}: {answer.status} with a body that is not JSON",
                    status=answer.status) from error
        elif raw:
            data = raw.decode("utf-8", errors="replace")
        if answer.status >= 400:
            raise self._error(method, target, answer, data)
        return Response(answer.status, answer.headers, data)

    @staticmethod
    def _error(method: str, target: str, answer: http.client.HTTPResponse,
               data: Any) -> DelayqError:
        retry_after: float | None = None
        header = answer.headers.get("Retry-After")
        if header is not None and header.strip().isdigit():
            retry_after = float(header.strip())
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            # Not delayqd's answer (a proxy's page, a wrong base URL): its status says nothing of
            # a job, so a 404 here is no NotFound. Its status is kept (a worker retries a 502,
            # 503 or 504).
            return UnexpectedResponse(
                f"{method} {target}: HTTP {answer.status} {answer.reason} without delayqd's "
                "error object: is it delayqd?", status=answer.status, retry_after=retry_after)
        message = error["message"] if isinstance(error.get("message"), str) else \
            f"{method} {target}: HTTP {answer.status} {answer.reason}"
        details = {k: v for k, v in data.items() if k != "error"}
        details.update({k: v for k, v in error.items() if k not in ("code", "message")})
        return error_for(answer.status, error["code"], message, retry_after=retry_after,
                         details=details)

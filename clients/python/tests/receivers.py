"""receivers.py — HTTP receivers on free loopback ports for delayqd's push deliveries: one that
records every request (headers and raw body) and answers a fixed status, and one that serves
a WSGI application (wsgiref)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

Request = tuple[dict[str, str], bytes]


class Recorder:
    """Records each POST and answers `status`; stop() shuts it down."""

    def __init__(self, status: int = 204) -> None:
        self.requests: list[Request] = []
        self.status = status
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                recorder.requests.append(({k: v for k, v in self.headers.items()}, body))
                self.send_response(recorder.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def first(self, timeout_s: float = 10.0) -> Request:
        """The first request recorded, waiting for it at most `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not self.requests:
            if time.monotonic() > deadline:
                raise AssertionError(f"no request within {timeout_s} s")
            time.sleep(0.05)
        return self.requests[0]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class WsgiHost:
    """Serves a WSGI application on a free loopback port."""

    def __init__(self, app: Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]) -> None:
        self._server: WSGIServer = make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
        self.port = self._server.server_port
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
